"""``mockskill report``: the retry audit of a running server, fetched and printed.

The command fetches ``GET /__admin/report`` through
:class:`~mockskill.server.remote.RemoteServer`, prints it in the format asked for
(:data:`mockskill.audit.formats.FORMATS`: the table of :mod:`mockskill.audit.table`,
JSON, JUnit XML, SARIF or GitHub Actions annotations), and applies the gates asked for
(``--fail-on-findings``, ``--require-coverage``, ``--require``) whatever the format. The audit is
:mod:`mockskill.audit`; the server side of the report is
:mod:`mockskill.admin.report_routes`. docs/audit.md documents all three.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from .. import audit
from ..audit.formats import FORMATS
from ..audit.formats.sarif import SkillSource, sarif
from ..audit.table import plural
from ..server.remote import RemoteError, RemoteServer, http_url

DEFAULT_URL = "http://127.0.0.1:8080"


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
        hint = ""
        if exc.token_refused:
            hint = "; check --admin-token or MOCKSKILL_ADMIN_TOKEN"
        elif exc.status == 401:
            hint = "; give it with --admin-token or MOCKSKILL_ADMIN_TOKEN"
        raise Unavailable(f"{exc}{hint}") from None


def scenario_sources(
    url: str, admin_token: str | None = None, here: Path | None = None
) -> dict[str, SkillSource]:
    """Each active skill's scenario file and line, as SARIF names them: a path relative to
    *here* (the current folder) when the file is in it, else a ``file:`` URI, and the line
    the listing gives (None from a server that gives none); ``{}`` when the server will not
    say (the report is whole without it)."""
    try:
        listed = RemoteServer(url, admin_token=admin_token).admin("GET", "scenarios")
    except RemoteError:
        return {}
    root = (here or Path.cwd()).resolve()
    sources: dict[str, SkillSource] = {}
    for scenario in listed.get("scenarios", ()):
        origin = Path(scenario.get("origin") or "")
        if not scenario.get("active") or not origin.is_absolute():
            continue  # a body posted to the admin API, or a scenario added in code: no file
        uri = (
            origin.relative_to(root).as_posix() if origin.is_relative_to(root) else origin.as_uri()
        )
        for skill in scenario.get("skills", ()):
            line = skill.get("line")
            shown = line if isinstance(line, int) and line > 0 else None
            sources.setdefault(skill["id"], SkillSource(uri, shown))
    return sources


# -- the command ``mockskill report`` -------------------------------------------------

UNAVAILABLE = 3
"""Exit code when no report could be had (1 is a failed gate, 2 a mistyped command)."""


def command(
    url: str,
    *,
    sessions: Iterable[str] = (),
    skill: str | None = None,
    output_format: str = "text",
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
    try:
        names = audit.required_names(required)  # split and checked before anything is fetched
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--require") from None
    wanted: list[str] | None = None if require_coverage else names
    try:
        got = fetch(url, sessions=sessions, skill=skill, admin_token=admin_token)
    except Unavailable as exc:
        click.echo(f"mockskill: {exc}", err=True)
        return UNAVAILABLE
    if output_format == "sarif":  # a result located in a file is what code scanning shows
        click.echo(sarif(got, url, sources=scenario_sources(url, admin_token)))
    else:
        click.echo(FORMATS[output_format](got, url))
    failed = []
    findings = sum(len(s["findings"]) for s in got["sessions"])
    if fail_on_findings and findings:
        failed.append(f"{findings} {plural(findings, 'finding')} (--fail-on-findings)")
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
