"""The journal's entries recorded on an event loop, sent in that loop's own batches.

Every skill request is journalled on the loop that served it. A thread to
send those entries (as :mod:`.journal` does for records made elsewhere) costs
the loop the GIL it takes, and redis-py's encoding on top; here they wait in
a queue on the loop instead, and go out with the next batch of the loop's
Redis connection (:class:`~.batching.Batcher`: this is its *rider*), in the
same write as the needs of that turn: one append-script call per
:data:`~.stream_entries.MAX_BATCH` entries, encoded when the batch is
written (:func:`~.stream_entries.stream_fields`) and packed here.

What cannot be kept is counted as the thread's queue counts it (the two are
summed by :class:`~.journal.RedisJournal`): the queue holds at most the
journal's capacity, its oldest going first (``trimmed`` while Redis takes the
batches, ``dropped`` while it is away); a batch Redis did not take (written
and not answered, or no connection to write it on) is lost whole
(``failed``). After a failure, what is queued is sent again after
:data:`~.journal.RETRY_AFTER` (doubling) or with the next batch of needs, so
that Redis away is not a busy loop.

Other threads read their own writes: :meth:`LoopJournal.flush` asks the loop
to send what is queued and waits (bounded) for the reply. When the loop is
gone (stopped without closing the store's connection), what it still holds
is handed over to the thread's queue (:meth:`LoopJournal.handed_over`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from ..engine.entries import Entry, Recorded
from ..engine.store import StoreUnavailable
from .batching import Batcher, Command
from .journal import RETRY_AFTER, RedisJournal
from .stream_entries import APPEND_SHA, MAX_BATCH, SCHEMA, SCHEMA_KEY, Slot, stream_fields

if TYPE_CHECKING:
    from collections.abc import Sequence


_PAIR = b"$%d\r\n%s\r\n$%d\r\n%s\r\n"
"""An entry's two arguments (its session, its JSON) as bulk strings."""


def _bulk(value: str | int) -> bytes:
    data = str(value).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


class LoopJournal:
    """The queue of *journal*'s records made on *batcher*'s loop (make it on that loop)."""

    def __init__(self, journal: RedisJournal, batcher: Batcher) -> None:
        self.journal = journal
        self.batcher = batcher
        self.loop = batcher.loop
        self._thread = threading.get_ident()
        self._capacity = capacity = journal.capacity
        self._replica = journal.replica
        self._queue: deque[Slot] = deque(maxlen=capacity)
        self._queued = 0
        """How many records were queued, ever: the last one's number."""
        self._done = 0
        """The number of the last record done with (sent, lost, dropped or handed over)."""
        self._out: deque[tuple[int, int, asyncio.Future[Any]]] = deque()
        """The batches written, in order: their last record's number, size, reply."""
        self._waiting: list[tuple[int, concurrent.futures.Future[bool]]] = []
        """Readers waiting (on other threads) until a record's number is done."""
        self._retry: asyncio.TimerHandle | None = None
        self._wait = RETRY_AFTER[0]
        # What every append begins with: EVALSHA, its keys, the capacity and the schema.
        head: Sequence[str | int] = (
            "EVALSHA",
            APPEND_SHA,
            3,
            journal.stream,
            journal.counter,
            journal.schemas,
            capacity,
            SCHEMA_KEY,
            SCHEMA,
        )
        self._head = b"".join(_bulk(value) for value in head)
        self._head_count = len(head)
        self.error: str | None = None
        """Why the last batch failed (or no connection was made); None once one is sent."""
        self.batches = 0
        self.sent = 0
        self.trimmed = 0
        self.dropped = 0
        self.failed = 0
        self.unencodable = 0
        batcher.rider = self
        journal.attach(self)

    # -- on the loop -----------------------------------------------------------------------

    def record(self, entry: Entry | Recorded) -> None:
        """Queue *entry* for the next batch. Never blocks, never raises."""
        slot = self.journal.slot(entry)
        queue = self._queue
        if len(queue) == self._capacity:  # the oldest goes (the deque's bound):
            if self.error is None:
                self.trimmed += 1  # as the stream would, behind *capacity* newer ones
            else:
                self.dropped += 1  # Redis is away: it might have shown until it was back
        queue.append(slot)
        self._queued += 1
        if self.error is None:
            self.batcher.wake()
        elif self._retry is None:
            self._try_later()

    def holds(self) -> bool:
        return bool(self._queue)

    def commands(self) -> list[Command]:
        """What is queued as append-script calls, taken from the queue (the batcher sends
        them now, with the needs of this turn)."""
        queue = self._queue
        if not queue:
            return []
        commands: list[Command] = []
        replica = self._replica
        while queue:
            parts = []
            for _ in range(min(len(queue), MAX_BATCH)):
                try:
                    session, text = stream_fields(queue.popleft(), replica)
                except Exception:  # one entry that cannot be encoded is lost, not the batch
                    self.unencodable += 1
                    continue
                parts.append(_PAIR % (len(session), session, len(text), text))
            answered: asyncio.Future[Any] = self.loop.create_future()
            if parts:
                count = self._head_count + 2 * len(parts)
                commands.append((b"*%d\r\n%s%s" % (count, self._head, b"".join(parts)), answered))
            else:
                answered.set_result(None)  # none could be encoded: nothing to send
            self._out.append((self._queued - len(queue), len(parts), answered))
            answered.add_done_callback(self._answered)
        return commands

    def _answered(self, _: asyncio.Future[Any]) -> None:
        """Count the batches answered, in the order they were written (a batch sent again
        after a reload may be answered after later ones), and release the readers."""
        out = self._out
        failed = False
        while out and out[0][2].done():
            last, size, answered = out.popleft()
            error = answered.exception() if not answered.cancelled() else "cancelled"
            if error is None:
                if size:
                    self.batches += 1
                    self.sent += size
                self.error = None
                self._wait = RETRY_AFTER[0]
            else:
                self.failed += size
                self.error = f"{type(error).__name__}: {error}"
                failed = True
            self._done = max(self._done, last)  # (a hand-over may have moved it on)
        self._release()
        if failed and self._queue and self._retry is None:
            self._try_later()

    def unreachable(self, reason: str) -> None:
        """No connection could be made: the oldest queued (up to a batch) are lost, as a
        batch Redis did not take; the rest is tried again later."""
        queue = self._queue
        if not queue:
            self.error = reason
            self._release(everyone=True)
            return
        size = min(len(queue), MAX_BATCH)
        for _ in range(size):
            queue.popleft()
        lost: asyncio.Future[Any] = self.loop.create_future()
        lost.set_exception(StoreUnavailable(reason))
        self._out.append((self._queued - len(queue), size, lost))
        self._answered(lost)

    def _try_later(self) -> None:
        self._retry = self.loop.call_later(self._wait, self._again)
        self._wait = min(self._wait * 2, RETRY_AFTER[1])

    def _again(self) -> None:
        self._retry = None
        if self._queue:
            self.batcher.flush()

    def _release(self, everyone: bool = False) -> None:
        """Tell the readers waiting for records now done (*everyone*: all, done or not)."""
        if not self._waiting:
            return
        done, waiting = self._done, []
        for target, reader in self._waiting:
            if done >= target or everyone:
                if not reader.done():
                    reader.set_result(done >= target)
            else:
                waiting.append((target, reader))
        self._waiting = waiting

    def _flush_for(self, reader: concurrent.futures.Future[bool]) -> None:
        """Send what is queued now; *reader* learns when what was recorded until now is done."""
        target = self._queued
        if self._done >= target:
            reader.set_result(True)
            return
        self._waiting.append((target, reader))
        if self._retry is not None:  # a reader does not wait for the retry: try at once
            self._retry.cancel()
            self._retry = None
        self.batcher.flush()

    # -- from other threads ----------------------------------------------------------------

    def flush(self, timeout: float) -> bool:
        """Wait (within *timeout*) until what the loop recorded before the call is sent (or
        lost); True if it was. From another thread: the loop sends, this one waits. From
        the loop's own thread, or once the loop stopped, the queue is handed to the
        journal's flusher instead (the caller flushes that)."""
        loop = self.loop
        if threading.get_ident() == self._thread or loop.is_closed() or not loop.is_running():
            self.journal.adopt(self.handed_over())
            return True
        reader: concurrent.futures.Future[bool] = concurrent.futures.Future()
        try:
            loop.call_soon_threadsafe(self._flush_for, reader)
        except RuntimeError:  # closed meanwhile
            self.journal.adopt(self.handed_over())
            return True
        try:
            return reader.result(timeout)
        except concurrent.futures.TimeoutError:
            return False

    def handed_over(self) -> list[Slot]:
        """What is queued, taken (the caller sends it); the loop must not be running it."""
        slots = list(self._queue)
        self._queue.clear()
        self._done = self._queued
        self._release(everyone=True)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        return slots
