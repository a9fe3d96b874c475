"""Waiting on the loop, for a connection playing a plan: timers that end early.

A wait ends when its time is up; early, with a reason, when the client
leaves (:data:`LEFT`: EOF or the connection lost) or the server's stop cuts
what is in flight (:data:`STOP`). :class:`Waiting` is the part of a
:class:`~.connection.Connection` that waits: a delay or a pause between
dribbled pieces (:meth:`Waiting._wait`), the client reading what was written
(:meth:`Waiting._drained`), a plan made off the loop (:meth:`Waiting._planned`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from ..engine.plan import Plan
from .handler import FALLBACK
from .shared import resolve

log = logging.getLogger("mockskill.transport")

LEFT = "left"
STOP = "stop"


class Waiting:
    """A connection's waits (its attributes are set by the connection)."""

    _loop: asyncio.AbstractEventLoop
    _interrupted: str | None
    _eof: bool
    _waiter: asyncio.Future[str | None] | None
    _waiter_ends_on_eof: bool
    _drain_waiter: asyncio.Future[str | None] | None

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

    def _interrupt(self, reason: str) -> None:
        if self._interrupted is None:
            self._interrupted = reason
        for waiter in (self._waiter, self._drain_waiter):
            if waiter is not None:
                resolve(waiter, reason)


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned future's exception, so that asyncio does not warn of it."""
    if not future.cancelled():
        future.exception()
