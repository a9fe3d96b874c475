"""A proxy plan played: the request forwarded to a real provider, its answer relayed back.

A :class:`Relay` plays, for a :class:`~.connection.Connection` (its
:class:`Downstream`), a plan with :attr:`~mockskill.engine.plan.Plan.upstream`.
It decides nothing: the plan's :class:`~mockskill.engine.proxying.Upstream`
makes the request's head and the answer's, rewrites what is to be rewritten,
and renders the error answered when no answer came; the relay sends the
request (:mod:`.upstream`'s pooled client), waits for the answer's head, and
hands the answer on once it came: its status line and headers as they
arrive, its body chunk by chunk (``Content-Length`` kept when the upstream
sent one, chunked otherwise), waiting for the consumer to read what was
written (write backpressure; the upstream's reading pauses meanwhile); an
answer whole already goes in one write (most). An answer that is a stream of
events (``text/event-stream``, ``application/x-ndjson``: the plan's
:meth:`~mockskill.engine.forwarding.Upstream.relayed_stream` says) is relayed the same
way, each chunk handed on as it is read; every chunk is given, as it goes, to its
:class:`~mockskill.engine.relayed_streams.RelayedStream`, which finds the events in
it (the journal's ``Entry.stream``, a recording's ``stream:`` step), and is told how
the stream ended. A descriptor or the list of
skills is buffered (up to :data:`~mockskill.engine.proxying.MAX_REWRITTEN`)
to rewrite its URLs; a commit-then-fail step (``after:``) reads the whole
answer, then answers its error or does its fault instead. It reports every
relay's outcome with a :class:`~mockskill.engine.proxying.Relayed` on it,
and cuts the consumer's connection when the upstream fails after the status
line went out (there is no way left to tell it in HTTP).

It is played by the connection's task, after the plan's waits. The consumer
leaving, or the server's stop cutting the exchange, ends it at once (the
upstream connection is dropped): its waits are the connection's
(:class:`~.waiting.Waiting`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from ..engine.plan import Answer, Fault, Outcome, Plan, Relayed, Upstream
from ..engine.proxying import MAX_GRADED, MAX_REWRITTEN
from .handler import Refusal, Request
from .upstream import UpstreamConnection, UpstreamError, pool
from .waiting import LEFT, STOP, TIMEOUT, Waiting

log = logging.getLogger("mockskill.transport")


class Downstream(Protocol):
    """What a relay needs of the consumer's connection."""

    transport: asyncio.Transport | None
    write_paused: bool
    """Writing is paused: the consumer has not read enough of what was written."""
    closed: bool
    left_at: float | None
    """When the consumer left (None: it has not)."""

    def closes(self, plan: Plan, close: bool) -> bool:
        """Whether the connection closes after this answer, saying so."""

    def report(self, item: Request | Refusal, outcome: Outcome) -> None:
        """Tell the handler how the exchange went."""

    def after(self, plan: Plan, close: bool) -> None:
        """What the connection does once the answer is written."""

    def fault(self, fault: Fault, answer: Answer, seed: int) -> None:
        """Do *fault* to the connection, which it ends."""

    def abort(self) -> None:
        """Cut the connection now: nothing more is read nor written."""


class Relay:
    """One proxy plan's relay, for one exchange of a connection (see the module's docstring)."""

    __slots__ = ("_down", "_loop", "_waiting")

    def __init__(self, down: Downstream, waiting: Waiting, loop: asyncio.AbstractEventLoop) -> None:
        self._down, self._waiting, self._loop = down, waiting, loop

    async def run(
        self, item: Request | Refusal, plan: Plan, close: bool, started: float, waited: float
    ) -> None:
        """Forward *item* upstream and relay the answer; report how it went."""
        assert isinstance(item, Request)  # a refusal is never proxied
        relayed = Relayed(item.target, ())
        try:
            await self._relaying(item, plan, close, started, waited, relayed)
        except Exception as exc:  # a bug: the consumer must not wait for an answer forever
            self._relay_failed(item, started, waited, relayed, exc)

    def _relay_failed(
        self, item: Request, started: float, waited: float, relayed: Relayed, exc: Exception
    ) -> None:
        log.exception("relaying %r failed", item)
        if not relayed.reported:
            self._relay_broken(
                item, started, waited, relayed, f"mockskill failed: {exc}", None, 0.0
            )
        elif not self._down.closed:
            self._down.abort()

    async def _relaying(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        relayed: Relayed,
    ) -> None:
        upstream = plan.upstream
        assert upstream is not None
        if upstream.keep:  # the consumer's headers decoded only for a recording (the Exchange)
            relayed.headers = item.headers
        head = upstream.request_head(
            item.method, item.target, item.raw_headers, item.peer[0], len(item.body)
        )
        begun = time.perf_counter()
        try:
            got = await self._exchange(upstream, head, item, relayed)
        except UpstreamError as exc:
            relayed.error = exc.reason
            relayed.ms = (time.perf_counter() - begun) * 1000
            answer = upstream.failed(exc.kind, exc.reason, relayed.ms)
            self._relay_whole(item, plan, answer, close, started, waited, relayed)
            return
        if isinstance(got, str):  # the consumer left, or the server stops
            relayed.ms = (time.perf_counter() - begun) * 1000
            self._relay_gone(item, got, Outcome(None, started, waited_ms=waited), relayed)
            return
        relayed.status = got.status
        relayed.response_headers = tuple(upstream.relayed_headers(got.headers))
        try:
            if upstream.after is not None:
                await self._commit_then_fail(item, plan, close, started, waited, got, relayed)
            else:
                await self._stream(item, plan, close, started, waited, got, relayed, begun)
        finally:
            got.done()

    async def _exchange(
        self,
        upstream: Upstream,
        head: bytes,
        item: Request,
        relayed: Relayed,
    ) -> UpstreamConnection | str:
        """The upstream connection once its answer's head came (or why the consumer went).

        A kept-alive connection the upstream closed meanwhile (nothing came back on it) is
        replaced by a new one, once: the request is sent again."""
        proxy = upstream.proxy
        timeout = proxy.timeout_ms / 1000
        connections = pool(self._loop)
        for attempt in (0, 1):
            up = connections.idle(proxy) if attempt == 0 else None
            reused = up is not None
            if up is None:
                reason, made = await self._waiting.against(connections.connect(proxy, timeout))
                if made is None:
                    assert reason is not None
                    return reason
                up = made
            up.begin(head, item.body, head_only=item.method == "HEAD")
            relayed.reached = True
            while not up.head_done and up.error is None:
                reason = await self._waiting.ready(up.when_ready, timeout)
                if reason == TIMEOUT:
                    up.close()
                    raise UpstreamError(
                        "timeout", f"{proxy.url} sent no answer within {proxy.timeout_ms} ms"
                    )
                if reason is not None:
                    up.close()
                    return reason
            if up.error is not None:
                up.close()
                if reused and not up.received:
                    continue  # a stale kept-alive connection: once more, on a new one
                raise up.error
            return up
        raise AssertionError("unreachable")  # pragma: no cover

    def _told(self, item: Request, outcome: Outcome) -> None:
        """Report *outcome* (once: a relay's outcome carries what happened upstream)."""
        relayed = outcome.upstream
        if relayed is not None:
            relayed.reported = True
        self._down.report(item, outcome)

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
            reason = await self._waiting.ready(up.when_ready, timeout)
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
        if reason in (LEFT, STOP):
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
            self._down.fault(upstream.after_fault, answer, upstream.fault_seed)
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
        transport = self._down.transport
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
        events = None
        if has_body and not head_only and not complete:  # its events found as they pass
            now = time.perf_counter()
            events = upstream.relayed_stream(up.headers, (now - begun) * 1000, now)
            relayed.stream = events
        if complete:  # whole once buffered to be rewritten: one write
            data = b"".join(pending)
            if chunked:
                data = (_chunk(data) if data else b"") + b"0\r\n\r\n"
            relayed.ms = (time.perf_counter() - begun) * 1000
            self._report_relayed(item, answer, started, headers_at, waited, close, relayed)
            transport.write(head + data)
            self._down.after(plan, close)
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
            if events is not None and data:
                events.feed(data, time.perf_counter())
            if complete:  # journalled before the last byte goes
                relayed.ms = (time.perf_counter() - begun) * 1000
                if events is not None:
                    events.end("complete", time.perf_counter())
                self._report_relayed(item, answer, started, headers_at, waited, close, relayed)
                if chunked:
                    data = (_chunk(data) if data else b"") + b"0\r\n\r\n"
                transport.write(data)
                break
            if data:
                transport.write(_chunk(data) if chunked else data)
                if self._down.write_paused:
                    reason = await self._waiting.drained()
                    if reason is not None:
                        up.close()
                        outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                        self._relay_gone(item, reason, outcome, relayed)
                        return
            chunks, reason = await self._next_chunks(up, timeout, relayed)
            if reason is not None:
                up.close()
                if reason in (LEFT, STOP):
                    outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                    self._relay_gone(item, reason, outcome, relayed)
                    return
                self._relay_broken(item, started, waited, relayed, reason, answer, begun)
                return
            pending, complete = chunks, not chunks
        if close and self._down.transport is not None:
            self._down.after(plan, close)

    def _answer_framing(
        self, item: Request, plan: Plan, close: bool, has_body: bool, length: int | None
    ) -> tuple[bool, str | None, bool]:
        """Whether the connection closes after the answer, its framing line, whether chunked."""
        close = self._down.closes(plan, close)
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
        transport = self._down.transport
        assert transport is not None
        status = relayed.status
        head_only = item.method == "HEAD"
        has_body = status >= 200 and status not in (204, 304) and not head_only
        length = _length(up.headers)
        pending = up.take_chunks()
        data = b"".join(pending) if has_body else b""
        if has_body:
            self._keep(relayed, upstream, [data])
            now = time.perf_counter()
            events = upstream.relayed_stream(up.headers, (now - begun) * 1000, now)
            if events is not None:  # a stream whole with its head: every event at once
                events.feed(data, now)
                events.end("complete", now)
                relayed.stream = events
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
        self._down.after(plan, close)

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
        transport = self._down.transport
        assert transport is not None
        close = self._down.closes(plan, close)
        now = time.time()
        self._report_relayed(item, answer, started, now, waited, close, relayed)
        transport.write(answer.head(close=close) if item.method == "HEAD" else answer.wires[close])
        self._down.after(plan, close)

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
        if relayed.stream is not None:
            relayed.stream.end("upstream_cut", time.perf_counter())
        if begun:
            relayed.ms = (time.perf_counter() - begun) * 1000
        now = time.time()
        outcome = Outcome(answer, started, headers_at=now, waited_ms=waited, closed=True)
        outcome.upstream = relayed
        self._told(item, outcome)
        self._down.abort()

    def _relay_gone(self, item: Request, reason: str, outcome: Outcome, relayed: Relayed) -> None:
        """The consumer left, or the stop cut the exchange: reported with what happened upstream."""
        stopped = reason == STOP
        if relayed.stream is not None:
            relayed.stream.end("stopped" if stopped else "client_left", time.perf_counter())
        outcome.client_left_at = None if stopped else (self._down.left_at or time.time())
        outcome.stopped, outcome.closed, outcome.upstream = stopped, True, relayed
        self._told(item, outcome)
        self._down.abort()


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
