"""Waiting on the loop, for a connection playing a plan: timers that end early.

A wait ends when its time is up; early, with a reason, when the client
leaves (:data:`LEFT`: EOF or the connection lost) or the server's stop cuts
what is in flight (:data:`STOP`). :class:`Waiting` is a
:class:`~.connection.Connection`'s waiting: a delay or a pause between
dribbled pieces (:meth:`Waiting.wait`), the client reading what was written
(:meth:`Waiting.drained`), a plan made off the loop (:meth:`Waiting.planned`),
an upstream's answer (:meth:`Waiting.ready`, :meth:`Waiting.against`).

A plan's waits (delays, hangs, cuts) are played by :class:`Waits`: on the
server's :class:`~.timers.Timers`, a callback when they are over, no task nor
future — a thousand requests waiting at once are a thousand small objects,
and the waits that end in the same millisecond share one loop timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ..engine.plan import Answer, Plan, Wait
from .handler import FALLBACK, Refusal, Request
from .shared import resolve
from .timers import Timers

log = logging.getLogger("mockskill.transport")

LEFT = "left"
STOP = "stop"
TIMEOUT = "timeout"

_T = TypeVar("_T")


class Timed(Protocol):
    """What a connection plays on the server's timers (its waits, a stream), which a
    client leaving or the server stopping ends early."""

    def interrupt(self, reason: str) -> None:
        """End it now, for *reason*."""


class Waits:
    """A plan's waits, played one after another on the server's timers, then *then* is called.

    *then* gets this object and None when the waits are over (:attr:`answer`
    is the one to send: the plan's, or a cut's, then :attr:`cut_ms` is set), or
    the reason they ended early (:meth:`interrupt`). What the waits are for
    (the exchange, the plan, whether to close after) is carried along for it.
    """

    __slots__ = (
        "_alternative",
        "_begun",
        "_loop",
        "_next",
        "_then",
        "_tick",
        "_timers",
        "answer",
        "close",
        "cut_ms",
        "item",
        "plan",
        "started",
        "waited_ms",
    )

    def __init__(
        self,
        timers: Timers,
        loop: asyncio.AbstractEventLoop,
        item: Request | Refusal,
        plan: Plan,
        close: bool,
        started: float,
        then: Callable[[Waits, str | None], None],
    ) -> None:
        self.item, self.plan, self.close, self.started = item, plan, close, started
        self.answer: Answer = plan.answer
        self.cut_ms: float | None = None
        """How long the wait a cut ended lasted (None: no cut)."""
        self.waited_ms = 0.0
        self._timers, self._loop, self._then = timers, loop, then
        self._next = 0
        self._begun = 0.0
        self._alternative: Wait | None = None
        self._tick: int | None = None
        """The wait under way: its key in the timers (see :meth:`Timers.add`)."""

    @property
    def waiting(self) -> bool:
        return self._tick is not None

    def start(self, early: str | None) -> None:
        """Begin the first wait; *early*: a reason the waits cannot even begin."""
        waits = self.plan.waits
        if early is not None and waits:
            self._then(self, early)
        else:
            self._step()

    def _step(self) -> None:
        waits = self.plan.waits
        if self._next == len(waits):
            self._then(self, None)
            return
        wait = waits[self._next]
        self._next += 1
        seconds, self._alternative = wait.ms / 1000, None
        if wait.cut is not None and wait.cut.after_ms < wait.ms:
            seconds, self._alternative = wait.cut.after_ms / 1000, wait
        self._begun = self._loop.time()
        self._tick = self._timers.add(self._over, seconds)

    def _over(self) -> None:
        if self._tick is None:  # interrupted in the same millisecond, before its turn
            return
        self._tick = None
        spent = (self._loop.time() - self._begun) * 1000
        self.waited_ms += spent
        alternative = self._alternative
        if alternative is None or alternative.cut is None:
            self._step()
            return
        cut_answer = alternative.cut.answer
        self.answer = cut_answer if isinstance(cut_answer, Answer) else cut_answer.answer(spent)
        self.cut_ms = spent
        self._then(self, None)

    def interrupt(self, reason: str) -> None:
        """End the wait under way now, for *reason*."""
        tick = self._tick
        if tick is None:
            return
        self._timers.remove(self._over, tick)
        self._tick = None
        self.waited_ms += (self._loop.time() - self._begun) * 1000
        self._then(self, reason)


class Waiting:
    """A connection's waits on the loop, which end early when the client leaves or the
    server stops (:meth:`interrupt`); the plan's timed waits under way (:attr:`timed`)."""

    # Slots, not a __dict__ (see Connection's); a new attribute has to be named here.
    __slots__ = ("_drain_waiter", "_ends_on_eof", "_loop", "_waiter", "eof", "interrupted", "timed")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.interrupted: str | None = None
        """Why the waits end now (:data:`LEFT`, :data:`STOP`); None while they may go on."""
        self.eof = False
        """The client sent EOF: it sends nothing more, and a wait for its time ends at once."""
        self.timed: Timed | None = None
        """A plan's waits on the server's timers, or its stream, under way."""
        self._waiter: asyncio.Future[str | None] | None = None
        self._ends_on_eof = False
        """Whether :attr:`_waiter` ends when the client sends EOF."""
        self._drain_waiter: asyncio.Future[str | None] | None = None

    async def wait(self, seconds: float) -> str | None:
        """Wait *seconds* on a loop timer; the reason if the client left or the server stops."""
        return await self._until(None, seconds, None)

    async def ready(
        self, when_ready: Callable[[Callable[[], None]], None], timeout: float
    ) -> str | None:
        """Until *when_ready* calls back (None), *timeout* passes (:data:`TIMEOUT`), or the
        client leaves or the server stops (the reason)."""
        return await self._until(when_ready, timeout, TIMEOUT)

    async def _until(
        self,
        when_ready: Callable[[Callable[[], None]], None] | None,
        seconds: float,
        timed_out: str | None,
    ) -> str | None:
        """Until *when_ready* calls back (None), *seconds* pass (*timed_out*), or the client
        leaves or the server stops (the reason)."""
        if self.interrupted is not None:
            return self.interrupted
        if self.eof:
            return LEFT
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        if when_ready is not None:
            when_ready(lambda: resolve(waiter, None))
        handle = self._loop.call_later(seconds, resolve, waiter, timed_out)
        self._waiter, self._ends_on_eof = waiter, True
        try:
            return await waiter
        finally:
            handle.cancel()
            self._waiter = None

    async def drained(self) -> str | None:
        """Wait until the client reads what was written (or leaves, or the server stops)."""
        if self.interrupted is not None:
            return self.interrupted
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        self._drain_waiter = waiter
        try:
            return await waiter
        finally:
            self._drain_waiter = None

    def writable(self) -> None:
        """The client read enough of what was written: a :meth:`drained` wait is over."""
        if self._drain_waiter is not None:
            resolve(self._drain_waiter, None)

    async def planned(self, planned: Awaitable[Plan]) -> tuple[str | None, Plan | None]:
        """Await a plan made off the loop; a client's EOF does not end this wait."""
        if self.interrupted is not None:
            return self.interrupted, None
        future = asyncio.ensure_future(planned)
        reason = await self._race(future, ends_on_eof=False)
        if reason is not None:
            future.add_done_callback(_consume)
            return reason, None
        try:
            return None, future.result()
        except Exception:
            log.exception("the handler failed to plan %r", planned)
            return None, FALLBACK

    async def against(self, work: Awaitable[_T]) -> tuple[str | None, _T | None]:
        """*work*'s result, or (the reason, None) when the client leaves or the server stops
        first (the work is then cancelled). Its own exception is raised."""
        if self.interrupted is not None:
            if asyncio.iscoroutine(work):
                work.close()
            return self.interrupted, None
        future = asyncio.ensure_future(work)
        reason = await self._race(future, ends_on_eof=True)
        if reason is not None:
            future.cancel()
            return reason, None
        return None, future.result()

    async def _race(self, future: asyncio.Future[Any], *, ends_on_eof: bool) -> str | None:
        """Until *future* is done (None) or a wait-ending event comes first (its reason);
        *ends_on_eof*: whether the client's EOF is such an event."""
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        future.add_done_callback(lambda _: resolve(waiter, None))
        self._waiter, self._ends_on_eof = waiter, ends_on_eof
        try:
            return await waiter
        finally:
            self._waiter = None

    def early(self) -> str | None:
        """Why a wait beginning now would end at once (see :meth:`wait`), or None."""
        if self.interrupted is not None:
            return self.interrupted
        return LEFT if self.eof else None

    def end_on_eof(self) -> None:
        """The client sent EOF (:attr:`eof` is set): the waits for its time end, not one for
        a plan made off the loop."""
        waiting = self._waiter is not None and self._ends_on_eof
        if waiting or self._drain_waiter is not None or self.timed is not None:
            self.interrupt(LEFT)

    def interrupt(self, reason: str) -> None:
        """End every wait under way, and those to come, for *reason*."""
        if self.interrupted is None:
            self.interrupted = reason
        for waiter in (self._waiter, self._drain_waiter):
            if waiter is not None:
                resolve(waiter, reason)
        if self.timed is not None:
            self.timed.interrupt(reason)


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned future's exception, so that asyncio does not warn of it."""
    if not future.cancelled():
        future.exception()
