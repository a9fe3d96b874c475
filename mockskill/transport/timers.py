"""Loop timers shared by everything that is due in the same millisecond.

A thousand requests that arrive together and each wait a second end together:
with a loop timer each, that is a thousand timer handles (uvloop: a libuv
timer, a handle and a copy of the context each) made, fired and freed in the
same few milliseconds. :class:`Timers` keeps what is due by the millisecond,
in the order it was added, and ONE loop timer, for the first millisecond at
which something is due: when it fires it runs that millisecond and sets the
loop timer for the next one.

One loop timer, not one per millisecond: a flood of ten thousand clients that
hang for a minute arrives over a few seconds, and a timer handle per
millisecond would be made all along it, among the connections' objects. The
loops keep freed timer handles (and CPython its contexts) for reuse, and the
ones kept after the clients leave would be those, scattered over the whole
flood's memory: a few hundred small blocks that keep the flood's pymalloc
arenas from being given back. With one timer at a time,
the loop reuses the same few handles all along.

A loop runs its timers between batches of I/O events, and a batch can be a
thousand arrivals long: :meth:`Timers.run_due` runs what is due now from
wherever it is called — the connections call it before they handle an
arrival, so that a wait that is over ends first instead of behind the batch.

Nothing is ever run early: a deadline is rounded up to the next millisecond
(uvloop's timers have a millisecond's resolution anyway).
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable

Callback = Callable[[], object]


class Timers:
    """What is due, by the millisecond, on one loop timer (see the module's docstring)."""

    __slots__ = ("_armed", "_buckets", "_handle", "_loop", "ticks")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buckets: dict[int, dict[Callback, None]] = {}
        """Millisecond (of the loop's clock) -> what is due then, in the order it was added."""
        self.ticks: list[int] = []
        """A heap of the milliseconds that have (or had: removed lazily) something due;
        empty when nothing is: a connection looks at it before each arrival, and calls
        :meth:`run_due` only when it is not (a call for nothing on every request, else)."""
        self._handle: asyncio.TimerHandle | None = None
        self._armed = 0
        """The millisecond the loop timer is set for (when there is one)."""

    def __len__(self) -> int:
        """Milliseconds at which something is due (all on one loop timer)."""
        return len(self._buckets)

    def add(self, callback: Callback, delay: float) -> int:
        """Call *callback* in *delay* seconds, not earlier; returns the key for :meth:`remove`.

        Callbacks are told apart by equality (a bound method equals another of
        the same method and object): adding an equal one for the same
        millisecond adds nothing.
        """
        tick = math.ceil((self._loop.time() + delay) * 1000)
        bucket = self._buckets.get(tick)
        if bucket is None:
            bucket = self._buckets[tick] = {}
            heapq.heappush(self.ticks, tick)
            if self._handle is None:
                # The first due, not this one: a callback run by _fire() may add one
                # for later than what is left before it.
                self._arm(self.ticks[0])
            elif tick < self._armed:
                self._arm(tick)
        bucket[callback] = None
        return tick

    def remove(self, callback: Callback, tick: int) -> None:
        """*callback* is not to be called at *tick* (see :meth:`add`); nothing if it was not due."""
        bucket = self._buckets.get(tick)
        if bucket is None or callback not in bucket:
            return
        del bucket[callback]
        if not bucket:
            del self._buckets[tick]
            if not self._buckets:
                # A new table: a dict never shrinks, and one that held the milliseconds of a
                # flood would stay that size for good.
                self._buckets = {}
                self.ticks.clear()
                self._disarm()
            elif len(self.ticks) > 2 * len(self._buckets) + 64:
                # Clients that all left a long hang: their milliseconds are far off, and
                # would only be dropped from the heap once they are past.
                self.ticks = list(self._buckets)
                heapq.heapify(self.ticks)
            # Else the loop timer stays set: if it was for this millisecond, it finds
            # nothing to run then and moves on to the next.

    def run_due(self) -> None:
        """Run what is due by now, ahead of the loop's timer (see the module's docstring)."""
        ticks = self.ticks
        if not ticks:
            return
        now = self._loop.time() * 1000
        due = []
        while ticks and ticks[0] <= now:
            due.append(heapq.heappop(ticks))
        # Taken out first: what runs may add to (a new bucket for) these milliseconds,
        # which then waits for the loop timer as it would have without run_due().
        for tick in due:
            self._run(tick)

    def _fire(self) -> None:
        self._handle = None
        self.run_due()
        ticks, buckets = self.ticks, self._buckets
        while ticks and ticks[0] not in buckets:
            heapq.heappop(ticks)  # emptied by remove()
        if ticks and (self._handle is None or ticks[0] < self._armed):
            self._arm(ticks[0])

    def _run(self, tick: int) -> None:
        buckets = self._buckets
        bucket = buckets.pop(tick, None)
        if bucket is not None:
            if not buckets:  # the last due: a new table (see remove), before what runs adds
                self._buckets = {}
            for callback in bucket:
                callback()

    def _arm(self, tick: int) -> None:
        self._disarm()
        self._handle = self._loop.call_at(tick / 1000, self._fire)
        self._armed = tick

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
