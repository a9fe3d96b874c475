"""Loop timers shared by everything that is due in the same millisecond.

A thousand requests that arrive together and each wait a second end together:
with a loop timer each, that is a thousand timer handles (uvloop: a libuv
timer, a handle and a copy of the context each) made, fired and freed in the
same few milliseconds. :class:`Timers` keeps one loop timer per millisecond
at which something is due, and what is due then in the order it was added.

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
    """One loop timer per millisecond at which something is due (see the module's docstring)."""

    __slots__ = ("_buckets", "_handles", "_loop", "_ticks")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buckets: dict[int, dict[Callback, None]] = {}
        """Millisecond (of the loop's clock) -> what is due then, in the order it was added."""
        self._handles: dict[int, asyncio.TimerHandle] = {}
        self._ticks: list[int] = []
        """A heap of the milliseconds that have (or had: removed lazily) something due."""

    def __len__(self) -> int:
        """Loop timers in use: one per millisecond at which something is due."""
        return len(self._handles)

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
            self._handles[tick] = self._loop.call_at(tick / 1000, self._fire, tick)
            heapq.heappush(self._ticks, tick)
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
            self._handles.pop(tick).cancel()
            if len(self._ticks) > 2 * len(self._handles) + 64:
                # Clients that all left a long hang: their milliseconds are far off, and
                # run_due() would only drop them from the heap once they are past.
                self._ticks = list(self._handles)
                heapq.heapify(self._ticks)

    def run_due(self) -> None:
        """Run what is due by now, ahead of the loop's timer (see the module's docstring)."""
        ticks = self._ticks
        if not ticks:
            return
        now = self._loop.time() * 1000
        while ticks and ticks[0] <= now:
            tick = heapq.heappop(ticks)
            handle = self._handles.pop(tick, None)
            if handle is not None:
                handle.cancel()
                self._run(tick)

    def _fire(self, tick: int) -> None:
        del self._handles[tick]
        ticks = self._ticks
        while ticks and ticks[0] <= tick and ticks[0] not in self._handles:
            heapq.heappop(ticks)  # this one, and those emptied by remove() before it
        self._run(tick)

    def _run(self, tick: int) -> None:
        # Taken out first: what runs may add to (a new bucket for) this millisecond.
        for callback in self._buckets.pop(tick):
            callback()
