"""The ports the engine names in its replies, as interfaces: the sockets are the transport's.

Skills marked ``unreachable`` name a port where nothing listens in their
descriptor's ``endpoint.url`` (:class:`HeldPort`); skills with ``tls: FAULT``
name a port of their own whose handshake fails (:class:`TLSPorts`). The
transport binds and serves those (mockskill/transport/ports.py,
mockskill/transport/tls_faults.py) and the server hands them to the engine,
which only asks for their numbers (the shared ones and those a session is
allotted: its handshakes are then its own): the engine touches no socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class HeldPort(Protocol):
    """A port held open while a skill names it (the refused port of ``unreachable``)."""

    port: int | None
    """The held port's number; None while closed. Read on every request."""

    def open(self) -> int:
        """Hold the port (once); its number."""
        ...

    def close(self) -> None:
        """Let go of the port (:meth:`open` holds one again)."""
        ...


class TLSPorts(Protocol):
    """The TLS faults' ports of a server, as the engine and the admin API see them."""

    def hold(self, faults: Mapping[str, str]) -> Mapping[str, int]:
        """Hold a port for each skill of *faults* (skill id -> fault), let go of the others;
        the port of each skill."""
        ...

    def session_ports(self, session: str, allot: bool = True) -> Mapping[str, int]:
        """The port of each held skill for *session*: one of its own (opened on the first
        ask when *allot*, bounded in count), else the shared one."""
        ...

    def release(self) -> None:
        """Let go of every port."""
        ...

    @property
    def ca_pem(self) -> bytes:
        """The certificate (PEM) of the CA that signs the server's certificates."""
        ...

    def client_certificate(self) -> bytes:
        """A client certificate from that CA (PEM: key, then certificate)."""
        ...
