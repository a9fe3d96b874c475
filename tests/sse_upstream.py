"""A real streaming provider for the proxy tests: http.server, SSE and NDJSON, chunked.

:class:`StreamingProvider` runs a ``ThreadingHTTPServer`` on an ephemeral port. Its
answers are streams, chunked (each event its own chunk, flushed as it is written) but
one:

- ``/skills/tokens/invoke``: SSE, ``retry: 1500``, then :data:`TOKENS` events
  ``token`` (ids 1..), each :data:`PAUSE` seconds after the one before, a comment between,
  then ``event: result``;
- ``/skills/gated/invoke``: SSE, event 1, then nothing until the test sets
  :attr:`StreamingProvider.gate` (it records when it went on), then event 2 and a result;
- ``/skills/lines/invoke``: NDJSON in mockskill's ``{"event", "id", "data"}`` shape;
- ``/skills/cut/invoke``: SSE, two events, then a TCP reset (no last chunk);
- ``/skills/whole/invoke``: SSE of two events in one write, framed by ``Content-Length``;
- ``/skills/flood/invoke``: SSE of 64 KiB events, :data:`FLOOD` bytes as fast as they
  are taken (:attr:`StreamingProvider.flooded` counts them).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKENS = 5
PAUSE = 0.06
FLOOD = 256 * 1024 * 1024
"""What ``/skills/flood/invoke`` streams, as fast as it is taken: 64 KiB events."""


class StreamingProvider:
    """The provider, serving in a thread (a context manager)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.second_sent_at: float | None = None
        self.flooded = 0
        """The bytes ``/skills/flood/invoke`` got written so far."""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                route = {
                    "/skills/tokens/invoke": self._tokens,
                    "/skills/gated/invoke": self._gated,
                    "/skills/lines/invoke": self._lines,
                    "/skills/cut/invoke": self._cut,
                    "/skills/whole/invoke": self._whole,
                    "/skills/flood/invoke": self._flood,
                }.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                route()

            def _head(self, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Cache-Control", "no-cache")
                self.send_header("X-Provider", "streams")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _end(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _tokens(self) -> None:
                self._head("text/event-stream; charset=utf-8")
                self._chunk(b"retry: 1500\n\n")
                for n in range(1, TOKENS + 1):
                    time.sleep(PAUSE)
                    self._chunk(b'id: %d\nevent: token\ndata: {"text":"t%d"}\n\n' % (n, n))
                    self._chunk(b": still here\n\n")  # a heartbeat: no event
                self._chunk(b'event: result\ndata: {"answer": 42}\n\n')  # (spaced: kept as text)
                self._end()

            def _gated(self) -> None:
                self._head("text/event-stream")
                self._chunk(b"id: 1\ndata: first\n\n")
                provider.gate.wait(10)
                provider.second_sent_at = time.monotonic()
                self._chunk(b"id: 2\ndata: second\ndata: two lines\n\n")
                self._chunk(b'event: result\ndata: {"done":true}\n\n')
                self._end()

            def _lines(self) -> None:
                self._head("application/x-ndjson")
                for n in range(1, 4):
                    time.sleep(PAUSE)
                    self._chunk(b'{"event":"token","id":"%d","data":{"n":%d}}\n' % (n, n))
                self._chunk(b"\n")  # a heartbeat
                self._chunk(b'{"event":"result","data":"done"}\n')
                self._end()

            def _flood(self) -> None:
                self._head("text/event-stream")
                event = b"data: " + b"x" * (64 * 1024) + b"\n\n"
                try:
                    while provider.flooded < FLOOD:
                        self._chunk(event)
                        provider.flooded += len(event)
                    self._end()
                except OSError:  # the consumer went, and mockskill dropped this connection
                    self.close_connection = True

            def _whole(self) -> None:
                body = b"id: a\ndata: 1\n\n: beat\n\nid: b\ndata: 2\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def _cut(self) -> None:
                self._head("text/event-stream")
                self._chunk(b"id: 1\ndata: one\n\n")
                self._chunk(b"id: 2\ndata: two\n\n")
                time.sleep(PAUSE)
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()  # a reset: the last chunk never comes
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StreamingProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self._server.shutdown()
        self._server.server_close()
