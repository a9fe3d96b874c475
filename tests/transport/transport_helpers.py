"""What the transport's tests share: a recording handler, a server on port 0, raw sockets.

Not a conftest.py: the suite's top conftest is imported by name
(``from conftest import ...``), and a second one in a folder without
``__init__.py`` would shadow it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import httptools

from mockskill.transport import (
    Answer,
    Limits,
    Outcome,
    Plan,
    Refusal,
    Request,
    ThreadedServer,
)

JSON = (("Content-Type", "application/json"),)
LOOPS = ("asyncio", "uvloop")


def echo(request: Request) -> Plan:
    """The default plan: a 200 saying what was received, and on which connection."""
    body = {
        "method": request.method,
        "target": request.target,
        "body": request.body.decode("latin-1"),
        "connection": request.connection,
        "index": request.index,
    }
    return Plan(Answer(200, JSON, json.dumps(body).encode()))


class Recorder:
    """A handler that plans by *plans* (a function of the request) and records everything."""

    def __init__(self, plans: Callable[[Request], Plan] = echo) -> None:
        self.plans = plans
        self.exchanges: list[tuple[Request | Refusal, Outcome]] = []
        self._changed = threading.Condition()

    def plan(self, request: Request) -> Plan:
        return self.plans(request)

    def refuse(self, refusal: Refusal) -> Plan:
        body = json.dumps({"status": refusal.status, "reason": refusal.reason}).encode()
        return Plan(Answer(refusal.status, JSON, body))

    def played(self, exchange: Request | Refusal, outcome: Outcome) -> None:
        with self._changed:
            self.exchanges.append((exchange, outcome))
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[tuple[Request | Refusal, Outcome]]:
        """The first *count* exchanges reported, waiting up to *timeout* s for them."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.exchanges) >= count, timeout):
                raise AssertionError(f"{len(self.exchanges)} exchanges reported, {count} expected")
            return list(self.exchanges[:count])

    def refusals(self) -> list[tuple[Refusal, Outcome]]:
        return [(e, o) for e, o in self.exchanges if isinstance(e, Refusal)]


@contextlib.contextmanager
def serving(
    recorder: Recorder | None = None, *, loop: str = "asyncio", **limits: float
) -> Iterator[tuple[ThreadedServer, Recorder]]:
    """A transport on port 0 answering through *recorder*; stopped (no grace) after."""
    recorder = recorder or Recorder()
    server = ThreadedServer(
        recorder,
        limits=Limits(**limits),  # type: ignore[arg-type]
        loop=loop,  # type: ignore[arg-type]
    ).start()
    try:
        yield server, recorder
    finally:
        server.stop(grace=0)


def connect(server: ThreadedServer, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the server sends until it closes (or *timeout* passes: then an error)."""
    sock.settimeout(timeout)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def send_until_refused(sock: socket.socket, chunks: Iterable[bytes], pause: float = 0.0) -> int:
    """Send *chunks* until the server's close makes a send fail; the bytes sent by then.

    Fails the test if every chunk went: the server was meant to stop reading.
    """
    sent = 0
    try:
        for chunk in chunks:
            sock.sendall(chunk)
            sent += len(chunk)
            if pause:
                time.sleep(pause)
    except (BrokenPipeError, ConnectionResetError):
        return sent
    raise AssertionError(f"all {sent} bytes were sent: the server never stopped reading")


def is_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """Whether the server closes *sock* (EOF, no byte) within *timeout*."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


class _ResponseReader:
    def __init__(self) -> None:
        self.responses: list[Response] = []
        self.parser = httptools.HttpResponseParser(self)

    def on_message_begin(self) -> None:
        self.responses.append(Response(0))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.responses[-1].headers.append((name.decode(), value.decode()))

    def on_headers_complete(self) -> None:
        self.responses[-1].status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.responses[-1].body += body


def parse(data: bytes) -> list[Response]:
    """The HTTP responses in *data*, in order (a strict parser: bad framing raises)."""
    reader = _ResponseReader()
    reader.parser.feed_data(data)
    return reader.responses


def exchange(server: ThreadedServer, data: bytes, timeout: float = 5.0) -> list[Response]:
    """Send *data* on a new connection, read until the server closes, parse the answers."""
    with connect(server, timeout) as sock:
        sock.sendall(data)
        return parse(read_until_closed(sock, timeout))


def elapsed(since: float) -> float:
    return time.monotonic() - since
