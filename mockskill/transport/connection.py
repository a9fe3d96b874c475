"""One client connection: HTTP/1.1 read, plans played in order, answers written.

A :class:`Connection` is an :class:`asyncio.Protocol` that owns its
collaborators, as h11's users and uvicorn's protocols do:

- a :class:`~.reading.RequestReader` turns the bytes into events: each
  request read (queued: pipelined requests are answered in order, one at a
  time) or a :class:`~.handler.Refusal` of one that breaks the framing rules
  or the limits, answered through the handler, after which the connection
  closes;
- a :class:`~.waiting.Waiting` holds its waits, which end early when the
  client leaves (EOF or connection lost) or the server stops;
- a :class:`~.relaying.Relay` plays a proxy plan, made for that exchange.

It asks the handler for each request's plan and plays it. It decides
nothing: the plan says what to write and when, and the handler hears how it
went (:meth:`Connection.report`).

- A plan with nothing to wait for is written at once, inside the callback
  that completed the request — no task, no timer: the hot path;
- a plan that waits (delays, hangs, cuts, a fault after them) is played by
  loop timers and callbacks (:class:`~.waiting.Waits`), no task;
- a dribbled body, a proxy plan, or a plan the handler makes off the loop,
  is played by a task;
- a stream of events, after its waits, is played by a
  :class:`~.streaming.Streaming` on the loop timers (no task).

After each answer comes what the plan says: a close, a keep-alive fault (a
stale connection, a close without saying so), or the next request. Every
close the server starts on its own is a *lingering* close (FIN, then unread
bytes discarded until the client closes or :attr:`Limits.linger` passes),
so that a client still sending a body reads the refusal instead of a reset.

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
from collections.abc import Awaitable
from typing import cast

from ..engine.plan import Answer, Fault, Outcome, Plan, Stale
from .faults import FAULTS
from .handler import FALLBACK, Refusal, Request
from .reading import CONTINUE, UNKNOWN, RequestReader
from .relaying import Relay
from .shared import Shared, resolve
from .streaming import GAVE_UP, Streaming
from .waiting import LEFT, STOP, Waiting, Waits

log = logging.getLogger("mockskill.transport")

LINGER_BYTES = 1024 * 1024
"""Bytes a refused or closing connection reads and discards before it closes outright."""


class Connection(asyncio.Protocol):
    """One client connection (see the module's docstring)."""

    # Slots, not a __dict__: a flood holds thousands of connections open at once.
    # A new attribute has to be named here.
    __slots__ = (
        "_busy",
        "_discarded",
        "_drop_next",
        "_handler",
        "_idle_timer",
        "_limits",
        "_lingering",
        "_loop",
        "_queue",
        "_reader",
        "_reading_paused",
        "_shared",
        "_stale",
        "_stream_done",
        "_streaming",
        "_task",
        "_unsent",
        "_waiting",
        "_want_close",
        "_write_timer",
        "closed",
        "left_at",
        "transport",
        "write_paused",
    )

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._handler = shared.handler
        self._limits = shared.limits
        self._loop = shared.loop
        self._reader = RequestReader(shared.limits, shared.loop, self)
        self._waiting = Waiting(shared.loop)
        self.transport: asyncio.Transport | None = None
        # A list, not a deque: at most max_pipeline items, and an empty deque is ~600 bytes.
        self._queue: list[Request | Refusal] = []
        """Requests (and a refusal) read and not yet answered, in order."""
        self._busy = False
        """An exchange is played by timers or a task."""
        self._task: asyncio.Task[None] | None = None
        self.left_at: float | None = None
        """When the client left (None: it has not)."""
        self.closed = False
        self._discarded = 0
        self._want_close = False
        self._lingering = False
        self._reading_paused = False
        self.write_paused = False
        self._write_timer: asyncio.TimerHandle | None = None
        self._unsent = 0
        """Bytes waiting to be sent when the write timer was armed: the client's progress."""
        self._idle_timer: asyncio.TimerHandle | None = None
        """Run only while the connection is idle (a stale keep-alive's): cancelled as soon
        as a request is read."""
        self._stale: Stale | None = None
        self._drop_next = False
        self._streaming: Streaming | None = None
        """The stream being played (None: none): told when the client reads again."""
        self._stream_done: asyncio.Future[None] | None = None
        """Resolved when the stream is over, for the task that plays its plan (None: timers
        play it, and the next exchange follows)."""

    @property
    def deadline(self) -> float:
        """Loop time at which :meth:`expire` is due (0: none): the reader's while a request is
        read, the keep-alive's or the linger's otherwise (one slot, set by both)."""
        return self._reader.deadline

    # -- state the server looks at -------------------------------------------------

    @property
    def in_flight(self) -> bool:
        """An exchange is under way: a request being read, queued or played."""
        return not self.closed and (self._busy or bool(self._queue) or self._reader.in_message)

    def drain(self) -> None:
        """The server stops: close now if idle, else after the exchange in flight."""
        if not self.in_flight:
            self._close_gracefully()

    def cut(self) -> asyncio.Task[None] | None:
        """The grace period is over: end the exchange in flight and the connection."""
        task = self._task
        self._waiting.interrupt(STOP)
        if task is None and self.transport is not None:
            # A close waits for what is unsent, which a client not reading never takes.
            if self._lingering and not self.transport.get_write_buffer_size():
                self.transport.close()
            else:
                self.closed = True
                self.transport.abort()
        return task

    def expire(self) -> None:
        """The deadline passed: a head too slow (408), a connection idle too long, or the
        linger of one closing (the client has not closed its end: closed outright)."""
        self._reader.deadline = 0.0
        if self.closed:
            if self._lingering and self.transport is not None:
                self.transport.close()
            return
        if self._reader.in_message:
            if self._reader.body_until and self._loop.time() >= self._reader.body_until:
                limit, what = self._limits.body_timeout, "body took more than"
            else:
                limit = self._limits.header_timeout
                what = "body paused" if self._reader.head_complete else "head was not complete"
                what += " for"
            self._reader.refuse(408, f"the request {what} {limit:g} s")
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
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        # Each address asked of the transport only when not known already: on uvloop each
        # is a socket object made around the descriptor, a system call and the address
        # formatted, per connection (the local address comes from the listening socket
        # when it is bound to one).
        if self._reader.peer is UNKNOWN:
            peer = transport.get_extra_info("peername")
            if isinstance(peer, tuple):
                self._reader.peer = (str(peer[0]), int(peer[1]))
        local = self._shared.local
        if local is None:
            local = transport.get_extra_info("sockname")
            if isinstance(local, tuple):
                self._reader.local = (str(local[0]), int(local[1]))
        else:
            self._reader.local = local
        self._reader.serial = self._shared.register(self)
        if self._shared.cutting:
            self.closed = True
            self.transport.abort()
            return
        if self._shared.draining:
            self._close_gracefully()
            return
        self._reader.deadline = self._loop.time() + self._limits.keep_alive

    def data_received(self, data: bytes) -> None:
        timers = self._shared.timers
        if timers.ticks:  # (run_due's first look, without its call)
            timers.run_due()
        reader = self._reader
        if reader.stopped:
            # Refused or closing: what follows is discarded unread — up to a bound, so
            # that a client streaming a refused body meets a closed connection soon.
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES and self.transport is not None:
                self.closed = True
                self.transport.close()
            return
        reader.feed(data)
        if (
            self._queue
            or self._busy
            or self.closed
            or self._reading_paused
            or reader.continue_pending
            or self._waiting.eof
            or self._shared.draining
        ):
            self._advance()
        elif not reader.in_message:  # answered and idle (_advance's end, without its call)
            reader.deadline = self._loop.time() + self._limits.keep_alive

    def eof_received(self) -> bool:
        timers = self._shared.timers
        if timers.ticks:
            timers.run_due()
        self._waiting.eof = True
        if self._lingering:
            return False  # the client has read our answer and closed: done
        if self.left_at is None:
            self.left_at = time.time()
        cut_short = self._reader.cut_short()
        if cut_short is not None:
            self._reader.refuse(400, cut_short)
        self._waiting.end_on_eof()
        if not self._busy and not self._queue:
            self.closed = True
            return False
        self._advance()
        return True  # half-closed: the answers already asked for can still be written

    def connection_lost(self, exc: Exception | None) -> None:
        now = time.time()
        if self.left_at is None:
            self.left_at = now
        cut_short = self._reader.cut_short()
        if cut_short is not None:
            # Nothing can be answered; the journal still hears of it.
            refusal = self._reader.refusal(400, cut_short)
            self._reader.in_message = False
            self.report(refusal, Outcome(None, now, client_left_at=now, closed=True))
        self.closed = True
        self._reader.stopped = True
        self._waiting.interrupt(LEFT)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        # The reader's parser holds its callbacks, and the reader this connection: cycles,
        # which only the cyclic GC would free (a flood's connections kept until its pass).
        self._reader.release()
        self._shared.unregister(self)

    def pause_writing(self) -> None:
        self.write_paused = True
        self._watch_writes()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._write_timer is not None and not self.closed:
            # Below the low-water mark: what is left is bounded, and the keep-alive or
            # the next pause watches it. A closing connection's is watched to the end.
            self._write_timer.cancel()
            self._write_timer = None
        self._waiting.writable()
        if self._streaming is not None:
            self._streaming.writable()
        if not self._busy:
            self._advance()

    # -- a client that does not read -----------------------------------------------

    def _watch_writes(self) -> None:
        """Arm the write timer if something waits to be sent (and it is not armed)."""
        transport = self.transport
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
        transport = self.transport
        unsent = 0 if transport is None else transport.get_write_buffer_size()
        if not unsent:
            return
        if unsent < self._unsent:
            self._watch_writes()
            return
        assert transport is not None
        now = time.time()
        if self.left_at is None:
            self.left_at = now
        if self._busy:
            # The exchange in flight ends as when a client leaves, and is journalled so
            # (a stream: as given up on, which the stream's record tells apart).
            self._waiting.interrupt(LEFT if self._streaming is None else GAVE_UP)
        else:
            # Its answers are journalled already: the cut is, as a refusal of the client.
            seconds = self._limits.write_timeout
            reason = f"the client read nothing of its answer for {seconds:g} s"
            refusal = self._reader.refusal(408, reason)
            self.report(refusal, Outcome(None, now, client_left_at=now, closed=True))
        self.closed = True
        self._reader.stopped = True
        self._reader.in_message = False
        transport.abort()  # what it left unread is let go now, not when it reads

    # -- what the reader hands over (its Consumer) ---------------------------------

    def request(self, request: Request, last: bool) -> None:
        if last:
            self._want_close = True
        if self._idle_timer is not None:  # not idle any more: it cannot go stale now
            self._idle_timer.cancel()
            self._idle_timer = None
        if not self._queue and not self._busy and not self.closed and not self.write_paused:
            # Nothing before it: answered from the parser's callback, and an instant plan
            # is written there and then.
            self._start(request, last, request.time)
            return
        self._queue.append(request)
        if len(self._queue) >= self._limits.max_pipeline and not self._reading_paused:
            assert self.transport is not None
            self.transport.pause_reading()
            self._reading_paused = True

    def refused(self, refusal: Refusal) -> None:
        self._queue.append(refusal)

    def continue_now(self) -> bool:
        if self._busy or self._queue:
            return False
        assert self.transport is not None
        self.transport.write(CONTINUE)
        return True

    # -- answering, in order ------------------------------------------------------

    def _advance(self) -> None:
        """Answer what is queued, in order, until a plan has to wait."""
        queue = self._queue
        while queue and not self._busy and not self.closed and not self.write_paused:
            item = queue.pop(0)
            close = isinstance(item, Refusal) or (self._want_close and not queue)
            if not self._start(item, close, time.time()):
                return
        if self.closed or self._busy or queue:
            return
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        if self._reader.continue_pending and self.transport is not None:
            self._reader.continue_pending = False
            self.transport.write(CONTINUE)
            self._reader.body_begins()
        if self._waiting.eof or (self._shared.draining and not self._reader.in_message):
            self._close_gracefully()
        elif not self._reader.in_message:
            # Idle now. Not draining (else closed above), so no drain is waiting for
            # this connection to go quiet: nothing to tell the server.
            self._reader.deadline = self._loop.time() + self._limits.keep_alive

    def _start(self, item: Request | Refusal, close: bool, now: float) -> bool:
        """Plan *item* and play it: True if it was answered at once, False if timers or a
        task play it."""
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
            self._waiting.timed = timed
            timed.start(self._waiting.early())
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
        transport = self.transport
        assert transport is not None
        # Decided now, not when the request was queued: a stop may have begun meanwhile.
        close = self.closes(plan, close)
        keep = plan.keep_alive
        ends = close or (keep is not None and self._closes_silently(item, plan))
        # Reported before the bytes go: a client holding the answer finds it journaled.
        if started != now or cut_ms is not None or waited_ms:
            self.report(
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
            self.after(plan, ends)

    def _closes_silently(self, item: Request | Refusal, plan: Plan) -> bool:
        keep = plan.keep_alive
        if keep is None or isinstance(item, Refusal):
            return False
        return keep.close_after or (
            keep.max_requests is not None and item.index >= keep.max_requests
        )

    def after(self, plan: Plan, close: bool) -> None:
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
        if self.closed or self.in_flight:
            return
        if self._stale is Stale.DROP_NEXT:
            self._drop_next = True
        else:
            self._close_gracefully()

    def _drop(self, request: Request) -> None:
        """The connection went stale: the request is read, and the connection closed."""
        now = time.time()
        self.report(request, Outcome(None, now, closed=True, dropped=True))
        self.closed = True
        assert self.transport is not None
        self.transport.close()

    def _waited(self, timed: Waits, reason: str | None) -> None:
        """A plan's waits on timers are over (or ended early, for *reason*): finish it."""
        self._waiting.timed = None
        item, started = timed.item, timed.started
        if reason is None and timed.plan.stream is not None and timed.cut_ms is None:
            assert isinstance(item, Request)  # (a refusal's plan is an answer)
            # The exchange is over when the stream is.
            self._stream(item, timed.plan, timed.close, started, timed.waited_ms, None)
            return
        try:
            if reason is not None:
                self._gone(item, reason, Outcome(None, started, waited_ms=timed.waited_ms))
            else:
                plan, answer, close = timed.plan, timed.answer, timed.close
                self._finish(item, plan, answer, close, started, timed.cut_ms, timed.waited_ms)
        finally:
            self._exchange_over()

    def _stream(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        done: asyncio.Future[None] | None,
    ) -> None:
        """Play *plan*'s stream (:mod:`.streaming`); when it is over, what the connection
        does after it, then the next exchange (or *done* is resolved: a task plays it)."""
        streaming = Streaming(
            self,
            self._shared.timers,
            self._loop,
            item,
            plan,
            self.closes(plan, close),
            started,
            waited,
        )
        self._streaming = streaming
        self._stream_done = done
        self._waiting.timed = streaming
        streaming.start()
        watches = self._shared.watches
        if plan.watch is not None and watches is not None:  # a watched task's: followed
            watches.follow(streaming, plan.watch)

    def streamed(self, streaming: Streaming) -> None:
        """*streaming* is over: what the connection does after it, then the next exchange
        (or the task playing it is told)."""
        done, self._stream_done = self._stream_done, None
        self._streaming = None
        self._waiting.timed = None
        watches = self._shared.watches
        if streaming.plan.watch is not None and watches is not None:
            watches.unfollow(streaming)
        if not self.closed:
            self.after(streaming.plan, streaming.close)
        if done is None:
            self._exchange_over()
        else:
            resolve(done, None)

    def _exchange_over(self) -> None:
        """The exchange played by timers or a task is over: the next one, or a quiet close."""
        self._busy = False
        if not self.closed:
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
        assert self.transport is not None
        if plan.fault is not None and cut_ms is None:
            self.report(
                item,
                Outcome(answer, started, waited_ms=waited, fault=plan.fault, closed=True),
            )
            self.fault(plan.fault, answer, plan.fault_seed)
            return
        self._send(item, plan, answer, close, started, time.time(), cut_ms=cut_ms, waited_ms=waited)

    def _gone(self, item: Request | Refusal, reason: str, outcome: Outcome) -> None:
        """The client left, or the server stopping cut the exchange: report it, end it."""
        stopped = reason == STOP
        left_at = None if stopped else (self.left_at or time.time())
        self.report(
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
        self.abort()

    # -- closing -------------------------------------------------------------------

    def _close_gracefully(self) -> None:
        """FIN, then discard what the client still sends until it closes (or linger passes)."""
        if self.closed or self.transport is None:
            self.closed = True
            return
        self.closed = True
        self._reader.stopped = True
        self._reader.deadline = 0.0
        transport = self.transport
        if self._waiting.eof or not transport.can_write_eof():
            transport.close()
        else:
            self._lingering = True
            transport.write_eof()
            # A deadline, which the server's sweep looks at (expire closes it): no timer
            # made and cancelled per connection, since most clients close well before.
            self._reader.deadline = self._loop.time() + self._limits.linger
        # Neither the linger nor the close waits for a client that does not read.
        self._watch_writes()
        self._shared.check_quiet()

    def closes(self, plan: Plan, close: bool) -> bool:
        """Whether the connection closes after *plan*'s answer, saying so: decided when the
        answer goes, not when the request was queued (a stop may have begun meanwhile)."""
        return close or plan.close or self._shared.draining

    def abort(self) -> None:
        """Cut the connection now: nothing more is read nor written."""
        self.closed = True
        self._reader.stopped = True
        if self.transport is not None:
            self.transport.abort()

    def fault(self, fault: Fault, answer: Answer, seed: int) -> None:
        """Do *fault* to the connection, which it ends (reported already)."""
        self.closed = True
        assert self.transport is not None
        FAULTS[fault](self.transport, answer, seed)

    def report(self, item: Request | Refusal, outcome: Outcome) -> None:
        """Tell the handler how the exchange went."""
        try:
            self._handler.played(item, outcome)
        except Exception:
            log.exception("the handler failed to record %r", item)

    # -- plans played by a task: a dribbled body, a plan made off the loop ----------

    async def _play(
        self, item: Request | Refusal, planned: Plan | Awaitable[Plan], close: bool
    ) -> None:
        started = time.time()
        try:
            if isinstance(planned, Plan):
                plan = planned
            else:
                reason, got = await self._waiting.planned(planned)
                if got is None:
                    self._gone(item, reason or LEFT, Outcome(None, started))
                    return
                plan = got
            await self._play_plan(item, plan, close, started)
        finally:
            self._task = None
            self._exchange_over()

    async def _play_plan(
        self, item: Request | Refusal, plan: Plan, close: bool, started: float
    ) -> None:
        answer, cut_ms, waited = plan.answer, None, 0.0
        for wait in plan.waits:
            seconds, alternative = wait.ms / 1000, None
            if wait.cut is not None and wait.cut.after_ms < wait.ms:
                seconds, alternative = wait.cut.after_ms / 1000, wait.cut
            begun = self._loop.time()
            reason = await self._waiting.wait(seconds)
            spent = (self._loop.time() - begun) * 1000
            waited += spent
            if reason is not None:
                self._gone(item, reason, Outcome(None, started, waited_ms=waited))
                return
            if alternative is not None:
                cut_answer = alternative.answer
                answer = cut_answer if isinstance(cut_answer, Answer) else cut_answer.answer(spent)
                cut_ms = spent
                break
        if plan.stream is not None and cut_ms is None and isinstance(item, Request):
            done: asyncio.Future[None] = self._loop.create_future()
            self._stream(item, plan, close, started, waited, done)
            await done
            return
        if plan.upstream is not None and cut_ms is None:  # a proxy step: forwarded after its waits
            await Relay(self, self._waiting, self._loop).run(item, plan, close, started, waited)
            return
        if plan.dribble is not None and cut_ms is None and answer.has_body:
            await self._dribble(item, plan, answer, close, started, waited)
            return
        self._finish(item, plan, answer, close, started, cut_ms, waited)

    async def _dribble(
        self,
        item: Request | Refusal,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        waited: float,
    ) -> None:
        assert self.transport is not None
        assert plan.dribble is not None
        close = self.closes(plan, close)
        silent = self._closes_silently(item, plan)
        pieces = plan.dribble.pieces(answer.body)
        if isinstance(item, Request) and item.method == "HEAD":
            pieces = [b""]
        pause = plan.dribble.over_ms / 1000 / len(pieces)
        headers_at = time.time()
        self.transport.write(answer.head(close=close))
        for i, piece in enumerate(pieces):
            begun = self._loop.time()
            reason = await self._waiting.wait(pause)
            if reason is None and self.write_paused:
                reason = await self._waiting.drained()
            waited += (self._loop.time() - begun) * 1000
            if reason is not None:
                outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                self._gone(item, reason, outcome)
                return
            if i == len(pieces) - 1:
                self.report(
                    item,
                    Outcome(
                        answer,
                        started,
                        headers_at=headers_at,
                        last_byte_at=time.time(),
                        waited_ms=waited,
                        closed=close or silent,
                    ),
                )
            self.transport.write(piece)
        self.after(plan, close or silent)
