"""Port binding: the address family and socket address of a host, and the refused port.

Skills marked ``unreachable`` name :class:`RefusedPort` in their descriptor's
``endpoint.url`` (the engine sees it as a :class:`~mockskill.engine.named_ports.HeldPort`):
a consumer that follows the descriptor meets a real connection refusal, not a
scripted one. The port is bound (so no other program gets it while mockskill
runs) but never listened on, so the kernel refuses every connection to it.
:func:`address_family` and :func:`sockaddr` are how the listening sockets are bound too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from typing import Any


def address_family(host: str) -> socket.AddressFamily:
    """The family of a socket on *host*: ``unix://PATH``, an IPv6 address, else IPv4 (as
    Werkzeug's ``select_address_family`` said: its server bound mockskill's first sockets)."""
    if host.startswith("unix://"):
        return socket.AF_UNIX
    if ":" in host and hasattr(socket, "AF_INET6"):
        return socket.AF_INET6
    return socket.AF_INET


def sockaddr(host: str, port: int, family: socket.AddressFamily) -> tuple[Any, ...] | str:
    """What :meth:`socket.socket.bind` takes for *host*:*port* (Werkzeug's ``get_sockaddr``):
    the first address *host* resolves to, or *host* as it is when it resolves to none."""
    if family == getattr(socket, "AF_UNIX", None):
        return os.path.abspath(host.partition("://")[2])
    # An ASCII name as bytes: given a str, getaddrinfo encodes it with the "idna" codec,
    # whose import (stringprep, unicodedata) is a few ms of start-up; the same lookup.
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    try:
        found = socket.getaddrinfo(name, port, family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except socket.gaierror:
        return host, port
    return found[0][4]


class RefusedPort:
    """Holds one bound, never-listening port while open."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._sock: socket.socket | None = None
        self.port: int | None = None
        """The bound port (None while closed), kept: read on every request, a system call
        each time otherwise. A plain attribute, not a property: a call per request less.
        Set only here, under the lock."""
        self._lock = threading.Lock()

    def open(self) -> int:
        """Bind a free port (once); its number."""
        with self._lock:
            if self._sock is None:
                family = address_family(self.host)
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.bind(sockaddr(self.host, 0, family))
                self._sock, self.port = sock, int(sock.getsockname()[1])
            assert self.port is not None
            return self.port

    def close(self) -> None:
        with self._lock:
            sock, self._sock, self.port = self._sock, None, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
