"""The ``/__admin`` blueprint: mockskill's own control surface.

For now: health, reset (all state, or one session's), the reference
descriptor validator and the corpus of invalid descriptors (``/corpus``).
Its answers are JSON; its errors use the unified shape.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from flask import Blueprint, Response, current_app, request, url_for

from . import __version__
from .catalog import render, unified_body
from .engine import Engine
from .validator import validate as validate_descriptor
from .validator import validation_error
from .watch import HEALTH_KEY, ReloadResult


def blueprint(engine: Engine) -> Blueprint:
    bp = Blueprint("admin", __name__)

    @bp.get("/health")
    def health() -> dict[str, Any]:
        """What is served; with ``reload`` (docs/reload.md) once the server watches or reloads.

        ``status`` is about serving, so it stays ``ok`` when a reload failed:
        the last good scenarios are still served. ``reload.status`` says
        ``failed`` and ``reload.problems`` lists what is wrong.
        """
        scenarios = engine.scenarios
        body: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "seed": engine.state.seed,
            "scenarios": [s.name for s in scenarios.scenarios],
            "skills": len(scenarios.skills),
        }
        reload = current_app.extensions.get(HEALTH_KEY)
        if isinstance(reload, ReloadResult):
            body["reload"] = reload.as_json()
        return body

    @bp.post("/reset")
    def reset() -> dict[str, Any]:
        """Forget sequence positions, journal and random draws; ``?session=NAME``: one session's."""
        session = request.args.get("session")
        engine.state.reset(session)
        return {"reset": "session" if session else "all", "session": session}

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

    # -- the corpus of invalid descriptors (mockskill/corpus.py, docs/corpus.md) ----------

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
        from . import corpus  # built on first use: not every start-up should pay for it

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
        from . import corpus

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
        from . import corpus

        case = corpus.get(name)
        return corpus_miss(name) if case is None else json_response(case.descriptor)

    @bp.get("/corpus/<name>/violations")
    def corpus_violations(name: str) -> Response:
        """``{"violations": [...]}``: what a correct validator reports (empty when valid)."""
        from . import corpus

        case = corpus.get(name)
        if case is None:
            return corpus_miss(name)
        return json_response({"violations": list(case.violations)})

    return bp
