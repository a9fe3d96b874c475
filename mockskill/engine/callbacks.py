"""A task's callbacks decided: where they go, which changes are pushed when, what each says.

The engine's side of ``task: callback:`` (docs/tasks.md, "Callbacks"); the courier
(:mod:`mockskill.transport.courier`) does the sending. Everything here is pure:

- at submit, :func:`receiver` reads the receiver's URL from the invoke (a header, or a JSON
  Pointer into its body) and the server's :class:`~.callback_hosts.CallbackHosts` judge
  whether mockskill may call it (loopback, or a host of ``--callback-allow``; no DNS lookup
  decides it): a refused one is answered 422 ``TASK_CALLBACK_REFUSED``
  (:func:`refused_reply`) and no task starts;
- :func:`observe` finds the task's status changes up to a moment from the store's record
  (:func:`.tasks.view` at each moment its life may move on: :func:`change_moments`), and
  :func:`deliveries` turns each change into the deliveries its scripted fault makes
  (``faults[n % len]`` for the session's task *n*: :func:`fault_of`);
- :func:`body` and :func:`signature` make one attempt's bytes and its HMAC-SHA256, and
  :func:`retry_after_ms` its backoff; :func:`journalled` is its journal entry's ``task``.

A change made by a poll, a cancel or an input is known when that request touches the task
(the engine hands the courier the record: :class:`Notice`); a change made by time is known
from the record before it happens, so the courier sets a timer for :func:`next_moment`.

Across replicas (a shared store): the submit keeps with the task what any replica needs to
send its callbacks (:func:`follow_text`); a request touching the task on another replica
hands that replica's courier a whole notice (:func:`followed`), so each replica that served
the task follows it. They all find the same changes (a task's state is a function of its
record) and plan the same deliveries; each attempt is sent by the replica whose
:class:`~.store.Claim` of it (:func:`claim_key`) the store answers first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
from typing import Any, NamedTuple

from ..protocol import catalog
from ..scenario.model import Reply, Task, TaskCallback
from ..scenario.when import parse_pointer
from . import tasks
from .actions import Urls
from .callback_hosts import CallbackHosts, Receiver, Refused
from .conditions import ABSENT, resolve
from .incoming import Incoming
from .store import TaskRecord
from .task_skills import TaskSkill

__all__ = [
    "Course",
    "Delivery",
    "Notice",
    "body",
    "change_moments",
    "claim_key",
    "deliveries",
    "fault_of",
    "follow_text",
    "followed",
    "journalled",
    "next_moment",
    "observe",
    "receiver",
    "refused_reply",
    "retry_after_ms",
    "signature",
    "started",
]

MAX_SHOWN_URL = 128
"""Characters of a refused URL its 422 echoes (a hostile one may be long)."""


def receiver(callback: TaskCallback, request: Incoming) -> object:
    """The receiver's URL the invoke carries where ``callback.url_from`` says (a body's
    value as it is: not always a string); None: it carries none (the task is polled only)."""
    kind, name = callback.url_from
    if kind == "header":
        return request.header(name)
    pointer = parse_pointer(name)
    if pointer is None:  # (the loader checks it)
        return None
    try:
        document = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return None
    value = resolve(document, pointer)
    return None if value is ABSENT else value


def refused_reply(skill_id: str, refused: Refused) -> Reply:
    """422 ``TASK_CALLBACK_REFUSED``: the invoke's receiver may not be called
    (:meth:`.callback_hosts.CallbackHosts.judge` said why)."""
    shown = urllib.parse.quote(refused.url[:MAX_SHOWN_URL], safe=":/?&=%.-_~@[]")
    details = {"url": shown, "reason": refused.reason, "skill_id": skill_id}
    return Reply.error(catalog.render("TASK_CALLBACK_REFUSED", details=details, retry=None))


def fault_of(callback: TaskCallback, number: int) -> str:
    """The fault of the session's task *number*: the skill's faults in turn."""
    return callback.faults[number % len(callback.faults)]


class Notice(NamedTuple):
    """What the engine tells the courier of a task with callbacks: its submit (with its
    receiver and fault), or a request that touched it (its record as the store answered)."""

    session: str
    number: int
    task_id: str
    tasked: TaskSkill
    record: TaskRecord
    urls: Urls
    """How its answers' URLs are filled (the submit's request's address)."""
    receiver: Receiver | None = None
    """The receiver (a submit's; None on a touch)."""
    fault: str = "none"
    scenario: str | None = None


def follow_text(receiver: Receiver, urls: Urls, scenario: str | None) -> str:
    """What a task with a receiver keeps in the store (:attr:`.store.Submit.callback`) for
    any replica to follow it: the receiver's URL, the submit's :class:`~.actions.Urls` (a
    delivery's URLs are the submit's, whichever replica sends it) and its scenario."""
    return json.dumps(
        {
            "url": receiver.url,
            "urls": [urls.base, urls.refused, [list(pair) for pair in urls.tls]],
            "scenario": scenario,
        },
        separators=(",", ":"),
    )


def followed(touched: Notice, hosts: CallbackHosts, callback: TaskCallback) -> Notice | None:
    """*touched* (a request's notice, its record as the store answered) made whole from
    what the submit kept (:func:`follow_text`), for a courier that does not follow the task
    yet: its receiver (judged by this server's *hosts*: one it may not call is not
    followed here), its fault, the submit's URLs and scenario. None: it has no receiver."""
    text = touched.record.callback
    if not text:
        return None
    kept = json.loads(text)
    judged = hosts.judge(kept["url"])
    if isinstance(judged, Refused):
        return None
    base, refused, tls = kept["urls"]
    urls = Urls(base, refused, tuple((placeholder, url) for placeholder, url in tls))
    fault = fault_of(callback, touched.number)
    return touched._replace(urls=urls, receiver=judged, fault=fault, scenario=kept["scenario"])


class Course(NamedTuple):
    """How far a task's changes have been found: the status and phase last seen and when,
    the phase it was submitted in, and the change an ``out_of_order`` fault holds back."""

    status: str
    at_ms: float
    phase: int = 0
    first: int = 0
    """The phase its 202 answered (changes are numbered from the one after it)."""
    held: Delivery | None = None


class Delivery(NamedTuple):
    """One change's delivery, due at *due_ms* (epoch ms)."""

    sequence: int
    view: tasks.TaskView
    changed_ms: float
    due_ms: float
    forged: bool = False
    copy: int = 0
    """Which of the change's copies (``twice``: 0 and 1)."""


def claim_key(delivery: Delivery, attempt: int) -> str:
    """The key an attempt is claimed by (:class:`~.store.Claim`): the same on every replica
    that plans it."""
    return f"{delivery.sequence}.{delivery.copy}.{attempt}"


def started(task: Task, record: TaskRecord) -> Course:
    """A task's course at its submission (*record*: any of its records): the status its 202
    answered is not a change (``submitted``, or the first phase's), so never pushed."""
    view = tasks.view(task, _as_at(record, record.submitted_ms))
    return Course(view.status, record.submitted_ms, view.phase, view.phase)


def _as_at(record: TaskRecord, moment: float) -> TaskRecord:
    """*record* as it was at *moment* (one that read it later may look back): the events
    logged after it not yet happened, and the polls those found counted (what is known of
    the polls at *moment*: docs/tasks.md, "The life's clock, exactly")."""
    events, polls = record.events, record.polls
    if events and events[-1].at_ms > moment:
        before = tuple(event for event in events if event.at_ms <= moment)
        polls = events[len(before)].polls
        events = before
    return record._replace(now_ms=moment, events=events, polls=polls)


def change_moments(task: Task, record: TaskRecord) -> list[float]:
    """Every moment at which the task's life may move on by time alone, from its record:
    the known moments (its submission, each cancel or input) plus each run of ``for:``
    times after them, and each cancel's settle end. Sorted."""
    starts = [record.submitted_ms] + [event.at_ms for event in record.events]
    offsets: set[int] = set()
    life = task.life
    for first in range(len(life)):
        total = 0
        for phase in life[first:]:
            if phase.duration_ms is None:
                break
            total += phase.duration_ms
            offsets.add(total)
    moments = {start + offset for start in starts for offset in offsets}
    moments.update(e.at_ms + task.cancel_settle_ms for e in record.events if e.action == "cancel")
    return sorted(moments)


def next_moment(task: Task, record: TaskRecord, after_ms: float) -> float | None:
    """The first moment after *after_ms* at which the task may change by time (None: only a
    request moves it on, or its life is over)."""
    for moment in change_moments(task, record):
        if moment > after_ms:
            return moment
    return None


def observe(
    course: Course, callback: TaskCallback, task: Task, record: TaskRecord, until_ms: float
) -> tuple[Course, list[tuple[float, tasks.TaskView, int]]]:
    """The task's changes after ``course.at_ms`` up to *until_ms* (its state at each moment
    it may have changed, then at *until_ms*), as (moment, view, sequence) of those pushed
    (``callback.on``); and the course after them.

    A change is a phase of the life entered with a status unlike the phase before it, or
    a cancel's ``cancelled``; its number is its place on the life's way (:func:`_number`),
    so every replica numbers it alike, however late it reads the record. A phase passed
    between two looks (polls made on another replica) is a change too, shown as it was
    entered (:func:`_entered`)."""
    found: list[tuple[float, tasks.TaskView, int]] = []
    life = task.life
    moments = [m for m in change_moments(task, record) if course.at_ms < m < until_ms]
    for moment in (*moments, until_ms):
        view = tasks.view(task, _as_at(record, moment))
        for index in range(course.phase + 1, view.phase + 1):
            status = life[index].status
            if status != life[index - 1].status and status in callback.on:
                shown = view if view.phase == index and view.status == status else None
                shown = shown or _entered(task, index)
                found.append((moment, shown, _number(task, callback, course.first, index)))
        by_cancel = view.status == "cancelled" and life[view.phase].status != "cancelled"
        if by_cancel and course.status != "cancelled" and "cancelled" in callback.on:
            found.append((moment, view, _number(task, callback, course.first, view.phase + 1)))
        course = course._replace(status=view.status, phase=view.phase)
    return course._replace(at_ms=until_ms), found


def _number(task: Task, callback: TaskCallback, first: int, index: int) -> int:
    """The number of a change made before phase *index* is entered: how many changes the
    life makes after phase *first* (its submission's) and before *index*."""
    life = task.life
    return sum(
        1
        for k in range(first + 1, index)
        if life[k].status != life[k - 1].status and life[k].status in callback.on
    )


def _entered(task: Task, index: int) -> tasks.TaskView:
    """Phase *index* (not terminal) as a poll just after it began would show it."""
    phase = task.life[index]
    poll_after = phase.poll_after_ms if phase.poll_after_ms is not None else task.poll_after_ms
    progress = phase.progress[0] if phase.progress else None
    return tasks.TaskView(phase.status, index, progress, poll_after, False, None, False, None)


def deliveries(
    course: Course, callback: TaskCallback, fault: str, change: tuple[float, tasks.TaskView, int]
) -> tuple[Course, list[Delivery]]:
    """The deliveries *change* makes under *fault*, and the course after it: at its moment
    (``none``, ``forged`` signed wrongly), twice (``twice``), ``late_by`` after it
    (``late``), held until the next change and sent after it (``out_of_order``; a terminal
    change with none held is sent at once), or none (``never``)."""
    moment, view, sequence = change
    now = Delivery(sequence, view, moment, moment, forged=fault == "forged")
    if fault == "never":
        return course, []
    if fault == "twice":
        return course, [now, now._replace(copy=1)]
    if fault == "late":
        return course, [now._replace(due_ms=moment + callback.late_ms)]
    if fault == "out_of_order":
        held = course.held
        if held is None:
            if view.terminal:  # no change follows to swap it with
                return course, [now]
            return course._replace(held=now), []
        return course._replace(held=None), [now, held._replace(due_ms=moment)]
    return course, [now]


def body(notice: Notice, delivery: Delivery, attempt: int) -> bytes:
    """An attempt's body: the task as a poll answers it, and the delivery's number and
    attempt: ``{"task": {...}, "delivery": {"sequence": n, "attempt": k}}``."""
    tasked = notice.tasked
    answer = notice.urls.fill(
        tasked.reply(200, delivery.view, notice.task_id, notice.record.submitted_ms)
    )
    text = answer.body
    assert text.endswith(b"}")
    tail = b', "delivery": {"sequence": %d, "attempt": %d}}' % (delivery.sequence, attempt)
    return text[:-1] + tail


FORGED_PREFIX = b"forged:"
"""Prepended to the secret for a ``forged`` delivery: a key the receiver does not hold."""


def signature(callback: TaskCallback, payload: bytes, forged: bool = False) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of *payload* under
    the secret (under another key when *forged*)."""
    key = callback.secret.encode()
    if forged:
        key = FORGED_PREFIX + key
    return "sha256=" + hmac.new(key, payload, hashlib.sha256).hexdigest()


def retry_after_ms(callback: TaskCallback, attempt: int) -> int | None:
    """The wait after attempt *attempt* (0-based) failed: the backoff, doubled per retry;
    None: the attempts are spent."""
    if attempt + 1 >= callback.attempts:
        return None
    return callback.backoff_ms << attempt


def journalled(
    notice: Notice,
    delivery: Delivery,
    attempt: int,
    *,
    fault: str,
    acknowledged: bool,
    sent_ms: float,
    receiver: str,
) -> dict[str, Any]:
    """An attempt's ``Entry.task`` (entries.py's docstring)."""
    view = delivery.view
    return {
        "id": notice.task_id,
        "action": "callback",
        "known": True,
        "expired": False,
        "served": True,
        "status": view.status,
        "cancelling": view.cancelling,
        "progress": view.progress,
        "poll": None,
        "poll_after_ms": view.poll_after_ms,
        "terminal_at_ms": view.terminal_at_ms,
        "delivery": delivery.sequence,
        "attempt": attempt,
        "pushed": view.status,
        "fault": fault,
        "forged": delivery.forged,
        "acknowledged": acknowledged,
        "late_ms": max(0, round(sent_ms - delivery.changed_ms)),
        "receiver": receiver,
    }
