"""A task's callbacks decided (engine/callbacks.py), as far as replicas share them.

Any replica that serves a request of a task follows its callbacks: what the submit kept
makes the request's notice whole, and every replica finds the same changes and names the
same deliveries, whatever record it read last.
"""

from __future__ import annotations

import dataclasses

from mockskill import load_text
from mockskill.engine import callbacks
from mockskill.engine.actions import Urls
from mockskill.engine.callback_hosts import CallbackHosts, Receiver
from mockskill.engine.callbacks import Course, Delivery, Notice
from mockskill.engine.store import TaskEvent, TaskRecord
from mockskill.engine.task_skills import TaskSkill
from mockskill.scenario.model import Reply, Task, TaskCallback, TaskPhase
from mockskill.scenario.source import Position

HERE = Position("tasks.yaml", 1, 1)
T0 = 1_764_840_000_000.0
CALLBACK = TaskCallback(("header", "X-Callback-Url"), HERE, secret="s", faults=("none", "twice"))
TASK = Task(
    life=(
        TaskPhase("submitted", HERE, duration_ms=100),
        TaskPhase("working", HERE, duration_ms=1000),
        TaskPhase("completed", HERE, reply=Reply.json(200, {"done": True})),
    ),
    where=HERE,
    cancellable=("submitted", "working"),
    callback=CALLBACK,
)
URLS = Urls("http://127.0.0.1:8000", None, (("{tls_base_url:x}", "https://127.0.0.1:8443"),))
HOOK = "http://127.0.0.1:9000/hook"
SKILL = load_text(
    "skills: [{id: report, task: {life: [{status: completed, json: {}}]}}]", "t.yaml"
).skills[0]


def record(at: float, *events: TaskEvent, callback: str = "") -> TaskRecord:
    return TaskRecord("sc/report", T0, 0, events, T0 + at, callback)


def touched(number: int, kept: str, urls: Urls | None = None) -> Notice:
    """A request's notice on a replica that did not take the submit (its own URLs)."""
    tasked = TaskSkill.of(dataclasses.replace(SKILL, task=TASK))
    assert tasked is not None
    own = urls or Urls("http://127.0.0.1:8001")
    return Notice("s", number, "id", tasked, record(500, callback=kept), own)


def receiver() -> Receiver:
    judged = CallbackHosts().judge(HOOK)
    assert isinstance(judged, Receiver)
    return judged


def test_a_touch_on_another_replica_is_made_whole_from_what_the_submit_kept() -> None:
    kept = callbacks.follow_text(receiver(), URLS, "sc")
    whole = callbacks.followed(touched(1, kept), CallbackHosts(), CALLBACK)
    assert whole is not None
    assert whole.receiver == receiver()
    assert whole.urls == URLS  # the submit's, not this replica's
    assert whole.scenario == "sc"
    assert whole.fault == "twice"  # task 1's, as on the replica that took the submit
    assert whole.record.callback == kept


def test_a_task_without_a_receiver_is_not_followed() -> None:
    assert callbacks.followed(touched(0, ""), CallbackHosts(), CALLBACK) is None


def test_a_replica_that_may_not_call_the_receiver_does_not_follow() -> None:
    allowed = CallbackHosts.of(["hooks.example"])
    judged = allowed.judge("http://hooks.example/hook")
    assert isinstance(judged, Receiver)
    kept = callbacks.follow_text(judged, URLS, None)
    assert callbacks.followed(touched(0, kept), allowed, CALLBACK) is not None
    assert callbacks.followed(touched(0, kept), CallbackHosts(), CALLBACK) is None


def test_twice_copies_and_each_attempt_have_their_own_claim() -> None:
    course = Course("submitted", T0)
    view = callbacks.observe(course, CALLBACK, TASK, record(200), T0 + 200)[1][0]
    _, planned = callbacks.deliveries(course, CALLBACK, "twice", view)
    keys = {callbacks.claim_key(d, attempt) for d in planned for attempt in (0, 1)}
    assert keys == {"0.0.0", "0.0.1", "0.1.0", "0.1.1"}


def test_a_follower_reading_a_newer_record_finds_the_same_changes() -> None:
    """A cancel logged at 600 ms does not reach back to the moments before it: a replica
    that reads the record after the cancel finds the change at 100 ms as it was."""
    cancel = TaskEvent("cancel", T0 + 600, 0)
    early = callbacks.observe(Course("submitted", T0), CALLBACK, TASK, record(300), T0 + 300)
    late = callbacks.observe(Course("submitted", T0), CALLBACK, TASK, record(700, cancel), T0 + 700)
    assert [(m - T0, v.status, n) for m, v, n in early[1]] == [(100, "working", 0)]
    assert [(m - T0, v.status, n) for m, v, n in late[1]] == [
        (100, "working", 0),
        (600, "cancelled", 1),
    ]


def test_a_course_starts_at_the_submission_from_any_record() -> None:
    cancel = TaskEvent("cancel", T0 + 50, 0)
    assert callbacks.started(TASK, record(900, cancel)) == Course("submitted", T0)


def test_a_delivery_is_named_by_its_change_and_copy() -> None:
    first = Delivery(
        3,
        callbacks.observe(Course("submitted", T0), CALLBACK, TASK, record(200), T0 + 200)[1][0][1],
        T0,
        T0,
    )
    assert callbacks.claim_key(first, 2) == "3.0.2"
    assert callbacks.claim_key(first._replace(copy=1), 0) == "3.1.0"


COUNTED = Task(
    life=(
        TaskPhase("submitted", HERE, polls=1),
        TaskPhase("working", HERE, polls=1, progress=(30, 60)),
        TaskPhase("completed", HERE, reply=Reply.json(200, {"done": True})),
    ),
    where=HERE,
    callback=CALLBACK,
)


def counted(polls: int, at: float) -> TaskRecord:
    return TaskRecord("sc/report", T0, polls, (), T0 + at)


def test_a_phase_passed_between_two_looks_is_a_change_numbered_as_its_place_in_the_life() -> None:
    """Polls made on other replicas: one replica saw each poll, another sees only the
    last; both find the same changes, with the same numbers."""
    start = callbacks.started(COUNTED, counted(0, 0))
    seen = []
    course = start
    for polls in (1, 2, 3):
        course, found = callbacks.observe(
            course, CALLBACK, COUNTED, counted(polls, polls), T0 + polls
        )
        seen += [(v.status, n) for _, v, n in found]
    _, at_once = callbacks.observe(start, CALLBACK, COUNTED, counted(3, 3), T0 + 3)
    assert seen == [(v.status, n) for _, v, n in at_once] == [("working", 0), ("completed", 1)]
    assert at_once[0][1].progress == 30  # shown as it was entered
