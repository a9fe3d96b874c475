"""A task watched as a stream of its state changes, planned from its life (docs/tasks.md,
"Watching a task").

A ``GET`` of a status URL whose ``Accept`` asks for a stream (:func:`watch_format`) of a
task skill with ``watch:`` (the default) is a *watch*: the task as it is now, then one event
per status change as its life reaches it, until a terminal status. Everything here is pure:

- each change has a number fixed by its place in the life (:func:`change_number`): the
  status the task was submitted in is 0, each phase entered with a status unlike the one
  before counts one, and ``cancelled`` by a cancel is one past the life's last change (a
  task ends once, so it never meets a later one). The number is the event's id, so a
  ``Last-Event-ID`` names a change, and nothing is kept per watch;
- :func:`segment` plans, from the store's record, the events the life makes from now if
  nothing disturbs it (their times from :func:`.callbacks.change_moments`), as a
  :class:`~.plan.StreamPlay` framed by :mod:`.streams`; a live task's play ends ``open``
  (held with heartbeats), a terminal one's ``complete``;
- the transport re-reads the record when the plan says (:attr:`Segment.reread_ms`: a
  cancel or an input on another replica is seen then; one on this replica at once) and
  plays the new segment in place of what was left (:mod:`mockskill.transport.task_watches`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..scenario.model import MIN_IDLE_BOUND_MS, Reply, StreamEvent, Task
from ..scenario.source import Position
from . import callbacks, streams, tasks
from .actions import Urls
from .plan import Outcome, StreamPiece, StreamPlay
from .store import TaskRecord, Touch
from .task_skills import TaskSkill
from .wire import Answer

__all__ = [
    "MIN_REREAD_MS",
    "Segment",
    "TaskWatch",
    "change_number",
    "first",
    "head",
    "journalled_stream",
    "look",
    "polled",
    "resumed_after",
    "segment",
    "served",
    "status_of",
    "watch_format",
]

MIN_REREAD_MS = 50
"""The shortest time between two reads of a watched task's record (a ``poll_after`` shorter
than this is not a reason to ask the store in a tight loop)."""
_NOWHERE = Position("", 0, 0)
"""A watch's events come from no scenario line."""


def watch_format(accept: str | None) -> str | None:
    """The stream format *accept* asks for by name (``text/event-stream``: ``sse``,
    ``application/x-ndjson``: ``ndjson``) with a quality above ``application/json``'s; None:
    a plain poll (no ``Accept``, ``*/*``, JSON preferred or as good: a client that takes
    either gets the answer a poller gets)."""
    if not accept or "/" not in accept:
        return None
    best, best_q, json_q = None, 0.0, 0.0
    for media, q in streams.accepted(accept):
        if media in ("application/json", "application/*"):
            json_q = max(json_q, q)
        fmt = streams.MEDIA_TYPES.get(media)
        if fmt is not None and q > best_q:
            best, best_q = fmt, q
    return best if best is not None and best_q > json_q else None


def _changes(task: Task) -> int:
    """The status changes the whole life makes (its last phase's number)."""
    life = task.life
    return sum(1 for k in range(1, len(life)) if life[k].status != life[k - 1].status)


def change_number(task: Task, view: tasks.TaskView) -> int:
    """The number of the change that brought the task to *view*'s status (module docstring)."""
    if view.status == "cancelled" and task.life[view.phase].status != "cancelled":
        return _changes(task) + 1
    life = task.life
    return sum(1 for k in range(1, view.phase + 1) if life[k].status != life[k - 1].status)


def status_of(task: Task, number: int) -> str | None:
    """The status change *number* brings the task to (None: no change has that number)."""
    if number == _changes(task) + 1:
        return "cancelled"
    life = task.life
    seen = 0
    if number == 0:
        return life[0].status
    for k in range(1, len(life)):
        if life[k].status != life[k - 1].status:
            seen += 1
            if seen == number:
                return life[k].status
    return None


def resumed_after(task: Task, last_event_id: str | None) -> int | None:
    """The change a ``Last-Event-ID`` names, when it names one of *task*'s (None: none sent,
    or not a change's number: the watch starts with the task as it is now)."""
    if last_event_id is None:
        return None
    text = last_event_id.strip()
    if not text.isdigit() or len(text) > 6:
        return None
    number = int(text)
    return number if status_of(task, number) is not None else None


@dataclass(frozen=True)
class TaskWatch:
    """What the transport needs to follow a watch: the task (session, number, id, skill),
    how its answers' URLs are filled, the format, and the change it resumed after."""

    session: str
    number: int
    task_id: str
    tasked: TaskSkill
    urls: Urls
    format: str
    submitted_ms: float
    asked_from: str | None = None
    """The request's ``Last-Event-ID`` as sent (None: none)."""
    resumed_from: int | None = None
    """The change it resumed after (None: it began with the task as it is)."""
    record: TaskRecord | None = None
    """The store's reading its first events were planned from."""
    reread_ms: float | None = None
    """When the transport first reads the record again (:attr:`Segment.reread_ms` of the
    first segment)."""


class Segment(NamedTuple):
    """A watch's events from one reading of the record: the play, and when to read the record
    again (ms from now; None: only this replica's requests change it, or it is over)."""

    play: StreamPlay
    reread_ms: float | None


def look(watch: TaskWatch) -> Touch:
    """The store's read of the watched task: nothing counted, kept as a poll keeps it."""
    tasked = watch.tasked
    return Touch(watch.session, watch.number, "look", tasked.keep_ms, tasked.skill)


def head(fmt: str) -> Answer:
    """A watch's status and headers."""
    return Answer(
        200, (("Content-Type", streams.CONTENT_TYPES[fmt]), ("Cache-Control", "no-cache"))
    )


def _event(watch: TaskWatch, view: tasks.TaskView) -> StreamPiece:
    """The event of the change to *view*: named by its status, its id the change's number,
    its data the body a poll answers with then."""
    tasked = watch.tasked
    body = watch.urls.fill(tasked.reply(200, view, watch.task_id, watch.submitted_ms)).body
    number = str(change_number(tasked.task, view))
    event = StreamEvent(_NOWHERE, body.decode(), view.status, number, is_json=True)
    return StreamPiece(0.0, streams.frame(watch.format, event), number)


def segment(watch: TaskWatch, record: TaskRecord | None, after: int | None) -> Segment:
    """The watch's events from *record* (the store's reading, at its ``now_ms``) on, after
    change *after* (None: the task as it is now first): the change it is at when its number
    is above *after*, then each change its life makes by time, up to a terminal one. A task
    the store holds no more, or expired, ends the watch with no more events.

    A cancel or an input (on this replica or another, on a shared store) changes the task
    too: while it is live, the record is to be read again after the ``Retry-After`` a poll
    of it is advised (at least :data:`MIN_REREAD_MS`), the cadence a well-behaved poller
    would cost the store; this replica's own requests tell the watch at once."""
    tasked = watch.tasked
    task = tasked.task
    heartbeat = float(task.watch_heartbeat_ms)
    beat = streams.HEARTBEATS[watch.format]
    if record is None:
        return Segment(StreamPlay((), "complete", heartbeat, beat), None)
    now = tasks.view(task, record)
    if now.expired:
        return Segment(StreamPlay((), "complete", heartbeat, beat), None)
    pieces: list[StreamPiece] = []
    sent = after
    if sent is None or change_number(task, now) > sent:
        pieces.append(_event(watch, now))
        sent = change_number(task, now)
    view, at = now, record.now_ms
    if not view.terminal:
        for moment in callbacks.change_moments(task, record):
            if moment <= record.now_ms:
                continue
            view = tasks.view(task, record._replace(now_ms=moment))
            number = change_number(task, view)
            if number > sent:
                pieces.append(_event(watch, view)._replace(delay_ms=moment - at))
                sent, at = number, moment
            if view.terminal:
                break
    ending = "complete" if view.terminal else "open"
    reread = None
    if not now.terminal:
        advised = now.poll_after_ms if now.poll_after_ms is not None else task.poll_after_ms
        reread = float(max(MIN_REREAD_MS, advised))
    return Segment(StreamPlay(tuple(pieces), ending, heartbeat, beat), reread)


def first(watch: TaskWatch) -> tuple[Answer, TaskWatch, StreamPlay]:
    """A watch's head, the watch as the transport follows it (when to read the record
    first), and its first events (from the reading it was decided on)."""
    begun = segment(watch, watch.record, watch.resumed_from)
    return head(watch.format), dataclasses.replace(watch, reread_ms=begun.reread_ms), begun.play


def served(watch: TaskWatch, task_journal: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """A watch's ``Entry.task`` once played: the status of the last change it sent (the
    status it was at when it sent none)."""
    streamed = outcome.stream
    last = None if streamed is None else streamed.last_id
    status = None if last is None else status_of(watch.tasked.task, int(last))
    return task_journal if status is None else {**task_journal, "status": status}


def polled(watch: TaskWatch) -> Reply:
    """The task as a poll answers it, from the reading the watch was decided on: what a
    server that plays no stream (a WSGI server mounting the app) answers a watch with."""
    record = watch.record
    assert record is not None
    tasked = watch.tasked
    view = tasks.view(tasked.task, record)
    return watch.urls.fill(tasked.reply(200, view, watch.task_id, record.submitted_ms))


def journalled_stream(watch: TaskWatch, outcome: Outcome) -> dict[str, Any]:
    """``Entry.stream`` of a watch that went as *outcome* says: a watch has no fault, is
    resumable, and is expected to last no set time (leaving it is no giving up)."""
    heartbeat = watch.tasked.task.watch_heartbeat_ms
    return {
        "format": watch.format,
        **streams.reported(outcome),
        "fault": None,
        "fault_after": None,
        "asked_from": watch.asked_from,
        "resumed_from": None if watch.resumed_from is None else str(watch.resumed_from),
        "resumable": True,
        "retry_ms": None,
        "idle_bound_ms": max(MIN_IDLE_BOUND_MS, 3 * heartbeat),
        "expected_ms": 0,
        "watch": watch.task_id,
    }
