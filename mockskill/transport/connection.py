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
connection closes. Answering what was read, in order, and what follows each answer
is :class:`~.answering.Answering`'s, which a connection is too; this module holds
the asyncio callbacks, the requests handed over by the reader, and what the server
asks of a connection. Every close the server starts on its own is a *lingering*
close (FIN, then unread bytes discarded until the client closes or
:attr:`Limits.linger` passes), so that a client still sending a body reads
the refusal instead of a reset.

Timeouts (head, idle keep-alive) and the linger are deadlines checked by one sweep per
server (:class:`~.shared.Shared`). A client that stops reading is watched by a timer of
its own, armed only while something waits to be sent to it (writing paused, or a closing
connection's last bytes): one that has read nothing of it for :attr:`Limits.write_timeout`
is cut, so that what it left unread is let go (a close would wait for it forever).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

from ..engine.plan import Outcome, Plan, Stale
from .answering import Answering
from .handler import FALLBACK, Request
from .reading import UNKNOWN
from .shared import Shared, resolve
from .waiting import LEFT, STOP, Waits

log = logging.getLogger("mockskill.transport")

LINGER_BYTES = 1024 * 1024
"""Bytes a refused or closing connection reads and discards before it closes outright."""


class Connection(Answering, asyncio.Protocol):
    """One client connection (see the module's docstring)."""

    # Slots, not a __dict__: a flood holds thousands of connections open at once.
    # A new attribute has to be named here.
    __slots__ = ("_discarded", "_left_at", "_shared", "_unsent", "_write_paused", "_write_timer")

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared.limits, shared.loop)
        self._shared = shared
        self._handler = shared.handler
        # A list, not a deque: at most max_pipeline items, and an empty deque is ~600 bytes.
        self._queue = []
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
        self._reading_paused = False
        self._write_paused = False
        self._write_timer: asyncio.TimerHandle | None = None
        self._unsent = 0
        """Bytes waiting to be sent when the write timer was armed: the client's progress."""
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
            # A close waits for what is unsent, which a client not reading never takes.
            if self._lingering and not self._transport.get_write_buffer_size():
                self._transport.close()
            else:
                self._closed = True
                self._transport.abort()
        return task

    def expire(self) -> None:
        """The deadline passed: a head too slow (408), a connection idle too long, or the
        linger of one closing (the client has not closed its end: closed outright)."""
        self.deadline = 0.0
        if self._closed:
            if self._lingering and self._transport is not None:
                self._transport.close()
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
        timers = self._shared.timers
        if timers.ticks:  # waits that are over end before an arrival is handled
            timers.run_due()
        # Answers are written whole, and the loop sets TCP_NODELAY on the sockets it
        # accepts: Nagle does not hold an answer's last segment.
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        # Each address asked of the transport only when not known already: on uvloop each
        # is a socket object made around the descriptor, a system call and the address
        # formatted, per connection (the local address comes from the listening socket
        # when it is bound to one).
        if self._peer is UNKNOWN:
            peer = transport.get_extra_info("peername")
            if isinstance(peer, tuple):
                self._peer = (str(peer[0]), int(peer[1]))
        local = self._shared.local
        if local is None:
            local = transport.get_extra_info("sockname")
            if isinstance(local, tuple):
                self._local = (str(local[0]), int(local[1]))
        else:
            self._local = local
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
        timers = self._shared.timers
        if timers.ticks:  # (run_due's first look, without its call)
            timers.run_due()
        if self._dead_parser:
            # Refused or closing: what follows is discarded unread — up to a bound, so
            # that a client streaming a refused body meets a closed connection soon.
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES and self._transport is not None:
                self._closed = True
                self._transport.close()
            return
        self._feed(data)
        if (
            self._queue
            or self._busy
            or self._closed
            or self._reading_paused
            or self._continue_pending
            or self._eof
            or self._shared.draining
        ):
            self._advance()
        elif not self._in_message:  # answered and idle (_advance's end, without its call)
            self.deadline = self._loop.time() + self._limits.keep_alive

    def eof_received(self) -> bool:
        timers = self._shared.timers
        if timers.ticks:
            timers.run_due()
        self._eof = True
        if self._lingering:
            return False  # the client has read our answer and closed: done
        if self._left_at is None:
            self._left_at = time.time()
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
        if self._waiter is not None or self._drain_waiter is not None or self._timed is not None:
            self._interrupt(LEFT)
        elif self._interrupted is None:  # (_interrupt's, without its call: nothing waits)
            self._interrupted = LEFT
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        # The parser holds this connection's callbacks: a cycle, which only the cyclic
        # GC would free (ten thousand connections kept until its next full pass).
        self._release_parser()
        self._shared.unregister(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._watch_writes()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._write_timer is not None and not self._closed:
            # Below the low-water mark: what is left is bounded, and the keep-alive or
            # the next pause watches it. A closing connection's is watched to the end.
            self._write_timer.cancel()
            self._write_timer = None
        if self._drain_waiter is not None:
            resolve(self._drain_waiter, None)
        if not self._busy:
            self._advance()

    # -- a client that does not read -----------------------------------------------

    def _watch_writes(self) -> None:
        """Arm the write timer if something waits to be sent (and it is not armed)."""
        transport = self._transport
        if self._write_timer is not None or transport is None:
            return
        unsent = transport.get_write_buffer_size()
        if unsent:
            self._unsent = unsent
            timeout = self._limits.write_timeout
            self._write_timer = self._loop.call_later(timeout, self._write_expired)

    def _write_expired(self) -> None:
        """:attr:`Limits.write_timeout` since the timer was armed: cut the client unless it
        read something meanwhile (then it gets as long again)."""
        self._write_timer = None
        transport = self._transport
        unsent = 0 if transport is None else transport.get_write_buffer_size()
        if not unsent:
            return
        if unsent < self._unsent:
            self._watch_writes()
            return
        assert transport is not None
        now = time.time()
        if self._left_at is None:
            self._left_at = now
        if self._busy:
            # The exchange in flight ends as when a client leaves, and is journalled so.
            self._interrupt(LEFT)
        else:
            # Its answers are journalled already: the cut is, as a refusal of the client.
            seconds = self._limits.write_timeout
            reason = f"the client read nothing of its answer for {seconds:g} s"
            refusal = self._refusal(408, reason)
            self._report(refusal, Outcome(None, now, client_left_at=now, closed=True))
        self._closed = True
        self._dead_parser = True
        self._in_message = False
        transport.abort()  # what it left unread is let go now, not when it reads

    # -- what the reader hands over ------------------------------------------------

    def _read(self, request: Request, last: bool) -> None:
        if last:
            self._want_close = True
        if not self._queue and not self._busy and not self._closed and not self._write_paused:
            # The common case, fused: nothing before it, so it is answered from the
            # parser's callback, and an instant plan is written there and then — here,
            # for the plainest (what _start and _send do, without their calls).
            now = request.time
            if self._drop_next:
                self._start(request, last, now)
                return
            try:
                planned = self._handler.plan(request)
            except Exception:
                log.exception("the handler failed to plan %r", request)
                planned = FALLBACK
            if (
                type(planned) is not Plan
                or not planned.instant
                or planned.keep_alive is not None
                or request.method == "HEAD"
            ):
                self._perform(request, planned, last, now)
                return
            close = last or planned.close or self._shared.draining
            answer = planned.answer
            if not planned.journalled:  # reported before the bytes go (see _send)
                try:
                    self._handler.played(request, Outcome.sent(answer, now, close))
                except Exception:
                    log.exception("the handler failed to record %r", request)
            assert self._transport is not None
            self._transport.write(answer.wires[close])
            if close:
                self._close_gracefully()
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
