"""A task on the wire (engine/task_wire.py): the ``{"task": {...}}`` every answer on a task
carries, its headers, and the refusals in the unified body (docs/tasks.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mockskill.engine.actions import Urls
from mockskill.engine.store import TaskEvent, TaskRecord
from mockskill.engine.task_wire import created_at, refused, reply, status_url, task_json
from mockskill.engine.tasks import TaskView, view
from mockskill.protocol import catalog
from mockskill.scenario.model import Reply, Task, TaskPhase
from mockskill.scenario.source import Position

HERE = Position("tasks.yaml", 1, 1)
T0 = 1_764_840_639_123.0  # 2025-12-04T09:30:39.123Z
ID = "ZGVmYXVsdA.0.0123456789"
BASE = "http://127.0.0.1:8080"
TIMEOUT = Reply.error(
    catalog.render("EXECUTION_TIMEOUT", catalog.Context.for_skill("report"), status=504)
)
UNREACHABLE = Reply.error(catalog.render("ENDPOINT_UNREACHABLE", catalog.Context.for_skill("r")))


def report(last: TaskPhase) -> Task:
    return Task(
        life=(
            TaskPhase("submitted", HERE, duration_ms=1000),
            TaskPhase("working", HERE, duration_ms=6000, progress=(10, 40, 80), poll_after_ms=2500),
            last,
        ),
        where=HERE,
        cancel_settle_ms=500,
    )


REPORT = report(TaskPhase("completed", HERE, reply=Reply.json(200, {"report": "done"})))
FAILS = report(TaskPhase("failed", HERE, reply=TIMEOUT))


def at(t: Task, ms: float, *events: TaskEvent) -> TaskView:
    return view(t, TaskRecord("s/report", T0, 1, events, T0 + ms))


def sent(r: Reply) -> tuple[int, dict[str, str], dict[str, Any]]:
    """The answer as the consumer gets it: placeholders filled, the body parsed."""
    filled = Urls(BASE, refused="http://127.0.0.1:9").fill(r)
    return filled.status, dict(filled.headers), json.loads(filled.body)


def answer(t: Task, v: TaskView, status: int = 200) -> tuple[int, dict[str, str], dict[str, Any]]:
    return sent(reply(t, v, skill_id="report", task_id=ID, submitted_ms=T0, status=status))


URL = f"{BASE}/skills/report/tasks/{ID}"


def test_a_submit_is_202_with_location_retry_after_and_the_task() -> None:
    status, headers, body = answer(REPORT, at(REPORT, 0), 202)
    assert status == 202
    assert headers["Location"] == URL
    assert headers["Retry-After"] == "1"
    assert body == {
        "task": {
            "id": ID,
            "status": "submitted",
            "status_url": URL,
            "poll_after_ms": 1000,
            "created_at": "2025-12-04T09:30:39.123Z",
            "ttl_ms": 300_000,
        }
    }


def test_a_poll_while_working_carries_progress_and_its_phases_retry_after_rounded_up() -> None:
    status, headers, body = answer(REPORT, at(REPORT, 3000))
    assert status == 200
    assert "Location" not in headers
    assert headers["Retry-After"] == "3"  # 2500 ms, rounded up
    assert body["task"]["poll_after_ms"] == 2500
    assert body["task"]["progress"] == 40
    assert "cancelling" not in body["task"]
    assert "result" not in body["task"]


def test_a_completed_task_carries_its_result_and_no_retry_after() -> None:
    status, headers, body = answer(REPORT, at(REPORT, 7000))
    assert status == 200
    assert "Retry-After" not in headers
    assert body["task"]["status"] == "completed"
    assert body["task"]["result"] == {"report": "done"}
    assert "poll_after_ms" not in body["task"]
    assert "error" not in body["task"]


def test_a_failed_task_carries_the_unified_error_object_with_its_retry_advice() -> None:
    _, headers, body = answer(FAILS, at(FAILS, 7000))
    assert "Retry-After" not in headers  # the task's answer is a 200: advice is in the error
    error = body["task"]["error"]
    assert catalog.error_body_problem({"error": error}) is None
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["retry"] == {"suggested_delay_ms": 5000, "max_attempts": 3}
    assert "result" not in body["task"]


def test_a_failed_tasks_error_has_its_urls_filled() -> None:
    down = report(TaskPhase("failed", HERE, reply=UNREACHABLE))
    _, _, body = answer(down, at(down, 7000))
    assert body["task"]["error"]["details"]["endpoint_url"] == f"{BASE}/skills/r/invoke"


def test_a_cancel_settling_is_202_with_cancelling() -> None:
    cancel = TaskEvent("cancel", T0 + 2000, 1)
    status, headers, body = answer(REPORT, at(REPORT, 2000, cancel), 202)
    assert status == 202
    assert headers["Location"] == URL
    assert body["task"]["cancelling"] is True
    assert body["task"]["status"] == "working"
    _, headers, body = answer(REPORT, at(REPORT, 2500, cancel))
    assert body["task"]["status"] == "cancelled"
    assert "cancelling" not in body["task"]
    assert "Retry-After" not in headers


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        pytest.param(0, "1970-01-01T00:00:00.000Z", id="epoch"),
        pytest.param(T0, "2025-12-04T09:30:39.123Z", id="milliseconds"),
        pytest.param(T0 + 0.9, "2025-12-04T09:30:39.123Z", id="a-fraction-is-cut"),
    ],
)
def test_created_at_is_rfc3339_utc_to_the_millisecond(ms: float, text: str) -> None:
    assert created_at(ms) == text


def test_the_status_url_is_absolute_once_filled() -> None:
    assert status_url("report", ID) == "{base_url}/skills/report/tasks/" + ID
    assert task_json(REPORT, at(REPORT, 0), skill_id="report", task_id=ID, submitted_ms=T0)[
        "status_url"
    ].startswith(catalog.BASE_URL)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("TASK_NOT_FOUND", 404),
        ("TASK_EXPIRED", 404),
        ("TASK_FINISHED", 409),
        ("TASK_NOT_CANCELLABLE", 409),
        ("TASK_NOT_AWAITING_INPUT", 409),
        ("TASK_INPUT_INVALID", 422),
    ],
)
def test_a_refusal_is_the_unified_body_with_its_code_and_status(code: str, status: int) -> None:
    got, headers, body = sent(refused(code, task_id=ID, skill_id="report"))
    assert got == status
    assert catalog.error_body_problem(body) is None
    assert body["error"]["code"] == code
    assert body["error"]["details"]["task_id"] == ID
    assert "retry" not in body["error"]
    assert "Retry-After" not in headers


def test_a_refusal_of_a_known_task_names_its_url_status_and_cancellable_statuses() -> None:
    v = at(REPORT, 500)
    t = Task(life=REPORT.life, where=HERE, cancellable=("working",))
    _, _, body = sent(
        refused("TASK_NOT_CANCELLABLE", task_id=ID, skill_id="report", task=t, view=v)
    )
    details = body["error"]["details"]
    assert details["status_url"] == URL
    assert details["status"] == "submitted"
    assert details["cancellable"] == ["working"]
    assert body["error"]["message"] == f"Task {ID} cannot be cancelled while it is submitted"


def test_an_input_refused_names_the_conditions_it_failed() -> None:
    failed = [{"path": "/answer", "expected": "present"}]
    _, _, body = sent(
        refused("TASK_INPUT_INVALID", task_id=ID, skill_id="report", details={"failed": failed})
    )
    assert body["error"]["details"]["failed"] == failed


def test_a_refusal_echoes_a_hostile_id_bounded() -> None:
    hostile = "{base_url}" + "A" * 10_000
    _, _, body = sent(refused("TASK_NOT_FOUND", task_id=hostile, skill_id="report"))
    assert len(body["error"]["details"]["task_id"]) <= 128
    assert len(body["error"]["message"]) < 200
    assert "status_url" not in body["error"]["details"]  # never handed out: no URL made


@pytest.mark.parametrize(
    ("t", "ms", "events"),
    [
        pytest.param(REPORT, 0, (), id="submitted"),
        pytest.param(REPORT, 3000, (), id="working-progress"),
        pytest.param(REPORT, 2100, (TaskEvent("cancel", T0 + 2000, 0),), id="cancelling"),
        pytest.param(REPORT, 2600, (TaskEvent("cancel", T0 + 2000, 0),), id="cancelled"),
        pytest.param(REPORT, 7000, (), id="completed"),
        pytest.param(FAILS, 7000, (), id="failed"),
        pytest.param(report(TaskPhase("completed", HERE)), 7000, (), id="completed-without-result"),
        pytest.param(report(TaskPhase("failed", HERE)), 7000, (), id="failed-without-error"),
    ],
)
@pytest.mark.parametrize("status", [200, 202])
def test_the_answers_body_is_the_task_object(
    t: Task, ms: float, events: tuple[TaskEvent, ...], status: int
) -> None:
    v = at(t, ms, *events)
    made = reply(t, v, skill_id="report", task_id=ID, submitted_ms=T0, status=status)
    expected = task_json(t, v, skill_id="report", task_id=ID, submitted_ms=T0)
    assert json.loads(made.body) == {"task": expected}
    _, headers, body = sent(made)
    assert body["task"]["status_url"] == URL
    assert ("Retry-After" in headers) == (not v.terminal)
    assert ("Location" in headers) == (status == 202)
