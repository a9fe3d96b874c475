"""The ``/__admin`` blueprint: mockskill's own control surface.

For now: health, reset (all state, or one session's) and the reference
descriptor validator. Its answers are JSON; its errors use the unified shape.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from . import __version__
from .catalog import unified_body
from .engine import Engine
from .validator import validate as validate_descriptor
from .validator import validation_error


def blueprint(engine: Engine) -> Blueprint:
    bp = Blueprint("admin", __name__)

    @bp.get("/health")
    def health() -> dict[str, Any]:
        scenarios = engine.scenarios
        return {
            "status": "ok",
            "version": __version__,
            "seed": engine.state.seed,
            "scenarios": [s.name for s in scenarios.scenarios],
            "skills": len(scenarios.skills),
        }

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

    return bp
