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

What cannot be kept is counted, never raised to the caller: the queue holds
at most *capacity* entries (when Redis is away the oldest go first), and a
batch Redis did not take is lost whole (sent again, a batch whose reply was
lost would be journalled twice). :attr:`RedisJournal.lost` counts both.

Reads (:meth:`~RedisJournal.entries`) and clears send this replica's queue
first, so a replica reads its own writes; another replica's entries show
once its flusher sent them (a batch's round trip, under load a few ms).
"""

from __future__ import annotations

import json
import operator
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..engine.entries import Entry, Recorded, kept, oversized

if TYPE_CHECKING:
    import redis

MAX_BATCH = 512
"""Entries sent in one script call at most (some 200 KB of JSON): a bigger backlog
goes as several calls, so that no call holds Redis for long."""
FLUSH_TIMEOUT = 5.0
"""Seconds a read or clear waits for this replica's queue to be sent before it reads."""
RETRY_AFTER = (0.05, 1.0)
"""Seconds the flusher waits before it sends again after a failed batch: the first
wait, doubled on each failure up to the second (Redis away is not a busy loop)."""

# Each entry of the stream: i = its id, s = its session as shown (what a session's
# read or clear compares, without decoding), e = the entry as JSON without its id.
_APPEND = """
local n = (#ARGV - 1) / 2
local last = redis.call('INCRBY', KEYS[2], n)
local id = last - n
for k = 2, #ARGV, 2 do
  id = id + 1
  redis.call('XADD', KEYS[1], '*', 'i', id, 's', ARGV[k], 'e', ARGV[k + 1])
end
redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', ARGV[1])
return last
"""
"""KEYS: the stream, the id counter; ARGV: capacity, then (session, json) per entry.
One INCRBY numbers the batch; one exact trim keeps the bound (nothing else runs
between the adds and the trim: no reader sees more than capacity)."""

_FIELDS = """
local function fields(item)
  local f, i, s, e = item[2], nil, nil, nil
  for k = 1, #f, 2 do
    local name = f[k]
    if name == 'i' then i = f[k + 1] elseif name == 's' then s = f[k + 1]
    elseif name == 'e' then e = f[k + 1] end
  end
  return i, s, e
end
"""

_READ = (
    _FIELDS
    + """
local out = {}
for _, item in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local i, s, e = fields(item)
  if #ARGV == 0 or s == ARGV[1] then
    out[#out + 1] = i
    out[#out + 1] = e
  end
end
return out
"""
)
"""KEYS: the stream; ARGV: nothing (every entry) or a session: (id, json) pairs, oldest first."""

_CLEAR = (
    _FIELDS
    + """
if #ARGV == 0 then
  return redis.call('DEL', KEYS[1])
end
local ids, gone = {}, 0
for _, item in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local i, s, e = fields(item)
  if s == ARGV[1] then ids[#ids + 1] = item[1] end
  if #ids == 500 then gone = gone + redis.call('XDEL', KEYS[1], unpack(ids)); ids = {} end
end
if #ids > 0 then gone = gone + redis.call('XDEL', KEYS[1], unpack(ids)) end
return gone
"""
)
"""KEYS: the stream; ARGV: nothing (delete it) or a session (delete its entries): atomic.
The id counter stays: ids keep increasing after a clear, as in memory."""

_NAMES = Recorded._fields
_DEFAULTS = Recorded._field_defaults
_VALUES = operator.attrgetter(*_NAMES)


def encoded(entry: Entry) -> str:
    """*entry* as the stream holds it: JSON of the fields not at their default, but its id.

    Named fields (not positions), so that a replica running another version
    reads what it knows (:meth:`Entry.from_json` leaves out what it does not,
    and fills in defaults); defaults left out keep an entry some 300 bytes.
    """
    data: dict[str, Any] = {}
    for name, value in zip(_NAMES, _VALUES(entry), strict=True):
        if name in _DEFAULTS:
            default = _DEFAULTS[name]
            if value == default and type(value) is type(default):
                continue
        data[name] = value
    del data["id"]
    if entry.retry is not None:
        data["retry"] = entry.retry.as_json()
    return json.dumps(data, separators=(",", ":"), allow_nan=True)


def decoded(ident: int | bytes | str, text: bytes | str) -> Entry:
    """The entry :func:`encoded` made *text* of, numbered *ident*."""
    data = json.loads(text)
    data["id"] = int(ident)
    return Entry.from_json(data)


class RedisJournal:
    """The journal of every replica sharing *client*'s Redis, keys under *prefix*.

    Thread-safe: :meth:`record` on any thread (never blocks, never raises);
    the reads and clears block on Redis and raise its errors (the store turns
    them into :class:`~mockskill.engine.store.StoreUnavailable`).
    """

    def __init__(
        self, client: redis.Redis, prefix: str, capacity: int, replica: str | None
    ) -> None:
        if capacity < 1:
            raise ValueError(f"the journal's capacity must be at least 1, not {capacity}")
        self.client = client
        self.stream = prefix + "journal"
        self.counter = prefix + "journal:ids"
        self.replica = replica
        self._capacity = capacity
        self._append = client.register_script(_APPEND)
        self._read = client.register_script(_READ)
        self._clear = client.register_script(_CLEAR)
        self._hidden: tuple[str, ...] = ()
        self._local_ids = iter(range(1, 2**63))
        # The queue and its counts, behind one lock (a record holds it for an append):
        self._lock = threading.Lock()
        self._queue: deque[tuple[Entry | Recorded, tuple[str, ...]]] = deque(maxlen=capacity)
        self._queued = 0
        """How many records were queued, ever: the last one's number."""
        self._done = 0
        """The number of the last record the flusher is done with (sent, lost or dropped)."""
        self._dropped = 0
        self._failed = 0
        self._closing = False
        self._error: str | None = None
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._done_changed = threading.Condition(self._lock)
        self.batches = 0
        """Script calls that took a batch (with :attr:`sent`: the batch sizes under load)."""
        self.sent = 0
        """Entries the stream took from this replica."""
        self.trimmed = 0
        """Entries let go from a full queue while Redis took the batches (faster records than
        the flusher sends): the stream would have trimmed them, *capacity* newer ones behind."""
        self._flusher = threading.Thread(
            target=self._flush_forever, name="mockskill-journal", daemon=True
        )
        self._flusher.start()

    @property
    def capacity(self) -> int:
        """How many entries the journal keeps (the oldest go first beyond it)."""
        return self._capacity

    @property
    def lost(self) -> int:
        """Entries recorded here that the journal could not keep: dropped from the full
        queue while Redis was away, or in a batch Redis did not take (not :attr:`trimmed`)."""
        return self._dropped + self._failed

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
        hidden = self._hidden
        if oversized(entry):
            entry, hidden = kept(entry, hidden), ()
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
        self.flush()
        pairs = self._read(keys=[self.stream], args=[] if session is None else [session])
        return [decoded(pairs[n], pairs[n + 1]) for n in range(0, len(pairs), 2)]

    def clear(self, session: str | None = None) -> None:
        """Forget every entry, or *session*'s, of every replica (what this one queued too)."""
        self.flush()
        self._clear(keys=[self.stream], args=[] if session is None else [session])

    def close(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Send what is queued (within *timeout*) and stop the flusher."""
        self.flush(timeout)
        with self._lock:
            self._closing = True
            self._wake.set()
            self._hurry.set()
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
                self._append(keys=[self.stream, self.counter], args=args)
            except Exception as error:  # whatever failed, the caller never sees it
                failed = True
                self._error = f"{type(error).__name__}: {error}"
            else:
                failed = False
                self._error = None
                self.batches += 1
                self.sent += len(batch)
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

    def _take(self) -> Iterator[tuple[Entry | Recorded, tuple[str, ...]]]:
        """The oldest queued, up to :data:`MAX_BATCH` (hold the lock)."""
        queue = self._queue
        for _ in range(min(len(queue), MAX_BATCH)):
            yield queue.popleft()

    def _encoded(self, batch: list[tuple[Entry | Recorded, tuple[str, ...]]]) -> list[Any]:
        """The script's arguments for *batch*: capacity, then (session, JSON) per entry."""
        args: list[Any] = [self._capacity]
        replica = self.replica
        for recorded, hidden in batch:
            entry = kept(recorded, hidden)
            if replica is not None:
                entry = _named(entry, replica)
            args += (entry.session, encoded(entry))
        return args


def _named(entry: Entry, replica: str) -> Entry:
    """*entry* naming the *replica* that served it."""
    values: tuple[Any, ...] = (*_VALUES(entry)[:-1], replica)
    return Entry(*values)
