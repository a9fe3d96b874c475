"""A session's tasks as timelines: what the report gives the dashboard to draw, a row a task.

Each task the consumer had (an id mockskill handed out) becomes a row: its requests as
marks (the submit, each poll, a cancel, an input; when each was sent and answered, the
status it served), the statuses they served as bands (each from the answer that first
served it to the answer that served the next), mockskill's callback deliveries (the
status each pushed, acknowledged or not, forged or not), and the findings on it (by the
finding's ``task``). Times are seconds since the epoch, as the journal's; the dashboard
draws them from the task's submit. Pure, like all of the audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from .callbacks import acknowledged, forged, is_delivery
from .retries import answered

TASKS_SHOWN = 20
"""The most tasks a session's report draws (the newest: a consumer's first ones scroll off)."""
MARKS_SHOWN = 200
"""The most marks (requests, or deliveries) one task's row holds: past them, the newest."""


def task_timelines(
    entries: Iterable[Entry], findings: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The timelines of the tasks of one session's *entries* (requests and deliveries), in
    order of their first request, with the numbers (1-based) of *findings* (the session's,
    as the report lists them) that name each."""
    by_task: dict[str, list[Entry]] = {}
    for entry in sorted(entries, key=lambda e: (e.started, e.id)):
        task = entry.task
        if task is None or not task.get("id") or task.get("known") is False:
            continue
        by_task.setdefault(str(task["id"]), []).append(entry)
    found: dict[str, list[int]] = {}
    for n, finding in enumerate(findings, 1):
        if finding.get("task") is not None:
            found.setdefault(str(finding["task"]), []).append(n)
    rows = [_timeline(ident, items, found.get(ident, [])) for ident, items in by_task.items()]
    return rows[-TASKS_SHOWN:]


def _timeline(ident: str, items: Sequence[Entry], found: list[int]) -> dict[str, Any]:
    requests = [e for e in items if not is_delivery(e)]
    deliveries = [e for e in items if is_delivery(e)]
    return {
        "id": ident,
        "skill": items[0].skill,
        "started": items[0].started,
        "finished": max(e.finished for e in items),
        "marks": [_mark(e) for e in requests[-MARKS_SHOWN:]],
        "bands": bands(requests),
        "deliveries": [_delivery(e) for e in deliveries[-MARKS_SHOWN:]],
        "findings": found,
    }


def _mark(entry: Entry) -> dict[str, Any]:
    task = entry.task or {}
    served = bool(task.get("served")) and answered(entry)
    return {
        "id": entry.id,
        "action": task.get("action"),
        "started": entry.started,
        "finished": entry.finished,
        "status": entry.status,
        "error_code": entry.error_code,
        "fault": entry.fault,
        "served": task.get("status") if served else None,
        "cancelling": bool(task.get("cancelling")) if served else False,
        "poll_after_ms": task.get("poll_after_ms") if served else None,
        "expired": bool(task.get("expired")),
    }


def _delivery(entry: Entry) -> dict[str, Any]:
    task = entry.task or {}
    return {
        "id": entry.id,
        "started": entry.started,
        "finished": entry.finished,
        "status": entry.status,
        "pushed": task.get("pushed"),
        "delivery": task.get("delivery"),
        "attempt": task.get("attempt"),
        "fault": task.get("fault"),
        "forged": forged(entry),
        "acknowledged": acknowledged(entry),
    }


def bands(requests: Sequence[Entry]) -> list[dict[str, Any]]:
    """The statuses *requests* (a task's, in order) served, as bands: each from the end of
    the answer that first served it to the end of the answer that served the next (the
    last to the last answer's end); ``cancelling`` a status of its own while a cancel
    settles."""
    out: list[dict[str, Any]] = []
    for entry in sorted(requests, key=lambda e: (e.finished, e.id)):
        task = entry.task or {}
        if not task.get("served") or not answered(entry) or task.get("status") is None:
            continue
        status = str(task["status"])
        if task.get("cancelling") and status not in ("completed", "failed", "cancelled"):
            status = "cancelling"
        if out and out[-1]["status"] == status:
            out[-1]["until"] = entry.finished
            continue
        if out:
            out[-1]["until"] = entry.finished
        out.append({"status": status, "from": entry.finished, "until": entry.finished})
    return out
