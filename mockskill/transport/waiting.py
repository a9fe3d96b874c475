"""Waiting on the loop, for a connection playing a plan: timers that end early.

A wait ends when its time is up; early, with a reason, when the client
leaves (:data:`LEFT`: EOF or the connection lost) or the server's stop cuts
what is in flight (:data:`STOP`). :class:`Waiting` is the part of a
:class:`~.connection.Connection` that waits: a delay or a pause between
dribbled pieces (:meth:`Waiting._wait`), the client reading what was written
(:meth:`Waiting._drained`), a plan made off the loop (:meth:`Waiting._planned`).

A plan's waits (delays, hangs, cuts) are played by :class:`Waits`: on the
server's :class:`~.timers.Timers`, a callback when they are over, no task nor
future — a thousand requests waiting at once are a thousand small objects,
and the waits that end in the same millisecond share one loop timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.plan import Answer, Plan, Wait
from .handler import FALLBACK, Refusal, Request
from .reading import RequestReader
from .shared import resolve
from .timers import Timers

log = logging.getLogger("mockskill.transport")

LEFT = "left"
STOP = "stop"


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


class Waiting(RequestReader):
    """A connection's waits (its attributes are set by the connection)."""

    # Slots, not a __dict__ (see Connection's); a new attribute has to be named here.
    __slots__ = (
        "_drain_waiter",
        "_eof",
        "_interrupted",
        "_timed",
        "_waiter",
        "_waiter_ends_on_eof",
    )

    _interrupted: str | None
    _eof: bool
    _waiter: asyncio.Future[str | None] | None
    _waiter_ends_on_eof: bool
    _drain_waiter: asyncio.Future[str | None] | None
    _timed: Waits | None

    async def _wait(self, seconds: float) -> str | None:
        """Wait *seconds* on a loop timer; the reason if the client left or the server stops."""
        if self._interrupted is not None:
            return self._interrupted
        if self._eof:
            return LEFT
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        handle = self._loop.call_later(seconds, resolve, waiter, None)
        self._waiter, self._waiter_ends_on_eof = waiter, True
        try:
            return await waiter
        finally:
            handle.cancel()
            self._waiter = None

    async def _drained(self) -> str | None:
        """Wait until the client reads what was written (or leaves, or the server stops)."""
        if self._interrupted is not None:
            return self._interrupted
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        self._drain_waiter = waiter
        try:
            return await waiter
        finally:
            self._drain_waiter = None

    async def _planned(self, planned: Awaitable[Plan]) -> tuple[str | None, Plan | None]:
        """Await a plan made off the loop; a client's EOF does not end this wait."""
        if self._interrupted is not None:
            return self._interrupted, None
        future = asyncio.ensure_future(planned)
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        future.add_done_callback(lambda _: resolve(waiter, None))
        self._waiter, self._waiter_ends_on_eof = waiter, False
        try:
            reason = await waiter
        finally:
            self._waiter = None
        if reason is not None:
            future.add_done_callback(_consume)
            return reason, None
        try:
            return None, future.result()
        except Exception:
            log.exception("the handler failed to plan %r", planned)
            return None, FALLBACK

    def _early(self) -> str | None:
        """Why a wait beginning now would end at once (see :meth:`_wait`), or None."""
        if self._interrupted is not None:
            return self._interrupted
        return LEFT if self._eof else None

    def _interrupt(self, reason: str) -> None:
        if self._interrupted is None:
            self._interrupted = reason
        for waiter in (self._waiter, self._drain_waiter):
            if waiter is not None:
                resolve(waiter, reason)
        if self._timed is not None:
            self._timed.interrupt(reason)


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned future's exception, so that asyncio does not warn of it."""
    if not future.cancelled():
        future.exception()
