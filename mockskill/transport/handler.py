"""What the transport and whoever decides say to each other.

The transport hands a parsed :class:`Request` to :meth:`Handler.plan` and
plays the :class:`~mockskill.engine.plan.Plan` it gets back; a request it
cannot parse (bad framing, too long, too slow, too big) becomes a
:class:`Refusal`, and :meth:`Handler.refuse` says what to answer to it (so the
error body stays the handler's business; the transport closes the
connection after it). Either way, when the exchange is over the transport
reports what happened on the wire as an :class:`Outcome` to
:meth:`Handler.played` — exactly once per request or refusal, on the loop,
so it must be quick (a journal append); except for a plan the handler marked
:attr:`~mockskill.engine.plan.Plan.journalled` (recorded as it was planned)
and sent whole at once, which is reported not at all.

A handler whose :meth:`~Handler.plan` returns an awaitable is awaited on
the loop: that is how :class:`~mockskill.transport.wsgi.WSGIHandler` runs a
WSGI app in a thread pool without blocking anything else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..engine.plan import Answer, Outcome, Plan

Headers = tuple[tuple[str, str], ...]
"""Header names and values as sent (names keep their case), decoded as Latin-1."""

RawHeaders = tuple[tuple[bytes, bytes], ...]
"""Header names and values as read off the wire."""


FALLBACK = Plan(
    Answer(500, (("Content-Type", "text/plain; charset=utf-8"),), b"the handler failed\n"),
    close=True,
)
"""Answered when the handler itself raises: a bug, logged with its traceback."""


class Request:
    """One parsed request; read-only (its attributes are not to be set).

    A plain slotted class, not a frozen dataclass: one is built per request,
    and a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per
    field) cost more than everything else the transport does for it. The
    headers are kept as the bytes read (:attr:`raw_headers`) and decoded on
    first use of :attr:`headers`; :meth:`header` decodes only the value found.
    """

    __slots__ = (
        "_headers",
        "body",
        "connection",
        "head_bytes",
        "index",
        "local",
        "method",
        "peer",
        "raw_headers",
        "target",
        "time",
        "version",
    )

    method: str
    target: str
    """The request target as sent (path and query, still percent-encoded)."""
    version: str
    """``"1.1"`` or ``"1.0"``."""
    raw_headers: RawHeaders
    """Header names and values as read, undecoded."""
    head_bytes: int
    """At least the bytes of :attr:`raw_headers`' names and values (the bytes the transport
    read up to the head's end): when small, they are too, with no count taken."""
    body: bytes
    peer: tuple[str, int]
    local: tuple[str, int]
    """The address the client connected to."""
    time: float
    """Wall-clock time the request was read whole."""
    connection: int
    """The connection's serial number on this server, from 1."""
    index: int
    """The request's number on its connection, from 1."""

    def __init__(
        self,
        method: str,
        target: str,
        version: str,
        headers: Headers,
        body: bytes,
        peer: tuple[str, int],
        local: tuple[str, int],
        time: float,
        connection: int,
        index: int,
        raw_headers: RawHeaders | None = None,
    ) -> None:
        """*headers* decoded, or (the transport's way) ``()`` and *raw_headers* as read."""
        self.method, self.target, self.version = method, target, version
        if raw_headers is None:
            self.raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)
            self._headers: Headers | None = headers
        else:
            self.raw_headers, self._headers = raw_headers, None
        self.head_bytes = sum(len(k) + len(v) for k, v in self.raw_headers)
        self.body, self.peer, self.local = body, peer, local
        self.time, self.connection, self.index = time, connection, index

    @property
    def headers(self) -> Headers:
        """Header names and values as sent (names keep their case), decoded as Latin-1."""
        headers = self._headers
        if headers is None:
            headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw_headers)
            self._headers = headers
        return headers

    def header(self, name: str) -> str | None:
        """The first value of header *name* (any case), or None."""
        key = name.lower().encode("latin-1")
        for raw, value in self.raw_headers:
            if raw.lower() == key:
                return value.decode("latin-1")
        return None

    def __repr__(self) -> str:
        return (
            f"Request({self.method!r}, {self.target!r}, connection={self.connection},"
            f" index={self.index})"
        )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the transport refused before it was complete.

    *status* is what HTTP prescribes (400 bad framing or a missing or invalid
    ``Host``, 408 head too slow, 413 body too big, 414 request line too long,
    431 headers or trailers too big, 501 a transfer coding before chunked, 505
    an HTTP version other than 1.1 and 1.0); what was parsed before the
    refusal is kept, for the journal.
    """

    status: int
    reason: str
    """What was wrong, in words (``"Duplicate Content-Length"``)."""
    peer: tuple[str, int]
    local: tuple[str, int]
    time: float
    connection: int
    index: int
    method: str | None = None
    target: str | None = None
    headers: Headers = ()


class Handler(Protocol):
    """Decides what to answer; the transport does all the I/O."""

    def plan(self, request: Request) -> Plan | Awaitable[Plan]:
        """The plan for *request*; no I/O, no sleeping (or an awaitable doing it off the loop)."""
        ...

    def refuse(self, refusal: Refusal) -> Plan:
        """The plan for a request the transport refused; the connection closes after it."""
        ...

    def played(self, exchange: Request | Refusal, outcome: Outcome) -> None:
        """The exchange is over: record it. Called once per exchange, on the loop (none
        for a :attr:`~mockskill.engine.plan.Plan.journalled` plan sent whole at once)."""
        ...


class Routes:
    """A handler choosing another by the target's path prefix.

    ``Routes(engine, {"/__admin": admin})`` sends ``/__admin`` and everything
    under it to *admin*, all else (and every refusal) to *default*.
    """

    def __init__(self, default: Handler, prefixes: Mapping[str, Handler]) -> None:
        self.default = default
        # Longest prefix first, so that a nested mount wins over its parent.
        self._prefixes = sorted(prefixes.items(), key=lambda item: -len(item[0]))

    def route(self, target: str) -> Handler:
        for prefix, handler in self._prefixes:
            if target.startswith(prefix) and target[len(prefix) : len(prefix) + 1] in (
                "",
                "/",
                "?",
            ):
                return handler
        return self.default

    def plan(self, request: Request) -> Plan | Awaitable[Plan]:
        return self.route(request.target).plan(request)

    def refuse(self, refusal: Refusal) -> Plan:
        return self.default.refuse(refusal)

    def played(self, exchange: Request | Refusal, outcome: Outcome) -> None:
        if isinstance(exchange, Refusal):
            self.default.played(exchange, outcome)
        else:
            self.route(exchange.target).played(exchange, outcome)
