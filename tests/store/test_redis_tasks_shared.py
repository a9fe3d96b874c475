"""Tasks on Redis shared by several replicas at once: atomic per request.

What memory answers, Redis answers too (tests/store/test_redis_tasks.py); here
what only a shared store shows: three replicas (three stores, each polling on
threads and on its own event loop) touching one task at once count every poll
exactly once, and submitting at once admit exactly the cap.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import requests
from redis_server import RedisServer

from mockskill import Server, load_text
from mockskill.engine.store import Store, Submit, Submitted, TaskRecord, Touch
from mockskill.store import open_store

SKILL = "herd/report"
HOUR = 3_600_000


@pytest.fixture
def stores(redis_url: str) -> Iterator[list[Store]]:
    """Three stores (three replicas) on one empty Redis."""
    opened = [open_store(redis_url, replica=f"replica-{n}") for n in range(3)]
    yield opened
    for store in opened:
        store.close()


def at_once(work: list[threading.Thread]) -> None:
    for thread in work:
        thread.start()
    for thread in work:
        thread.join(30)


def test_polls_from_three_replicas_at_once_are_each_counted_once(stores: list[Store]) -> None:
    submitted = stores[0].answer(Submit("herd", SKILL, HOUR, 10))
    assert isinstance(submitted, Submitted)
    number = submitted.number
    assert number is not None
    poll = Touch("herd", number, "poll", HOUR, SKILL)
    counted: list[int] = []
    go = threading.Barrier(6)

    def blocking(store: Store) -> None:
        go.wait()
        for _ in range(40):
            record = store.answer(poll)
            assert isinstance(record, TaskRecord)
            counted.append(record.polls)

    def on_a_loop(store: Store) -> None:
        async def polls() -> list[int]:
            go.wait()
            records = await asyncio.gather(*(store.answer_async(poll) for _ in range(40)))
            return [r.polls for r in records if isinstance(r, TaskRecord)]

        counted.extend(asyncio.run(polls()))

    at_once(
        [threading.Thread(target=blocking, args=(s,)) for s in stores]
        + [threading.Thread(target=on_a_loop, args=(s,)) for s in stores]
    )

    assert sorted(counted) == list(range(1, 241))  # each poll its own number, none lost
    cancel = stores[2].answer(Touch("herd", number, "cancel", HOUR, SKILL))
    assert isinstance(cancel, TaskRecord)
    assert [(e.action, e.polls) for e in cancel.events] == [("cancel", 240)]


def test_submits_from_three_replicas_at_once_admit_exactly_the_cap(stores: list[Store]) -> None:
    numbers: list[int | None] = []
    go = threading.Barrier(3)

    def submitting(store: Store, session: str) -> None:
        go.wait()
        for _ in range(20):
            answer = store.answer(Submit(session, SKILL, HOUR, 25))
            assert isinstance(answer, Submitted)
            numbers.append(answer.number)

    at_once([threading.Thread(target=submitting, args=(s, f"s{n}")) for n, s in enumerate(stores)])

    admitted = sorted(n for n in numbers if n is not None)
    assert admitted == list(range(25))  # the cap, every number once
    assert numbers.count(None) == 35


TASKS = """\
skills:
  - id: report
    task:
      life:
        - {status: working, for: 1h}
        - {status: completed, json: {done: true}}
"""


def test_redis_gone_makes_a_poll_unavailable_not_lost_and_back_it_answers_again(
    own_redis: Callable[..., RedisServer],
) -> None:
    redis_server = own_redis()
    scenarios = load_text(TASKS, "tasks.yaml")
    with Server(scenarios, state=redis_server.url, shared_scenarios="memory", quiet=True) as server:
        submitted = requests.post(f"{server.url}/skills/report/invoke", json={}, timeout=10)
        assert submitted.status_code == 202
        location = submitted.headers["Location"]
        assert requests.get(location, timeout=10).json()["task"]["status"] == "working"
        redis_server.stop()
        try:
            gone = requests.get(location, timeout=10)
            assert gone.status_code == 503
            assert gone.json()["error"]["code"] == "MOCKSKILL_STATE_UNAVAILABLE"
            refused = requests.post(f"{server.url}/skills/report/invoke", json={}, timeout=10)
            assert refused.json()["error"]["code"] == "MOCKSKILL_STATE_UNAVAILABLE"
        finally:
            redis_server.start()  # empty: no persistence
        deadline = time.monotonic() + 5
        while (back := requests.get(location, timeout=10)).status_code == 503:
            assert time.monotonic() < deadline, back.json()
            time.sleep(0.1)
        # The task was in the Redis that went: its status URL says it is gone, in words.
        assert back.status_code == 404
        assert back.json()["error"]["code"] == "TASK_EXPIRED"
        again = requests.post(f"{server.url}/skills/report/invoke", json={}, timeout=10)
        assert again.status_code == 202
        assert requests.get(again.headers["Location"], timeout=10).status_code == 200
