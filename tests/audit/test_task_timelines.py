"""A session's tasks as the report draws them: a row a task (``session["tasks"]``).

Hand-made journal entries (``Entry.task``, as the engine and the courier record them):
each task's requests become marks, the statuses its answers served bands, mockskill's
deliveries their own marks, and the findings on it are numbered as the report lists them.
"""

from __future__ import annotations

from typing import Any

from mockskill.audit import report
from mockskill.audit.timelines import TASKS_SHOWN
from mockskill.engine.entries import Entry

T0 = 1_000_000.0


def entry(n: int, at: float, answer: int | None, endpoint: str, **task: Any) -> Entry:
    """Journal entry *n*, answered *answer*, its ``Entry.task`` *task*."""
    base = {"known": True, "served": True, "cancelling": False, "poll_after_ms": 1000}
    return Entry(
        n, T0 + at, T0 + at + 0.125, "s", "GET", "/x", answer, endpoint, skill="report",
        task={**base, **task},
    )  # fmt: skip


def timelines(entries: list[Entry], now: float = 100) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = report(entries, now=T0 + now)["sessions"][0]["tasks"]
    return tasks


def test_a_tasks_requests_are_marks_and_the_statuses_they_served_bands() -> None:
    [row] = timelines(
        [
            entry(1, 0, 202, "invoke", id="t1", action="submit", status="submitted"),
            entry(2, 1, 200, "task", id="t1", action="poll", status="submitted"),
            entry(3, 2, 200, "task", id="t1", action="poll", status="working"),
            entry(4, 3, 503, "task", id="t1", action="poll", status=None, served=False),
            entry(5, 4, 200, "task", id="t1", action="poll", status="working"),
            entry(6, 5, 200, "task", id="t1", action="poll", status="completed"),
        ]
    )
    assert row["id"] == "t1"
    assert [m["id"] for m in row["marks"]] == [1, 2, 3, 4, 5, 6]
    assert [m["served"] for m in row["marks"]] == [
        "submitted", "submitted", "working", None, "working", "completed",
    ]  # fmt: skip
    assert [(b["status"], b["from"] - T0, b["until"] - T0) for b in row["bands"]] == [
        ("submitted", 0.125, 2.125),
        ("working", 2.125, 5.125),
        ("completed", 5.125, 5.125),
    ]
    assert row["deliveries"] == []


def test_a_settling_cancel_is_a_band_of_its_own_and_deliveries_are_not_marks() -> None:
    [row] = timelines(
        [
            entry(1, 0, 202, "invoke", id="t1", action="submit", status="submitted"),
            entry(2, 1, 202, "task", id="t1", action="cancel", status="working", cancelling=True,
                  poll_after_ms=500),
            entry(3, 2, 200, "task", id="t1", action="poll", status="cancelled"),
            entry(4, 2.5, 500, "callback", id="t1", action="callback", pushed="cancelled",
                  delivery=0, attempt=0, fault="none", forged=False, acknowledged=False),
        ]
    )  # fmt: skip
    assert [b["status"] for b in row["bands"]] == ["submitted", "cancelling", "cancelled"]
    assert [m["action"] for m in row["marks"]] == ["submit", "cancel", "poll"]
    [delivery] = row["deliveries"]
    assert delivery["acknowledged"] is False
    assert delivery["pushed"] == "cancelled"
    # The refused delivery is a finding on the task, numbered as the report lists it.
    assert row["findings"] == [1]


def test_urls_never_handed_out_are_no_task_row() -> None:
    rows = timelines(
        [entry(1, 0, 404, "task", id="guessed", action="poll", status=None, known=False,
               served=False)]
    )  # fmt: skip
    assert rows == []


def test_a_session_of_many_tasks_shows_the_newest() -> None:
    entries = [
        entry(n + 1, n, 202, "invoke", id=f"t{n}", action="submit", status="submitted",
              operation=f"key:{n}")
        for n in range(TASKS_SHOWN + 5)
    ]  # fmt: skip
    rows = timelines(entries, now=TASKS_SHOWN + 5)
    assert len(rows) == TASKS_SHOWN
    assert rows[0]["id"] == "t5"
