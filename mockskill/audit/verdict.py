"""The report, and reading it: the journal turned into a verdict.

:func:`judge` applies every rule to one session once; :func:`report` draws
every session's judgement (its chains, findings, coverage and timeouts) in the
shape ``GET /__admin/report`` serves and the dashboard and ``mockskill report``
read; :func:`session_verdict` reads one session's as ``GET /__admin/verdict``
answers it (clean and covered as required, or why not); :func:`assert_clean`
and the helpers below it are the gates over a report (findings spelt out,
coverage gaps, sessions that sent nothing).
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
from .findings import Attempt, Finding, attempt_json, audit_chain, plural, used_invalid
from .handshakes import http_entries, permanent_retried, tls_coverage
from .herds import retry_herds
from .pacing import rate_limit_ignored
from .policy import Policy
from .retries import chains, endpoint_of
from .rules import BY_ID
from .streams import stream_findings
from .tasks import task_findings
from .timelines import stream_timelines, task_timelines


@dataclass(frozen=True)
class Judgement:
    """One session's audit before it is shown: what the report and the verdict both read.

    Judged once per session: the report adds what a reader draws (chains,
    timelines), the verdict only reads the findings and the coverage.
    """

    session: str
    handshakes: Sequence[Entry]
    """Every entry of the session (TLS handshakes that failed on a fault port included)."""
    touched: Sequence[Entry]
    """Its HTTP exchanges: the consumer's requests and mockskill's callback deliveries."""
    requests: Sequence[Entry]
    """The consumer's requests."""
    chains: list[list[Entry]]
    attempts: list[list[Attempt]]
    """Each chain's attempts, as the rules read them."""
    findings: list[Finding]
    coverage: dict[str, Any]
    """What the session met and missed (:func:`.covered.coverage`), its named cases' gaps
    (``missing.cases``) among them."""
    cases: dict[str, Any]
    """Its named cases: how often each was served, and the gaps (:func:`.cases.case_coverage`)."""

    @property
    def clean(self) -> bool:
        # A session that sent nothing proves nothing: never clean (a mistyped name, or no
        # Mockskill-Session header, must not pass a gate that reads "clean" over HTTP).
        return bool(self.requests) and not self.findings


def judge(
    name: str,
    entries: Sequence[Entry],
    policy: Policy = Policy(),
    now: float | None = None,
    named: NamedCases | None = None,
) -> Judgement:
    """Every rule of the audit applied to one session's *entries*, at *now* (seconds since
    the epoch; None: the time it is: a task left unpolled is judged by how long it has been);
    *named*: the served scenarios' named cases, whose coverage it gives too (:mod:`.cases`)."""
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
        if len(chain) > 1:  # the chain rules judge retries: a request sent once has none
            findings.extend(found)
            findings.extend(duplicate_executions(name, chain))
            findings.extend(correlation_lost(name, chain))
    findings.extend(used_invalid(name, entries))
    findings.extend(retry_herds(name, chained, policy))
    findings.extend(rate_limit_ignored(name, chained, policy))
    findings.extend(task_findings(name, touched, policy, time.time() if now is None else now))
    findings.extend(stream_findings(name, entries, grouped, policy))
    findings.sort(key=lambda f: f.attempts[0])
    cases = case_coverage(entries, named or {}, findings)
    covered = coverage(touched)
    covered["missing"]["cases"] = [gap_name(gap) for gap in cases["gaps"]]
    return Judgement(name, handshakes, touched, entries, grouped, chained, findings, covered, cases)


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
    judged = judge(name, entries, policy, now, named)
    listed = [f.as_json() for f in judged.findings]
    return {
        "session": name,
        "requests": len(judged.requests),
        "handshakes_failed": len(judged.handshakes) - len(judged.requests),
        "clean": judged.clean,
        "coverage": {
            **judged.coverage,
            "tls_faults": tls_coverage(judged.handshakes),
            "cases": judged.cases,
        },
        "chains": [
            {
                "endpoint": endpoint_of(chain[0]),
                "skill": chain[0].skill,
                "attempts": [attempt_json(attempts, i) for i in range(len(attempts))],
            }
            for chain, attempts in zip(judged.chains, judged.attempts, strict=True)
        ],
        "timeouts": timeouts(judged.requests),
        "findings": listed,
        "tasks": task_timelines(judged.touched, listed),
        "streams": stream_timelines(judged.requests, listed),
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


GATE_NAMES: tuple[str, ...] = (*CODES, *FAULT_NAMES, RATE_LIMITED_ROW, *TASK_ROWS, *CASE_ROWS)
"""Every name a coverage gate takes (``--require``, ``require=``), in the report's order."""


def required_names(names: Iterable[str]) -> list[str]:
    """*names* as a gate takes them, each maybe a comma-separated list (``--require
    AUTH_REQUIRED,RATE_LIMITED``), once each; ValueError, naming the valid ones (and the
    closest to each mistyped one), for a name no gate knows."""
    wanted = list(dict.fromkeys(n.strip() for item in names for n in item.split(",") if n.strip()))
    _check_known(wanted)
    return wanted


def _check_known(wanted: Iterable[str]) -> None:
    unknown = set(wanted) - set(GATE_NAMES)
    if not unknown:
        return
    named = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name.upper().replace("-", "_"), GATE_NAMES, n=1)
        named.append(f"{name} (did you mean {close[0]!r}?)" if close else name)
    raise ValueError(
        f"not a category or a transport fault: {', '.join(named)};"
        f" expected some of {', '.join(GATE_NAMES)} ({RATE_LIMITED_ROW}: a rate-limit answer;"
        " TASK_FAILED, TASK_FAILED:<CATEGORY>, TASK_CANCELLED: a task that ended so;"
        " CALLBACK_FAULT, CALLBACK_FAULT:<fault>: a task's callback served a fault;"
        f" {CASES_ROW}: every named case served and handled, {UNEXERCISED} or"
        f" {MISHANDLED}: one of the two)"
    )


def _lacking(session_coverage: dict[str, Any], wanted: set[str]) -> list[str]:
    """The names of *wanted* a session's coverage misses; a named case's gap
    (``case-unexercised:skill/case``) is wanted by its rule's name or by :data:`CASES_ROW`."""
    missing = session_coverage["missing"]
    met = [
        *missing["categories"],
        *missing["faults"],
        *missing.get("rate_limited", []),
        *missing.get("tasks", []),
    ]
    lacking = [n for n in met if n in wanted]
    lacking += [
        n for n in missing.get("cases", []) if CASES_ROW in wanted or n.partition(":")[0] in wanted
    ]
    return lacking


def coverage_gaps(
    report: dict[str, Any], required: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Per session, the required categories and faults it has not met (sessions with gaps only).

    *required*: names of categories and faults, :data:`RATE_LIMITED_ROW` for a
    rate-limit answer, and the task rows (:data:`~.covered.TASK_ROWS`: ``TASK_FAILED``,
    ``TASK_FAILED:<CATEGORY>``, ``TASK_CANCELLED``, ``CALLBACK_FAULT``,
    ``CALLBACK_FAULT:<fault>``), and the named cases' (:data:`~.cases.CASE_ROWS`) (None:
    every category, fault and named case; a rate limit, a task or a callback fault only
    when named). ValueError for a name no gate knows.
    """
    if required is not None:
        required = list(required)
        _check_known(required)
    # (every named case is asked by default: a session served no pack has none to meet)
    wanted = set(CODES) | set(FAULT_NAMES) | {CASES_ROW} if required is None else set(required)
    gaps = {}
    for session in report["sessions"]:
        lacking = _lacking(session["coverage"], wanted)
        if lacking:
            gaps[session["session"]] = lacking
    return gaps


def session_verdict(
    name: str,
    entries: Sequence[Entry],
    required: Iterable[str] = (),
    policy: Policy = Policy(),
    now: float | None = None,
    named: NamedCases | None = None,
) -> dict[str, Any]:
    """Whether one session passes: clean (no finding, and a request at least) and covered
    as *required* (:func:`required_names`; ValueError for a name no gate knows).

    ``GET /__admin/verdict``'s answer without its HTTP parts: ``clean``, ``requests``,
    ``required``, ``covered`` (every gate name the session met, required or not),
    ``uncovered`` (the required ones it did not), ``findings`` (as the report lists
    them) and ``detail``, one line saying why it is not clean. The audit is the
    report's (:func:`judge`), without drawing the chains and timelines a reader sees.
    """
    wanted = required_names(required)
    judged = judge(name, entries, policy, now, named)
    uncovered = _lacking(judged.coverage, set(wanted))
    findings = [f.as_json() for f in judged.findings]
    verdict: dict[str, Any] = {
        "session": name,
        "clean": judged.clean and not uncovered,
        "requests": len(judged.requests),
        "required": wanted,
        # (the named cases' rows only where the session was served a pack's skill)
        "covered": [
            n
            for n in GATE_NAMES
            if (n not in CASE_ROWS or judged.cases["served"]) and not _lacking(judged.coverage, {n})
        ],
        "uncovered": uncovered,
        "findings": findings,
    }
    verdict["detail"] = _verdict_detail(verdict)
    return verdict


def _verdict_detail(verdict: dict[str, Any]) -> str:
    """``session 'ci-7' is not clean: 2 findings (retry-too-soon); not covered: AUTH_REQUIRED``"""
    name = verdict["session"]
    if verdict["clean"]:
        n = verdict["requests"]
        return f"session {name!r} is clean: {n} {plural(n, 'request', 'requests')}, no finding"
    why = []
    if not verdict["requests"]:
        why.append(f"it made no request ({_HEADER})")
    findings = verdict["findings"]
    if findings:
        rules = ", ".join(dict.fromkeys(f["rule"] for f in findings))
        why.append(f"{len(findings)} {plural(len(findings), 'finding', 'findings')} ({rules})")
    if verdict["uncovered"]:
        why.append(f"not covered: {', '.join(verdict['uncovered'])}")
    return f"session {name!r} is not clean: {'; '.join(why)}"


def unknown_session(name: str, entries: Iterable[Entry]) -> tuple[str, list[str]]:
    """What to say of a session *name* the journal (*entries*, every session's) has no entry
    of: a line naming the closest sessions it has, and those names."""
    active = list(dict.fromkeys(e.session for e in entries))
    close = difflib.get_close_matches(name, active, n=3, cutoff=0.6)
    if close:
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?"
    elif active:
        hint = f"its latest sessions: {', '.join(repr(a) for a in active[::-1][:3])}"
    else:
        hint = "no session has made a request"
    return (
        f"the journal has no request of session {name!r} (a mistyped name, a session reset,"
        f" or requests without the Mockskill-Session header); {hint}",
        close,
    )


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
        pad = indent + " " * (len(str(i)) + 2)
        lines.append(f"{indent}{i}. {f['rule']}: {f['message']}")
        lines.extend(pad + line for line in aligned(finding_parts(f)))
    return lines


def finding_parts(finding: dict[str, Any], *, docs: bool = False) -> list[tuple[str, str]]:
    """What a finding says beyond its message, as ``(label, text)``: where (its endpoint
    and journal ids), found, expected, fix; *docs*: and its rule's documentation."""
    ids = ", ".join(f"#{a}" for a in finding["attempts"])
    parts = [
        ("at", f"{finding['endpoint']} (journal {ids})"),
        ("found", finding["found"]),
        ("expected", finding["expected"]),
        ("fix", finding["fix"]),
    ]
    rule = BY_ID.get(finding["rule"])
    if docs and rule is not None:  # (a rule of a newer server's report: none to link)
        parts.append(("docs", rule.help_uri))
    return parts


def aligned(parts: Iterable[tuple[str, str]]) -> list[str]:
    """``(label, text)`` pairs as lines, the texts aligned: ``found:    ...``."""
    return [f"{label + ':':<9} {text}" for label, text in parts]


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
