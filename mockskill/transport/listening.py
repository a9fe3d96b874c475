"""The listening socket: what the kernel holds is taken at once, even while the loop is busy.

Not the loop's own server (``loop.create_server``): uvloop 0.23 (its bundled
libuv) accepts ONE connection per pass of the loop, however many the kernel
has queued, and a pass during a burst also runs everything else that is
ready — a thousand arrivals, the waits that end, the closes — so the loop
took one connection every few milliseconds. 10 000 clients connecting at
once filled the kernel's listen queue (4096, ``net.core.somaxconn``); the
kernel dropped the SYNs beyond it, and the clients' kernels resent them a
second later: a burst took ~3 s instead of ~2 (``bench/burst_peers.py``,
``TcpExtListenOverflows`` 300 to 7 000 per burst).

:class:`Listener` watches the socket itself (``add_reader``) and, at each
readiness, accepts until the kernel's queue is empty (at most
:data:`ACCEPT_BATCH`), on either loop. And while connections keep coming
it looks again every :data:`ACCEPT_AGAIN` seconds on the shared timers,
whose due callbacks the connections run before each event they handle
(:meth:`.timers.Timers.run_due`): a pass of the loop that plans a thousand
requests takes the connections that arrive meanwhile, instead of leaving
them to the kernel until the pass ends.

Each accepted socket becomes a transport and a protocol through
``loop.connect_accepted_socket`` (a task, which a stop waits for). When the
process runs out of descriptors, accepting pauses for :data:`ACCEPT_RETRY`
seconds, as asyncio's own server does: the kernel's queue holds the rest.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import socket
from collections.abc import Callable

from .timers import Timers

log = logging.getLogger("mockskill.transport")

ACCEPT_BATCH = 4096
"""Connections accepted per readiness at most: as many as the kernel queues (somaxconn)."""

ACCEPT_AGAIN = 0.005
"""Seconds after an accept that found connections before the next look, from any callback."""

ACCEPT_WATCH = 1.0
"""Seconds after the last connection accepted for which the socket is looked at so often."""

ACCEPT_RETRY = 0.1
"""Seconds accepting pauses when the process has no descriptor left."""

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Listener:
    """Accepts on *sock* (bound; listened to here) for *loop*: *factory* makes each protocol."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        backlog: int,
        timers: Timers,
    ) -> None:
        self._loop, self._sock, self._factory = loop, sock, factory
        self._backlog = backlog
        self._timers = timers
        self._again_tick: int | None = None
        self._took_at = float("-inf")
        self._fd = -1
        self._tcp = sock.family in (socket.AF_INET, socket.AF_INET6)
        self._adopting: set[asyncio.Task[object]] = set()
        self._retry: asyncio.TimerHandle | None = None

    @property
    def sockname(self) -> tuple[str, int]:
        name = self._sock.getsockname()
        return str(name[0]), int(name[1])

    def start(self) -> None:
        self._sock.setblocking(False)
        self._sock.listen(self._backlog)
        self._fd = self._sock.fileno()
        self._loop.add_reader(self._fd, self._accept)

    async def close(self) -> None:
        """Stop accepting now (the socket is closed); then let what was accepted arrive."""
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            self._fd = -1
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._again_tick is not None:
            self._timers.remove(self._again, self._again_tick)
            self._again_tick = None
        self._sock.close()
        if self._adopting:
            # Accepted, on their way to connection_made: let them arrive, so that a stop
            # drains or cuts them like every other connection.
            await asyncio.wait(set(self._adopting), timeout=1.0)

    def _accept(self) -> None:
        """Take what the kernel holds; while connections keep coming, look again soon."""
        now = self._loop.time()
        if self._take():
            self._took_at = now
        if self._again_tick is None and self._fd >= 0 and now - self._took_at < ACCEPT_WATCH:
            # Run by whichever connection's callback comes first after the time
            # (Timers.run_due), not only when the loop polls the socket again.
            self._again_tick = self._timers.add(self._again, ACCEPT_AGAIN)

    def _again(self) -> None:
        self._again_tick = None
        if self._fd >= 0:
            self._accept()

    def _take(self) -> int:
        """Accept until the kernel's queue is empty (or ACCEPT_BATCH); how many were."""
        accept = self._sock.accept
        taken = 0
        while taken < ACCEPT_BATCH:
            try:
                conn, _ = accept()
            except (BlockingIOError, InterruptedError):
                break  # the kernel's queue is empty
            except ConnectionAbortedError:
                continue  # reset by the client before it was accepted
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                log.warning("cannot accept connections (%s): retrying in %g s", exc, ACCEPT_RETRY)
                self._pause()
                break
            taken += 1
            self._adopt(conn)
        return taken

    def _adopt(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        if self._tcp:
            # Answers are written whole: Nagle must not hold back their last segment.
            # Set here, not left to the loop: asyncio sets it only on a socket whose
            # proto says TCP, and a socket made with proto 0 accepts ones that say 0.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = self._loop.create_task(self._loop.connect_accepted_socket(self._factory, conn))
        self._adopting.add(task)
        task.add_done_callback(functools.partial(self._adopted, conn))

    def _adopted(self, conn: socket.socket, task: asyncio.Task[object]) -> None:
        self._adopting.discard(task)
        if task.cancelled() or task.exception() is not None:
            # The socket failed before it had a transport (reset at once): nothing to serve.
            log.debug("an accepted connection could not be set up: %r", task)
            conn.close()

    def _pause(self) -> None:
        if self._fd < 0:
            return
        self._loop.remove_reader(self._fd)

        def resume() -> None:
            self._retry = None
            if self._fd >= 0:
                self._loop.add_reader(self._fd, self._accept)

        self._retry = self._loop.call_later(ACCEPT_RETRY, resume)
