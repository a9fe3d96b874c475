"""``create_app``: the Flask application around an engine.

One catch-all route hands every request outside ``/__admin`` to the
:class:`~mockskill.engine.Engine`; the admin blueprint owns ``/__admin``.
There is no module-level app: each server (and each test) builds its own.
"""

from __future__ import annotations

import logging

from flask import Flask, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from . import admin
from .catalog import tool_error
from .engine import Engine
from .model import ScenarioSet
from .state import State

ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
log = logging.getLogger("mockskill")


def create_app(engine: Engine | None = None) -> Flask:
    """A Flask app serving *engine* (by default: no scenarios, a fresh state)."""
    engine = engine or Engine(ScenarioSet(), State())
    app = Flask("mockskill")
    # Skill ids and free routes are matched by the engine, not by Flask:
    # keep Flask from redirecting "//x" or "/x/" before the engine sees them.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    app.extensions["mockskill"] = engine
    app.register_blueprint(admin.blueprint(engine), url_prefix="/__admin")

    def surface(path: str = "") -> Response:
        return engine.handle(request._get_current_object())  # type: ignore[attr-defined]

    for rule in ("/", "/<path:path>"):
        app.add_url_rule(
            rule,
            endpoint="surface",
            view_func=surface,
            methods=ALL_METHODS,
            provide_automatic_options=False,
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


def _error_response(status: int, code: str, message: str) -> Response:
    rendered = tool_error(status, code, message, {})
    return Response(rendered.body, status=status, content_type="application/json")
