"""POST /__admin/verify and GET /__admin/requests over the wire, against a real server.

Verify answers 200 when the count held, 409 ``MOCKSKILL_VERIFICATION_FAILED``
with the near misses when it did not, and 422 with positioned problems for a
verification that cannot be read (as a bad ``when:`` is when scenarios are
loaded); ``/requests`` lists the journal's entries with its filters.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from mockskill import Server

Serve = Callable[..., Server]

SCENARIO = """
    name: shop
    skills:
      - id: echo
        invoke:
          steps:
            - json: {result: ok}
    routes:
      - path: /orders/<int:order>
        method: GET
        steps:
          - json: {order: found}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


def new_session() -> str:
    return f"verify-{uuid.uuid4().hex[:10]}"


def post_verify(server: Server, body: Any = None, **kwargs: Any) -> requests.Response:
    return requests.post(f"{server.url}/__admin/verify", json=body, timeout=10, **kwargs)


def send(server: Server, session: str) -> None:
    headers = {"Mockskill-Session": session}
    for text in ("hola", "hello"):
        answer = requests.post(
            server.invoke_url("echo"), json={"input": {"text": text}}, headers=headers, timeout=10
        )
        assert answer.status_code == 200
    assert requests.get(f"{server.url}/orders/7", headers=headers, timeout=10).status_code == 200


def test_verify_holds_with_the_matching_requests(server: Server) -> None:
    session = new_session()
    send(server, session)
    answer = post_verify(server, {"session": session, "skill": "echo", "count": {"equals": 2}})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert (got["held"], got["count"], got["expected"], got["read"]) == (True, 2, "exactly 2", 3)
    assert [e["path"] for e in got["entries"]] == ["/skills/echo/invoke"] * 2
    assert got["near_misses"] == []
    by_route = post_verify(server, {"session": session, "method": "get", "path": "/orders/7"})
    assert by_route.status_code == 200
    assert by_route.json()["count"] == 1


def test_verify_that_did_not_hold_is_a_409_with_the_near_misses(server: Server) -> None:
    session = new_session()
    send(server, session)
    answer = post_verify(
        server, {"session": session, "method": "POST", "path": "/orders/7", "count": 1}
    )
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "MOCKSKILL_VERIFICATION_FAILED"
    assert error["message"].startswith(
        f"verify did not hold: expected exactly 1 request POST /orders/7 of session {session!r};"
        " found 0"
    )
    details = error["details"]
    assert (details["held"], details["count"]) == (False, 0)
    closest = details["near_misses"]
    # GET /orders/7 fails one condition (its method); the invokes two, the newest first
    assert [m["entry"]["path"] for m in closest] == ["/orders/7", *["/skills/echo/invoke"] * 2]
    assert closest[0]["failed"] == ["method equals 'POST': found 'GET'"]
    assert closest[1]["failed"] == ["path equals '/orders/7': found '/skills/echo/invoke'"]
    assert closest[1]["entry"]["id"] > closest[2]["entry"]["id"]


def test_too_many_is_a_409_with_the_requests_that_matched(server: Server) -> None:
    session = new_session()
    send(server, session)
    answer = post_verify(server, {"session": session, "skill": "echo", "count": {"at_most": 1}})
    assert answer.status_code == 409
    details = answer.json()["error"]["details"]
    assert details["count"] == 2
    assert details["expected"] == "at most 1"
    assert len(details["entries"]) == 2
    assert details["near_misses"] == []


def test_a_verification_of_a_session_that_sent_nothing_says_so(server: Server) -> None:
    answer = post_verify(server, {"session": new_session()})
    assert answer.status_code == 409
    assert answer.json()["error"]["message"].endswith(
        "no other request to compare: 0 read in the journal"
    )


def test_bad_conditions_are_the_positioned_422_of_a_bad_when(server: Server) -> None:
    body = '{"session": "S",\n "when": {"body": {"/input/text": {"machtes": "^a"}}}}'
    answer = requests.post(
        f"{server.url}/__admin/verify",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "MOCKSKILL_INVALID_VERIFICATION"
    [problem] = error["details"]["problems"]
    assert {k: problem[k] for k in ("file", "line", "column", "path")} == {
        "file": "<verify request>",
        "line": 2,
        "column": 36,
        "path": "when.body./input/text.machtes",
    }
    assert (problem["expected"], problem["found"], problem["hint"]) == (
        "a known key",
        "unknown key 'machtes'",
        "did you mean 'matches'?",
    )
    # the same when: in a scenario loaded over HTTP: the same words, the same status
    scenario = (
        '{"name": "m", "skills": [{"id": "m", "invoke": {"cases": [\n'
        ' {"when": {"body": {"/input/text": {"machtes": "^a"}}}, "json": {}}]}}]}'
    )
    loaded = requests.post(
        f"{server.url}/__admin/scenarios",
        data=scenario,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert loaded.status_code == answer.status_code
    [same] = loaded.json()["error"]["details"]["problems"]
    assert (same["expected"], same["found"], same["hint"]) == (
        problem["expected"],
        problem["found"],
        problem["hint"],
    )


@pytest.mark.parametrize(
    ("data", "content_type", "status", "code"),
    [
        (b'{"session": NaN}', "application/json", 422, "MOCKSKILL_INVALID_VERIFICATION"),
        (b'{"session": "S",}', "application/json", 422, "MOCKSKILL_INVALID_VERIFICATION"),
        (b"\xff{}", "application/json", 422, "MOCKSKILL_INVALID_VERIFICATION"),
        (b"", "application/json", 422, "MOCKSKILL_INVALID_VERIFICATION"),
        (b"[]", None, 422, "MOCKSKILL_INVALID_VERIFICATION"),
        (b"session: S", "application/yaml", 415, "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE"),
        (b'{"session": "S"}', "text/plain", 415, "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE"),
        (b'{"a": ' * 5000 + b"1" + b"}" * 5000, "application/json", 422, None),
        (b'{"count": ' + b"9" * 5000 + b"}", "application/json", 422, None),
    ],
)
def test_a_body_it_cannot_use_is_a_4xx_never_a_500(
    server: Server, data: bytes, content_type: str | None, status: int, code: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    answer = requests.post(f"{server.url}/__admin/verify", data=data, headers=headers, timeout=10)
    assert answer.status_code == status, answer.text
    if code is not None:
        assert answer.json()["error"]["code"] == code


def test_a_query_parameter_is_refused(server: Server) -> None:
    answer = post_verify(server, {}, params={"session": "S"})
    assert answer.status_code == 400
    assert answer.json()["error"]["details"]["parameter"] == "session"


def test_requests_lists_the_journal_with_its_filters(server: Server) -> None:
    session = new_session()
    send(server, session)
    send(server, new_session())

    def listed(**query: str) -> list[dict[str, Any]]:
        answer = requests.get(f"{server.url}/__admin/requests", params=query, timeout=10)
        assert answer.status_code == 200, answer.text
        assert answer.json()["capacity"] >= answer.json()["size"] >= 6
        return list(answer.json()["requests"])

    mine = listed(session=session)
    assert [(e["method"], e["path"]) for e in mine] == [
        ("POST", "/skills/echo/invoke"),
        ("POST", "/skills/echo/invoke"),
        ("GET", "/orders/7"),
    ]
    assert {"target", "headers", "body", "body_encoding", "body_size"} <= set(mine[0])
    assert [e["id"] for e in listed(session=session, method="get")] == [mine[2]["id"]]
    assert [e["id"] for e in listed(session=session, path="/orders/7")] == [mine[2]["id"]]
    assert [e["id"] for e in listed(session=session, skill="echo", limit="1")] == [mine[1]["id"]]
    journal = requests.get(
        f"{server.url}/__admin/journal", params={"session": session, "method": "GET"}, timeout=10
    )
    assert [e["id"] for e in journal.json()["entries"]] == [mine[2]["id"]]


def test_requests_refuses_a_filter_it_does_not_take(server: Server) -> None:
    answer = requests.get(f"{server.url}/__admin/requests", params={"methd": "GET"}, timeout=10)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["details"]["parameter"] == "methd"
    assert "did you mean 'method'?" in error["message"]


def test_a_number_python_cannot_convert_is_a_problem_in_a_scenario_body_too(server: Server) -> None:
    answer = requests.post(
        f"{server.url}/__admin/scenarios",
        data=b'{"name": "n", "skills": [{"id": "n", "invoke": {"json": {"n": '
        + b"9" * 5000
        + b"}}}]}",
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 422
    [problem] = answer.json()["error"]["details"]["problems"]
    assert problem["expected"] == "JSON Python can read"
    assert "4300" in problem["found"]
