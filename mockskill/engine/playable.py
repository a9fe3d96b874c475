"""Whether this server can play a scenario set: transport faults need the raw socket."""

from __future__ import annotations

from ..scenario.model import Route, ScenarioSet, Skill, Step
from ..scenario.problems import Problem, ScenarioError


def check_playable(scenarios: ScenarioSet, *, raw_socket: bool, tls: bool = False) -> None:
    """Raise ScenarioError if this server cannot play *scenarios*: transport faults need
    *raw_socket*, TLS faults a server that holds their ports (*tls*)."""
    problems: list[Problem] = []
    if not tls:
        problems.extend(_tls_problem(skill) for skill in scenarios.skills if skill.tls)
    if raw_socket:
        if problems:
            raise ScenarioError(problems)
        return
    owners: list[Skill | Route] = [*scenarios.skills, *scenarios.routes]
    for owner in owners:
        for sequence in owner.sequences:
            problems.extend(_socket_problem(s) for s in sequence.steps if s.needs_socket)
    for scenario in scenarios.scenarios:
        if scenario.outage and scenario.outage.step.needs_socket:
            problems.append(_socket_problem(scenario.outage.step))
    if problems:
        raise ScenarioError(problems)


def _tls_problem(skill: Skill) -> Problem:
    where = skill.where
    return Problem(
        where.file,
        where.line,
        where.column,
        "tls",
        "a skill this server can serve",
        f"the TLS fault {skill.tls}, which needs a port of its own",
        "serve with `mockskill serve` or mockskill.Server; this WSGI server has one port",
    )


def _socket_problem(step: Step) -> Problem:
    where = step.where
    return Problem(
        where.file,
        where.line,
        where.column,
        "fault",
        "a step this server can play",
        "a transport fault, which needs the raw socket of Werkzeug's server",
        "serve with `mockskill serve` or mockskill.Server; this WSGI server hides the socket",
    )
