"""The plan the transport plays for one request: what to answer, and how; and how it went.

A plan is data. Whoever decides (the engine) builds it without touching a
socket or a clock; the transport (:mod:`mockskill.transport.connection`)
plays it with timers on the event loop. That split is what makes the
deciding side testable without a server, and lets one loop hold thousands of
waiting requests without a thread each.

A plan is, in the order it is played:

1. :attr:`Plan.waits` — pauses before the answer (a delay, a hang, an
   execution). A wait with a :class:`Cut` ends early, at ``after_ms``, with
   the cut's answer instead of the plan's: the skill's ``timeout_ms``
   cutting an execution short. Every wait ends at once when the client
   leaves, and the client's departure is reported, not the answer.
2. the answer — :attr:`Plan.answer`, sent whole, or :attr:`Plan.dribble`
   (its body in timed chunks), or replaced by a transport :attr:`Plan.fault`;
3. what the connection does after: stay open (HTTP/1.1 keep-alive), close
   with ``Connection: close`` (:attr:`Plan.close`), or one of the faults that
   only keep-alive makes possible (:class:`KeepAlive`).

The transport reports back what happened as an :class:`Outcome` (client
left at, headers sent at, last byte at, cut), which the engine journals.
Both live here, in the engine, which produces the one and reads the other;
the transport (:mod:`mockskill.transport`) imports them.

The transport owns the framing headers (``Content-Length``,
``Transfer-Encoding``, ``Connection``): the ones in :attr:`Answer.headers` are
not sent, so a plan cannot frame its answer wrongly by accident; framing
wrongly on purpose is what :class:`Fault` is for.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from .entries import escaped, shorten

if TYPE_CHECKING:
    from ..scenario.model import Proxy, Reply

FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
"""Header names the transport writes itself; an answer's own are dropped."""


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, headers and body bytes.

    Its status line and headers are rendered once, on first use, and kept:
    a plan built at load time costs nothing to render per request.
    """

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    reason: str = ""
    """The reason phrase; the standard one for the status when empty."""
    _heads: dict[int, bytes] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """Rendered heads, by *close* (0, 1); the whole answers are :attr:`wires`."""

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 999:
            raise ValueError(f"status must be 100..999, got {self.status}")
        for name, value in self.headers:
            if any(c in name for c in "\r\n:") or "\r" in value or "\n" in value:
                raise ValueError(f"header {name!r}: {value!r} would break the framing")

    @property
    def phrase(self) -> str:
        """The reason phrase sent."""
        return self.reason or _reason(self.status)

    @property
    def has_body(self) -> bool:
        """Whether the status allows a body (1xx, 204 and 304 do not)."""
        return not (self.status < 200 or self.status in (204, 304))

    def head(self, *, close: bool) -> bytes:
        """The status line and headers, with the framing the transport owns."""
        try:
            return self._heads[close]
        except KeyError:
            pass
        lines = [f"HTTP/1.1 {self.status} {self.phrase}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in FRAMING_HEADERS]
        if self.has_body:
            lines.append(f"Content-Length: {len(self.body)}")
        if close:
            lines.append("Connection: close")
        rendered = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._heads[close] = rendered
        return rendered

    def wire(self, *, close: bool) -> bytes:
        """The whole answer as sent: :meth:`head` and the body, joined once and kept."""
        return self.wires[close]

    @cached_property
    def wires(self) -> tuple[bytes, bytes]:
        """The whole answer as sent, kept alive and with ``Connection: close`` (index *close*).

        What the transport writes for every answer: an attribute lookup and an
        index once rendered (a method call cost more than the rest of the write).
        """
        if not self.has_body:
            return self.head(close=False), self.head(close=True)
        return self.head(close=False) + self.body, self.head(close=True) + self.body


class WaitKind(str, enum.Enum):
    """What a wait stands for, so that the journal can say which one was cut short."""

    DELAY = "delay"
    HANG = "hang"
    EXECUTION = "execution"


@dataclass(frozen=True)
class Cut:
    """The wait ends at *after_ms* with this answer instead of the plan's.

    *answer* may be a function of the elapsed milliseconds measured when the
    cut happens — the one thing about a plan decided at play time, because
    an ``EXECUTION_TIMEOUT`` body reports the time measured, not the time
    scripted.
    """

    after_ms: float
    answer: Answer | Callable[[float], Answer]

    def __post_init__(self) -> None:
        if self.after_ms < 0:
            raise ValueError(f"after_ms must be >= 0, got {self.after_ms}")


@dataclass(frozen=True)
class Wait:
    """A pause before the answer; ended by the client leaving or by its cut."""

    ms: float
    kind: WaitKind = WaitKind.DELAY
    cut: Cut | None = None

    def __post_init__(self) -> None:
        if self.ms < 0:
            raise ValueError(f"ms must be >= 0, got {self.ms}")


@dataclass(frozen=True)
class Dribble:
    """Send the body in *chunks* pieces, *over_ms* in all: a pause before each piece.

    The status line and headers go at once (a slow body, not a slow start),
    with the full ``Content-Length``.
    """

    chunks: int
    over_ms: float

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ValueError(f"chunks must be >= 1, got {self.chunks}")
        if self.over_ms < 0:
            raise ValueError(f"over_ms must be >= 0, got {self.over_ms}")

    def pieces(self, body: bytes) -> list[bytes]:
        size = -(-len(body) // self.chunks) or 1
        return [body[i : i + size] for i in range(0, len(body), size)] or [b""]


class Fault(str, enum.Enum):
    """Failures below HTTP, done to the connection instead of the answer.

    The names are WireMock's, which users already know, plus ``TRUNCATED_BODY``.
    """

    CONNECTION_RESET_BY_PEER = "CONNECTION_RESET_BY_PEER"
    """A TCP reset (RST, by ``SO_LINGER`` 0 and abort) instead of any answer."""
    EMPTY_RESPONSE = "EMPTY_RESPONSE"
    """The connection closes without a byte."""
    MALFORMED_RESPONSE_CHUNK = "MALFORMED_RESPONSE_CHUNK"
    """A valid status line and headers, one good chunk, then a chunk size that is not hex."""
    RANDOM_DATA_THEN_CLOSE = "RANDOM_DATA_THEN_CLOSE"
    """Bytes that are not HTTP (seeded: a replay sends the same), then close."""
    TRUNCATED_BODY = "TRUNCATED_BODY"
    """A ``Content-Length`` longer than the body that is sent, then close."""


class Stale(str, enum.Enum):
    """How a connection kept open as if alive goes stale after its idle time."""

    CLOSE = "close"
    """Closed (FIN) without ``Connection: close``: a client that reuses it
    without looking first sends into a closed connection."""
    DROP_NEXT = "drop_next"
    """Left open; the next request on it is read and the connection closed
    without a byte — the race a real provider's idle timer loses with a
    client's pooled request, made certain."""


@dataclass(frozen=True)
class KeepAlive:
    """Faults that only keep-alive makes possible, done after the answer.

    None of them sends ``Connection: close``: the consumer is told the
    connection stays open, and its pool believes it.
    """

    stale_after_ms: float | None = None
    """After this long idle, the connection goes stale (see :attr:`stale`)."""
    stale: Stale = Stale.CLOSE
    close_after: bool = False
    """Close right after this answer."""
    max_requests: int | None = None
    """The connection serves at most this many requests; the last closes it."""

    def __post_init__(self) -> None:
        if self.stale_after_ms is not None and self.stale_after_ms < 0:
            raise ValueError(f"stale_after_ms must be >= 0, got {self.stale_after_ms}")
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {self.max_requests}")


@dataclass(frozen=True)
class Plan:
    """What to answer to one request, and how (see the module's docstring)."""

    answer: Answer
    waits: tuple[Wait, ...] = ()
    dribble: Dribble | None = None
    fault: Fault | None = None
    fault_seed: int = 0
    """Seeds the random bytes of ``RANDOM_DATA_THEN_CLOSE``."""
    close: bool = False
    """Close the connection after the answer, saying so (``Connection: close``)."""
    keep_alive: KeepAlive | None = None
    upstream: Upstream | None = None
    """Forward the request to a real provider after the waits, and relay its answer
    (:mod:`.proxying`); :attr:`answer` is then not sent."""
    journalled: bool = False
    """The handler journalled the exchange as it planned it, as the outcome of an answer
    sent whole at once — what always happens to an instant plan, written as soon as it is
    asked for: the transport then reports nothing to the handler's ``played``. Set by the
    engine on a plain step's kept plan (an outcome built and handed over only to be
    dropped cost a twentieth of the request); a handler that wants every outcome (a
    request log) answers with :attr:`reported` instead."""
    instant: bool = field(init=False, repr=False, compare=False)
    """Nothing to wait for: the transport writes it at once, without a task."""

    def __post_init__(self) -> None:
        if self.fault is not None and self.dribble is not None:
            raise ValueError("a plan has a fault or a dribble, not both")
        if self.close and self.keep_alive is not None:
            raise ValueError("a plan that closes saying so has no keep-alive fault")
        object.__setattr__(
            self,
            "instant",
            not self.waits and self.dribble is None and self.fault is None and not self.upstream,
        )
        if self.journalled and not self.instant:
            raise ValueError("only an instant plan can be journalled as it is planned")

    @cached_property
    def reported(self) -> Plan:
        """This plan with every outcome reported (not :attr:`journalled`): made once."""
        return dataclasses.replace(self, journalled=False) if self.journalled else self


_new = object.__new__


# -- a proxy step's part of a plan (planned by engine/proxying.py) ---------------

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers about one connection (RFC 9110 §7.6.1), never relayed; nor those named in
``Connection``."""
_SAID_ANEW = frozenset({b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto"})
"""Request headers said anew for the hop the consumer made (``X-Forwarded-For`` appended)."""
_NOT_FORWARDED = frozenset(
    {h.encode() for h in HOP_BY_HOP | {"host", "content-length", "expect"}}
    | _SAID_ANEW
    | {b"accept-encoding"}
)
"""Request headers (lower case, as read) the relay writes itself (or, ``Expect``, the
transport answered), and those it looks at before forwarding; all else goes as it came."""


@dataclass(eq=False)
class Relayed:
    """What happened upstream, as the transport reports it on the :class:`~.plan.Outcome`."""

    target: str
    """The request target forwarded (path and query, as the consumer sent it)."""
    headers: tuple[tuple[str, str], ...]
    """The consumer's request headers as received (names as sent), while recording
    (:attr:`Upstream.keep`); else empty."""
    reached: bool = False
    """Whether the request was sent on a connection to the upstream (it may have run)."""
    status: int | None = None
    """The upstream's status (None: no answer came)."""
    error: str | None = None
    """Why the upstream gave no (whole) answer: refused, a DNS or TLS failure, a reset, a
    timeout; None when it answered whole."""
    ms: float = 0.0
    """From the request's first byte sent upstream to the answer's last byte (or the error)."""
    response_headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    """The upstream's body, as far as it was kept (:attr:`Upstream.keep`)."""
    truncated: bool = False
    sent_body: bytes | None = None
    """The body the consumer got when mockskill rewrote it (a descriptor's URLs)."""
    cut: bool = False
    """The upstream failed after its status line was relayed: the consumer's connection was cut."""
    reported: bool = False
    """Whether the transport reported the exchange already (it does once)."""

    def journal(self, url: str, idempotency_key: str | None) -> dict[str, Any]:
        """The journal entry's ``upstream`` field (see :func:`upstream_journal`)."""
        return upstream_journal(
            url, idempotency_key, self.reached, self.status, self.error, round(self.ms, 3)
        )


def upstream_journal(
    url: str,
    idempotency_key: str | None,
    reached: bool = False,
    status: int | None = None,
    error: str | None = None,
    ms: float = 0.0,
) -> dict[str, Any]:
    """A proxied request's ``upstream`` field in the journal (docs/admin.md's entry table).

    *idempotency_key* is the consumer's ``Idempotency-Key`` header, by which the retry
    audit tells the attempts of one operation apart from a new one; cut and escaped as
    the journal keeps any text a client chose.
    """
    return {
        "url": url,
        "reached": reached,
        "status": status,
        "error": error,
        "ms": ms,
        "idempotency_key": None if idempotency_key is None else escaped(shorten(idempotency_key)),
    }


@dataclass(frozen=True, eq=False)
class Upstream:
    """Where and how to forward one request; the transport plays it (see the module)."""

    proxy: Proxy
    base: str
    """This server as the consumer reached it (``{base_url}``), for the rewrites."""
    forwarded_proto: str
    failed: Callable[[str, str, float], Answer]
    """The answer when no answer came: (``"timeout"`` or ``"unreachable"``, reason, ms)."""
    after: Answer | None = None
    """Commit then fail: this answer replaces the upstream's (read whole first)."""
    after_fault: Fault | None = None
    """Commit then fail: this fault replaces the upstream's answer."""
    fault_seed: int = 0
    rewrite: Callable[[bytes], bytes] | None = None
    """A descriptor's or the list's body, its URLs pointed back at mockskill."""
    keep: int = 0
    """How much of the upstream's body to keep (for a recording); errors keep
    :data:`MAX_GRADED` anyway, for the audit."""
    failures: list[Reply] = field(default_factory=list)

    def request_head(
        self, method: str, target: str, raw: Sequence[tuple[bytes, bytes]], peer: str, length: int
    ) -> bytes:
        """The head sent upstream for the consumer's request (its body follows, *length* long)."""
        # On the bytes as read: no header is decoded (a request has a dozen; this runs
        # for every proxied one).
        named: set[bytes] = set()
        for raw_name, raw_value in raw:
            if raw_name.lower() == b"connection":
                named.update(v.strip().lower() for v in raw_value.split(b","))
        parts = [f"{method} {target} HTTP/1.1\r\nHost: {self._host()}\r\n".encode("latin-1")]
        forwarded_for: bytes | None = None
        host: bytes | None = None
        skipped = _NOT_FORWARDED
        for name, value in raw:
            low = name.lower()
            if low in skipped or low in named:
                if low == b"host":
                    host = value
                elif low == b"x-forwarded-for":
                    forwarded_for = (
                        value if forwarded_for is None else forwarded_for + b", " + value
                    )
                elif low == b"accept-encoding" and self.rewrite is None and low not in named:
                    parts += (name, b": ", value, b"\r\n")  # (a body to rewrite comes plain)
                continue
            parts += (name, b": ", value, b"\r\n")
        client = peer.encode("latin-1")
        parts += (
            b"X-Forwarded-For: ",
            client if forwarded_for is None else forwarded_for + b", " + client,
            b"\r\n",
        )
        if host is not None:
            parts += (b"X-Forwarded-Host: ", host, b"\r\n")
        parts.append(f"X-Forwarded-Proto: {self.forwarded_proto}\r\n".encode("latin-1"))
        if length or method in ("POST", "PUT", "PATCH"):
            parts.append(b"Content-Length: %d\r\n" % length)
        parts.append(b"\r\n")
        return b"".join(parts)

    def _host(self) -> str:
        proxy = self.proxy
        default = 443 if proxy.scheme == "https" else 80
        host = f"[{proxy.host}]" if ":" in proxy.host else proxy.host
        return host if proxy.port == default else f"{host}:{proxy.port}"

    @staticmethod
    def relayed_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The upstream's answer headers a consumer gets: hop-by-hop ones (and those named in
        ``Connection``) and the framing removed (the transport frames the answer itself)."""
        named = {
            v.strip().lower()
            for name, value in headers
            if name.lower() == "connection"
            for v in value.split(",")
        }
        return [
            (name, value)
            for name, value in headers
            if (low := name.lower()) not in HOP_BY_HOP
            and low not in named
            and low != "content-length"
        ]

    @staticmethod
    def answer_head(
        status: int,
        reason: str,
        headers: Sequence[tuple[str, str]],
        framing: str | None,
        *,
        close: bool,
    ) -> bytes:
        """The head of the relayed answer: the upstream's status and end-to-end headers, then
        *framing* (the transport's ``Content-Length`` or chunked line, if any)."""
        lines = [f"HTTP/1.1 {status} {reason or Answer(status).phrase}"]
        lines += [f"{k}: {v}" for k, v in headers]
        if framing is not None:
            lines.append(framing)
        if close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Outcome:
    """What happened on the wire, for the journal. Times are wall-clock.

    Read-only once reported. Not a frozen dataclass: one is built per
    request, and a frozen one's ``__init__`` costs several times as much.
    Not slotted either: the defaults stay class attributes, so that
    :meth:`sent` (the outcome of nearly every request) stores only the
    fields that differ from them.
    """

    answer: Answer | None
    """The answer sent (the cut's, when a cut happened), None when none was started."""
    started: float
    """When playing began."""
    headers_at: float | None = None
    """When the status line and headers went out."""
    last_byte_at: float | None = None
    """When the last byte of the answer was handed to the kernel."""
    client_left_at: float | None = None
    """When the client was seen to leave, if it left before the answer was complete."""
    cut: bool = False
    """A wait's :class:`~mockskill.engine.plan.Cut` answered instead of the plan."""
    waited_ms: float = 0.0
    """Time spent in the plan's waits, measured."""
    fault: Fault | None = None
    """The fault done to the connection (None if the client left first)."""
    stopped: bool = False
    """The server, stopping, cut the exchange after its grace period."""
    closed: bool = False
    """The connection was closed after this exchange (by the plan, the client, or a fault)."""
    dropped: bool = False
    """The request was read and dropped unanswered: its connection had gone stale
    (:attr:`~mockskill.engine.plan.Stale.DROP_NEXT`); no plan was asked for."""
    upstream: Relayed | None = None
    """What happened upstream, for a plan with :attr:`Plan.upstream` that got that far."""

    @classmethod
    def sent(cls, answer: Answer, at: float, closed: bool) -> Outcome:
        """An answer written whole at *at*, as soon as it was asked for: the instant plan's.

        The same as ``Outcome(answer, at, headers_at=at, last_byte_at=at,
        closed=closed)``, without the generated ``__init__`` (a call through
        the type, and a store per field).
        """
        outcome: Outcome = _new(cls)
        outcome.answer, outcome.started, outcome.closed = answer, at, closed
        outcome.headers_at = outcome.last_byte_at = at
        return outcome
