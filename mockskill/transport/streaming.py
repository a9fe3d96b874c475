"""A relayed answer streamed back: the upstream's head and body, as they come, to the consumer.

:class:`Streaming` is the part of a :class:`~.connection.Connection` that
hands an upstream's answer on once its head came (:mod:`.relaying` gets it
there): its status line and headers go to the consumer as they arrive, its
body chunk by chunk (``Content-Length`` kept when the upstream sent one,
chunked otherwise), waiting for the consumer to read what was written (write
backpressure; the upstream's reading pauses meanwhile); an answer whole
already goes in one write (:meth:`Streaming._whole`, most). A descriptor or
the list of skills is buffered (up to
:data:`~mockskill.engine.proxying.MAX_REWRITTEN`) to rewrite its URLs; a
commit-then-fail step (``after:``) reads the whole answer, then answers its
error or does its fault instead. It also reports every relay's outcome, and
cuts the consumer's connection when the upstream fails after the status line
went out (there is no way left to tell it in HTTP).
"""

from __future__ import annotations

import asyncio
import time

from ..engine.plan import Answer, Outcome, Plan, Relayed, Upstream
from ..engine.proxying import MAX_GRADED, MAX_REWRITTEN
from .faults import FAULTS
from .handler import Request
from .playing import Playing
from .shared import resolve
from .upstream import UpstreamConnection
from .waiting import LEFT

TIMEOUT = "timeout"


class Streaming(Playing):
    """A connection's relayed answers (its attributes are the connection's)."""

    # Slots, as the connection's: a new attribute has to be named here (_closed is set
    # here too, so it is this class's).
    __slots__ = ("_closed",)

    _left_at: float | None

    def _told(self, item: Request, outcome: Outcome) -> None:
        """Report *outcome* (once: a relay's outcome carries what happened upstream)."""
        relayed = outcome.upstream
        if relayed is not None:
            relayed.reported = True
        self._report(item, outcome)

    async def _upstream(self, up: UpstreamConnection, timeout: float) -> str | None:
        """Until the upstream says something (None), *timeout* passes, or the consumer goes."""
        if self._interrupted is not None:
            return self._interrupted
        if self._eof:
            return LEFT
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        up.when_ready(lambda: resolve(waiter, None))
        handle = self._loop.call_later(timeout, resolve, waiter, TIMEOUT)
        self._waiter, self._waiter_ends_on_eof = waiter, True
        try:
            return await waiter
        finally:
            handle.cancel()
            self._waiter = None

    async def _next_chunks(
        self, up: UpstreamConnection, timeout: float, relayed: Relayed
    ) -> tuple[list[bytes], str | None]:
        """The body's next chunks (empty once whole), or the reason it cannot go on."""
        while True:
            if up.chunks:
                return up.take_chunks(), None
            if up.complete:
                return [], None
            if up.error is not None:
                return [], up.error.reason
            reason = await self._upstream(up, timeout)
            if reason == TIMEOUT:
                return [], f"the upstream sent nothing more for {timeout * 1000:g} ms"
            if reason is not None:
                return [], reason

    def _keep(self, relayed: Relayed, upstream: Upstream, chunks: list[bytes]) -> None:
        room = max(upstream.keep, MAX_GRADED if (relayed.status or 0) >= 400 else 0)
        for chunk in chunks:
            space = room - len(relayed.body)
            if len(chunk) > space:
                relayed.truncated = True
            if space > 0:
                relayed.body += chunk[:space]

    async def _commit_then_fail(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        up: UpstreamConnection,
        relayed: Relayed,
    ) -> None:
        """The upstream's whole answer read (it ran), then the step's ``after:`` instead."""
        upstream = plan.upstream
        assert upstream is not None
        assert upstream.after is not None
        begun = time.perf_counter()
        while True:
            chunks, reason = await self._next_chunks(up, upstream.proxy.timeout_ms / 1000, relayed)
            self._keep(relayed, upstream, chunks)
            if reason is not None or not chunks:
                break
        relayed.ms += (time.perf_counter() - begun) * 1000
        if reason in (LEFT, "stop"):
            self._relay_gone(item, reason, Outcome(None, started, waited_ms=waited), relayed)
            return
        if reason is not None:
            relayed.error = reason
        answer = upstream.after
        if upstream.after_fault is not None:
            self._told(
                item,
                Outcome(
                    answer,
                    started,
                    waited_ms=waited,
                    fault=upstream.after_fault,
                    closed=True,
                    upstream=relayed,
                ),
            )
            self._closed = True
            assert self._transport is not None
            FAULTS[upstream.after_fault](self._transport, answer, upstream.fault_seed)
            return
        self._relay_whole(item, plan, answer, close, started, waited, relayed)

    async def _stream(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        up: UpstreamConnection,
        relayed: Relayed,
        begun: float,
    ) -> None:
        """The upstream's answer relayed as it comes (buffered first when it is rewritten)."""
        upstream = plan.upstream
        assert upstream is not None
        assert relayed.status is not None
        if up.complete:  # the whole answer came with its head (most): one write
            self._whole(item, plan, close, started, waited, up, relayed, begun)
            return
        transport = self._transport
        assert transport is not None
        timeout = upstream.proxy.timeout_ms / 1000
        head_only = item.method == "HEAD"
        status = relayed.status
        has_body = status >= 200 and status not in (204, 304)
        length = _length(up.headers)
        headers = list(relayed.response_headers)
        complete = False
        pending = up.take_chunks()
        kept = False  # whether the body was kept (for a recording, the audit) already
        if upstream.rewrite is not None and has_body and not head_only:
            size = 0
            while not complete and size <= MAX_REWRITTEN:  # buffered, to rewrite its URLs
                chunks, reason = await self._next_chunks(up, timeout, relayed)
                if reason is not None:
                    self._relay_broken(item, started, waited, relayed, reason, None, begun)
                    return
                pending += chunks
                size += sum(map(len, chunks))
                complete = not chunks
            if complete:
                body = b"".join(pending)
                self._keep(relayed, upstream, [body])
                kept = True
                rewritten = upstream.rewrite(body)
                if rewritten is not body:
                    relayed.sent_body = rewritten
                pending, length = [rewritten], len(rewritten)
        close, framing, chunked = self._answer_framing(item, plan, close, has_body, length)
        answer = Answer(status, ())
        headers_at = time.time()
        head = upstream.answer_head(status, up.reason, headers, framing, close=close)
        if complete:  # whole once buffered to be rewritten: one write
            data = b"".join(pending)
            if chunked:
                data = (_chunk(data) if data else b"") + b"0\r\n\r\n"
            relayed.ms = (time.perf_counter() - begun) * 1000
            self._report_relayed(item, answer, started, headers_at, waited, close, relayed)
            transport.write(head + data)
            self._after(plan, close)
            return
        transport.write(head)
        while True:
            if pending:
                if not kept:
                    self._keep(relayed, upstream, pending)
                data = b"".join(pending)
                pending = []
            else:
                data = b""
            if complete:  # journalled before the last byte goes
                relayed.ms = (time.perf_counter() - begun) * 1000
                self._report_relayed(item, answer, started, headers_at, waited, close, relayed)
                if chunked:
                    data = (_chunk(data) if data else b"") + b"0\r\n\r\n"
                transport.write(data)
                break
            if data:
                transport.write(_chunk(data) if chunked else data)
                if self._write_paused:
                    reason = await self._drained()
                    if reason is not None:
                        up.close()
                        outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                        self._relay_gone(item, reason, outcome, relayed)
                        return
            chunks, reason = await self._next_chunks(up, timeout, relayed)
            if reason is not None:
                up.close()
                if reason in (LEFT, "stop"):
                    outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                    self._relay_gone(item, reason, outcome, relayed)
                    return
                self._relay_broken(item, started, waited, relayed, reason, answer, begun)
                return
            pending, complete = chunks, not chunks
        if close and self._transport is not None:
            self._after(plan, close)

    def _answer_framing(
        self, item: Request, plan: Plan, close: bool, has_body: bool, length: int | None
    ) -> tuple[bool, str | None, bool]:
        """Whether the connection closes after the answer, its framing line, whether chunked."""
        close = close or plan.close or self._shared.draining
        framing: str | None = None
        if has_body:
            if length is not None:
                framing = f"Content-Length: {length}"
            elif item.version == "1.0":
                close = True  # an HTTP/1.0 client: the body ends with the connection
            else:
                framing = "Transfer-Encoding: chunked"
        return close, framing, framing is not None and framing.startswith("Transfer")

    def _whole(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        up: UpstreamConnection,
        relayed: Relayed,
        begun: float,
    ) -> None:
        """The upstream's answer, whole already, relayed in one write (rewritten if it is to
        be), reported first."""
        upstream = plan.upstream
        assert upstream is not None
        assert relayed.status is not None
        transport = self._transport
        assert transport is not None
        status = relayed.status
        head_only = item.method == "HEAD"
        has_body = status >= 200 and status not in (204, 304) and not head_only
        length = _length(up.headers)
        pending = up.take_chunks()
        data = b"".join(pending) if has_body else b""
        if has_body:
            self._keep(relayed, upstream, [data])
        if upstream.rewrite is not None and has_body:
            rewritten = upstream.rewrite(data)
            if rewritten is not data:
                relayed.sent_body = rewritten
            data, length = rewritten, len(rewritten)
        close, framing, chunked = self._answer_framing(
            item, plan, close, status >= 200 and status not in (204, 304), length
        )
        headers_at = time.time()
        head = upstream.answer_head(
            status, up.reason, relayed.response_headers, framing, close=close
        )
        if chunked and not head_only:
            data = (_chunk(data) if data else b"") + b"0\r\n\r\n"
        relayed.ms = (time.perf_counter() - begun) * 1000
        self._report_relayed(item, Answer(status, ()), started, headers_at, waited, close, relayed)
        transport.write(head + data)
        self._after(plan, close)

    def _report_relayed(
        self,
        item: Request,
        answer: Answer,
        started: float,
        headers_at: float,
        waited: float,
        close: bool,
        relayed: Relayed,
    ) -> None:
        self._told(
            item,
            Outcome(
                answer,
                started,
                headers_at=headers_at,
                last_byte_at=time.time(),
                waited_ms=waited,
                closed=close,
                upstream=relayed,
            ),
        )

    def _relay_whole(
        self,
        item: Request,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        waited: float,
        relayed: Relayed,
    ) -> None:
        """*answer* written whole (a failure's, or ``after:``'s), reported first."""
        transport = self._transport
        assert transport is not None
        close = close or plan.close or self._shared.draining
        now = time.time()
        self._report_relayed(item, answer, started, now, waited, close, relayed)
        transport.write(answer.head(close=close) if item.method == "HEAD" else answer.wires[close])
        self._after(plan, close)

    def _relay_broken(
        self,
        item: Request,
        started: float,
        waited: float,
        relayed: Relayed,
        reason: str,
        answer: Answer | None,
        begun: float,
    ) -> None:
        """The upstream failed once its answer had begun: the consumer's connection is cut."""
        relayed.error, relayed.cut = reason, True
        if begun:
            relayed.ms = (time.perf_counter() - begun) * 1000
        now = time.time()
        outcome = Outcome(answer, started, headers_at=now, waited_ms=waited, closed=True)
        outcome.upstream = relayed
        self._told(item, outcome)
        self._closed = True
        self._dead_parser = True
        if self._transport is not None:
            self._transport.abort()

    def _relay_gone(self, item: Request, reason: str, outcome: Outcome, relayed: Relayed) -> None:
        """The consumer left, or the stop cut the exchange: reported with what happened upstream."""
        stopped = reason == "stop"
        outcome.client_left_at = None if stopped else (self._left_at or time.time())
        outcome.stopped, outcome.closed, outcome.upstream = stopped, True, relayed
        self._told(item, outcome)
        self._closed = True
        self._dead_parser = True
        if self._transport is not None:
            self._transport.abort()


def _length(headers: list[tuple[str, str]]) -> int | None:
    """The upstream's ``Content-Length``, when it framed its answer by one (not chunked)."""
    length = None
    for name, value in headers:
        low = name.lower()
        if low == "transfer-encoding":
            return None
        if low == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return None
    return length


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)
