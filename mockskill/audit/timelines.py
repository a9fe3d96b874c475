"""A session's tasks and streams as timelines: what the report gives the dashboard to draw.

Tasks (:func:`task_timelines`) are a row a task; streams (:func:`stream_timelines`) a bar
an attempt, described below the tasks.

Each task the consumer had (an id mockskill handed out) becomes a row: its requests as
marks (the submit, each poll, a cancel, an input; when each was sent and answered, the
status it served), the statuses they served as bands (each from the answer that first
served it to the answer that served the next), mockskill's callback deliveries (the
status each pushed, acknowledged or not, forged or not), and the findings on it (by the
finding's ``task``). Times are seconds since the epoch, as the journal's; the dashboard
draws them from the task's submit.

Each stream attempt (an entry with ``Entry.stream``: a stream step's answer) becomes a bar
from its head to its end, with the events it sent (a count: the journal keeps no event's
time), the last id and how it ended (``complete``, or where and why it broke: ``reset``,
``close``, ``stall``, ``broken_chunking``, ``client_left``, ``gave_up``, ``stopped``), and
the findings whose journal ids name its entry, as a chain's attempts are ringed; and, where
the journal records them, what the stream rules weigh: an error end's code, how long the
bytes had stopped, the scenario's idle bound and expected duration, the ``Last-Event-ID``
asked and resumed from. Pure, like all of the audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from .callbacks import acknowledged, forged, is_delivery
from .retries import answered, watch_left

TASKS_SHOWN = 20
"""The most tasks a session's report draws (the newest: a consumer's first ones scroll off)."""
MARKS_SHOWN = 200
"""The most marks (requests, or deliveries) one task's row holds: past them, the newest."""
STREAMS_SHOWN = 40
"""The most stream attempts a session's report draws (the newest)."""


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


def stream_timelines(
    entries: Iterable[Entry], findings: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The stream attempts of one session's *entries*, a bar each, in order of their start,
    numbered per skill and endpoint (a re-issue is the next attempt), with the numbers
    (1-based) of *findings* (the session's, as the report lists them) whose journal ids
    (``attempts``) name the attempt's entry."""
    found: dict[int, list[int]] = {}
    for n, finding in enumerate(findings, 1):
        for ident in finding.get("attempts") or ():
            found.setdefault(ident, []).append(n)
    counted: dict[tuple[str | None, str], int] = {}
    rows = []
    for entry in sorted(entries, key=lambda e: (e.started, e.id)):
        if entry.stream is None:
            continue
        key = (entry.skill, entry.endpoint)
        counted[key] = counted.get(key, 0) + 1
        rows.append(_stream_bar(entry, counted[key], found.get(entry.id, [])))
    return rows[-STREAMS_SHOWN:]


def _stream_bar(entry: Entry, attempt: int, found: list[int]) -> dict[str, Any]:
    stream = entry.stream or {}
    duration_ms = stream.get("duration_ms")
    head = entry.headers_sent
    if head is None:  # an entry that kept no head time: the stream's end less its length
        head = entry.finished - (duration_ms or 0) / 1000
    ended = stream.get("ended")
    return {
        "id": entry.id,
        "skill": entry.skill,
        "endpoint": entry.endpoint,
        "method": entry.method,
        "attempt": attempt,
        "started": entry.started,
        "head": head,
        "finished": entry.finished,
        "status": entry.status,
        "error_code": entry.error_code,
        "format": stream.get("format"),
        "events": stream.get("events", 0),
        "last_id": stream.get("last_id"),
        "ended": ended,
        "broke": ended != "complete" and not watch_left(stream),
        "fault": stream.get("fault"),
        "fault_after": stream.get("fault_after"),
        "duration_ms": duration_ms,
        "resumed_from": stream.get("resumed_from"),
        "asked_from": stream.get("asked_from"),
        "client_left": entry.client_left,
        # What the audit's stream rules weigh, where the journal records it (None: not):
        # how long the bytes had stopped at the end, the scenario's idle bound and
        # expected duration, the SSE retry: sent.
        "stalled_ms": stream.get("stalled_ms"),
        "idle_bound_ms": stream.get("idle_bound_ms"),
        "expected_ms": stream.get("expected_ms"),
        "retry_ms": stream.get("retry_ms"),
        "findings": found,
    }
