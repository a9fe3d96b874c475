"""The ``/__admin`` blueprint: mockskill's own control surface.

For now: health. Its answers are JSON; its errors use the unified shape.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint

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

    return bp
