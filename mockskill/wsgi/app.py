"""``create_app``: the Flask application around an engine, a WSGI app.

Flask owns ``/__admin`` (the admin blueprint); every other request goes
straight to the :class:`~mockskill.engine.engine.Engine`, through a small WSGI
dispatcher in front of Flask's own. Not through a Flask catch-all route:
Flask re-types every response a view returns (``force_type``), which would
strip the answers that act on the raw connection (transport faults, a
client that left), and its routing would only repeat the engine's.

The dispatcher also enforces the safe defaults (docs/security.md) for
both paths at once: bodies over a limit are refused with 413, ``/__admin``
refuses what a web page could make a browser send it
(:mod:`mockskill.admin.browsers`) and asks for the admin token when one is
set (not for the dashboard's static files and the CA certificate, which
hold no secret), and CORS headers are added only when enabled.

This is the WSGI side, and it imports Werkzeug; what the event-loop
transport asks (the skill surface as ``mockskill serve`` and
:class:`~mockskill.server.server.Server` serve it) is :mod:`mockskill.server.dispatch`,
which does not. There is no module-level app: each server (and each test)
builds its own.
"""

from __future__ import annotations

import io
import logging
import secrets
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from ..admin import browsers
from ..admin.browsers import (
    ADMIN_PREFIX,
    ADMIN_TOKEN_HEADER,
    allowed_origin,
    cors_headers,
    preflight,
)
from ..control.registry import Registry
from ..engine.builtin_answers import DEFAULT_MAX_BODY, error_answer, too_large
from ..engine.engine import SESSION_HEADER, Engine
from ..engine.plan import Answer
from ..engine.state import DEFAULT_SESSION, Entry, State
from ..scenario.model import ScenarioSet
from ..transport.ports import RefusedPort
from .player import handle

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from flask import Flask

COMPILING = threading.RLock()
"""Held while a Flask app is built: Werkzeug compiles its rules by parsing Python source
with ``ast``, and CPython 3.11's AST constructor keeps its recursion depth per
interpreter, not per thread, so two threads compiling at once (two servers' admin apps)
can raise ``SystemError: AST constructor recursion depth mismatch``."""
log = logging.getLogger("mockskill")


class WSGIDispatcher:
    """WSGI: ``/__admin`` to Flask, everything else to the engine.

    In front of both: the body limit (*max_body_bytes*), the admin token
    (*admin_token*, None: not asked) and CORS (*cors*).
    """

    def __init__(
        self,
        engine: Engine,
        admin_app: WSGIApplication,
        *,
        admin_token: str | None = None,
        max_body_bytes: int | None = DEFAULT_MAX_BODY,
        cors: bool | Iterable[str] = False,
        admin_hosts: Iterable[str] | None = None,
    ) -> None:
        self.engine = engine
        self.admin_app = admin_app
        self.admin_token = admin_token
        self.max_body_bytes = max_body_bytes
        self.cors = browsers.cors_origins(cors)
        self.admin_hosts = None if admin_hosts is None else browsers.host_names(admin_hosts)
        """The Host names /__admin answers besides loopback ones (None: any; a loopback
        server's, against DNS rebinding: mockskill/admin/browsers.py)."""

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        admin = path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")
        allowed = allowed_origin(self.cors, environ.get("HTTP_ORIGIN")) if self.cors else None
        if allowed is not None:
            if environ.get("REQUEST_METHOD") == "OPTIONS" and (
                "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in environ
            ):
                return _response(preflight(allowed))(environ, start_response)
            start_response = _with_cors(start_response, cors_headers(allowed))
        started = time.time()
        if not self._body_fits(environ):
            response = _response(too_large(self.max_body_bytes or 0))
            if not admin:
                self._record_refusal(environ, started, response)
            return response(environ, start_response)
        if admin:
            # (Imported here: this surface is the admin app's, built on first use.)
            from ..admin import dashboard, tls_routes

            # What a web page could make a browser do, refused first (docs/security.md).
            refused = browsers.refuse_host(environ, self.admin_hosts) or browsers.refuse_origin(
                environ, self.cors
            )
            if refused is not None:
                return _refused(refused)(environ, start_response)
            # The dashboard's static files and the CA certificate hold no secret: served
            # without the token (the page then asks for it, and sends it with every fetch).
            method = environ.get("REQUEST_METHOD", "")
            below = path[len(ADMIN_PREFIX) :]
            public = dashboard.is_public(below, method) or tls_routes.is_public(below, method)
            token = self.admin_token
            if token is not None and not public and not _has_token(environ, token):
                return _token_required()(environ, start_response)
            refused = browsers.refuse_content_type(environ)
            if refused is not None:
                return _refused(refused)(environ, start_response)
            return self.admin_app(environ, start_response)
        req = Request(environ)
        try:
            response = handle(self.engine, req)
        except Exception as exc:
            log.exception("mockskill failed while answering %s %s", req.method, req.path)
            message = f"mockskill failed while answering: {type(exc).__name__}: {exc}"
            response = _error_response(500, "MOCKSKILL_INTERNAL_ERROR", message)
        return response(environ, start_response)

    def _body_fits(self, environ: WSGIEnvironment) -> bool:
        """Whether the body is within the limit; a chunked one is read (up to it) to know."""
        limit = self.max_body_bytes
        if limit is None:
            return True
        length = environ.get("CONTENT_LENGTH")
        if length:
            try:
                return int(length) <= limit
            except ValueError:
                return True  # Werkzeug reads no body it cannot size
        if not environ.get("wsgi.input_terminated"):
            return True  # no length, not chunked: no body
        stream = environ["wsgi.input"]
        body = b""
        while len(body) <= limit:
            chunk = stream.read(limit + 1 - len(body))
            if not chunk:
                break
            body += chunk
        if len(body) > limit:
            return False
        # Hand the rest of the app the body it read, sized.
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["wsgi.input_terminated"] = False
        return True

    def _record_refusal(self, environ: WSGIEnvironment, started: float, response: Response) -> None:
        state = self.engine.state
        session = environ.get("HTTP_" + SESSION_HEADER.upper().replace("-", "_"))
        state.record(
            Entry(
                id=state.next_id(),
                started=started,
                finished=time.time(),
                session=session or DEFAULT_SESSION,
                method=environ.get("REQUEST_METHOD", "GET"),
                path=environ.get("PATH_INFO", "") or "/",
                status=response.status_code,
                endpoint="refused",
                error_code="MOCKSKILL_BODY_TOO_LARGE",
            )
        )


def _has_token(environ: WSGIEnvironment, token: str) -> bool:
    """Whether the request carries *token* (Authorization: Bearer, or Mockskill-Admin-Token)."""
    wanted = token.encode("utf-8")
    given = []
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        given.append(credentials.strip())
    header = environ.get("HTTP_" + ADMIN_TOKEN_HEADER.upper().replace("-", "_"))
    if header is not None:
        given.append(header.strip())
    # WSGI header values are the raw bytes decoded as latin-1: compare bytes.
    return any(
        secrets.compare_digest(value.encode("latin-1", "replace"), wanted) for value in given
    )


def _token_required() -> Response:
    message = (
        "this server's admin surface needs its admin token: send"
        f" 'Authorization: Bearer TOKEN' or '{ADMIN_TOKEN_HEADER}: TOKEN'"
    )
    details = {"headers": ["Authorization: Bearer TOKEN", f"{ADMIN_TOKEN_HEADER}: TOKEN"]}
    response = _error_response(401, "MOCKSKILL_ADMIN_TOKEN_REQUIRED", message, details)
    response.headers["WWW-Authenticate"] = 'Bearer realm="mockskill-admin"'
    return response


def _refused(refused: browsers.BrowserRefusal) -> Response:
    return _error_response(refused.status, refused.code, refused.message, refused.details)


def _response(answer: Answer) -> Response:
    """The Werkzeug response of one of :mod:`mockskill.server.dispatch`'s answers."""
    return Response(answer.body, status=answer.status, headers=list(answer.headers))


def _with_cors(start_response: StartResponse, extra: tuple[tuple[str, str], ...]) -> StartResponse:
    def start(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
        headers = [h for h in headers if h[0].lower() != "access-control-allow-origin"]
        headers.extend(extra)
        return start_response(status, headers, *args)

    return start


def create_app(
    engine: Engine | None = None,
    *,
    registry: Registry | None = None,
    admin_token: str | None = None,
    max_body_bytes: int | None = DEFAULT_MAX_BODY,
    cors: bool | Iterable[str] = False,
    admin_hosts: Iterable[str] | None = None,
) -> Flask:
    """A Flask app serving *engine* (by default: no scenarios, a fresh state).

    *registry* is what changes the engine's scenarios (``/__admin/scenarios``);
    given one, *engine* is its engine; without, one is made for *engine*.
    *admin_token*, *max_body_bytes*, *cors* and *admin_hosts* are the safe defaults of
    docs/security.md (None for *max_body_bytes*: no limit; for *admin_hosts*, the
    Host names ``/__admin`` answers besides loopback ones: any Host).

    An engine made here is opened here; one passed in is opened by its owner
    (:class:`~mockskill.server.server.Server` does, when it binds its port).
    """
    if registry is not None:
        if engine is not None and engine is not registry.engine:
            raise ValueError("create_app: the engine is not the registry's engine")
        engine = registry.engine
    if engine is None:
        engine = Engine(ScenarioSet(), State(), refused=RefusedPort())
        engine.open()
    if registry is None:
        registry = Registry(engine)
    if admin_token is not None:
        engine.state.hide(admin_token)  # a client may put it in a path: never journalled
    # Flask and the admin blueprint are imported here, not at the top: only the
    # admin app needs them, and mockskill.Server builds it on the first /__admin
    # request, so that serving skills (and start-up) never loads Flask or Jinja.
    from flask import Flask, request

    from ..admin import blueprint as admin
    from ..admin.json_provider import Provider

    app = Flask("mockskill")
    app.json = Provider(app)  # one JSON style for every answer, read strictly
    app.extensions["mockskill"] = engine
    app.config["MOCKSKILL_MAX_BODY"] = max_body_bytes
    app.register_blueprint(admin.blueprint(registry), url_prefix=ADMIN_PREFIX)
    app.wsgi_app = WSGIDispatcher(  # type: ignore[method-assign]
        engine,
        app.wsgi_app,
        admin_token=admin_token,
        max_body_bytes=max_body_bytes,
        cors=cors,
        admin_hosts=admin_hosts,
    )

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        code = f"MOCKSKILL_HTTP_{exc.code}"
        return _error_response(exc.code or 500, code, exc.description or exc.name)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        log.exception("mockskill failed while answering %s %s", request.method, request.path)
        message = f"mockskill failed while answering: {type(exc).__name__}: {exc}"
        return _error_response(500, "MOCKSKILL_INTERNAL_ERROR", message)

    return app


def _error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> Response:
    return _response(error_answer(status, code, message, details))
