"""A handler that runs a WSGI app (the Flask admin) off the loop, in a small thread pool.

The app is called in a worker thread with a PEP 3333 environ built from the
parsed request; its whole answer is collected there and handed back to the
loop as a plan. So a slow admin request holds one worker, never the loop:
the skill surface keeps answering meanwhile. The app stays a plain WSGI
app, which a user can still mount in any other server.

A worker that COMPUTES (a report over a full journal) still shares the GIL
with the loop's thread: the admin app writes its JSON in pieces
(:func:`mockskill.protocol.jsonstyle.encode`) so that no single C call
holds it for long.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from collections.abc import Callable, Container, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes, urlsplit

from ..engine.plan import Answer, Outcome, Plan
from .handler import Refusal, Request

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication, WSGIEnvironment

log = logging.getLogger("mockskill.transport")

DEFAULT_WORKERS = 4


def environ(request: Request, *, url_scheme: str = "http") -> WSGIEnvironment:
    """The WSGI environ of *request* (PEP 3333: the path unquoted, as Latin-1)."""
    target = request.target
    if not target.startswith("/"):  # absolute form (a proxy's), or "*"
        parts = urlsplit(target)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    path, _, query = target.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": request.local[0],
        "SERVER_PORT": str(request.local[1]),
        "SERVER_PROTOCOL": f"HTTP/{request.version}",
        "REMOTE_ADDR": request.peer[0],
        "REMOTE_PORT": str(request.peer[1]),
        "REQUEST_URI": request.target,
        "RAW_URI": request.target,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "mockskill.request": request,
        "mockskill.arrived": request.time,
    }
    for name, value in request.headers:
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            env["CONTENT_TYPE"] = value
        elif key == "CONTENT_LENGTH":
            env["CONTENT_LENGTH"] = value
        elif key not in ("TRANSFER_ENCODING",):
            key = f"HTTP_{key}"
            env[key] = f"{env[key]},{value}" if key in env else value
    if "CONTENT_LENGTH" not in env and request.body:
        env["CONTENT_LENGTH"] = str(len(request.body))  # a chunked body, read whole already
    return env


def call(app: WSGIApplication, env: WSGIEnvironment) -> Answer:
    """Call *app* and collect its whole answer."""
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, headers)]
        return chunks.append

    chunks: list[bytes] = []
    result: Iterable[bytes] = app(env, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the WSGI app returned without calling start_response")
    status, headers = started[0]
    code, _, reason = status.partition(" ")
    return Answer(int(code), tuple(headers), b"".join(chunks), reason)


class WSGIHandler:
    """Plans a request by calling a WSGI *app* in a pool of *workers* threads."""

    def __init__(
        self,
        app: WSGIApplication,
        workers: int = DEFAULT_WORKERS,
        *,
        secure_ports: Container[int] = (),
    ) -> None:
        self.app = app
        self._secure_ports = secure_ports
        """Local ports that read requests over TLS: the app sees their scheme as https
        (its URLs, and the origin of a page it served, say so)."""
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mockskill-wsgi")

    def _plan(self, request: Request) -> Plan:
        try:
            scheme = "https" if request.local[1] in self._secure_ports else "http"
            return Plan(call(self.app, environ(request, url_scheme=scheme)))
        except Exception:
            log.exception("the WSGI app failed on %s %s", request.method, request.target)
            body = b"the WSGI app failed; see the server's log\n"
            return Plan(Answer(500, (("Content-Type", "text/plain; charset=utf-8"),), body))

    def plan(self, request: Request) -> asyncio.Future[Plan]:
        return asyncio.get_running_loop().run_in_executor(self._pool, self._plan, request)

    def refuse(self, refusal: Refusal) -> Plan:
        body = f"{refusal.status} {refusal.reason}\n".encode()
        return Plan(Answer(refusal.status, (("Content-Type", "text/plain; charset=utf-8"),), body))

    def played(self, exchange: Request | Refusal, outcome: Outcome) -> None:
        """Nothing to record: the app records what it wants itself."""

    def close(self) -> None:
        """Let the workers finish and end them."""
        self._pool.shutdown(wait=True)
