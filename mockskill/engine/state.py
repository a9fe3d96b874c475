"""All mutable runtime state of one process, behind one lock: the in-memory :class:`~.store.Store`.

Sequence positions per session and endpoint, draw counts, scenario states per
session and scenario, rate limits' token buckets, outage clocks, issued tokens,
long-running tasks (:mod:`.task_records`) and the bounded request journal live here
and nowhere else. The engine asks for them as needs (:mod:`.store`): this store
answers each inline, under one acquisition of its lock (:meth:`State.answer`), so
that a shared backend (``mockskill.store``) can replace it when several processes
serve one scenario set.

The journal's slots hold what was recorded as it was (:class:`_Kept`) until
:meth:`State.compact` packs them into bytes (:class:`_Packed`): after a flood
of connections, so that the entries it left do not keep its memory.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from .buckets import spend
from .entries import (
    MASK,
    MAX_ENTRY_BYTES,
    MAX_PATH,
    MAX_SESSION_NAME,
    MAX_TEXT,
    Entry,
    body_bytes,
    escaped,
    kept,
    oversized,
    packed,
    shorten,
    unpacked,
)
from .store import (
    ADMITTED,
    FULL_MS,
    Bucket,
    Claim,
    Health,
    IssueToken,
    Need,
    NeedAnswer,
    ReadState,
    Recall,
    Recalled,
    SetState,
    Settle,
    Spent,
    Submit,
    Take,
    Taken,
    Touch,
    UseToken,
)
from .task_records import TaskRecords

__all__ = [
    "DEFAULT_JOURNAL_SIZE",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION",
    "MASK",
    "MAX_ENTRY_BYTES",
    "MAX_PATH",
    "MAX_SESSION_NAME",
    "MAX_TEXT",
    "Entry",
    "State",
    "escaped",
    "shorten",
]

_new = tuple.__new__
"""Taken's fields, positionally: tuple.__new__ skips the NamedTuple's keyword __new__."""
DEFAULT_SESSION = "default"
DEFAULT_JOURNAL_SIZE = 10_000
DEFAULT_JOURNAL_BYTES = 64 * 1024 * 1024
"""The bytes of request bodies the in-memory journal's entries keep, at most: past it the
oldest entries go first, as past its size (targets and headers are bounded per entry)."""
DEFAULT_MAX_SESSIONS = 10_000
COMPACT_BATCH = 256
"""Journal slots packed into one bytes (:meth:`State.compact`): some 5 KB compressed."""
COMPACT_SLICE = 1024
"""Journal slots :meth:`State.compact` packs at most per call: a few milliseconds."""
MAX_IDEMPOTENCY_KEYS = 10_000
"""``Idempotency-Key``s remembered at most, every session's (the least recently used are
forgotten first: a retry with one forgotten runs again, as past a provider's expiry)."""
MAX_IDEMPOTENCY_BYTES = 64 * 1024 * 1024
"""What the remembered keys' first answers weigh at most, together (the same rule)."""
MAX_BUCKETS = 10_000
"""Rate limits' buckets kept at most that no session owns (per credential, client, header
or body value): past it the least recently spent is forgotten (full again, as a fresh one).
A session's buckets go with its session (bounded by :data:`DEFAULT_MAX_SESSIONS`)."""


@dataclass
class _Token:
    """An issued token: its scopes, when it expires and the uses it has left (None: no
    bound)."""

    scopes: frozenset[str]
    expires: float | None
    uses_left: int | None


_new_slot = object.__new__


class _Kept:
    """One journal slot: what was recorded, and the Entry built from it when first read."""

    __slots__ = ("built", "hidden", "recorded")

    def __init__(self, recorded: Entry, hidden: tuple[str, ...]) -> None:
        self.recorded: Entry | None = recorded
        self.hidden = hidden
        """The secrets hidden when it was recorded: a secret hidden later masks nothing
        recorded before it (as when entries were masked as they were recorded)."""
        self.built: Entry | None = None

    def entry(self) -> Entry:
        """The Entry, built on first call (any thread: two may race to build the same)."""
        built = self.built
        if built is None:
            recorded = self.recorded
            if recorded is None:  # built meanwhile: built is set before recorded is let go
                assert self.built is not None
                return self.built
            built = self.built = kept(recorded, self.hidden)
            self.recorded = None  # built once: the values are the entry's now
        return built

    @classmethod
    def of(cls, entry: Entry) -> _Kept:
        """A slot holding *entry* as built (its texts bounded and masked already)."""
        slot = cls(entry, ())
        slot.built, slot.recorded = entry, None
        return slot

    def parts(self) -> tuple[tuple[str, ...] | None, Entry]:
        """What :func:`packed` keeps of it: (hidden, recorded), or (None, the Entry) once built."""
        built = self.built
        if built is None:
            recorded = self.recorded
            if recorded is not None:
                return self.hidden, recorded
            built = self.built  # built meanwhile (see entry)
            assert built is not None
        return None, built


class _Packed:
    """Consecutive journal slots packed into one bytes (:func:`packed`).

    The journal holds it once per slot it packed, oldest first: its length
    and bound stay the journal's, and, since the oldest slots are the ones
    let go, a run of *n* of them stands for its last *n* entries.
    """

    __slots__ = ("data",)

    def __init__(self, slots: list[_Kept]) -> None:
        self.data = packed([slot.parts() for slot in slots])

    def entries(self, last: int) -> list[Entry]:
        """The entries of its last *last* slots, as they read in the journal."""
        return unpacked(self.data, last)


def _entries(slots: list[_Kept | _Packed]) -> list[Entry]:
    """The entries *slots* (a copy of the journal) hold, oldest first."""
    split = _packed_up_to(slots)
    entries: list[Entry] = []
    for pack, run in itertools.groupby(slots[:split]):
        entries.extend(cast(_Packed, pack).entries(sum(1 for _ in run)))
    entries.extend(cast(_Kept, slot).entry() for slot in slots[split:])
    return entries


def _packed_up_to(slots: list[_Kept | _Packed]) -> int:
    """How many of *slots* (a copy of the journal) are packed: the oldest ones, if any."""
    return bisect.bisect_left(slots, True, key=lambda slot: type(slot) is _Kept)


class _Session:
    """What one session has done: positions in sequences, its draws per scenario, the
    state it is in per scenario, and the rate limits' buckets it spent."""

    __slots__ = ("buckets", "draws", "positions", "retired", "states")

    def __init__(self) -> None:
        self.positions: dict[str, int] = {}
        self.retired: dict[str, tuple[int, int]] = {}
        """Per key, the generation restarted last and the next position in it: requests
        matched before the restart (still in flight) count on here, not in the new one."""
        self.draws: dict[str, int] = {}
        """Per scenario (its name, '' for none), how many draws the session took."""
        self.states: dict[str, str] = {}
        """Per scenario, the state a step moved the session into (none: the initial one)."""
        self.buckets: dict[str, tuple[float, float]] = {}
        """Per key, a per-session bucket's tokens and when they were counted (none: full)."""


@dataclass(slots=True)
class _Remembered:
    """An ``Idempotency-Key``'s execution: its body's digest, its first answer (None: in
    flight, reserved), and when that answer is ready (``time.monotonic()``)."""

    digest: str
    answer: bytes | None
    ready: float

    @property
    def size(self) -> int:
        return 0 if self.answer is None else len(self.answer)


class State:
    """Positions, draws, tokens, outage clocks and journal of one server; thread-safe.

    At most *max_sessions* sessions are remembered: when a new one would
    exceed that, the one least recently used is forgotten (and starts
    afresh, as after a reset, if it comes back), so that a client sending a
    new session name with every request cannot grow memory without bound.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        journal_size: int = DEFAULT_JOURNAL_SIZE,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        journal_bytes: int = DEFAULT_JOURNAL_BYTES,
    ) -> None:
        if journal_size < 1:
            raise ValueError(f"journal_size must be at least 1, not {journal_size}")
        if journal_bytes < 1:
            raise ValueError(f"journal_bytes must be at least 1, not {journal_bytes}")
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self.seed = seed
        self.digest_key = os.urandom(32)  # secrets.token_bytes's; secrets would import hmac
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._journal: deque[_Kept | _Packed] = deque(maxlen=journal_size)
        # Beside it, in step: the bytes of body each entry keeps (body_bytes), and their sum.
        self._sizes: deque[int] = deque(maxlen=journal_size)
        self._sent_bytes = 0
        self.journal_bytes = journal_bytes
        """The most bytes of bodies the journal's entries keep (:data:`DEFAULT_JOURNAL_BYTES`)."""
        self._ids = itertools.count(1)
        # The count's own __next__ (one C call, atomic under the GIL, so no lock: every
        # request takes an id): a method calling next() on it cost a Python call more.
        self.next_id: Callable[[], int] = self._ids.__next__
        """The next entry id, from 1."""
        self._activated: dict[str, float] = {}
        self._generations: dict[str, int] = {}
        self._hidden: tuple[str, ...] = ()
        self._tokens: OrderedDict[str, _Token] = OrderedDict()
        self._keys: OrderedDict[tuple[str, str, str], _Remembered] = OrderedDict()
        """Idempotency keys by (session, skill, key), least recently used first."""
        self._keys_bytes = 0
        self._buckets: OrderedDict[str, tuple[float, float, float]] = OrderedDict()
        """Buckets no session owns, by key, least recently spent first: their tokens, when
        they were counted and when they are full again (then as good as gone)."""
        self._tasks = TaskRecords()
        """Long-running tasks, kept for the time their Submit and Touches ask (then
        forgotten): their clock is epoch ms, as a shared store's (one for every replica)."""

    def _session(self, name: str) -> _Session:
        """*name*'s record, now the most recently used (hold the lock)."""
        session = self._sessions.get(name)
        if session is None:
            session = self._sessions[name] = _Session()
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(name)
        return session

    remote = False
    """Needs are answered inline (:meth:`answer`): nothing to await."""
    replica: str | None = None
    """An embedded store's journal is this process's alone: no replica to name."""

    def answer(self, need: Need) -> NeedAnswer:
        """Answer *need* now, under one acquisition of the lock (see :mod:`.store`).

        A :class:`~.store.Take`: with a rate limit, a token of its bucket first
        (without one, nothing else); none in its scenario's outage, else the next
        position of its sequence; and the session's next draw number for the
        scenario, if asked. A request matched on an older generation of the key
        (:meth:`restart`) counts on in the sequence it matched, so it never
        takes a position of the restarted one.
        """
        if type(need) is Take:  # nearly every need, a sequence step: here, not in a call
            # Unpacked at once: a NamedTuple's fields read one by one are slow attribute
            # lookups (LOAD_ATTR does not specialise for them).
            session, key, generation, _, outage, draws, limit = need
            with self._lock:
                record = self._session(session)
                spent = None
                if limit is not None:  # a token first, under the same lock
                    spent = self._spend(session, record, limit)
                    if not spent[ADMITTED]:  # refused: not played, nothing else taken
                        return _new(Taken, (None, -1, spent))
                if draws or outage is not None:
                    return self._take_slow(record, need, spent)
                if generation != self._generations.get(key, 0):
                    return _new(Taken, (self._retired(record, key, generation), -1, spent))
                positions = record.positions
                position = positions.get(key, 0)
                positions[key] = position + 1
                return _new(Taken, (position, -1, spent))
        if type(need) is Touch:  # a poll of a task: the other need made per request
            with self._lock:
                return self._tasks.touch(need, time.time() * 1000)
        if isinstance(need, UseToken):
            return self._use_token(need.token)
        if isinstance(need, IssueToken):
            self._issue_token(need)
            return None
        if isinstance(need, ReadState):
            with self._lock:  # (not made, nor made the most recent, by a read)
                known = self._sessions.get(need.session)
                return None if known is None else known.states.get(need.scenario)
        if isinstance(need, SetState):
            with self._lock:
                self._session(need.session).states[need.scenario] = need.state
            return None
        if isinstance(need, Recall):
            return self._recall(need)
        if isinstance(need, Settle):
            self._settle(need)
            return None
        if type(need) is Submit:
            with self._lock:
                return self._tasks.submit(need, time.time() * 1000)
        if type(need) is Claim:
            with self._lock:
                return self._tasks.claim(need, time.time() * 1000)
        raise TypeError(f"not a need: {need!r}")

    def _take_slow(self, record: _Session, need: Take, spent: Spent | None) -> Taken:
        """:meth:`answer` for a Take with draws or an outage window, its limit's token
        *spent* (admitted) already, if it has one (hold the lock)."""
        _, key, generation, scenario, outage, draws, _ = need  # (see answer)
        draw = -1
        if draws:
            counts = record.draws
            draw = counts[scenario] = counts.get(scenario, -1) + 1
        if outage is not None:
            elapsed_ms = (time.monotonic() - self._activated.get(scenario, 0.0)) * 1000
            if outage[0] <= elapsed_ms < outage[1]:
                return _new(Taken, (None, draw, spent))
        if generation != self._generations.get(key, 0):
            return _new(Taken, (self._retired(record, key, generation), draw, spent))
        positions = record.positions
        position = positions[key] = positions.get(key, 0) + 1
        return _new(Taken, (position - 1, draw, spent))

    def _spend(self, session: str, record: _Session, bucket: Bucket) -> Spent:
        """Spend a token of *bucket* (:func:`.buckets.spend`) for a request of *session*
        (*record*; hold the lock). A refusal changes nothing: the bucket refills the same
        from its last count.

        A session's bucket is kept with its session (a reset of the session forgets it);
        the others in a table bounded by :data:`MAX_BUCKETS`.
        """
        key, capacity, refill, owner = bucket
        now = time.monotonic()
        if owner is not None:
            buckets = (record if owner == session else self._session(owner)).buckets
            counted = buckets.get(key)  # (a default would be a tuple made per request)
            tokens, at = (capacity, now) if counted is None else counted
            tokens, spent = spend(capacity, refill, tokens, now - at)
            if spent[ADMITTED]:  # admitted
                buckets[key] = (tokens, now)
            return spent
        shared = self._buckets
        held = shared.get(key)
        tokens, at, _ = (capacity, now, now) if held is None else held
        tokens, spent = spend(capacity, refill, tokens, now - at)
        if spent[ADMITTED]:  # admitted
            shared[key] = (tokens, now, now + spent[FULL_MS] / 1000)  # (when full again)
            if held is not None:
                shared.move_to_end(key)
                return spent
            # A new bucket: the least recently spent go first, past the bound (one comes
            # back full) or once full again (a fresh one is the same). Looked at as new
            # ones come, the table holds the buckets still refilling, and the new one.
            while True:
                oldest, (_, _, full) = next(iter(shared.items()))
                if full > now and len(shared) <= MAX_BUCKETS:
                    break
                del shared[oldest]
        return spent

    def _recall(self, need: Recall) -> Recalled:
        """:meth:`answer` for a :class:`Recall`: the key's first execution, or reserve it."""
        name = (need.session, need.skill, need.key)
        now = time.monotonic()
        with self._lock:
            known = self._keys.get(name)
            if known is None or (known.answer is None and now >= known.ready):
                self._keep(name, _Remembered(need.digest, None, now + need.reserve_ms / 1000))
                return Recalled("new")
            self._keys.move_to_end(name)
            if known.digest != need.digest:
                return Recalled("conflict")
            if known.answer is None or now < known.ready:
                return Recalled("in_flight", None, max(1, round((known.ready - now) * 1000)))
            return Recalled("replay", known.answer)

    def _settle(self, need: Settle) -> None:
        """:meth:`answer` for a :class:`Settle`: keep the key's first answer, or forget it."""
        name = (need.session, need.skill, need.key)
        with self._lock:
            known = self._keys.get(name)
            if known is None or known.digest != need.digest or known.answer is not None:
                return  # forgotten meanwhile (a reset, the bound), or another's
            if need.answer is None:
                del self._keys[name]
            else:
                ready = time.monotonic() + need.busy_ms / 1000
                self._keep(name, _Remembered(need.digest, need.answer, ready))

    def _keep(self, name: tuple[str, str, str], remembered: _Remembered) -> None:
        """Remember *remembered*, the least recently used forgotten past the bounds (hold
        the lock)."""
        keys = self._keys
        old = keys.pop(name, None)
        self._keys_bytes += remembered.size - (0 if old is None else old.size)
        keys[name] = remembered
        while len(keys) > MAX_IDEMPOTENCY_KEYS or (
            self._keys_bytes > MAX_IDEMPOTENCY_BYTES and len(keys) > 1
        ):
            _, gone = keys.popitem(last=False)
            self._keys_bytes -= gone.size

    def _retired(self, record: _Session, key: str, generation: int) -> int:
        """The next position of *key* in an older *generation* than the current one, for a
        request matched before a restart (hold the lock)."""
        last, position = record.retired.get(key, (generation, 0))
        position = position if last == generation else 0
        record.retired[key] = (generation, position + 1)
        return position

    async def answer_async(self, need: Need) -> NeedAnswer:
        """The same as :meth:`answer` (memory does not wait): for a driver that awaits."""
        return self.answer(need)

    def restart(self, keys: Iterable[str]) -> dict[str, int]:
        """Restart sequences *keys* for every session: a new generation of each; return all.

        The engine builds each routing table on the generations this
        returns (a :class:`~.store.Take` names the one it matched on), so that a request matched on
        an older table cannot take position 0 of a restarted sequence.
        """
        with self._lock:
            self._restart(set(keys), None, new_generation=True)
            return dict(self._generations)

    def _restart(
        self, keys: set[str], session: str | None, *, new_generation: bool = False
    ) -> None:
        """Positions of *keys* start afresh, for *session* or every one (hold the lock).

        With *new_generation* (for every session: a new table is served), the
        positions taken so far are kept for the requests still in flight on the
        old generation; else the table served stays, and so does its generation.
        """
        if new_generation:
            for key in keys:
                self._generations[key] = self._generations.get(key, 0) + 1
        for name, record in self._sessions.items():
            if session is None or name == session:
                for key in keys & (record.positions.keys() | record.retired.keys()):
                    position = record.positions.pop(key, None)
                    if new_generation and position is not None:
                        record.retired[key] = (self._generations[key] - 1, position)
                    else:
                        record.retired.pop(key, None)

    def record(self, entry: Entry) -> None:
        """Keep *entry*, its texts cut to bounds (:data:`MAX_PATH` ...), secrets hidden.

        It is kept as it is and shown (:func:`~.entries.kept`) when the journal
        is first read; one holding a text over its bound is shown at once, so
        that no entry holds more than its bounds in the meantime.
        """
        # _Kept's slots set here, not through its __init__: a call less on every request.
        slot = _new_slot(_Kept)
        slot.recorded, slot.hidden, slot.built = entry, self._hidden, None
        if oversized(entry):
            slot.entry()
        body = entry.body  # (body_bytes, read here: this runs for every request)
        size = 0 if body is None else len(body)
        with self._lock:
            sizes = self._sizes
            if len(sizes) == sizes.maxlen:  # the oldest goes with this one (deque's maxlen)
                self._sent_bytes -= sizes[0]
            self._journal.append(slot)
            sizes.append(size)
            self._sent_bytes += size
            while self._sent_bytes > self.journal_bytes and len(sizes) > 1:
                self._sent_bytes -= sizes.popleft()
                self._journal.popleft()

    def hide(self, secret: str) -> None:
        """Never keep *secret* (the admin token) in the journal: it reads :data:`MASK`.

        It applies to what is recorded from then on (:meth:`record` takes the
        secrets hidden at the time)."""
        if secret and secret not in self._hidden:
            self._hidden = (*self._hidden, secret)

    @property
    def capacity(self) -> int:
        """How many entries the journal keeps (the oldest go first beyond it)."""
        maxlen = self._journal.maxlen
        assert maxlen is not None
        return maxlen

    def journal(self, session: str | None = None) -> list[Entry]:
        """Recorded requests, oldest first, optionally of one session."""
        with self._lock:
            slots = list(self._journal)
        entries = _entries(slots)
        if session is None:
            return entries
        return [e for e in entries if e.session == session]

    def reset(self, session: str | None = None, keys: Iterable[str] | None = None) -> None:
        """Forget what was played: everything, one session's, or some sequences' positions.

        Everything, or a whole session, means positions, draw counts, scenario
        states, idempotency keys, rate limits' buckets (a session's: those it owns),
        long-running tasks (and their numbering) and journal entries (and everything: issued
        tokens and every bucket); *keys* name sequences whose positions alone restart (the
        states stay).
        """
        with self._lock:
            if keys is not None:
                self._restart(set(keys), session)
            elif session is None:
                self._sessions.clear()
                self._journal.clear()
                self._sizes.clear()
                self._sent_bytes = 0
                self._tokens.clear()
                self._keys.clear()
                self._keys_bytes = 0
                self._buckets.clear()
                self._tasks.forget()
            else:
                self._sessions.pop(session, None)
                self._tasks.forget(session)
                for name in [n for n in self._keys if n[0] == session]:
                    self._keys_bytes -= self._keys.pop(name).size
                kept = [e for e in _entries(list(self._journal)) if e.session != session]
                self._journal = deque(map(_Kept.of, kept), maxlen=self._journal.maxlen)
                self._sizes = deque(map(body_bytes, kept), maxlen=self._sizes.maxlen)
                self._sent_bytes = sum(self._sizes)

    def compact(self, budget: int = COMPACT_SLICE) -> bool:
        """Pack up to *budget* journal slots, oldest first, into bytes; True once all are.

        For after a flood of connections (the server calls it before it trims
        the heap, in slices on its loop: a call takes a few milliseconds). The
        flood's entries were made among its connections' objects and would keep
        their memory from the system: packed, they take a fraction of theirs and
        hold none of it. Nothing read changes: the journal reads the same entries,
        ids and order, the secrets hidden since they were recorded still not masked.
        """
        with self._lock:
            slots = list(self._journal)
            start = _packed_up_to(slots)
            end = min(start + budget, len(slots))
            if start == end:
                return True
            for first in range(start, end, COMPACT_BATCH):
                last = min(first + COMPACT_BATCH, end)
                slots[first:last] = [_Packed(cast(list[_Kept], slots[first:last]))] * (last - first)
            self._journal = deque(slots, maxlen=self._journal.maxlen)
            return end == len(slots)

    def _issue_token(self, need: IssueToken) -> None:
        """Remember an issued token (the oldest are forgotten beyond *max_sessions*)."""
        expires = None if need.seconds is None else time.monotonic() + need.seconds
        with self._lock:
            self._tokens[need.token] = _Token(need.scopes, expires, need.uses)
            while len(self._tokens) > self.max_sessions:
                self._tokens.popitem(last=False)

    def _use_token(self, token: str) -> frozenset[str] | None:
        """The scopes of an issued token, spending one of its uses; None if unknown or expired."""
        with self._lock:
            issued = self._tokens.get(token)
            if issued is None:
                return None
            if issued.expires is not None and time.monotonic() >= issued.expires:
                del self._tokens[token]
                return None
            if issued.uses_left is not None:
                if issued.uses_left <= 0:
                    del self._tokens[token]
                    return None
                issued.uses_left -= 1
            return issued.scopes

    def activate(self, names: Iterable[str]) -> None:
        """Note that scenarios *names* start now (for their outage windows)."""
        now = time.monotonic()
        with self._lock:
            for name in names:
                self._activated[name] = now

    def health(self) -> Health:
        """Memory is always there."""
        return Health("ok")

    def close(self) -> None:
        """Nothing to let go of."""
