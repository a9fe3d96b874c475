"""A plan's upstream played: the request forwarded to a real provider, its answer relayed.

:class:`Relaying` is the part of a :class:`~.connection.Connection` that
plays a plan with :attr:`~mockskill.engine.plan.Plan.upstream`. It decides
nothing: the plan's :class:`~mockskill.engine.proxying.Upstream` makes the
request's head and the answer's, rewrites what is to be rewritten, and
renders the error answered when no answer came; this module sends the
request (:mod:`.upstream`'s pooled client) and waits for the answer's head,
and :mod:`.streaming` hands the answer on and reports a
:class:`~mockskill.engine.proxying.Relayed` on the outcome.

Most relays are played from loop callbacks, with no task
(:meth:`Relaying._relay_at_once`: no waits, no ``after:``, an idle pooled
connection): the request is written on the connection, the upstream
protocol's callback wakes the relay when the head came, and an answer whole
by then is written in one go; the rest (a body still coming, an error, a
stale connection to replace) is handed to a task, as is every other relay
(after the plan's waits, in the connection's task: :class:`~.playing.Playing`).
The consumer leaving, or the server's stop cutting the exchange, ends it at
once (the upstream connection is dropped).
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
from .waiting import Waits

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
        await self._relay_guarded(item, plan, close, started, waited, Relayed(item.target, ()))

    async def _relay_guarded(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        relayed: Relayed,
        sent_on: UpstreamConnection | None = None,
        begun: float = 0.0,
    ) -> None:
        try:
            await self._relaying(item, plan, close, started, waited, relayed, sent_on, begun)
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

    def _relay_at_once(
        self, item: Request | Refusal, planned: Plan | Awaitable[Plan], close: bool, now: float
    ) -> bool:
        """Relay *plan* from loop callbacks, with no task, when it can be (the common case: no
        waits, no ``after:``, a pooled connection idle): True if begun so (the connection's
        :meth:`_start` asks first; False: a task plays it, :meth:`_relay`)."""
        if not isinstance(planned, Plan) or planned.upstream is None:
            return False
        plan, upstream = planned, planned.upstream
        if (
            plan.waits
            or upstream.after is not None
            or not isinstance(item, Request)
            or self._interrupted is not None
            or self._eof
        ):
            return False
        up = pool(self._loop).idle(upstream.proxy)
        if up is None:
            return False
        relayed = Relayed(item.target, ())
        if upstream.keep:  # the consumer's headers decoded only for a recording (the Exchange)
            relayed.headers = item.headers
        head = upstream.request_head(
            item.method, item.target, item.raw_headers, item.peer[0], len(item.body)
        )
        quick = _Quick(self, item, plan, close, now, up, relayed)
        self._timed = quick
        quick.begun = time.perf_counter()
        up.begin(head, item.body, head_only=item.method == "HEAD")
        relayed.reached = True
        up.when_ready(quick.ready)
        quick.arm(upstream.proxy.timeout_ms / 1000)
        return True

    def _quick_over(self, quick: _Quick, why: str | None) -> None:
        """The quick relay's upstream answered (*why* None), timed out, or the consumer left
        or the server stops (*why*): answer, or hand over to a task for what is not whole."""
        self._timed = None
        item, plan, up, relayed = quick.item, quick.plan, quick.up, quick.relayed
        assert isinstance(item, Request)
        upstream = plan.upstream
        assert upstream is not None
        started, close = quick.started, quick.close
        try:
            if why is None and up.error is None and up.complete:
                relayed.status = up.status
                relayed.response_headers = tuple(upstream.relayed_headers(up.headers))
                try:
                    self._whole(item, plan, close, started, 0.0, up, relayed, quick.begun)
                finally:
                    up.done()
            elif why is None:  # an error (perhaps a stale connection), or a body still coming
                work = self._relay_guarded(
                    item, plan, close, started, 0.0, relayed, up, quick.begun
                )
                self._task = self._loop.create_task(self._then_next(work))
                return
            else:
                up.close()
                relayed.ms = (time.perf_counter() - quick.begun) * 1000
                if why == TIMEOUT:
                    proxy = upstream.proxy
                    relayed.error = f"{proxy.url} sent no answer within {proxy.timeout_ms} ms"
                    answer = upstream.failed("timeout", relayed.error, relayed.ms)
                    self._relay_whole(item, plan, answer, close, started, 0.0, relayed)
                else:
                    self._relay_gone(item, why, Outcome(None, started), relayed)
        except Exception as exc:  # a bug: the consumer must not wait for an answer forever
            self._relay_failed(item, started, 0.0, relayed, exc)
        self._next()

    async def _then_next(self, work: Awaitable[None]) -> None:
        try:
            await work
        finally:
            self._task = None
            self._next()

    def _next(self) -> None:
        """The exchange is over: the next one (as :meth:`Playing._play` ends)."""
        self._busy = False
        if not self._closed:
            self._advance()
        else:
            self._shared.check_quiet()

    async def _relaying(
        self,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        waited: float,
        relayed: Relayed,
        sent_on: UpstreamConnection | None = None,
        begun: float = 0.0,
    ) -> None:
        """The relay from the start, or (*sent_on*) from the request sent on that pooled
        connection at *begun* (:meth:`_relay_at_once` handing over)."""
        upstream = plan.upstream
        assert upstream is not None
        if upstream.keep:  # the consumer's headers decoded only for a recording (the Exchange)
            relayed.headers = item.headers
        head = upstream.request_head(
            item.method, item.target, item.raw_headers, item.peer[0], len(item.body)
        )
        if sent_on is None:
            begun = time.perf_counter()
        try:
            got = await self._exchange(upstream, head, item, relayed, sent_on)
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
        sent_on: UpstreamConnection | None = None,
    ) -> UpstreamConnection | str:
        """The upstream connection once its answer's head came (or why the consumer went).

        A kept-alive connection the upstream closed meanwhile (nothing came back on it) is
        replaced by a new one, once: the request is sent again. *sent_on*: the pooled
        connection the request was sent on already."""
        proxy = upstream.proxy
        timeout = proxy.timeout_ms / 1000
        connections = pool(self._loop)
        for attempt in (0, 1):
            up: UpstreamConnection | None = sent_on if attempt == 0 else None
            reused = up is not None
            if up is None:
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


class _Quick(Waits):
    """A relay played in loop callbacks (:meth:`Relaying._relay_at_once`): the request sent on
    a pooled connection, waiting for its answer's head. It is the connection's ``_timed``,
    so that the consumer leaving or the server stopping ends it (:meth:`interrupt`) as it
    ends a plan's waits; the upstream's timeout is a tick on the shared timers. Loop-only."""

    __slots__ = ("_owner", "begun", "relayed", "up")

    def __init__(
        self,
        owner: Relaying,
        item: Request,
        plan: Plan,
        close: bool,
        started: float,
        up: UpstreamConnection,
        relayed: Relayed,
    ) -> None:
        super().__init__(owner._shared.timers, owner._loop, item, plan, close, started, _never)
        self._owner, self.up, self.relayed = owner, up, relayed
        self.begun = 0.0

    def arm(self, timeout: float) -> None:
        self._tick = self._timers.add(self._timed_out, timeout)

    def _disarm(self) -> bool:
        """Whether this relay was still waiting (then no longer)."""
        tick = self._tick
        if tick is None:
            return False
        self._timers.remove(self._timed_out, tick)
        self._tick = None
        return True

    def ready(self) -> None:
        """The upstream said something (bytes, an end, an error)."""
        up = self.up
        if up.error is None and not up.head_done:
            up.when_ready(self.ready)  # not the whole head yet
            return
        if self._disarm():
            self._owner._quick_over(self, None)

    def _timed_out(self) -> None:
        if self._tick is None:  # ended in the same millisecond, before its turn
            return
        self._tick = None
        self._owner._quick_over(self, TIMEOUT)

    def interrupt(self, reason: str) -> None:
        if self._disarm():
            self._owner._quick_over(self, reason)


def _never(waits: Waits, reason: str | None) -> None:  # pragma: no cover - start() is not called
    raise AssertionError("a quick relay has no waits")
