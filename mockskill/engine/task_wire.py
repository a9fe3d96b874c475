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
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, retry_after_seconds
from ..scenario.model import JSON_TYPE, Reply, Task
from .tasks import TaskView

__all__ = [
    "StateText",
    "body",
    "created_at",
    "refused",
    "reply",
    "state_text",
    "status_path",
    "status_url",
    "task_json",
    "written",
]

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


MAX_KEPT_CREATED = 20_000
"""Tasks whose ``created_at`` text an answer finds kept: as many as a server holds live tasks
by default (``--max-tasks``), so that polls walking them all format each once."""
_created: dict[float, bytes] = {}


def _created_text(submitted_ms: float) -> bytes:
    """:func:`created_at` as a body writes it, made and kept (:func:`written` finds it)."""
    if len(_created) >= MAX_KEPT_CREATED:
        _created.clear()  # atomic, unlike evicting one: answers are made on threads
    text = _created[submitted_ms] = created_at(submitted_ms).encode()
    return text


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


class StateText(NamedTuple):
    """An answer's text around what varies per task, for one state of one skill's tasks
    (with ``{base_url}`` in it: :meth:`filled` puts an address's in)."""

    task: Task
    """Whose (the key holds its id: the entry holds it, so the id is not reused)."""
    status_part: bytes
    """After the id: the status, and the status URL up to the id."""
    created_part: bytes
    """After the status URL's id: ``poll_after_ms``, and up to ``created_at``'s value."""
    tail: bytes
    """After ``created_at``'s value: ``ttl_ms``, ``progress``, ``cancelling``, the outcome."""
    retry_after: tuple[tuple[str, str], ...]
    """The ``Retry-After`` header of a live status (empty on a terminal one)."""

    def filled(self, fill: Callable[[str], str]) -> StateText:
        """This text with its placeholders filled by *fill* (an address's
        :meth:`~.actions.Urls.fill_text`): a placeholder never spans two pieces, since
        what goes between them (an id mockskill made, ``created_at``) holds no brace."""
        return self._replace(
            status_part=fill(self.status_part.decode()).encode(),
            created_part=fill(self.created_part.decode()).encode(),
            tail=fill(self.tail.decode()).encode(),
        )


MAX_KEPT = 4096
"""States whose answer's text is kept (a scenario's states are few: its skills' phases, each
progress value, cancelling or not; beyond: made anew, then kept)."""
_kept: dict[tuple[int, str, str, int, int | None, bool, int | None], StateText] = {}
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]*")
"""What an id :mod:`.task_ids` makes is written with (nothing to escape in JSON)."""


def state_text(task: Task, view: TaskView, skill_id: str) -> StateText:
    """The text of *view*'s answers of *skill_id*'s tasks, made once per state: a poll's
    answer is then written from it, the id and ``created_at`` put in (what varies)."""
    key = (
        id(task),
        skill_id,
        view.status,
        view.phase,
        view.progress,
        view.cancelling,
        view.poll_after_ms,
    )
    kept = _kept.get(key)
    if kept is not None and kept.task is task:
        return kept
    dumps = json.dumps
    prefix = dumps(status_url(skill_id, ""))[:-1]  # (up to the id; escaping is per character)
    status_part = f'", "status": {dumps(view.status)}, "status_url": {prefix}'
    created_part = '"'
    if view.poll_after_ms is not None:
        created_part += f', "poll_after_ms": {view.poll_after_ms}'
    created_part += ', "created_at": "'
    tail = f'", "ttl_ms": {task.ttl_ms}'
    if view.progress is not None:
        tail += f', "progress": {view.progress}'
    if view.cancelling:
        tail += ', "cancelling": true'
    outcome = _outcome(task, view)
    if outcome is not None:
        tail += f', "{outcome[0]}": {_outcome_text(outcome[0], outcome[1])}'
    retry_after: tuple[tuple[str, str], ...] = ()
    if view.poll_after_ms is not None:
        retry_after = (("Retry-After", str(retry_after_seconds(view.poll_after_ms))),)
    kept = StateText(
        task, status_part.encode(), created_part.encode(), (tail + "}}").encode(), retry_after
    )
    if len(_kept) >= MAX_KEPT:
        _kept.clear()  # atomic, unlike evicting one: answers are made on threads
    _kept[key] = kept
    return kept


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
    # Made on every poll: the text of its state is kept (:func:`state_text`), and only the id
    # and created_at are written in. The body is :func:`task_json`'s, which a test holds
    # it to.
    kept = state_text(task, view, skill_id)
    headers = kept.retry_after
    if status == 202:
        headers = (("Location", status_url(skill_id, task_id)), *headers)
    # Its status URL holds {base_url}: filled per request, like every templated reply.
    return Reply(status, headers, body(kept, task_id, submitted_ms), JSON_TYPE, templated=True)


def body(text: StateText, task_id: str, submitted_ms: float) -> bytes:
    """The body of an answer carrying the task *task_id* submitted at *submitted_ms*, in
    the state whose *text* it is (:func:`state_text`, filled or not)."""
    if _PLAIN_ID.fullmatch(task_id) is None:  # (never one of ours: written as JSON)
        shown = json.dumps(task_id)[1:-1].encode()
    else:
        shown = task_id.encode()
    return written(text, shown, submitted_ms)


def written(text: StateText, task_id: bytes, submitted_ms: float) -> bytes:
    """:func:`body`, from the id as written in JSON (*task_id*)."""
    created = _created.get(submitted_ms)  # (kept per task: polls walking them all format none)
    if created is None:
        created = _created_text(submitted_ms)
    status_part, created_part, tail = text[1:4]
    return b"".join(
        (b'{"task": {"id": "', task_id, status_part, task_id, created_part, created, tail)
    )


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
