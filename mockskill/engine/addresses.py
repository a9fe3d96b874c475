"""Where the client reached this server: the :class:`~.actions.Urls` its replies are filled for.

A reply's placeholders (``{base_url}``, the refused port's, each TLS fault's
``{tls_base_url:ID}``) stand for addresses that depend on the request (its
Host header, the socket it came in on) and on the ports the server holds
while it serves (the port that refuses connections, the TLS faults' ports,
the ports that read TLS). :class:`Addresses` holds those ports and keeps one
Urls per address the clients used, so that the filled replies and kept plans
of the same address are found again. A named session's Urls name the TLS
faults' ports allotted to it (docs/tls.md), made per request: they are its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..protocol.catalog import tls_base_url
from ..scenario.model import Skill
from . import request_facts as facts
from .actions import Urls
from .incoming import Incoming
from .named_ports import HeldPort, TLSPorts
from .state import DEFAULT_SESSION

MAX_HOST = 255 + len(":65535")
"""Longest Host header (a name of at most 255 characters, and a port) the engine answers:
a longer one is refused (400) before it is echoed into the answer's URLs and kept here."""
MAX_CACHED = 256
"""How many base URLs (per Host header) and step plans the engine keeps; beyond, the
cache starts afresh, so that a client varying its Host header cannot grow memory."""
MAX_CACHED_BYTES = 16 * 1024 * 1024
"""Bytes of what is kept per address (the Urls' addresses; the kept plans' filled replies)
beyond which that cache starts afresh too: bounded in bytes, not only in entries."""


class Addresses:
    """The ports a server holds for its replies, and the Urls per address (see the module).

    *refused* is the port that refuses connections, bound by the transport (None:
    none is held, and an unreachable skill's placeholder stays as written); *tls*
    holds the TLS faults' ports (None: this server serves none).
    """

    def __init__(self, refused: HeldPort | None, tls: TLSPorts | None) -> None:
        self.refused = refused
        self.tls = tls
        self.tls_bases: tuple[tuple[str, int], ...] = ()
        """The skills with a TLS fault (their placeholders) and their ports, while open."""
        self.tls_skills: tuple[tuple[str, str], ...] = ()
        """Each skill with a TLS fault and its placeholder, while open."""
        self.secure_ports: set[int] = set()
        """The local ports that read requests over TLS (``--tls``'s; the TLS faults' are
        added when held): their URLs say ``https://``. Read when a Urls is made, never
        per request (the Urls are kept by the local address)."""
        self.by_host: dict[tuple[object, ...], Urls] = {}
        """The Urls made, by address (see :meth:`urls`); cleared, never replaced."""
        self.by_session: dict[tuple[int, str], tuple[Urls, Urls]] = {}
        """A named session's Urls (its TLS fault ports), by its address's Urls' id."""
        self.by_host_bytes = 0
        """What the Urls in :attr:`by_host` and their keys weigh (their texts)."""

    def open(self, skills: Iterable[Skill]) -> None:
        """Hold the refused port while an unreachable skill of *skills* needs it, and the
        TLS faults' ports theirs."""
        skills = tuple(skills)
        if self.refused is not None and any(skill.unreachable for skill in skills):
            self.refused.open()
        faults = {s.id: s.tls for s in skills if s.tls is not None}
        if self.tls is not None and (faults or self.tls_bases):
            ports = self.tls.hold(faults)
            self.secure_ports.difference_update(n for _, n in self.tls_bases)
            self.tls_bases = tuple((tls_base_url(s), ports[s]) for s in sorted(faults))
            self.tls_skills = tuple((s, tls_base_url(s)) for s in sorted(faults))
            self.secure_ports.update(ports.values())
            self._forget_urls()  # they name the ports held before

    def close(self) -> None:
        """Let go of the held ports (:meth:`open` takes them again)."""
        if self.refused is not None:
            self.refused.close()
        if self.tls is not None:
            self.tls.release()
            self.secure_ports.difference_update(n for _, n in self.tls_bases)
            self.tls_bases = self.tls_skills = ()
            self._forget_urls()

    def _forget_urls(self) -> None:
        self.by_host.clear()
        self.by_host_bytes = 0
        self.by_session.clear()

    def urls(self, request: Incoming, session: str = DEFAULT_SESSION, allot: bool = True) -> Urls:
        """What the placeholders stand for, kept per address the client used (Host header
        and the socket's) and refused port: the same Urls, so that its filled replies and
        kept plans are found again (bounded: see :data:`MAX_CACHED`). For a named
        *session* of a server with TLS faults, the ports allotted to it instead (allotted
        now when *allot*: a request whose answer may name them)."""
        urls = self._by_address(request)
        if not urls.tls or session == DEFAULT_SESSION or self.tls is None:
            return urls
        ports = self.tls.session_ports(session, allot)
        host = urls.tls[0][1].rsplit(":", 1)[0]
        tls = tuple((p, f"{host}:{ports[s]}") for s, p in self.tls_skills if s in ports)
        if tls == urls.tls:
            return urls
        # Kept while its ports are the session's, so that kept plans are found again.
        key = (id(urls), session)
        kept = self.by_session.get(key)
        if kept is None or kept[0] is not urls or kept[1].tls != tls:
            if len(self.by_session) >= MAX_CACHED:
                self.by_session.clear()
            kept = self.by_session[key] = (urls, dataclasses.replace(urls, tls=tls))
        return kept[1]

    def _by_address(self, request: Incoming) -> Urls:
        port = None if self.refused is None else self.refused.port
        key = (request.scheme, request.headers.get("host"), request.server, port)
        urls = self.by_host.get(key)
        if urls is None:
            base = facts.base_url(request)
            if request.server[1] in self.secure_ports and base.startswith("http://"):
                base = f"https://{base[7:]}"
            hostname = base.rsplit(":", 1)[0] if base.count(":") > 1 else base
            urls = Urls(base) if port is None else Urls(base, f"{hostname}:{port}")
            if self.tls_bases:
                host = hostname.split("://", 1)[1]
                tls = tuple((p, f"https://{host}:{n}") for p, n in self.tls_bases)
                urls = dataclasses.replace(urls, tls=tls)
            size = len(key[1] or "") + len(urls.base) + len(urls.refused or "")
            size += sum(len(p) + len(b) for p, b in urls.tls)
            if len(self.by_host) >= MAX_CACHED or self.by_host_bytes + size > MAX_CACHED_BYTES:
                self.by_host.clear()  # atomic, unlike evicting one: handle() runs on threads
                self.by_host_bytes = 0
            self.by_host[key] = urls
            self.by_host_bytes += size
        return urls
