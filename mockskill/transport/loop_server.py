"""Serving: bind, accept on one event loop, stop with a drain.

- :class:`LoopServer` is the loop-side object: ``await start()``, ``await stop(grace)``.
- :class:`ThreadedServer` runs one in a background thread with its own loop —
  the embedded server of a test suite: ``start()`` returns once the port is
  bound, ``stop()`` once everything is closed, each in a few milliseconds.
- :func:`run` runs one in the calling (main) thread until SIGTERM or SIGINT
  (Ctrl-C): the first signal stops accepting at once and drains, a second
  stops at once.

Stopping (both ways) closes the listening socket at once, closes idle
connections, lets the exchanges in flight finish for up to *grace* seconds
(their answers say ``Connection: close``), then cuts what is left — reported
to the handler as ``stopped``.

The loop is uvloop's when it is installed (``pip install 'mockskill[fast]'``),
asyncio's otherwise; ``loop="asyncio"`` forces the latter.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from .connection import Connection
from .handler import Handler
from .reading import Limits
from .shared import Shared, Watches, local_of
from .upstream import close_pool

LoopKind = Literal["auto", "asyncio", "uvloop"]

BACKLOG = 4096
"""Pending connections the kernel queues (capped by net.core.somaxconn)."""

DEFAULT_GRACE = 5.0
"""Seconds requests in flight get to finish on stop: below ``docker stop``'s 10 s,
so that the drain ends before Docker's SIGKILL."""


class Companion(Protocol):
    """What starts and stops with a :class:`LoopServer`, on its loop (a second listener)."""

    async def start(self) -> None: ...

    def stop(self, grace: float = DEFAULT_GRACE) -> Awaitable[bool]: ...

    def hurry(self) -> None: ...


def new_loop(kind: LoopKind = "auto") -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's if installed (or asked for), asyncio's otherwise."""
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to *host* (an address, or a name of one) and *port* (0: any)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on what a socket that says TCP accepts.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


class LoopServer:
    """An HTTP/1.1 server on the running event loop, answering through *handler*."""

    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: Limits | None = None,
        backlog: int = BACKLOG,
        sock: socket.socket | None = None,
        before_trim: Callable[[], bool] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.handler = handler
        self.tls = tls
        """The TLS context of an HTTPS server (None: plain HTTP)."""
        self.companions: list[Companion] = []
        """Started after this server, on its loop, and stopped before it (``--http-port``
        beside ``--tls``, the TLS faults' listeners)."""
        self.watches: Watches | None = None
        """Follows the watched tasks its connections stream (the server's, set before
        :meth:`start`)."""
        self.before_trim = before_trim
        """Called before the heap is trimmed after a flood, until it returns True
        (:class:`.shared.Shared`)."""
        self.host, self.port = host, port
        self.limits = limits or Limits()
        self.backlog = backlog
        self._sock = sock
        self._server: asyncio.AbstractServer | None = None
        self._shared: Shared | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop_request: Callable[[], None] | None = None

    async def start(self) -> None:
        """Bind and start accepting; :attr:`port` is the bound port after this."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        shared = Shared(self.handler, self.limits, loop, self.before_trim)
        shared.watches = self.watches
        self._shared = shared
        sock = self._sock if self._sock is not None else _bind(self.host, self.port)
        timers = shared.timers

        def connection() -> Connection:
            # Made in a pass of the loop that sets up thousands of them in a burst: the
            # waits that are over run between them, not after them all.
            timers.run_due()
            return Connection(shared)

        shared.local = local_of(sock)
        server = await loop.create_server(connection, sock=sock, backlog=self.backlog, ssl=self.tls)
        self._server = server
        self.port = int(sock.getsockname()[1])
        for companion in self.companions:
            await companion.start()

    @property
    def accepted(self) -> int:
        """Connections accepted so far."""
        return self._shared.accepted if self._shared is not None else 0

    @property
    def heap_trims(self) -> int:
        """Times the memory freed by a flood of connections was handed back (Linux/glibc)."""
        return self._shared.trims if self._shared is not None else 0

    @property
    def open_connections(self) -> int:
        return len(self._shared.connections) if self._shared is not None else 0

    def request_stop(self) -> None:
        """Stop a :func:`run` as its first signal would; from any thread, or a signal handler."""
        loop, stop = self._loop, self._on_stop_request
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop)

    def hurry(self) -> None:
        """End the drain of a :meth:`stop` under way now: what is in flight is cut."""
        if self._shared is not None:
            self._shared.hurry()
        for companion in self.companions:
            companion.hurry()

    async def stop(self, grace: float = DEFAULT_GRACE) -> bool:
        """Stop accepting now, drain for up to *grace* s, cut the rest; True if none was cut."""
        if self._server is None or self._shared is None:
            return True
        # The companions' listeners stop and drain alongside this one's.
        others = [asyncio.ensure_future(c.stop(grace)) for c in self.companions]
        # The listening socket (both ways in): no new connection from here on.
        self._server.close()
        for _ in range(3):
            # Connections the loop accepted just before are still being made (a task
            # on asyncio's loop): let them in, so that the drain closes them in order.
            await asyncio.sleep(0)
        drained = await self._shared.drain(grace) if grace > 0 else False
        await self._shared.cut()
        for other in others:
            drained = await other and drained
        close_pool(asyncio.get_running_loop())  # the proxy steps' kept-alive upstreams
        self._server = None
        return drained


class ThreadedServer:
    """A :class:`LoopServer` on its own loop in a background (daemon) thread."""

    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: Limits | None = None,
        loop: LoopKind = "auto",
        sock: socket.socket | None = None,
        server: LoopServer | None = None,
    ) -> None:
        self.server = server or LoopServer(handler, host, port, limits=limits, sock=sock)
        self._loop_kind: LoopKind = loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._stopping = threading.Lock()

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "not started"
        return self._loop

    def start(self) -> ThreadedServer:
        """Bind and serve in the background; returns once the port is bound (or raises)."""
        if self._thread is not None:
            raise RuntimeError("the server is started already")
        loop = new_loop(self._loop_kind)
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as error:  # handed to start()'s caller
                failure.append(error)
                started.set()
                loop.close()
                return
            self._stopped = loop.create_future()
            started.set()
            try:
                loop.run_until_complete(self._stopped)
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="mockskill-transport", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self, grace: float = DEFAULT_GRACE) -> bool:
        """Stop (see :meth:`LoopServer.stop`) and wait for the thread; True if nothing was cut."""
        with self._stopping:  # a second stop() waits for the first, then finds it done
            return self._stop(grace)

    def _stop(self, grace: float) -> bool:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return True
        result: list[bool] = []

        async def stop() -> None:
            try:
                result.append(await self.server.stop(grace))
            finally:
                assert self._stopped is not None
                if not self._stopped.done():
                    self._stopped.set_result(None)

        asyncio.run_coroutine_threadsafe(stop(), loop)
        thread.join()
        self._thread = None
        return bool(result and result[0])

    def call(self, function: Callable[[], object]) -> None:
        """Run *function* on the server's loop (thread-safe)."""
        self.loop.call_soon_threadsafe(function)


def run(
    server: LoopServer,
    *,
    grace: float = DEFAULT_GRACE,
    loop: LoopKind = "auto",
    on_started: Callable[[LoopServer], None] | None = None,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT),
) -> bool:
    """Serve in this (the main) thread until a signal; True if the drain cut nothing.

    The first of *signals* stops accepting and drains for up to *grace*
    seconds; a second one cuts what is left at once. *on_started* is called
    once the server listens.
    """
    event_loop = new_loop(loop)
    asyncio.set_event_loop(event_loop)
    result = False

    async def main() -> bool:
        stopping = asyncio.Event()
        cut_now = asyncio.Event()
        running = asyncio.get_running_loop()

        def on_signal() -> None:
            if stopping.is_set():
                cut_now.set()
            stopping.set()

        # Signals reach the main thread only; elsewhere, request_stop() stops the run.
        main = threading.current_thread() is threading.main_thread()
        signals_: tuple[signal.Signals, ...] = signals if main else ()
        for sig in signals_:
            running.add_signal_handler(sig, on_signal)
        server._on_stop_request = on_signal
        try:
            await server.start()
            if on_started is not None:
                on_started(server)
            await stopping.wait()
            stop = asyncio.ensure_future(server.stop(grace))
            cut = asyncio.ensure_future(cut_now.wait())
            await asyncio.wait({stop, cut}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.done():  # the second signal: no more grace
                server.hurry()
            cut.cancel()
            return await stop
        finally:
            for sig in signals_:
                with contextlib.suppress(Exception):
                    running.remove_signal_handler(sig)

    try:
        result = event_loop.run_until_complete(main())
    finally:
        pending = [t for t in asyncio.all_tasks(event_loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            event_loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        event_loop.close()
        asyncio.set_event_loop(None)
    return result
