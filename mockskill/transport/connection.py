"""One client connection: HTTP/1.1 parsed by httptools, plans played with loop timers.

A :class:`Connection` is an :class:`asyncio.Protocol`. It parses requests
as their bytes arrive, queues them (pipelined requests are answered in
order, one at a time), asks the handler for each one's plan and plays it:

- a plan with nothing to wait for is written at once, inside the callback
  that completed the request — no task, no timer: the hot path;
- a plan that waits (delays, hangs, cuts, a fault after them) is played by
  loop timers and callbacks (:class:`~.waiting.Waits`), no task: its waits
  end early when the client leaves (EOF or connection lost) or the server stops;
- a dribbled body, or a plan the handler makes off the loop, is played by a task
  (:class:`~.playing.Playing`).

Reading requests, and refusing those that break the framing rules or the
limits, is :class:`~.reading.RequestReader`'s, which a connection is (through
:class:`~.playing.Playing` and :class:`~.waiting.Waiting`): a request that cannot be read becomes a
:class:`~.handler.Refusal`, answered through the handler, after which the
connection closes. Every close the server starts on its own is a *lingering*
close (FIN, then unread bytes discarded until the client closes or
:attr:`Limits.linger` passes), so that a client still sending a body reads
the refusal instead of a reset.

Timeouts (head, idle keep-alive) are deadlines checked by one sweep per
server (:class:`~.shared.Shared`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import cast

from ..engine.plan import Answer, Outcome, Plan, Stale
from .faults import FAULTS
from .handler import FALLBACK, Refusal, Request
from .reading import CONTINUE
from .relaying import Relaying
from .shared import Shared, resolve
from .waiting import LEFT, STOP, Waits

log = logging.getLogger("mockskill.transport")

LINGER_BYTES = 1024 * 1024
"""Bytes a refused or closing connection reads and discards before it closes outright."""


class Connection(Relaying, asyncio.Protocol):
    """One client connection (see the module's docstring)."""

    # Slots, not a __dict__: ten thousand connections held open cost ~1 KB less each.
    # A new attribute has to be named here.
    __slots__ = (
        "_discarded",
        "_drop_next",
        "_handler",
        "_left_at",
        "_linger_tick",
        "_lingering",
        "_queue",
        "_reading_paused",
        "_shared",
        "_stale",
        "_want_close",
        "_write_paused",
    )

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared.limits, shared.loop)
        self._shared = shared
        self._handler = shared.handler
        # A list, not a deque: at most max_pipeline items, and an empty deque is ~600 bytes.
        self._queue: list[Request | Refusal] = []
        self._busy = False
        self._task: asyncio.Task[None] | None = None
        self._timed: Waits | None = None
        self._waiter: asyncio.Future[str | None] | None = None
        self._waiter_ends_on_eof = False
        self._drain_waiter: asyncio.Future[str | None] | None = None
        self._interrupted: str | None = None
        self._left_at: float | None = None
        self._eof = False
        self._closed = False
        self._discarded = 0
        self._want_close = False
        self._lingering = False
        self._linger_tick: int | None = None
        self._reading_paused = False
        self._write_paused = False
        self._stale: Stale | None = None
        self._drop_next = False

    # -- state the server looks at -------------------------------------------------

    @property
    def in_flight(self) -> bool:
        """An exchange is under way: a request being read, queued or played."""
        return not self._closed and (self._busy or bool(self._queue) or self._in_message)

    def drain(self) -> None:
        """The server stops: close now if idle, else after the exchange in flight."""
        if not self.in_flight:
            self._close_gracefully()

    def cut(self) -> asyncio.Task[None] | None:
        """The grace period is over: end the exchange in flight and the connection."""
        task = self._task
        self._interrupt(STOP)
        if task is None and self._transport is not None:
            if self._lingering:
                self._transport.close()
            else:
                self._closed = True
                self._transport.abort()
        return task

    def expire(self) -> None:
        """The deadline passed: a head too slow (408) or a connection idle too long."""
        self.deadline = 0.0
        if self._closed:
            return
        if self._in_message:
            if self._body_until and self._loop.time() >= self._body_until:
                limit, what = self._limits.body_timeout, "body took more than"
            else:
                limit = self._limits.header_timeout
                what = "body paused" if self._head_complete else "head was not complete"
                what += " for"
            self._refuse(408, f"the request {what} {limit:g} s")
            self._advance()
        elif not self._busy and not self._queue:
            self._close_gracefully()

    # -- asyncio callbacks ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._shared.timers.run_due()  # waits that are over end before an arrival is handled
        # Answers are written whole, and the listener sets TCP_NODELAY on the sockets it
        # accepts (listening.py): Nagle does not hold an answer's last segment.
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        if isinstance(peer, tuple):
            self._peer = (str(peer[0]), int(peer[1]))
        if isinstance(local, tuple):
            self._local = (str(local[0]), int(local[1]))
        self.serial = self._shared.register(self)
        if self._shared.cutting:
            self._closed = True
            self._transport.abort()
            return
        if self._shared.draining:
            self._close_gracefully()
            return
        self.deadline = self._loop.time() + self._limits.keep_alive

    def data_received(self, data: bytes) -> None:
        self._shared.timers.run_due()
        if self._dead_parser:
            # Refused or closing: what follows is discarded unread — up to a bound, so
            # that a client streaming a refused body meets a closed connection soon.
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES and self._transport is not None:
                self._closed = True
                self._transport.close()
            return
        self._feed(data)
        self._advance()

    def eof_received(self) -> bool:
        self._shared.timers.run_due()
        self._eof = True
        if self._left_at is None:
            self._left_at = time.time()
        if self._lingering:
            return False  # the client has read our answer and closed: done
        if self._in_message and not self._dead_parser:
            what = "body" if self._head_complete else "head"
            self._refuse(400, f"the request {what} was cut short")
        waiting = self._waiter is not None and self._waiter_ends_on_eof
        if waiting or self._drain_waiter or self._timed is not None:
            self._interrupt(LEFT)
        if not self._busy and not self._queue:
            self._closed = True
            return False
        self._advance()
        return True  # half-closed: the answers already asked for can still be written

    def connection_lost(self, exc: Exception | None) -> None:
        now = time.time()
        if self._left_at is None:
            self._left_at = now
        if self._in_message and not self._dead_parser:
            # Nothing can be answered; the journal still hears of it.
            what = "body" if self._head_complete else "head"
            refusal = self._refusal(400, f"the request {what} was cut short")
            self._in_message = False
            self._report(refusal, Outcome(None, now, client_left_at=now, closed=True))
        self._closed = True
        self._dead_parser = True
        self._interrupt(LEFT)
        if self._linger_tick is not None and self._transport is not None:
            self._shared.timers.remove(self._transport.close, self._linger_tick)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._linger_tick, self._idle_timer = None, None
        # The parser holds this connection's callbacks: a cycle, which only the cyclic
        # GC would free (ten thousand connections kept until its next full pass).
        self._release_parser()
        self._shared.unregister(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None:
            resolve(self._drain_waiter, None)
        if not self._busy:
            self._advance()

    # -- what the reader hands over ------------------------------------------------

    def _read(self, request: Request, last: bool) -> None:
        if last:
            self._want_close = True
        if not self._queue and not self._busy and not self._closed and not self._write_paused:
            # The common case, fused: nothing before it, so it is answered from the
            # parser's callback, and an instant plan is written there and then.
            self._start(request, last, request.time)
            return
        self._queue.append(request)
        if len(self._queue) >= self._limits.max_pipeline and not self._reading_paused:
            assert self._transport is not None
            self._transport.pause_reading()
            self._reading_paused = True

    def _refuse(self, status: int, reason: str) -> None:
        """Queue a refusal of the request being read; nothing after it is read."""
        if self._dead_parser:
            return
        refusal = self._refusal(status, reason)
        self._dead_parser = True
        self._in_message = False
        self._continue_pending = False
        self.deadline = 0.0
        self._queue.append(refusal)

    def _may_continue(self) -> bool:
        return not self._busy and not self._queue

    # -- answering -----------------------------------------------------------------

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
        cut: bool = False,
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
        if started == now and not (cut or waited_ms):  # an instant plan's: most requests'
            outcome = Outcome.sent(answer, now, ends)
        else:
            outcome = Outcome(
                answer,
                started,
                headers_at=now,
                last_byte_at=now,
                cut=cut,
                waited_ms=waited_ms,
                closed=ends,
            )
        try:
            self._handler.played(item, outcome)
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
                self._finish(item, plan, answer, close, started, timed.cut, timed.waited_ms)
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
        cut: bool,
        waited: float,
    ) -> None:
        """After the waits: the plan's fault, or its whole answer (a dribble is a task's)."""
        assert self._transport is not None
        if plan.fault is not None and not cut:
            self._report(
                item,
                Outcome(answer, started, waited_ms=waited, fault=plan.fault, closed=True),
            )
            self._closed = True
            FAULTS[plan.fault](self._transport, answer, plan.fault_seed)
            return
        self._send(item, plan, answer, close, started, time.time(), cut=cut, waited_ms=waited)

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
            # On the shared timers: a burst's connections all linger at once.
            self._linger_tick = self._shared.timers.add(transport.close, self._limits.linger)
        self._shared.check_quiet()

    def _report(self, item: Request | Refusal, outcome: Outcome) -> None:
        try:
            self._handler.played(item, outcome)
        except Exception:
            log.exception("the handler failed to record %r", item)
