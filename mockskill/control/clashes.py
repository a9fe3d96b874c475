"""What a change to the loaded scenarios may not do: load a name twice, serve an id or route twice.

Every change the registry (:mod:`.registry`) plans (:mod:`.changes`) is
checked with these before it is applied; a clash is a :class:`Conflict`
naming it, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..scenario.loader import InvalidScenarios
from ..scenario.model import Scenario, ScenarioSet
from ..scenario.problems import Problem, ScenarioError
from ..scenario.source import Position
from ..scenario.uniqueness import Claim
from .loaded import LoadedScenario


class Conflict(ScenarioError):
    """A change that would load a name twice, or serve a skill id or route twice.

    Its problems point at the scenario that was refused; :attr:`reasons`
    says each clash in a short sentence. Nothing was changed.
    """

    def __init__(self, problems: Sequence[Problem], reasons: Sequence[str]) -> None:
        super().__init__(problems)
        self.reasons = tuple(reasons)


E = TypeVar("E", bound=ScenarioError)


def with_clashes(
    exc: E, current: Sequence[LoadedScenario], *, active: bool, replace: bool
) -> E | InvalidScenarios:
    """*exc* (scenarios that failed to load), with their clashes with *current* too.

    What the broken scenarios claim (names, skill ids, routes) is checked
    against *current* as a change that loads them (*active*, or not; with
    *replace*, or not) would check it, so that one answer has every problem.
    """
    claims = exc.claims if isinstance(exc, InvalidScenarios) else ()
    if not claims:
        return exc
    names = {e.name: e for e in current}
    problems: list[Problem] = []
    reasons: list[str] = []
    for claim in claims:
        old = names.get(claim.name) if claim.name is not None else None
        if old is not None and not replace:
            name_clash(claim.name, claim.where, old, problems, reasons)
    if active:  # against every active one but those it would replace
        replaced = {claim.name for claim in claims} if replace else set()
        served = [e.scenario for e in current if e.active and e.name not in replaced]
        problems += served_clashes(claims, served, among_incoming=False)[0]
    return InvalidScenarios([*exc.problems, *problems], claims)


def name_clash(
    name: str | None,
    where: Position,
    old: LoadedScenario | None,
    problems: list[Problem],
    reasons: list[str],
) -> None:
    if old is None:  # twice in what was given
        found, reason = f"{name!r} again", f"scenario {name!r} is given twice"
    else:
        found = f"{name!r}, loaded already (from {old.origin})"
        reason = f"a scenario named {name!r} is loaded already (from {old.origin})"
    problems.append(
        Problem(
            where.file,
            where.line,
            where.column,
            "name",
            "a scenario name not loaded yet",
            found,
            "replace it, or remove it first",
        )
    )
    reasons.append(reason)


def check_names_free(files: ScenarioSet, added: Sequence[LoadedScenario]) -> None:
    """Raise :class:`Conflict` if the files name a scenario loaded at run time."""
    names = {e.name: e for e in added}
    problems: list[Problem] = []
    reasons: list[str] = []
    for scenario in files.scenarios:
        old = names.get(scenario.name)
        if old is not None:
            name_clash(scenario.name, scenario.where, old, problems, reasons)
    if problems:
        raise Conflict(problems, reasons)


def check_served_once(incoming: Sequence[Scenario], served: Sequence[Scenario]) -> None:
    """Raise :class:`Conflict` if *incoming* would serve a skill id or route *served* serve."""
    problems, reasons = served_clashes([Claim.of(s) for s in incoming], served)
    if problems:
        raise Conflict(problems, reasons)


def served_clashes(
    incoming: Sequence[Claim], served: Sequence[Scenario], *, among_incoming: bool = True
) -> tuple[list[Problem], list[str]]:
    """The skill ids and routes *incoming* claim that *served* serve (or, unless
    not *among_incoming*, that two of *incoming* claim: the loader reports those)."""
    skills: dict[str, Scenario | Claim] = {k.id: s for s in served for k in s.skills}
    routes: dict[tuple[str, str], Scenario | Claim] = {
        (m, r.path): s for s in served for r in s.routes for m in r.methods
    }
    problems: list[Problem] = []
    reasons: list[str] = []

    def clash(owner: Scenario | Claim, what: str, shown: str, path: str, where: Position) -> None:
        if not among_incoming and not isinstance(owner, Scenario):
            return
        file = owner.file if isinstance(owner, Scenario) else owner.where.file
        problems.append(
            Problem(
                where.file,
                where.line,
                where.column,
                path,
                f"a {what} no other active scenario serves",
                f"{shown!r}, served by active scenario {owner.name!r} (from {file})",
                f"deactivate or remove {owner.name!r} first, or load this one inactive",
            )
        )
        reasons.append(f"{what} {shown!r} is served by active scenario {owner.name!r}")

    for claim in incoming:
        for i, skill_id, where in claim.skills:
            owner = skills.setdefault(skill_id, claim)
            if owner is not claim:
                clash(owner, "skill id", skill_id, f"skills[{i}].id", where)
        for i, methods, route_path, where in claim.routes:
            for method in methods:
                owner = routes.setdefault((method, route_path), claim)
                if owner is not claim:
                    clash(owner, "route", f"{method} {route_path}", f"routes[{i}].path", where)
    return problems, reasons
