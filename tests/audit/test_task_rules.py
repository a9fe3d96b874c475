"""How a consumer waits on a long-running task, graded on hand-made journal entries.

Each request on a task journals ``Entry.task`` (entries.py's docstring); the five task
rules read them: ``poll-too-soon``, ``poll-after-terminal``, ``task-abandoned``,
``reinvoked-while-running`` and ``status-url-ignored``. Coverage counts the tasks the
consumer saw fail (by their error's category) or cancelled. Times are seconds from an
arbitrary origin, in binary fractions where a test stands on a bound (so that the
subtraction the audit does is exact).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from task_journals import INVOKE, T0, TaskJournal, url

from mockskill import Server
from mockskill.audit import RULES, Policy, coverage, coverage_gaps, report
from mockskill.audit.table import table
from mockskill.cli import cli
from mockskill.engine.entries import Entry

DEFAULT = Policy()
FOREVER = 10**15
"""A ``settles_at_ms`` no test reaches: the life waits (or is long)."""


class Journal(TaskJournal):
    """One session's entries on tasks, made in order: ids count up."""

    def submit(
        self,
        at: float,
        task: str = "t1",
        *,
        operation: str = "key:k1",
        poll_after_ms: int = 1000,
        settles_at_ms: float = FOREVER,
        **fields: Any,
    ) -> Entry:
        return self.add(
            at,
            "POST",
            INVOKE,
            202,
            "invoke",
            task=state(
                task,
                "submit",
                "submitted",
                poll_after_ms=poll_after_ms,
                operation=operation,
                settles_at_ms=settles_at_ms,
            ),
            **fields,
        )

    def poll(
        self,
        at: float,
        task: str = "t1",
        status: str = "working",
        *,
        poll_after_ms: int | None = 1000,
        **fields: Any,
    ) -> Entry:
        if status in ("completed", "failed", "cancelled"):
            poll_after_ms = None
        return self.add(
            at,
            "GET",
            url(task),
            200,
            "task",
            task=state(task, "poll", status, poll_after_ms=poll_after_ms),
            **fields,
        )

    def cancel(self, at: float, task: str = "t1", *, accepted: bool = True) -> Entry:
        if accepted:
            answer = state(task, "cancel", "working", cancelling=True, poll_after_ms=1000)
            return self.add(at, "DELETE", url(task), 202, "task", task=answer)
        refused = state(task, "cancel", "working", served=False)
        return self.add(
            at, "DELETE", url(task), 409, "task", task=refused, error_code="TASK_NOT_CANCELLABLE"
        )

    def report(self, policy: Policy = DEFAULT, *, now: float = 10_000.0) -> dict[str, Any]:
        """The session's report at *now* (seconds from the origin)."""
        session: dict[str, Any] = report(self.entries, policy, now=T0 + now)["sessions"][0]
        return session

    def findings(self, rule: str, **kwargs: Any) -> list[dict[str, Any]]:
        return [f for f in self.report(**kwargs)["findings"] if f["rule"] == rule]


def state(task: str | None, action: str, status: str | None, **fields: Any) -> dict[str, Any]:
    """An ``Entry.task`` as the server journals it."""
    return {
        "id": task,
        "action": action,
        "known": True,
        "expired": False,
        "served": True,
        "status": status,
        "cancelling": False,
        "progress": None,
        "poll": None,
        "poll_after_ms": None,
        "terminal_at_ms": None,
        **fields,
    }


def finished(j: Journal, at: float, task: str = "t1", status: str = "completed") -> Entry:
    """A poll that serves *task*'s terminal status."""
    return j.poll(at, task, status)


# -- the rules are known ----------------------------------------------------------------


def test_the_task_rules_are_rules_of_the_audit() -> None:
    assert RULES[-11:-6] == (
        "poll-too-soon",
        "poll-after-terminal",
        "task-abandoned",
        "reinvoked-while-running",
        "status-url-ignored",
    )


def test_a_consumer_that_waits_as_told_and_stops_at_the_end_is_clean() -> None:
    j = Journal()
    j.submit(0)  # answered at 0.125, advising 1000 ms
    j.poll(1.125)  # answered at 1.25
    j.poll(2.25, poll_after_ms=2000)  # answered at 2.375: the next in 2 s
    finished(j, 4.375)
    session = j.report()
    assert session["findings"] == []
    assert session["clean"]


# -- poll-too-soon ------------------------------------------------------------------------


def test_a_poll_exactly_at_the_retry_after_is_allowed() -> None:
    j = Journal()
    j.submit(0)
    j.poll(1.125)  # 1000 ms after the 202 ended
    finished(j, 2.25)
    assert j.findings("poll-too-soon") == []


def test_a_poll_inside_the_tolerance_is_allowed_and_one_past_it_is_too_soon() -> None:
    policy = Policy(tolerance_ms=62.5, tolerance_ratio=0.5)  # owed 1000 ms: 937.5 passes
    j = Journal()
    j.submit(0)
    j.poll(0.125 + 0.9375)  # ends at 1.1875
    finished(j, 1.1875 + 0.9375)
    assert j.findings("poll-too-soon", policy=policy) == []

    j = Journal()
    j.submit(0)
    early = j.poll(0.125 + 0.9375 - 2**-10)
    finished(j, 3)
    [finding] = j.findings("poll-too-soon", policy=policy)
    assert finding["attempts"] == [1, early.id]
    assert finding["task"] == "t1"
    assert "task t1" in finding["message"]
    assert "Retry-After 1000 ms" in finding["found"]
    assert "tolerance: 50% of the wait, at most 62 ms" in finding["expected"]
    assert "sleep the Retry-After of each answer" in finding["fix"]


def test_each_poll_is_owed_the_retry_after_of_the_answer_just_before_it() -> None:
    """poll_after changes over the task's life: 2 s advised, then 1.5 s waited is too soon,
    though the first answer had asked for 1 s."""
    j = Journal()
    j.submit(0)
    j.poll(1.125, poll_after_ms=2000)  # ends 1.25
    soon = j.poll(2.75)  # 1500 ms after
    finished(j, 5)
    [finding] = j.findings("poll-too-soon")
    assert finding["attempts"] == [2, soon.id]
    assert "#3 1500 ms after #2 (poll served working, Retry-After 2000 ms)" in finding["found"]


def test_the_wait_runs_from_when_the_previous_answer_ended_not_from_when_it_was_sent() -> None:
    j = Journal()
    j.submit(0)
    j.poll(1.125, took=0.5)  # a slow answer: ends at 1.625
    j.poll(2.125)  # 1 s after the previous poll was sent, 500 ms after its answer
    finished(j, 4)
    [finding] = j.findings("poll-too-soon")
    assert "#3 500 ms after #2" in finding["found"]


def test_the_first_poll_is_owed_the_retry_after_of_the_202() -> None:
    j = Journal()
    j.submit(0, poll_after_ms=3000)
    j.poll(1.125)
    finished(j, 5)
    [finding] = j.findings("poll-too-soon")
    assert "#2 1000 ms after #1 (submit served submitted, Retry-After 3000 ms)" in finding["found"]


def test_a_poll_after_a_failed_poll_is_the_retry_rules_to_grade() -> None:
    """A scripted error on the status URL carries no task state: polling again at once is
    retried (retry-too-soon's, on its chain), not a poll too soon."""
    j = Journal()
    j.submit(0)
    j.add(
        1.125,
        "GET",
        url("t1"),
        503,
        "task",
        task=state("t1", "poll", None, served=False),
        error_code="ENDPOINT_UNREACHABLE",
    )
    j.poll(1.25 + 0.0625)  # at once
    finished(j, 3)
    session = j.report()
    assert [f["rule"] for f in session["findings"]] == ["retry-too-soon"]


def test_a_poll_sent_before_the_previous_answer_came_is_judged_by_the_one_before() -> None:
    """Two polls in flight at once: the second is measured from the last answer the
    consumer had when it sent it."""
    j = Journal()
    j.submit(0)
    j.poll(1.125, took=1)  # ends at 2.125
    j.poll(1.5)  # sent while #2 was in flight: 1375 ms after the 202's end
    finished(j, 4)
    assert j.findings("poll-too-soon") == []


# -- poll-after-terminal ------------------------------------------------------------------


def test_one_grace_poll_after_the_terminal_status_is_allowed() -> None:
    j = Journal()
    j.submit(0)
    finished(j, 1.125)
    finished(j, 2.25)  # the grace poll
    assert j.findings("poll-after-terminal") == []


def test_polls_after_the_grace_poll_are_named() -> None:
    j = Journal()
    j.submit(0)
    end = finished(j, 1.125, status="failed")
    grace = finished(j, 1.375, status="failed")
    more = [finished(j, 1.5, status="failed"), finished(j, 1.625, status="failed")]
    [finding] = j.findings("poll-after-terminal")
    assert finding["attempts"] == [end.id, grace.id, *(e.id for e in more)]
    assert finding["message"] == "2 polls of task t1 after it was served failed"
    assert "(the grace poll)" in finding["found"]
    assert finding["task"] == "t1"
    assert "end the poll loop on a terminal task.status" in finding["fix"]


def test_a_poll_already_on_its_way_when_the_end_was_served_is_not_after_it() -> None:
    j = Journal()
    j.submit(0)
    finished(j, 1.125, status="cancelled")  # ends at 1.25
    j.poll(1.1875, status="cancelled")  # sent before the consumer had #2
    finished(j, 2, status="cancelled")  # the grace poll
    assert j.findings("poll-after-terminal") == []


def test_cancels_after_the_end_are_no_polls() -> None:
    j = Journal()
    j.submit(0)
    finished(j, 1.125)
    for at in (1.5, 1.75):
        j.add(
            at,
            "DELETE",
            url("t1"),
            409,
            "task",
            task=state("t1", "cancel", "completed", served=False),
            error_code="TASK_FINISHED",
        )
    assert j.findings("poll-after-terminal") == []


def test_polls_that_find_the_ended_task_expired_count_after_it() -> None:
    j = Journal()
    j.submit(0)
    finished(j, 1.125)
    for at in (2, 3):
        j.add(
            at,
            "GET",
            url("t1"),
            404,
            "task",
            task=state("t1", "poll", None, served=False, expired=True),
            error_code="TASK_EXPIRED",
        )
    [finding] = j.findings("poll-after-terminal")
    assert finding["attempts"] == [2, 3, 4]


# -- task-abandoned -----------------------------------------------------------------------


def abandoned_at(now: float, policy: Policy = DEFAULT, **cancel: Any) -> list[dict[str, Any]]:
    """A task polled twice, its last answer ending at 1.25 and advising 1000 ms, judged at
    *now*; with a cancel at 1.5 when *cancel* says (``accepted=...``)."""
    j = Journal()
    j.submit(0)
    j.poll(1.125)
    if cancel:
        j.cancel(1.5, **cancel)
    return j.findings("task-abandoned", policy=policy, now=now)


def test_a_task_left_unpolled_past_its_due_poll_and_the_bound_is_abandoned() -> None:
    # Due at 2.25 (1.25 + 1000 ms); the default bound is 5000 ms past it.
    assert abandoned_at(7.25) == []
    [finding] = abandoned_at(7.25 + 2**-6)
    assert finding["attempts"] == [2]
    assert finding["task"] == "t1"
    assert finding["message"] == "task t1 left working and unpolled for 6.0 s"
    assert finding["found"] == (
        "last served working; the last request, #2 (200), then nothing for 6016 ms"
        " by the report's time"
    )
    assert "DELETE the task's status URL" in finding["fix"]


def test_the_silence_bound_is_a_policy_parameter() -> None:
    assert abandoned_at(3.25, Policy(abandoned_ms=1000)) == []
    assert [f["rule"] for f in abandoned_at(3.5, Policy(abandoned_ms=1000))] == ["task-abandoned"]


def test_a_cancelled_task_is_not_abandoned() -> None:
    assert abandoned_at(100, accepted=True) == []


def test_a_cancel_that_was_refused_cancelled_nothing() -> None:
    [finding] = abandoned_at(100, accepted=False)
    assert finding["attempts"] == [3]


def test_a_task_seen_to_end_is_not_abandoned() -> None:
    j = Journal()
    j.submit(0)
    finished(j, 1.125, status="failed")
    assert j.findings("task-abandoned", now=1000) == []


def test_a_task_whose_202_never_reached_the_consumer_is_not_abandoned() -> None:
    """The consumer hung up on the invoke: it never had the task to poll."""
    j = Journal()
    j.submit(0, client_left=T0 + 0.0625)
    assert j.findings("task-abandoned", now=1000) == []


def test_coming_back_after_the_time_to_live_is_abandoning_it() -> None:
    j = Journal()
    j.submit(0)
    j.poll(1.125)
    expired = j.add(
        400,
        "GET",
        url("t1"),
        404,
        "task",
        task=state("t1", "poll", None, served=False, expired=True),
        error_code="TASK_EXPIRED",
    )
    [finding] = j.findings("task-abandoned", now=400.5)
    assert finding["attempts"] == [2, expired.id]
    assert "came back after its time-to-live" in finding["found"]


def test_a_waiting_consumer_is_judged_on_the_wait_it_was_told() -> None:
    """Told to come back in a minute, a consumer 30 s into the wait has left nothing."""
    j = Journal()
    j.submit(0, poll_after_ms=60_000)
    assert j.findings("task-abandoned", now=30) == []
    assert len(j.findings("task-abandoned", now=66)) == 1


# -- reinvoked-while-running ------------------------------------------------------------


def test_a_second_task_for_the_operation_of_a_live_one_is_named() -> None:
    j = Journal()
    j.submit(0, "t1", operation="key:k1")
    j.poll(1.125, "t1")
    second = j.submit(1.5, "t2", operation="key:k1")
    j.poll(2.625, "t2", "completed")
    finished(j, 2.75, "t1")
    [finding] = j.findings("reinvoked-while-running")
    assert finding["attempts"] == [1, second.id]
    assert finding["task"] == "t1"
    assert "the same Idempotency-Key (k1)" in finding["message"]
    assert (
        "#3 started task t2 1500 ms after #1 started task t1, still working" in (finding["found"])
    )
    assert "same Idempotency-Key" in finding["fix"]


def test_each_task_started_beside_a_live_one_is_named_with_the_live_one() -> None:
    j = Journal()
    j.submit(0, "t1")
    finished(j, 1.125, "t1")
    j.submit(2, "t2")  # after t1 ended: a new run
    j.submit(2.5, "t3")  # while t2 is live
    j.submit(3, "t4")  # while t2 and t3 are
    [finding] = j.findings("reinvoked-while-running", now=4)
    assert finding["task"] == "t2"
    assert finding["attempts"] == [3, 4, 5]
    assert finding["message"].startswith("2 more tasks started for the operation of task t2")
    assert (
        "#4 started task t3 500 ms after #3 started task t2, still submitted" in (finding["found"])
    )


def test_the_same_body_without_a_key_is_the_same_operation() -> None:
    j = Journal()
    j.submit(0, "t1", operation="body:hmac-sha256:abc")
    j.submit(0.5, "t2", operation="body:hmac-sha256:abc")
    [finding] = j.findings("reinvoked-while-running", now=1)
    assert "no key and the same body" in finding["message"]


def test_a_different_idempotency_key_is_another_operation() -> None:
    j = Journal()
    j.submit(0, "t1", operation="key:k1")
    j.submit(0.5, "t2", operation="key:k2")
    assert j.findings("reinvoked-while-running", now=1) == []


def test_the_same_task_answered_again_is_no_second_task() -> None:
    """A provider honouring the key answers the retry with the task it started."""
    j = Journal()
    j.submit(0, "t1")
    j.submit(0.5, "t1")
    assert j.findings("reinvoked-while-running", now=1) == []


def test_invoking_again_after_the_end_was_served_is_a_new_operation_run() -> None:
    j = Journal()
    j.submit(0, "t1")
    finished(j, 1.125, "t1")
    j.submit(1.25, "t2")  # just as #2's answer ended
    assert j.findings("reinvoked-while-running", now=2) == []


def test_a_task_past_its_life_is_no_longer_live_even_unpolled() -> None:
    j = Journal()
    j.submit(0, "t1", settles_at_ms=(T0 + 1) * 1000)
    j.submit(1, "t2")  # exactly when t1's life ended
    assert j.findings("reinvoked-while-running", now=2) == []
    j = Journal()
    j.submit(0, "t1", settles_at_ms=(T0 + 1) * 1000)
    j.submit(1 - 2**-6, "t2")
    assert len(j.findings("reinvoked-while-running", now=2)) == 1


def test_a_cancelled_task_may_be_started_afresh() -> None:
    j = Journal()
    j.submit(0, "t1")
    j.cancel(0.5, "t1")
    j.submit(1, "t2")
    assert j.findings("reinvoked-while-running", now=2) == []
    j = Journal()
    j.submit(0, "t1")
    j.cancel(0.5, "t1", accepted=False)  # 409: not cancelled
    j.submit(1, "t2")
    assert len(j.findings("reinvoked-while-running", now=2)) == 1


def lost_202_then_again(first: str, second: str) -> list[str]:
    """A submit whose 202 the consumer hung up on (the task ran, unseen), then the invoke
    sent again with the same body and *second* as its operation: the rules named."""
    j = Journal()
    for at, task, operation, lost in [(0, "t1", first, True), (1.5, "t2", second, False)]:
        kind, _, key = operation.partition(":")
        j.submit(
            at,
            task,
            operation=operation,
            executed=True,
            idempotency_key=key if kind == "key" else None,
            headers=(("Idempotency-Key", key),) if kind == "key" else (),
            client_left=T0 + at + 0.0625 if lost else None,
        )
    return [f["rule"] for f in j.report(now=2)["findings"]]


def test_a_lost_202_sent_again_unchanged_is_one_finding_the_task_rules() -> None:
    """Without a key, the same body: one double start, named once (not duplicate-execution
    too)."""
    body = "body:hmac-sha256:abc"
    assert lost_202_then_again(body, body) == ["reinvoked-while-running"]
    assert lost_202_then_again("key:k1", "key:k1") == ["reinvoked-while-running"]


def test_a_lost_202_sent_again_with_a_fresh_key_is_a_duplicate_execution() -> None:
    """Another key is another operation to the task rules; the retry that ran it again
    without the first attempt's key is duplicate-execution's, as for any skill."""
    assert lost_202_then_again("key:k1", "key:k2") == ["duplicate-execution", "correlation-lost"]


def test_a_submit_refused_over_the_cap_started_nothing() -> None:
    j = Journal()
    j.submit(0, "t1")
    j.add(
        0.5,
        "POST",
        INVOKE,
        503,
        "invoke",
        task={**state(None, "submit", None, served=False, known=False), "operation": "key:k1"},
        error_code="ENDPOINT_UNREACHABLE",
    )
    session = j.report(now=1)
    assert [f["rule"] for f in session["findings"]] == []


# -- status-url-ignored -----------------------------------------------------------------


def test_requests_to_task_urls_never_handed_out_are_named() -> None:
    j = Journal()
    j.submit(0, "t1")
    built = [
        j.add(
            at,
            method,
            url("guessed"),
            404,
            "task",
            task=state("guessed", action, None, served=False, known=False),
            error_code="TASK_NOT_FOUND",
        )
        for at, method, action in [(1.125, "GET", "poll"), (1.5, "DELETE", "cancel")]
    ]
    finished(j, 2.25, "t1")
    [finding] = j.findings("status-url-ignored")
    assert finding["attempts"] == [e.id for e in built]
    assert finding["task"] == "guessed"
    assert finding["message"] == "2 requests to task URLs mockskill never handed out ('guessed')"
    assert f"#2 GET {url('guessed')} (404 TASK_NOT_FOUND)" in finding["found"]
    assert "follow Location" in finding["fix"]


def test_a_task_past_its_time_to_live_was_handed_out() -> None:
    j = Journal()
    j.submit(0, "t1")
    finished(j, 1.125, "t1")
    j.add(
        400,
        "GET",
        url("t1"),
        404,
        "task",
        task=state("t1", "poll", None, served=False, expired=True),
        error_code="TASK_EXPIRED",
    )
    assert j.findings("status-url-ignored", now=401) == []


# -- coverage -----------------------------------------------------------------------------


def test_coverage_counts_each_task_seen_failed_by_its_category_and_each_cancelled_once() -> None:
    j = Journal()
    j.submit(0, "t1")
    for at in (1.125, 1.5):
        j.poll(at, "t1", "failed", error_code="EXECUTION_TIMEOUT")
    j.submit(2, "t2", operation="key:k2")
    j.poll(3.125, "t2", "cancelled")
    j.submit(4, "t3", operation="key:k3")
    j.poll(5.125, "t3", "failed", error_code="EXECUTION_TIMEOUT")
    tasks = coverage(j.entries)["tasks"]
    assert tasks["failed"]["EXECUTION_TIMEOUT"] == 2
    assert tasks["cancelled"] == 1
    # The consumer met the category: once per task, not once per poll that served it.
    assert coverage(j.entries)["categories"]["EXECUTION_TIMEOUT"] == 2
    missing = coverage(j.entries)["missing"]["tasks"]
    assert "TASK_FAILED" not in missing
    assert "TASK_FAILED:EXECUTION_TIMEOUT" not in missing
    assert "TASK_FAILED:AUTH_REQUIRED" in missing
    assert "TASK_CANCELLED" not in missing
    assert "tasks: failed EXECUTION_TIMEOUT x2, cancelled x1" in table(
        report(j.entries, now=T0 + 10), "http://x"
    )


def test_a_poll_serving_a_failed_task_is_no_failed_request_to_retry() -> None:
    """The poll worked (200, the task's state); the task failed. Polling again is
    poll-after-terminal's to judge, not a retry of a failure."""
    j = Journal()
    j.submit(0)
    for at in (1.125, 1.3125, 1.5):
        j.poll(at, status="failed", error_code="EXECUTION_TIMEOUT")
    session = j.report()
    assert [f["rule"] for f in session["findings"]] == ["poll-after-terminal"]
    assert all(len(chain["attempts"]) == 1 for chain in session["chains"])


def test_a_failed_state_that_never_reached_the_consumer_is_not_covered() -> None:
    j = Journal()
    j.submit(0, "t1")
    j.poll(1.125, "t1", "failed", error_code="AUTH_REQUIRED", client_left=T0 + 1.1875)
    assert coverage(j.entries)["tasks"]["failed"]["AUTH_REQUIRED"] == 0


def test_the_gates_can_require_the_task_rows() -> None:
    j = Journal()
    j.submit(0, "t1")
    j.poll(1.125, "t1", "failed", error_code="EXECUTION_TIMEOUT")
    got = report(j.entries, now=T0 + 2)
    assert coverage_gaps(got, ["TASK_FAILED", "TASK_FAILED:EXECUTION_TIMEOUT"]) == {}
    assert coverage_gaps(got, ["TASK_CANCELLED", "TASK_FAILED:AUTH_REQUIRED"]) == {
        "s": ["TASK_FAILED:AUTH_REQUIRED", "TASK_CANCELLED"]
    }
    assert coverage_gaps(got) == {
        "s": got["sessions"][0]["coverage"]["missing"]["categories"]
        + got["sessions"][0]["coverage"]["missing"]["faults"]
    }
    with pytest.raises(ValueError, match="TASK_CANCELED \\(did you mean 'TASK_CANCELLED'\\?\\)"):
        coverage_gaps(got, ["TASK_CANCELED"])


# -- the report's parameter ---------------------------------------------------------------


def test_get_admin_report_takes_the_silence_bound() -> None:
    with Server() as server:
        answer = requests.get(f"{server.url}/__admin/report", timeout=10)
        assert answer.json()["policy"]["abandoned_ms"] == 5000
        answer = requests.get(
            f"{server.url}/__admin/report", params={"abandoned_ms": "250"}, timeout=10
        )
        assert answer.status_code == 200
        assert answer.json()["policy"]["abandoned_ms"] == 250
        bad = requests.get(
            f"{server.url}/__admin/report", params={"abandoned_ms": "-1"}, timeout=10
        )
        assert bad.status_code == 400
        assert bad.json()["error"]["details"]["parameter"] == "abandoned_ms"


# -- a server's report and its gates ----------------------------------------------------


def test_a_servers_report_and_the_require_gate_read_the_tasks_of_its_journal() -> None:
    """Entries recorded in a real server's journal as the engine records them: the
    findings over HTTP, and ``mockskill report --require`` naming the task rows."""
    now = time.time()
    j = Journal()
    j.submit(0, "t1")
    j.poll(0.25, "t1")  # 125 ms after a 202 that advised 1 s
    j.poll(1.5, "t1", "failed", error_code="EXECUTION_TIMEOUT")
    with Server() as server:
        for entry in j.entries:
            # Moved to now: a report judges silence by its own time.
            at = now - 10 + (entry.started - T0)
            server.state.record(
                entry._replace(
                    id=server.state.next_id(),
                    started=at,
                    finished=at + entry.finished - entry.started,
                )
            )
        got = requests.get(f"{server.url}/__admin/report", params={"session": "s"}, timeout=10)
        session = got.json()["sessions"][0]
        assert [f["rule"] for f in session["findings"]] == ["poll-too-soon"]
        assert session["findings"][0]["task"] == "t1"
        assert session["coverage"]["tasks"]["failed"]["EXECUTION_TIMEOUT"] == 1

        def gate(*names: str) -> Any:
            args = ["report", server.url, "--session", "s", "--require", ",".join(names)]
            return CliRunner().invoke(cli, args)

        met = gate("TASK_FAILED", "TASK_FAILED:EXECUTION_TIMEOUT")
        assert met.exit_code == 0, met.output
        assert "tasks: failed EXECUTION_TIMEOUT x1" in met.output
        unmet = gate("TASK_CANCELLED")
        assert unmet.exit_code == 1
        assert "session 's' has not met TASK_CANCELLED" in unmet.output
        typo = gate("TASK_CANCELED")
        assert typo.exit_code == 2
        assert "did you mean 'TASK_CANCELLED'?" in typo.output


def test_a_long_run_of_built_urls_is_named_in_few_words() -> None:
    j = Journal()
    for n in range(12):
        j.add(
            n,
            "GET",
            url(f"guess-{n}"),
            404,
            "task",
            task=state(f"guess-{n}", "poll", None, served=False, known=False),
            error_code="TASK_NOT_FOUND",
        )
    [finding] = j.findings("status-url-ignored", now=20)
    assert finding["attempts"] == list(range(1, 13))
    assert finding["message"].endswith(
        "('guess-0', 'guess-1', 'guess-2', 'guess-3', 'guess-4',"
        " 'guess-5', 'guess-6', 'guess-7', 'guess-8', 'guess-9',"
        " and 2 more)"
    )
    assert finding["found"].endswith("; and 2 more")
