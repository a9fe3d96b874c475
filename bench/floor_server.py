"""The floor (issue 13): an asyncio protocol on httptools answering one constant response.

Not a benchmark: the fastest a Python HTTP/1.1 server on this machine can
answer, with nothing per request but parsing and one write. Keep-alive and
pipelining as the client asks (``should_keep_alive``: HTTP/1.0, or
``Connection: close``, closes after the answer). Every request, whatever its
method or path, gets the same bytes: by default a 503 shaped like mockskill's
``endpoint-unreachable`` step; ``--body FILE`` sends that file's bytes as the
body instead (bench/keepalive.py passes mockskill's own answer). uvloop is
used if installed. Run::

    python bench/floor_server.py --port 8090 [--body FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

import httptools

BODY = b'{"error": {"code": "ENDPOINT_UNREACHABLE", "message": "Failed to connect"}}'


def response(body: bytes) -> tuple[bytes, bytes]:
    """The constant answer, kept alive and with ``Connection: close``."""
    head = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n"
    head += b"Content-Type: application/json\r\n"
    length = b"Content-Length: %d\r\n" % len(body)
    return head + length + b"\r\n" + body, head + length + b"Connection: close\r\n\r\n" + body


class Floor(asyncio.Protocol):
    keep: bytes = b""
    close: bytes = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_message_complete(self) -> None:  # called by httptools
        if self.parser.should_keep_alive():
            self.transport.write(self.keep)
        else:
            self.transport.write(self.close)
            self.transport.close()


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Floor, "127.0.0.1", port, backlog=4096)
    stopped = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    async with server:
        await stopped.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--body", type=Path, help="file whose bytes are the body")
    args = parser.parse_args()
    Floor.keep, Floor.close = response(args.body.read_bytes() if args.body else BODY)
    with contextlib.suppress(ImportError):
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
