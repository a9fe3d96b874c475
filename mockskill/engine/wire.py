"""What goes on the wire for a request: an answer's bytes, or a fault done instead.

:class:`Answer` is an HTTP answer whose status line and headers are rendered
once and kept (the framing headers are the transport's: an answer's own are
not sent); :data:`Fault` names the failures below HTTP that replace an
answer. Both are apart from :mod:`.plan` because more than a plan sends them:
a proxy step's relayed answer and its commit-then-fail (:mod:`.forwarding`),
the transport's refusals and its fault players. :mod:`.plan` names both too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from http import HTTPStatus
from typing import NewType

FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
"""Header names the transport writes itself; an answer's own are dropped."""


_new = object.__new__
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
"""Each standard status's reason phrase; others are sent as "Unknown"."""


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

    @classmethod
    def framed(
        cls,
        status: int,
        headers: tuple[tuple[str, str], ...],
        body: bytes,
        head: bytes,
    ) -> Answer:
        """An answer made per request (a templated step's) whose *head*, up to its
        ``Content-Length:`` value, was rendered once (``Connection: close`` is added after
        the length for a closing answer); its headers were checked then."""
        made: Answer = _new(cls)
        fields = made.__dict__
        fields["status"], fields["headers"], fields["body"] = status, headers, body
        fields["reason"], fields["_heads"] = "", {}
        length = str(len(body)).encode()
        fields["wires"] = (
            head + length + b"\r\n\r\n" + body,
            head + length + b"\r\nConnection: close\r\n\r\n" + body,
        )
        return made

    @property
    def phrase(self) -> str:
        """The reason phrase sent."""
        return self.reason or _PHRASES.get(self.status, "Unknown")

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


Fault = NewType("Fault", str)
"""A failure below HTTP, done to the connection instead of the answer: the name of a
fault declared in :mod:`mockskill.scenario.kinds` (the loader refuses any other)."""
