"""The shared journal: every replica's requests in one capped Redis stream.

:class:`RedisJournal` is the journal half of the Redis store (the store owns
the client and delegates here). An entry is recorded on the caller's thread,
so recording only queues it. Records made on the event loop (every skill
request's) are queued there and sent in the loop's own batches
(:mod:`.loop_journal`, one of :attr:`RedisJournal.loops` per loop); those
made on other threads (the WSGI face, admin) go to this module's queue, which
a flusher thread sends with the blocking client. Either way, a batch is
built as the journal shows it and encoded (:mod:`.stream_entries`), and sent
as ONE script call. The script numbers the batch from a global counter (an
entry's id is unique across replicas and increases in append order) and adds
it to the stream, trimmed to exactly the journal's capacity.

What cannot be kept is counted, never raised to the caller. Each batch is
numbered and the script takes a number once (:class:`~.stream_entries.Batch`):
a batch whose reply did not come (Redis frozen past the timeout may still
take it, or gone, never) is held and sent again, first, until Redis answers,
and counted as it says. What is held, queued or to send again, is at most
*capacity* entries (when Redis is away the oldest go first):
:attr:`RedisJournal.lost` counts only those, and only the ones the journal
does not hold.

Reads (:meth:`~RedisJournal.entries`) and clears send this replica's queues
first (each loop's too: the loop is asked to, and waited for), so a replica
reads its own writes; another replica's entries show once it sent them (a
batch's round trip, under load a few ms).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..engine.entries import Entry, kept, oversized
from .stream_entries import (
    APPEND,
    MAX_BATCH,
    SCHEMA,
    SCHEMA_KEY,
    SCHEMA_KEY_BYTES,
    Batch,
    Slot,
    as_bytes,
    decoded,
    encoded,
    stream_fields,
    utf8,
    writer_key,
)

if TYPE_CHECKING:
    import redis

__all__ = ["SCHEMA", "SCHEMA_KEY", "RedisJournal", "decoded", "encoded"]

READ_PAGE = 1000
"""Stream entries read per XRANGE: a read of the whole journal is several short calls."""
FLUSH_TIMEOUT = 5.0
"""Seconds a read or clear waits for this replica's queue to be sent before it reads."""
RETRY_AFTER = (0.05, 1.0)
"""Seconds the flusher waits before it sends again after a failed batch: the first
wait, doubled on each failure up to the second (Redis away is not a busy loop)."""

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


class LoopQueue(Protocol):
    """A loop's queue of records (:class:`~.loop_journal.LoopJournal`), as this journal
    counts it and has it send its queue."""

    error: str | None
    batches: int
    sent: int
    trimmed: int
    dropped: int
    failed: int
    unencodable: int

    def flush(self, timeout: float) -> bool: ...


_JOURNALS: weakref.WeakSet[RedisJournal] = weakref.WeakSet()
"""Every journal of this process, for :func:`_after_fork`."""


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
        self.prefix = prefix
        self.stream = prefix + "journal"
        self.counter = prefix + "journal:ids"
        self.schemas = prefix + "journal:schemas"
        self.replica = replica
        self._capacity = capacity
        self._append = client.register_script(APPEND)
        self._clear = client.register_script(_CLEAR)
        self._hidden: tuple[str, ...] = ()
        self._decoded: dict[tuple[bytes, bytes, bytes], Entry] = {}
        """Entries read before, by their stream fields (id, schema and JSON: the same id
        with another text, as after a Redis restart, is decoded afresh)."""
        self._schemas: dict[bytes, tuple[str, ...]] = {}
        """Other versions' schemas read (their names), by key."""
        self._local_ids = iter(range(1, 2**63))
        self.loops: list[LoopQueue] = []
        """The queues of the event loops recording here (:meth:`attach`)."""
        self._batches = 0
        self._sent = 0
        self._trimmed = 0
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
        self._queue: deque[Slot] = deque()
        self._again: deque[Batch] = deque()
        """Batches whose reply did not come (or not sent), oldest first: sent before the queue."""
        self._held_again = 0
        """The entries :attr:`_again` holds (with the queue's, at most the capacity)."""
        self._writer = writer_key(self.prefix)
        self._numbers = itertools.count(1)
        self._failures = 0
        """Sends that failed, ever (a flush waiting learns that Redis is away)."""
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
        self.loops = []  # the parent's loops are not the child's (nor what they hold)
        self._batches = self._sent = self._trimmed = 0  # this process's, from now on
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
        """Entries recorded here that the journal could not keep: dropped from a full
        queue while Redis was away, or in a batch Redis did not take (not :attr:`trimmed`)."""
        lost = self._dropped + self._failed + self._unencodable
        return lost + sum(loop.dropped + loop.failed + loop.unencodable for loop in self.loops)

    @property
    def trimmed(self) -> int:
        """Entries let go from a full queue while Redis took the batches (faster records than
        they are sent): the stream would have trimmed them, *capacity* newer ones behind."""
        return self._trimmed + sum(loop.trimmed for loop in self.loops)

    @property
    def batches(self) -> int:
        """Script calls that took a batch (with :attr:`sent`: the batch sizes under load)."""
        return self._batches + sum(loop.batches for loop in self.loops)

    @property
    def sent(self) -> int:
        """Entries the stream took from this replica."""
        return self._sent + sum(loop.sent for loop in self.loops)

    @property
    def error(self) -> str | None:
        """Why the last batch failed, until one is sent again; None when the last was sent
        (the flusher's, else a loop's)."""
        return self._error or next((loop.error for loop in self.loops if loop.error), None)

    def attach(self, loop: LoopQueue) -> None:
        """Count *loop*'s queue with this journal's, and send it before each read or clear."""
        self.loops.append(loop)

    def adopt(self, slots: Iterable[Slot], again: Iterable[Batch] = ()) -> None:
        """Queue *slots* and the batches to send *again* (what a loop can no longer send:
        it stopped) for the flusher."""
        with self._lock:
            for batch in again:
                batch.last = 0  # (the loop's record numbers, not this queue's)
                self._again.append(batch)
                self._held_again += len(batch.entries)
            self._make_room(0)
            for slot in slots:
                self._append_slot(slot)
            self._wake.set()

    def next_id(self) -> int:
        """A provisional id (the stream renumbers every entry: see :meth:`record`)."""
        return next(self._local_ids)

    def hide(self, secret: str) -> None:
        """Never keep *secret* in the journal from now on: it reads ``***``."""
        if secret and secret not in self._hidden:
            self._hidden = (*self._hidden, secret)

    def record(self, entry: Entry) -> None:
        """Queue *entry* for the stream; it is numbered there. Never blocks, never raises.

        One holding a text over its bound is built at once (as in memory), so
        that the queue holds no more than bounded entries meanwhile.
        """
        slot = self.slot(entry)
        with self._lock:
            self._append_slot(slot)

    def slot(self, entry: Entry) -> Slot:
        """What a queue holds for *entry*: it and the secrets hidden now. One holding a text
        over its bound is built at once (as in memory): a queue holds bounded entries only."""
        if oversized(entry):
            return kept(entry, self._hidden), None  # built: shown as is (cut once)
        return entry, self._hidden

    def _append_slot(self, slot: Slot) -> None:
        """Queue *slot* (hold the lock)."""
        queue = self._queue
        if not queue:
            self._wake.set()  # only from empty: a busy flusher is not woken per record
        self._make_room(1)
        queue.append(slot)
        self._queued += 1

    def _make_room(self, more: int) -> None:
        """Let the oldest held go until *more* fit within the capacity (hold the lock): those
        to send again first (whether Redis has them, their batch's next send tells), then
        the queue's."""
        queue = self._queue
        over = len(queue) + self._held_again + more - self._capacity
        while over > 0 and self._held_again:
            next(b for b in self._again if b.entries).let_go()
            self._held_again -= 1
            over -= 1
        for _ in range(min(over, len(queue))):
            queue.popleft()
            if self._error is None:
                self._trimmed += 1  # as the stream would, behind *capacity* newer ones
            else:
                self._dropped += 1  # Redis is away: it might have shown until it was back

    def flush(self, timeout: float | None = FLUSH_TIMEOUT) -> bool:
        """Wait until everything recorded before the call is sent (or lost); True if it was.

        Records arriving meanwhile do not hold it up. A flusher waiting after a
        failure tries again at once; False when that fails too (Redis away: what
        is held is sent once it is back).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._queued
            failures = self._failures
            while self._done < target and self._flusher.is_alive():
                if self._failures != failures:
                    return False
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
        wanted = None if session is None else utf8(session)
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
                fields = {as_bytes(k): v for k, v in item.items()}
                if wanted is not None and as_bytes(fields.get(b"s", b"")) != wanted:
                    continue
                key = (
                    as_bytes(fields[b"i"]),
                    as_bytes(fields.get(b"k", b"")),
                    as_bytes(fields[b"e"]),
                )
                entry = cache.get(key)
                if entry is None:
                    entry = self._decoded_entry(*key)
                    if entry is None:
                        continue
                seen[key] = entry
                entries.append(entry)
            if len(page) < READ_PAGE:
                break
            start = b"(" + as_bytes(page[-1][0])
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
        if schema == SCHEMA_KEY_BYTES:
            return decoded(ident, text)
        names = self._schemas.get(schema)
        if names is None:
            found = self.client.hget(self.schemas, schema)
            if found is None:
                return None
            names = self._schemas[schema] = tuple(json.loads(as_bytes(found).decode()))
        return decoded(ident, text, names)

    def clear(self, session: str | None = None) -> None:
        """Forget every entry, or *session*'s, of every replica (what this one queued too)."""
        self._send_queued()
        self._clear(keys=[self.stream], args=[] if session is None else [utf8(session)])

    def _send_queued(self) -> None:
        """Send what this replica queued before a read or clear: each loop's (the loop
        sends it, this thread waits), then the flusher's. One waiting to try again after a
        failure tries at once: Redis back, what was queued is read; still away, the batch
        fails within the timeout (and so will the read)."""
        for loop in list(self.loops):
            loop.flush(FLUSH_TIMEOUT)
        self.flush(FLUSH_TIMEOUT)

    def close(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Send what is queued (within *timeout*) and stop the flusher. A loop still running
        sends its queue; what a loop stopped without sending holds is sent from here."""
        for loop in list(self.loops):
            loop.flush(timeout)
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
            batch = self._next_batch()
            if batch is None:
                return
            args: list[Any] = [self._capacity, SCHEMA_KEY, SCHEMA, batch.number]
            for pair in batch.entries:
                args += pair
            keys = [self.stream, self.counter, self.schemas, batch.writer]
            try:
                reply = self._append(keys=keys, args=args) if batch.size else 0
            except Exception as error:  # whatever failed, the caller never sees it
                failed = True
                self._error = f"{type(error).__name__}: {error}"
            else:
                failed = False
                self._error = None
                wait = RETRY_AFTER[0]
            with self._lock:
                if failed:  # held again, first: sent again (the script takes it once)
                    self._failures += 1
                    self._again.appendleft(batch)
                    self._held_again += len(batch.entries)
                    self._make_room(0)
                else:
                    taken, missing = batch.counted(int(reply))
                    self._batches += 1 if batch.size else 0
                    self._sent += taken
                    self._failed += missing
                    self._done = max(self._done, batch.last)
                self._done_changed.notify_all()
                closing = self._closing
            if failed:
                if closing:
                    return  # (what is held is not sent: the journal is closed)
                self._hurry.wait(wait)  # not a busy loop while Redis is away
                self._hurry.clear()
                wait = min(wait * 2, RETRY_AFTER[1])

    def _next_batch(self) -> Batch | None:
        """The batch to send now, taken: the oldest to send again, else the queue's oldest
        as a new one (encoded off the lock), waiting for one; None once closing with
        nothing held."""
        while True:
            with self._lock:
                if self._again:
                    batch = self._again.popleft()
                    self._held_again -= len(batch.entries)
                    return batch
                slots = list(self._take())
                if slots:
                    last = self._queued - len(self._queue)
                    break
                if self._closing:
                    return None
                self._wake.clear()
            self._wake.wait()
        return Batch(self._writer, next(self._numbers), self._encoded(slots), last)

    def _take(self) -> Iterator[Slot]:
        """The oldest queued, up to :data:`MAX_BATCH` (hold the lock)."""
        queue = self._queue
        for _ in range(min(len(queue), MAX_BATCH)):
            yield queue.popleft()

    def _encoded(self, batch: list[Slot]) -> list[tuple[bytes, bytes]]:
        """Each entry of *batch* as the script takes it: its session and its JSON."""
        entries = []
        replica = self.replica
        for slot in batch:
            try:
                entries.append(stream_fields(slot, replica))
            except Exception:  # one entry that cannot be encoded is lost, not the batch
                self._unencodable += 1
        return entries


def _after_fork() -> None:
    for journal in list(_JOURNALS):
        journal._after_fork()


os.register_at_fork(after_in_child=_after_fork)
