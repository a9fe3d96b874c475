"""The ``/__admin`` blueprint: mockskill's own control surface.

Health, reset (all state, or one session's), the request journal
(``/journal``, filtered by :mod:`mockskill.admin.journal_query`) and the requests
nothing matched (``/unmatched``), the reference descriptor validator, the
corpus of invalid descriptors (``/corpus``) and the OpenAPI document
describing all of it (``/openapi.json``, kept true by tests/admin/test_openapi.py).
It gathers the routes other modules own: the loaded scenarios
(:mod:`mockskill.admin.scenario_routes`), verification of what consumers sent
(:mod:`mockskill.admin.verify_routes`), the recording
(:mod:`mockskill.admin.recording_routes`), the retry audit (:mod:`mockskill.admin.report_routes`),
one session's verdict (:mod:`mockskill.admin.verdict_routes`) and the dashboard
(:mod:`mockskill.admin.dashboard`). Its answers are JSON; its errors use the unified
shape, but the verdict's, which are RFC 9457 problems (docs/admin.md).
"""

from __future__ import annotations

import difflib
import functools
import json
from importlib import resources
from typing import Any

from flask import Blueprint, Response, request, url_for

from .._version import __version__
from ..control.registry import Registry
from ..engine.store import Health
from ..protocol.catalog import render, unified_body
from ..protocol.validator import validate as validate_descriptor
from ..protocol.validator import validation_error
from . import dashboard, recording_routes, scenario_routes, tls_routes, verify_routes
from .journal_query import JOURNAL_FILTERS, UNMATCHED_FILTERS, BadFilter, select
from .scenario_routes import UnusableRequest

RESET_PARAMETERS = ("session", "all")
"""What ``POST /__admin/reset`` takes, in the query or as a JSON object's keys."""


def state_view(health: Health, replica: str | None) -> dict[str, Any]:
    """``/__admin/health``'s ``state``: which store, and how it is (a shared one's)."""
    if health.backend == "memory":
        return {"backend": "memory"}
    scheme = health.backend.partition("://")[0]
    view: dict[str, Any] = {
        "backend": "redis" if scheme in ("redis", "rediss") else scheme,
        "url": health.backend,
        "replica": replica,
        "status": health.status,
        "lost_entries": health.lost_entries,
    }
    if health.reason is not None:
        view["reason"] = health.reason
    return view


def blueprint(registry: Registry) -> Blueprint:
    bp = Blueprint("admin", __name__)
    engine = registry.engine

    @bp.get("/health")
    def health() -> dict[str, Any]:
        """What is served; with ``reload`` (docs/reload.md) once the server watches or reloads.

        ``status`` is about serving, so it stays ``ok`` when a reload failed:
        the last good scenarios are still served. ``reload.status`` says
        ``failed`` and ``reload.problems`` lists what is wrong. It says
        ``degraded`` while a shared state store cannot be reached: ``state``
        names the store and, then, why (``state.reason``).
        """
        scenarios = engine.scenarios
        store = engine.state
        health = store.health()
        body: dict[str, Any] = {
            "status": health.status,
            "version": __version__,
            "seed": store.seed,
            "scenarios": [s.name for s in scenarios.scenarios],
            "skills": len(scenarios.skills),
            "state": state_view(health, store.replica),
        }
        reload = registry.last_reload
        if reload is not None:
            body["reload"] = reload.as_json()
        if registry.shared is not None:  # docs/admin.md, "One set for every replica"
            body["scenario_set"] = {"version": registry.version}
        return body

    @bp.post("/reset")
    def reset() -> tuple[dict[str, Any], int]:
        """Forget positions, journal and draws: ``?session=NAME``'s, or ``?all=true`` everything."""
        try:
            session = reset_target()
        except BadFilter as exc:
            return exc.body(), 400
        except UnusableRequest as exc:
            return exc.body(), exc.status
        registry.reset(session)  # and, sharing a scenario set, every replica's
        return {"reset": "all" if session is None else "session", "session": session}, 200

    @bp.get("/journal")
    def journal() -> tuple[dict[str, Any], int]:
        """Recorded requests, oldest first, filtered by the query (docs/admin.md)."""
        entries = engine.state.journal()
        size = len(entries)
        try:
            selected = select(entries, request.args, JOURNAL_FILTERS)
        except BadFilter as exc:
            return exc.body(), 400
        return {
            "entries": [e.as_json() for e in selected],
            "size": size,
            "capacity": engine.state.capacity,
        }, 200

    @bp.get("/unmatched")
    def unmatched() -> tuple[dict[str, Any], int]:
        """The requests nothing served, oldest first, each with its near misses."""
        entries = [e for e in engine.state.journal() if e.endpoint == "unmatched"]
        try:
            selected = select(entries, request.args, UNMATCHED_FILTERS)
        except BadFilter as exc:
            return exc.body(), 400
        return {"requests": [e.as_json() for e in selected]}, 200

    @bp.post("/validate")
    def validate() -> tuple[dict[str, Any], int]:
        """The reference validator over HTTP: a descriptor in, every violation out."""
        document = request.get_json(silent=True)
        if document is None and request.get_data().strip() != b"null":
            body = unified_body(
                "MOCKSKILL_BAD_REQUEST",
                "POST /__admin/validate takes a Skill Descriptor as a JSON body",
                {"content_type": request.content_type},
            )
            return body, 400
        violations = validate_descriptor(document)
        if violations:
            return validation_error(violations), 422
        return {"valid": True}, 200

    # -- the corpus of invalid descriptors (mockskill/protocol/corpus.py, docs/corpus.md) ----------

    def corpus_urls(name: str) -> tuple[str, str]:
        return (
            url_for("admin.corpus_descriptor", name=name, _external=True),
            url_for("admin.corpus_violations", name=name, _external=True),
        )

    def json_response(document: Any, status: int = 200) -> Response:
        # Any JSON value (null, an array, a string ...), exactly as the case holds it.
        return Response(json.dumps(document), status=status, mimetype="application/json")

    def corpus_miss(name: str) -> Response:
        """SKILL_NOT_FOUND: the descriptor URL asked for does not exist."""
        from ..protocol import corpus  # built on first use: not every start-up should pay for it

        rendered = render(
            "SKILL_NOT_FOUND",
            message=f"No corpus case {name!r}",
            details={
                "url": request.url,
                "did_you_mean": difflib.get_close_matches(name, corpus.NAMES, n=3, cutoff=0.6),
            },
        )
        return Response(
            rendered.body,
            status=rendered.status,
            headers=list(rendered.headers),
            mimetype="application/json",
        )

    @bp.get("/corpus")
    def corpus_listing() -> dict[str, Any]:
        """Every case of the corpus, with the absolute URLs of its descriptor and violations."""
        from ..protocol import corpus

        cases = []
        for case in corpus.CASES:
            descriptor_url, violations_url = corpus_urls(case.name)
            cases.append(
                {
                    "name": case.name,
                    "description": case.description,
                    "descriptor_url": descriptor_url,
                    "violations_url": violations_url,
                    "valid": case.valid,
                }
            )
        return {"cases": cases}

    @bp.get("/corpus/<name>")
    def corpus_descriptor(name: str) -> Response:
        """The case's descriptor, exactly (any JSON value)."""
        from ..protocol import corpus

        case = corpus.get(name)
        return corpus_miss(name) if case is None else json_response(case.descriptor)

    @bp.get("/corpus/<name>/violations")
    def corpus_violations(name: str) -> Response:
        """``{"violations": [...]}``: what a correct validator reports (empty when valid)."""
        from ..protocol import corpus

        case = corpus.get(name)
        if case is None:
            return corpus_miss(name)
        return json_response({"violations": list(case.violations)})

    scenario_routes.register(bp, registry)  # /__admin/scenarios
    recording_routes.register(bp, registry)  # /__admin/recordings
    tls_routes.register(bp, engine)  # /__admin/tls
    verify_routes.register(bp, engine)  # /__admin/verify, /__admin/requests
    openapi_route(bp)
    dashboard.register(bp)  # the page at /__admin/ (mockskill/admin/dashboard.py)

    @bp.get("/report")
    def report() -> tuple[dict[str, Any], int]:
        """The retry audit and category coverage of every session, or of ``session=`` ones."""
        # Imported on first use, not at start-up: serving skills never needs the audit.
        from .report_routes import answer

        return answer(engine)

    @bp.get("/verdict")
    def verdict() -> Response:
        """One session's pass (200) or fail (409, a problem listing why) (docs/admin.md)."""
        from . import verdict_routes  # on first use, as the report

        return verdict_routes.answer(engine)

    return bp


# -- what POST /__admin/reset resets ---------------------------------------------------------


def reset_target() -> str | None:
    """The session the reset being served names, or None for ``all``: asked for explicitly.

    A mistyped parameter (``?sesion=``), an empty name (an unset variable)
    or a body that is not read would otherwise reset every session: on a
    shared server, every other suite's. So each is a 400, and everything
    takes ``?all=true`` (or ``{"all": true}``).
    """
    query, body = _reset_query(), _reset_body()
    if query and body:
        raise BadFilter(
            "(body)", "say what to reset in the query or in the body, not in both", "one of them"
        )
    asked = query or body
    if "session" in asked and "all" in asked:
        raise BadFilter(
            "all", "give either session (one session's) or all=true (everything), not both", "one"
        )
    if "session" in asked:
        session = asked["session"]
        if not isinstance(session, str) or not session.strip():
            raise BadFilter(
                "session",
                f"session={session!r} names no session (an unset variable?); give a session's"
                " name, or all=true to reset everything",
                "a non-empty string",
            )
        return session
    if asked.get("all") is True:
        return None
    if "all" in asked:
        raise BadFilter(
            "all", f"all={asked['all']!r} resets nothing: give all=true, or session=NAME", "true"
        )
    raise BadFilter(
        "session",
        "say what to reset: ?session=NAME for one session's positions, journal and draws,"
        " or ?all=true for everything (every session's, on a shared server every suite's)",
        list(RESET_PARAMETERS),
    )


def _unknown(name: str, where: str) -> BadFilter:
    hint = difflib.get_close_matches(name.lower(), RESET_PARAMETERS, n=1)
    message = f"{name!r} is not a {where} of the reset; it takes session=NAME or all=true"
    if hint:
        message += f" (did you mean {hint[0]!r}?)"
    return BadFilter(name, message, list(RESET_PARAMETERS))


def _reset_query() -> dict[str, Any]:
    asked: dict[str, Any] = {}
    for name in request.args:
        if name not in RESET_PARAMETERS:
            raise _unknown(name, "parameter")
        values = request.args.getlist(name)
        if len(values) > 1:
            raise BadFilter(name, f"{name} is given {len(values)} times; give it once", "once")
        # all=true is the one value of all that resets (any other is refused below)
        asked[name] = True if name == "all" and values[0] == "true" else values[0]
    return asked


def _reset_body() -> dict[str, Any]:
    """A JSON object's ``session`` or ``all``: a body is read, or refused, never ignored."""
    raw = request.get_data()
    if not raw.strip():
        return {}
    if not request.is_json:
        raise UnusableRequest(
            415,
            "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE",
            'POST /__admin/reset reads a JSON object ({"session": NAME} or {"all": true})'
            f" or no body, not {request.mimetype or 'a body without a Content-Type'}",
            {"content_type": request.content_type, "expected": ["application/json"]},
        )
    document = request.get_json(silent=True)
    if not isinstance(document, dict):
        raise BadFilter(
            "(body)",
            'POST /__admin/reset reads a JSON object: {"session": NAME} or {"all": true}',
            "a JSON object",
        )
    for name in document:
        if name not in RESET_PARAMETERS:
            raise _unknown(name, "key")
    return dict(document)


# -- the OpenAPI document (mockskill/admin/openapi.json) ------------------------------------


@functools.cache
def _openapi() -> bytes:
    return resources.files("mockskill.admin").joinpath("openapi.json").read_bytes()


def openapi_route(bp: Blueprint) -> None:
    """Add ``/openapi.json`` to *bp*: the document describing every ``/__admin`` operation."""

    @bp.get("/openapi.json")
    def openapi() -> Response:
        return Response(_openapi(), mimetype="application/json")
