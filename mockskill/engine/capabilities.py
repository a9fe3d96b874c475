"""Whether this server can play a scenario set: transport faults need the raw socket, a
stream of events mockskill's own transport."""

from __future__ import annotations

from ..scenario.model import Route, ScenarioSet, Skill, Step
from ..scenario.problems import Problem, ScenarioError
from ..scenario.source import Position


def check_playable(scenarios: ScenarioSet, *, raw_socket: bool, tls: bool = False) -> None:
    """Raise ScenarioError if this server cannot play *scenarios*: transport faults and
    streams of events need *raw_socket* (mockskill's own transport: a WSGI server answers a
    request with one body), TLS faults a server that holds their ports (*tls*)."""
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
            for step in sequence.steps:
                if step.needs_socket:
                    problems.append(_socket_problem(step))
                elif step.streams:
                    problems.append(_stream_problem(step))
    for scenario in scenarios.scenarios:
        if scenario.outage and scenario.outage.step.needs_socket:
            problems.append(_socket_problem(scenario.outage.step))
    if problems:
        raise ScenarioError(problems)


def _tls_problem(skill: Skill) -> Problem:
    found = f"the TLS fault {skill.tls}, which needs a port of its own"
    return _needs_server(skill.where, "tls", "a skill this server can serve", found, "has one port")


def _socket_problem(step: Step) -> Problem:
    found = "a transport fault, which needs the raw socket of Werkzeug's server"
    return _needs_server(
        step.where, "fault", "a step this server can play", found, "hides the socket"
    )


def _stream_problem(step: Step) -> Problem:
    found = "a stream of events, which mockskill's own transport plays"
    return _needs_server(
        step.where, "stream", "a step this server can play", found, "answers with one body"
    )


def _needs_server(where: Position, path: str, expected: str, found: str, lacks: str) -> Problem:
    """The problem at *where* of what a WSGI server that *lacks* it cannot play, and
    mockskill's own server can."""
    hint = f"serve with `mockskill serve` or mockskill.Server; this WSGI server {lacks}"
    return Problem(where.file, where.line, where.column, path, expected, found, hint)
