"""Accepting: what the kernel holds is taken soon, even while the loop is busy elsewhere.

The loop's own server (``loop.create_server``) accepts when the loop polls
the listening socket. uvloop 0.23 (its bundled libuv) takes ONE connection
per pass of the loop there, however many the kernel has queued, and a pass
during a burst also runs everything else that is ready — a thousand
arrivals, the waits that end, the closes. So during a burst of 10 000 the
loop took one connection every few milliseconds, the kernel's listen queue
(4096, ``net.core.somaxconn``) filled, the kernel dropped the SYNs beyond
it, and the clients' kernels resent them a second later: a burst took ~3 s
instead of ~2 (``bench/burst_peers.py``: ``TcpExtListenOverflows`` 300 to
9 500 per burst, the queue at 2 000 to 4 097 for seconds of each).

:class:`Listener` is the other way in, on a duplicate of the listening
socket: once connections arrive (:meth:`Listener.arrived`, from each
connection's ``connection_made``) it accepts everything the kernel holds
when that is :data:`ACCEPT_FROM` or more (Linux: ``TCP_INFO``; always elsewhere),
and looks again every :data:`ACCEPT_AGAIN` seconds until
:data:`ACCEPT_WATCH` seconds pass without one, on the shared timers — whose
due callbacks the connections run before each event they handle
(:meth:`.timers.Timers.run_due`). A pass of the loop that plans a thousand
requests thus takes the connections that arrive meanwhile instead of leaving
them to the kernel until it ends. The loop's own server still takes the
connections of a quiet server, on its cheaper path (on uvloop about half
the CPU of ``loop.connect_accepted_socket``, which the Listener uses). The
Listener steps that coroutine itself, with no task: its first step makes the
transport and schedules ``connection_made``, and its last (once the
connection has been made) only returns — a task per connection (made, stepped
twice, its done callback run, freed) cost about as much again as the rest of
the adoption. A stop waits for the coroutines still under way. When the process runs
out of descriptors (or accepting fails otherwise) the Listener pauses for
:data:`ACCEPT_RETRY` seconds; the loop's own server handles that on its side.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import socket
import ssl
import struct
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from .shared import resolve
from .timers import Timers

log = logging.getLogger("mockskill.transport")

ACCEPT_BATCH = 4096
"""Connections accepted at one look at most: as many as the kernel queues (somaxconn)."""

ACCEPT_AGAIN = 0.005
"""Seconds between looks while they find connections: the kernel's queue fills in
~0.2 s at the fastest a client here connects (~20 000 a second)."""

ACCEPT_WATCH = 1.0
"""Seconds after the last connection arrived for which the looks go on: a pass of the
loop that finds nothing new may be followed by one that is busy for long."""

ACCEPT_FROM = 64
"""Connections queued in the kernel from which a look takes them: fewer are left to the
loop's own server, which takes them at half the cost (a steady stream of new connections
keeps a few queued between two passes of the loop)."""

ACCEPT_RETRY = 0.1
"""Seconds the Listener pauses when the process has no descriptor left."""

# The kernel's count of a listening socket's queue: struct tcp_info's tcpi_unacked (eight
# u8 fields, then u32 rto, ato, snd_mss, rcv_mss, unacked), read where TCP_INFO is Linux's.
_TCP_INFO = getattr(socket, "TCP_INFO", 0) if sys.platform.startswith("linux") else 0
_TCP_INFO_SIZE = 104
_UNACKED = struct.Struct("I")
_UNACKED_AT = 8 + 4 * 4

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class _Accepted4(socket.socket):
    """A connection the Listener accepted (IPv4): its family and type plain class attributes.

    A :class:`socket.socket` makes an enum of the number on every read of either (~1 µs
    each), and ``accept()`` and the loops' ``connect_accepted_socket`` read them five
    times per connection between them: the Listener accepts with ``_accept()`` (the
    descriptor and the address) and makes one of these of the descriptor instead.
    """

    __slots__ = ()
    family = socket.AF_INET
    type = socket.SOCK_STREAM


class _Accepted6(socket.socket):
    """The same, IPv6 (see :class:`_Accepted4`)."""

    __slots__ = ()
    family = socket.AF_INET6
    type = socket.SOCK_STREAM


class Listener:
    """Accepts from a duplicate of *sock* (listening) while connections arrive (module doc).

    *factory* makes each connection's protocol, given the client's address as ``accept()``
    returned it (the loop's own server calls it with none); *timers* carry the next look.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        factory: Callable[[Any], asyncio.Protocol],
        timers: Timers,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._loop, self._factory, self._timers = loop, factory, timers
        self._ssl = tls
        self._sock: socket.socket | None = sock.dup()
        self._sock.setblocking(False)
        self._family, self._proto = sock.family, sock.proto
        self._accepted: type[socket.socket] | None = {
            socket.AF_INET: _Accepted4,
            socket.AF_INET6: _Accepted6,
        }.get(sock.family)
        """What an accepted descriptor is made into (None: a family the Listener leaves to
        ``accept()``)."""
        # asyncio sets TCP_NODELAY only on a socket whose proto says TCP, and a socket made
        # with proto 0 accepts ones that say 0; uvloop sets it on every TCP transport (libuv
        # when it opens the socket): a system call per connection spared there.
        uvloop = type(loop).__module__.startswith("uvloop")
        self._nodelay = sock.family in (socket.AF_INET, socket.AF_INET6) and not uvloop
        self._tick: int | None = None
        """The next look's millisecond on the timers, while one is due."""
        self._active_at = float("-inf")
        """When a connection last arrived (either way in)."""
        self._adopting = 0
        """Connections accepted whose connect_accepted_socket has not returned yet."""
        self._adopted_all: asyncio.Future[None] | None = None
        """Set when the last of them returns, once a stop waits for them."""
        self._paused: asyncio.TimerHandle | None = None

    def arrived(self) -> None:
        """A connection arrived: take what else the kernel holds, unless a look is due."""
        self._active_at = self._loop.time()
        if self._tick is None:
            self._look()

    async def close(self) -> None:
        """Stop accepting now; then let the connections accepted meanwhile arrive."""
        if self._tick is not None:
            self._timers.remove(self._look, self._tick)
            self._tick = None
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._adopting:
            # Accepted, on their way to connection_made: let them arrive, so that a stop
            # drains or cuts them like every other connection.
            self._adopted_all = self._loop.create_future()
            await asyncio.wait({self._adopted_all}, timeout=1.0)

    def _look(self) -> None:
        self._tick = None
        if self._sock is None or self._paused is not None:
            return
        now = self._loop.time()
        if self._queued() >= ACCEPT_FROM and self._take():
            self._active_at = now
        if now - self._active_at < ACCEPT_WATCH:
            self._tick = self._timers.add(self._look, ACCEPT_AGAIN)

    def _queued(self) -> int:
        """Connections the kernel holds (Linux: TCP_INFO's unacked); elsewhere ACCEPT_FROM."""
        if not _TCP_INFO:
            return ACCEPT_FROM
        assert self._sock is not None
        try:
            info = self._sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TCP_INFO_SIZE)
        except OSError:
            return ACCEPT_FROM
        return int(_UNACKED.unpack_from(info, _UNACKED_AT)[0])

    def _take(self) -> int:
        """Accept until the kernel's queue is empty (or ACCEPT_BATCH); how many were."""
        assert self._sock is not None
        accepted, family, proto = self._accepted, self._family, self._proto
        raw = self._sock._accept  # type: ignore[attr-defined]  # socket.accept's own
        taken = 0
        while taken < ACCEPT_BATCH:
            try:
                if accepted is None:
                    conn, peer = self._sock.accept()
                else:
                    fd, peer = raw()
                    conn = accepted(family, socket.SOCK_STREAM, proto, fd)
            except (BlockingIOError, InterruptedError):
                break  # the kernel's queue is empty
            except ConnectionAbortedError:
                continue  # reset by the client before it was accepted
            except OSError as exc:
                # Out of descriptors (or anything else): not the arriving connection's
                # problem, whose connection_made this may run in. The loop's own server
                # still accepts meanwhile (or meets the same error and says so).
                if exc.errno in _OUT_OF_RESOURCES:
                    log.warning("cannot accept (%s): retrying in %g s", exc, ACCEPT_RETRY)
                else:
                    log.error("cannot accept (%s): retrying in %g s", exc, ACCEPT_RETRY)
                self._paused = self._loop.call_later(ACCEPT_RETRY, self._resume)
                break
            taken += 1
            self._adopt(conn, peer)
        return taken

    def _resume(self) -> None:
        self._paused = None
        self._look()

    def _adopt(self, conn: socket.socket, peer: Any) -> None:
        if self._nodelay:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Both loops make the socket non-blocking themselves. The protocol is given the
        # address accept() said: the transport need not be asked it again.
        self._adopting += 1
        factory = functools.partial(self._factory, peer)
        self._step(conn, self._loop.connect_accepted_socket(factory, conn, ssl=self._ssl))

    def _step(
        self,
        conn: socket.socket,
        coroutine: Coroutine[Any, Any, object],
        _: object = None,
    ) -> None:
        """Run *coroutine* (connect_accepted_socket) on until it awaits; as a task would."""
        try:
            awaited = coroutine.send(None)
        except StopIteration:  # the connection is made
            self._stepped()
            return
        except (Exception, asyncio.CancelledError) as exc:
            # The socket failed before it had a transport (reset at once): nothing to serve.
            log.debug("an accepted connection could not be set up: %r", exc)
            conn.close()
            self._stepped()
            return
        step = functools.partial(self._step, conn, coroutine)
        if isinstance(awaited, asyncio.Future):  # what both loops' coroutines await
            awaited._asyncio_future_blocking = False
            awaited.add_done_callback(step)
        else:  # a bare yield: go on in the next pass
            self._loop.call_soon(step)

    def _stepped(self) -> None:
        self._adopting -= 1
        if not self._adopting and self._adopted_all is not None:
            resolve(self._adopted_all, None)
