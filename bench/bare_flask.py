"""The baseline: a bare Flask app on Werkzeug's threaded server, as mockskill uses.

Nothing but Flask and ``werkzeug.serving.make_server(..., threaded=True)``
with request logging off, so the benchmarks can tell mockskill's own cost
from the framework's. Three routes, on the same paths mockskill serves in
the bundled scenarios:

- ``GET /skills/translate``: a small JSON descriptor, 200 (start-up check);
- ``POST /skills/endpoint-unreachable/invoke``: a small JSON error body, 503;
- ``POST /skills/delay/invoke``: sleeps 1 s, then ``{"ok": true}``;
- ``POST /skills/delay-100/invoke``: sleeps 0.1 s, then ``{"ok": true}``.

``--backlog`` sets the listen backlog (Werkzeug's default is 128;
mockskill listens with 4096). Run::

    python bench/bare_flask.py --port 8081 [--backlog 128]

Stops on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from types import FrameType
from typing import Any

from flask import Flask
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler, make_server

ERROR_BODY = {
    "error": {
        "code": "ENDPOINT_UNREACHABLE",
        "message": "Failed to connect to skill endpoint",
        "details": {"reason": "Connection refused"},
        "retry": {"suggested_delay_ms": 2000, "max_attempts": 5},
    }
}


def create_app() -> Flask:
    app = Flask("bare")

    @app.get("/skills/translate")
    def describe() -> dict[str, Any]:
        return {"id": "translate", "name": "Translate", "capability_type": "api"}

    @app.post("/skills/endpoint-unreachable/invoke")
    def unreachable() -> tuple[dict[str, Any], int, dict[str, str]]:
        return ERROR_BODY, 503, {"Retry-After": "2"}

    @app.post("/skills/delay/invoke")
    def delay() -> dict[str, Any]:
        time.sleep(1.0)
        return {"ok": True}

    @app.post("/skills/delay-100/invoke")
    def delay_100() -> dict[str, Any]:
        time.sleep(0.1)
        return {"ok": True}

    return app


class QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument(
        "--backlog", type=int, default=128, help="listen backlog (Werkzeug default: 128)"
    )
    args = parser.parse_args()

    # make_server() listens with the class's request_queue_size (128); set ours.
    ThreadedWSGIServer.request_queue_size = args.backlog
    server = make_server(
        args.host, args.port, create_app(), threaded=True, request_handler=QuietHandler
    )

    def on_term(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever to return: call it from another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
