"""The transport faults, done to an asyncio transport (the faults are declared in
:mod:`mockskill.scenario.kinds`; each player here is named after its fault).

Each takes the connection's transport, the answer the fault stands in for
(whose status line and headers the framing faults send) and a seed, does its
damage, and leaves the connection closed or closing. Nothing here decides
*whether* to do a fault: the plan says so.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Callable

from ..engine.plan import FRAMING_HEADERS, Answer
from ..scenario import kinds

_TRUNCATED_FILLER = b'{"result": "this body is cut short"}'


def _head(answer: Answer, framing: str) -> bytes:
    lines = [f"HTTP/1.1 {answer.status} {answer.phrase}"]
    lines += [f"{k}: {v}" for k, v in answer.headers if k.lower() not in FRAMING_HEADERS]
    lines.append(framing)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def connection_reset_by_peer(transport: asyncio.Transport, answer: Answer, seed: int) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # SO_LINGER with a zero timeout makes the close send RST, not FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def empty_response(transport: asyncio.Transport, answer: Answer, seed: int) -> None:
    transport.close()


def malformed_response_chunk(transport: asyncio.Transport, answer: Answer, seed: int) -> None:
    # A first chunk that is fine, then a size line that is not hexadecimal.
    body = answer.body[: max(1, len(answer.body) // 2)] or b"{"
    transport.write(
        _head(answer, "Transfer-Encoding: chunked")
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\nzz-not-a-chunk-size\r\n"
    )
    transport.close()


def random_bytes(seed: int) -> bytes:
    """Garbage that cannot be taken for a status line, the same for the same seed."""
    rng = random.Random(seed)
    return b"\x00" + bytes(rng.getrandbits(8) for _ in range(64)).replace(b"H", b"\x00")


def random_data_then_close(transport: asyncio.Transport, answer: Answer, seed: int) -> None:
    transport.write(random_bytes(seed))
    transport.close()


def truncated_body(transport: asyncio.Transport, answer: Answer, seed: int) -> None:
    body = answer.body or _TRUNCATED_FILLER
    transport.write(_head(answer, f"Content-Length: {len(body) * 2}") + body)
    transport.close()


FAULTS: dict[str, Callable[[asyncio.Transport, Answer, int], None]] = kinds.players(
    connection_reset_by_peer,
    empty_response,
    malformed_response_chunk,
    random_data_then_close,
    truncated_body,
)
