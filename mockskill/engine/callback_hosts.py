"""Where a task's callbacks may go: the server's allow-list and the check of one URL.

A consumer gives the URL its task's state changes are pushed to (``task: callback:``,
docs/tasks.md), so a mock provider that called any URL it was handed would let anyone
who can invoke it make it send requests into the network it runs in. Callbacks go only
to loopback hosts (``127.0.0.0/8``, ``::1``, ``localhost``) and to the hosts the server
was started with (``--callback-allow HOST``, :class:`CallbackHosts`). The decision is
made on the URL as written: no DNS lookup is made (a name that resolves to an address
now may resolve elsewhere when the delivery is made), so ``127.0.0.1`` is loopback but
a name pointing at it is not, unless allowed.

This module is pure: it parses and compares text. The engine asks it when an invoke
carries a URL (:meth:`CallbackHosts.judge`: a :class:`Receiver` to deliver to, or a
:class:`Refused` saying why not); the transport connects to the receiver it decided.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "LOOPBACK_NAMES",
    "LOOPBACK_ONLY",
    "MAX_URL_BYTES",
    "CallbackHosts",
    "Receiver",
    "Refused",
    "host_problem",
    "is_loopback",
]

MAX_URL_BYTES = 2048
"""The longest callback URL taken (2 KiB): longer is no receiver's address."""
LOOPBACK_NAMES = frozenset({"localhost"})
"""Host names that are loopback as written (addresses are told by their value)."""
_URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
"""RFC 3986's characters: no spaces, controls (a CR/LF would end the request line),
backslashes (read as a slash by some clients, so two readers would see two hosts),
quotes or non-ASCII (write a name in its ``xn--`` form)."""
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
"""A host name: dot-separated labels of letters, digits, hyphens (and underscores, which
container names have)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Receiver:
    """A callback URL the server may call, parsed: what the transport connects to."""

    url: str
    """The URL as the consumer gave it."""
    scheme: str
    """``http`` or ``https``."""
    host: str
    """The host, lower case, an IPv6 address without its brackets."""
    port: int
    """The port (the scheme's default when the URL names none)."""
    target: str
    """The request target: the path (``/`` when empty) and the query."""

    @property
    def address(self) -> str:
        """``host:port`` (``[v6]:port``), as the journal's ``receiver`` names it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class Refused:
    """A callback URL the server does not call, and why (said in the 422's details)."""

    url: str
    reason: str


def host_problem(host: str) -> str | None:
    """What is wrong with *host* as an allow-list entry (None: it is a host name or an
    address, without scheme, port or wildcard)."""
    bare = _bare(host)
    if not bare:
        return "an empty host: name one, as example.test or 10.0.0.7"
    if _address(bare) is not None or _HOST_NAME.fullmatch(bare):
        return None
    return (
        f"{host!r} is not a host name or an address: give the host alone, without"
        " scheme, port, path or wildcard (example.test, 10.0.0.7, ::1)"
    )


@dataclass(frozen=True)
class CallbackHosts:
    """The hosts callbacks may go to besides loopback (``--callback-allow``): immutable,
    built once when the server starts (:meth:`of`) and handed to the engine."""

    allowed: frozenset[str] = frozenset()
    """The allowed hosts, lower case, IPv6 addresses without brackets."""

    @classmethod
    def of(cls, hosts: Iterable[str]) -> CallbackHosts:
        """The allow-list of *hosts* as given; ValueError names the first that is not a
        host (:func:`host_problem`)."""
        allowed = set()
        for host in hosts:
            problem = host_problem(host)
            if problem is not None:
                raise ValueError(problem)
            allowed.add(_bare(host))
        return cls(frozenset(allowed))

    def judge(self, url: object) -> Receiver | Refused:
        """Whether *url* (what the invoke carried) may be called: its :class:`Receiver`,
        or why not."""
        if not isinstance(url, str):
            return Refused(str(url), f"a callback URL is a string, not {type(url).__name__}")
        if len(url.encode("utf-8")) > MAX_URL_BYTES:
            return Refused(url[:64] + "...", f"a URL over {MAX_URL_BYTES} bytes")
        if not url:
            return Refused(url, "an empty URL")
        if not _URL_CHARACTERS.fullmatch(url):
            return Refused(
                url, "characters a URL does not have (spaces, controls, backslashes, non-ASCII)"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            return Refused(url, f"not a URL ({exc})")
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            found = f"not {scheme}:" if scheme else "this one has no scheme"
            return Refused(url, f"callbacks are http or https URLs: {found}")
        host = parts.hostname or ""
        if not host:
            return Refused(url, "a URL without a host")
        if "@" in parts.netloc:
            return Refused(
                url,
                "a URL with credentials (user@host): a delivery is signed, it sends no"
                " password, and the host is what the allow-list judges",
            )
        if port == 0:
            return Refused(url, "port 0, which no receiver listens on")
        if _address(host) is None and not _HOST_NAME.fullmatch(host):
            return Refused(url, f"{host!r} is not a host name or an address")
        if not (is_loopback(host) or host in self.allowed):
            return Refused(
                url,
                f"{host} is neither loopback nor an allowed host (callbacks go to"
                " 127.0.0.0/8, ::1 and localhost, and to the hosts the server was started"
                " with --callback-allow)",
            )
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return Receiver(url, scheme, host, _DEFAULT_PORTS[scheme] if port is None else port, target)


LOOPBACK_ONLY = CallbackHosts()
"""No host allowed but loopback: a server started without ``--callback-allow``."""


def is_loopback(host: str) -> bool:
    """Whether *host* (lower case, no brackets) is loopback as written: ``localhost``, an
    IPv4 address in 127.0.0.0/8, or ``::1`` — told without a DNS lookup."""
    if host in LOOPBACK_NAMES:
        return True
    address = _address(host)
    return address is not None and address.is_loopback


def _bare(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """*host* as an IP address, or None (a name; ``%zone`` scopes are not taken)."""
    if "%" in host:
        return None
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
