"""mockskill's own HTTP/1.1 client to real providers: a keep-alive pool on the serving loop.

The ``proxy`` steps' upstream calls. Small on purpose (no new dependency,
and a relay must stream: an upstream's status and headers are handed on as
they arrive, its body chunk by chunk — a provider's stream of events as its
events come; what is read and not yet relayed pauses the reading at
:data:`HIGH_WATER`, so a slow consumer holds a bounded buffer): one :class:`UpstreamConnection`
(an :class:`asyncio.Protocol`) per connection, its answers parsed by
httptools' ``HttpResponseParser`` (content-length, chunked, or read until
close), kept alive in a :class:`Pool` per loop, by (scheme, host, port,
verify), bounded (:data:`MAX_IDLE` idle per key). TLS is
:func:`ssl.create_default_context`'s: verified by default, against a CA
file, or not at all (``verify: false``).

It decides nothing about what is sent or relayed (the plan's
:class:`~mockskill.engine.proxying.Upstream` does); it only says what
failed, as an :class:`UpstreamError` with a kind and the real reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import weakref
from collections.abc import Callable
from typing import Any

import httptools

from ..scenario.model import Proxy as ProxyTarget

MAX_IDLE = 32
"""Idle connections kept per upstream (scheme, host, port, verify); beyond, closed."""
HIGH_WATER = 256 * 1024
"""Body bytes received but not yet relayed at which the upstream's reading pauses."""


class UpstreamError(Exception):
    """The upstream gave no (whole) answer: *kind* is ``refused`` (nothing to connect to:
    refused, DNS), ``unreachable`` (TLS, a reset, a bad answer) or ``timeout``."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


class UpstreamConnection(asyncio.Protocol):
    """One connection to an upstream; one exchange at a time (see :meth:`begin`)."""

    def __init__(self, pool: Pool, key: tuple[Any, ...]) -> None:
        self._pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._wake: Callable[[], None] | None = None
        self._reset_exchange()

    def _reset_exchange(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self.status: int | None = None
        self.reason = ""
        self.headers: list[tuple[str, str]] = []
        self.head_done = False
        self.complete = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.error: UpstreamError | None = None
        self.received = False
        self._paused = False
        self.head_only = False
        self.keep_alive = False

    # -- asyncio ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # not TCP
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.received = True
        if self.complete:
            return  # bytes after a whole answer: the connection is not reused (see done())
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # pragma: no cover - never asked for
            self._fail("unreachable", "the upstream switched protocols")
        except httptools.HttpParserError as exc:
            if not (self.head_only and self.head_done):
                self._fail("unreachable", f"the upstream's answer is not valid HTTP: {exc}")
        self._notify()

    def eof_received(self) -> bool:
        self._ended("the upstream closed the connection")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._pool.forget(self)
        reason = "the upstream closed the connection"
        if isinstance(exc, ConnectionResetError):
            reason = "the upstream reset the connection"
        elif exc is not None:
            reason = f"the upstream connection failed: {exc}"
        self._ended(reason)

    def _ended(self, reason: str) -> None:
        if self.complete or self.error is not None:
            self._notify()
            return
        if self.head_done and not self._has_length():
            self.complete = True  # an answer read until close, now whole
        else:
            self._fail("unreachable", reason)
        self._notify()

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.lost:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.lost:
            self._paused = False
            self.transport.resume_reading()

    # -- httptools callbacks ------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # an interim answer: the real one follows
            self.headers, self.reason = [], ""
            return
        self.status = status
        self.head_done = True
        if self.head_only or status in (204, 304):
            self.complete = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered >= HIGH_WATER:
            self.pause()

    def on_message_complete(self) -> None:
        if self.head_done:
            self.complete = True
            # Asked now: once the callback returns, the parser is ready for the next
            # message and no longer says.
            self.keep_alive = self._parser.should_keep_alive()

    # -- what the relay reads -----------------------------------------------------

    def _has_length(self) -> bool:
        for name, _ in self.headers:
            if name.lower() in ("content-length", "transfer-encoding"):
                return True
        return False

    def _fail(self, kind: str, reason: str) -> None:
        if self.error is None:
            self.error = UpstreamError(kind, reason)

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake()

    def when_ready(self, wake: Callable[[], None]) -> None:
        """Call *wake* (once) on the next thing that happens (bytes, an end, an error)."""
        self._wake = wake

    def take_chunks(self) -> list[bytes]:
        chunks, self.chunks, self.buffered = self.chunks, [], 0
        self.resume()
        return chunks

    def begin(self, head: bytes, body: bytes, *, head_only: bool) -> None:
        """Send one request; its answer is read into this object's fields."""
        self._reset_exchange()
        self.head_only = head_only
        assert self.transport is not None
        self.transport.write(head + body if len(body) < 64 * 1024 else head)
        if len(body) >= 64 * 1024:
            self.transport.write(body)

    @property
    def reusable(self) -> bool:
        """Whether the answer is whole and the connection may carry another exchange."""
        return (
            self.complete
            and self.error is None
            and not self.lost
            and not self.head_only
            and self.keep_alive
        )

    def done(self) -> None:
        """The exchange is over: back to the pool if it can be reused, else closed."""
        self._wake = None
        if self.reusable and not self.chunks:
            self._pool.release(self)
        else:
            self.close()

    def close(self) -> None:
        self._wake = None
        if self.transport is not None and not self.lost:
            self.transport.abort() if self.error is not None else self.transport.close()
            self.lost = True
        self._pool.forget(self)


class Pool:
    """The keep-alive connections of one loop to its upstreams (see the module's docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._idle: dict[tuple[Any, ...], list[UpstreamConnection]] = {}
        self._contexts: dict[bool | str, ssl.SSLContext] = {}

    def _context(self, verify: bool | str) -> ssl.SSLContext:
        context = self._contexts.get(verify)
        if context is None:
            if verify is False:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif verify is True:
                context = ssl.create_default_context()
            else:
                context = ssl.create_default_context(cafile=verify)
            self._contexts[verify] = context
        return context

    def idle(self, target: ProxyTarget) -> UpstreamConnection | None:
        """A kept-alive connection to *target*, or None."""
        idle = self._idle.get(_key(target))
        while idle:
            connection = idle.pop()
            if not connection.lost:
                return connection
        return None

    async def connect(self, target: ProxyTarget, timeout: float) -> UpstreamConnection:
        """A new connection to *target* (TLS handshake included), within *timeout* seconds."""
        key = _key(target)
        tls = self._context(target.verify) if target.scheme == "https" else None
        try:
            _, protocol = await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: UpstreamConnection(self, key),
                    target.host,
                    target.port,
                    ssl=tls,
                    server_hostname=target.host if tls is not None else None,
                ),
                timeout,
            )
        except TimeoutError:
            raise UpstreamError(
                "timeout", f"connecting to {target.url} took more than {timeout * 1000:g} ms"
            ) from None
        except ssl.SSLError as exc:
            raise UpstreamError("unreachable", f"TLS with {target.url} failed: {exc}") from None
        except socket.gaierror as exc:
            raise UpstreamError(
                "refused", f"the name {target.host!r} could not be resolved: {exc.strerror}"
            ) from None
        except ConnectionRefusedError:
            raise UpstreamError("refused", f"{target.url} refused the connection") from None
        except OSError as exc:
            raise UpstreamError("refused", f"connecting to {target.url} failed: {exc}") from None
        return protocol

    def release(self, connection: UpstreamConnection) -> None:
        idle = self._idle.setdefault(connection.key, [])
        if len(idle) >= MAX_IDLE:
            connection.close()
            return
        idle.append(connection)

    def forget(self, connection: UpstreamConnection) -> None:
        idle = self._idle.get(connection.key)
        if idle and connection in idle:
            idle.remove(connection)

    def close(self) -> None:
        """Close every idle connection (the server stops)."""
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()


def _key(target: ProxyTarget) -> tuple[Any, ...]:
    return (target.scheme, target.host, target.port, target.verify)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool] = weakref.WeakKeyDictionary()


def pool(loop: asyncio.AbstractEventLoop) -> Pool:
    """The pool of *loop* (made on first use)."""
    found = _POOLS.get(loop)
    if found is None:
        found = _POOLS[loop] = Pool(loop)
    return found


def close_pool(loop: asyncio.AbstractEventLoop) -> None:
    """Close *loop*'s idle upstream connections (a server stopping)."""
    found = _POOLS.pop(loop, None)
    if found is not None:
        found.close()
