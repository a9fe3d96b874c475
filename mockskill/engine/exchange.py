"""What a recording keeps of one proxied exchange, and the sink it goes to.

A proxied request (a ``proxy`` step) is answered by a real provider. When a
recording is on, the engine hands each such exchange, as the consumer sent
it and the upstream answered it, to a :class:`Recorder`; the recorder (the
``mockskill.recording`` stage above) turns what it was handed into a
scenario file. The values are the wire's, before any rewriting mockskill
does on the way back (a descriptor's ``endpoint.url``), so that a recording
says what the provider really answered.

This module is the contract between the two sides and holds no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .relayed_streams import RecordedStream


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request forwarded upstream and what came back."""

    at: float
    """When the request arrived (seconds since the epoch)."""
    session: str
    """The consumer's session (``Mockskill-Session``; ``default`` without one)."""
    method: str
    target: str
    """The request target as the consumer sent it: path, then ``?query`` if any."""
    headers: tuple[tuple[str, str], ...]
    """The consumer's request headers, as received (names as sent), secrets included:
    the recorder redacts them, nothing before it does."""
    body: bytes
    """The consumer's request body."""
    upstream: str
    """The base URL the request was forwarded to (``http://host:port``)."""
    status: int
    """The upstream's status."""
    response_headers: tuple[tuple[str, str], ...]
    """The upstream's answer headers, hop-by-hop ones removed."""
    response_body: bytes
    """The upstream's body, at most the recording's bound (see :attr:`truncated`)."""
    truncated: bool
    """Whether the upstream's body was longer than what :attr:`response_body` keeps."""
    upstream_ms: float
    """Milliseconds from the request's first byte sent upstream to the answer's last byte."""
    stream: RecordedStream | None = None
    """The answer's events with their timing, when it was a stream (SSE, NDJSON)."""


class Recorder(Protocol):
    """Where the engine hands proxied exchanges while a recording is on."""

    def add(self, exchange: Exchange) -> None:
        """Keep *exchange* (called on the serving loop: must not block)."""
