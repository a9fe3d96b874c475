"""One endpoint's recorded requests, and the steps a replay plays for them.

The writer (:mod:`.writer`) gathers the requests of each endpoint in an
:class:`Endpoint` — each one's shape (what a case may test), answer step,
measured latency, credential and session, in the order seen — and
:func:`played` makes them what the scenario file says for the endpoint:

- per session, as a replay keeps positions per session: sessions that saw
  the same answers share one sequence; sessions that saw different ones are
  cases that test ``Mockskill-Session`` too;
- requests that are alike play their answers as one sequence (``steps``);
  requests that differed are ``cases`` whose ``when:`` tells them apart
  (:mod:`.telling`), each with its own sequence; past :data:`MAX_CASES`
  different requests, one sequence in the order seen;
- a run of the same answer is one step with ``times``, the median of its
  latencies its ``delay``.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

from . import request_cases

SESSION_HEADER = "mockskill-session"
DEFAULT_SESSION = "default"
MAX_CASES = 64
"""Different requests an endpoint is told apart by (as cases); past it, one sequence."""


@dataclass
class Endpoint:
    """The requests of one endpoint, in order: each one's shape and answer step."""

    methods: tuple[str, ...]
    shapes: list[request_cases.Shape] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)
    credentials: list[tuple[str, str] | None] = field(default_factory=list)
    """The credential each request presented (invocations only)."""
    sessions: list[str] = field(default_factory=list)
    """The session of each request (``Mockskill-Session``; ``default`` without one)."""

    def only(self, keep: list[bool]) -> Endpoint:
        """The requests *keep* says, in order."""
        picked = [i for i, k in enumerate(keep) if k]
        return Endpoint(
            self.methods,
            [self.shapes[i] for i in picked],
            [self.steps[i] for i in picked],
            [self.delays[i] for i in picked],
            [self.credentials[i] for i in picked],
            [self.sessions[i] for i in picked],
        )

    def by_session(self) -> Endpoint:
        """The same requests, each shape also saying its session (a header test may tell
        sessions apart: the default one has no ``Mockskill-Session``)."""
        shapes = [
            shape
            if session == DEFAULT_SESSION
            else dataclasses.replace(
                shape, headers=tuple(sorted((*shape.headers, (SESSION_HEADER, session))))
            )
            for shape, session in zip(self.shapes, self.sessions, strict=True)
        ]
        return dataclasses.replace(self, shapes=shapes)


def played(
    endpoint: Endpoint, *, delays: bool, max_delay_ms: int, notes: dict[str, None]
) -> dict[str, Any]:
    """The endpoint's sequence (``steps``), or its ``cases``.

    A replay keeps positions per session, so each session's requests make the
    sequences: sessions that saw the same answers share them; sessions that saw
    different ones get cases that test ``Mockskill-Session`` too. *delays*
    False writes no ``delay``; what the file should say about it is added to
    *notes*.
    """
    sessions = list(dict.fromkeys(endpoint.sessions))
    if len(sessions) > 1:
        each = [
            played(
                endpoint.only([s == x for x in endpoint.sessions]),
                delays=delays,
                max_delay_ms=max_delay_ms,
                notes=notes,
            )
            for s in sessions
        ]
        if all(value == each[0] for value in each):
            return each[0]
        told = _told_apart(
            endpoint.by_session(), delays=delays, max_delay_ms=max_delay_ms, notes=notes
        )
        if "cases" in told and set(each[0]) == {"steps"}:
            told["steps"] = each[0]["steps"]  # another session: the first one's answers
        return told
    return _told_apart(endpoint, delays=delays, max_delay_ms=max_delay_ms, notes=notes)


def _told_apart(
    endpoint: Endpoint, *, delays: bool, max_delay_ms: int, notes: dict[str, None]
) -> dict[str, Any]:
    distinct = len(set(endpoint.shapes))
    if distinct > MAX_CASES:  # (every request different: an id in each, say)
        notes.setdefault(
            f"an endpoint had more than {MAX_CASES} different requests: its answers"
            " play in the order seen, whatever is asked"
        )
    # Requests answered alike (their echoes templates) need no case to tell them apart.
    alike = all(step == endpoint.steps[0] for step in endpoint.steps)
    if distinct == 1 or distinct > MAX_CASES or alike:
        return {"steps": _steps(endpoint.steps, endpoint.delays, delays, max_delay_ms)}
    listed, picked = request_cases.cases(endpoint.shapes)
    cases = []
    for index, tests in enumerate(listed):
        mine = [i for i, p in enumerate(picked) if p == index]
        if not mine:  # (a shape no condition tells apart: its requests went before)
            continue
        steps = _steps(
            [endpoint.steps[i] for i in mine],
            [endpoint.delays[i] for i in mine],
            delays,
            max_delay_ms,
        )
        cases.append({"when": request_cases.when(tests), "steps": steps})
    if len(cases) == 1:  # nothing told apart after all
        return {"steps": cases[0]["steps"]}
    return {"cases": cases}


def _steps(
    steps: list[dict[str, Any]],
    measured: list[float | None],
    delays: bool,
    max_delay_ms: int,
) -> list[dict[str, Any]]:
    """The answers in order, runs of the same one as one step with ``times`` (and the
    median of their latencies as its delay)."""
    runs: list[tuple[dict[str, Any], list[float]]] = []
    for step, latency in zip(steps, measured, strict=True):
        if runs and runs[-1][0] == step:
            runs[-1][1].append(latency or 0.0)
        else:
            runs.append((step, [latency or 0.0]))
    out = []
    for step, latencies in runs:
        written = dict(step)
        if len(latencies) > 1:
            written["times"] = len(latencies)
        delay = min(round(statistics.median(latencies)), max_delay_ms)
        if delays and delay > 0:
            written["delay"] = delay
        out.append(written)
    return out
