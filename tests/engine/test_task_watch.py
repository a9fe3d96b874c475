"""A watch planned from a task's life (mockskill/engine/task_watch.py), without a server: which
``Accept`` asks for one, the changes' numbers by place in the life, and the events a
reading of the record plans (their times, ids and data), as the transport will play them.
"""

from __future__ import annotations

import json

import pytest

from mockskill import load_text
from mockskill.engine import task_watch, tasks
from mockskill.engine.actions import Urls
from mockskill.engine.store import TaskEvent, TaskRecord
from mockskill.engine.task_skills import TaskSkill
from mockskill.engine.task_watch import TaskWatch
from mockskill.scenario.model import Task

LIFE = """
skills:
  - id: report
    task:
      poll_after: 200ms
      watch: {heartbeat: 2s}
      life:
        - {status: submitted, for: 1s}
        - {status: working, for: 2s, progress: [10, 60]}
        - {status: working, for: 1s, progress: [90]}
        - {status: input_required}
        - {status: working, for: 1s}
        - {status: completed, json: {report: done}}
"""
"""Changes: submitted 0, working 1 (two phases, one status), input_required 2, working 3,
completed 4; a cancel would be 5."""


def task_skill(text: str = LIFE) -> TaskSkill:
    """The task skill of the scenario *text* (one skill)."""
    (skill,) = load_text(text, "watch.yaml").scenarios[0].skills
    tasked = TaskSkill.of(skill)
    assert tasked is not None
    return tasked


def watch_of(tasked: TaskSkill, fmt: str = "sse", after: int | None = None) -> TaskWatch:
    urls = Urls("http://mock.test")
    return TaskWatch("s", 0, "T", tasked, urls, fmt, 0.0, resumed_from=after)


def record(now_ms: float, *events: TaskEvent) -> TaskRecord:
    return TaskRecord("watch:report", 0.0, 0, tuple(events), now_ms)


@pytest.mark.parametrize(
    ("accept", "fmt"),
    [
        (None, None),
        ("*/*", None),
        ("text/*", None),
        ("application/json", None),
        ("application/json, text/event-stream", None),
        ("text/event-stream", "sse"),
        ("TEXT/EVENT-STREAM; charset=utf-8", "sse"),
        ("application/x-ndjson", "ndjson"),
        ("application/json;q=0.5, text/event-stream", "sse"),
        ("text/event-stream;q=0", None),
        ("text/event-stream;q=0.5, application/x-ndjson", "ndjson"),
    ],
    ids=lambda value: str(value),
)
def test_a_stream_is_asked_for_by_name_and_above_json(accept: str | None, fmt: str | None) -> None:
    assert task_watch.watch_format(accept) == fmt


def test_changes_are_numbered_by_place_in_the_life_and_a_cancel_after_them_all() -> None:
    task: Task = task_skill().task
    numbers = [task_watch.status_of(task, n) for n in range(7)]
    assert numbers == [
        "submitted",
        "working",
        "input_required",
        "working",
        "completed",
        "cancelled",
        None,
    ]
    for phase, number in [(0, 0), (1, 1), (2, 1), (3, 2), (4, 3), (5, 4)]:
        view = tasks.TaskView(task.life[phase].status, phase, None, None, False, None, False, None)
        assert task_watch.change_number(task, view) == number
    cancelled = tasks.TaskView("cancelled", 2, None, None, False, 1.0, False, 1.0)
    assert task_watch.change_number(task, cancelled) == 5


@pytest.mark.parametrize(
    ("header", "after"),
    [(None, None), ("2", 2), (" 3 ", 3), ("5", 5), ("6", None), ("-1", None), ("x", None)],
)
def test_last_event_id_names_a_change_or_nothing(header: str | None, after: int | None) -> None:
    assert task_watch.resumed_after(task_skill().task, header) == after


def test_a_segment_plans_the_changes_the_life_makes_by_time_until_a_wait() -> None:
    tasked = task_skill()
    planned = task_watch.segment(watch_of(tasked), record(500.0), None)
    play = planned.play
    assert [(p.delay_ms, p.event_id) for p in play.pieces] == [
        (0.0, "0"),
        (500.0, "1"),  # working from 1 s; the second working phase is no change
        (3000.0, "2"),  # input_required from 4 s: a wait, which only an input ends
    ]
    assert play.ending == "open"  # held (heartbeats) until the record says more
    assert (play.heartbeat_ms, play.heartbeat) == (2000.0, b": \n\n")
    assert planned.reread_ms == 200.0  # the poll cadence the task advises
    first = play.pieces[0].data.decode()
    assert first.startswith("id: 0\nevent: submitted\ndata: ")
    data = json.loads(first.split("data: ", 1)[1])
    assert data["task"]["status_url"] == "http://mock.test/skills/report/tasks/T"


def test_after_an_input_the_segment_runs_to_the_end() -> None:
    tasked = task_skill()
    given = TaskEvent("input", 4500.0, 0, (3,))
    planned = task_watch.segment(watch_of(tasked, "ndjson", after=2), record(4500.0, given), None)
    # (after: the transport's last id sent wins over the watch's own resumed_from)
    assert [(p.delay_ms, p.event_id) for p in planned.play.pieces] == [(0.0, "3"), (1000.0, "4")]
    assert planned.play.ending == "complete"
    assert planned.reread_ms == 200.0
    line = json.loads(planned.play.pieces[1].data)
    assert (line["event"], line["id"], line["data"]["task"]["result"]) == (
        "completed",
        "4",
        {"report": "done"},
    )


def test_a_segment_after_the_change_the_task_is_at_sends_only_what_follows() -> None:
    tasked = task_skill()
    planned = task_watch.segment(watch_of(tasked), record(1500.0), 1)
    assert [(p.delay_ms, p.event_id) for p in planned.play.pieces] == [(2500.0, "2")]


def test_a_cancel_ends_the_segment_with_cancelled() -> None:
    tasked = task_skill()
    cancel = TaskEvent("cancel", 1500.0, 0)
    planned = task_watch.segment(watch_of(tasked), record(1500.0, cancel), 1)
    assert [p.event_id for p in planned.play.pieces] == ["5"]
    assert planned.play.ending == "complete"
    assert planned.reread_ms is None


def test_a_task_gone_from_the_store_ends_the_watch_with_nothing_more() -> None:
    planned = task_watch.segment(watch_of(task_skill()), None, 1)
    assert planned.play.pieces == ()
    assert planned.play.ending == "complete"
    assert planned.reread_ms is None


def test_a_live_task_is_read_again_at_its_poll_cadence_never_in_a_tight_loop() -> None:
    (skill,) = (
        load_text(
            """
skills:
  - id: report
    task:
      poll_after: 1ms
      life:
        - {status: working, for: 1s}
        - {status: completed}
""",
            "fast.yaml",
        )
        .scenarios[0]
        .skills
    )
    tasked = TaskSkill.of(skill)
    assert tasked is not None
    planned = task_watch.segment(watch_of(tasked), record(0.0), None)
    assert planned.reread_ms == task_watch.MIN_REREAD_MS


def test_a_settling_cancel_is_no_change_until_cancelled_at_the_settles_end() -> None:
    tasked = task_skill("""
skills:
  - id: report
    task:
      cancel: {settle: 500ms}
      life:
        - {status: working, for: 10s}
        - {status: completed}
""")
    cancel = TaskEvent("cancel", 1000.0, 0)
    planned = task_watch.segment(watch_of(tasked), record(1000.0, cancel), 0)
    assert [(p.delay_ms, p.event_id) for p in planned.play.pieces] == [(500.0, "2")]
    assert b"event: cancelled" in planned.play.pieces[0].data
    assert planned.play.ending == "complete"
