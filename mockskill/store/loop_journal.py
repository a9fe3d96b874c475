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
summed by :class:`~.journal.RedisJournal`). A batch is numbered, and the
script takes a number once: one whose reply did not come (Redis frozen past
the timeout, or gone) is held and sent again, first, so that it lands once
whether Redis took it late or never, and is counted sent or missing by what
Redis answers, not guessed lost. What is held (queued, and sent again) is at
most the journal's capacity, its oldest going first (``trimmed`` while Redis
takes the batches, ``dropped`` while it is away; one let go from a batch sent
again is counted ``failed`` only if Redis says that batch was never taken).
While Redis is away, what is held waits for a retry after
:data:`~.journal.RETRY_AFTER` (doubling), so that Redis away is not a busy
loop, or for a reader.

Other threads read their own writes: :meth:`LoopJournal.flush` asks the loop
to send what is queued and waits (bounded) for the reply. When the loop is
gone (stopped without closing the store's connection), what it still holds
is handed over to the thread's queue (:meth:`LoopJournal.handed_over`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from ..engine.entries import Entry
from .batching import Batcher, Command
from .journal import RETRY_AFTER, RedisJournal
from .stream_entries import (
    APPEND_SHA,
    MAX_BATCH,
    SCHEMA,
    SCHEMA_KEY,
    Batch,
    Slot,
    stream_fields,
    writer_key,
)

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
        self._capacity = journal.capacity
        self._replica = journal.replica
        self._queue: deque[Slot] = deque()
        self._again: deque[Batch] = deque()
        """Batches sent whose reply did not come (or not sent: no connection), oldest first:
        sent again before anything else."""
        self._held_again = 0
        """The entries :attr:`_again` holds (with the queue's, at most the capacity)."""
        self._writer = writer_key(journal.prefix)
        self._numbers = itertools.count(1)
        self._queued = 0
        """How many records were queued, ever: the last one's number."""
        self._done = 0
        """The number of the last record done with (sent, lost, dropped or handed over)."""
        self._out: deque[tuple[Batch, asyncio.Future[Any]]] = deque()
        """The batches written, in order, and their replies."""
        self._waiting: list[tuple[int, concurrent.futures.Future[bool]]] = []
        """Readers waiting (on other threads) until a record's number is done."""
        self._retry: asyncio.TimerHandle | None = None
        self._wait = RETRY_AFTER[0]
        # What every append begins with: EVALSHA, its keys, the capacity and the schema.
        head: Sequence[str | int] = (
            "EVALSHA",
            APPEND_SHA,
            4,
            journal.stream,
            journal.counter,
            journal.schemas,
            self._writer,
            self._capacity,
            SCHEMA_KEY,
            SCHEMA,
        )
        self._head = b"".join(_bulk(value) for value in head)
        self._head_count = len(head) + 1  # and the batch's number
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

    def record(self, entry: Entry) -> None:
        """Queue *entry* for the next batch. Never blocks, never raises."""
        slot = self.journal.slot(entry)
        self._make_room(1)
        self._queue.append(slot)
        self._queued += 1
        if self.error is None:
            self.batcher.wake()
        elif self._retry is None:
            self._try_later()

    def _make_room(self, more: int) -> None:
        """Let the oldest held go until *more* fit within the capacity: those to be sent
        again first (whether Redis has them, the next send of their batch tells), then the
        queue's."""
        over = len(self._queue) + self._held_again + more - self._capacity
        again = self._again
        while over > 0 and self._held_again:
            batch = next(b for b in again if b.entries)
            batch.let_go()
            self._held_again -= 1
            over -= 1
        for _ in range(min(over, len(self._queue))):
            self._queue.popleft()
            if self.error is None:
                self.trimmed += 1  # as the stream would, behind *capacity* newer ones
            else:
                self.dropped += 1  # Redis is away: it might have shown until it was back

    def holds(self) -> bool:
        return bool(self._queue or self._again)

    def now(self) -> None:
        """Send what is held with the next batch, though a retry is waiting."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def commands(self) -> list[Command]:
        """What is held as append-script calls, taken (the batcher sends them now, with the
        needs of this turn): those to send again first. While a retry waits (Redis away),
        nothing: what is held waits for it, rather than go in every turn's batch."""
        if self._retry is not None:
            return []
        batches = list(self._again)
        self._again.clear()
        self._held_again = 0
        queue = self._queue
        replica = self._replica
        while queue:
            entries = []
            for _ in range(min(len(queue), MAX_BATCH)):
                try:
                    entries.append(stream_fields(queue.popleft(), replica))
                except Exception:  # one entry that cannot be encoded is lost, not the batch
                    self.unencodable += 1
            batches.append(
                Batch(self._writer, next(self._numbers), entries, self._queued - len(queue))
            )
        commands: list[Command] = []
        for batch in batches:
            answered: asyncio.Future[Any] = self.loop.create_future()
            if batch.size:
                commands.append((self._packed(batch), answered))
            else:
                answered.set_result(0)  # none could be encoded: nothing to send
            self._out.append((batch, answered))
            answered.add_done_callback(self._answered)
        return commands

    def _packed(self, batch: Batch) -> bytes:
        entries = batch.entries
        count = self._head_count + 2 * len(entries)
        number = _bulk(batch.number)
        pairs = b"".join(_PAIR % (len(s), s, len(e), e) for s, e in entries)
        return b"*%d\r\n%s%s%s" % (count, self._head, number, pairs)

    def _answered(self, _: asyncio.Future[Any]) -> None:
        """Count the batches answered, in the order they were written (a batch sent again
        after a reload may be answered after later ones), hold those that failed to send
        again, and release the readers."""
        out = self._out
        failed: list[Batch] = []
        while out and out[0][1].done():
            batch, answered = out.popleft()
            error = answered.exception() if not answered.cancelled() else "cancelled"
            if error is None:
                taken, missing = batch.counted(answered.result())
                if batch.size:
                    self.batches += 1
                self.sent += taken
                self.failed += missing
                self.error = None
                self._wait = RETRY_AFTER[0]
                self._done = max(self._done, batch.last)  # (a hand-over may have moved it on)
            else:
                failed.append(batch)
                self.error = f"{type(error).__name__}: {error}"
        if failed:
            self._hold_again(failed)
        else:
            self._release()

    def _hold_again(self, batches: list[Batch]) -> None:
        """*batches* failed: held to send again (after those already held: they are newer),
        readers told, and a retry set."""
        self._again.extend(batches)
        self._held_again += sum(len(batch.entries) for batch in batches)
        self._make_room(0)
        self._release(everyone=True)
        if self._retry is None:
            self._try_later()

    def unreachable(self, reason: str) -> None:
        """No connection could be made: what is held waits for a retry (readers are told)."""
        self.error = reason
        self._release(everyone=True)
        if self.holds() and self._retry is None:
            self._try_later()

    def _try_later(self) -> None:
        self._retry = self.loop.call_later(self._wait, self._retried)
        self._wait = min(self._wait * 2, RETRY_AFTER[1])

    def _retried(self) -> None:
        self._retry = None
        if self.holds():
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
        """Send what is held now; *reader* learns when what was recorded until now is done
        (True), or that it could not be sent (False)."""
        target = self._queued
        if self._done >= target:
            reader.set_result(True)
            return
        self._waiting.append((target, reader))
        self.now()  # a reader does not wait for the retry: try at once
        self.batcher.flush()

    # -- from other threads ----------------------------------------------------------------

    def flush(self, timeout: float) -> bool:
        """Wait (within *timeout*) until what the loop recorded before the call is sent
        (or let go); True if it was, False if it could not be (Redis away: it is held) or
        not in time. From another thread: the loop sends, this one waits. From the loop's
        own thread, or once the loop stopped, what it holds is handed to the journal's
        flusher instead (the caller flushes that)."""
        loop = self.loop
        if threading.get_ident() == self._thread or loop.is_closed() or not loop.is_running():
            self.journal.adopt(*self.handed_over())
            return True
        reader: concurrent.futures.Future[bool] = concurrent.futures.Future()
        try:
            loop.call_soon_threadsafe(self._flush_for, reader)
        except RuntimeError:  # closed meanwhile
            self.journal.adopt(*self.handed_over())
            return True
        try:
            return reader.result(timeout)
        except concurrent.futures.TimeoutError:
            return False

    def handed_over(self) -> tuple[list[Slot], list[Batch]]:
        """What is queued and what is to be sent again, taken (the caller sends them); the
        loop must not be running them."""
        slots, again = list(self._queue), list(self._again)
        self._queue.clear()
        self._again.clear()
        self._held_again = 0
        self._done = self._queued
        self._release(everyone=True)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        return slots, again
