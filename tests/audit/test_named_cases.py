"""The named cases in the audit: case-unexercised and case-mishandled, fired and not.

A generated pack is served for real and asked by a real client, one session per test;
the report (``Server.report``, ``GET /__admin/report``) and the gates read it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from click.testing import CliRunner

from mockskill import Server, audit
from mockskill.cli import cli
from mockskill.recording.failure_packs import describe_cases, generate, invoke_cases

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "docs" / "examples"
TRANSLATE: dict[str, Any] = json.loads((EXAMPLES / "translate.descriptor.json").read_text())
DESCRIBED = [c.name for c in describe_cases(TRANSLATE)]
INVOKED = [c.name for c in invoke_cases(TRANSLATE)]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server(generate([TRANSLATE], "test") + "  - id: plain\n") as served:
        yield served


def _ask(server: Server, session: str, names: list[str], *, body: Any = None) -> None:
    """Each case of *names* once, by its header, each with a body of its own (so that
    no request is a retry of another's), as a careful consumer does: the descriptor
    fetched (and valid: the header names a case of the invoke's) before invoking."""
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for name in names:
            headers = {"Mockskill-Session": session, "Mockskill-Case": name}
            try:
                if name in DESCRIBED:
                    client.get("/skills/translate", headers=headers)
                else:
                    client.get("/skills/translate", headers=headers)
                    sent = {"input": {"case": name}} if body is None else body
                    client.post("/skills/translate/invoke", headers=headers, json=sent)
            except httpx.TransportError:
                pass  # a fault case: the journal has it


def _cases(server: Server, session: str) -> dict[str, Any]:
    (report,) = server.report(session)["sessions"]
    cases: dict[str, Any] = report["coverage"]["cases"]
    return cases


def test_every_case_served_and_handled_leaves_no_gap(server: Server) -> None:
    _ask(server, "all", DESCRIBED + INVOKED)
    cases = _cases(server, "all")
    assert cases["gaps"] == []
    assert cases["served"] == {"translate": dict.fromkeys(DESCRIBED + INVOKED, 1)}
    report = server.report("all")
    assert audit.coverage_gaps(report, ["CASES"]) == {}


def test_a_case_never_served_is_case_unexercised(server: Server) -> None:
    _ask(server, "some", ["ok", "AUTH_REQUIRED"])
    cases = _cases(server, "some")
    unexercised = [g["case"] for g in cases["gaps"] if g["rule"] == "case-unexercised"]
    assert unexercised == [n for n in DESCRIBED + INVOKED if n not in ("ok", "AUTH_REQUIRED")]
    gap = cases["gaps"][0]
    assert (
        gap["message"]
        == "case 'SKILL_NOT_FOUND' of skill 'translate': never served in this session"
    )
    assert "Mockskill-Case: SKILL_NOT_FOUND" in gap["fix"]
    gaps = audit.coverage_gaps(server.report("some"), ["case-unexercised"])
    assert "case-unexercised:translate/VERSION_INCOMPATIBLE" in gaps["some"]
    assert audit.coverage_gaps(server.report("some"), ["case-mishandled"]) == {}


def test_a_case_whose_answer_drew_a_finding_is_case_mishandled(server: Server) -> None:
    # A consumer that retries AUTH_REQUIRED without credentials: non-retryable-retried.
    _ask(server, "retrier", ["AUTH_REQUIRED", "AUTH_REQUIRED"], body={"same": True})
    (report,) = server.report("retrier")["sessions"]
    assert [f["rule"] for f in report["findings"]] == ["non-retryable-retried"]
    (mishandled,) = [
        g for g in report["coverage"]["cases"]["gaps"] if g["rule"] == "case-mishandled"
    ]
    assert mishandled["case"] == "AUTH_REQUIRED"
    assert mishandled["message"] == (
        "case 'AUTH_REQUIRED' of skill 'translate': its answer drew non-retryable-retried"
    )
    assert mishandled["attempts"] == report["findings"][0]["attempts"]
    assert report["findings"][0]["fix"] in mishandled["fix"]


def test_a_session_that_used_no_named_case_skill_has_no_case_gaps(server: Server) -> None:
    with httpx.Client(base_url=server.url) as client:
        client.post("/skills/plain/invoke", headers={"Mockskill-Session": "elsewhere"})
    assert _cases(server, "elsewhere") == {"served": {}, "gaps": []}


def test_the_report_command_gates_on_cases_and_prints_the_gaps(server: Server) -> None:
    _ask(server, "gated", ["ok"])
    failed = CliRunner().invoke(
        cli, ["report", server.url, "--session", "gated", "--require", "CASES"]
    )
    assert failed.exit_code == 1
    assert "case-unexercised: case 'AUTH_REQUIRED' of skill 'translate'" in failed.stdout
    assert "named cases of translate: 1 of 22 served" in failed.stdout
    assert "case-unexercised:translate/AUTH_REQUIRED" in failed.stderr
    _ask(server, "complete", DESCRIBED + INVOKED)
    passed = CliRunner().invoke(
        cli, ["report", server.url, "--session", "complete", "--require", "CASES"]
    )
    assert passed.exit_code == 0, passed.output
    mistyped = CliRunner().invoke(cli, ["report", server.url, "--require", "CASE"])
    assert mistyped.exit_code == 2
    assert "CASES" in mistyped.output


def test_the_gaps_are_as_the_admin_api_documents_them(server: Server) -> None:
    _ask(server, "documented", ["AUTH_REQUIRED", "AUTH_REQUIRED"], body={"same": True})
    (session,) = server.report("documented")["sessions"]
    document = json.loads(
        resources.files("mockskill.admin").joinpath("openapi.json").read_text(encoding="utf-8")
    )
    coverage = _coverage_schema(document)
    assert {g["rule"] for g in session["coverage"]["cases"]["gaps"]} == {
        "case-unexercised",
        "case-mishandled",
    }
    jsonschema.validate(session["coverage"], coverage)


def _coverage_schema(node: Any) -> dict[str, Any]:
    """The schema of a session's coverage in the admin API's document."""
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict) and "cases" in properties and "tls_faults" in properties:
            return node
        children: list[Any] = list(node.values())
    else:
        children = list(node) if isinstance(node, list) else []
    for child in children:
        found = _coverage_schema(child)
        if found:
            return found
    return {}


# -- a task skill's cases: each its own life, graded by the task rules -------------------

REPORT: dict[str, Any] = json.loads((EXAMPLES / "report.descriptor.json").read_text())
TASK_CASES = ["ok", "task-failed", "task-cancelled", "task-input-required", "task-gone"]


@pytest.fixture(scope="module")
def tasks_server() -> Iterator[Server]:
    with Server(generate([REPORT], "test")) as served:
        yield served


def _follow(server: Server, session: str, case: str, *, wait: bool = True) -> None:
    """Case *case* submitted, then its task polled until it ends or is gone, waiting each
    answer's ``Retry-After`` (``task.poll_after_ms``) when *wait*, posting an input when
    it asks for one."""
    headers = {"Mockskill-Session": session, "Mockskill-Case": case}
    with httpx.Client(base_url=server.url, timeout=5) as client:
        answer = client.post("/skills/report/invoke", headers=headers, json={"case": case})
        url = answer.headers["Location"]
        for _ in range(10):
            task = answer.json().get("task")
            if task is None or task["status"] in ("completed", "failed", "cancelled"):
                return
            if wait:
                time.sleep(task["poll_after_ms"] / 1000)
            if task["status"] == "input_required":
                answer = client.post(url, json={"answer": 42})
            else:
                answer = client.get(url)


def test_a_consumer_that_follows_each_task_life_leaves_no_finding(tasks_server: Server) -> None:
    for case in TASK_CASES:
        _follow(tasks_server, "followed", case)
    (report,) = tasks_server.report("followed")["sessions"]
    assert report["findings"] == []
    served = report["coverage"]["cases"]["served"]["report"]
    assert {case: served[case] for case in TASK_CASES} == dict.fromkeys(TASK_CASES, 1)


def test_a_task_case_polled_too_soon_is_poll_too_soon_and_that_case_mishandled(
    tasks_server: Server,
) -> None:
    _follow(tasks_server, "hasty", "task-failed", wait=False)
    (report,) = tasks_server.report("hasty")["sessions"]
    assert [f["rule"] for f in report["findings"]] == ["poll-too-soon"]
    (mishandled,) = [
        g for g in report["coverage"]["cases"]["gaps"] if g["rule"] == "case-mishandled"
    ]
    assert mishandled["case"] == "task-failed"
    assert mishandled["message"].endswith("its answer drew poll-too-soon")
