"""Reading requests: httptools callbacks, the framing rules and the limits.

:class:`RequestReader` turns a connection's bytes into events, as h11 does:
each request read becomes a :class:`~.handler.Request`, and one that cannot
be read a :class:`~.handler.Refusal`, handed to the :class:`Consumer` it was
made with (the connection). It knows nothing of answering. llhttp (under
httptools) refuses negative, non-decimal and duplicate ``Content-Length``,
``Content-Length`` with ``Transfer-Encoding`` and bad chunk sizes; this
module adds the limits of :class:`Limits` (target, headers, body counted as
it is read whatever its framing, trailer fields counted with the head's and
dropped), a second, explicit check of the ``Content-Length`` rules, so that
they do not hang on a parser's leniency, and RFC 9112's others (:mod:`.rules`).
What to do with a request read, or refused, is the consumer's
(:mod:`.connection`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

import httptools

from .handler import Refusal, Request
from .rules import (
    CONNECTION,
    CONTENT_LENGTH,
    HOST,
    KINDS,
    OWS,
    SPOKEN,
    TRANSFER_ENCODING,
    Refused,
    body_parser,
    kind_of,
    refuse_host,
    refuse_other_codings,
    unspoken,
    upgrade_framing,
    version_refused,
)

log = logging.getLogger("mockskill.transport")

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_new = object.__new__


@dataclass(frozen=True)
class Limits:
    """What a connection accepts, and for how long it waits."""

    max_target: int = 64 * 1024
    """Longest request target, in bytes (→ 414); http.server's line limit."""
    max_head: int = 256 * 1024
    """Most bytes of request headers, and of trailer fields with them (→ 431): roomy, so
    that a hostile header's journal entry (bounded there) is tested rather than refused here."""
    max_headers: int = 100
    """Most request header fields, and trailer fields with them (→ 431)."""
    max_body: int = 1024 * 1024
    """Largest request body, counted while it is read, whatever its framing (→ 413)."""
    header_timeout: float = 10.0
    """Seconds a request head may take from its first byte, and a body may pause (→ 408)."""
    body_timeout: float = 60.0
    """Seconds a request body may take in all, however steadily it comes (→ 408): a
    client trickling a byte a second, under :attr:`header_timeout`, cannot hold a
    connection forever. 60 s lets the largest body (:attr:`max_body`) come at
    17 KiB/s, far below any real client's pace, and bounds a trickler to a minute."""
    keep_alive: float = 75.0
    """Seconds an idle kept-alive connection stays open. Longer than the idle
    expiry of the common client pools (httpx 5 s, Node's fetch 4 s, aiohttp
    15 s; requests never expires), so that the server closing an idle
    connection under a client about to reuse it — a real fault, scripted with
    :class:`~.plan.KeepAlive` — never happens unasked."""
    write_timeout: float = 10.0
    """Seconds a client may go without reading anything of what is waiting to be sent to it
    (more than the transport's high-water mark, or anything once its connection is
    closing): it is then cut, and journalled as having left. A client that stops reading
    holds no more than that, and not for longer."""
    max_pipeline: int = 32
    """Requests queued on one connection before it stops reading."""
    linger: float = 2.0
    """Seconds a closing connection waits for the client to close, discarding what it sends."""


_METHODS = {m.encode(): m for m in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")}
"""Decoded once: the methods a mock is asked for all day."""


UNKNOWN: tuple[str, int] = ("", 0)
"""An address not known (yet): a connection's peer until it is made, unless its listener
said it (see :class:`~.connection.Connection`)."""

_SPENT = httptools.HttpRequestParser(object())
"""What a closed connection's parser is replaced with: one with no callbacks, never fed."""


class Consumer(Protocol):
    """What a reader hands its events to (the connection)."""

    def request(self, request: Request, last: bool) -> None:
        """*request* is complete; *last*: the client said it is the connection's last."""

    def refused(self, refusal: Refusal) -> None:
        """The request being read cannot be read: nothing after it is read."""

    def continue_now(self) -> bool:
        """A request asks for ``100 Continue``: send it now and say True if nothing is
        before it; False: it waits its turn (then sent, and :meth:`RequestReader.body_begins`
        called, by the consumer)."""


class _Nobody:
    """The consumer of a released reader, which reads nothing more."""

    def request(self, request: Request, last: bool) -> None:
        """Nothing is read after a release."""

    def refused(self, refusal: Refusal) -> None:
        """Nothing is read after a release."""

    def continue_now(self) -> bool:
        return False


_NOBODY = _Nobody()


class RequestReader:
    """Parses one connection's requests into events for its :class:`Consumer`.

    Its public attributes are what the connection looks at: whether a request
    is under way (:attr:`in_message`, :attr:`head_complete`), whether reading
    has stopped (:attr:`stopped`, which the connection sets when it closes),
    the one deadline the server's sweep checks (:attr:`deadline`, which the
    connection sets too while idle or closing), and the addresses and serial
    that each request carries.
    """

    # Slots, not a __dict__ (see Connection's); a new attribute has to be named here.
    __slots__ = (
        "_body",
        "_body_len",
        "_chunk_at",
        "_close_asked",
        "_consumer",
        "_head_bound",
        "_head_raw",
        "_headers",
        "_index",
        "_limits",
        "_loop",
        "_max_head",
        "_max_headers",
        "_max_target",
        "_method",
        "_packet",
        "_parser",
        "_trailer_raw",
        "_trailer_size",
        "_trailers",
        "_upgrade_framing",
        "_url",
        "_version",
        "body_until",
        "continue_pending",
        "deadline",
        "head_complete",
        "in_message",
        "local",
        "peer",
        "serial",
        "stopped",
    )

    def __init__(self, limits: Limits, loop: asyncio.AbstractEventLoop, consumer: Consumer) -> None:
        self._limits = limits
        # The limits read for every request, copied: one attribute lookup each, not two.
        self._max_head, self._max_headers = limits.max_head, limits.max_headers
        self._max_target = limits.max_target
        self._loop = loop
        self._consumer = consumer
        self._parser = httptools.HttpRequestParser(self)
        self.serial = 0
        """The connection's number on its server, set when it is made."""
        self.peer = self.local = UNKNOWN
        self.in_message = False
        self.head_complete = False
        self._head_raw = 0
        """Bytes of the packets before this one that held the head under way."""
        self._head_bound = 0
        """At least the bytes of the complete head's fields (see :attr:`Request.head_bytes`)."""
        self._packet = 0
        """Bytes of the packet being parsed."""
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] | None = None
        """The body's pieces; None while none is expected (no list for a body-less request)."""
        self._body_len = 0
        self._chunk_at = -1
        """:attr:`_body_len` when the last chunk's header was read; -1 for no chunked body."""
        self._trailers = self._trailer_size = self._trailer_raw = 0
        """Trailer fields, their bytes with the head's, and bytes of packets ending in them."""
        self._upgrade_framing = b""
        """An upgrade request's body's framing header, while llhttp has skipped the body."""
        self._method = ""
        self._version = "1.1"
        self._close_asked = False
        self._index = 0
        self.stopped = False
        """Nothing more is read: a request was refused, or the connection is closing."""
        self.continue_pending = False
        """A ``100 Continue`` waits its turn (see :meth:`Consumer.continue_now`)."""
        self.body_until = 0.0
        """Loop time by which the body under way must be complete; 0 before it has begun."""
        self.deadline = 0.0
        """Loop time at which the connection's ``expire`` is due; 0 for none."""

    on_chunk_complete = None
    """A callback httptools would call, and does not when it is None: it looks each up
    when a parser is made, and one missing is an AttributeError raised and formatted, for
    every connection."""

    def release(self) -> None:
        """Nothing more is read (the connection is lost): let go of the parser.

        It holds this reader's bound callbacks, and this reader its consumer, which
        holds it: reference cycles that only the cyclic GC would break; without
        them, the connection is freed as soon as the loop lets go of it.
        """
        self.stopped = True
        self._parser = _SPENT
        self._consumer = _NOBODY  # the consumer owns this reader: no cycle left either

    # -- feeding -------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Parse *data*; requests read and refusals go to the consumer as they come."""
        self._packet = len(data)
        rest = b""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # Nothing is upgraded to (curl asks for h2c): the request is read as HTTP/1.1
            # (RFC 9110 7.8), with the body llhttp skipped; what follows is the next one.
            framing, self._upgrade_framing = self._upgrade_framing, b""
            if framing:
                self._parser = body_parser(self, framing)
            else:
                self._parser = httptools.HttpRequestParser(self)
            rest = data[int(upgrade.args[0]) :]
        except httptools.HttpParserCallbackError as error:
            refused = error.__context__
            if isinstance(refused, Refused):
                self.refuse(refused.status, refused.reason)
            else:  # a bug in a callback here: refuse the request, keep the trace
                log.error("parser callback failed", exc_info=refused)
                self.refuse(400, "the request could not be read")
        except httptools.HttpParserError as error:
            if not self._url and not self._method:
                # Refused at its method (llhttp knows a fixed set): keep what was sent,
                # for the journal — the last head in *data* is the refused one.
                heads = [h for h in data.split(b"\r\n\r\n") if h.strip()] or [b""]
                method = heads[-1].lstrip().split(b" ", 1)[0][: self._limits.max_target]
                self._method = method.decode("latin-1")
            version = version_refused(data, self._url) if self._url and not self._headers else None
            if version is not None:
                self.refuse(505, unspoken(version))
            else:
                self.refuse(400, str(error) or type(error).__name__)
        if rest and not self.stopped:  # (outside the handler: not an error's context)
            self.feed(rest)
        elif self.in_message and not self.stopped:
            self._under_way(len(data))

    def _under_way(self, size: int) -> None:
        """A packet ended inside a request: its limits and deadlines, checked once per packet.

        Not per callback: a request that arrives whole (the usual case) never
        comes here, and pays for no clock reading and no limit check but the
        ones its callbacks cannot do without.
        """
        now = self._loop.time()
        if not self.head_complete:
            if not self.deadline:  # its first byte came in this packet
                self.deadline = now + self._limits.header_timeout
            self._head_raw += size
            max_head, max_target = self._max_head, self._max_target
            if self._head_size() > max_head or len(self._headers) > self._max_headers:
                self.refuse(431, self._too_many_headers())
            elif self._head_raw > max_target + max_head:
                if self._headers:
                    self.refuse(431, f"the request headers exceed {max_head} bytes")
                else:
                    self.refuse(414, f"the request target exceeds {max_target} bytes")
        elif not self.continue_pending:  # the body is coming
            if self._body_len == self._chunk_at:
                # Trailers under way (httptools keeps a field until it ends): bounded.
                self._trailer_raw += size
                if self._trailer_raw > self._max_target + self._max_head:
                    self.refuse(431, self._too_many_fields())
                    return
            if not self.body_until:
                self.body_begins()
            else:  # a pause may not outlast the whole body's deadline
                self.deadline = min(now + self._limits.header_timeout, self.body_until)

    def _head_size(self) -> int:
        """Bytes of the request's header fields so far, as sent (": " and CRLF each)."""
        headers = self._headers
        return sum(map(len, chain.from_iterable(headers))) + 4 * len(headers)

    def _too_many_headers(self) -> str:
        limits = self._limits
        if self._head_size() > limits.max_head:
            return f"the request headers exceed {limits.max_head} bytes"
        return f"the request has more than {limits.max_headers} headers"

    def _too_many_fields(self) -> str:  # a trailer section's refusal
        if len(self._headers) + self._trailers > self._max_headers:
            return f"the request has more than {self._max_headers} header and trailer fields"
        return f"the request's header and trailer fields exceed {self._max_head} bytes"

    # -- httptools callbacks -------------------------------------------------------
    #
    # Called for every request, most of them from one packet holding it whole: each
    # does only what cannot wait. The headers are only kept as they come; their
    # limits and the framing headers are looked at once, when the head is complete
    # (:meth:`on_headers_complete`), or when a packet ends inside it (:meth:`_under_way`).

    def on_message_begin(self) -> None:
        self.in_message = True
        self.head_complete = False
        self._head_raw = 0
        self._index += 1
        self._url = b""
        self._headers = []
        self._body = None
        self._method = ""
        self.body_until = 0.0
        # The head's deadline is set if the packet ends before the head does (_under_way).
        self.deadline = 0.0

    def on_url(self, url: bytes) -> None:
        # Once per request, unless its target is split across packets; b"" + url is url.
        url = self._url + url
        if len(url) > self._max_target:
            self._method = self._method_read()  # the target is not kept: say the method
            raise Refused(414, f"the request target exceeds {self._max_target} bytes")
        self._url = url

    def on_header(self, name: bytes, value: bytes) -> None:
        # httptools joins a name or value split across packets: one call per header.
        if self.head_complete:  # after a chunked body: a trailer field
            self._trailer(len(name) + len(value))
        else:
            self._headers.append((name, value))

    def _trailer(self, size: int) -> None:
        """A trailer field of *size* bytes: counted with the head's fields, then dropped
        (RFC 9110 6.5.1: never merged into the headers, where it would act as one)."""
        if not self._trailers:
            self._trailer_size = self._head_size()
        self._trailers += 1
        self._trailer_size += size + 4
        fields = len(self._headers) + self._trailers
        if fields > self._max_headers or self._trailer_size > self._max_head:
            raise Refused(431, self._too_many_fields())

    def on_chunk_header(self) -> None:  # the last one's is followed by the trailers
        self._chunk_at = self._body_len
        self._trailer_raw = 0

    def on_headers_complete(self) -> None:
        """The head is complete: its limits, and the headers its framing depends on (the
        ``Content-Length``, chunked or not, the first ``Expect``, ``Connection``, ``Host``),
        read in one pass here — not in a method of their own: this runs for every request."""
        self.head_complete = True
        headers = self._headers
        if len(headers) > self._max_headers:
            raise Refused(431, self._too_many_headers())
        # The head came in this packet and the earlier ones counted in _head_raw: when
        # they are shorter than the limit, so are its fields (each counted at most one
        # byte over, for a name without the space after its colon) — no sum to take.
        bound = self._head_bound = self._head_raw + self._packet + len(headers)
        if bound > self._max_head and self._head_size() > self._max_head:
            raise Refused(431, self._too_many_headers())
        length: int | None = None
        host: bytes | None = None
        connection = close = False
        codings: bytes | None = None
        expect: bytes | None = None
        kinds = KINDS
        for name, value in headers:
            kind = kinds.get(name)
            if kind is None:
                kind = kind_of(name)
            if kind < 0:
                continue
            if kind == CONTENT_LENGTH:
                # llhttp refuses these already; said again here so that the rule does
                # not hang on a parser's leniency.
                if length is not None:
                    raise Refused(400, "Duplicate Content-Length")
                value = value.rstrip(OWS)
                if not value.isdigit():
                    text = value.decode("latin-1")
                    raise Refused(400, f"Content-Length is not a decimal number: {text!r}")
                length = int(value)
            elif kind == HOST:
                if host is not None:
                    raise Refused(400, "more than one Host header")
                host = value
            elif kind == CONNECTION:
                connection = True
                close = close or b"close" in value.lower()
            elif kind == TRANSFER_ENCODING:
                codings = value if codings is None else codings + b", " + value
            elif expect is None:
                expect = value.rstrip(OWS)
        chunked = codings is not None
        if codings is not None:
            refuse_other_codings(codings)
        self._close_asked = close
        parser = self._parser
        method = parser.get_method()
        self._method = _METHODS.get(method) or method.decode("latin-1")
        # httptools formats the version with str.format, the costliest call here; llhttp
        # (which reads only 0.9, 1.0, 1.1 and 2.0) keeps alive by default only 1.1, so
        # without a Connection header to say otherwise, its verdict is the version.
        if not connection and parser.should_keep_alive():
            self._version = "1.1"
        else:
            version = self._version = parser.get_http_version()
            if version not in SPOKEN:  # 2.0 or 0.9, which llhttp reads
                raise Refused(505, unspoken(version))
        refuse_host(host, self._version)
        if not length and not chunked:
            return  # no body to wait for
        if length is not None and length > self._limits.max_body:
            raise Refused(413, f"the request body is larger than {self._limits.max_body} bytes")
        self._body = []
        self._body_len = 0
        self._chunk_at = -1
        self._trailers = 0
        if parser.should_upgrade():
            # Its body, which llhttp skips, is read by a parser of its own (feed).
            self._upgrade_framing = upgrade_framing(length)
        if (
            expect is not None
            and expect.lower() == b"100-continue"
            and self._version == "1.1"
            and not self._consumer.continue_now()
        ):
            self.continue_pending = True  # sent in order, once those are answered
            self.deadline = 0.0  # no deadline while it waits its turn
            return
        # The body's deadlines start if the packet ends before it does (_under_way).

    def body_begins(self) -> None:
        """The body may come now: its pause and whole-body deadlines start."""
        self.continue_pending = False
        now = self._loop.time()
        self.body_until = now + self._limits.body_timeout
        self.deadline = min(now + self._limits.header_timeout, self.body_until)

    def on_body(self, body: bytes) -> None:
        self._body_len += len(body)
        if self._body_len > self._limits.max_body:
            raise Refused(413, f"the request body is larger than {self._limits.max_body} bytes")
        assert self._body is not None  # a list from on_headers_complete on, when a body comes
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self.stopped or self._upgrade_framing:  # (an upgrade's body is still to come)
            return
        self.in_message = False
        self.head_complete = False
        self.deadline = 0.0
        # Request's slots set here, not through its __init__ (eleven arguments passed and
        # sorted out cost more than the rest of this callback): the transport's own way of
        # making one, with the headers as read (decoded on first use, see Request).
        request = _new(Request)
        request.method, request.target = self._method, self._url.decode("latin-1")
        request.version, request.raw_headers = self._version, tuple(self._headers)
        request.head_bytes = self._head_bound
        request._headers = None
        body = self._body
        request.body = b"" if body is None else body[0] if len(body) == 1 else b"".join(body)
        self._body = None  # (not kept, for the collector to walk, while the answer plays)
        request.peer, request.local, request.time = self.peer, self.local, time.time()
        request.connection, request.index = self.serial, self._index
        # HTTP/1.0 (keep-alive is not offered to it) or Connection: close: the last.
        last = self._version != "1.1" or self._close_asked
        if last:
            self.stopped = True
        self._consumer.request(request, last)

    # -- refusals ------------------------------------------------------------------

    def cut_short(self) -> str | None:
        """Why the request under way can never be complete, the client having sent its
        last byte; None when none is under way."""
        if not self.in_message or self.stopped:
            return None
        return f"the request {'body' if self.head_complete else 'head'} was cut short"

    def refuse(self, status: int, reason: str) -> None:
        """Refuse the request being read; nothing after it is read."""
        if self.stopped:
            return
        refusal = self.refusal(status, reason)
        self.stopped = True
        self.in_message = False
        self.continue_pending = False
        self.deadline = 0.0
        self._consumer.refused(refusal)

    def _method_read(self) -> str:
        """The method of the request under way, "" if none was read.

        :attr:`_method` is set when the head is complete; a request refused
        inside its head (a bad ``Content-Length``, too many headers, a head
        cut short) has had its method read by llhttp all the same, once its
        target has begun: asked of the parser here, on a refusal only.
        """
        if self._method or self._parser is _SPENT:
            return self._method
        method = self._parser.get_method()
        return _METHODS.get(method) or method.decode("latin-1")

    def refusal(self, status: int, reason: str) -> Refusal:
        """The request under way refused, as the journal hears of it (not queued: see
        :meth:`refuse`); the connection's too, for a request cut short or a client cut."""
        return Refusal(
            status,
            reason,
            self.peer,
            self.local,
            time.time(),
            self.serial,
            max(self._index, 1),
            (self._method_read() if self._url else self._method) or None,
            self._url.decode("latin-1") if self._url else None,
            tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in self._headers),
        )
