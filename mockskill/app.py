"""``create_app``: the Flask application around an engine.

Flask owns ``/__admin`` (the admin blueprint); every other request goes
straight to the :class:`~mockskill.engine.engine.Engine`, through a small WSGI
dispatcher in front of Flask's own. Not through a Flask catch-all route:
Flask re-types every response a view returns (``force_type``), which would
strip the answers that act on the raw connection (transport faults, a
client that left), and its routing would only repeat the engine's.

The dispatcher also enforces the safe defaults (docs/security.md) for
both paths at once: bodies over a limit are refused with 413, ``/__admin``
asks for the admin token when one is set (not for the dashboard's static
files, which hold no data), and CORS headers are added only
when enabled.

There is no module-level app: each server (and each test) builds its own.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from .admin.registry import Registry
from .engine.actions import answer_of
from .engine.engine import SESSION_HEADER, Engine, journalled
from .engine.incoming import Incoming, decoded_path, headers_of_raw, viewed
from .engine.plan import Answer, Outcome, Plan
from .engine.state import DEFAULT_SESSION, MAX_SESSION_NAME, Entry, State
from .protocol.catalog import tool_error
from .scenario.model import ScenarioSet
from .transport import Refusal, WSGIHandler
from .transport import Request as TransportRequest
from .transport.wsgi import environ as wsgi_environ

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from flask import Flask

ADMIN_PREFIX = "/__admin"
DEFAULT_MAX_BODY = 1024 * 1024
"""Request bodies longer than this (bytes) are refused with 413 unless told otherwise."""
ADMIN_TOKEN_HEADER = "Mockskill-Admin-Token"
CORS_ALLOW_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
CORS_ALLOW_HEADERS = (
    "Authorization, Content-Type, X-API-Key, Mockskill-Session, Mockskill-Error,"
    " Skill-Protocol-Version, Mockskill-Admin-Token"
)
log = logging.getLogger("mockskill")


class SkillSurface:
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
        cors: bool = False,
    ) -> None:
        self.engine = engine
        self.admin_app = admin_app
        self.admin_token = admin_token
        self.max_body_bytes = max_body_bytes
        self.cors = cors

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        admin = path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")
        if self.cors:
            if environ.get("REQUEST_METHOD") == "OPTIONS" and (
                "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in environ
            ):
                return _preflight()(environ, start_response)
            start_response = _with_cors(start_response)
        started = time.time()
        if not self._body_fits(environ):
            response = _too_large(self.max_body_bytes or 0)
            if not admin:
                self._record_refusal(environ, started, response)
            return response(environ, start_response)
        if admin:
            # The dashboard's static files hold no data: served without the token, the
            # page can ask for it (every request it then makes for data carries it).
            # (Imported here: this surface is the admin app's, built on first use.)
            from .admin import dashboard

            method = environ.get("REQUEST_METHOD", "")
            public = dashboard.is_public(path[len(ADMIN_PREFIX) :], method)
            token = self.admin_token
            if token is not None and not public and not _has_token(environ, token):
                return _token_required()(environ, start_response)
            return self.admin_app(environ, start_response)
        req = Request(environ)
        try:
            response = self.engine.handle(req)
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


def _too_large(limit: int) -> Response:
    message = (
        f"the request body is over this server's limit of {limit} bytes"
        " (mockskill serve --max-body BYTES, or Server(max_body_bytes=...), raises it)"
    )
    return _error_response(413, "MOCKSKILL_BODY_TOO_LARGE", message, {"max_body_bytes": limit})


def _preflight() -> Response:
    response = Response(status=204)
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Access-Control-Allow-Methods"] = CORS_ALLOW_METHODS
    response.headers["Access-Control-Allow-Headers"] = CORS_ALLOW_HEADERS
    response.headers["Access-Control-Max-Age"] = "600"
    return response


def _with_cors(start_response: StartResponse) -> StartResponse:
    def start(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
        headers = [h for h in headers if h[0].lower() != "access-control-allow-origin"]
        headers.append(("Access-Control-Allow-Origin", "*"))
        headers.append(("Access-Control-Expose-Headers", "*"))
        return start_response(status, headers, *args)

    return start


def create_app(
    engine: Engine | None = None,
    *,
    registry: Registry | None = None,
    admin_token: str | None = None,
    max_body_bytes: int | None = DEFAULT_MAX_BODY,
    cors: bool = False,
) -> Flask:
    """A Flask app serving *engine* (by default: no scenarios, a fresh state).

    *registry* is what changes the engine's scenarios (``/__admin/scenarios``);
    given one, *engine* is its engine; without, one is made for *engine*.
    *admin_token*, *max_body_bytes* and *cors* are the safe defaults of
    docs/security.md (None for *max_body_bytes*: no limit).

    An engine made here is opened here; one passed in is opened by its owner
    (:class:`~mockskill.server.Server` does, when it binds its port).
    """
    if registry is not None:
        if engine is not None and engine is not registry.engine:
            raise ValueError("create_app: the engine is not the registry's engine")
        engine = registry.engine
    if engine is None:
        engine = Engine(ScenarioSet(), State())
        engine.open()
    if registry is None:
        registry = Registry(engine)
    if admin_token is not None:
        engine.state.hide(admin_token)  # a client may put it in a path: never journalled
    # Flask and the admin blueprint are imported here, not at the top: only the
    # admin app needs them, and mockskill.Server builds it on the first /__admin
    # request, so that serving skills (and start-up) never loads Flask or Jinja.
    from flask import Flask, request

    from .admin import blueprint as admin
    from .admin.json_provider import Provider

    app = Flask("mockskill")
    app.json = Provider(app)  # one JSON style for every answer, read strictly
    app.extensions["mockskill"] = engine
    app.config["MOCKSKILL_MAX_BODY"] = max_body_bytes
    app.register_blueprint(admin.blueprint(registry), url_prefix=ADMIN_PREFIX)
    app.wsgi_app = SkillSurface(  # type: ignore[method-assign]
        engine, app.wsgi_app, admin_token=admin_token, max_body_bytes=max_body_bytes, cors=cors
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
    rendered = tool_error(status, code, message, details or {})
    return Response(rendered.body, status=status, content_type="application/json")


class LoopSurface:
    """The event-loop transport's handler: what :class:`SkillSurface` does, planned.

    Skill requests are planned on the loop by the engine (no I/O, no
    sleeping); with a remote store, the plan is an awaitable that awaits the
    store's answers on the loop (:meth:`Engine.plan_async`), never blocking
    it (the transport plays a connection's requests one after the other, so
    pipelined answers keep their order); ``/__admin`` runs the whole Flask
    app (token check included) in a small thread pool off the loop, so a
    slow report never holds a skill request. CORS is added here as there. The body limit is the
    transport's (it counts while reading); its refusal, like every framing
    refusal, is answered in the unified body and journalled as ``refused``.
    """

    def __init__(
        self,
        engine: Engine,
        admin_app: WSGIApplication,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        cors: bool = False,
        workers: int = 4,
    ) -> None:
        # *admin_app* is the Flask app's wsgi_app, or (mockskill.Server) a callable
        # that builds the app on its first call, in the pool: start-up skips Flask.
        self.engine = engine
        self._remote = engine.state.remote
        """Whether plans await the store (:meth:`_plan_remote`): the store is the engine's
        for good, so read once."""
        self.cors = cors
        self.admin = WSGIHandler(admin_app, workers=workers)
        self.max_body_bytes = max_body_bytes
        self._pending: dict[int, Callable[[Outcome], None]] = {}
        self._planning: dict[int, _Flight] = {}
        """Requests whose plan awaits a remote store, by id (see :meth:`_plan_remote`)."""
        self.on_played: Callable[[TransportRequest | Refusal, Outcome], None] | None = None
        """Called after each exchange is journalled (the request log). While it is None, a
        plan journalled as planned is played without an outcome reported back
        (:attr:`~mockskill.engine.plan.Plan.journalled`)."""

    def _is_admin(self, target: str) -> bool:
        if not target.startswith(ADMIN_PREFIX):
            return False  # the skill surface's requests, told apart without a split
        path = target.split("?", 1)[0]
        return path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")

    def plan(self, request: TransportRequest) -> Plan | Awaitable[Plan]:
        target = request.target
        if target.startswith(ADMIN_PREFIX) and self._is_admin(target):
            return self.admin.plan(request)
        if (
            self.cors
            and request.method == "OPTIONS"
            and request.header("Access-Control-Request-Method")
        ):
            return Plan(answer_of(_preflight()))
        req = _incoming(request)
        if self._remote:
            flight = self._planning[id(request)] = _Flight()
            return self._plan_remote(request, req, flight)
        try:
            planned, record = self.engine.plan(req)
        except Exception as exc:
            return _failed(req, exc)
        if record is not journalled:  # (most requests are: nothing to record once played)
            self._pending[id(request)] = record
        elif self.on_played is not None:  # the request log hears of every exchange
            planned = planned.reported
        return _with_cors_plan(planned) if self.cors else planned

    async def _plan_remote(self, request: TransportRequest, req: Incoming, flight: _Flight) -> Plan:
        """:meth:`plan` on a remote store: its answers awaited on the loop.

        The exchange may end before the plan comes (a stop): :meth:`played`
        then leaves its outcome in *flight*, and the request is journalled
        with it here (its sequence step was taken). A plan never awaited
        takes nothing and leaves nothing behind (played let go of *flight*).
        """
        try:
            planned, record = await self.engine.plan_async(req)
        except Exception as exc:
            return _failed(req, exc)
        finally:
            if self._planning.get(id(request)) is flight:
                del self._planning[id(request)]
        if flight.ended is not None:
            record(flight.ended)
        else:
            self._pending[id(request)] = record
        return _with_cors_plan(planned) if self.cors else planned

    def refuse(self, refusal: Refusal) -> Plan:
        if refusal.status == 413:
            response = _too_large(self.max_body_bytes)
        else:
            code = f"MOCKSKILL_HTTP_{refusal.status}"
            response = _error_response(refusal.status, code, f"bad request: {refusal.reason}")
        plan = Plan(answer_of(response))
        return _with_cors_plan(plan) if self.cors else plan

    def played(self, exchange: TransportRequest | Refusal, outcome: Outcome) -> None:
        if isinstance(exchange, Refusal):
            if not self._is_admin(exchange.target or ""):
                self._record_refusal(exchange, outcome)
        else:
            # Looked up only when not empty: most requests were journalled as planned.
            pending, planning = self._pending, self._planning
            record = pending.pop(id(exchange), None) if pending else None
            if record is not None:
                record(outcome)
            elif planning and (flight := planning.pop(id(exchange), None)) is not None:
                flight.ended = outcome  # ended before its plan came: journalled when it does
            elif outcome.dropped and not self._is_admin(exchange.target):
                self._record_dropped(exchange, outcome)
        if self.on_played is not None:
            self.on_played(exchange, outcome)

    def _record_dropped(self, request: TransportRequest, outcome: Outcome) -> None:
        """A request read on a stale connection and dropped unanswered (keep_alive's
        drop_next): turned away before matching, so no sequence moved for it."""
        state = self.engine.state
        session = request.header(SESSION_HEADER) or DEFAULT_SESSION
        state.record(
            Entry(
                id=state.next_id(),
                started=request.time,
                finished=outcome.started,
                session=session[:MAX_SESSION_NAME],
                method=request.method,
                path=unquote(request.target.split("?", 1)[0]) or "/",
                status=None,
                endpoint="refused",
                error_code="MOCKSKILL_CONNECTION_STALE",
            )
        )

    def _record_refusal(self, refusal: Refusal, outcome: Outcome) -> None:
        state = self.engine.state
        session = next((v for k, v in refusal.headers if k.lower() == SESSION_HEADER.lower()), None)
        code = "MOCKSKILL_BODY_TOO_LARGE" if refusal.status == 413 else None
        path = unquote((refusal.target or "/").split("?", 1)[0]) or "/"
        state.record(
            Entry(
                id=state.next_id(),
                started=refusal.time,
                finished=outcome.last_byte_at or time.time(),
                session=(session or DEFAULT_SESSION)[:MAX_SESSION_NAME],
                method=refusal.method or "GET",
                path=path,
                status=outcome.answer.status if outcome.answer is not None else None,
                endpoint="refused",
                error_code=code or f"MOCKSKILL_HTTP_{refusal.status}",
                client_left=outcome.client_left_at,
            )
        )

    def close(self) -> None:
        self.admin.close()


class _Flight:
    """A request whose plan awaits the store: how its exchange ended, if it did first."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended: Outcome | None = None


def _failed(req: Incoming, exc: Exception) -> Plan:
    """500 ``MOCKSKILL_INTERNAL_ERROR``: the engine failed to plan *req* (logged)."""
    log.exception("mockskill failed while answering %s %s", req.method, req.path)
    message = f"mockskill failed while answering: {type(exc).__name__}: {exc}"
    return Plan(answer_of(_error_response(500, "MOCKSKILL_INTERNAL_ERROR", message)))


def _incoming(request: TransportRequest) -> Incoming:
    """The engine's view of a transport request; its Werkzeug request made only if asked."""
    target = request.target
    if (
        target[:1] == "/"
        and target[1:2] != "/"
        and "?" not in target
        and "%" not in target
        and target.isascii()
    ):
        path = target  # decoded_path's own fast case, here: most targets are such paths
    else:
        if not target.startswith("/"):  # absolute form (a proxy's), or "*": as in the environ
            parts = urlsplit(target)
            target = parts.path or "/"
        path = decoded_path(target)
    return viewed(
        request.method,
        path,
        # From the bytes as read: the transport's decoded headers are not made for this.
        headers_of_raw(request.raw_headers),
        request.body,
        request.local,
        request.time,
        _werkzeug_of,
        request,
    )


def _werkzeug_of(request: TransportRequest) -> Request:
    return Request(wsgi_environ(request))


def _with_cors_plan(plan: Plan) -> Plan:
    extra = (("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "*"))

    def cors(answer: Answer) -> Answer:
        kept = tuple(h for h in answer.headers if h[0].lower() != "access-control-allow-origin")
        return dataclasses.replace(answer, headers=kept + extra)

    return dataclasses.replace(plan, answer=cors(plan.answer))
