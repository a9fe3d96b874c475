"""Transport faults: failures below HTTP, done to the raw connection, on the WSGI path.

The faults are declared in :mod:`mockskill.scenario.kinds` (a step names one
at load; docs/scenarios.md tells each); this module plays them for the WSGI
player (``player``), each with the function named after it. The event loop's
are :mod:`mockskill.transport.faults`. Each takes the connection from
Werkzeug's server (so that nothing else writes to it or closes it in an
orderly way), does its damage, and closes it. Random bytes come from the
seeded generator, so a replay sends the same.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Callable

from werkzeug.http import HTTP_STATUS_CODES

from ..scenario import kinds
from ..scenario.model import Reply

Fault = Callable[[socket.socket, Reply, random.Random], None]


def take(sock: socket.socket) -> socket.socket:
    """The connection, taken from its owner: the old object is left closed, the fd open."""
    return socket.socket(sock.family, sock.type, sock.proto, fileno=sock.detach())


def _status_line(reply: Reply) -> bytes:
    reason = HTTP_STATUS_CODES.get(reply.status, "Unknown")
    return f"HTTP/1.1 {reply.status} {reason}\r\n".encode()


def _headers(reply: Reply, extra: list[tuple[str, str]]) -> bytes:
    lines = [f"Content-Type: {reply.content_type}", *(f"{k}: {v}" for k, v in reply.headers)]
    lines += [f"{k}: {v}" for k, v in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def connection_reset_by_peer(conn: socket.socket, reply: Reply, rng: random.Random) -> None:
    # SO_LINGER with a zero timeout makes close() send RST, not FIN.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def empty_response(conn: socket.socket, reply: Reply, rng: random.Random) -> None:
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def malformed_response_chunk(conn: socket.socket, reply: Reply, rng: random.Random) -> None:
    head = _status_line(reply) + _headers(reply, [("Transfer-Encoding", "chunked")])
    # A first chunk that is fine, then a size line that is not hexadecimal.
    body = reply.body[: max(1, len(reply.body) // 2)] or b"{"
    conn.sendall(head + f"{len(body):x}\r\n".encode() + body + b"\r\nzz-not-a-chunk-size\r\n")
    conn.close()


def random_data_then_close(conn: socket.socket, reply: Reply, rng: random.Random) -> None:
    # Garbage that cannot be taken for a status line: a client must not parse it.
    garbage = bytes(rng.getrandbits(8) for _ in range(64)).replace(b"H", b"\x00")
    conn.sendall(b"\x00" + garbage)
    conn.close()


def truncated_body(conn: socket.socket, reply: Reply, rng: random.Random) -> None:
    body = reply.body or b'{"result": "this body is cut short"}'
    promised = len(body) * 2
    head = _status_line(reply) + _headers(reply, [("Content-Length", str(promised))])
    conn.sendall(head + body)
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


FAULTS: dict[str, Fault] = kinds.players(
    connection_reset_by_peer,
    empty_response,
    malformed_response_chunk,
    random_data_then_close,
    truncated_body,
)
