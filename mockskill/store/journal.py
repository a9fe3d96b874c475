"""The shared journal: every replica's requests in one capped Redis stream.

:class:`RedisJournal` is the journal half of the Redis store (the store owns
the client and delegates here). A request's entry is recorded on the
caller's thread — the event loop, for every request — so :meth:`record`
only queues it: a flusher thread builds each entry as the journal shows it
(:func:`~mockskill.engine.entries.kept`: bounds, escaping, the secrets hidden
when it was recorded), names the replica, encodes it as JSON (replicas may
run different Pythons: nothing marshalled or pickled crosses processes) and
sends a batch as ONE script call. The script numbers the batch from a global
counter (an entry's id is unique across replicas and increases in append
order) and adds it to the stream, trimmed to exactly the journal's capacity.
An entry's values are a JSON array; the names they go by (its schema: a
version's Entry fields) are kept once in a hash, so that replicas of two
versions read each other's entries by name.

What cannot be kept is counted, never raised to the caller: the queue holds
at most *capacity* entries (when Redis is away the oldest go first), and a
batch Redis did not take is lost whole (sent again, a batch whose reply was
lost would be journalled twice). :attr:`RedisJournal.lost` counts both.

Reads (:meth:`~RedisJournal.entries`) and clears send this replica's queue
first, so a replica reads its own writes; another replica's entries show
once its flusher sent them (a batch's round trip, under load a few ms).
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..engine.entries import Entry, Recorded, kept, oversized, shown_changes
from ..protocol.catalog import Retry

if TYPE_CHECKING:
    import redis

MAX_BATCH = 256
"""Entries sent in one script call at most (some 50 KB, which Redis adds in 1-2 ms): a
bigger backlog goes as several calls, so that no call holds Redis (every replica's
requests wait behind it) for long."""
READ_PAGE = 1000
"""Stream entries read per XRANGE: a read of the whole journal is several short calls."""
FLUSH_TIMEOUT = 5.0
"""Seconds a read or clear waits for this replica's queue to be sent before it reads."""
RETRY_AFTER = (0.05, 1.0)
"""Seconds the flusher waits before it sends again after a failed batch: the first
wait, doubled on each failure up to the second (Redis away is not a busy loop)."""

# Each entry of the stream: i = its id, s = its session as shown (what a session's read
# or clear compares, without decoding), k = its schema (the names of e's values), e = the
# entry's values but its id, as a JSON array.
_APPEND = """
redis.call('HSETNX', KEYS[3], ARGV[2], ARGV[3])
local n = (#ARGV - 3) / 2
local last = redis.call('INCRBY', KEYS[2], n)
local id = last - n
for k = 4, #ARGV, 2 do
  id = id + 1
  redis.call('XADD', KEYS[1], '*', 'i', id, 's', ARGV[k], 'k', ARGV[2], 'e', ARGV[k + 1])
end
redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', ARGV[1])
return last
"""
"""KEYS: the stream, the id counter, the schemas; ARGV: capacity, the schema's key and its
names (JSON), then (session, values) per entry. One INCRBY numbers the batch; one exact
trim keeps the bound (nothing runs between the adds and the trim: no reader sees more
than capacity). The schema is set with every batch (a Redis restarted without it gets
it back with the next)."""

_CLEAR = """
if #ARGV == 0 then
  return redis.call('DEL', KEYS[1])
end
local ids, gone = {}, 0
for _, item in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local f = item[2]
  for k = 1, #f, 2 do
    if f[k] == 's' then
      if f[k + 1] == ARGV[1] then ids[#ids + 1] = item[1] end
      break
    end
  end
  if #ids == 500 then gone = gone + redis.call('XDEL', KEYS[1], unpack(ids)); ids = {} end
end
if #ids > 0 then gone = gone + redis.call('XDEL', KEYS[1], unpack(ids)) end
return gone
"""
"""KEYS: the stream; ARGV: nothing (delete it) or a session (delete its entries): atomic.
The id counter stays: ids keep increasing after a clear, as in memory."""

_NAMES = Recorded._fields[1:]
"""What an entry's JSON holds, in order: every field but the id (the stream's counter's)."""
SCHEMA = json.dumps(_NAMES, separators=(",", ":"))
"""The names of this version's values, as the schemas hash holds them."""
SCHEMA_KEY = hashlib.sha1(SCHEMA.encode()).hexdigest()[:16]
"""How an entry says it holds :data:`SCHEMA`'s values (replicas of another version, with
other fields, write theirs under another key: each reads the other's by its names)."""
_SCHEMA_KEY = SCHEMA_KEY.encode()
_VALUES = operator.attrgetter(*Recorded._fields)
_Slot = tuple[Entry | Recorded, tuple[str, ...] | None]
"""A queued record and the secrets hidden when it was recorded (None: built already)."""
_RETRY = Recorded._fields.index("retry")
_NEAR_MISSES = Recorded._fields.index("near_misses")
_JOURNALS: weakref.WeakSet[RedisJournal] = weakref.WeakSet()
"""Every journal of this process, for :func:`_after_fork`."""
_json = json.JSONEncoder(separators=(",", ":")).encode
"""One encoder (json.dumps with any option makes one per call)."""
_unjson = json.JSONDecoder().decode


def encoded(entry: Entry | Recorded) -> str:
    """*entry*'s values but its id as the stream holds them: a JSON array, in
    :data:`SCHEMA`'s order (the names once per version, not per entry: half the cost)."""
    values: Any = _VALUES(entry)[1:]
    retry = entry.retry
    if retry is not None:
        values = list(values)
        values[_RETRY - 1] = (retry.suggested_delay_ms, retry.max_attempts)
    return _json(values)


def decoded(
    ident: int | bytes | str, text: bytes | str, names: Sequence[str] | None = None
) -> Entry:
    """The entry :func:`encoded` made *text* of, numbered *ident*.

    *names*: the schema it was written in, when not this version's: the
    fields this version knows are taken by name, the others left out, and
    those it does not hold get their defaults (:meth:`Entry.from_json`).
    """
    values = _unjson(text if isinstance(text, str) else text.decode())
    if names is None:
        retry = values[_RETRY - 1]
        if retry is not None:
            values[_RETRY - 1] = Retry(int(retry[0]), int(retry[1]))
        values[_NEAR_MISSES - 1] = tuple(values[_NEAR_MISSES - 1])
        return Entry(int(ident), *values)
    data = dict(zip(names, values, strict=False))
    data["id"] = int(ident)
    retry = data.get("retry")
    if isinstance(retry, list):
        data["retry"] = {"suggested_delay_ms": retry[0], "max_attempts": retry[1]}
    return Entry.from_json(data)


class RedisJournal:
    """The journal of every replica sharing *client*'s Redis, keys under *prefix*.

    Thread-safe: :meth:`record` on any thread (never blocks, never raises);
    the reads and clears block on Redis and raise its errors (the store turns
    them into :class:`~mockskill.engine.store.StoreUnavailable`).
    """

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        capacity: int,
        replica: str | None,
        *,
        start: bool = True,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"the journal's capacity must be at least 1, not {capacity}")
        self.client = client
        self.stream = prefix + "journal"
        self.counter = prefix + "journal:ids"
        self.schemas = prefix + "journal:schemas"
        self.replica = replica
        self._capacity = capacity
        self._append = client.register_script(_APPEND)
        self._clear = client.register_script(_CLEAR)
        self._hidden: tuple[str, ...] = ()
        self._decoded: dict[tuple[bytes, bytes, bytes], Entry] = {}
        """Entries read before, by their stream fields (id, schema and JSON: the same id
        with another text, as after a Redis restart, is decoded afresh)."""
        self._schemas: dict[bytes, tuple[str, ...]] = {}
        """Other versions' schemas read (their names), by key."""
        self._local_ids = iter(range(1, 2**63))
        self.batches = 0
        """Script calls that took a batch (with :attr:`sent`: the batch sizes under load)."""
        self.sent = 0
        """Entries the stream took from this replica."""
        self.trimmed = 0
        """Entries let go from a full queue while Redis took the batches (faster records than
        the flusher sends): the stream would have trimmed them, *capacity* newer ones behind."""
        self._dropped = 0
        self._failed = 0
        self._unencodable = 0
        self._closing = False
        self._error: str | None = None
        self._fresh()
        _JOURNALS.add(self)
        if start:
            self.start()

    def _fresh(self) -> None:
        """An empty queue, its lock and events, and a flusher not yet started."""
        # The queue and its counts, behind one lock (a record holds it for an append):
        self._lock = threading.Lock()
        self._queue: deque[_Slot] = deque(maxlen=self._capacity)
        self._queued = 0
        """How many records were queued, ever: the last one's number."""
        self._done = 0
        """The number of the last record the flusher is done with (sent, lost or dropped)."""
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._done_changed = threading.Condition(self._lock)
        self._flusher = threading.Thread(
            target=self._flush_forever, name="mockskill-journal", daemon=True
        )

    def _after_fork(self) -> None:
        """In a forked child: a flusher of its own (threads do not survive a fork), and not
        the parent's queue (the parent sends that; sent twice, it would be journalled twice)."""
        started = self._flusher.ident is not None
        self._fresh()
        self.batches = self.sent = self.trimmed = 0  # this process's, from now on
        self._dropped = self._failed = self._unencodable = 0
        self._error = None
        if started and not self._closing:
            self._flusher.start()

    def start(self) -> None:
        """Start sending (once): made with ``start=False``, a journal only queues until then."""
        self._flusher.start()

    @property
    def capacity(self) -> int:
        """How many entries the journal keeps (the oldest go first beyond it)."""
        return self._capacity

    @property
    def lost(self) -> int:
        """Entries recorded here that the journal could not keep: dropped from the full
        queue while Redis was away, or in a batch Redis did not take (not :attr:`trimmed`)."""
        return self._dropped + self._failed + self._unencodable

    @property
    def error(self) -> str | None:
        """Why the last batch failed, until one is sent again; None when the last was sent."""
        return self._error

    def next_id(self) -> int:
        """A provisional id (the stream renumbers every entry: see :meth:`record`)."""
        return next(self._local_ids)

    def hide(self, secret: str) -> None:
        """Never keep *secret* in the journal from now on: it reads ``***``."""
        if secret and secret not in self._hidden:
            self._hidden = (*self._hidden, secret)

    def record(self, entry: Entry | Recorded) -> None:
        """Queue *entry* for the stream; it is numbered there. Never blocks, never raises.

        One holding a text over its bound is built at once (as in memory), so
        that the queue holds no more than bounded entries meanwhile.
        """
        hidden: tuple[str, ...] | None = self._hidden
        if oversized(entry):
            entry, hidden = kept(entry, self._hidden), None  # built: shown as is (cut once)
        with self._lock:
            queue = self._queue
            if not queue:
                self._wake.set()  # only from empty: a busy flusher is not woken per record
            elif len(queue) == self._capacity:  # the oldest goes (the deque's bound):
                if self._error is None:
                    self.trimmed += 1  # as the stream would, behind *capacity* newer ones
                else:
                    self._dropped += 1  # Redis is away: it might have shown until it was back
            queue.append((entry, hidden))
            self._queued += 1

    def flush(self, timeout: float | None = FLUSH_TIMEOUT) -> bool:
        """Wait until everything recorded before the call is sent (or lost); True if it was.

        Records arriving meanwhile do not hold it up. A flusher waiting after a
        failure tries again at once.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._queued
            while self._done < target and self._flusher.is_alive():
                self._hurry.set()
                self._wake.set()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done_changed.wait(left)
            return self._done >= target

    def entries(self, session: str | None = None) -> list[Entry]:
        """Every replica's entries, oldest first, optionally of one *session* (as shown).

        This replica's queue is sent first (read-your-writes here); another
        replica's entries show once its flusher has sent them.
        """
        self._send_queued()
        wanted = None if session is None else _utf8(session)
        cache: dict[tuple[bytes, bytes, bytes], Entry] = self._decoded
        seen: dict[tuple[bytes, bytes, bytes], Entry] = {}
        entries: list[Entry] = []
        start: bytes | str = "-"
        while True:  # in pages: no one call holds Redis (every replica's requests) for long
            page = cast(
                list[tuple[Any, dict[Any, Any]]],
                self.client.xrange(self.stream, start, "+", count=READ_PAGE),
            )
            for _, item in page:
                fields = {_bytes(k): v for k, v in item.items()}
                if wanted is not None and _bytes(fields.get(b"s", b"")) != wanted:
                    continue
                key = (_bytes(fields[b"i"]), _bytes(fields.get(b"k", b"")), _bytes(fields[b"e"]))
                entry = cache.get(key)
                if entry is None:
                    entry = self._decoded_entry(*key)
                    if entry is None:
                        continue
                seen[key] = entry
                entries.append(entry)
            if len(page) < READ_PAGE:
                break
            start = b"(" + _bytes(page[-1][0])
        # What was read is what the next read decodes no more: the whole journal (a bound on
        # the cache) after a full read, what is added to it after a session's.
        if session is None:
            self._decoded = seen
        elif len(cache) + len(seen) <= 2 * self._capacity:
            cache.update(seen)
        return entries

    def _decoded_entry(self, ident: bytes, schema: bytes, text: bytes) -> Entry | None:
        """The entry of stream fields *ident*, *schema*, *text*; None when no schema of that
        key is known (its entry cannot be read: a hash lost, not a replica's version)."""
        if schema == _SCHEMA_KEY:
            return decoded(ident, text)
        names = self._schemas.get(schema)
        if names is None:
            found = self.client.hget(self.schemas, schema)
            if found is None:
                return None
            names = self._schemas[schema] = tuple(_unjson(_bytes(found).decode()))
        return decoded(ident, text, names)

    def clear(self, session: str | None = None) -> None:
        """Forget every entry, or *session*'s, of every replica (what this one queued too)."""
        self._send_queued()
        self._clear(keys=[self.stream], args=[] if session is None else [_utf8(session)])

    def _send_queued(self) -> None:
        """Send what this replica queued before a read or clear. A flusher waiting to try
        again after a failure tries at once: Redis back, what was queued is read; still
        away, the batch fails within the client's timeout (and so will the read)."""
        self.flush(FLUSH_TIMEOUT)

    def close(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Send what is queued (within *timeout*) and stop the flusher."""
        self.flush(timeout)
        with self._lock:
            self._closing = True
            self._wake.set()
            self._hurry.set()
        if self._flusher.is_alive():
            self._flusher.join(timeout)

    # -- the flusher ---------------------------------------------------------------------------

    def _flush_forever(self) -> None:
        wait = RETRY_AFTER[0]
        while True:
            self._wake.wait()
            with self._lock:
                batch = list(self._take())
                if not batch:
                    if self._closing:
                        return
                    self._wake.clear()
                    continue
                last = self._queued - len(self._queue)
            try:
                args = self._encoded(batch)
                self._append(keys=[self.stream, self.counter, self.schemas], args=args)
            except Exception as error:  # whatever failed, the caller never sees it
                failed = True
                self._error = f"{type(error).__name__}: {error}"
            else:
                failed = False
                self._error = None
                self.batches += 1
                self.sent += (len(args) - 3) // 2  # but any that could not be encoded
                wait = RETRY_AFTER[0]
            with self._lock:
                if failed:
                    self._failed += len(batch)
                self._done = last
                self._done_changed.notify_all()
                closing = self._closing
            if failed and not closing:
                self._hurry.wait(wait)  # not a busy loop while Redis is away
                self._hurry.clear()
                wait = min(wait * 2, RETRY_AFTER[1])

    def _take(self) -> Iterator[_Slot]:
        """The oldest queued, up to :data:`MAX_BATCH` (hold the lock)."""
        queue = self._queue
        for _ in range(min(len(queue), MAX_BATCH)):
            yield queue.popleft()

    def _encoded(self, batch: list[_Slot]) -> list[Any]:
        """The script's arguments for *batch*: capacity, schema, then (session, JSON) per entry."""
        args: list[Any] = [self._capacity, SCHEMA_KEY, SCHEMA]
        replica = self.replica
        for recorded, hidden in batch:
            try:
                values = _shown(recorded, hidden, replica)
                args += (_utf8(values[_SESSION]), _json(values).encode())
            except Exception:  # one entry that cannot be encoded is lost, not the batch
                self._unencodable += 1
        return args


def _utf8(text: str) -> bytes:
    """*text* as Redis keeps it; a lone surrogate (a client's undecodable byte) too."""
    return text.encode("utf-8", "surrogatepass")


def _bytes(value: bytes | str) -> bytes:
    """A reply's value as bytes, whether the client decodes replies or not."""
    return value if isinstance(value, bytes) else _utf8(value)


_new_recorded = tuple.__new__
_SESSION = Recorded._fields.index("session") - 1
"""Where an entry's session is in :func:`_shown`'s values (they leave the id out)."""


def _shown(
    recorded: Entry | Recorded, hidden: tuple[str, ...] | None, replica: str | None
) -> list[Any]:
    """*recorded*'s values but its id as the stream holds them (what :func:`encoded` makes
    of what :func:`kept` shows), naming *replica*. *hidden* None: *recorded* is kept's
    already (an oversized one, built when recorded): cut again, its marker would lie.

    Plain values, not the Entry :func:`kept` would build (a frozen dataclass of
    29 fields costs several of these): the stream holds only their JSON.
    """
    values: list[Any] = list(recorded if type(recorded) is Recorded else _VALUES(recorded))
    changes = None if hidden is None else shown_changes(recorded, hidden)  # most often none
    if changes:
        for name, value in changes.items():
            values[_INDEX[name]] = value
    retry = values[_RETRY]
    if retry is not None:
        values[_RETRY] = (retry.suggested_delay_ms, retry.max_attempts)
    if replica is not None:
        values[-1] = replica  # replica is the last field
    del values[0]
    return values


_INDEX = {name: i for i, name in enumerate(Recorded._fields)}


def _after_fork() -> None:
    for journal in list(_JOURNALS):
        journal._after_fork()


os.register_at_fork(after_in_child=_after_fork)
