"""A consumer that breaks the audit's rules, played against a real server, and the report
of it: what the report formats' tests (tests/audit/formats/) write and read back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import requests

from mockskill import Server, audit


@dataclass(frozen=True)
class Played:
    """The sessions played and the server's report of them (``GET /__admin/report``'s)."""

    hammer: str
    """Retried ``retry-down`` four times at once (retry-too-soon, too-many-attempts),
    then invoked ``translate`` once (a clean chain)."""
    poller: str
    """Submitted a ``task-report`` task and polled it twice at once (poll-too-soon)."""
    silent: str
    """Named in the report, never sent a request."""
    report: dict[str, Any]


def play(server: Server) -> Played:
    """Play the three sessions on *server* (the bundled scenarios) and report them."""
    tag = uuid.uuid4().hex[:8]
    hammer, poller, silent = f"hammer-{tag}", f"poller-{tag}", f"silent-{tag}"
    headers = {"Mockskill-Session": hammer}
    for _ in range(4):
        requests.post(server.invoke_url("retry-down"), headers=headers, timeout=10)
    assert requests.post(server.invoke_url("translate"), headers=headers, timeout=10).ok
    headers = {"Mockskill-Session": poller}
    submitted = requests.post(server.invoke_url("task-report"), headers=headers, timeout=10)
    assert submitted.status_code == 202
    for _ in range(2):
        requests.get(submitted.headers["Location"], headers=headers, timeout=10)
    got = requests.get(
        f"{server.url}/__admin/report",
        params=[("session", hammer), ("session", poller), ("session", silent)],
        timeout=10,
    )
    report: dict[str, Any] = got.json()
    rules = {s["session"]: [f["rule"] for f in s["findings"]] for s in report["sessions"]}
    assert rules == {
        hammer: ["retry-too-soon", "too-many-attempts"],
        poller: ["poll-too-soon"],
        silent: [],
    }, rules
    assert not audit.silent_sessions({"sessions": report["sessions"][:2]})
    return Played(hammer, poller, silent, report)
