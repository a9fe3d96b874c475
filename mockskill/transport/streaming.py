"""A stream of events played to a connection: the head, each piece on time, the ending.

A :class:`Streaming` plays, for a :class:`~.connection.Connection` (its
:class:`Downstream`), a plan with :attr:`~mockskill.engine.plan.Plan.stream`, once the
plan's waits are over. It decides nothing: the engine framed every byte
(:mod:`mockskill.engine.streams`); this times them and ends the stream as the plan says.

- The head goes at once: the body chunked for an HTTP/1.1 client, delimited by the
  connection's close for an HTTP/1.0 one (a ``HEAD`` gets the head alone).
- Each piece goes after its delay, counted from the moment the piece before it was due
  (so the pace does not drift with the loop's lateness), on the server's
  :class:`~.timers.Timers`: no task and no loop timer of its own, so that thousands of
  held streams are thousands of small objects. Pieces due together go in one write:
  the play's runs (:attr:`~mockskill.engine.plan.StreamPlay.runs`: a piece with a delay
  and the pieces without one after it) were found and their bytes joined as the play was
  made, once per step and address, not once per stream, so a hundred thousand events due
  at once are a few dozen writes of bytes made beforehand, not a hundred thousand steps
  of Python (bench/streams.py: one stream, events as fast as the client reads, beside a
  bare asyncio server).
- While a pause lasts longer than the stream's heartbeat, a heartbeat goes every
  heartbeat (not during a stall: its bytes stop).
- Then the ending: ``complete`` (the last chunk; keep-alive as usual), ``close`` (the
  last chunk, then the connection closed: no terminal event came), ``reset`` (RST),
  ``broken_chunking`` (a chunk size line that is no number, then the close), ``stall``
  (nothing more, the socket open, for the stall's time or :data:`MAX_STALL`, then the
  connection closed without the last chunk), or :data:`OPEN`: no ending yet, the stream
  held with its heartbeats until :meth:`Streaming.follow` gives it its next pieces (a
  watched task's, :mod:`.task_watches`).

It ends early when the client leaves (``client_left``) or the server stops
(``stopped``), through the connection's :class:`~.waiting.Waiting`. A client that does
not read is written nothing more while writing is paused (asyncio's flow control:
above the transport's high-water mark), so a stream holds no more than that of unsent
bytes; one that reads nothing for :attr:`~.reading.Limits.write_timeout` is given up
on (``gave_up``): the connection's write timer cuts it. How it went is reported once,
as the outcome's :class:`~mockskill.engine.plan.Streamed`, before its last bytes go.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from ..engine.plan import (
    FRAMING_HEADERS,
    RUN_BYTES,
    Answer,
    Fault,
    Outcome,
    Plan,
    Streamed,
    StreamPlay,
)
from .handler import Refusal, Request
from .timers import Timers
from .waiting import STOP

GAVE_UP = "gave_up"
"""Why a stream ends when its client read nothing of it for the write timeout."""
MAX_STALL = 300.0
"""Seconds a ``stall`` without ``for:`` holds the connection open at most, when the
client does not leave first (docs/streams.md)."""
BATCH_BYTES = RUN_BYTES
"""Bytes of pieces due together written at once at most (whole runs), before flow control
is looked at again: a stream of a hundred thousand events due at once is not one write."""
RESET = Fault("CONNECTION_RESET_BY_PEER")
"""The transport fault a ``reset`` ending does (:mod:`.faults`)."""
LAST_CHUNK = b"0\r\n\r\n"
BROKEN_CHUNK = b"zz-not-a-chunk-size\r\n"
"""What ``broken_chunking`` sends where a chunk's size line belongs."""
OPEN = "open"
"""A play's ending that is no ending: the stream is held open (heartbeats going) until
:meth:`Streaming.follow` gives it more, or it is interrupted."""
WRITTEN_AT_END = frozenset({"complete", "close", "broken_chunking", "reset"})
"""Endings whose last bytes go as they are reported: the stream had not stopped."""
_EARLY = 0.0005
"""Seconds before its due time a piece is taken as due (the timers round to the ms)."""


class Downstream(Protocol):
    """What a stream needs of the client's connection."""

    transport: asyncio.Transport | None
    write_paused: bool
    """Writing is paused: the client has not read enough of what was written."""
    left_at: float | None
    """When the client left (None: it has not)."""

    def report(self, item: Request | Refusal, outcome: Outcome) -> None:
        """Tell the handler how the exchange went."""

    def abort(self) -> None:
        """Cut the connection now: nothing more is read nor written."""

    def fault(self, fault: Fault, answer: Answer, seed: int) -> None:
        """Do *fault* to the connection, which it ends."""

    def streamed(self, streaming: Streaming) -> None:
        """*streaming* is over (reported already): what the connection does after it."""


def stream_head(answer: Answer, *, chunked: bool, close: bool) -> bytes:
    """The status line and headers of a stream: the answer's, and the transport's framing
    (``Transfer-Encoding: chunked``, or none: the close ends the body)."""
    lines = [f"HTTP/1.1 {answer.status} {answer.phrase}"]
    lines += [f"{k}: {v}" for k, v in answer.headers if k.lower() not in FRAMING_HEADERS]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Streaming:
    """One stream, played on the server's timers (see the module's docstring).

    Once it is over, the connection is told (:meth:`Downstream.streamed`, with this
    object: no callback made per stream for it to hold); :attr:`close` then says whether
    the connection is to close (FIN, after what was written): an HTTP/1.0 client's, one
    that asked to, and every ending but ``complete`` and ``reset`` (which cut it).
    """

    __slots__ = (
        "_blocked",
        "_chunked",
        "_counted",
        "_down",
        "_due",
        "_events",
        "_head_only",
        "_headers_at",
        "_last_byte_at",
        "_last_id",
        "_last_write",
        "_loop",
        "_named",
        "_next",
        "_play",
        "_run",
        "_stalling",
        "_tick",
        "_timers",
        "close",
        "item",
        "over",
        "plan",
        "started",
        "waited_ms",
    )

    def __init__(
        self,
        down: Downstream,
        timers: Timers,
        loop: asyncio.AbstractEventLoop,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited_ms: float,
    ) -> None:
        assert plan.stream is not None
        self._down, self._timers, self._loop = down, timers, loop
        self.item, self.plan, self.started, self.waited_ms = item, plan, started, waited_ms
        self._play: StreamPlay = plan.stream
        self._run = 0
        """The next run to send (the play's :attr:`~StreamPlay.runs`); :attr:`_next` is its
        first piece."""
        self._chunked = item.version != "1.0"
        self.close = close or not self._chunked  # HTTP/1.0: the close ends the body
        self._head_only = item.method == "HEAD" or not plan.answer.has_body
        self._next = 0
        self._events = 0
        self._last_id: str | None = None
        self._counted = 0
        """Events sent by the plays before this one (:meth:`follow`)."""
        self._named: str | None = None
        """The last id the plays before this one sent."""
        self._due = 0.0
        """Loop time the last piece sent was due at (its successor's delay counts from it)."""
        self._last_write = 0.0
        """Loop time of the last bytes written (a heartbeat is due a heartbeat after)."""
        self._last_byte_at = 0.0
        """Wall-clock time of the last bytes written (the journal's stalled time)."""
        self._headers_at = 0.0
        self._tick: int | None = None
        """The timer under way: its key in the timers (see :meth:`Timers.add`)."""
        self._blocked = False
        """Writing is paused: what is due waits for :meth:`writable`."""
        self._stalling = False
        self.over = False

    @property
    def last_id(self) -> str | None:
        """The id of the last event sent (None: none yet)."""
        return self._last_id

    # -- what the connection calls --------------------------------------------------

    def start(self) -> None:
        """Send the head, then play the pieces."""
        transport = self._down.transport
        assert transport is not None
        now = self._loop.time()
        self._headers_at = time.time()
        self._due = self._last_write = now
        answer = self.plan.answer  # (a status that has no body has no framing either)
        head = stream_head(answer, chunked=self._chunked and answer.has_body, close=self.close)
        if self._head_only:
            self._end("complete", head)
            return
        transport.write(head)
        self._last_byte_at = self._headers_at
        self._pump()

    def writable(self) -> None:
        """The client read enough of what was written: what is due goes on."""
        if self._blocked and not self.over:
            self._blocked = False
            self._pump()

    def interrupt(self, reason: str) -> None:
        """The client left (or read nothing for too long), or the server stops: the
        stream ends now, reported, the connection cut."""
        if self.over:
            return
        self._cancel()
        if self._stalling:
            ended = "stall"  # the fault was done: how long the client held it is the record
        elif reason == STOP:
            ended = "stopped"
        elif reason == GAVE_UP:
            ended = GAVE_UP
        else:
            ended = "client_left"
        stopped = reason == STOP
        now = time.time()
        left_at = None if stopped else (self._down.left_at or now)
        self._finish(ended, now, client_left_at=left_at, stopped=stopped)
        self._down.abort()
        self._down.streamed(self)

    def follow(self, play: StreamPlay) -> None:
        """Play *play* from now in place of what is left of this one (its delays counted
        from now; the events and last id sent so far kept): a watched task's next events,
        planned anew from the store's reading (:mod:`.task_watches`)."""
        if self.over or self._stalling:
            return
        self._cancel()
        self._counted, self._named = self._events, self._last_id
        self._play = play
        self._run = self._next = 0
        self._due = self._loop.time()
        if not self._blocked:
            self._pump()

    # -- playing ---------------------------------------------------------------------

    def _fire(self) -> None:
        self._tick = None
        if self._stalling:
            self._stall_over()
        else:
            self._pump()

    def _pump(self) -> None:
        """Write what is due by now, in batches while the client reads; then wait for the
        next piece (or heartbeat), or end."""
        down, pieces, loop = self._down, self._play.pieces, self._loop
        runs = self._play.runs
        ends, count, run_data = runs.ends, len(runs.ends), runs.data
        transport = down.transport
        assert transport is not None
        while True:
            if down.write_paused:
                self._blocked = True
                return
            now = loop.time()
            first = self._run
            size = 0
            while self._run < count and size < BATCH_BYTES:
                due = self._due + pieces[self._next].delay_ms / 1000
                if due > now + _EARLY:
                    break
                self._due = due
                size += len(run_data[self._run])
                self._next = ends[self._run]
                self._run += 1
            if self._run == first:
                data = b""
            else:
                self._events = self._counted + runs.events[self._run - 1]
                self._last_id = runs.last_ids[self._run - 1] or self._named
                data = (
                    run_data[first]
                    if self._run == first + 1
                    else b"".join(run_data[first : self._run])
                )
            if self._run == count:  # the ending follows the last piece at once
                self._end(self._play.ending, data)
                return
            if data:
                transport.write(self._framed(data))
                self._last_write = now
                self._last_byte_at = time.time()
            if size < BATCH_BYTES:
                break
        self._wait(now)

    def _wait(self, now: float) -> None:
        """Set the timer for the next piece, or for a heartbeat before it."""
        play = self._play
        due = self._due + play.pieces[self._next].delay_ms / 1000
        heartbeat = play.heartbeat_ms
        if heartbeat is not None and play.heartbeat:
            beat = self._last_write + heartbeat / 1000
            if beat < due - _EARLY:
                self._tick = self._timers.add(self._beat, beat - now)
                return
        self._tick = self._timers.add(self._fire, due - now)

    def _beat(self) -> None:
        """A heartbeat is due: sent, unless the client is not reading (then nothing more
        is written until it does)."""
        self._tick = None
        transport = self._down.transport
        assert transport is not None
        if self._down.write_paused:
            self._blocked = True
            return
        now = self._loop.time()
        transport.write(self._framed(self._play.heartbeat))
        self._last_write = now
        self._last_byte_at = time.time()
        self._pump()

    def _framed(self, data: bytes) -> bytes:
        """*data* as the body carries it: one chunk, or as it is (HTTP/1.0)."""
        if not self._chunked or not data:
            return data
        return b"%x\r\n%s\r\n" % (len(data), data)

    # -- ending ----------------------------------------------------------------------

    def _end(self, ending: str, data: bytes) -> None:
        """Every piece is sent but *data* (the last ones, or the head alone): end as the
        plan says (*ending*), reported before the last bytes go."""
        transport = self._down.transport
        assert transport is not None
        if self._head_only:
            self._finish("complete", time.time())
            transport.write(data)
            self._down.streamed(self)
            return
        body = self._framed(data)
        if ending == OPEN:  # more may come (follow): held open, a heartbeat every heartbeat
            if body:
                transport.write(body)
                self._last_write = self._loop.time()
                self._last_byte_at = time.time()
            heartbeat = self._play.heartbeat_ms
            if heartbeat is not None and self._play.heartbeat:
                due = self._last_write + heartbeat / 1000 - self._loop.time()
                self._tick = self._timers.add(self._beat, max(0.0, due))
            return
        if ending == "stall":
            if body:
                transport.write(body)
                self._last_byte_at = time.time()
            self._stalling = True
            stall_ms = self._play.stall_ms
            seconds = MAX_STALL if stall_ms is None else stall_ms / 1000
            self._tick = self._timers.add(self._fire, seconds)
            return
        self._finish(ending, time.time())
        if ending in ("complete", "close"):
            transport.write(body + LAST_CHUNK if self._chunked else body)
            self.close = self.close or ending == "close"
        elif ending == "broken_chunking":
            transport.write(body + BROKEN_CHUNK)
            self.close = True
        else:  # reset: what was written goes first, then RST
            if body:
                transport.write(body)
            self._down.fault(RESET, self.plan.answer, 0)
        self._down.streamed(self)  # the connection closes, is cut, or serves the next request

    def _stall_over(self) -> None:
        """The stall's time is over: the connection closed, the body never finished."""
        self._finish("stall", time.time())
        self.close = True
        self._down.streamed(self)

    def _finish(
        self,
        ended: str,
        at: float,
        *,
        client_left_at: float | None = None,
        stopped: bool = False,
    ) -> None:
        """Report how the stream went (once)."""
        self.over = True
        # An ending that writes (the last chunk, the last events) writes them now.
        last_byte = at if ended in WRITTEN_AT_END else self._last_byte_at
        streamed = Streamed(self._events, self._last_id, ended, at, last_byte or at)
        outcome = Outcome(
            self.plan.answer,
            self.started,
            headers_at=self._headers_at,
            last_byte_at=None if client_left_at is not None or stopped else at,
            client_left_at=client_left_at,
            waited_ms=self.waited_ms,
            stopped=stopped,
            closed=ended != "complete" or self.close,
            stream=streamed,
        )
        self._down.report(self.item, outcome)

    def _cancel(self) -> None:
        tick = self._tick
        if tick is not None:
            self._timers.remove(self._fire, tick)
            self._timers.remove(self._beat, tick)
            self._tick = None
