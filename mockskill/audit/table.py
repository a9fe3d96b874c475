"""The report for a terminal: the table ``mockskill report`` prints.

Per session, its coverage, retry chains (each attempt, its wait and what it
was owed), timeouts and findings, and a summary line: a pure function of the
report dict (:func:`mockskill.audit.report`), so that it renders the same
from the server's JSON as from the journal.
"""

from __future__ import annotations

from typing import Any

from .verdict import finding_lines, silence


def table(report: dict[str, Any], url: str = "") -> str:
    """The report as text: per session, its coverage, retry chains, timeouts and findings."""
    policy = report["policy"]
    lines = [
        f"mockskill retry audit{' of ' + url if url else ''}"
        f" (initial delay {policy['initial_delay_ms']:.0f} ms;"
        f" tolerance {policy['tolerance_ratio']:.0%} of a wait, at most"
        f" {policy['tolerance_ms']:.0f} ms)"
    ]
    if not report["sessions"]:
        lines.append("no session made a request (is the Mockskill-Session header sent?)")
    for session in report["sessions"]:
        lines.append("")
        lines.extend(_session_lines(session))
    lines.append("")
    lines.append(summary(report))
    return "\n".join(lines)


def summary(report: dict[str, Any]) -> str:
    sessions = report["sessions"]
    findings = sum(len(s["findings"]) for s in sessions)
    complete = sum(1 for s in sessions if s["coverage"]["complete"])
    return (
        f"{len(sessions)} {plural(len(sessions), 'session')},"
        f" {findings} {plural(findings, 'finding')};"
        f" coverage complete in {complete} of {len(sessions)}"
    )


def plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _session_lines(session: dict[str, Any]) -> list[str]:
    findings = session["findings"]
    retried = [c for c in session["chains"] if len(c["attempts"]) > 1]
    lines = [
        f"session {session['session']!r}: {session['requests']}"
        f" {plural(session['requests'], 'request')}, {len(retried)} retried"
        f" {plural(len(retried), 'chain')}, "
        + (
            f"{len(findings)} {plural(len(findings), 'finding')}"
            if findings
            else "clean"
            if session["requests"]
            else "nothing to audit"
        )
    ]
    if not session["requests"]:  # what a gate would say of it, said without one too
        lines.append(f"  {silence(session)}")
    lines.extend(_coverage_lines(session["coverage"]))
    marks: dict[int, list[str]] = {}
    for i, finding in enumerate(findings, 1):
        for attempt in finding["attempts"]:
            marks.setdefault(attempt, []).append(f"{i}:{finding['rule']}")
    if retried:
        lines.append("  retries:")
        for chain in retried:
            lines.extend(_chain_lines(chain, marks))
    if session["timeouts"]:
        lines.append("  timeouts (the client hung up):")
        for t in session["timeouts"]:
            lines.append(
                f"    #{t['id']} {t['endpoint']}: after {t['client_timeout_ms']:.0f} ms"
                f" ({t['kind']})"
            )
    if findings:
        lines.append("  findings:")
        lines.extend(finding_lines(findings, "    "))
    return lines


def _coverage_lines(coverage: dict[str, Any]) -> list[str]:
    categories, faults = coverage["categories"], coverage["faults"]
    met = [f"{n} x{c}" for n, c in {**categories, **faults}.items() if c]
    missing = coverage["missing"]["categories"] + coverage["missing"]["faults"]
    lines = [
        f"  coverage: {sum(1 for c in categories.values() if c)} of {len(categories)}"
        f" categories, {sum(1 for c in faults.values() if c)} of {len(faults)} transport faults"
        + (" (complete)" if coverage["complete"] else "")
    ]
    if met:
        lines.append(f"    met:     {', '.join(met)}")
    if missing:
        lines.append(f"    missing: {', '.join(missing)}")
    limited = coverage.get("rate_limited") or {}
    if any(limited.values()):
        counts = ", ".join(f"{code} x{n}" for code, n in limited.items() if n)
        lines.append(f"    rate-limit answers: {counts}")
    tasks = coverage.get("tasks") or {}
    failed = {code: n for code, n in (tasks.get("failed") or {}).items() if n}
    if failed or tasks.get("cancelled"):
        ended = [f"failed {code} x{n}" for code, n in failed.items()]
        if tasks.get("cancelled"):
            ended.append(f"cancelled x{tasks['cancelled']}")
        lines.append(f"    tasks: {', '.join(ended)}")
    cases = coverage.get("cases") or {}
    for skill, counts in (cases.get("served") or {}).items():
        served = sum(1 for n in counts.values() if n)
        lines.append(f"    named cases of {skill}: {served} of {len(counts)} served")
    for gap in cases.get("gaps") or []:
        lines.append(f"      {gap['rule']}: {gap['message']}")
        lines.append(f"        fix: {gap['fix']}")
    callbacks = {fault: n for fault, n in (tasks.get("callbacks") or {}).items() if n}
    if callbacks:
        counts = ", ".join(f"{fault} x{n}" for fault, n in callbacks.items())
        lines.append(f"    callback faults: {counts}")
    return lines


def _chain_lines(chain: dict[str, Any], marks: dict[int, list[str]]) -> list[str]:
    rows = [("#", "at ms", "answer", "waited", "owed", "")]
    for a in chain["attempts"]:
        rows.append(
            (
                str(a["id"]),
                f"{a['offset_ms']:.0f}",
                _answer(a),
                "-" if a["wait_ms"] is None else f"{a['wait_ms']:.0f}",
                "-" if a["expected_wait_ms"] is None else f"{a['expected_wait_ms']:.0f}",
                " ".join(marks.get(a["id"], [])),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = [f"    {chain['endpoint']}"]
    for r in rows:
        cells = [
            r[0].rjust(widths[0]),
            r[1].rjust(widths[1]),
            r[2].ljust(widths[2]),
            r[3].rjust(widths[3]),
            r[4].rjust(widths[4]),
            r[5],
        ]
        out.append(("      " + "  ".join(cells)).rstrip())
    return out


def _answer(attempt: dict[str, Any]) -> str:
    if attempt["fault"]:
        return str(attempt["fault"])
    if attempt["status"] is None:
        return "no answer: client left"
    if attempt["status"] < 400 and attempt["client_timeout_ms"] is not None:
        # A success is no answer until its body is whole: to the consumer it timed out.
        return f"{attempt['status']}, body unread: client left"
    if attempt.get("invalid_descriptor"):
        return f"{attempt['status']} invalid descriptor"
    code = attempt["error_code"]
    return f"{attempt['status']} {code}" if code else str(attempt["status"])
