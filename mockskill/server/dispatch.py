"""``LoopDispatcher``: what the event-loop transport asks of mockskill, request by request.

The loop's side of :mod:`mockskill.wsgi.app` (the WSGI side): skill requests are
planned by the engine, ``/__admin`` goes to the Flask app in a thread pool,
and mockskill's own refusals (a body over the limit, a framing error, a CORS
preflight, an internal failure) are answers made here. Nothing here imports
Werkzeug or Flask: serving skills on the loop needs neither (issue 13,
start-up), and the admin app is built, with both, on its first request.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..admin.browsers import (
    ADMIN_PREFIX,
    allowed_origin,
    cors_headers,
    cors_origins,
    preflight,
)
from ..engine.builtin_answers import DEFAULT_MAX_BODY, error_answer, too_large
from ..engine.engine import SESSION_HEADER, Engine, journalled
from ..engine.incoming import Incoming, decoded_path, headers_of_raw, viewed
from ..engine.plan import Answer, Outcome, Plan
from ..engine.state import DEFAULT_SESSION, MAX_SESSION_NAME, Entry
from ..transport import Refusal, WSGIHandler
from ..transport import Request as TransportRequest
from ..transport.wsgi import environ as wsgi_environ

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

    from werkzeug.wrappers import Request

log = logging.getLogger("mockskill")


_REFUSED = {501: "not implemented", 505: "HTTP version not supported"}
"""What a refusal's message begins with, by its status; "bad request" for the others."""


class LoopDispatcher:
    """The event-loop transport's handler: what :class:`WSGIDispatcher` does, planned.

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
        cors: bool | Iterable[str] = False,
        workers: int = 4,
    ) -> None:
        # *admin_app* is the Flask app's wsgi_app, or (mockskill.Server) a callable
        # that builds the app on its first call, in the pool: start-up skips Flask.
        self.engine = engine
        self._remote = engine.state.remote
        """Whether plans await the store (:meth:`_plan_remote`): the store is the engine's
        for good, so read once."""
        self.cors = cors_origins(cors)
        # (the engine's secure ports: an /__admin page read over TLS is https's origin)
        self.admin = WSGIHandler(admin_app, workers=workers, secure_ports=engine.secure_ports)
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
            allowed = allowed_origin(self.cors, request.header("Origin"))
            if allowed is not None:  # (an origin not named: a route may script OPTIONS)
                return Plan(preflight(allowed))
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
        return self._with_cors(planned, request.header("Origin")) if self.cors else planned

    async def _plan_remote(self, request: TransportRequest, req: Incoming, flight: _Flight) -> Plan:
        """:meth:`plan` on a remote store: its answers awaited on the loop.

        The exchange may end before the plan comes (a stop): :meth:`played`
        then leaves its outcome in *flight*, and the request is journalled
        with it here (its sequence step was taken). A plan never awaited
        takes nothing and leaves nothing behind (played let go of *flight*).
        """
        try:
            planned, record = await self.engine.plan_async(req, flight.going)
        except Exception as exc:
            return _failed(req, exc)
        finally:
            if self._planning.get(id(request)) is flight:
                del self._planning[id(request)]
        if flight.ended is not None:
            record(flight.ended)
        else:
            self._pending[id(request)] = record
        return self._with_cors(planned, request.header("Origin")) if self.cors else planned

    def refuse(self, refusal: Refusal) -> Plan:
        if refusal.status == 413:
            answer = too_large(self.max_body_bytes)
        else:
            code = f"MOCKSKILL_HTTP_{refusal.status}"
            what = _REFUSED.get(refusal.status, "bad request")
            answer = error_answer(refusal.status, code, f"{what}: {refusal.reason}")
        plan = Plan(answer)
        if not self.cors:
            return plan
        origin = next((v for k, v in refusal.headers if k.lower() == "origin"), None)
        return self._with_cors(plan, origin)

    def _with_cors(self, plan: Plan, origin: str | None) -> Plan:
        allowed = allowed_origin(self.cors, origin)
        return plan if allowed is None else _with_cors_plan(plan, cors_headers(allowed))

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
                **self.engine.sent_before_refusal(request.target, request.headers),
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
                **self.engine.sent_before_refusal(refusal.target, refusal.headers),
            )
        )

    def close(self) -> None:
        self.admin.close()


class _Flight:
    """A request whose plan awaits the store: how its exchange ended, if it did first."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended: Outcome | None = None

    def going(self) -> bool:
        """Whether the exchange is still on."""
        return self.ended is None


def _failed(req: Incoming, exc: Exception) -> Plan:
    """500 ``MOCKSKILL_INTERNAL_ERROR``: the engine failed to plan *req* (logged)."""
    log.exception("mockskill failed while answering %s %s", req.method, req.path)
    message = f"mockskill failed while answering: {type(exc).__name__}: {exc}"
    return Plan(error_answer(500, "MOCKSKILL_INTERNAL_ERROR", message))


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
        request.target,
        request.raw_headers,
        request.head_bytes,
        request.peer,
    )


def _werkzeug_of(request: TransportRequest) -> Request:
    """The Werkzeug request of *request*: for the few things that read one (the OAuth2
    endpoints' forms, query conditions), imported then, not at start-up."""
    from werkzeug.wrappers import Request

    return Request(wsgi_environ(request))


def _with_cors_plan(plan: Plan, extra: tuple[tuple[str, str], ...]) -> Plan:
    def cors(answer: Answer) -> Answer:
        kept = tuple(h for h in answer.headers if h[0].lower() != "access-control-allow-origin")
        return dataclasses.replace(answer, headers=kept + extra)

    return dataclasses.replace(plan, answer=cors(plan.answer))
