"""A generated failure pack served for real: each case by its header, and the pack in order.

The pack is what ``mockskill generate`` writes for docs/examples/translate.descriptor.json
(auth declared) and for a descriptor that declares a stream, a rate limit or a task too;
a real server serves it on an ephemeral port and httpx asks each case by name.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockskill import Server
from mockskill.protocol import corpus
from mockskill.protocol.validator import validate, validation_error
from mockskill.recording.failure_packs import describe_cases, generate, invoke_cases

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples"
TRANSLATE: dict[str, Any] = json.loads((EXAMPLE / "translate.descriptor.json").read_text())
CASE = "Mockskill-Case"


def _with(**fields: Any) -> dict[str, Any]:
    descriptor = json.loads(json.dumps(TRANSLATE))
    for key, value in fields.items():
        descriptor[key] = value
    return descriptor


STREAMED = _with(id="tokens", rate_limit={"per_minute": 60})
STREAMED["endpoint"]["streaming"] = ["sse", "ndjson"]
TASKED = _with(id="report", capability_type="task")
del TASKED["auth"]


@pytest.fixture(scope="module")
def server() -> Any:
    with Server(generate([TRANSLATE, STREAMED, TASKED], "test")) as served:
        yield served


@pytest.fixture
def client(server: Server) -> Any:
    with httpx.Client(base_url=server.url, timeout=5) as c:
        yield c


def _error(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]
    return body


ERRORS = {
    "AUTH_REQUIRED": 401,
    "PERMISSION_DENIED": 403,
    "EXECUTION_TIMEOUT-408": 408,
    "EXECUTION_TIMEOUT-504": 504,
    "ENDPOINT_UNREACHABLE-502": 502,
    "ENDPOINT_UNREACHABLE-503": 503,
    "VERSION_INCOMPATIBLE": 422,
}


@pytest.mark.parametrize(("name", "status"), ERRORS.items(), ids=list(ERRORS))
def test_each_error_case_answers_its_category_at_its_status(
    client: httpx.Client, name: str, status: int
) -> None:
    response = client.post(
        "/skills/translate/invoke", headers={CASE: name}, json={"input": {"text": "hi"}}
    )
    assert response.status_code == status
    assert _error(response)["code"] == name.split("-")[0]


def test_the_auth_cases_carry_what_the_descriptor_declares(client: httpx.Client) -> None:
    required = client.post("/skills/translate/invoke", headers={CASE: "AUTH_REQUIRED"}, json={})
    assert _error(required)["details"] == {
        "required_auth_type": "oauth2",
        "authorization_url": "https://example.com/oauth/authorize",
        "scopes": ["skill:invoke"],
    }
    assert "WWW-Authenticate" in required.headers
    denied = client.post("/skills/translate/invoke", headers={CASE: "PERMISSION_DENIED"}, json={})
    assert _error(denied)["details"]["missing_scopes"] == ["skill:invoke"]


def test_the_unreachable_cases_advise_a_retry(client: httpx.Client) -> None:
    for name in ("ENDPOINT_UNREACHABLE-502", "ENDPOINT_UNREACHABLE-503"):
        response = client.post("/skills/translate/invoke", headers={CASE: name}, json={})
        assert _error(response)["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
        assert response.headers["Retry-After"] == "2"


def test_the_version_case_names_the_descriptors_protocol_version(client: httpx.Client) -> None:
    response = client.post(
        "/skills/translate/invoke", headers={CASE: "VERSION_INCOMPATIBLE"}, json={}
    )
    details = _error(response)["details"]
    assert details["descriptor_version"] == "1.2.0"
    assert details["consumer_supported_range"] == "0.x.x"


def test_ok_answers_and_the_descriptor_points_at_the_mock(client: httpx.Client) -> None:
    assert client.post("/skills/translate/invoke", headers={CASE: "ok"}, json={}).json() == {
        "skill": "translate",
        "result": "ok",
    }
    # A name of the invoke's: the descriptor URL answers as usual (a client sending the
    # header on every request fetches the descriptor first).
    descriptor = client.get("/skills/translate", headers={CASE: "AUTH_REQUIRED"}).json()
    assert not validate(descriptor)
    assert descriptor["endpoint"]["url"] == f"{client.base_url}/skills/translate/invoke"
    assert {k: v for k, v in descriptor.items() if k != "endpoint"} == {
        k: v for k, v in TRANSLATE.items() if k != "endpoint"
    }


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_consumer_following_a_descriptor_of_another_method_reaches_the_cases(
    method: str,
) -> None:
    # (the mock invokes with POST only: the served descriptor says so, else it misses)
    declared = _with(id="lookup")
    declared["endpoint"]["method"] = method
    with Server(generate([declared], "test")) as server, httpx.Client(timeout=5) as client:
        # played in order: the descriptor's named cases first, then the descriptor
        for _ in describe_cases(declared):
            client.get(f"{server.url}/skills/lookup")
        served = client.get(f"{server.url}/skills/lookup").json()
        assert served["endpoint"]["method"] == "POST"
        assert not validate(served)
        answer = client.request(
            served["endpoint"]["method"],
            served["endpoint"]["url"],
            headers={CASE: "ENDPOINT_UNREACHABLE-503"},
            json={},
        )
        assert _error(answer)["code"] == "ENDPOINT_UNREACHABLE"


def test_the_descriptor_cases_serve_not_found_and_each_invalid_descriptor(
    client: httpx.Client,
) -> None:
    assert client.get("/skills/translate", headers={CASE: "SKILL_NOT_FOUND"}).status_code == 404
    invalid = [c for c in describe_cases(TRANSLATE) if c.name.startswith("invalid-")]
    assert len(invalid) == 8  # one of each corpus family
    for case in invalid:
        response = client.get("/skills/translate", headers={CASE: case.name})
        assert response.status_code == 200
        expected = corpus.get(case.name.removeprefix("invalid-descriptor-"))
        assert expected is not None
        shown = validation_error(validate(response.json()))["error"]["details"]["violations"]
        assert shown == list(expected.violations)


@pytest.mark.parametrize("fault", [c.name for c in invoke_cases(TRANSLATE) if "fault" in c.step])
def test_each_fault_case_breaks_the_connection(client: httpx.Client, fault: str) -> None:
    with pytest.raises(httpx.TransportError):
        client.post("/skills/translate/invoke", headers={CASE: fault}, json={})


def test_a_case_asked_again_answers_again(client: httpx.Client) -> None:
    # (each case ends with next for the sequence; the header keeps it on its step)
    for _ in range(3):
        response = client.post(
            "/skills/translate/invoke", headers={CASE: "EXECUTION_TIMEOUT-408"}, json={}
        )
        assert response.status_code == 408


def test_the_declared_rate_limit_and_stream_have_their_cases(client: httpx.Client) -> None:
    limited = client.post("/skills/tokens/invoke", headers={CASE: "RATE_LIMITED-429"}, json={})
    assert (limited.status_code, _error(limited)["code"]) == (429, "RATE_LIMITED")
    assert limited.headers["Retry-After"] == "1"
    in_protocol = client.post("/skills/tokens/invoke", headers={CASE: "RATE_LIMITED-503"})
    assert _error(in_protocol)["code"] == "ENDPOINT_UNREACHABLE"
    whole = client.post("/skills/tokens/invoke", headers={CASE: "ok"}, json={})
    assert whole.headers["Content-Type"].startswith("text/event-stream")
    assert whole.text.count("event: token") == 5
    assert "event: result" in whole.text
    failed = client.post("/skills/tokens/invoke", headers={CASE: "stream-error-event"})
    assert "event: error" in failed.text
    assert "ENDPOINT_UNREACHABLE" in failed.text
    with pytest.raises(httpx.TransportError):
        client.post("/skills/tokens/invoke", headers={CASE: "stream-reset"})
    closed = client.post("/skills/tokens/invoke", headers={CASE: "stream-close"})
    assert closed.text.count("event: token") == 3
    assert "event: result" not in closed.text


def test_a_task_skill_submits_and_its_lost_202_is_a_case(client: httpx.Client) -> None:
    accepted = client.post("/skills/report/invoke", headers={CASE: "ok"}, json={})
    assert accepted.status_code == 202
    assert accepted.json()["task"]["status"] == "submitted"
    with pytest.raises(httpx.TransportError):
        client.post("/skills/report/invoke", headers={CASE: "task-submit-lost"}, json={})


def _walk(
    client: httpx.Client, case: str, session: str, *, answer: bool = True
) -> tuple[list[str], httpx.Response]:
    """Case *case* of the task skill submitted, then its status URL polled as advised
    (``Retry-After``'s wait: ``task.poll_after_ms``) until the task ends or its URL
    answers an error, an input posted when it asks (*answer*): each status seen, and the
    last answer."""
    headers = {CASE: case, "Mockskill-Session": session}
    answer_ = client.post("/skills/report/invoke", headers=headers, json={"input": {}})
    assert answer_.status_code == 202
    url, seen = answer_.headers["Location"], [answer_.json()["task"]["status"]]
    while seen[-1] not in ("completed", "failed", "cancelled") and len(seen) < 10:
        time.sleep(answer_.json()["task"]["poll_after_ms"] / 1000)
        answer_ = client.get(url)
        if answer_.status_code != 200:
            seen.append(str(answer_.status_code))
            break
        seen.append(answer_.json()["task"]["status"])
        if seen[-1] == "input_required" and answer:
            answer_ = client.post(url, json={"answer": 42})
            assert answer_.status_code == 202
            seen.append(f"input:{answer_.json()['task']['status']}")
    return seen, answer_


def test_each_task_case_lives_its_own_life_to_its_end(client: httpx.Client) -> None:
    failed, last = _walk(client, "task-failed", "lives")
    assert failed == ["submitted", "submitted", "working", "failed"]
    error = last.json()["task"]["error"]
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["retry"]["max_attempts"] >= 1
    cancelled, last = _walk(client, "task-cancelled", "lives")
    assert cancelled == ["submitted", "submitted", "working", "cancelled"]
    assert "result" not in last.json()["task"]
    waited, last = _walk(client, "task-input-required", "lives")
    assert waited == [
        "submitted",
        "submitted",
        "input_required",
        "input:working",
        "working",
        "completed",
    ]
    assert last.json()["task"]["result"] == {"skill": "report", "result": "ok"}
    gone, last = _walk(client, "task-gone", "lives")
    assert gone == ["submitted", "submitted", "404"]
    assert _error(last)["code"] == "TASK_EXPIRED"


def test_the_skills_own_life_is_untouched_by_its_cases_lives(client: httpx.Client) -> None:
    client.post("/skills/report/invoke", headers={CASE: "task-failed"}, json={})
    ok, last = _walk(client, "ok", "own")
    assert ok == ["submitted", "submitted", "working", "working", "completed"]
    assert last.json()["task"]["result"] == {"skill": "report", "result": "ok"}


def test_a_task_a_case_submitted_is_no_task_of_another_skill(client: httpx.Client) -> None:
    submitted = client.post("/skills/report/invoke", headers={CASE: "task-failed"}, json={})
    task_id = submitted.json()["task"]["id"]
    elsewhere = client.get(f"/skills/tokens/tasks/{task_id}")
    assert elsewhere.status_code == 404
    assert _error(elsewhere)["code"] == "TASK_NOT_FOUND"


def test_an_unknown_case_is_a_400_naming_the_valid_ones(client: httpx.Client) -> None:
    response = client.post(
        "/skills/translate/invoke", headers={CASE: "AUTH_REQUIRD"}, json={"input": {}}
    )
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "MOCKSKILL_BAD_REQUEST"
    assert "did you mean 'AUTH_REQUIRED'?" in error["message"]
    valid = [c.name for c in describe_cases(TRANSLATE) + invoke_cases(TRANSLATE)]
    assert error["details"] == {"header": CASE, "case": "AUTH_REQUIRD", "valid_cases": valid}


def test_a_skill_without_named_cases_refuses_the_header() -> None:
    with (
        Server("name: plain\nskills:\n  - id: echo\n") as server,
        httpx.Client(base_url=server.url) as client,
    ):
        response = client.post("/skills/echo/invoke", headers={CASE: "ok"})
        assert response.status_code == 400
        assert "skill 'echo' has no named cases" in _error(response)["message"]
        assert _error(response)["details"]["valid_cases"] == []
        assert client.post("/skills/echo/invoke").status_code == 200  # without it: as ever


def test_without_the_header_each_endpoint_plays_its_cases_in_order() -> None:
    with (
        Server(generate([TRANSLATE], "test")) as server,
        httpx.Client(base_url=server.url, timeout=5) as client,
    ):
        session = {"Mockskill-Session": "in-order"}
        described = [client.get("/skills/translate", headers=session) for _ in range(10)]
        assert [r.status_code for r in described] == [404] + [200] * 9
        assert [not validate(r.json()) for r in described[1:]] == [False] * 8 + [True]
        statuses: list[int | str] = []
        for i in range(len(invoke_cases(TRANSLATE)) + 1):
            try:
                response = client.post("/skills/translate/invoke", headers=session, json={"n": i})
                statuses.append(response.status_code)
            except httpx.TransportError:
                statuses.append("fault")
        assert statuses == [200, 401, 403, 408, 504, 502, 503, 422, *["fault"] * 5, 200]


def test_a_name_of_the_other_endpoint_leaves_this_ones_conditions_at_work() -> None:
    scenario = """
name: mixed
skills:
  - id: pay
    describe:
      cases:
        - {name: gone, when: {}, error: SKILL_NOT_FOUND}
    invoke:
      cases:
        - when: {body: {/card: "4242"}}
          error: PERMISSION_DENIED
      steps:
        - json: {paid: true}
"""
    with (
        Server(scenario) as server,
        httpx.Client(base_url=server.url, headers={CASE: "gone"}) as client,
    ):
        assert client.get("/skills/pay").status_code == 404
        assert client.post("/skills/pay/invoke", json={"card": "4242"}).status_code == 403
        assert client.post("/skills/pay/invoke", json={"card": "1111"}).json() == {"paid": True}
