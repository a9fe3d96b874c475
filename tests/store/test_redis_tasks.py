"""The Redis store keeps long-running tasks as the in-memory store does.

Each case is a script of calls (Submits, Touches, resets, pauses); it runs
against a fresh in-memory State and a fresh RedisStore on an empty Redis,
and the answers must be equal once the times are taken out (each store reads
its own clock): the numbers, the refusals at the cap, the skills, the polls,
the events (their action, polls and fits) and the tasks forgotten. The times
themselves are checked apart: on Redis they are Redis's clock, and an event's
time is its Touch's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from mockskill.engine.state import State
from mockskill.engine.store import (
    MAX_TASK_EVENTS,
    Claim,
    Store,
    Submit,
    Submitted,
    TaskRecord,
    Touch,
)
from mockskill.store import open_store
from mockskill.store.commands import Encoder, Keys, packed

LONG = 600_000
"""Milliseconds a task is kept when the case does not mean it to be forgotten."""


def submit(
    session: str = "s",
    skill: str = "sc/report",
    keep_ms: int = LONG,
    limit: int = 5,
    callback: str = "",
) -> Submit:
    return Submit(session, skill, keep_ms, limit, callback)


def touch(
    number: int = 0,
    action: str = "poll",
    session: str = "s",
    skill: str = "sc/report",
    keep_ms: int = 0,
    fits: tuple[int, ...] = (),
) -> Touch:
    return Touch(session, number, action, keep_ms, skill, fits)


def claim(key: str, number: int = 0, session: str = "s") -> Claim:
    return Claim(session, number, key)


Call = tuple[Any, ...]

CASES: dict[str, list[Call]] = {
    "numbers count from 0, store-wide": [
        ("answer", submit("a")),
        ("answer", submit("a")),
        ("answer", submit("b")),
        ("answer", submit("a")),
    ],
    "polls are counted, cancels and inputs logged with the polls before them": [
        ("answer", submit()),
        ("answer", touch()),
        ("answer", touch()),
        ("answer", touch(action="cancel")),
        ("answer", touch()),
        ("answer", touch(action="input", fits=(1, 3))),
        ("answer", touch(action="input", fits=(2,))),
    ],
    "an input that fits no phase is not logged, and spends no event": [
        ("answer", submit()),
        *[("answer", touch(action="input"))] * (MAX_TASK_EVENTS + 1),
        ("answer", touch(action="input", fits=(0,))),
    ],
    "an unknown task, another session's number, another skill's task: None, nothing counted": [
        ("answer", submit("a")),
        ("answer", touch(1, session="a")),
        ("answer", touch(0, session="b")),  # (the number is a's)
        ("answer", touch(0, session="a", skill="sc/other")),
        ("answer", touch(0, session="a", skill="sc/other", action="cancel")),
        ("answer", touch(0, session="a")),
    ],
    "events beyond the bound are not logged; polls still count": [
        ("answer", submit()),
        *[("answer", touch(action="input", fits=(2,)))] * (MAX_TASK_EVENTS + 2),
        ("answer", touch()),
    ],
    "the cap counts the live tasks of every session": [
        ("answer", submit("a", limit=2)),
        ("answer", submit("b", limit=2)),
        ("answer", submit("c", limit=2)),  # refused: no number taken
        ("answer", submit("c", limit=3)),
        ("answer", touch(0, session="c")),
    ],
    "a task is forgotten after its keep time; then it no longer counts against the cap": [
        ("answer", submit(keep_ms=50, limit=2)),
        ("answer", submit(keep_ms=LONG, limit=2)),
        ("answer", submit(keep_ms=LONG, limit=2)),  # at the cap
        ("sleep", 0.12),
        ("answer", touch(0)),  # forgotten
        ("answer", touch(1)),
        ("answer", submit(limit=2)),  # room again
    ],
    "a forgotten task not touched since still leaves room at the next submit": [
        ("answer", submit(keep_ms=50, limit=1)),
        ("answer", submit(limit=1)),
        ("sleep", 0.12),
        ("answer", submit(limit=1)),
        ("answer", touch(0)),
        ("answer", touch(1)),
    ],
    "a touch keeps a task longer; a touch asking less never shortens it": [
        ("answer", submit(keep_ms=100)),
        ("answer", touch(keep_ms=LONG)),
        ("answer", submit(keep_ms=LONG)),
        ("answer", touch(1, keep_ms=0)),
        ("sleep", 0.15),
        ("answer", touch(0)),
        ("answer", touch(1)),
    ],
    "a task a touch kept longer still counts against the cap once its first time is over": [
        ("answer", submit(keep_ms=50, limit=2)),
        ("answer", touch(keep_ms=LONG)),
        ("sleep", 0.12),
        ("answer", submit(limit=2)),
        ("answer", submit(limit=2)),  # refused: the first is still held
        ("answer", touch(0)),
    ],
    "a task touched within its keep time lives on past its first keep time, key and all": [
        ("answer", submit(keep_ms=200)),
        *[("sleep", 0.08), ("answer", touch(keep_ms=200))] * 8,
    ],
    "a task kept no time at all is gone at its next touch": [
        ("answer", submit(keep_ms=0)),
        ("answer", touch(0)),
        ("answer", submit()),
    ],
    "a session reset forgets its tasks, not another's; no number is handed out again": [
        ("answer", submit("a")),
        ("answer", submit("a")),
        ("answer", submit("b")),
        ("answer", touch(0, session="a")),
        ("reset", "a"),
        ("answer", touch(0, session="a")),
        ("answer", touch(2, session="b")),
        ("answer", submit("a")),
        ("answer", submit("b")),
    ],
    "a reset of everything forgets every task and the cap's count, not the numbering": [
        ("answer", submit("a", limit=2)),
        ("answer", submit("b", limit=2)),
        ("answer", submit("b", limit=2)),  # refused
        ("reset", None),
        ("answer", touch(1, session="b")),
        ("answer", submit("b", limit=2)),
        ("answer", submit("a", limit=2)),
        ("answer", submit("a", limit=2)),  # refused
    ],
    "a reset of sequence keys keeps the tasks": [
        ("answer", submit()),
        ("reset_keys", "s"),
        ("answer", touch()),
        ("answer", submit()),
    ],
    "a look counts no poll and logs nothing": [
        ("answer", submit()),
        ("answer", touch()),
        ("answer", touch(action="look")),
        ("answer", touch(action="cancel")),
        ("answer", touch(action="look")),
        ("answer", touch()),
    ],
    "the callback a submit keeps comes back with every record": [
        ("answer", submit(callback='{"url":"http://127.0.0.1:1/hook"}')),
        ("answer", submit()),
        ("answer", touch(0)),
        ("answer", touch(0, action="look")),
        ("answer", touch(1)),
    ],
    "each delivery is claimed once, on a task held": [
        ("answer", submit("a")),
        ("answer", claim("0.0.0", session="a")),
        ("answer", claim("0.0.0", session="a")),
        ("answer", claim("0.1.0", session="a")),
        ("answer", claim("0.0.0", 1, session="a")),  # no such task
        ("answer", claim("0.0.0", 0, session="b")),  # (the number is a's)
        ("answer", submit("a")),
        ("answer", claim("0.0.0", 1, session="a")),
        ("reset", "a"),
        ("answer", claim("1.0.0", 1, session="a")),  # forgotten: no claim after a reset
    ],
    "a claim goes with its task's keep time": [
        ("answer", submit(keep_ms=50)),
        ("answer", claim("0.0.0")),
        ("sleep", 0.12),
        ("answer", claim("0.0.1")),
        ("answer", touch(0)),
    ],
    "an empty session name is a session like another": [
        ("answer", submit("")),
        ("answer", submit("x")),
        ("reset", ""),
        ("answer", touch(0, session="")),
        ("answer", touch(1, session="x")),
        ("answer", submit("")),
        ("answer", touch(2, session="")),
    ],
}


def without_times(answer: Any) -> Any:
    """*answer* with its times out (each store reads its own clock)."""
    if isinstance(answer, Submitted):
        return ("submitted", answer.number)
    if isinstance(answer, TaskRecord):
        events = tuple((e.action, e.polls, e.fits) for e in answer.events)
        return ("record", answer.skill, answer.polls, events, answer.callback)
    return answer


def played(store: Store, calls: list[Call]) -> list[Any]:
    answers: list[Any] = []
    for name, *args in calls:
        if name == "answer":
            answers.append(without_times(store.answer(args[0])))
        elif name == "sleep":
            time.sleep(args[0])
        elif name == "reset":
            answers.append(store.reset(args[0]))
        else:
            answers.append(store.reset(args[0], ["skill/acme.search/invoke"]))
    return answers


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[Store]:
    store = open_store(redis_url, max_sessions=2)
    yield store
    store.close()


@pytest.mark.parametrize("case", list(CASES))
def test_redis_keeps_tasks_as_memory_does(case: str, redis_store: Store) -> None:
    calls = CASES[case]
    expected = played(State(max_sessions=2), calls)
    assert played(redis_store, calls) == expected


def test_the_cases_say_something() -> None:
    """Each case's answers differ from call to call: equal lists prove equal semantics."""
    for case, calls in CASES.items():
        assert len({repr(a) for a in played(State(max_sessions=2), calls)}) > 1, case


def test_times_are_redis_clock_in_milliseconds_and_events_are_their_touch(
    redis_store: Store,
) -> None:
    before = time.time() * 1000
    submitted = redis_store.answer(submit())
    assert isinstance(submitted, Submitted)
    polled = redis_store.answer(touch())
    cancelled = redis_store.answer(touch(action="cancel", fits=(4,)))
    after = time.time() * 1000
    assert isinstance(polled, TaskRecord)
    assert isinstance(cancelled, TaskRecord)
    # (Redis runs on this machine: its clock is this one's, to the millisecond.)
    assert before - 5 <= submitted.at_ms <= polled.now_ms <= cancelled.now_ms <= after + 5
    assert polled.submitted_ms == cancelled.submitted_ms == submitted.at_ms
    (event,) = cancelled.events
    assert event.at_ms == cancelled.now_ms
    assert (event.action, event.polls, event.fits) == ("cancel", 1, (4,))
    assert submitted.at_ms != int(submitted.at_ms) or polled.now_ms != int(polled.now_ms)


def test_async_face_answers_tasks_like_the_blocking_one(redis_store: Store) -> None:
    import asyncio

    async def played_on_loop() -> list[Any]:
        first = await redis_store.answer_async(submit("loop"))
        second = await redis_store.answer_async(submit("loop"))
        polled = await redis_store.answer_async(touch(1, session="loop"))
        missing = await redis_store.answer_async(touch(2, session="loop"))
        return [without_times(a) for a in (first, second, polled, missing)]

    assert asyncio.run(played_on_loop()) == [
        ("submitted", 0),
        ("submitted", 1),
        ("record", "sc/report", 1, (), ""),
        None,
    ]
    assert without_times(redis_store.answer(touch(1, session="loop"))) == (
        "record",
        "sc/report",
        2,
        (),
        "",
    )


def test_a_forgotten_task_leaves_no_key_behind(redis_store: Store, redis_url: str) -> None:
    import redis

    redis_store.answer(submit("gone", keep_ms=30))
    redis_store.answer(submit("kept"))
    time.sleep(0.1)
    redis_store.answer(submit("kept"))  # its sweep forgets the first
    client = redis.Redis.from_url(redis_url)
    keys = sorted(k.decode() for k in client.keys("mockskill:task*"))
    assert keys == [
        "mockskill:task-held:kept",
        "mockskill:task-number",
        "mockskill:task:kept\x1f1",
        "mockskill:task:kept\x1f2",
        "mockskill:tasks",
    ]
    assert redis_store.answer(claim("0.0.0", 0, session="gone")) is False  # makes no key
    assert sorted(k.decode() for k in client.keys("mockskill:task*")) == keys
    redis_store.reset()
    assert client.keys("mockskill:task*") == [b"mockskill:task-number"]  # (never again)


@pytest.mark.parametrize(
    "need",
    [
        touch(),
        touch(7, "cancel", session="a\x1fb", skill="sc/x", keep_ms=12),
        touch(2**40, "input", session="ünï", fits=(0, 3, 11)),
        touch(session=""),
    ],
)
def test_a_touch_written_from_its_parts_is_its_command_in_resp(need: Touch) -> None:
    encoder = Encoder(Keys("mockskill:ns:"), {"touch": "f" * 40}, 2, 1000)
    assert encoder.packed(need) == packed(encoder.command(need))
