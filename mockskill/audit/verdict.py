"""The report, and reading it: the journal turned into a verdict.

:func:`report` audits every session (its chains, findings, coverage and
timeouts) in the shape ``GET /__admin/report`` serves and the dashboard and
``mockskill report`` read; :func:`assert_clean` and the helpers below it are
the gates over a report (findings spelt out, coverage gaps, sessions that
sent nothing).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from ..protocol.catalog import CODES
from .callbacks import is_delivery
from .cases import (
    CASE_ROWS,
    CASES_ROW,
    MISHANDLED,
    UNEXERCISED,
    NamedCases,
    case_coverage,
    gap_name,
)
from .correlation import correlation_lost
from .covered import FAULT_NAMES, RATE_LIMITED_ROW, TASK_ROWS, coverage, timeouts
from .executions import duplicate_executions
from .findings import Finding, attempt_json, audit_chain, plural, used_invalid
from .handshakes import http_entries, permanent_retried, tls_coverage
from .herds import retry_herds
from .pacing import rate_limit_ignored
from .policy import Policy
from .retries import chains, endpoint_of
from .streams import stream_findings
from .tasks import task_findings
from .timelines import stream_timelines, task_timelines


def session_report(
    name: str,
    entries: Sequence[Entry],
    policy: Policy = Policy(),
    now: float | None = None,
    named: NamedCases | None = None,
) -> dict[str, Any]:
    """The audit of one session's requests, at *now* (seconds since the epoch; None: the
    time it is: a task left unpolled is judged by how long it has been); *named*: the
    served scenarios' named cases, whose coverage it gives too (:mod:`.cases`)."""
    chain_list = []
    findings: list[Finding] = permanent_retried(name, entries)
    handshakes = entries
    entries = http_entries(entries)  # a failed handshake is no request: no chain, no timeout
    # A callback delivery is mockskill's request to the consumer's receiver: no attempt of
    # a chain, no request of the consumer's; the task and callback rules read it.
    touched = entries
    entries = [e for e in entries if not is_delivery(e)]
    chained = []
    grouped = chains(entries)
    for chain in grouped:
        attempts, found = audit_chain(name, chain, policy)
        chained.append(attempts)
        findings.extend(found)
        findings.extend(duplicate_executions(name, chain))
        findings.extend(correlation_lost(name, chain))
        chain_list.append(
            {
                "endpoint": endpoint_of(chain[0]),
                "skill": chain[0].skill,
                "attempts": [attempt_json(attempts, i) for i in range(len(attempts))],
            }
        )
    findings.extend(used_invalid(name, entries))
    findings.extend(retry_herds(name, chained, policy))
    findings.extend(rate_limit_ignored(name, chained, policy))
    findings.extend(task_findings(name, touched, policy, time.time() if now is None else now))
    findings.extend(stream_findings(name, entries, grouped, policy))
    findings.sort(key=lambda f: f.attempts[0])
    listed = [f.as_json() for f in findings]
    cases = case_coverage(entries, named or {}, findings)
    covered = coverage(touched)
    covered["missing"]["cases"] = [gap_name(gap) for gap in cases["gaps"]]
    return {
        "session": name,
        "requests": len(entries),
        "handshakes_failed": len(handshakes) - len(entries),
        # A session that sent nothing proves nothing: never clean (a mistyped name, or no
        # Mockskill-Session header, must not pass a gate that reads "clean" over HTTP).
        "clean": bool(entries) and not findings,
        "coverage": {**covered, "tls_faults": tls_coverage(handshakes), "cases": cases},
        "chains": chain_list,
        "timeouts": timeouts(entries),
        "findings": listed,
        "tasks": task_timelines(touched, listed),
        "streams": stream_timelines(entries, listed),
    }


def report(
    entries: Iterable[Entry],
    policy: Policy = Policy(),
    *,
    sessions: Iterable[str] | None = None,
    now: float | None = None,
    named: NamedCases | None = None,
) -> dict[str, Any]:
    """The audit of every session in *entries* (or of *sessions*, even those with no request);
    *named*: the named cases of the scenarios served (:func:`.cases.named_cases`).

    Sessions come in the order of their first request in *entries*; named
    ones that sent nothing come last, with empty coverage.
    """
    grouped: dict[str, list[Entry]] = {}
    for entry in entries:
        grouped.setdefault(entry.session, []).append(entry)
    active = list(grouped)
    if sessions is not None:
        wanted = list(dict.fromkeys(sessions))
        grouped = {name: grouped.get(name, []) for name in [*grouped, *wanted] if name in wanted}
    generated = time.time() if now is None else now
    reports = [
        session_report(name, items, policy, generated, named) for name, items in grouped.items()
    ]
    for r in reports:
        if not r["requests"]:
            # A session that sent nothing is most often a mistyped name or a
            # consumer that does not send Mockskill-Session: name the sessions
            # that did send something, so the gate's failure says where to look.
            r["did_you_mean"] = _nearest_sessions(r["session"], active)
    return {
        "clean": bool(reports) and all(r["clean"] for r in reports),
        "generated": generated,
        "policy": policy.as_json(),
        "sessions": reports,
    }


def _nearest_sessions(name: str, active: list[str], n: int = 3) -> list[str]:
    """The sessions with requests closest to *name*; when none is close, the latest ones."""
    close = difflib.get_close_matches(name, active, n=n, cutoff=0.6)
    return close or active[::-1][:n]


def coverage_gaps(
    report: dict[str, Any], required: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Per session, the required categories and faults it has not met (sessions with gaps only).

    *required*: names of categories and faults, :data:`RATE_LIMITED_ROW` for a
    rate-limit answer, and the task rows (:data:`~.covered.TASK_ROWS`: ``TASK_FAILED``,
    ``TASK_FAILED:<CATEGORY>``, ``TASK_CANCELLED``, ``CALLBACK_FAULT``,
    ``CALLBACK_FAULT:<fault>``) (None: every category and fault; a rate limit, a task or a
    callback fault only when named).
    """
    known = (*CODES, *FAULT_NAMES, RATE_LIMITED_ROW, *TASK_ROWS, *CASE_ROWS)
    # (every named case is asked by default: a session served no pack has none to meet)
    wanted = set(CODES) | set(FAULT_NAMES) | {CASES_ROW} if required is None else set(required)
    unknown = wanted - set(known)
    if unknown:
        named = []
        for name in sorted(unknown):
            close = difflib.get_close_matches(name.upper().replace("-", "_"), known, n=1)
            named.append(f"{name} (did you mean {close[0]!r}?)" if close else name)
        raise ValueError(
            f"not a category or a transport fault: {', '.join(named)};"
            f" expected some of {', '.join(known)} ({RATE_LIMITED_ROW}: a rate-limit answer;"
            " TASK_FAILED, TASK_FAILED:<CATEGORY>, TASK_CANCELLED: a task that ended so;"
            " CALLBACK_FAULT, CALLBACK_FAULT:<fault>: a task's callback served a fault;"
            f" {CASES_ROW}: every named case served and handled, {UNEXERCISED} or"
            f" {MISHANDLED}: one of the two)"
        )
    gaps = {}
    for session in report["sessions"]:
        missing = session["coverage"]["missing"]
        met = [
            *missing["categories"],
            *missing["faults"],
            *missing.get("rate_limited", []),
            *missing.get("tasks", []),
        ]
        lacking = [n for n in met if n in wanted]
        lacking += [
            n
            for n in missing.get("cases", [])
            if CASES_ROW in wanted or n.partition(":")[0] in wanted
        ]
        if lacking:
            gaps[session["session"]] = lacking
    return gaps


def format_findings(report: dict[str, Any]) -> str:
    """Every finding of *report* as readable lines (empty when clean)."""
    lines: list[str] = []
    for session in report["sessions"]:
        findings = session["findings"]
        if not findings:
            continue
        n = len(findings)
        lines.append(
            f"mockskill retry audit: {n} {plural(n, 'finding', 'findings')}"
            f" in session {session['session']!r}:"
        )
        lines.extend(finding_lines(findings, "  "))
    return "\n".join(lines)


def finding_lines(findings: Iterable[dict[str, Any]], indent: str = "") -> list[str]:
    """Findings (of one session) numbered, each with where, found, expected and fix."""
    lines = []
    for i, f in enumerate(findings, 1):
        ids = ", ".join(f"#{a}" for a in f["attempts"])
        pad = indent + " " * (len(str(i)) + 2)
        lines.append(f"{indent}{i}. {f['rule']}: {f['message']}")
        lines.append(f"{pad}at:       {f['endpoint']} (journal {ids})")
        lines.append(f"{pad}found:    {f['found']}")
        lines.append(f"{pad}expected: {f['expected']}")
        lines.append(f"{pad}fix:      {f['fix']}")
    return lines


def silent_sessions(report: dict[str, Any]) -> list[str]:
    """Why *report* proves nothing, one line per session that sent no request (or for none).

    A gate must never pass on an empty audit: a mistyped session name, or a
    consumer that does not send ``Mockskill-Session``, would otherwise show
    green. Both ``assert_clean`` and ``mockskill report``'s gates fail on it.
    """
    if not report["sessions"]:
        return [f"no session made a request ({_HEADER})"]
    return [
        f"session {session['session']!r} {silence(session)}"
        for session in report["sessions"]
        if not session["requests"]
    ]


_HEADER = "is the Mockskill-Session header sent?"


def silence(session: dict[str, Any]) -> str:
    """What a session of a report that made no request is told, gate or no gate: ``made no
    request (is the Mockskill-Session header sent? did you mean 'alpha'?)``."""
    others = session.get("did_you_mean") or []
    hint = (
        f" did you mean {' or '.join(repr(o) for o in others)}?"
        if others
        else " no session has made a request"
    )
    return f"made no request ({_HEADER}{hint})"


def assert_clean(report: dict[str, Any], *, require_coverage: bool | Iterable[str] = False) -> None:
    """Raise AssertionError, with every finding spelt out, unless *report* is clean.

    *require_coverage*: also require every category and fault (True), or
    these ones (names), to have been met in each session of the report. A
    session without a single request fails too, and so does a report with
    no session at all: the consumer most likely did not send the
    ``Mockskill-Session`` header (or the name is mistyped), and an empty
    audit proves nothing.
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this one
    problems = []
    text = format_findings(report)
    if text:
        problems.append(text)
    problems.extend(f"mockskill retry audit: {line}" for line in silent_sessions(report))
    if require_coverage is not False:
        required = None if require_coverage is True else list(require_coverage)
        for name, lacking in coverage_gaps(report, required).items():
            problems.append(
                f"mockskill coverage: session {name!r} has not met {', '.join(lacking)}"
            )
    if problems:
        raise AssertionError("\n".join(problems))
