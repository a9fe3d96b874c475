"""A plan's upstream played: the request forwarded to a real provider, its answer relayed.

:class:`Relaying` is the part of a :class:`~.connection.Connection` that
plays a plan with :attr:`~mockskill.engine.plan.Plan.upstream`. It decides
nothing: the plan's :class:`~mockskill.engine.proxying.Upstream` makes the
request's head and the answer's, rewrites what is to be rewritten, and
renders the error answered when no answer came; this module sends the
request (:mod:`.upstream`'s pooled client) and waits for the answer's head,
and :mod:`.streaming` hands the answer on and reports a
:class:`~mockskill.engine.proxying.Relayed` on the outcome.

It is played by the connection's task, after the plan's waits
(:class:`~.playing.Playing`). The consumer leaving, or the server's stop
cutting the exchange, ends it at once (the upstream connection is dropped).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from ..engine.plan import Outcome, Plan, Relayed, Upstream
from .handler import Refusal, Request
from .shared import resolve
from .streaming import TIMEOUT, Streaming
from .upstream import UpstreamConnection, UpstreamError, pool

log = logging.getLogger("mockskill.transport")

_T = TypeVar("_T")


class Relaying(Streaming):
    """A connection's relays to upstreams (its attributes are the connection's)."""

    __slots__ = ()  # (the connection's attributes; _closed is Streaming's)

    _left_at: float | None

    @abc.abstractmethod
    def _close_gracefully(self) -> None:
        """FIN, then discard what the client still sends (the connection's)."""

    async def _relay(
        self, item: Request | Refusal, plan: Plan, close: bool, started: float, waited: float
    ) -> None:
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
        elif self._transport is not None and not self._closed:
            self._closed = True
            self._transport.abort()

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
                reason, made = await self._against(connections.connect(proxy, timeout))
                if made is None:
                    assert reason is not None
                    return reason
                up = made
            up.begin(head, item.body, head_only=item.method == "HEAD")
            relayed.reached = True
            while not up.head_done and up.error is None:
                reason = await self._upstream(up, timeout)
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

    async def _against(self, work: Awaitable[_T]) -> tuple[str | None, _T | None]:
        """*work*'s result, or (the reason, None) when the consumer leaves or the server stops
        first (the work is then cancelled). Its own exception is raised."""
        if self._interrupted is not None:
            if asyncio.iscoroutine(work):
                work.close()
            return self._interrupted, None
        future = asyncio.ensure_future(work)
        waiter: asyncio.Future[str | None] = self._loop.create_future()
        future.add_done_callback(lambda _: resolve(waiter, None))
        self._waiter, self._waiter_ends_on_eof = waiter, True
        try:
            reason = await waiter
        finally:
            self._waiter = None
        if reason is not None:
            future.cancel()
            return reason, None
        return None, future.result()
