"""One connection to Redis on the event loop: batches of commands out, their replies in.

The loop's side of the store sends the needs of a loop turn as one write
and wants their replies as one list (:mod:`.batching`). redis-py's asyncio
client can do that, but pays per command what a request cannot afford on
this path (an encoder call per argument, a timeout context per reply); this
is the little that is needed instead: an :class:`asyncio.Protocol` whose
replies are parsed by hiredis (the ``redis`` extra installs it), or by
:class:`Parser` (RESP2, pure Python) without it, and resolved in order.

A :class:`Link` is connected by :func:`connect` (``AUTH`` and ``SELECT`` as the
URL says; TLS for ``rediss://``, with the URL's ``ssl_*`` options read as
redis-py reads them: :func:`tls_context`); lost, it fails what is waiting and
is not used again (the batcher connects a new one).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from redis.connection import parse_url

from .commands import packed

try:
    import hiredis
except ImportError:  # pragma: no cover - the redis extra installs hiredis
    hiredis = None  # type: ignore[assignment]

CRLF = b"\r\n"


class ReplyError(Exception):
    """An error reply (``-ERR ...``, ``-NOSCRIPT ...``): the command failed, the link did not."""


class LinkError(ConnectionError):
    """The link cannot carry commands: not connected, lost, or a reply later than the timeout."""


class _Reader(Protocol):
    def feed(self, data: bytes) -> None: ...
    def gets(self) -> Any: ...


class Parser:
    """RESP2 replies from bytes fed in pieces (what hiredis's Reader does, in Python).

    ``gets()`` answers the next whole reply, or False while it is incomplete.
    Error replies are :class:`ReplyError` values, nil is None.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._at = 0

    def feed(self, data: bytes) -> None:
        if self._at:
            del self._buffer[: self._at]
            self._at = 0
        self._buffer += data

    def gets(self) -> Any:
        parsed = self._parse(self._at)
        if parsed is None:
            return False
        reply, self._at = parsed
        return reply

    def _parse(self, at: int) -> tuple[Any, int] | None:
        buffer = self._buffer
        end = buffer.find(CRLF, at)
        if end < 0:
            return None
        kind, line, after = buffer[at : at + 1], bytes(buffer[at + 1 : end]), end + 2
        if kind == b":":
            return int(line), after
        if kind == b"+":
            return line, after
        if kind == b"-":
            return ReplyError(line.decode(errors="replace")), after
        if kind == b"$":
            size = int(line)
            if size < 0:
                return None, after
            if len(buffer) < after + size + 2:
                return None
            return bytes(buffer[after : after + size]), after + size + 2
        if kind == b"*":
            count = int(line)
            if count < 0:
                return None, after
            items: list[Any] = []
            for _ in range(count):
                parsed = self._parse(after)
                if parsed is None:
                    return None
                item, after = parsed
                items.append(item)
            return items, after
        raise LinkError(f"not a Redis reply: {bytes(buffer[at:end])[:40]!r}")


def reader() -> _Reader:
    """hiredis's reader (its errors as ReplyError values too), else :class:`Parser`."""
    if hiredis is None:  # pragma: no cover
        return Parser()
    return hiredis.Reader(replyError=ReplyError)


Answered = Callable[[list[Any] | LinkError], None]
"""Told a batch's replies, in order, or why there are none (the link failed)."""


class Link(asyncio.Protocol):
    """One connection: :meth:`request` writes a batch and answers its replies, in order."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._reader = reader()
        self._transport: asyncio.Transport | None = None
        self._waiting: deque[tuple[int, list[Any], Answered]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.lost: str | None = None
        """Why the link is unusable (None while it works)."""
        self.closed = asyncio.get_running_loop().create_future()
        """Done once the connection is closed (the loop has let go of it)."""

    # -- the protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        waiting = self._waiting
        while waiting:
            reply = reader.gets()
            if reply is False:
                return
            count, replies, answered = waiting[0]
            replies.append(reply)
            if len(replies) == count:
                waiting.popleft()
                answered(replies)
                self._time_next()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"Connection to Redis lost{f': {exc}' if exc else ''}")
        if not self.closed.done():
            self.closed.set_result(None)

    # -- its use -------------------------------------------------------------------------

    def request(self, data: bytes, count: int) -> asyncio.Future[list[Any]]:
        """Send *data* (*count* packed commands); the future answers their *count* replies."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

        def answered(result: list[Any] | LinkError) -> None:
            if future.done():
                return
            if isinstance(result, LinkError):
                future.set_exception(result)
            else:
                future.set_result(result)

        self.send(data, count, answered)
        return future

    def send(self, data: bytes, count: int, answered: Answered) -> None:
        """Send *data* (*count* packed commands); *answered* is called with their replies as
        soon as they are read (in the same callback: no turn of the loop in between), or
        with the LinkError that ends them (at once, if the link is unusable)."""
        if self.lost is not None or self._transport is None:
            answered(LinkError(self.lost or "not connected"))
            return
        self._waiting.append((count, [], answered))
        self._transport.write(data)
        if self._timer is None:
            self._time_next()

    def _time_next(self) -> None:
        """Time the oldest batch waiting (its replies are due within the timeout)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiting:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.timeout, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self._fail(f"Timeout reading from Redis: no reply within {self.timeout:g} s")
        self.close()

    def _fail(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            _, _, answered = self._waiting.popleft()
            answered(LinkError(reason))

    def close(self) -> None:
        if self.lost is None:
            self.lost = "closed"
        if self._transport is not None:
            self._transport.close()


CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def tls_context(options: dict[str, Any]) -> ssl.SSLContext:
    """The TLS context a ``rediss://`` URL's query asks for, as redis-py reads the same URL
    (the off-loop client's connections and the loop's must trust the same server):
    ``ssl_ca_certs`` / ``ssl_ca_path`` (the CA to trust, else the system's),
    ``ssl_certfile`` + ``ssl_keyfile`` (a client certificate, for ``tls-auth-clients``),
    ``ssl_cert_reqs`` (``required``, the default; ``optional``; ``none``: no verification)
    and ``ssl_check_hostname`` (default on, off with ``ssl_cert_reqs=none``)."""
    reqs = options.get("ssl_cert_reqs", "required")
    if reqs not in CERT_REQS:
        raise LinkError(
            f"ssl_cert_reqs={reqs!r} in the URL: expected one of {', '.join(CERT_REQS)}"
        )
    verify = CERT_REQS[reqs]
    context = ssl.create_default_context(
        cafile=options.get("ssl_ca_certs"), capath=options.get("ssl_ca_path")
    )
    context.check_hostname = bool(options.get("ssl_check_hostname", True)) and (
        verify != ssl.CERT_NONE
    )
    context.verify_mode = verify
    certfile: str | None = options.get("ssl_certfile")
    keyfile: str | None = options.get("ssl_keyfile")
    if certfile or keyfile:  # (one PEM file may hold both)
        context.load_cert_chain(certfile or keyfile or "", keyfile)
    return context


async def connect(url: str, timeout: float) -> Link:
    """A :class:`Link` to the Redis *url* names, authenticated and on its database."""
    options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    host, port = options.get("host", "localhost"), int(options.get("port", 6379))
    try:
        context = tls_context(options) if url.startswith("rediss://") else None
    except OSError as error:  # a CA or certificate file missing or unreadable
        raise LinkError(f"cannot set up TLS from the URL's ssl_* files: {error}") from None
    loop = asyncio.get_running_loop()
    try:
        _, link = await asyncio.wait_for(
            loop.create_connection(lambda: Link(timeout), host, port, ssl=context), timeout
        )
    except TimeoutError:
        raise LinkError(f"Timeout connecting to {host}:{port}") from None
    except ssl.SSLError as error:  # (an OSError too: say it is TLS that failed)
        raise LinkError(f"TLS handshake with {host}:{port} failed: {error}") from None
    except OSError as error:
        raise LinkError(
            f"Error {error.errno} connecting to {host}:{port}. {error.strerror}."
        ) from None
    first: list[Sequence[str | int]] = []
    password, username = options.get("password"), options.get("username")
    if password:
        first.append(("AUTH", username, password) if username else ("AUTH", password))
    if options.get("db"):
        first.append(("SELECT", options["db"]))
    if first:
        replies = await link.request(b"".join(packed(c) for c in first), len(first))
        for reply in replies:
            if isinstance(reply, ReplyError):
                link.close()
                raise LinkError(str(reply))
    return link
