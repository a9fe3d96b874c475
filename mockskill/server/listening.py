"""Where a Server listens: the socket it binds, the descriptor limit, the loopback rule.

Owns :class:`ServerError` too — what a Server (or a ``--workers``
supervisor) that cannot start raises, with the reason and what to do — since
the port and the address are the first things that can refuse it.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket

from ..transport.ports import address_family, sockaddr

BACKLOG = 4096
"""Pending connections the kernel queues (capped by net.core.somaxconn)."""


class ServerError(Exception):
    """The server could not start; the message says why and what to do."""


class PortInUse(ServerError):
    """The port is taken. The message names the setting to change as the face that was
    used spells it: *setting* (``port=`` for a Server; the CLI gives its own, ``--port`` or
    ``MOCKSKILL_PORT``, with :meth:`advised`). *parameter* is Server's: ``port`` or
    ``http_port``."""

    def __init__(
        self, host: str, port: int, reason: str, parameter: str = "port", setting: str = ""
    ) -> None:
        self.host, self.port, self.reason, self.parameter = host, port, reason, parameter
        self.setting = setting or f"{parameter}="
        super().__init__(
            f"cannot listen on {host}:{port}: {reason}; port {port} is in use: stop what"
            f" holds it, or pick another with {self.setting} (0: any)"
        )

    def advised(self, setting: str) -> PortInUse:
        """The same refusal, naming *setting* as the way to pick another port."""
        return PortInUse(self.host, self.port, self.reason, self.parameter, setting)


def listen(
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
    listening: bool = True,
    parameter: str = "port",
) -> socket.socket:
    """A socket bound to *host*:*port* (listening unless not *listening*), or ServerError.

    *reuse_port* sets SO_REUSEPORT, so that several processes each listen on the
    port and the kernel spreads connections among them (``--workers``, Linux).
    *parameter* is the Server argument that gave the port, for :class:`PortInUse`.
    """
    family = address_family(host)
    # The protocol named, not 0: asyncio's loop (no uvloop installed) sets TCP_NODELAY
    # only on accepted sockets that say TCP, and they say what this one says.
    tcp = family in (socket.AF_INET, socket.AF_INET6)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP if tcp else 0)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr(host, port, family))
        if listening:
            sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        hint = ""
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port, exc.strerror or str(exc), parameter) from exc
        if exc.errno == errno.EADDRNOTAVAIL:
            hint = f"; {host} is not an address of this machine"
        raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from exc
    return sock


def raise_fd_limit() -> None:
    """Allow a descriptor per connection for thousands of clients (best effort)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def is_loopback(host: str) -> bool:
    """Whether *host* is only reachable from this machine (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere


def exposed_without_token(host: str) -> str:
    """Why a Server on *host* without an admin token is refused, and the ways out."""
    return (
        f"refusing to serve on {host}, which is not a loopback address, without an admin"
        " token: anyone who can reach it could reset or reconfigure this server. Pass"
        " --admin-token TOKEN (or set MOCKSKILL_ADMIN_TOKEN; Server(admin_token=...)), or"
        " --insecure-admin (Server(insecure_admin=True)) to serve the admin surface to anyone,"
        " or bind 127.0.0.1"
    )
