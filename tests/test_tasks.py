"""Long-running tasks from outside: a task skill's invoke answers 202 with a status URL,
polls follow it and see the task's life move on time and by poll count, cancel and
input act on it, a scripted ``polls:`` plays steps by poll number, unknown ids and
expired tasks get 404, the live-task cap 503, and every request journals what it did to
its task (docs/tasks.md). Real servers on ephemeral ports, real clients (requests, httpx).

Each task skill is written as a scenario's YAML ``task:`` (docs/scenarios.md), as a
consumer's author would write it.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import requests
from click.testing import CliRunner
from werkzeug.test import Client

from mockskill import ScenarioError, Server, create_app, load_text
from mockskill.cli import cli
from mockskill.cli import serve as serve_command
from mockskill.engine.engine import Engine
from mockskill.engine.state import State
from mockskill.engine.task_ids import make
from mockskill.scenario.model import ScenarioSet

SESSION = "Mockskill-Session"


def skill(task: str, *, invoke: str = "", idempotency_key: bool = False) -> ScenarioSet:
    """Skill ``report`` run as a task (*task*: what its ``task:`` holds; *invoke*: its
    ``invoke:``, else the default ``{task: submit}``), beside skill ``plain``, which runs
    none."""
    lines = ["skills:", "  - id: report"]
    if idempotency_key:
        lines.append("    idempotency_key: true")
    lines += ["    task:", textwrap.indent(textwrap.dedent(task).strip("\n"), "      ")]
    if invoke:
        lines += ["    invoke:", textwrap.indent(textwrap.dedent(invoke).strip("\n"), "      ")]
    lines.append("  - id: plain")
    return load_text("\n".join(lines) + "\n", "tasks.yaml")


def yaml_skill(text: str) -> ScenarioSet:
    """The scenario *text* (YAML, indented as written here) as a server serves it."""
    return load_text(textwrap.dedent(text), "tasks.yaml")


POLLED_3 = """
    life:
      - {status: working, polls: 3}
      - {status: completed, json: {report: done}}
    """
"""Working for three polls, then completed."""
POLLED_1 = """
    life:
      - {status: working, polls: 1}
      - {status: completed, json: {report: done}}
    """
"""Working for one poll, then completed."""
FIVE_SECONDS = """
    life:
      - {status: working, for: 5s}
      - {status: completed, json: {report: done}}
    """
"""Working for five seconds, then completed."""


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Server] = []

    def started(scenarios: ScenarioSet, **options: Any) -> Server:
        server = Server(scenarios, **options).start()
        servers.append(server)
        return server

    yield started
    for server in servers:
        server.stop()


def submit(url: str, session: str = "s", **headers: str) -> requests.Response:
    return requests.post(
        f"{url}/skills/report/invoke", json={"q": 1}, headers={SESSION: session, **headers}
    )


def journal(server: Server, session: str = "s") -> list[dict[str, Any]]:
    entries = requests.get(f"{server.url}/__admin/journal", params={"session": session}).json()
    return [e for e in entries["entries"] if e["task"] is not None]


# -- submit ------------------------------------------------------------------------------


def test_a_submit_answers_202_with_location_retry_after_and_the_task(serve: Any) -> None:
    server = serve(
        skill(
            """
            poll_after: 1500ms
            life:
              - {status: working, for: 5s}
              - {status: completed, json: {report: done}}
            """
        )
    )
    answer = submit(server.url)
    assert answer.status_code == 202
    task = answer.json()["task"]
    assert task["status"] == "working"
    assert answer.headers["Location"] == task["status_url"]
    assert task["status_url"] == f"{server.url}/skills/report/tasks/{task['id']}"
    assert answer.headers["Retry-After"] == "2"  # 1500 ms, rounded up
    assert task["poll_after_ms"] == 1500
    assert task["ttl_ms"] == 300_000
    assert task["created_at"].endswith("Z")


def test_the_status_url_is_absolute_on_the_host_the_client_used(serve: Any) -> None:
    server = serve(skill(FIVE_SECONDS))
    answer = requests.post(
        f"{server.url}/skills/report/invoke", headers={"Host": f"localhost:{server.port}"}
    )
    assert answer.headers["Location"].startswith(f"http://localhost:{server.port}/skills/report/")


def test_polls_follow_location_with_requests_and_httpx(serve: Any) -> None:
    server = serve(
        skill(
            """
            life:
              - {status: submitted, polls: 1}
              - {status: working, polls: 1}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    assert requests.get(location).json()["task"]["status"] == "submitted"
    with httpx.Client() as client:
        second = client.get(location)
        assert second.status_code == 200
        assert second.json()["task"]["status"] == "working"
        assert "Retry-After" in second.headers
        done = client.get(location)
    assert done.json()["task"]["status"] == "completed"
    assert done.json()["task"]["result"] == {"report": "done"}
    assert "Retry-After" not in done.headers


def test_states_move_on_time_with_progress_spread_over_the_phase(serve: Any) -> None:
    server = serve(
        skill(
            """
            life:
              - {status: submitted, for: 300ms}
              - {status: working, for: 600ms, progress: [25, 75], poll_after: 100ms}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    seen: list[tuple[str, int | None]] = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        task = requests.get(location).json()["task"]
        if not seen or seen[-1] != (task["status"], task.get("progress")):
            seen.append((task["status"], task.get("progress")))
        if task["status"] == "completed":
            break
        time.sleep(0.03)
    assert seen == [("submitted", None), ("working", 25), ("working", 75), ("completed", None)]


def test_poll_after_changes_with_the_phase(serve: Any) -> None:
    server = serve(
        skill(
            """
            poll_after: 1s
            life:
              - {status: submitted, polls: 1}
              - {status: working, polls: 1, poll_after: 3s}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    first, second = requests.get(location), requests.get(location)
    assert (first.headers["Retry-After"], second.headers["Retry-After"]) == ("1", "3")
    assert second.json()["task"]["poll_after_ms"] == 3000


def test_a_failed_task_reports_the_unified_error_with_its_retry_advice(serve: Any) -> None:
    server = serve(
        skill(
            """
            life:
              - {status: working, polls: 1}
              - {status: failed, error: EXECUTION_TIMEOUT}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    requests.get(location)
    task = requests.get(location).json()["task"]
    assert task["status"] == "failed"
    assert task["error"]["code"] == "EXECUTION_TIMEOUT"
    assert task["error"]["retry"]["max_attempts"] >= 1


def test_a_failed_tasks_answers_are_journalled_with_its_errors_code_which_coverage_counts(
    serve: Any,
) -> None:
    server = serve(
        skill(
            """
            life:
              - {status: working, polls: 1}
              - {status: failed, error: EXECUTION_TIMEOUT}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    requests.get(location)
    assert requests.get(location).json()["task"]["status"] == "failed"
    requests.get(location)  # the grace poll: the same task, counted once
    polls = [e for e in journal(server) if e["task"]["action"] == "poll"]
    assert [(e["status"], e["error_code"]) for e in polls] == [
        (200, None),
        (200, "EXECUTION_TIMEOUT"),
        (200, "EXECUTION_TIMEOUT"),
    ]
    report = requests.get(f"{server.url}/__admin/report", params={"session": "s"}).json()
    coverage = report["sessions"][0]["coverage"]
    assert coverage["tasks"]["failed"]["EXECUTION_TIMEOUT"] == 1
    assert "unknown" not in coverage["tasks"]["failed"]
    assert coverage["categories"]["EXECUTION_TIMEOUT"] == 1
    # Polled at once (too soon), but no retry rule reads a failed task's poll as a failed
    # request to retry.
    assert {f["rule"] for f in report["sessions"][0]["findings"]} == {"poll-too-soon"}


def test_the_invoke_plays_its_steps_before_the_submit(serve: Any) -> None:
    server = serve(
        skill(
            POLLED_3,
            invoke="""
            - {error: ENDPOINT_UNREACHABLE, times: 1}
            - task: submit
            """,
        )
    )
    assert submit(server.url).status_code == 503
    assert submit(server.url).status_code == 202


def test_a_delay_on_the_submit_holds_its_202_with_the_task_started_meanwhile(
    serve: Any,
) -> None:
    server = serve(
        yaml_skill(
            """
            skills:
              - id: report
                task:
                  life: [{status: working, polls: 3}, {status: completed, json: {ok: 1}}]
                invoke:
                  - {task: submit, delay: 400}
            """
        )
    )
    began = time.monotonic()
    answer = submit(server.url)
    assert answer.status_code == 202
    assert time.monotonic() - began >= 0.4
    (entry,) = journal(server)
    assert entry["delay_ms"] == 400
    # Started when it was asked for, not when the 202 came.
    created = datetime.fromisoformat(answer.json()["task"]["created_at"]).timestamp()
    assert entry["finished"] - created >= 0.35


def test_a_drawn_delay_on_the_submit_is_drawn_per_request(serve: Any) -> None:
    server = serve(skill(POLLED_3, invoke="- {task: submit, delay: {uniform: [100, 300]}}"))
    assert all(submit(server.url).status_code == 202 for _ in range(3))
    delays = [e["delay_ms"] for e in journal(server)]
    assert all(100 <= delay <= 300 for delay in delays)
    assert len(set(delays)) == 3


LOST_202 = """
    skills:
      - id: report
        idempotency_key: {idempotent}
        task:
          life: [{{status: working, for: 1m}}, {{status: completed, json: {{ok: 1}}}}]
        invoke:
          - {{task: submit, after: {after}, times: 1}}
          - task: submit
    """


def test_a_lost_202_after_an_error_started_the_task_and_a_retry_starts_a_second(
    serve: Any,
) -> None:
    server = serve(
        yaml_skill(LOST_202.format(idempotent="false", after="{error: EXECUTION_TIMEOUT}"))
    )
    lost = submit(server.url)
    assert lost.status_code == 504
    assert lost.json()["error"]["code"] == "EXECUTION_TIMEOUT"
    assert "Location" not in lost.headers
    again = submit(server.url)  # no key, the same body: the same operation
    assert again.status_code == 202
    first, second = journal(server)
    assert first["task"]["known"] is True
    assert first["task"]["served"] is False  # the consumer never saw it
    assert first["executed"] is True  # it ran, then its answer was lost
    assert first["task"]["operation"] == second["task"]["operation"]
    assert first["task"]["id"] != second["task"]["id"]
    # The first task runs: its status URL (never sent) answers it.
    url = f"{server.url}/skills/report/tasks/{first['task']['id']}"
    assert requests.get(url).json()["task"]["status"] == "working"
    report = requests.get(f"{server.url}/__admin/report", params={"session": "s"}).json()
    rules = [f["rule"] for f in report["sessions"][0]["findings"]]
    assert "reinvoked-while-running" in rules


def test_a_lost_202_after_a_fault_started_the_task_and_a_fresh_key_starts_another(
    serve: Any,
) -> None:
    server = serve(
        yaml_skill(LOST_202.format(idempotent="true", after="{fault: CONNECTION_RESET_BY_PEER}"))
    )
    with pytest.raises(requests.ConnectionError):
        submit(server.url, **{"Idempotency-Key": "k-1"})
    replayed = submit(server.url, **{"Idempotency-Key": "k-1"})  # the same key: the lost 202
    fresh = submit(server.url, **{"Idempotency-Key": "k-2"})  # a fresh key: a second task
    assert replayed.status_code == fresh.status_code == 202
    first, *_ = entries = journal(server)
    assert first["fault"] == "CONNECTION_RESET_BY_PEER"
    assert first["executed"] is True
    assert replayed.json()["task"]["id"] == first["task"]["id"]
    assert fresh.json()["task"]["id"] != first["task"]["id"]
    assert [e["task"]["id"] for e in entries] == [first["task"]["id"], fresh.json()["task"]["id"]]


def test_after_beside_a_polls_task_status_is_a_positioned_load_problem() -> None:
    with pytest.raises(ScenarioError) as caught:
        yaml_skill(
            """
            skills:
              - id: report
                task:
                  life: [{status: working, polls: 1}, {status: completed}]
                  polls:
                    - {task: status, after: {error: EXECUTION_TIMEOUT}}
            """
        )
    (problem,) = caught.value.problems
    assert problem.path == "skills[0].task.polls[0].after"
    assert (problem.line, problem.column) == (7, 26)
    assert problem.expected == "after only beside task: submit"
    assert problem.found == "after beside task: status"


# -- ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_id", "session"),
    [
        ("nonsense", "default"),
        # The form, but not mockskill's mac: journalled in the session it names ("s").
        ("cw.0.0000000000", "s"),
        ("cw.0", "default"),
        ("." * 5000, "default"),
        ("cw.99999999999999999999999.abcdefabcd", "default"),
    ],
)
def test_an_id_mockskill_never_handed_out_is_404_task_not_found(
    serve: Any, task_id: str, session: str
) -> None:
    server = serve(skill(POLLED_3))
    for method in ("GET", "DELETE", "POST"):
        answer = requests.request(method, f"{server.url}/skills/report/tasks/{task_id}", json={})
        assert answer.status_code == 404, method
        assert answer.json()["error"]["code"] == "TASK_NOT_FOUND"
    entries = journal(server, session)
    assert len(entries) == 3
    assert all(e["task"]["known"] is False and e["task"]["served"] is False for e in entries)


def test_another_servers_id_is_404_and_so_is_a_skill_that_runs_no_task(serve: Any) -> None:
    scenarios = skill(POLLED_3)
    one, other = serve(scenarios), serve(scenarios)
    location = submit(one.url).headers["Location"]
    foreign = location.replace(one.url, other.url)
    assert requests.get(foreign).json()["error"]["code"] == "TASK_NOT_FOUND"
    at_plain = location.replace("/skills/report/", "/skills/plain/")
    assert requests.get(at_plain).json()["error"]["code"] == "TASK_NOT_FOUND"


def test_a_poll_needs_no_session_header_and_is_journalled_in_the_tasks_session(
    serve: Any,
) -> None:
    server = serve(skill(POLLED_3))
    location = submit(server.url, session="tenant-a").headers["Location"]
    assert requests.get(location).status_code == 200  # no Mockskill-Session
    assert requests.get(location, headers={SESSION: "tenant-b"}).status_code == 200
    polls = [e for e in journal(server, "tenant-a") if e["task"]["action"] == "poll"]
    assert [e["task"]["poll"] for e in polls] == [0, 1]
    assert journal(server, "default") == journal(server, "tenant-b") == []


# -- cancel -----------------------------------------------------------------------------


def test_a_cancel_with_no_settle_is_cancelled_at_once(serve: Any) -> None:
    server = serve(skill(FIVE_SECONDS))
    location = submit(server.url).headers["Location"]
    answer = requests.delete(location)
    assert answer.status_code == 200
    assert answer.json()["task"]["status"] == "cancelled"
    assert requests.get(location).json()["task"]["status"] == "cancelled"
    assert requests.delete(location).json()["error"]["code"] == "TASK_FINISHED"


def test_a_cancel_settles_then_the_task_is_cancelled(serve: Any) -> None:
    server = serve(
        skill(
            """
            cancel: {settle: 400ms}
            life:
              - {status: working, for: 5s}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    accepted = requests.post(f"{location}/cancel")  # the alias
    assert accepted.status_code == 202
    task = accepted.json()["task"]
    assert (task["status"], task["cancelling"]) == ("working", True)
    assert requests.get(location).json()["task"]["cancelling"] is True
    time.sleep(0.5)
    settled = requests.get(location)
    assert settled.json()["task"]["status"] == "cancelled"
    assert "Retry-After" not in settled.headers


def test_a_cancel_loses_the_race_when_the_task_completes_within_the_settle(serve: Any) -> None:
    server = serve(
        skill(
            """
            cancel: {settle: 600ms}
            life:
              - {status: working, for: 300ms}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    assert requests.delete(location).status_code == 202
    time.sleep(0.8)
    assert requests.get(location).json()["task"]["status"] == "completed"


def test_a_cancel_in_a_status_not_allowed_is_409_and_changes_nothing(serve: Any) -> None:
    server = serve(
        skill(
            """
            cancel: {allowed: [submitted]}
            life:
              - {status: submitted, polls: 1}
              - {status: working, polls: 5}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    requests.get(location), requests.get(location)  # a poll submitted, then working
    refused = requests.delete(location)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "TASK_NOT_CANCELLABLE"
    task = requests.get(location).json()["task"]
    assert task["status"] == "working"
    assert "cancelling" not in task


def test_a_cancel_in_a_terminal_status_is_409_task_finished(serve: Any) -> None:
    server = serve(skill(POLLED_1))
    location = submit(server.url).headers["Location"]
    requests.get(location), requests.get(location)  # a poll working, then completed
    refused = requests.delete(location)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "TASK_FINISHED"


# -- input ------------------------------------------------------------------------------


def input_skill() -> ScenarioSet:
    return skill(
        """
        life:
          - {status: working, polls: 1}
          - {status: input_required, expects: {body: {/answer: {exists: true}}}}
          - {status: working, polls: 1}
          - {status: completed, json: {report: done}}
        """
    )


def test_an_input_required_task_waits_for_a_valid_input_then_goes_on(serve: Any) -> None:
    server = serve(input_skill())
    location = submit(server.url).headers["Location"]
    requests.get(location)
    for _ in range(3):  # it waits
        assert requests.get(location).json()["task"]["status"] == "input_required"
    accepted = requests.post(location, json={"answer": 42})
    assert accepted.status_code == 202
    assert accepted.json()["task"]["status"] == "working"
    requests.get(location)
    assert requests.get(location).json()["task"]["status"] == "completed"


def test_an_input_that_does_not_meet_expects_is_422_naming_the_failed_condition(
    serve: Any,
) -> None:
    server = serve(input_skill())
    location = submit(server.url).headers["Location"]
    requests.get(location), requests.get(location)
    refused = requests.post(location, json={"other": 1})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "TASK_INPUT_INVALID"
    assert any("/answer" in failed for failed in error["details"]["failed"])
    assert requests.get(location).json()["task"]["status"] == "input_required"


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b""])
def test_an_input_that_is_no_json_object_is_422(serve: Any, body: bytes) -> None:
    server = serve(input_skill())
    location = submit(server.url).headers["Location"]
    refused = requests.post(location, data=body, headers={"Content-Type": "application/json"})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "TASK_INPUT_INVALID"


def test_an_input_while_not_waiting_for_one_is_409(serve: Any) -> None:
    server = serve(input_skill())
    location = submit(server.url).headers["Location"]
    refused = requests.post(location, json={"answer": 1})  # still working
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "TASK_NOT_AWAITING_INPUT"
    requests.get(location)
    assert requests.get(location).json()["task"]["status"] == "input_required"


TWO_INPUTS = yaml_skill(
    """
    skills:
      - id: report
        task:
          life:
            - {status: input_required, expects: {body: {/name: {exists: true}}}}
            - {status: working, polls: 1}
            - {status: input_required, expects: {body: {/confirm: {equals: true}}}}
            - {status: completed, json: {report: done}}
    """
)


def test_each_input_phase_takes_the_input_its_expects_describe(serve: Any) -> None:
    server = serve(TWO_INPUTS)
    location = submit(server.url).headers["Location"]
    early = requests.post(location, json={"confirm": True})  # the second phase's input
    assert early.status_code == 422
    error = early.json()["error"]
    assert error["code"] == "TASK_INPUT_INVALID"
    assert len(error["details"]["failed"]) == 1
    assert "/name" in error["details"]["failed"][0]  # what the phase awaited wanted
    assert requests.get(location).json()["task"]["status"] == "input_required"
    named = requests.post(location, json={"name": "Ada"})
    assert named.status_code == 202
    assert named.json()["task"]["status"] == "working"
    assert requests.get(location).json()["task"]["status"] == "working"
    assert requests.get(location).json()["task"]["status"] == "input_required"
    again = requests.post(location, json={"name": "Ada"})  # the first phase's, once more
    assert again.status_code == 422
    assert "/confirm" in again.json()["error"]["details"]["failed"][0]
    confirmed = requests.post(location, json={"confirm": True})
    assert confirmed.status_code == 202
    assert confirmed.json()["task"]["status"] == "completed"
    inputs = [e["task"] for e in journal(server) if e["task"]["action"] == "input"]
    assert [t["served"] for t in inputs] == [False, True, False, True]


def test_an_input_fitting_no_phase_while_none_is_awaited_is_409(serve: Any) -> None:
    server = serve(TWO_INPUTS)
    location = submit(server.url).headers["Location"]
    requests.post(location, json={"name": "Ada"})
    refused = requests.post(location, json={"other": 1})  # working: no input awaited
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "TASK_NOT_AWAITING_INPUT"


# -- credentials, forced errors, unknown skills -----------------------------------------

GUARDED = yaml_skill(
    """
    auth:
      tokens:
        - {token: good, scopes: [skill:invoke]}
        - {token: narrow, scopes: [skill:read]}
    skills:
      - id: report
        requires: true
        task:
          life: [{status: working, polls: 2}, {status: completed, json: {report: done}}]
    """
)


def test_a_status_url_asks_for_the_credentials_its_skill_requires(serve: Any) -> None:
    server = serve(GUARDED)
    good = {"Authorization": "Bearer good"}
    assert submit(server.url).status_code == 401  # (its invoke, as before)
    location = submit(server.url, **good).headers["Location"]
    bare = requests.get(location)
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "AUTH_REQUIRED"
    assert "WWW-Authenticate" in bare.headers
    narrow = requests.delete(location, headers={"Authorization": "Bearer narrow"})
    assert narrow.status_code == 403
    assert narrow.json()["error"]["code"] == "PERMISSION_DENIED"
    assert (
        requests.post(location, json={}, headers={"Authorization": "Bearer bad"}).status_code == 401
    )
    polled = requests.get(location, headers=good)
    assert polled.status_code == 200
    assert polled.json()["task"]["status"] == "working"
    entries = journal(server)
    assert [(e["status"], e["task"]["action"], e["task"]["served"]) for e in entries] == [
        (202, "submit", True),
        (401, "poll", False),
        (403, "cancel", False),
        (401, "input", False),
        (200, "poll", True),
    ]
    assert entries[-1]["task"]["poll"] == 0  # the refused requests touched nothing
    assert all(e["task"]["known"] for e in entries)


def test_mockskill_error_on_a_status_url_answers_that_error_and_touches_nothing(
    serve: Any,
) -> None:
    server = serve(skill(POLLED_1))
    location = submit(server.url).headers["Location"]
    forced = requests.get(location, headers={"Mockskill-Error": "ENDPOINT_UNREACHABLE"})
    assert forced.status_code == 503
    assert forced.json()["error"]["code"] == "ENDPOINT_UNREACHABLE"
    assert requests.delete(location, headers={"Mockskill-Error": "nope"}).status_code == 400
    assert requests.get(location).json()["task"]["status"] == "working"  # its first poll
    entries = journal(server)[1:]
    assert [(e["forced"], e["error_code"], e["task"]["served"]) for e in entries] == [
        (True, "ENDPOINT_UNREACHABLE", False),
        (True, "MOCKSKILL_BAD_REQUEST", False),  # a category it cannot force
        (False, None, True),
    ]
    assert all(e["task"]["known"] for e in entries)


def test_a_status_url_of_an_unknown_skill_journals_a_task_it_does_not_know(serve: Any) -> None:
    server = serve(skill(POLLED_1))
    answer = requests.get(f"{server.url}/skills/nope/tasks/made-up")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "SKILL_NOT_FOUND"
    (entry,) = journal(server, "default")
    assert entry["endpoint"] == "unmatched"
    assert (entry["task"]["id"], entry["task"]["action"]) == ("made-up", "poll")
    assert (entry["task"]["known"], entry["task"]["served"]) == (False, False)
    report = requests.get(f"{server.url}/__admin/report", params={"session": "default"}).json()
    rules = [f["rule"] for f in report["sessions"][0]["findings"]]
    assert rules == ["status-url-ignored"]


# -- ttl, cap ---------------------------------------------------------------------------


def test_after_its_ttl_the_status_url_answers_404_task_expired(serve: Any) -> None:
    server = serve(
        skill(
            """
            ttl: 400ms
            life:
              - {status: working, for: 100ms}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    time.sleep(0.15)
    assert requests.get(location).json()["task"]["status"] == "completed"
    time.sleep(0.45)
    gone = requests.get(location)
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "TASK_EXPIRED"
    assert journal(server)[-1]["task"]["expired"] is True


def test_over_the_live_task_cap_a_submit_gets_503_with_retry_advice(serve: Any) -> None:
    server = serve(skill(FIVE_SECONDS), max_tasks=2)
    assert [submit(server.url).status_code for _ in range(2)] == [202, 202]
    refused = submit(server.url, session="another")
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert error["retry"]["suggested_delay_ms"] > 0
    assert "Retry-After" in refused.headers
    reset = requests.post(f"{server.url}/__admin/reset", json={"session": "s"})
    assert reset.status_code == 200  # forgets the session's tasks: room again
    assert submit(server.url).status_code == 202


def test_max_tasks_below_one_is_refused() -> None:
    with pytest.raises(Exception, match="max_tasks"):
        Server(skill(POLLED_1), max_tasks=0)


# -- scripted polls ---------------------------------------------------------------------


def test_scripted_polls_play_their_steps_by_poll_number(serve: Any) -> None:
    server = serve(
        skill(
            """
            life:
              - {status: working, polls: 4}
              - {status: completed, json: {report: done}}
            polls:
              - {error: ENDPOINT_UNREACHABLE, times: 2}
              - {error: EXECUTION_TIMEOUT}
              - task: status
            """
        )
    )
    location = submit(server.url).headers["Location"]
    codes = []
    for _ in range(5):
        answer = requests.get(location)
        body = answer.json()
        codes.append(body["error"]["code"] if "error" in body else body["task"]["status"])
    assert codes == [
        "ENDPOINT_UNREACHABLE",
        "ENDPOINT_UNREACHABLE",
        "EXECUTION_TIMEOUT",
        "working",
        "completed",  # the polls counted the errored ones too
    ]
    served = [e["task"]["served"] for e in journal(server) if e["task"]["action"] == "poll"]
    assert served == [False, False, False, True, True]


# -- the journal ------------------------------------------------------------------------


def test_every_request_on_a_task_journals_what_it_did(serve: Any) -> None:
    server = serve(
        skill(
            """
            cancel: {settle: 5s}
            life:
              - {status: working, for: 5s, progress: [10], poll_after: 2s}
              - {status: completed, json: {report: done}}
            """
        )
    )
    location = submit(server.url, **{"Idempotency-Key": "k-1"}).headers["Location"]
    task_id = location.rsplit("/", 1)[1]
    requests.get(location)
    requests.delete(location)
    submitted, polled, cancelled = (e["task"] for e in journal(server))
    assert submitted["action"] == "submit"
    assert submitted["id"] == task_id
    assert submitted["operation"] == "key:k-1"
    assert submitted["status"] == "working"
    assert submitted["settles_at_ms"] == pytest.approx(submitted_at(server) + 5000, abs=50)
    assert polled == {
        "id": task_id,
        "action": "poll",
        "known": True,
        "expired": False,
        "served": True,
        "status": "working",
        "cancelling": False,
        "progress": 10,
        "poll": 0,
        "poll_after_ms": 2000,
        "terminal_at_ms": None,
    }
    assert (cancelled["action"], cancelled["cancelling"], cancelled["poll"]) == (
        "cancel",
        True,
        None,
    )


def submitted_at(server: Server) -> float:
    entries = requests.get(f"{server.url}/__admin/journal", params={"session": "s"}).json()
    submit_entry = entries["entries"][0]
    return float(submit_entry["started"]) * 1000


def test_a_submit_without_a_key_names_its_operation_by_the_bodys_digest(serve: Any) -> None:
    server = serve(skill(POLLED_3))
    submit(server.url), submit(server.url)
    first, second = (e["task"]["operation"] for e in journal(server))
    assert first == second
    assert first.startswith("body:hmac-sha256:")


def test_no_task_id_is_handed_out_twice_while_the_server_runs_resets_included(
    serve: Any,
) -> None:
    server = serve(skill(POLLED_3))
    before = submit(server.url).headers["Location"]
    assert requests.post(f"{server.url}/__admin/reset", params={"all": "true"}).ok
    gone = requests.get(before)
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "TASK_EXPIRED"  # handed out, forgotten
    after = submit(server.url).headers["Location"]
    assert after != before  # the same session, its first task since the reset
    assert requests.post(f"{server.url}/__admin/reset", params={"session": "s"}).ok
    assert submit(server.url).headers["Location"] not in (before, after)
    # The old URL still names the task mockskill forgot, never a new one.
    assert requests.get(before).json()["error"]["code"] == "TASK_EXPIRED"


def test_an_id_made_for_another_session_reads_that_session(serve: Any) -> None:
    """The id carries its session: a forged one for a session with no task is not found."""
    server = serve(skill(POLLED_3))
    submit(server.url)
    # (a well-formed id whose mac is not the server's: never handed out)
    forged = make("s", 0, _other_key(), "tasks/report")
    answer = requests.get(f"{server.url}/skills/report/tasks/{forged}")
    assert answer.json()["error"]["code"] == "TASK_NOT_FOUND"
    # Journalled in the session the id names: the consumer that built it is graded there.
    (entry,) = journal(server, "s")[1:]
    assert entry["task"]["known"] is False


@pytest.mark.parametrize(
    ("method", "built", "action"),
    [
        ("GET", "/tasks/{id}", "poll"),
        ("GET", "/skills/report/status/{id}", "poll"),
        ("DELETE", "/v1/tasks/{id}", "cancel"),
    ],
)
def test_a_task_url_the_consumer_built_is_journalled_as_one_never_handed_out(
    serve: Any, method: str, built: str, action: str
) -> None:
    server = serve(skill(POLLED_3))
    task_id = submit(server.url).json()["task"]["id"]
    answer = requests.request(method, server.url + built.format(id=task_id))  # no session
    assert answer.status_code == 404  # matched nothing
    (entry,) = journal(server)[1:]  # in the session the id names
    assert (entry["endpoint"], entry["task"]["action"]) == ("unmatched", action)
    assert (entry["task"]["known"], entry["task"]["served"]) == (False, False)


def test_an_unmatched_path_without_a_task_id_journals_no_task(serve: Any) -> None:
    server = serve(skill(POLLED_3))
    requests.get(f"{server.url}/tasks/a.b.c", headers={SESSION: "s"})
    entries = requests.get(f"{server.url}/__admin/journal", params={"session": "s"}).json()
    assert [e["task"] for e in entries["entries"]] == [None]


def test_a_real_id_at_another_task_skills_url_was_never_handed_out(serve: Any) -> None:
    server = serve(
        yaml_skill(
            """
            skills:
              - id: report
                task: {life: [{status: working, for: 30s}, {status: completed}]}
              - id: export
                task: {life: [{status: working, for: 30s}, {status: completed}]}
            """
        )
    )
    location = submit(server.url).headers["Location"]
    moved = location.replace("/skills/report/", "/skills/export/")
    answer = requests.get(moved)
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "TASK_NOT_FOUND")
    assert requests.get(location).json()["task"]["status"] == "working"  # still live
    polls = [e["task"] for e in journal(server) if e["task"]["action"] == "poll"]
    assert [(p["known"], p["served"]) for p in polls] == [(False, False), (True, True)]
    assert polls[1]["poll"] == 0  # the moved one counted no poll of the task


def _other_key() -> Any:
    from mockskill.engine.digests import KeyedDigest

    return KeyedDigest(b"not the server's key")


# -- other players and stores -----------------------------------------------------------


def test_the_wsgi_player_serves_tasks_the_same() -> None:
    engine = Engine(skill(POLLED_1), State())
    client = Client(create_app(engine))
    submitted = client.post("/skills/report/invoke", json={})
    assert submitted.status_code == 202
    location = submitted.headers["Location"]
    path = location[location.index("/skills/") :]
    assert client.get(path).json["task"]["status"] == "working"
    assert client.get(path).json["task"]["status"] == "completed"
    assert client.get(path.replace(".", "x")).json["error"]["code"] == "TASK_NOT_FOUND"
    actions = [e.task["action"] for e in engine.state.journal() if e.task is not None]
    assert actions == ["submit", "poll", "poll", "poll"]


def test_a_skill_honouring_idempotency_key_replays_the_same_task(serve: Any) -> None:
    server = serve(skill(POLLED_3, idempotency_key=True))
    first = submit(server.url, **{"Idempotency-Key": "k-1"})
    again = submit(server.url, **{"Idempotency-Key": "k-1"})
    other = submit(server.url, **{"Idempotency-Key": "k-2"})
    assert first.status_code == again.status_code == other.status_code == 202
    assert again.headers["Location"] == first.headers["Location"]
    assert other.headers["Location"] != first.headers["Location"]
    assert [e["task"]["action"] for e in journal(server)] == ["submit", "submit"]


def test_a_long_sessions_tasks_are_journalled_under_ids_that_tell_them_apart(serve: Any) -> None:
    server = serve(skill(POLLED_3))
    session = "s" * 200
    locations = [submit(server.url, session=session).headers["Location"] for _ in range(2)]
    for location in locations:
        requests.get(location)
    ids = [e["task"]["id"] for e in journal(server, session)]
    assert ids == [location.rsplit("/", 1)[1] for location in (*locations, *locations)]
    assert ids[0] != ids[1]


# -- the command line -------------------------------------------------------------------


def test_serve_hands_max_tasks_to_the_server_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given: list[int] = []

    class Stop(Exception):
        pass

    def server(*args: Any, **options: Any) -> None:
        given.append(options["max_tasks"])
        raise Stop

    monkeypatch.setattr(serve_command, "Server", server)
    runner = CliRunner()
    assert isinstance(runner.invoke(cli, ["serve", "--max-tasks", "7"]).exception, Stop)
    assert isinstance(
        runner.invoke(cli, ["serve"], env={"MOCKSKILL_MAX_TASKS": "9"}).exception, Stop
    )
    assert isinstance(runner.invoke(cli, ["serve"]).exception, Stop)
    assert given == [7, 9, 20_000]
    refused = runner.invoke(cli, ["serve", "--max-tasks", "0"])
    assert refused.exit_code == 2
    assert "--max-tasks" in refused.output


def test_the_journal_lists_a_tasks_requests_by_their_endpoint_kind(serve: Any) -> None:
    server = serve(skill(POLLED_3))
    location = submit(server.url).headers["Location"]
    requests.get(location), requests.delete(location)
    found = requests.get(f"{server.url}/__admin/journal", params={"endpoint": "task"}).json()
    assert [e["method"] for e in found["entries"]] == ["GET", "DELETE"]
    assert {e["task"]["action"] for e in found["entries"]} == {"poll", "cancel"}
