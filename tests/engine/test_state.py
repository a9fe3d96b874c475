"""Runtime state: sequence positions, the journal and the seeded random generator."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from mockskill.engine.state import DEFAULT_SESSION, Entry, State
from mockskill.protocol.catalog import Retry


def entry(state: State, session: str = DEFAULT_SESSION, path: str = "/skills") -> Entry:
    return Entry(
        id=state.next_id(),
        started=1.0,
        finished=2.0,
        session=session,
        method="GET",
        path=path,
        status=200,
        endpoint="list",
    )


def positions(state: State, session: str, key: str, n: int) -> list[int]:
    return [state.advance(session, key) for _ in range(n)]


# -- positions ----------------------------------------------------------------------


def test_advance_hands_out_positions_from_zero() -> None:
    assert positions(State(seed=1), "s", "k", 4) == [0, 1, 2, 3]


def test_positions_are_per_session() -> None:
    state = State(seed=1)
    positions(state, "a", "k", 3)
    assert state.advance("b", "k") == 0
    assert state.advance("a", "k") == 3


def test_positions_are_per_key() -> None:
    state = State(seed=1)
    positions(state, "a", "skill/x/invoke", 3)
    assert state.advance("a", "skill/x/describe") == 0
    assert state.advance("a", "skill/x/invoke") == 3


def test_a_restart_gives_new_requests_position_zero_and_old_ones_their_own_count() -> None:
    state = State(seed=1)
    before = state.restart([]).get("k", 0)
    assert [state.advance("a", "k", before) for _ in range(2)] == [0, 1]
    after = state.restart(["k"])["k"]
    assert after != before
    # Matched on the old generation (in flight over the restart): counts on in the old one.
    assert state.advance("a", "k", before) == 2
    assert state.advance("a", "k", after) == 0  # the restarted sequence starts afresh
    assert state.advance("a", "k", after) == 1
    assert state.advance("a", "k", before) == 3
    state.restart(["other"])  # another key's restart leaves this one be
    assert state.advance("a", "k", after) == 2


def test_a_reset_of_some_keys_restarts_them_on_the_generation_served() -> None:
    state = State(seed=1)
    served = state.restart([]).get("k", 0)
    assert [state.advance("a", "k", served) for _ in range(3)] == [0, 1, 2]
    state.reset(keys=["k"])  # no new table: the one served keeps its generation
    assert state.advance("a", "k", served) == 0


@pytest.fixture
def eager_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, so that a missing lock shows."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("eager_switching")
def test_advance_is_exact_under_concurrency() -> None:
    state = State(seed=1)
    threads, per_thread = 50, 200
    taken: list[list[int]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def work(i: int) -> None:
        start.wait()
        for _ in range(per_thread):
            taken[i].append(state.advance("s", "k"))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    everything = Counter(p for chunk in taken for p in chunk)
    assert sorted(everything) == list(range(threads * per_thread))
    assert set(everything.values()) == {1}
    assert state.advance("s", "k") == threads * per_thread


def test_each_thread_sees_its_own_positions_increase() -> None:
    state = State(seed=1)
    seen: list[list[int]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        for _ in range(100):
            seen[i].append(state.advance("s", "k"))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(chunk == sorted(chunk) for chunk in seen)


# -- reset --------------------------------------------------------------------------


@pytest.fixture
def busy() -> State:
    """Two sessions, two keys each, three requests on each, one journal entry per session."""
    state = State(seed=1)
    for session in ("a", "b"):
        for key in ("k1", "k2"):
            positions(state, session, key, 3)
        state.record(entry(state, session))
    return state


def test_reset_of_everything_forgets_positions_and_journal(busy: State) -> None:
    busy.reset()
    assert busy.journal() == []
    for session in ("a", "b"):
        for key in ("k1", "k2"):
            assert busy.advance(session, key) == 0


def test_reset_of_one_session_leaves_the_others_alone(busy: State) -> None:
    busy.reset("a")
    assert busy.advance("a", "k1") == 0
    assert busy.advance("a", "k2") == 0
    assert busy.advance("b", "k1") == 3
    assert busy.advance("b", "k2") == 3
    assert [e.session for e in busy.journal()] == ["b"]


def test_reset_of_some_keys_in_one_session(busy: State) -> None:
    busy.reset("a", ["k1"])
    assert busy.advance("a", "k1") == 0
    assert busy.advance("a", "k2") == 3
    assert busy.advance("b", "k1") == 3


def test_reset_of_some_keys_in_every_session(busy: State) -> None:
    busy.reset(keys=["k1"])
    assert busy.advance("a", "k1") == 0
    assert busy.advance("b", "k1") == 0
    assert busy.advance("a", "k2") == 3
    assert busy.advance("b", "k2") == 3


def test_reset_of_keys_keeps_the_journal(busy: State) -> None:
    busy.reset("a", ["k1"])
    busy.reset(keys=["k2"])
    assert sorted(e.session for e in busy.journal()) == ["a", "b"]


def test_reset_of_an_unknown_session_changes_nothing(busy: State) -> None:
    busy.reset("nobody")
    assert busy.advance("a", "k1") == 3
    assert len(busy.journal()) == 2


def test_the_journal_stays_bounded_after_a_session_reset() -> None:
    state = State(seed=1, journal_size=3)
    for session in ("a", "b", "b", "b"):
        state.record(entry(state, session))
    state.reset("a")
    for _ in range(5):
        state.record(entry(state, "c"))
    assert len(state.journal()) == 3


# -- journal ------------------------------------------------------------------------


def test_journal_keeps_entries_oldest_first() -> None:
    state = State(seed=1)
    recorded = [entry(state, path=f"/{i}") for i in range(5)]
    for e in recorded:
        state.record(e)
    assert state.journal() == recorded


def test_journal_is_a_ring_buffer_keeping_the_newest() -> None:
    state = State(seed=1, journal_size=3)
    recorded = [entry(state, path=f"/{i}") for i in range(10)]
    for e in recorded:
        state.record(e)
    assert [e.path for e in state.journal()] == ["/7", "/8", "/9"]


def test_journal_of_one_session() -> None:
    state = State(seed=1)
    for session in ("a", "b", "a", "c", "a"):
        state.record(entry(state, session))
    assert [e.session for e in state.journal("a")] == ["a", "a", "a"]
    assert [e.session for e in state.journal("c")] == ["c"]
    assert state.journal("nobody") == []


def test_journal_returns_a_copy() -> None:
    state = State(seed=1)
    state.record(entry(state))
    state.journal().clear()
    assert len(state.journal()) == 1


def test_ids_are_unique_and_increasing() -> None:
    state = State(seed=1)
    ids = [state.next_id() for _ in range(5)]
    assert ids == sorted(set(ids))


def test_entry_as_json_is_plain_data() -> None:
    state = State(seed=1)
    e = Entry(
        id=1,
        started=1.0,
        finished=2.0,
        session="s",
        method="POST",
        path="/skills/x/invoke",
        status=503,
        endpoint="invoke",
        skill="x",
        error_code="ENDPOINT_UNREACHABLE",
        retry=Retry(2000, 5),
        near_misses=({"route": "GET /skills", "reasons": ["r"]},),
    )
    state.record(e)
    data = state.journal()[0].as_json()
    assert data["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert data["near_misses"] == [{"route": "GET /skills", "reasons": ["r"]}]
    assert data["error_code"] == "ENDPOINT_UNREACHABLE"
    # What the retry audit compares, absent by default.
    assert data["protocol_version"] is None
    assert data["body_digest"] is None
    assert data["invalid_descriptor"] is False


def test_entry_from_json_gives_back_the_entry_also_through_json_text() -> None:
    full = Entry(
        id=7,
        started=1795987706.837128,
        finished=1795987706.937306,
        session="s",
        method="GET",
        path="/skills/x/invoke",
        status=None,
        endpoint="unmatched",
        skill="x",
        scenario="sc",
        step=2,
        position=3,
        error_code="MOCKSKILL_SEQUENCE_EXHAUSTED",
        retry=Retry(2000, 5),
        forced=True,
        outage=True,
        choice=1,
        delay_ms=12.5,
        execution_ms=3.25,
        fault="connection_reset",
        client_left=1795987707.1,
        near_misses=({"route": "POST /skills/<id>/invoke", "reasons": ["method GET is not POST"]},),
        credential="bearer hmac-sha256:6f1ed002ab5595ae",
        protocol_version="1.0",
        body_digest="hmac-sha256:00ff",
        invalid_descriptor=True,
    )
    bare = Entry(1, 1.0, 2.0, "s", "GET", "/skills", 200, "list")
    for e in (full, bare):
        assert Entry.from_json(e.as_json()) == e
        assert Entry.from_json(json.loads(json.dumps(e.as_json()))) == e
    # A newer server's extra field is left out; a missing one is named.
    assert Entry.from_json({**bare.as_json(), "new_field": 1}) == bare
    data = bare.as_json()
    del data["session"], data["endpoint"]
    with pytest.raises(ValueError, match="found none for session, endpoint"):
        Entry.from_json(data)


# -- random -------------------------------------------------------------------------


def draws(state: State, n: int = 20, session: str = "s", stream: str = "scenario") -> list[float]:
    return [state.draw(session, stream, None, lambda rng: rng.random()) for _ in range(n)]


def test_the_same_seed_replays_the_same_draws() -> None:
    assert draws(State(seed=42)) == draws(State(seed=42))


def test_different_seeds_give_different_draws() -> None:
    assert draws(State(seed=42)) != draws(State(seed=43))


def test_the_seed_is_reported_and_replays_when_chosen_at_random() -> None:
    first = State()
    assert isinstance(first.seed, int)
    assert draws(State(seed=first.seed)) == draws(first)


def test_seed_zero_is_kept() -> None:
    assert State(seed=0).seed == 0


def test_draws_are_in_the_unit_interval() -> None:
    assert all(0.0 <= d < 1.0 for d in draws(State(seed=7), 200))


def test_streams_are_independent_of_each_other() -> None:
    alone = State(seed=5)
    mixed = State(seed=5)
    expected = draws(alone, 10, "s", "a")
    interleaved = []
    for _ in range(10):
        interleaved.append(mixed.draw("s", "a", None, lambda rng: rng.random()))
        mixed.draw("t", "a", None, lambda rng: rng.random())
        mixed.draw("s", "b", None, lambda rng: rng.random())
    assert interleaved == expected


def test_a_streams_own_seed_wins_over_the_servers() -> None:
    one = State(seed=1).draw("s", "a", 99, lambda rng: rng.random())
    other = State(seed=2).draw("s", "a", 99, lambda rng: rng.random())
    assert one == other


def test_reset_all_replays_the_draws_from_the_start() -> None:
    state = State(seed=3)
    first = draws(state, 5)
    state.reset()
    assert draws(state, 5) == first


def test_activation_time_is_kept_per_scenario() -> None:
    state = State()
    state.activate(["outage"])
    assert 0 <= state.since_activated("outage") < 5


def test_the_least_recently_used_session_is_forgotten_beyond_the_bound() -> None:
    state = State(max_sessions=2)
    state.advance("a", "k")
    state.advance("b", "k")
    state.advance("a", "k")  # a is now the most recently used
    state.advance("c", "k")  # over the bound: b goes
    assert state.advance("a", "k") == 2
    assert state.advance("b", "k") == 0  # forgotten: starts afresh (and c goes)
    assert state.advance("c", "k") == 0


def test_sessions_stay_bounded_however_many_come() -> None:
    state = State(max_sessions=100)
    for i in range(5000):
        state.advance(f"session-{i}", "k")
        state.draw(f"session-{i}", "scenario", None, lambda rng: rng.random())
    assert len(state._sessions) == 100


def test_reset_of_some_keys_restarts_only_those_sequences() -> None:
    state = State()
    for key in ("k1", "k1", "k2"):
        state.advance("s", key)
    state.reset(keys=["k1"])
    assert state.advance("s", "k1") == 0
    assert state.advance("s", "k2") == 1
