"""A compacted journal (State.compact, after a flood of connections) reads as it did.

The server packs the journal's slots into bytes before it trims the heap
after a flood, so that the flood's entries do not keep the memory around
them. Each test here holds a compacted journal to one fed the same records
and never compacted: the same entries, ids and order, the same masking of
secrets hidden before and after, the same bound, the same resets.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest

from mockskill.engine.digests import KeyedDigest
from mockskill.engine.entries import MASK, Entry
from mockskill.engine.state import COMPACT_BATCH, State
from mockskill.protocol.catalog import Retry

KEYED = KeyedDigest(b"k" * 32)
"""A server's body digest: a short body's is recorded to be taken when first shown."""
POLL_RECORD = {"id": "", "action": "poll", "known": True, "poll": None, "terminal_at_ms": 0}
NEAR = ({"route": "GET /skills/{id}", "reasons": ["path /x\ny does not match /skills/{id}"]},)


def varied(state: State, n: int) -> Entry | Entry:
    """The *n*-th of a mix of what the journal holds: every kind of value, texts to cut or
    escape, a secret to mask, an Entry recorded as such; each with its own id."""
    common = {"id": state.next_id(), "started": 1.5 + n, "finished": 2.25 + n}
    kind = n % 5
    if kind == 0:
        return Entry(
            **common, session="default", method="POST", path="/skills/hang/invoke",
            status=None, endpoint="invoke", skill="hang", scenario="bench", step=0,
            position=n, client_left=3.125 + n, body_digest=f"hmac-sha256:{n:016x}",
        )  # fmt: skip
    if kind == 1:
        return Entry(
            **common, session=f"s{n % 3}", method="GET", path=f"/s3cret/{n}\u202e" + "x" * 600,
            status=503, endpoint="invoke", skill="s3cret", error_code="UNAVAILABLE",
            retry=Retry(250, 3), forced=True, outage=True, choice=1, delay_ms=12.5,
            execution_ms=0.1, credential="bearer hmac-sha256:ab", protocol_version="1.0",
        )  # fmt: skip
    if kind == 2:
        return Entry(
            **common, session="s1", method="GET", path="/x\ny", status=404,
            endpoint="unmatched", near_misses=NEAR, headers_sent=2.0 + n, fault="reset",
        )  # fmt: skip
    if kind == 3:
        return Entry(
            **common, session="s2", method="PUT", path="/s3cret", status=None,
            endpoint="refused", invalid_descriptor=True, stopped=True,
        )  # fmt: skip
    later_task = (POLL_RECORD, f"t.{n}", n, None)  # a kept poll's, made a dict when shown
    return Entry(
        **common, session="s0", method="POST", path="/skills", status=200, endpoint="list",
        body_digest=KEYED.later(b'{"n": %d}' % n), task=later_task,  # type: ignore[arg-type]
    )  # fmt: skip


def fed(records: int, capacity: int = 10_000, *, hide_at: int | None = None) -> State:
    """A state that recorded *records* varied entries; "s3cret" hidden after *hide_at* of them."""
    state = State(seed=1, journal_size=capacity)
    for n in range(records):
        if n == hide_at:
            state.hide("s3cret")
        state.record(varied(state, n))
    return state


def compacted(state: State, budget: int = 10_000) -> int:
    """Compact *state* to the end; the calls it took."""
    calls = 1
    while not state.compact(budget):
        calls += 1
    return calls


def test_a_compacted_journal_reads_as_one_never_compacted() -> None:
    plain, packed = fed(3000, hide_at=1200), fed(3000, hide_at=1200)
    assert compacted(packed) == 1
    journal = packed.journal()
    assert journal == plain.journal()
    assert [e.id for e in journal] == list(range(1, 3001))
    assert packed.journal() == journal  # read again alike
    # The secret hidden later masks only what was recorded after it, packed or not.
    assert "s3cret" in journal[1].path
    assert "s3cret" in journal[3].path
    assert MASK in journal[1201].path
    assert journal[1203].path == f"/{MASK}"
    assert journal[1].retry == Retry(250, 3)
    assert journal[4].body_digest == KEYED(b'{"n": 4}')  # taken when read, or when packed
    assert journal[4].task == {**POLL_RECORD, "id": "t.4", "poll": 4, "terminal_at_ms": None}
    assert journal[2].near_misses == (
        {**NEAR[0], "reasons": ["path /x%0Ay does not match /skills/{id}"]},
    )


def test_entries_already_read_are_packed_as_they_read() -> None:
    plain, packed = fed(1000, hide_at=500), fed(1000, hide_at=500)
    assert len(packed.journal()) == 1000  # builds every entry
    packed.record(varied(packed, 1000))
    plain.record(varied(plain, 1000))
    compacted(packed)
    assert packed.journal() == plain.journal()


def test_compaction_goes_in_slices_each_leaving_the_journal_as_it_reads() -> None:
    plain, packed = fed(2500, hide_at=7), fed(2500, hide_at=7)
    expected = plain.journal()
    slices = 0
    while not packed.compact(300):
        slices += 1
        assert packed.journal() == expected
    assert slices == 2500 // 300  # 300 at a time, the last one short
    assert packed.compact(300)  # nothing left to pack
    assert packed.journal() == expected


def test_a_compacted_journal_keeps_its_bound_and_order_as_new_entries_come() -> None:
    plain, packed = fed(1000, capacity=1000), fed(1000, capacity=1000)
    compacted(packed)
    for n in range(1000, 1000 + COMPACT_BATCH + 10):  # past a batch and into the next
        plain.record(varied(plain, n))
        packed.record(varied(packed, n))
        if n % 97 == 0:
            assert packed.journal() == plain.journal()
    journal = packed.journal()
    assert journal == plain.journal()
    assert len(journal) == packed.capacity == 1000
    assert [e.id for e in journal] == list(range(COMPACT_BATCH + 11, 1000 + COMPACT_BATCH + 11))
    compacted(packed)  # the new ones packed after the old
    assert packed.journal() == journal


@pytest.mark.parametrize(
    "reset",
    [
        lambda state: state.reset(session="s1"),
        lambda state: state.reset(),
        lambda state: state.reset(keys=["k"]),
    ],
    ids=["one session", "everything", "some keys"],
)
def test_a_reset_reads_alike_on_a_compacted_journal(reset: Callable[[State], None]) -> None:
    plain, packed = fed(1500, capacity=1200), fed(1500, capacity=1200)
    compacted(packed)
    reset(plain)
    reset(packed)
    assert packed.journal() == plain.journal()
    assert packed.journal("s2") == plain.journal("s2")
    for n in range(1500, 2000):
        plain.record(varied(plain, n))
        packed.record(varied(packed, n))
    assert packed.journal() == plain.journal()


def test_an_empty_journal_has_nothing_to_compact() -> None:
    state = State(seed=1)
    assert state.compact()
    assert state.journal() == []


def test_packed_entries_hold_a_fraction_of_the_memory() -> None:
    # What the journal's slots hold once compacted: the point of compacting after a flood.
    gc.collect()
    tracemalloc.start()
    try:
        state = State(seed=1)
        for n in range(5000):
            state.record(varied(state, n * 5))  # the kind a hanging connection leaves
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        compacted(state)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after < before / 5, (before, after)
