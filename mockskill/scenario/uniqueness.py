"""What each scenario takes in a served set, and the clashes between them.

A :class:`Claim` is a scenario's name, skill ids and routes (method and
path), each with where it is written; :func:`clashes` finds any of them used
twice across the claims of a set. The loader checks one load's scenarios this
way, and the registry the scenarios it is given against those it serves.
Claims are read even from a scenario with problems, so that a clash and a
misspelt key are reported in the same run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .model import Scenario
from .problems import Problem
from .source import Position


@dataclass(frozen=True)
class Claim:
    """What one scenario takes in a served set, and where each part is written.

    Read from a scenario even when it has problems (every name, id and route
    that is right on its own), so that a clash is reported in the same run as
    a misspelt key, not after it is fixed.
    """

    name: str | None
    where: Position
    skills: tuple[tuple[int, str, Position], ...] = ()
    """(index in skills, id, where the skill is)."""
    routes: tuple[tuple[int, tuple[str, ...], str, Position], ...] = ()
    """(index in routes, methods, path, where the route is)."""

    @classmethod
    def of(cls, scenario: Scenario) -> Claim:
        return cls(
            scenario.name,
            scenario.where,
            tuple((i, k.id, k.where) for i, k in enumerate(scenario.skills)),
            tuple((i, r.methods, r.path, r.where) for i, r in enumerate(scenario.routes)),
        )


def clashes(claims: Iterable[Claim]) -> list[Problem]:
    """Scenario names, skill ids and route (method, path) pairs used twice across *claims*."""
    problems: list[Problem] = []
    seen_names: dict[str, Position] = {}
    seen_skills: dict[str, Position] = {}
    seen_routes: dict[tuple[str, str], Position] = {}
    for claim in claims:
        if claim.name is not None:
            _unique(problems, seen_names, claim.name, claim.where, "name", "scenario name")
        for i, skill_id, where in claim.skills:
            _unique(problems, seen_skills, skill_id, where, f"skills[{i}].id", "skill id")
        for i, methods, route_path, where in claim.routes:
            for method in methods:
                _unique(
                    problems,
                    seen_routes,
                    (method, route_path),
                    where,
                    f"routes[{i}].path",
                    "method and path",
                )
    return problems


def _unique(
    problems: list[Problem],
    seen: dict[Any, Position],
    key: Any,
    where: Position,
    path: str,
    what: str,
) -> None:
    first = seen.setdefault(key, where)
    if first is not where:
        shown = " ".join(key) if isinstance(key, tuple) else key
        problems.append(
            Problem(
                where.file,
                where.line,
                where.column,
                path,
                f"a {what} used once",
                f"{shown!r} again (first at {first})",
            )
        )
