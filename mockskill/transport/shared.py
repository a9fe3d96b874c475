"""What the connections of one server share: the handler, the limits, the bookkeeping.

One :class:`Shared` per server counts and holds its connections, runs the
one sweep that expires their deadlines (a head too slow, a connection idle
too long, a linger over: each an assignment, not a timer), and carries out the
two halves of a stop — the drain, then the cut. After a flood of
connections has gone (most of :data:`TRIM_AFTER` or more), it hands the
memory they freed back to the system (:func:`trim_heap`), after the server's
own tidying up (*before_trim*: the journal packs the flood's entries, which
would otherwise keep the memory around them).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import ipaddress
import socket
import sys
from collections.abc import Callable
from typing import Any, Protocol

from .handler import Handler
from .reading import Limits
from .timers import Timers


class Watches(Protocol):
    """What a connection tells of the watched tasks it streams (:mod:`.task_watches`; typed
    loosely here: that module plays with the connection's stream, which imports this one)."""

    def follow(self, streaming: Any, watch: Any) -> None: ...

    def unfollow(self, streaming: Any) -> None: ...


class Tracked(Protocol):
    """What the bookkeeping needs of a connection (:class:`.connection.Connection`)."""

    @property
    def deadline(self) -> float: ...

    @property
    def in_flight(self) -> bool: ...

    def drain(self) -> None: ...

    def cut(self) -> asyncio.Task[None] | None: ...

    def expire(self) -> None: ...


TRIM_AFTER = 1000
"""Connections open at once beyond which their going away is followed by a trim."""
TRIM_DELAY = 0.5
"""Seconds the count of connections must stay still, after a flood has gone, before the trim."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where there is none; looked up on the first trim.

    Not at import: ctypes (with ctypes.util's shutil, tempfile, bz2, lzma) weighs on
    every start, and find_library runs ``ldconfig -p`` in a child process, for a
    function only a flood of connections ever needs.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # late: see above
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    return trim


def trim_heap() -> bool:
    """Give the memory freed by a flood back to the system (glibc); True if it was done.

    What ten thousand connections freed stays in the process otherwise: glibc
    keeps freed chunks for reuse, and RSS stays at the flood's peak. A full
    collection first frees what only the cyclic GC can (the flood's requests'
    cycles), which an idle server would otherwise keep until its next one.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    gc.collect()
    trim(0)
    return True


def local_of(sock: socket.socket) -> tuple[str, int] | None:
    """The local address of every connection *sock* (listening) accepts: its own, when it is
    bound to one address; None for a wildcard (each connection's is the one it reached)."""
    address = sock.getsockname()
    if not isinstance(address, tuple) or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    host = str(address[0])
    try:
        if ipaddress.ip_address(host.split("%", 1)[0]).is_unspecified:
            return None
    except ValueError:
        return None
    return host, int(address[1])


def resolve(future: asyncio.Future[Any], value: Any) -> None:
    """Set *future*'s result unless it is done already."""
    if not future.done():
        future.set_result(value)


class Shared:
    """What the connections of one server share: handler, limits, bookkeeping.

    *before_trim* is called on the loop before each trim after a flood, and
    called again (soon: the loop serves in between) for as long as it returns
    False, so that work to be done first goes in slices of a few milliseconds.
    """

    def __init__(
        self,
        handler: Handler,
        limits: Limits,
        loop: asyncio.AbstractEventLoop,
        before_trim: Callable[[], bool] | None = None,
    ) -> None:
        self.handler, self.limits, self.loop = handler, limits, loop
        self.before_trim = before_trim
        self.watches: Watches | None = None
        """Follows the watched tasks the connections stream (None: a watch plays its first
        events only)."""
        self.timers = Timers(loop)
        """The connections' waits, by the millisecond they end, on one loop timer."""
        self.connections: set[Tracked] = set()
        self.accepted = 0
        """Connections accepted since the start: what keep-alive saves."""
        self.local: tuple[str, int] | None = None
        """The address every connection is reached at, when the listening socket is bound
        to one address (not a wildcard): read once (:func:`local_of`), not per connection."""
        self.draining = False
        self.cutting = False
        """The grace is over: a connection that arrives now is aborted at once."""
        self._quiet: asyncio.Future[None] | None = None
        self._hurry: asyncio.Future[None] | None = None
        self._empty: asyncio.Future[None] | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._peak = 0
        """Most connections open at once since the last trim."""
        self._trimmer: asyncio.TimerHandle | None = None
        self._trim_at = 0
        """Connections open when the trim was last put off."""
        self.trims = 0
        """Trims done after floods (:func:`trim_heap`)."""
        timeouts = (limits.header_timeout, limits.body_timeout, limits.keep_alive, limits.linger)
        self._interval = max(0.005, min(0.25, *(t / 10 for t in timeouts)))

    def register(self, connection: Tracked) -> int:
        self.accepted += 1
        connections = self.connections
        connections.add(connection)
        if len(connections) > self._peak:
            self._peak = len(connections)
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self._interval, self._sweep)
        return self.accepted

    def unregister(self, connection: Tracked) -> None:
        self.connections.discard(connection)
        self.check_quiet()
        if not self.connections and self._empty is not None:
            resolve(self._empty, None)
        if self._peak >= TRIM_AFTER and len(self.connections) * 4 <= self._peak:
            self._peak = len(self.connections)
            if self._trimmer is None:
                self._trim_at = len(self.connections)
                self._trimmer = self.loop.call_later(TRIM_DELAY, self._trim)

    def _trim(self) -> None:
        if len(self.connections) < self._trim_at:  # still going: trim once they have gone
            self._trim_at = len(self.connections)
            self._trimmer = self.loop.call_later(TRIM_DELAY, self._trim)
            return
        self._tidy()

    def _tidy(self) -> None:
        if self.before_trim is not None and not self.before_trim():
            self._trimmer = self.loop.call_later(0, self._tidy)  # the next slice
            return
        self._trimmer = None
        # A set never shrinks: the flood's table (half a megabyte after 10 000) would stay.
        self.connections = set(self.connections)
        if trim_heap():
            self.trims += 1

    def _sweep(self) -> None:
        now = self.loop.time()
        for connection in [c for c in self.connections if 0 < c.deadline <= now]:
            connection.expire()
        self._sweeper = (
            self.loop.call_later(self._interval, self._sweep) if self.connections else None
        )

    def check_quiet(self) -> None:
        """Called when a connection may have finished its last exchange."""
        if self._quiet is not None and not any(c.in_flight for c in self.connections):
            resolve(self._quiet, None)

    async def drain(self, grace: float) -> bool:
        """Let the exchanges in flight finish, up to *grace* seconds; True if all did."""
        self.draining = True
        for connection in list(self.connections):
            connection.drain()
        self._quiet = self.loop.create_future()
        self.check_quiet()
        if self._hurry is None:
            self._hurry = self.loop.create_future()
        await asyncio.wait(
            {self._quiet, self._hurry}, timeout=grace, return_when=asyncio.FIRST_COMPLETED
        )
        return self._quiet.done() and not self._hurry.done()

    def hurry(self) -> None:
        """End a drain under way now."""
        if self._hurry is None:
            self._hurry = self.loop.create_future()
        resolve(self._hurry, None)

    async def cut(self) -> None:
        """End every connection now; exchanges still in flight are reported as stopped."""
        self.cutting = True
        tasks = [t for c in list(self.connections) if (t := c.cut()) is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        for _ in range(5):
            # A connection accepted just before the listening socket closed may still
            # be on its way to connection_made (a task, on asyncio's loop): let it
            # arrive — it is aborted there, now that cutting is set.
            await asyncio.sleep(0)
        if self.connections:
            # A transport closes its socket in a callback of its own: run the loop
            # until every one has, so that none is left open when the loop ends.
            self._empty = self.loop.create_future()
            await asyncio.wait({self._empty}, timeout=1.0)
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._trimmer is not None:
            self._trimmer.cancel()
            self._trimmer = None
