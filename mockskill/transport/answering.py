"""Answering: a connection's plans played, in order, and what it does after each answer.

:class:`Answering` is the part of a :class:`~.connection.Connection` that
turns the requests it queued (and its refusals) into answers on the wire:
it asks the handler for each one's plan in turn (:meth:`Answering._advance`,
one at a time: pipelined requests are answered in order), writes an instant
plan at once (:meth:`Answering._send`, the outcome reported before the bytes
go), hands a plan that waits to loop timers (:class:`~.waiting.Waits`) or a
task (:class:`~.playing.Playing`), and does what the plan says comes after:
a close (always a *lingering* one, :meth:`Answering._close_gracefully`), a
keep-alive fault (a stale connection, a close without saying so), or the
next request. It decides nothing: the plan says what to write and when, and
the handler hears how it went (:meth:`Answering._report`).

Reading requests and the asyncio callbacks are the connection's
(:mod:`.connection`).
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Awaitable

from ..engine.plan import Answer, Outcome, Plan, Stale
from .faults import FAULTS
from .handler import FALLBACK, Handler, Refusal, Request
from .reading import CONTINUE
from .relaying import Relaying
from .waiting import STOP, Waits

log = logging.getLogger("mockskill.transport")


class Answering(Relaying):
    """A connection's answering (its attributes are set by the connection)."""

    # Slots, as the connection's: a new attribute has to be named here.
    __slots__ = (
        "_drop_next",
        "_handler",
        "_lingering",
        "_queue",
        "_reading_paused",
        "_stale",
        "_want_close",
    )

    _handler: Handler
    _queue: list[Request | Refusal]
    """Requests (and a refusal) read and not yet answered, in order."""
    _want_close: bool
    _reading_paused: bool
    _drop_next: bool
    _stale: Stale | None
    _lingering: bool

    @property
    @abc.abstractmethod
    def in_flight(self) -> bool:
        """An exchange is under way (the connection's)."""

    @abc.abstractmethod
    def _watch_writes(self) -> None:
        """Cut the client if it reads nothing of what waits to be sent (the connection's)."""

    def _advance(self) -> None:
        """Answer what is queued, in order, until a plan has to wait."""
        queue = self._queue
        while queue and not self._busy and not self._closed and not self._write_paused:
            item = queue.pop(0)
            close = isinstance(item, Refusal) or (self._want_close and not queue)
            if not self._start(item, close, time.time()):
                return
        if self._closed or self._busy or queue:
            return
        if self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()
        if self._continue_pending and self._transport is not None:
            self._continue_pending = False
            self._transport.write(CONTINUE)
            self._body_begins()
        if self._eof or (self._shared.draining and not self._in_message):
            self._close_gracefully()
        elif not self._in_message:
            # Idle now. Not draining (else closed above), so no drain is waiting for
            # this connection to go quiet: nothing to tell the server.
            self.deadline = self._loop.time() + self._limits.keep_alive

    def _start(self, item: Request | Refusal, close: bool, now: float) -> bool:
        """Plan *item* and play it: True if it was answered at once, False if a task plays it."""
        if self._drop_next and isinstance(item, Request):
            self._drop(item)
            return False
        planned: Plan | Awaitable[Plan]
        try:
            if isinstance(item, Refusal):
                planned = self._handler.refuse(item)
            else:
                planned = self._handler.plan(item)
        except Exception:
            log.exception("the handler failed to plan %r", item)
            planned = FALLBACK
        return self._perform(item, planned, close, now)

    def _perform(
        self, item: Request | Refusal, planned: Plan | Awaitable[Plan], close: bool, now: float
    ) -> bool:
        """Play *planned*: True if it was answered at once, False if timers or a task play it."""
        if isinstance(planned, Plan) and planned.instant:
            # Written whole, now, from the callback that read the request.
            self._send(item, planned, planned.answer, close, now, now)
            return True
        self._busy = True
        if isinstance(planned, Plan) and planned.dribble is None and planned.upstream is None:
            timed = Waits(self._shared.timers, self._loop, item, planned, close, now, self._waited)
            self._timed = timed
            timed.start(self._early())
        else:
            self._task = self._loop.create_task(self._play(item, planned, close))
        return False

    def _send(
        self,
        item: Request | Refusal,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        now: float,
        *,
        cut_ms: float | None = None,
        waited_ms: float = 0.0,
    ) -> None:
        """Write *answer* whole (the plan's, or a cut's), reported first; then what follows."""
        transport = self._transport
        assert transport is not None
        # Decided now, not when the request was queued: a stop may have begun meanwhile.
        close = close or plan.close or self._shared.draining
        keep = plan.keep_alive
        ends = close or (keep is not None and self._closes_silently(item, plan))
        # Reported before the bytes go: a client holding the answer finds it journaled.
        if started != now or cut_ms is not None or waited_ms:
            self._report(
                item,
                Outcome(
                    answer,
                    started,
                    headers_at=now,
                    last_byte_at=now,
                    cut=cut_ms is not None,
                    cut_ms=cut_ms,
                    waited_ms=waited_ms,
                    closed=ends,
                ),
            )
        elif not plan.journalled:  # an instant plan's (most requests'), unless journalled
            try:
                self._handler.played(item, Outcome.sent(answer, now, ends))
            except Exception:
                log.exception("the handler failed to record %r", item)
        if item.method == "HEAD" and isinstance(item, Request):
            transport.write(answer.head(close=close))
        else:
            transport.write(answer.wires[close])
        if ends or keep is not None:
            self._after(plan, ends)

    def _closes_silently(self, item: Request | Refusal, plan: Plan) -> bool:
        keep = plan.keep_alive
        if keep is None or isinstance(item, Refusal):
            return False
        return keep.close_after or (
            keep.max_requests is not None and item.index >= keep.max_requests
        )

    def _after(self, plan: Plan, close: bool) -> None:
        """What the connection does once the answer is written."""
        if close:
            self._close_gracefully()
            return
        keep = plan.keep_alive
        if keep is not None and keep.stale_after_ms is not None:
            self._stale = keep.stale
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            self._idle_timer = self._loop.call_later(keep.stale_after_ms / 1000, self._go_stale)

    def _go_stale(self) -> None:
        self._idle_timer = None
        if self._closed or self.in_flight:
            return
        if self._stale is Stale.DROP_NEXT:
            self._drop_next = True
        else:
            self._close_gracefully()

    def _drop(self, request: Request) -> None:
        """The connection went stale: the request is read, and the connection closed."""
        now = time.time()
        self._report(request, Outcome(None, now, closed=True, dropped=True))
        self._closed = True
        assert self._transport is not None
        self._transport.close()

    def _waited(self, timed: Waits, reason: str | None) -> None:
        """A plan's waits on timers are over (or ended early, for *reason*): finish it."""
        self._timed = None
        item, started = timed.item, timed.started
        try:
            if reason is not None:
                self._gone(item, reason, Outcome(None, started, waited_ms=timed.waited_ms))
            else:
                plan, answer, close = timed.plan, timed.answer, timed.close
                self._finish(item, plan, answer, close, started, timed.cut_ms, timed.waited_ms)
        finally:
            self._busy = False
            if not self._closed:
                self._advance()
            else:
                self._shared.check_quiet()

    def _finish(
        self,
        item: Request | Refusal,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        cut_ms: float | None,
        waited: float,
    ) -> None:
        """After the waits: the plan's fault, or its whole answer (a dribble is a task's)."""
        assert self._transport is not None
        if plan.fault is not None and cut_ms is None:
            self._report(
                item,
                Outcome(answer, started, waited_ms=waited, fault=plan.fault, closed=True),
            )
            self._closed = True
            FAULTS[plan.fault](self._transport, answer, plan.fault_seed)
            return
        self._send(item, plan, answer, close, started, time.time(), cut_ms=cut_ms, waited_ms=waited)

    def _gone(self, item: Request | Refusal, reason: str, outcome: Outcome) -> None:
        """The client left, or the server stopping cut the exchange: report it, end it."""
        stopped = reason == STOP
        left_at = None if stopped else (self._left_at or time.time())
        self._report(
            item,
            Outcome(
                outcome.answer,
                outcome.started,
                headers_at=outcome.headers_at,
                client_left_at=left_at,
                waited_ms=outcome.waited_ms,
                stopped=stopped,
                closed=True,
            ),
        )
        self._closed = True
        self._dead_parser = True
        if self._transport is not None:
            self._transport.abort()

    # -- closing -------------------------------------------------------------------

    def _close_gracefully(self) -> None:
        """FIN, then discard what the client still sends until it closes (or linger passes)."""
        if self._closed or self._transport is None:
            self._closed = True
            return
        self._closed = True
        self._dead_parser = True
        self.deadline = 0.0
        transport = self._transport
        if self._eof or not transport.can_write_eof():
            transport.close()
        else:
            self._lingering = True
            transport.write_eof()
            # A deadline, which the server's sweep looks at (expire closes it): no timer
            # made and cancelled per connection, since most clients close well before.
            self.deadline = self._loop.time() + self._limits.linger
        # Neither the linger nor the close waits for a client that does not read.
        self._watch_writes()
        self._shared.check_quiet()

    def _report(self, item: Request | Refusal, outcome: Outcome) -> None:
        try:
            self._handler.played(item, outcome)
        except Exception:
            log.exception("the handler failed to record %r", item)
