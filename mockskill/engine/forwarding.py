"""A proxy step's part of a plan: where and how to forward a request, and what happened.

:class:`Upstream` is what the engine plans for a proxy step (planned by
:mod:`.proxying`): the upstream, the head sent for the consumer's request,
the headers relayed back, the answers when the upstream fails; the transport
plays it (:mod:`mockskill.transport.relaying`) and reports a :class:`Relayed`
on the :class:`~.plan.Outcome`, which :func:`upstream_journal` puts in the
journal. It stands apart from :mod:`.plan` because it is the proxy's alone:
no other plan forwards anything. :mod:`.plan` names both types too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .entries import escaped, shorten
from .relayed_streams import RelayedStream, stream_format
from .wire import Answer, Fault

if TYPE_CHECKING:
    from ..scenario.model import Proxy, Reply

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
    stream: RelayedStream | None = None
    """The upstream's answer as a stream of events, when it was one (its type says):
    what the journal's ``Entry.stream`` and a recording's ``stream:`` step are made of."""

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
    last_event_id: str | None = None
    """The request's ``Last-Event-ID``: whether a relayed stream resumed after it."""

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

    def relayed_stream(
        self, headers: Sequence[tuple[str, str]], head_ms: float, head_at: float
    ) -> RelayedStream | None:
        """The events of an answer with *headers* (the upstream's), relayed as a stream
        when its type is one (SSE, NDJSON), found as they pass; None: no stream (or a
        descriptor rewritten whole). *head_ms*: the head's latency; *head_at*: when it came
        (``time.perf_counter()``). While recording, the events themselves are kept."""
        fmt = stream_format(headers)
        if fmt is None or self.rewrite is not None:
            return None
        return RelayedStream(fmt, head_ms, head_at, collect=self.keep, asked=self.last_event_id)

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
