"""The in-memory store: sequence positions, draw numbers, outages, tokens and the journal."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from mockskill.engine.state import DEFAULT_SESSION, MAX_BUCKETS, Entry, State
from mockskill.engine.store import (
    ADMITTED,
    FULL_MS,
    NEXT_MS,
    REMAINING,
    Bucket,
    Health,
    IssueToken,
    Spent,
    Take,
    Taken,
    UseToken,
)
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


def advance(state: State, session: str, key: str, generation: int = 0) -> int:
    """The position a plain Take of *key* takes (no outage, no draws)."""
    taken = state.answer(Take(session, key, generation, "", None, False))
    assert isinstance(taken, Taken)
    assert taken.position is not None
    return taken.position


def positions(state: State, session: str, key: str, n: int) -> list[int]:
    return [advance(state, session, key) for _ in range(n)]


# -- positions ----------------------------------------------------------------------


def test_advance_hands_out_positions_from_zero() -> None:
    assert positions(State(seed=1), "s", "k", 4) == [0, 1, 2, 3]


def test_positions_are_per_session() -> None:
    state = State(seed=1)
    positions(state, "a", "k", 3)
    assert advance(state, "b", "k") == 0
    assert advance(state, "a", "k") == 3


def test_positions_are_per_key() -> None:
    state = State(seed=1)
    positions(state, "a", "skill/x/invoke", 3)
    assert advance(state, "a", "skill/x/describe") == 0
    assert advance(state, "a", "skill/x/invoke") == 3


def test_a_restart_gives_new_requests_position_zero_and_old_ones_their_own_count() -> None:
    state = State(seed=1)
    before = state.restart([]).get("k", 0)
    assert [advance(state, "a", "k", before) for _ in range(2)] == [0, 1]
    after = state.restart(["k"])["k"]
    assert after != before
    # Matched on the old generation (in flight over the restart): counts on in the old one.
    assert advance(state, "a", "k", before) == 2
    assert advance(state, "a", "k", after) == 0  # the restarted sequence starts afresh
    assert advance(state, "a", "k", after) == 1
    assert advance(state, "a", "k", before) == 3
    state.restart(["other"])  # another key's restart leaves this one be
    assert advance(state, "a", "k", after) == 2


def test_a_reset_of_some_keys_restarts_them_on_the_generation_served() -> None:
    state = State(seed=1)
    served = state.restart([]).get("k", 0)
    assert [advance(state, "a", "k", served) for _ in range(3)] == [0, 1, 2]
    state.reset(keys=["k"])  # no new table: the one served keeps its generation
    assert advance(state, "a", "k", served) == 0


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
            taken[i].append(advance(state, "s", "k"))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    everything = Counter(p for chunk in taken for p in chunk)
    assert sorted(everything) == list(range(threads * per_thread))
    assert set(everything.values()) == {1}
    assert advance(state, "s", "k") == threads * per_thread


def test_each_thread_sees_its_own_positions_increase() -> None:
    state = State(seed=1)
    seen: list[list[int]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        for _ in range(100):
            seen[i].append(advance(state, "s", "k"))

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
            assert advance(busy, session, key) == 0


def test_reset_of_one_session_leaves_the_others_alone(busy: State) -> None:
    busy.reset("a")
    assert advance(busy, "a", "k1") == 0
    assert advance(busy, "a", "k2") == 0
    assert advance(busy, "b", "k1") == 3
    assert advance(busy, "b", "k2") == 3
    assert [e.session for e in busy.journal()] == ["b"]


def test_reset_of_some_keys_in_one_session(busy: State) -> None:
    busy.reset("a", ["k1"])
    assert advance(busy, "a", "k1") == 0
    assert advance(busy, "a", "k2") == 3
    assert advance(busy, "b", "k1") == 3


def test_reset_of_some_keys_in_every_session(busy: State) -> None:
    busy.reset(keys=["k1"])
    assert advance(busy, "a", "k1") == 0
    assert advance(busy, "b", "k1") == 0
    assert advance(busy, "a", "k2") == 3
    assert advance(busy, "b", "k2") == 3


def test_reset_of_keys_keeps_the_journal(busy: State) -> None:
    busy.reset("a", ["k1"])
    busy.reset(keys=["k2"])
    assert sorted(e.session for e in busy.journal()) == ["a", "b"]


def test_reset_of_an_unknown_session_changes_nothing(busy: State) -> None:
    busy.reset("nobody")
    assert advance(busy, "a", "k1") == 3
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


def sent(state: State, path: str, body: bytes, session: str = DEFAULT_SESSION) -> Entry:
    """An entry as recorded with what its request sent: target, two headers, a body."""
    headers = ((b"Host", b"h"), (b"Content-Type", b"application/json"))
    return entry(state, session, path)._replace(
        target=path, headers=headers, body=body, body_size=len(body)
    )


def test_the_journal_keeps_at_most_its_bytes_of_what_was_sent_the_oldest_going_first() -> None:
    state = State(seed=1, journal_bytes=10_000)
    each = len("/0") + len("HosthContent-Typeapplication/json") + 3_000
    for i in range(5):
        state.record(sent(state, f"/{i}", b"x" * 3_000))
    # Three entries' worth fit in 10 000 bytes; the two oldest went to make room.
    assert [e.path for e in state.journal()] == ["/2", "/3", "/4"]
    assert 3 * each <= 10_000 < 4 * each
    # An entry larger than the whole budget is still kept, alone.
    state.record(sent(state, "/big", b"y" * 20_000))
    assert [e.path for e in state.journal()] == ["/big"]
    # Entries without bodies take none of it (their targets and headers are bounded each).
    for i in range(3):
        state.record(sent(state, f"/small{i}", b""))
    assert [e.path for e in state.journal()] == ["/small0", "/small1", "/small2"]


def test_the_journal_counts_its_bytes_again_after_a_session_reset() -> None:
    state = State(seed=1, journal_bytes=10_000)
    for session in ("a", "b", "a"):
        state.record(sent(state, f"/{session}", b"x" * 3_000, session))
    state.reset("a")
    for i in range(2):
        state.record(sent(state, f"/c{i}", b"x" * 3_000, "c"))
    assert [e.path for e in state.journal()] == ["/b", "/c0", "/c1"]
    state.reset()
    state.record(sent(state, "/d", b"x" * 9_000))
    assert [e.path for e in state.journal()] == ["/d"]


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


def test_entry_as_json_is_every_field_as_asdict_gives_it_and_a_copy() -> None:
    """as_json reads the fields one by one (asdict's deep copy of each cost ~50 us an
    entry): the same document, and changing it leaves the entry as it was."""
    e = Entry(
        id=3,
        started=1.0,
        finished=2.0,
        session="s",
        method="POST",
        path="/skills/x/invoke",
        status=502,
        endpoint="invoke",
        skill="x",
        retry=Retry(100, 2),
        near_misses=({"route": "GET /skills", "reasons": ["r"]},),
        upstream={"url": "http://up", "reached": True, "status": 502, "error": None, "ms": 1.5},
        tls=("bad_certificate", "unknown_ca", "example.test"),
        case=1,
    )
    expected = e._asdict()
    expected["retry"] = {"suggested_delay_ms": 100, "max_attempts": 2}
    expected["tls"] = {"fault": "bad_certificate", "alert": "unknown_ca", "sni": "example.test"}
    expected["near_misses"] = [{"route": "GET /skills", "reasons": ["r"]}]
    data = e.as_json()
    assert data == expected
    assert list(data) == list(Entry._fields)
    data["near_misses"][0]["reasons"].append("changed")
    data["upstream"]["status"] = 200
    assert e.near_misses == ({"route": "GET /skills", "reasons": ["r"]},)
    assert e.upstream is not None
    assert e.upstream["status"] == 502


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


# -- draw numbers and outages ---------------------------------------------------------


def draw(state: State, session: str = "s", scenario: str = "scenario", key: str = "k") -> int:
    """The draw number a Take asking for draws takes."""
    taken = state.answer(Take(session, key, 0, scenario, None, True))
    assert isinstance(taken, Taken)
    return taken.draw


def test_draw_numbers_count_per_session_and_scenario() -> None:
    state = State(seed=5)
    assert [draw(state) for _ in range(3)] == [0, 1, 2]
    assert draw(state, session="t") == 0  # another session draws independently
    assert draw(state, scenario="other") == 0  # as does another scenario's stream
    assert draw(state, key="k2") == 3  # one stream per scenario, whichever sequence
    assert draw(state) == 4


def test_a_take_without_draws_takes_no_draw_number() -> None:
    state = State(seed=5)
    taken = state.answer(Take("s", "k", 0, "scenario", None, False))
    assert taken == Taken(0, -1)
    assert draw(state) == 0


def test_reset_restarts_the_draw_numbers() -> None:
    state = State(seed=3)
    for session in ("s", "t"):
        draw(state, session)
        draw(state, session)
    state.reset(session="s")
    assert draw(state, "s") == 0
    assert draw(state, "t") == 2
    state.reset()
    assert draw(state, "t") == 0


def test_seed_zero_is_kept() -> None:
    assert State(seed=0).seed == 0


def test_a_seed_is_chosen_when_none_is_given() -> None:
    seeds = {State().seed for _ in range(5)}
    assert all(isinstance(seed, int) for seed in seeds)
    assert len(seeds) > 1


def test_a_take_in_the_outage_takes_no_position_but_its_draw() -> None:
    state = State()
    state.activate(["down"])
    window = Take("s", "k", 0, "down", (0.0, 60_000.0), True)
    assert state.answer(window) == Taken(None, 0)
    assert state.answer(window) == Taken(None, 1)
    assert advance(state, "s", "k") == 0  # the sequence did not move


def test_the_outage_window_counts_from_the_scenarios_activation() -> None:
    state = State()
    state.activate(["later"])
    not_yet = Take("s", "k", 0, "later", (60_000.0, 120_000.0), False)
    assert state.answer(not_yet) == Taken(0, -1)
    over = Take("s", "k", 0, "later", (0.0, 0.0), False)  # empty: never covers
    assert state.answer(over) == Taken(1, -1)


def test_issued_tokens_are_spent_use_by_use() -> None:
    state = State()
    assert state.answer(IssueToken("t1", frozenset({"read"}), None, 2)) is None
    assert state.answer(UseToken("t1")) == frozenset({"read"})
    assert state.answer(UseToken("t1")) == frozenset({"read"})
    assert state.answer(UseToken("t1")) is None  # used up
    assert state.answer(UseToken("unknown")) is None


def test_an_issued_token_expires_after_its_seconds() -> None:
    state = State()
    state.answer(IssueToken("t0", frozenset({"read"}), 0, None))
    assert state.answer(UseToken("t0")) is None


def test_the_memory_store_answers_inline_and_is_always_healthy() -> None:
    state = State(seed=1)
    assert state.remote is False
    assert state.replica is None
    assert state.health() == Health("ok")
    assert asyncio.run(state.answer_async(Take("s", "k", 0, "", None, False))) == Taken(0, -1)
    assert advance(state, "s", "k") == 1  # the same positions, inline or awaited
    with pytest.raises(TypeError, match="not a need"):
        state.answer("k")  # type: ignore[arg-type]
    state.close()


def test_the_least_recently_used_session_is_forgotten_beyond_the_bound() -> None:
    state = State(max_sessions=2)
    advance(state, "a", "k")
    advance(state, "b", "k")
    advance(state, "a", "k")  # a is now the most recently used
    advance(state, "c", "k")  # over the bound: b goes
    assert advance(state, "a", "k") == 2
    assert advance(state, "b", "k") == 0  # forgotten: starts afresh (and c goes)
    assert advance(state, "c", "k") == 0


def test_sessions_stay_bounded_however_many_come() -> None:
    state = State(max_sessions=100)
    for i in range(5000):
        draw(state, f"session-{i}")
    assert len(state._sessions) == 100


def test_reset_of_some_keys_restarts_only_those_sequences() -> None:
    state = State()
    for key in ("k1", "k1", "k2"):
        advance(state, "s", key)
    state.reset(keys=["k1"])
    assert advance(state, "s", "k1") == 0
    assert advance(state, "s", "k2") == 1


# -- rate limits' buckets -------------------------------------------------------------

SLOW = 0.001
"""Tokens a second of a bucket that refills nothing worth a token during a test."""


def limited(
    session: str = "s", key: str = "k", bucket: Bucket | None = None, draws: bool = False
) -> Take:
    """A Take spending *bucket* (by default a per-session one of 3 tokens that hardly refills)."""
    limit = bucket or Bucket(f"sc/k/{session}", 3, SLOW, session)
    return Take(session, key, 0, "sc", None, draws, limit)


def spend(state: State, need: Take) -> tuple[int | None, int, Spent]:
    """What a limited Take took: its position, its draw and the token spent."""
    taken = state.answer(need)
    assert isinstance(taken, Taken)
    position, draw, spent = taken
    assert spent is not None
    return position, draw, spent


def admitted(state: State, need: Take) -> bool:
    return spend(state, need)[2][ADMITTED]


def remaining(state: State, need: Take) -> int:
    return spend(state, need)[2][REMAINING]


def test_a_limited_take_spends_a_token_first_and_takes_nothing_without_one() -> None:
    state = State(seed=1)
    answers = [spend(state, limited(draws=True)) for _ in range(5)]
    assert [a[:2] for a in answers] == [(0, 0), (1, 1), (2, 2)] + [(None, -1)] * 2
    assert [a[2][ADMITTED] for a in answers] == [True] * 3 + [False] * 2
    assert [a[2][REMAINING] for a in answers] == [2, 1, 0, 0, 0]
    refused = answers[-1][2]
    # A thousandth of a token a second: a whole one in some 1000 s, the bucket full in 3000 s.
    assert 999_000 < refused[NEXT_MS] <= 1_000_000
    assert 2_999_000 < refused[FULL_MS] <= 3_000_000
    # Refused requests took no position and no draw: the sequence goes on where it was.
    assert state.answer(Take("s", "k", 0, "sc", None, True)) == Taken(3, 3, None)


def test_a_limited_take_in_an_outage_spends_its_token_and_takes_its_draw() -> None:
    state = State(seed=1)
    state.activate(["sc"])
    need = Take("s", "k", 0, "sc", (0.0, 60_000.0), True, Bucket("b", 1, SLOW, None))
    first, second = spend(state, need), spend(state, need)
    assert (first[:2], first[2][ADMITTED]) == ((None, 0), True)
    assert (second[:2], second[2][ADMITTED]) == ((None, -1), False)


def test_a_bucket_refills_at_its_rate_in_real_time() -> None:
    state = State(seed=1)
    bucket = Bucket("sc/k/client", 2, 2.0, None)  # a token every half second
    assert [admitted(state, limited(bucket=bucket)) for _ in range(3)] == [True, True, False]
    time.sleep(0.6)  # 1.2 tokens: one request, not two (unless this stalls 0.4 s)
    (position, _, _), (refused_at, _, refused) = (
        spend(state, limited(bucket=bucket)),
        spend(state, limited(bucket=bucket)),
    )
    assert (position, refused_at, refused[ADMITTED]) == (2, None, False)
    assert 0 < refused[NEXT_MS] <= 400  # 0.2 of a token here: 0.8 to go at 2 a second
    assert refused[FULL_MS] == refused[NEXT_MS] + 500


def test_buckets_are_per_key_whichever_session_spends_them() -> None:
    state = State(seed=1)
    tenant = Bucket("sc/k/header X-Tenant: acme", 2, SLOW, None)
    assert [admitted(state, limited(s, bucket=tenant)) for s in "abc"] == [True, True, False]
    assert (
        spend(state, limited("c", bucket=Bucket("sc/k/header X-Tenant: other", 2, SLOW, None)))[0]
        == 0
    )
    # The sessions' own buckets are theirs: a's is full.
    assert spend(state, limited("a"))[2] == (True, 2, 0, 1_000_000)


def test_a_session_reset_forgets_its_own_buckets_only() -> None:
    state = State(seed=1)
    shared = Bucket("sc/k/client 1.2.3.4", 2, SLOW, None)
    for session in ("a", "b"):
        for _ in range(3):
            spend(state, limited(session))
    spend(state, limited("a", bucket=shared))
    state.reset("a")
    assert remaining(state, limited("a")) == 2  # a's own: full again
    assert not admitted(state, limited("b"))
    assert remaining(state, limited("a", bucket=shared)) == 0  # no session's: kept
    state.reset(keys=["k"])  # a sequence restarted: the buckets stay
    assert not admitted(state, limited("b"))
    state.reset()
    assert remaining(state, limited("b")) == 2
    assert remaining(state, limited("a", bucket=shared)) == 1


def test_a_session_forgotten_beyond_the_bound_takes_its_buckets_along() -> None:
    state = State(max_sessions=2)
    for _ in range(3):
        spend(state, limited("a"))
    spend(state, limited("b"))
    spend(state, limited("c"))  # a, the least recently used, goes
    assert remaining(state, limited("a")) == 2


def test_buckets_full_again_are_let_go_as_new_ones_come() -> None:
    state = State(seed=1)
    spend(state, limited(bucket=Bucket("quick", 1, 1000.0, None)))  # full a millisecond after
    time.sleep(0.01)
    spend(state, limited(bucket=Bucket("slow", 2, SLOW, None)))
    assert list(state._buckets) == ["slow"]


def test_buckets_no_session_owns_stay_bounded_the_least_recently_spent_going_first() -> None:
    state = State(seed=1)
    tenants = [Bucket(f"sc/k/header X-Tenant: {n}", 1, SLOW, None) for n in range(MAX_BUCKETS + 1)]
    for tenant in tenants:  # a client sending a new value with every request
        assert admitted(state, limited(bucket=tenant))
    assert len(state._buckets) == MAX_BUCKETS
    # The first was let go: as a fresh bucket, it admits again; the second is still spent.
    assert admitted(state, limited(bucket=tenants[0]))
    assert not admitted(state, limited(bucket=tenants[2]))
