"""``create_app``: the Flask application around an engine.

Flask owns ``/__admin`` (the admin blueprint); every other request goes
straight to the :class:`~mockskill.engine.Engine`, through a small WSGI
dispatcher in front of Flask's own. Not through a Flask catch-all route:
Flask re-types every response a view returns (``force_type``), which would
strip the answers that act on the raw connection (transport faults, a
client that left), and its routing would only repeat the engine's.

There is no module-level app: each server (and each test) builds its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from flask import Flask, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from . import admin
from .catalog import tool_error
from .engine import Engine
from .model import ScenarioSet
from .state import State

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ADMIN_PREFIX = "/__admin"
log = logging.getLogger("mockskill")


class SkillSurface:
    """WSGI: ``/__admin`` to Flask, everything else to the engine."""

    def __init__(self, engine: Engine, admin_app: WSGIApplication) -> None:
        self.engine = engine
        self.admin_app = admin_app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
            return self.admin_app(environ, start_response)
        req = Request(environ)
        try:
            response = self.engine.handle(req)
        except Exception as exc:
            log.exception("mockskill failed while answering %s %s", req.method, req.path)
            message = f"mockskill failed while answering: {type(exc).__name__}: {exc}"
            response = _error_response(500, "MOCKSKILL_INTERNAL_ERROR", message)
        return response(environ, start_response)


def create_app(engine: Engine | None = None) -> Flask:
    """A Flask app serving *engine* (by default: no scenarios, a fresh state).

    An engine made here is opened here; one passed in is opened by its owner
    (:class:`~mockskill.server.Server` does, when it binds its port).
    """
    if engine is None:
        engine = Engine(ScenarioSet(), State())
        engine.open()
    app = Flask("mockskill")
    app.extensions["mockskill"] = engine
    app.register_blueprint(admin.blueprint(engine), url_prefix=ADMIN_PREFIX)
    app.wsgi_app = SkillSurface(engine, app.wsgi_app)  # type: ignore[method-assign]

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


def _error_response(status: int, code: str, message: str) -> Response:
    rendered = tool_error(status, code, message, {})
    return Response(rendered.body, status=status, content_type="application/json")
