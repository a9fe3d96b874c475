"""Reading the retry audit: ``GET /__admin/report``, and the table ``mockskill report`` prints.

The audit itself (chains, rules, coverage) is :mod:`mockskill.audit`, pure
over the journal; this module serves it over HTTP, fetches it from a
running server, and renders it for a terminal. docs/audit.md documents all
three.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click
from flask import request

from . import audit
from .admin.journal_query import BadFilter
from .protocol import jsonstyle
from .remote import RemoteError, RemoteServer, http_url

if TYPE_CHECKING:
    from .engine.engine import Engine

DEFAULT_URL = "http://127.0.0.1:8080"
PARAMETERS = ("session", "skill", "initial_delay_ms", "tolerance_ms", "tolerance_ratio")


def answer(engine: Engine) -> tuple[dict[str, Any], int]:
    """``GET /__admin/report`` for the request being served: the report, or a 400."""
    try:
        policy, sessions, skill = _query(request.args)
    except BadFilter as exc:
        return exc.body(), 400
    entries = engine.state.journal()
    if skill is not None:
        entries = [e for e in entries if e.skill == skill]
    return audit.report(entries, policy, sessions=sessions), 200


def _query(args: Any) -> tuple[audit.Policy, list[str] | None, str | None]:
    for name in args:
        if name not in PARAMETERS:
            hint = difflib.get_close_matches(name, PARAMETERS, n=1)
            message = f"{name!r} is not a parameter of the report; it takes {', '.join(PARAMETERS)}"
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise BadFilter(name, message, list(PARAMETERS))
    sessions = args.getlist("session") or None
    skill = args.get("skill")
    default = audit.Policy()
    policy = audit.Policy(
        initial_delay_ms=_number(args, "initial_delay_ms", default.initial_delay_ms),
        tolerance_ms=_number(args, "tolerance_ms", default.tolerance_ms),
        tolerance_ratio=_number(args, "tolerance_ratio", default.tolerance_ratio, below=1.0),
    )
    return policy, sessions, skill


def _number(args: Any, name: str, default: float, below: float | None = None) -> float:
    text = args.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (below is not None and value >= below):
        bound = f"below {below}" if below is not None else "finite"
        raise BadFilter(name, f"{name}={text!r} is not a number of at least 0 ({bound})", "number")
    return value


# -- from a running server ------------------------------------------------------------


class Unavailable(Exception):
    """The report could not be had: the server is unreachable, or refused."""


def fetch(
    url: str = DEFAULT_URL,
    *,
    sessions: Iterable[str] = (),
    skill: str | None = None,
    admin_token: str | None = None,
    timeout: float = 30,
) -> dict[str, Any]:
    """The report of the server at *url* (its base URL), as ``GET /__admin/report`` gives it."""
    query = [("session", s) for s in sessions]
    if skill is not None:
        query.append(("skill", skill))
    try:
        server = RemoteServer(url, admin_token=admin_token, timeout=timeout)
        return server.admin("GET", "report", query)
    except RemoteError as exc:
        hint = " (give it: --admin-token or MOCKSKILL_ADMIN_TOKEN)" if exc.status == 401 else ""
        raise Unavailable(f"{exc}{hint}") from None


# -- the command ``mockskill report`` -------------------------------------------------

UNAVAILABLE = 3
"""Exit code when no report could be had (1 is a failed gate, 2 a mistyped command)."""


def command(
    url: str,
    *,
    sessions: Iterable[str] = (),
    skill: str | None = None,
    as_json: bool = False,
    fail_on_findings: bool = False,
    require_coverage: bool = False,
    required: Iterable[str] = (),
    admin_token: str | None = None,
) -> int:
    """Print the report of the server at *url*; the exit code, after the gates asked for."""
    try:
        url = http_url(url)
    except ValueError as exc:  # a usage error (2), not an unreachable server (3)
        raise click.BadParameter(str(exc), param_hint="URL") from None
    names = [n.strip() for item in required for n in item.split(",") if n.strip()]
    wanted: list[str] | None = None if require_coverage else names
    try:
        if wanted:
            audit.coverage_gaps({"sessions": []}, wanted)  # check the names first
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--require") from None
    try:
        got = fetch(url, sessions=sessions, skill=skill, admin_token=admin_token)
    except Unavailable as exc:
        click.echo(f"mockskill: {exc}", err=True)
        return UNAVAILABLE
    click.echo(jsonstyle.dumps(got) if as_json else table(got, url))
    failed = []
    findings = sum(len(s["findings"]) for s in got["sessions"])
    if fail_on_findings and findings:
        failed.append(f"{findings} {_plural(findings, 'finding')} (--fail-on-findings)")
    if require_coverage or names:
        gaps = audit.coverage_gaps(got, wanted)
        failed.extend(f"session {n!r} has not met {', '.join(g)}" for n, g in gaps.items())
    if fail_on_findings or require_coverage or names:
        # Every gate fails on a session that sent nothing: an empty audit has
        # no findings and would otherwise pass, green, on a mistyped name.
        failed.extend(audit.silent_sessions(got))
    for line in failed:
        click.echo(f"mockskill: {line}", err=True)
    return 1 if failed else 0


# -- for a terminal -------------------------------------------------------------------


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
        lines.append("no requests recorded")
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
        f"{len(sessions)} {_plural(len(sessions), 'session')},"
        f" {findings} {_plural(findings, 'finding')};"
        f" coverage complete in {complete} of {len(sessions)}"
    )


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _session_lines(session: dict[str, Any]) -> list[str]:
    findings = session["findings"]
    retried = [c for c in session["chains"] if len(c["attempts"]) > 1]
    lines = [
        f"session {session['session']!r}: {session['requests']}"
        f" {_plural(session['requests'], 'request')}, {len(retried)} retried"
        f" {_plural(len(retried), 'chain')}, "
        + (f"{len(findings)} {_plural(len(findings), 'finding')}" if findings else "clean")
    ]
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
        lines.extend(audit.finding_lines(findings, "    "))
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
    if attempt.get("invalid_descriptor"):
        return f"{attempt['status']} invalid descriptor"
    code = attempt["error_code"]
    return f"{attempt['status']} {code}" if code else str(attempt["status"])
