"""A task on the wire: the JSON every answer on a task carries, its headers, its refusals.

docs/tasks.md describes this once. Each answer is a :class:`~.model.Reply` with
``{base_url}`` placeholders (the status URL is absolute), filled per request like every
other answer's. The body is ``{"task": {...}}``: ``id``, ``status``, ``status_url``,
``created_at`` (RFC 3339, UTC), ``ttl_ms``; ``poll_after_ms`` on a live status (the answer's
``Retry-After`` too, in whole seconds rounded up); ``progress`` where the phase scripts it;
``cancelling: true`` while a cancel settles; ``result`` on ``completed`` (the JSON its phase
scripts) and ``error`` on ``failed`` (the unified body's error object, retry advice
included). The 202s (a submit, a cancel settling, an input) carry ``Location``.
"""

from __future__ import annotations

import datetime
import functools
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, retry_after_seconds
from ..scenario.model import Reply, Task
from .tasks import TaskView

__all__ = ["created_at", "refused", "reply", "status_path", "status_url", "task_json"]

MAX_SHOWN_ID = 128
"""Characters of a task id as sent that a refusal echoes (a hostile one may be long)."""


def status_path(skill_id: str, task_id: str) -> str:
    """The path of a task's status URL (its cancel alias adds ``/cancel``)."""
    return f"/skills/{skill_id}/tasks/{task_id}"


def status_url(skill_id: str, task_id: str) -> str:
    """A task's status URL, with ``{base_url}`` to fill per request."""
    return BASE_URL + status_path(skill_id, task_id)


def created_at(submitted_ms: float) -> str:
    """*submitted_ms* (epoch ms) in RFC 3339, UTC, to the millisecond: ``...T09:30:39.123Z``."""
    when = datetime.datetime.fromtimestamp(submitted_ms / 1000, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


@functools.lru_cache(maxsize=256)
def _json_of(body: bytes) -> Any:
    """A scripted reply's body as JSON (the model's replies are few; each is parsed once)."""
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def _outcome(task: Task, view: TaskView) -> tuple[str, Any] | None:
    """``("result", ...)`` or ``("error", ...)`` for a completed or failed task."""
    if view.status not in ("completed", "failed"):
        return None
    scripted = task.life[view.phase].reply
    if view.status == "completed":
        return "result", None if scripted is None else _json_of(scripted.body)
    if scripted is None:
        rendered = catalog.render("EXECUTION_TIMEOUT")
        return "error", json.loads(rendered.body)["error"]
    body = _json_of(scripted.body)
    return "error", body.get("error", body) if isinstance(body, dict) else body


def task_json(
    task: Task, view: TaskView, *, skill_id: str, task_id: str, submitted_ms: float
) -> dict[str, Any]:
    """The task as an answer carries it (the value of ``"task"``)."""
    out: dict[str, Any] = {
        "id": task_id,
        "status": view.status,
        "status_url": status_url(skill_id, task_id),
    }
    if view.poll_after_ms is not None:
        out["poll_after_ms"] = view.poll_after_ms
    out["created_at"] = created_at(submitted_ms)
    out["ttl_ms"] = task.ttl_ms
    if view.progress is not None:
        out["progress"] = view.progress
    if view.cancelling:
        out["cancelling"] = True
    outcome = _outcome(task, view)
    if outcome is not None:
        out[outcome[0]] = outcome[1]
    return out


def reply(
    task: Task,
    view: TaskView,
    *,
    skill_id: str,
    task_id: str,
    submitted_ms: float,
    status: int = 200,
) -> Reply:
    """An answer carrying the task: 202 for a submit, a cancel settling or an input (with
    ``Location``), 200 for a poll or a cancel done at once. ``Retry-After`` on a live
    status."""
    headers: dict[str, str] = {}
    if status == 202:
        headers["Location"] = status_url(skill_id, task_id)
    if view.poll_after_ms is not None:
        headers["Retry-After"] = str(retry_after_seconds(view.poll_after_ms))
    body = {
        "task": task_json(task, view, skill_id=skill_id, task_id=task_id, submitted_ms=submitted_ms)
    }
    return Reply.json(status, body, headers)


def refused(
    code: str,
    *,
    task_id: str,
    skill_id: str | None = None,
    task: Task | None = None,
    view: TaskView | None = None,
    details: Mapping[str, Any] | None = None,
) -> Reply:
    """A request on a task refused with one of :data:`~.catalog.TASK_CODES`, in the unified
    body: its details name the task (its id as sent, bounded, percent-encoded) and its
    skill; for a task handed out (*view*), its status URL and status, and the statuses it
    may be cancelled in. *details* add to them (``failed``: the conditions an input did not
    meet)."""
    # As in a URL: percent-encoded, so that no placeholder of an answer is in it.
    shown = urllib.parse.quote(task_id[:MAX_SHOWN_ID], safe="-._~!$&'()*+,;=:@/")
    found: dict[str, Any] = {"task_id": shown[:MAX_SHOWN_ID]}
    if skill_id is not None:
        found["skill_id"] = skill_id
    if view is not None:  # a task handed out: its URL and where it stands
        if skill_id is not None:
            found["status_url"] = status_url(skill_id, task_id)
        found["status"] = view.status
    if task is not None and code == catalog.TASK_NOT_CANCELLABLE.code:
        found["cancellable"] = list(task.cancellable)
    if details:
        found.update(details)
    return Reply.error(catalog.render(code, details=found, retry=None))
