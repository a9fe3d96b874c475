"""How a consumer receives a task's callbacks, graded on hand-made journal entries.

Every delivery attempt mockskill makes is an entry of endpoint ``callback`` in the task's
session (entries.py's docstring: action ``callback``, ``delivery``, ``attempt``,
``pushed``, ``fault``, ``forged``, ``acknowledged``, ``late_ms``, ``receiver``); a submit
of a task with a callback names its ``callback_fault``. The three callback rules read
them: ``callback-not-acknowledged``, ``callback-signature-not-checked`` and
``callback-without-reconcile``; coverage counts the faults served. Times are seconds from
an arbitrary origin, in binary fractions where a test stands on a bound.
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

RECEIVER = "127.0.0.1:9999"
DEFAULT = Policy()


def state(task: str, action: str, status: str | None, **fields: Any) -> dict[str, Any]:
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


class Journal(TaskJournal):
    """One session's requests on tasks and mockskill's deliveries, made in order."""

    def submit(
        self,
        at: float,
        task: str = "t1",
        *,
        fault: str | None = "none",
        settles_at: float | None = None,
        status: int = 202,
    ) -> Entry:
        settles = None if settles_at is None else (T0 + settles_at) * 1000
        fields = state(
            task,
            "submit",
            "submitted",
            poll_after_ms=1000,
            operation=f"key:{task}",
            settles_at_ms=settles,
            callback_fault=fault,
            served=status == 202,
        )
        return self.add(at, "POST", INVOKE, status, "invoke", task=fields)

    def poll(self, at: float, task: str = "t1", status: str = "working") -> Entry:
        terminal = status in ("completed", "failed", "cancelled")
        fields = state(task, "poll", status, poll_after_ms=None if terminal else 1000)
        return self.add(at, "GET", url(task), 200, "task", task=fields)

    def deliver(
        self,
        at: float,
        task: str = "t1",
        pushed: str = "working",
        *,
        status: int | None = 204,
        acknowledged: bool | None = None,
        delivery: int = 0,
        attempt: int = 0,
        fault: str = "none",
        forged: bool = False,
        late_ms: float = 0,
    ) -> Entry:
        if acknowledged is None:
            acknowledged = status is not None and 200 <= status < 300
        fields = {
            "id": task,
            "action": "callback",
            "delivery": delivery,
            "attempt": attempt,
            "pushed": pushed,
            "fault": fault,
            "forged": forged,
            "acknowledged": acknowledged,
            "late_ms": late_ms,
            "receiver": RECEIVER,
        }
        return self.add(at, "POST", "/hooks/tasks", status, "callback", task=fields)

    def report(self, policy: Policy = DEFAULT, *, now: float = 10_000.0) -> dict[str, Any]:
        session: dict[str, Any] = report(self.entries, policy, now=T0 + now)["sessions"][0]
        return session

    def findings(self, rule: str, **kwargs: Any) -> list[dict[str, Any]]:
        return [f for f in self.report(**kwargs)["findings"] if f["rule"] == rule]


# -- the rules are known ----------------------------------------------------------------


def test_the_callback_rules_are_rules_of_the_audit() -> None:
    assert RULES[-6:-3] == (
        "callback-not-acknowledged",
        "callback-signature-not-checked",
        "callback-without-reconcile",
    )


def test_a_receiver_that_takes_every_delivery_is_clean() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    j.deliver(1, pushed="working")
    j.deliver(3, pushed="completed", delivery=1)
    session = j.report()
    assert session["findings"] == []
    assert session["clean"] is True


def test_deliveries_are_mockskills_requests_not_the_consumers() -> None:
    # A 500 from the receiver, retried at once by mockskill, is no retry of the consumer's:
    # no chain, no request counted, no category met, no timeout.
    j = Journal()
    j.submit(0, settles_at=3)
    j.deliver(1, status=500)
    j.deliver(1.25, attempt=1, status=None)
    j.deliver(2, attempt=2)
    j.deliver(3, pushed="completed", delivery=1)
    session = j.report()
    assert session["requests"] == 1
    assert [c["endpoint"] for c in session["chains"]] == [f"POST {INVOKE}"]
    assert session["timeouts"] == []
    assert not any(session["coverage"]["categories"].values())
    assert [f["rule"] for f in session["findings"]] == ["callback-not-acknowledged"]


# -- callback-not-acknowledged ----------------------------------------------------------


def test_a_delivery_answered_non_2xx_is_not_acknowledged_and_the_retry_is_named() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    first = j.deliver(1, status=500)
    j.deliver(2, attempt=1)
    [found] = j.findings("callback-not-acknowledged")
    assert found["attempts"] == [first.id]
    assert found["task"] == "t1"
    assert found["endpoint"] == "POST /hooks/tasks"
    assert "mockskill retried 1" in found["message"]
    assert f"#{first.id} working (delivery 0, attempt 0): 500" in found["found"]
    assert "2xx" in found["fix"]


def test_no_answer_and_a_2xx_past_the_timeout_are_not_acknowledged_either() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    refused = j.deliver(1, status=None)
    late = j.deliver(2, attempt=1, status=200, acknowledged=False)
    [found] = j.findings("callback-not-acknowledged")
    assert found["attempts"] == [refused.id, late.id]
    assert "no answer" in found["found"]
    assert "200 past the timeout" in found["found"]
    # The last attempt of its change: mockskill gave up on it.
    assert "gave up after 1" in found["message"]


def test_every_attempt_acknowledged_is_no_finding() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    j.deliver(1, status=200)
    j.deliver(1, status=299, delivery=1, pushed="completed")
    assert j.findings("callback-not-acknowledged") == []


def test_a_repeated_delivery_refused_is_not_acknowledged() -> None:
    # The twice fault: the receiver must answer the copy 2xx too (it dedupes, not refuses).
    j = Journal()
    j.submit(0, fault="twice", settles_at=3)
    j.deliver(1, fault="twice")
    copy = j.deliver(1.125, fault="twice", status=409)
    [found] = j.findings("callback-not-acknowledged")
    assert found["attempts"] == [copy.id]


def test_a_forged_delivery_refused_is_what_a_receiver_should_do() -> None:
    j = Journal()
    j.submit(0, fault="forged", settles_at=3)
    j.deliver(1, fault="forged", forged=True, status=401)
    j.poll(4, status="completed")  # it learnt of the end from the status URL
    session = j.report()
    assert session["findings"] == []


# -- callback-signature-not-checked -----------------------------------------------------


def test_a_forged_delivery_taken_is_named() -> None:
    j = Journal()
    j.submit(0, fault="forged", settles_at=3)
    taken = j.deliver(1, fault="forged", forged=True, status=204)
    j.deliver(3, fault="forged", forged=True, status=403, delivery=1, pushed="completed")
    [found] = j.findings("callback-signature-not-checked")
    assert found["attempts"] == [taken.id]
    assert found["task"] == "t1"
    assert "1 forged delivery" in found["message"]
    assert "HMAC-SHA256" in found["fix"]
    assert j.findings("callback-not-acknowledged") == []


def test_a_forged_delivery_taken_past_the_timeout_was_taken_all_the_same() -> None:
    j = Journal()
    j.submit(0, fault="forged", settles_at=3)
    j.deliver(1, fault="forged", forged=True, status=200, acknowledged=False)
    assert len(j.findings("callback-signature-not-checked")) == 1


def test_a_delivery_with_a_valid_signature_taken_is_no_forgery() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    j.deliver(1, forged=False, status=204)
    assert j.findings("callback-signature-not-checked") == []


# -- callback-without-reconcile ---------------------------------------------------------
# A task submitted at 0, its life ending at 3 s; abandoned_ms (5 s) is the bound: judged
# from 8 s on.


def lost(*polls: tuple[float, str], now: float = 100, policy: Policy = DEFAULT) -> Journal:
    j = Journal()
    j.submit(0, fault="never", settles_at=3)
    for at, status in polls:
        j.poll(at, status=status)
    return j


def test_a_lost_callback_never_reconciled_is_named() -> None:
    j = lost()
    [found] = j.findings("callback-without-reconcile")
    assert found["attempts"] == [1]
    assert found["task"] == "t1"
    assert found["endpoint"] == f"POST {INVOKE}"
    assert "it first changed 3000 ms later" in found["found"]
    assert "GET the status URL" in found["fix"]
    # One bug, one finding: not task-abandoned's too.
    assert j.findings("task-abandoned") == []


def test_it_is_judged_only_once_the_task_ended_and_the_bound_passed() -> None:
    assert lost().findings("callback-without-reconcile", now=7.875) == []
    assert len(lost().findings("callback-without-reconcile", now=8)) == 1


def test_the_bound_is_the_abandoned_policy_parameter() -> None:
    policy = Policy(abandoned_ms=500)
    assert lost().findings("callback-without-reconcile", policy=policy, now=3.375) == []
    assert len(lost().findings("callback-without-reconcile", policy=policy, now=3.5)) == 1


def test_a_poll_after_the_task_changed_reconciles() -> None:
    assert lost((4, "completed")).findings("callback-without-reconcile") == []
    # At the bound's last instant it still counts; at the bound it is too late.
    assert lost((7.875, "completed")).findings("callback-without-reconcile") == []
    late = lost((8, "completed")).findings("callback-without-reconcile")
    assert len(late) == 1
    assert "#2, 0 ms past the bound" in late[0]["found"]


def test_a_poll_that_learnt_of_a_change_reconciles_before_the_end() -> None:
    j = lost((1, "working"))
    assert j.findings("callback-without-reconcile") == []
    # ...but then left unpolled, it was abandoned.
    assert len(j.findings("task-abandoned")) == 1


def test_a_poll_that_saw_it_still_submitted_learnt_nothing() -> None:
    [found] = lost((0.5, "submitted")).findings("callback-without-reconcile")
    assert found["attempts"] == [1, 2]
    assert "(1 before it)" in found["found"]


def test_a_task_whose_202_never_reached_the_consumer_has_nothing_to_reconcile() -> None:
    j = Journal()
    j.submit(0, fault="never", settles_at=3, status=503)
    assert j.findings("callback-without-reconcile") == []


def test_a_task_the_consumer_cancelled_needs_no_reconcile() -> None:
    j = lost()
    cancel = state("t1", "cancel", "submitted", cancelling=True, poll_after_ms=1000)
    j.add(0.5, "DELETE", url("t1"), 202, "task", task=cancel)
    assert j.findings("callback-without-reconcile") == []
    refused = lost()
    no = state("t1", "cancel", "submitted", served=False)
    refused.add(0.5, "DELETE", url("t1"), 409, "task", task=no, error_code="TASK_NOT_CANCELLABLE")
    assert len(refused.findings("callback-without-reconcile")) == 1


def test_a_callback_that_came_needs_no_reconcile() -> None:
    j = Journal()
    j.submit(0, fault="none", settles_at=3)
    j.deliver(3, pushed="completed")
    assert j.findings("callback-without-reconcile") == []
    # Its end reached the receiver: not abandoned for being left unpolled.
    assert j.findings("task-abandoned") == []


def test_a_task_without_a_callback_is_task_abandoneds_alone() -> None:
    j = Journal()
    j.submit(0, fault=None, settles_at=3)
    assert j.findings("callback-without-reconcile") == []
    assert len(j.findings("task-abandoned")) == 1


def test_a_terminal_delivery_refused_is_no_end_the_consumer_took() -> None:
    j = Journal()
    j.submit(0, settles_at=3)
    j.deliver(3, pushed="completed", status=500)
    assert len(j.findings("task-abandoned")) == 1


def test_a_life_with_no_known_end_is_judged_after_its_first_change() -> None:
    j = Journal()
    j.submit(0, fault="never", settles_at=None)
    j.poll(1, status="submitted")
    assert j.findings("callback-without-reconcile") == []  # no change known: nothing to judge
    # A withheld delivery journalled (mockskill knew of a change at 2 s): judged from 7 s.
    j.deliver(2, fault="never", status=None, acknowledged=False)
    assert j.findings("callback-without-reconcile", now=6.875) == []
    assert len(j.findings("callback-without-reconcile", now=7)) == 1


# -- coverage and gates -----------------------------------------------------------------


def test_coverage_counts_each_fault_served_once_per_task() -> None:
    j = Journal()
    j.submit(0, "t1", fault="twice", settles_at=3)
    j.deliver(1, "t1", fault="twice")
    j.deliver(1, "t1", fault="twice")
    j.submit(0, "t2", fault="never", settles_at=3)
    j.poll(4, "t2", "completed")
    j.submit(0, "t3", fault="forged", settles_at=3)
    j.deliver(1, "t3", fault="forged", forged=True, status=401)
    j.submit(0, "t4", fault="late", settles_at=30)  # no delivery yet: not served
    j.submit(0, "t5", fault="none", settles_at=3)
    j.deliver(1, "t5")
    got = coverage(j.entries)["tasks"]["callbacks"]
    assert got == {"twice": 1, "late": 0, "out_of_order": 0, "never": 1, "forged": 1}


def test_the_gates_can_require_the_callback_faults() -> None:
    j = Journal()
    j.submit(0, fault="never", settles_at=3)
    j.poll(4, status="completed")
    got = report(j.entries, now=T0 + 5)
    assert coverage_gaps(got, ["CALLBACK_FAULT", "CALLBACK_FAULT:never"]) == {}
    assert coverage_gaps(got, ["CALLBACK_FAULT:forged"]) == {"s": ["CALLBACK_FAULT:forged"]}
    with pytest.raises(ValueError, match=r"CALLBACK_FAULT:nevr .*CALLBACK_FAULT:never"):
        coverage_gaps(got, ["CALLBACK_FAULT:nevr"])
    # A callback delivered as it should be is no fault served.
    plain = Journal()
    plain.submit(0, fault="none", settles_at=3)
    plain.deliver(3, pushed="completed")
    gaps = coverage_gaps(report(plain.entries, now=T0 + 5), ["CALLBACK_FAULT"])
    assert gaps == {"s": ["CALLBACK_FAULT"]}


def test_the_table_names_the_callback_faults_and_findings() -> None:
    j = Journal()
    j.submit(0, fault="forged", settles_at=3)
    j.deliver(1, fault="forged", forged=True, status=204)
    text = table(report(j.entries, now=T0 + 100))
    assert "callback faults: forged x1" in text
    assert "callback-signature-not-checked" in text


def test_a_servers_report_and_the_require_gate_read_the_callbacks_of_its_journal() -> None:
    """Entries recorded in a real server's journal as the engine and the courier record
    them: the findings and coverage over HTTP, ``mockskill report --require`` naming the
    callback faults."""
    now = time.time()
    j = Journal()
    j.submit(0, "t1", fault="forged", settles_at=3)
    j.deliver(1, "t1", fault="forged", forged=True, status=204)
    j.poll(4, "t1", "completed")
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
        assert [f["rule"] for f in session["findings"]] == ["callback-signature-not-checked"]
        assert session["requests"] == 2  # the submit and the poll: the delivery is mockskill's
        assert session["coverage"]["tasks"]["callbacks"]["forged"] == 1
        [timeline] = session["tasks"]
        assert [d["forged"] for d in timeline["deliveries"]] == [True]

        def gate(*names: str) -> Any:
            args = ["report", server.url, "--session", "s", "--require", ",".join(names)]
            return CliRunner().invoke(cli, args)

        met = gate("CALLBACK_FAULT", "CALLBACK_FAULT:forged")
        assert met.exit_code == 0, met.output
        assert "callback faults: forged x1" in met.output
        unmet = gate("CALLBACK_FAULT:never")
        assert unmet.exit_code == 1
        assert "session 's' has not met CALLBACK_FAULT:never" in unmet.output
