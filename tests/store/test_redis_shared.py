"""Several stores on one Redis are one truth: each need is taken exactly once among them.

Each store stands for a replica (its own clients, as another process has);
one of them runs in a separate process. The sequences, tokens, outage
windows and draws they answer are the ones a single store would answer.
"""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from mockskill.engine.store import IssueToken, ReadState, SetState, Store, Take, Taken, UseToken
from mockskill.store import open_store

STEP = Take("alice", "skill/acme.search/invoke", 0, "checkout", None, False)


@pytest.fixture
def stores(redis_url: str) -> Iterator[list[Store]]:
    """Three stores (three replicas) on one empty Redis."""
    opened = [open_store(redis_url, replica=f"replica-{n}") for n in range(3)]
    yield opened
    for store in opened:
        store.close()


def positions_in_a_process(url: str, count: int, start: threading.Event) -> subprocess.Popen[str]:
    """A separate process taking *count* positions of STEP once *start* is set (on stdin)."""
    code = textwrap.dedent(
        f"""
        import json, sys
        from mockskill.engine.store import Take
        from mockskill.store import open_store
        store = open_store({url!r}, replica="process")
        need = Take({STEP.session!r}, {STEP.key!r}, 0, {STEP.scenario!r}, None, False)
        sys.stdin.readline()
        print(json.dumps([store.answer(need).position for _ in range({count})]))
        store.close()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_three_stores_and_a_process_take_each_position_exactly_once(
    stores: list[Store], redis_url: str
) -> None:
    start = threading.Event()
    process = positions_in_a_process(redis_url, 100, start)
    taken: list[int | None] = []
    lock = threading.Lock()

    def advance(store: Store, count: int) -> None:
        start.wait()
        mine = []
        for _ in range(count):
            answer = store.answer(STEP)
            assert isinstance(answer, Taken)
            mine.append(answer.position)
        with lock:
            taken.extend(mine)

    threads = [threading.Thread(target=advance, args=(store, 100)) for store in stores[:2]]
    for thread in threads:
        thread.start()
    start.set()
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    out, _ = process.communicate(timeout=60)
    for thread in threads:
        thread.join(timeout=60)
    taken.extend(json.loads(out))
    assert process.returncode == 0
    assert sorted(p for p in taken if p is not None) == list(range(300))


def test_three_stores_on_their_loops_take_each_position_exactly_once(
    stores: list[Store],
) -> None:
    """The pipelined face: three loops in three threads, each with its batches in flight."""
    results: list[list[int | None]] = []

    def advance(store: Store) -> None:
        async def take() -> list[int | None]:
            answers = await asyncio.gather(*(store.answer_async(STEP) for _ in range(100)))
            return [a.position for a in answers if isinstance(a, Taken)]

        results.append(asyncio.run(take()))

    threads = [threading.Thread(target=advance, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(p for r in results for p in r if p is not None) == list(range(300))


def test_fails_twice_then_succeeds_cycling_means_exactly_that_across_replicas(
    stores: list[Store],
) -> None:
    """The positions of "503 twice, then 200" (three steps, cycling) taken round robin."""
    sequence = ["503", "503", "200"]
    played = collections.Counter()
    for n in range(300):
        answer = stores[n % 3].answer(STEP)
        assert isinstance(answer, Taken)
        assert answer.position is not None
        played[sequence[answer.position % 3]] += 1
    assert played == {"503": 200, "200": 100}


def test_a_token_issued_on_one_replica_is_spent_on_the_others(stores: list[Store]) -> None:
    stores[0].answer(IssueToken("t-1", frozenset({"read", "write"}), 60, 3))
    uses = [stores[n % 3].answer(UseToken("t-1")) for n in range(1, 5)]
    assert uses == [frozenset({"read", "write"})] * 3 + [None]
    assert stores[0].answer(UseToken("t-1")) is None  # used up: forgotten everywhere


def test_an_outage_window_is_measured_from_one_activation_for_every_replica(
    stores: list[Store],
) -> None:
    in_outage = Take("bob", "k", 0, "flaky", (0, 60_000), False)
    after = Take("bob", "k", 0, "flaky", (60_000, 120_000), False)
    stores[0].activate(["flaky"])
    for store in stores:
        assert store.answer(in_outage) == Taken(None, -1)
        assert store.answer(after) != Taken(None, -1)


def test_draw_numbers_are_one_count_per_session_and_scenario_across_replicas(
    stores: list[Store],
) -> None:
    drawn = Take("carol", "k", 0, "chaos", None, True)
    other = Take("dave", "k", 0, "chaos", None, True)
    numbers = [stores[n % 3].answer(drawn) for n in range(6)]
    assert [a.draw for a in numbers if isinstance(a, Taken)] == [0, 1, 2, 3, 4, 5]
    assert stores[2].answer(other) == Taken(0, 0)  # another session draws on its own


def test_the_seed_is_shared_unless_a_replica_names_one(redis_url: str) -> None:
    first = open_store(redis_url)
    second = open_store(redis_url)
    named = open_store(redis_url, seed=42)
    later = open_store(redis_url)
    try:
        assert first.seed == second.seed
        assert named.seed == 42
        assert later.seed == 42  # the one named is written: replicas started after use it
    finally:
        for store in (first, second, named, later):
            store.close()


def test_a_restart_is_a_new_generation_for_every_replica(stores: list[Store]) -> None:
    key = STEP.key
    for _ in range(2):
        stores[0].answer(STEP)
    generations = stores[1].restart([key])
    assert generations == {key: 1}
    assert stores[2].restart([key, "other"]) == {key: 2, "other": 1}
    fresh = Take(STEP.session, key, 2, STEP.scenario, None, False)
    assert stores[0].answer(fresh) == Taken(0, -1)
    # a request matched before the restarts counts on in the generation it matched
    assert stores[1].answer(STEP) == Taken(2, -1)


def test_a_reset_on_one_replica_resets_every_replica(stores: list[Store]) -> None:
    for store in stores:
        store.answer(STEP)
    stores[0].answer(IssueToken("t-2", frozenset(), None, None))
    stores[1].reset(STEP.session)
    assert stores[2].answer(STEP) == Taken(0, -1)
    assert stores[2].answer(UseToken("t-2")) == frozenset()  # a session reset keeps tokens
    stores[2].reset()
    assert stores[0].answer(STEP) == Taken(0, -1)
    assert stores[0].answer(UseToken("t-2")) is None


def test_a_state_moved_on_one_replica_is_read_on_the_others(stores: list[Store]) -> None:
    async def read_on_a_loop(store: Store) -> object:
        return await store.answer_async(ReadState("alice", "checkout"))

    assert stores[0].answer(ReadState("alice", "checkout")) is None
    stores[1].answer(SetState("alice", "checkout", "paid"))
    assert stores[2].answer(ReadState("alice", "checkout")) == "paid"
    assert asyncio.run(read_on_a_loop(stores[0])) == "paid"  # the pipelined face too
    assert stores[0].answer(ReadState("bob", "checkout")) is None
    stores[2].reset("alice")
    assert stores[1].answer(ReadState("alice", "checkout")) is None
