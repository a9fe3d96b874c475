"""What ``mockskill serve`` prints: the banner at start, and each reload's outcome."""

from __future__ import annotations

from pathlib import Path

import click

from .._version import __version__
from ..admin.browsers import origin_text
from ..control.watch import ReloadResult
from ..scenario.model import Scenario
from ..scenario.problems import format_report
from ..server.server import Server
from ..store.url import is_shared, masked


def count(n: int, noun: str) -> str:
    """*n* and *noun*, in the plural unless *n* is 1."""
    return f"{n} {noun if n == 1 else noun + 's'}"


def report_reload(server: Server, result: ReloadResult) -> None:
    """To stderr per reload: what changed, and the URLs of new skills; a failed one's problems."""
    if result.ok:
        added = set(result.added)
        changed = [name for name in result.changed if name not in added]
        parts = [f"added: {', '.join(result.added)}"] if result.added else []
        if changed or not parts:
            parts.append(f"changed: {', '.join(changed) or 'none'}")
        if result.removed:
            parts.append(f"removed: {', '.join(result.removed)}")
        summary = f"reloaded {count(len(result.scenarios), 'scenario')} ({'; '.join(parts)})"
        lines = [f"mockskill: {summary}"]
        new = [e.scenario for e in server.scenarios if e.name in added]
        width = max((len(skill.id) for scenario in new for skill in scenario.skills), default=0)
        for scenario in new:  # as the banner shows them at start
            lines.extend(_scenario_lines(server, scenario, width))
        click.echo("\n".join(lines), err=True)
    else:
        click.echo(format_report(result.problems), err=True)
        click.echo("mockskill: reload failed; still serving the last good scenarios", err=True)


def banner(
    server: Server, paths: tuple[Path, ...], state: str, worker: str, *, joined: bool = False
) -> str:
    """What ``serve`` prints at start: where, what, and each served scenario's URLs.

    *joined*: started without PATHS on a shared state, the server serves the
    fleet's stored set (version shown), which is what it lists.
    """
    url = server.url
    scenarios = server.engine.scenarios
    if joined:
        source = f"the shared scenario set (version {server.registry.version})"
    else:
        source = ", ".join(str(p) for p in paths) if paths else "bundled scenarios"
    lines = [
        f"mockskill {__version__} serving {source} at {url}"
        f"  ({worker}seed {server.seed}; Ctrl-C stops)",
        f"  list of skills: GET {url}/skills",
    ]
    if server.ca_bundle is not None:
        lines.append(f"  TLS: certificate from a local CA: {server.ca_bundle}")
        lines.append(f"       (also GET {url}/__admin/tls/ca.pem)")
    elif server.tls:
        lines.append("  TLS: the certificate given (--tls-cert)")
    if server.http_url is not None:
        lines.append(f"  plain HTTP too: {server.http_url}")
    if is_shared(state):
        lines.append(f"  state: shared, {masked(state)}")
    if server.admin_required:
        lines.append(f"  admin: {url}/__admin asks for the admin token (the token is not shown)")
    if server.cors is True:
        lines.append("  CORS: on (Access-Control-Allow-Origin: *)")
    elif server.cors:
        named = ", ".join(sorted(origin_text(o) for o in server.cors))
        lines.append(f"  CORS: on for {named}")
    width = max((len(s.id) for s in scenarios.skills), default=0)
    for scenario in scenarios.scenarios:
        lines.extend(_scenario_lines(server, scenario, width))
    return "\n".join(lines)


def _scenario_lines(server: Server, scenario: Scenario, width: int) -> list[str]:
    url = server.url
    lines = [f"{scenario.name}  ({scenario.file})"]
    # A TLS fault's skill is invoked on a port of its own (its descriptor's endpoint.url).
    faults = server.tls_fault_ports if any(s.tls for s in scenario.skills) else {}
    for skill in scenario.skills:
        lines.append(f"  {skill.id:<{width}}  GET  {url}/skills/{skill.id}")
        if skill.id in faults:
            host = url.split("://", 1)[1].rsplit(":", 1)[0]
            invoke = f"https://{host}:{faults[skill.id]}/skills/{skill.id}/invoke"
            lines.append(f"  {'':<{width}}  POST {invoke}  (TLS fault: {skill.tls})")
        else:
            lines.append(f"  {'':<{width}}  POST {url}/skills/{skill.id}/invoke")
    for route in scenario.routes:
        lines.append(f"  {route.label}  {url}{route.path}")
    return lines
