"""Real upstreams for the proxy tests: a small plain Flask provider, and sockets that misbehave.

:class:`Provider` runs a Flask app on Werkzeug's threaded server (optionally
TLS) on an ephemeral port: it echoes what it was sent (``/echo``), streams
a body whose second half waits for the test (``/stream``, :attr:`release`),
answers late (``/slow``), and serves a skill surface of its own (``/skills``,
``/skills/{id}``, ``/skills/{id}/invoke``) whose URLs name itself, and a
token endpoint of its own (``/oauth/token``).
:class:`Misbehaving` is a socket server that reads a request and then does
one wrong thing: resets at once, or sends a head and part of a body and
resets.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.serving import make_server


class Provider:
    """A plain Flask provider in a thread (see the module's docstring)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.seen: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.invoked = 0
        app = Flask("provider")
        provider = self

        @app.route("/echo", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
        def echo() -> Response:
            seen = provider._saw()
            response = jsonify(seen)
            response.headers["X-Upstream"] = "yes"
            response.headers["Connection"] = "X-Secret-Hop"
            response.headers["X-Secret-Hop"] = "1"
            response.headers["Keep-Alive"] = "timeout=5"
            return response

        @app.route("/stream")
        def stream() -> Response:
            provider._saw()

            def body() -> Any:
                yield b"first\n"
                provider.release.wait(10)
                yield b"second\n"

            return Response(body(), mimetype="text/plain")

        @app.route("/big")
        def big() -> Response:
            provider._saw()
            size = int(request.args.get("n", "0"))
            return Response(b"x" * size, mimetype="application/octet-stream")

        @app.route("/slow")
        def slow() -> Response:
            provider._saw()
            provider.release.wait(10)
            return jsonify(late=True)

        @app.route("/skills")
        def listing() -> Response:
            provider._saw()
            base = provider.url
            return jsonify(
                skills=[
                    {
                        "id": "real",
                        "descriptor_url": f"{base}/skills/real",
                        "invoke_url": f"{base}/skills/real/invoke",
                    }
                ]
            )

        @app.route("/skills/not-json")
        def not_json() -> Response:
            provider._saw()
            return Response(b"not a descriptor", mimetype="text/plain")

        @app.route("/skills/<skill_id>")
        def descriptor(skill_id: str) -> Response:
            provider._saw()
            return jsonify(
                protocol_version="1.0.0",
                id=skill_id,
                name=skill_id,
                description="a real provider's skill",
                version="1.0.0",
                capability_type="api",
                endpoint={"url": f"{provider.url}/skills/{skill_id}/invoke", "method": "POST"},
                auth={"type": "none"},
            )

        @app.route("/oauth/token", methods=["POST"])
        def token() -> Response:
            provider._saw()
            return jsonify(access_token="the-providers-own", token_type="Bearer")

        @app.route("/skills/<skill_id>/invoke", methods=["POST"])
        def invoke(skill_id: str) -> Response:
            provider._saw()
            provider.invoked += 1
            return jsonify(ran=skill_id, n=provider.invoked)

        self._server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=ssl_context)
        scheme = "https" if ssl_context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_port}"
        # stop()'s shutdown() returns once serve_forever() next looks up: soon, not its
        # default half second.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _saw(self) -> dict[str, Any]:
        seen = {
            "method": request.method,
            "path": request.path,
            "query": request.query_string.decode(),
            "headers": [[k, v] for k, v in request.headers.items()],
            "body": request.get_data().decode(),
            "peer_port": request.environ.get("REMOTE_PORT"),
        }
        self.seen.append(seen)
        return seen

    def header(self, seen: dict[str, Any], name: str) -> list[str]:
        return [v for k, v in seen["headers"] if k.lower() == name.lower()]

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class Misbehaving:
    """Reads one request per connection, then *mode*: ``reset`` (RST at once) or
    ``head_then_reset`` (a 200 head promising 100 bytes, 10 of them, then RST); or
    ``keep_alive``: answers every request on a connection ``200 ok``, kept alive
    (:attr:`connections` counts the connections it accepted); but a path beginning
    ``/hold`` is answered once :attr:`release` is set, ``/half`` sends its head and half
    its body, the rest once released, and ``/drop`` closes a connection it comes on
    unanswered unless it is the connection's first request (then ``200 fresh``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.connections = 0
        self.release = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            if self.mode == "keep_alive":
                threading.Thread(target=self._keep_alive, args=(conn,), daemon=True).start()
                continue
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.requests += 1
                if self.mode == "head_then_reset":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _keep_alive(self, conn: socket.socket) -> None:
        # mockskill resets a connection whose consumer left (the relay is cut): that ends
        # this one's exchanges, as a close does, and is no error of the test's upstream.
        with conn, contextlib.suppress(ConnectionError):
            data = b""
            served = 0
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")  # (GETs: no body)
                self.requests += 1
                served += 1
                target = head.split(b" ", 2)[1]
                if target.startswith(b"/drop") and served > 1:
                    return  # closed unanswered: a kept-alive connection gone stale
                if target.startswith(b"/hold"):  # answers once the test releases it
                    self.release.wait(10)
                if target.startswith(b"/half"):  # half the body, the rest once released
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")
                    self.release.wait(10)
                    conn.sendall(b"56789")
                    continue
                body = b"fresh" if target.startswith(b"/drop") else b"ok"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def stop(self) -> None:
        self._stopped = True
        self._sock.close()


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
