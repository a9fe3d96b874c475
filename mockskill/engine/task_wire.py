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

import functools
import json
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, retry_after_seconds
from ..scenario.model import JSON_TYPE, Reply, Task
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


@functools.lru_cache(maxsize=4096)
def _second(second: int) -> str:
    # Tasks submitted in one second share it: formatting a time is most of a poll's text.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def created_at(submitted_ms: float) -> str:
    """*submitted_ms* (epoch ms) in RFC 3339, UTC, to the millisecond: ``...T09:30:39.123Z``."""
    second, ms = divmod(int(submitted_ms), 1000)
    return f"{_second(second)}.{ms:03d}Z"


def _outcome(task: Task, view: TaskView) -> tuple[str, bytes | None] | None:
    """``("result", body)`` or ``("error", body)`` for a completed or failed task: the
    body of the reply its phase scripts (None: none scripted)."""
    if view.status not in ("completed", "failed"):
        return None
    scripted = task.life[view.phase].reply
    body = None if scripted is None else scripted.body
    return ("result" if view.status == "completed" else "error"), body


@functools.lru_cache(maxsize=256)
def _outcome_value(key: str, body: bytes | None) -> Any:
    """The value of ``result`` or ``error`` (the model's replies are few: each is read once)."""
    if body is None:
        if key == "result":
            return None
        return json.loads(catalog.render("EXECUTION_TIMEOUT").body)["error"]
    try:
        value = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
    if key == "error" and isinstance(value, dict):
        return value.get("error", value)  # the unified body's error object
    return value


@functools.lru_cache(maxsize=256)
def _outcome_text(key: str, body: bytes | None) -> str:
    return json.dumps(_outcome_value(key, body))


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
        out[outcome[0]] = _outcome_value(*outcome)
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
    url = status_url(skill_id, task_id)
    headers: tuple[tuple[str, str], ...] = ()
    if status == 202:
        headers = (("Location", url),)
    if view.poll_after_ms is not None:
        headers += (("Retry-After", str(retry_after_seconds(view.poll_after_ms))),)
    # Written out rather than dumped whole: a poll's answer is made on every poll. The
    # body is :func:`task_json`'s, which a test holds it to.
    dumps = json.dumps
    text = (
        f'{{"task": {{"id": {dumps(task_id)}, "status": {dumps(view.status)},'
        f' "status_url": {dumps(url)}'
    )
    if view.poll_after_ms is not None:
        text += f', "poll_after_ms": {view.poll_after_ms}'
    text += f', "created_at": "{created_at(submitted_ms)}", "ttl_ms": {task.ttl_ms}'
    if view.progress is not None:
        text += f', "progress": {view.progress}'
    if view.cancelling:
        text += ', "cancelling": true'
    outcome = _outcome(task, view)
    if outcome is not None:
        text += f', "{outcome[0]}": {_outcome_text(outcome[0], outcome[1])}'
    # Its status URL holds {base_url}: filled per request, like every templated reply.
    return Reply(status, headers, (text + "}}").encode(), JSON_TYPE, templated=True)


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
