"""The ``/__admin`` blueprint: mockskill's own control surface.

For now: health, and reset (all state, or one session's). Its answers are
JSON; its errors use the unified shape.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from . import __version__
from .engine import Engine


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

    return bp
