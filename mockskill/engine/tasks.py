"""A task's life (interim: s17-life's module replaces this one at the merge)."""

from __future__ import annotations

import json
import math
import time
from typing import Any, NamedTuple

from ..scenario.model import Task
from .store import TaskRecord


class TaskView(NamedTuple):
    status: str
    phase: int
    progress: int | None
    poll_after_ms: int | None
    cancelling: bool
    terminal_at_ms: float | None
    expired: bool
    settles_at_ms: float | None


def _life(task: Task, record: TaskRecord, at_ms: float, polls: int) -> tuple[int, float, int]:
    """(phase, when it began, polls when it began) at *at_ms* with *polls* counted."""
    start, polls_start = record.submitted_ms, 0
    inputs = [e for e in record.events if e.action == "input"]
    for k, phase in enumerate(task.life):
        if phase.terminal:
            return k, start, polls_start
        if phase.duration_ms is not None:
            end = start + phase.duration_ms
            if at_ms < end:
                return k, start, polls_start
            start = end
        elif phase.polls is not None:
            if polls <= polls_start + phase.polls:
                return k, start, polls_start
            polls_start += phase.polls
        else:  # input_required
            given = next(
                (
                    e
                    for e in inputs
                    if e.at_ms >= start and e.polls >= polls_start and e.at_ms <= at_ms
                ),
                None,
            )
            if given is None:
                return k, start, polls_start
            inputs.remove(given)
            start, polls_start = given.at_ms, given.polls
    return len(task.life) - 1, start, polls_start


def _settles(task: Task, phase: int, start: float) -> float | None:
    at = start
    for p in task.life[phase:]:
        if p.terminal:
            return at
        if p.duration_ms is None:
            return None
        at += p.duration_ms
    return at


def view(task: Task, record: TaskRecord) -> TaskView:
    now = record.now_ms
    cancel_at = None
    for event in record.events:
        if event.action != "cancel":
            continue
        k, _, _ = _life(task, record, event.at_ms, event.polls)
        if task.life[k].status in task.cancellable:
            cancel_at = event.at_ms
            break
    k, start, polls_start = _life(task, record, now, record.polls)
    phase = task.life[k]
    status, cancelling, terminal_at = phase.status, False, None
    if phase.terminal:
        terminal_at = start
    if cancel_at is not None:
        settle_end = cancel_at + task.cancel_settle_ms
        if terminal_at is None or terminal_at > settle_end:
            if now >= settle_end:
                status, terminal_at, k = "cancelled", settle_end, k
            else:
                cancelling = True
                terminal_at = None
    progress = None
    if phase.progress and not phase.terminal:
        n = len(phase.progress)
        if phase.duration_ms:
            i = min(n - 1, int((now - start) * n // phase.duration_ms))
        elif phase.polls:
            i = min(n - 1, (record.polls - polls_start) * n // phase.polls)
        else:
            i = 0
        progress = phase.progress[i]
    terminal = terminal_at is not None
    poll_after = None if terminal else (phase.poll_after_ms or task.poll_after_ms)
    expired = terminal_at is not None and terminal_at + task.ttl_ms <= now
    settles = terminal_at if terminal else _settles(task, k, start)
    return TaskView(status, k, progress, poll_after, cancelling, terminal_at, expired, settles)


def keep_ms(task: Task, view: TaskView, now_ms: float) -> int:
    return task.ttl_ms + sum(p.duration_ms or 0 for p in task.life) + task.cancel_settle_ms


def _rfc3339(ms: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms % 1000):03d}Z"


def task_json(
    task: Task, view: TaskView, task_id: str, url: str, created_ms: float
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": task_id,
        "status": view.status,
        "status_url": url,
        "poll_after_ms": view.poll_after_ms,
        "created_at": _rfc3339(created_ms),
        "ttl_ms": task.ttl_ms,
    }
    if view.progress is not None:
        body["progress"] = view.progress
    if view.cancelling:
        body["cancelling"] = True
    reply = task.life[view.phase].reply
    if view.status == "completed" and reply is not None:
        body["result"] = json.loads(reply.body)
    if view.status == "failed" and reply is not None:
        body["error"] = json.loads(reply.body)["error"]
    return {"task": body}


def accepted_headers(url: str, view: TaskView) -> dict[str, str]:
    return {"Location": url, **state_headers(view)}


def state_headers(view: TaskView) -> dict[str, str]:
    if view.poll_after_ms is None:
        return {}
    return {"Retry-After": str(math.ceil(view.poll_after_ms / 1000))}
