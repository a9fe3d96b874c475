"""RFC 9112's rules on a request that are not limits, each broken one a refusal.

What :mod:`.reading` checks once a request's head is read: the fields its
framing depends on (their names' kinds), the transfer codings, the ``Host``
(there, and valid), the version (HTTP/1.1 and 1.0 are spoken); and the
body of a request asking for an upgrade, which mockskill reads as that
request's (RFC 9110 7.8: it upgrades to nothing).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Protocol

import httptools


class Refused(Exception):
    """Raised inside a parser callback: the request is refused with *status*."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


CONTENT_LENGTH, HOST, CONNECTION, TRANSFER_ENCODING, EXPECT = range(5)
_FRAMING = {
    b"content-length": CONTENT_LENGTH,
    b"host": HOST,
    b"connection": CONNECTION,
    b"transfer-encoding": TRANSFER_ENCODING,
    b"expect": EXPECT,
}
"""The (lowercased) header names the reader looks at; all others are only kept."""

KINDS: dict[bytes, int] = {}
"""Header names as read -> their :data:`_FRAMING` kind, -1 for the others: a client sends
the same few names on every request, lowered and looked up once each."""
MAX_KINDS = 256
"""Names :data:`KINDS` keeps; beyond, it starts afresh (a client inventing names cannot
grow memory)."""


def kind_of(name: bytes) -> int:
    if len(KINDS) >= MAX_KINDS:
        KINDS.clear()
    kind = KINDS[name] = _FRAMING.get(name.lower(), -1)
    return kind


OWS = b" \t"
"""RFC 9110 5.5: whitespace around a field value is not part of it (llhttp drops the
leading whitespace only)."""


def refuse_other_codings(codings: bytes) -> None:
    """Refuse a request's ``Transfer-Encoding`` (all its lines, joined) but chunked alone.

    RFC 9112 6.3: a request whose last coding is not chunked has no length that
    can be known (400, as llhttp would say a moment later). 6.1: a coding before
    chunked (``gzip, chunked``) is one this server does not undo, and the body
    would reach the scenario still coded: 501.
    """
    *before, last = codings.lower().split(b",")
    if last.strip() == b"chunked" and not before:
        return
    text = codings.decode("latin-1")
    if before and last.strip() == b"chunked":
        raise Refused(501, f"Transfer-Encoding {text!r} is not supported (chunked is)")
    raise Refused(400, f"Transfer-Encoding {text!r} does not end in chunked")


# -- Host (RFC 9112 3.2) ------------------------------------------------------------

_HOST_VALUE = re.compile(
    rb"(?:\[(?P<literal>[0-9A-Za-z:.+\-_~!$&'()*,;=]+)\]"  # IP-literal
    rb"|(?:[0-9A-Za-z\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)"  # IPv4address / reg-name
    rb"(?::[0-9]*)?"  # port
)
"""``Host = uri-host [ ":" port ]``, RFC 3986's authority without its userinfo: no
whitespace, ``@``, ``/``, ``?``, ``#`` or bytes outside ASCII."""
_IPVFUTURE = re.compile(rb"v[0-9A-Fa-f]+\.[0-9A-Za-z\-._~!$&'()*+,;=:]+")

_HOSTS: set[bytes] = set()
"""Host values found valid: a client sends the same one on every request, checked once
(bounded like :data:`KINDS`)."""


def _valid_host(value: bytes) -> bool:
    if value in _HOSTS:
        return True
    match = _HOST_VALUE.fullmatch(value)
    if match is None:
        return False
    literal = match["literal"]
    if literal is not None and not _IPVFUTURE.fullmatch(literal):
        try:
            ipaddress.IPv6Address(literal.decode("ascii"))
        except ValueError:
            return False
    if len(_HOSTS) >= MAX_KINDS:
        _HOSTS.clear()
    _HOSTS.add(value)
    return True


def refuse_host(host: bytes | None, version: str) -> None:
    """Refuse a request's *host* (the value of its one ``Host``, None without one).

    Every HTTP/1.1 request has one (HTTP/1.0 may leave it out), and it is valid;
    an empty one is (a target without an authority).
    """
    if host is None:
        if version == "1.1":
            raise Refused(400, "an HTTP/1.1 request must have a Host header")
    elif not _valid_host(host.rstrip(OWS)):
        text = host.decode("latin-1")
        raise Refused(400, f"Host {text!r} is not a host, or a host and a port")


# -- versions ------------------------------------------------------------------------

SPOKEN = ("1.1", "1.0")
_PARSED = (b"0.9", b"1.0", b"1.1", b"2.0")
"""The versions llhttp reads; it refuses the others as it reads the request line."""
_VERSION = re.compile(rb"([0-9]\.[0-9])\r?\n")


def unspoken(version: str) -> str:
    """Why a request naming HTTP/*version* is refused with 505 (RFC 9110 15.6.6)."""
    return f"mockskill speaks HTTP/1.1 and HTTP/1.0, not HTTP/{version}"


def version_refused(data: bytes, target: bytes) -> str | None:
    """The version llhttp refused in the request line for *target* in *data*, if it is one
    of another major than 1 (``3.0``): a version not spoken, not a malformed request.

    httptools does not say where, or why, llhttp stopped: the request line is
    found by its target (those before it with the same target had a version
    llhttp reads). None when it is not in *data* (it came in several packets).
    """
    mark = b" " + target + b" HTTP/"
    at = data.find(mark)
    while at >= 0:
        version = _VERSION.match(data, at + len(mark))
        if version is not None and version[1] not in _PARSED:
            return None if version[1].startswith(b"1.") else version[1].decode()
        at = data.find(mark, at + 1)
    return None


# -- an upgrade's body (RFC 9110 7.8) ------------------------------------------------


class Callbacks(Protocol):
    """A request parser's callbacks (the reader's)."""

    def on_message_begin(self) -> None: ...
    def on_url(self, url: bytes) -> None: ...
    def on_header(self, name: bytes, value: bytes) -> None: ...
    def on_headers_complete(self) -> None: ...
    def on_body(self, body: bytes) -> None: ...
    def on_chunk_header(self) -> None: ...
    def on_message_complete(self) -> None: ...


class _AfterUpgrade:
    """The callbacks of the parser that reads an upgrade request's body, then what follows.

    httptools tells llhttp to skip the body of a request asking for an upgrade,
    and stops after its head; this parser is fed first a head saying only the
    body's framing, whose callbacks end here. The body, its trailer fields and
    every request after it go to the reader, as its own parser's would.
    """

    __slots__ = ("_in_head", "_reader", "on_body", "on_chunk_header", "on_message_complete")

    on_chunk_complete = None

    def __init__(self, reader: Callbacks) -> None:
        self._reader, self._in_head = reader, True
        self.on_body, self.on_chunk_header = reader.on_body, reader.on_chunk_header
        self.on_message_complete = reader.on_message_complete

    def on_message_begin(self) -> None:
        if not self._in_head:
            self._reader.on_message_begin()

    def on_url(self, url: bytes) -> None:
        if not self._in_head:
            self._reader.on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            self._reader.on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._in_head:
            self._in_head = False
        else:
            self._reader.on_headers_complete()


def upgrade_framing(length: int | None) -> bytes:
    """The framing header of an upgrade request's body: its length, or chunked (None)."""
    return b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length


def body_parser(reader: Callbacks, framing: bytes) -> httptools.HttpRequestParser:
    """A parser for the body of *reader*'s upgrade request, framed by the header *framing*."""
    parser = httptools.HttpRequestParser(_AfterUpgrade(reader))
    parser.feed_data(b"POST / HTTP/1.1\r\n" + framing + b"\r\n\r\n")
    return parser
