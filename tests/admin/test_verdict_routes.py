"""GET /__admin/verdict over the wire, against a real server.

One session's pass or fail as a status: 200 JSON when it is clean and
covered as ``require=`` asks, 409 ``application/problem+json`` (RFC 9457)
listing the findings and the names not covered when not, 404 problem with a
did-you-mean for a session the journal has no request of, 400 problem naming
the valid choices for a query it cannot use.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from mockskill import Server
from mockskill.audit import GATE_NAMES

Serve = Callable[..., Server]

SCENARIO = """
    name: verdicts
    skills:
      - id: flaky
        invoke:
          - error: ENDPOINT_UNREACHABLE
            retry: {suggested_delay_ms: 20, max_attempts: 4}
          - json: {ok: true}
      - id: unadvised
        invoke:
          - error: ENDPOINT_UNREACHABLE
            retry: null
          - json: {ok: true}
      - id: plain
        invoke:
          - json: {ok: true}
"""

PROBLEM = "application/problem+json"


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


def new_session() -> str:
    return f"verdict-{uuid.uuid4().hex[:10]}"


def invoke(server: Server, session: str, skill: str, *, waits_ms: tuple[float, ...] = ()) -> None:
    """Invoke *skill*, retrying after each of *waits_ms* while it fails."""
    headers = {"Mockskill-Session": session, "Skill-Protocol-Version": "1.0.0"}
    for wait in (*waits_ms, None):
        answer = requests.post(server.invoke_url(skill), json={}, headers=headers, timeout=10)
        if answer.ok or wait is None:
            return
        time.sleep(wait / 1000)


def verdict(server: Server, query: Any) -> requests.Response:
    return requests.get(f"{server.url}/__admin/verdict", params=query, timeout=10)


def test_a_clean_session_is_200_json_with_what_it_covered(server: Server) -> None:
    session = new_session()
    invoke(server, session, "flaky", waits_ms=(60,))  # waited past the 20 ms advised
    answer = verdict(server, {"session": session})
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {
        "session": session,
        "clean": True,
        "requests": 2,
        "required": [],
        "covered": ["ENDPOINT_UNREACHABLE"],
        "uncovered": [],
        "findings": [],
        "detail": f"session {session!r} is clean: 2 requests, no finding",
    }


def test_a_session_with_findings_is_a_409_problem_listing_them(server: Server) -> None:
    session = new_session()
    invoke(server, session, "flaky", waits_ms=(0,))  # retried at once: 20 ms were advised
    answer = verdict(server, {"session": session})
    assert answer.status_code == 409
    assert answer.headers["Content-Type"] == PROBLEM
    body = answer.json()
    assert {k: body[k] for k in ("type", "title", "status", "instance")} == {
        "type": "https://mockskill.dev/problems/not-clean",
        "title": "The session is not clean",
        "status": 409,
        "instance": f"/__admin/verdict?session={session}",
    }
    assert body["detail"] == f"session {session!r} is not clean: 1 finding (retry-too-soon)"
    assert (body["session"], body["clean"], body["requests"]) == (session, False, 2)
    (finding,) = body["findings"]
    first, retry = (e.id for e in server.journal(session))
    assert finding["rule"] == "retry-too-soon"
    assert finding["attempts"] == [first, retry]
    assert "20 ms" in finding["expected"]
    assert finding["fix"]
    assert finding["message"]
    assert body["uncovered"] == []


def test_require_takes_the_gates_names_repeated_or_comma_separated(server: Server) -> None:
    session = new_session()
    invoke(server, session, "flaky", waits_ms=(60,))
    met = verdict(server, {"session": session, "require": "ENDPOINT_UNREACHABLE"})
    assert met.status_code == 200
    assert met.json()["required"] == ["ENDPOINT_UNREACHABLE"]
    for query in (
        [("session", session), ("require", "ENDPOINT_UNREACHABLE,AUTH_REQUIRED,EMPTY_RESPONSE")],
        [
            ("session", session),
            ("require", "ENDPOINT_UNREACHABLE"),
            ("require", "AUTH_REQUIRED, EMPTY_RESPONSE"),
        ],
    ):
        answer = verdict(server, query)
        assert answer.status_code == 409
        assert answer.headers["Content-Type"] == PROBLEM
        body = answer.json()
        assert body["required"] == ["ENDPOINT_UNREACHABLE", "AUTH_REQUIRED", "EMPTY_RESPONSE"]
        assert body["uncovered"] == ["AUTH_REQUIRED", "EMPTY_RESPONSE"]
        assert body["findings"] == []
        assert body["detail"].endswith("not covered: AUTH_REQUIRED, EMPTY_RESPONSE")


def test_the_reports_policy_parameters_judge_the_verdict_too(server: Server) -> None:
    session = new_session()
    # No advice: the audit owes the chapter's initial delay (1000 ms); 60 ms is too soon,
    # unless the query says the initial delay is 50 ms.
    invoke(server, session, "unadvised", waits_ms=(60,))
    assert verdict(server, {"session": session}).status_code == 409
    tolerant = verdict(server, {"session": session, "initial_delay_ms": "50"})
    assert tolerant.status_code == 200, tolerant.text


def test_a_session_the_journal_never_saw_is_404_with_a_did_you_mean(server: Server) -> None:
    session = new_session()
    invoke(server, session, "plain")
    answer = verdict(server, {"session": session + "x"})
    assert answer.status_code == 404
    assert answer.headers["Content-Type"] == PROBLEM
    body = answer.json()
    assert body["type"] == "https://mockskill.dev/problems/unknown-session"
    assert body["did_you_mean"] == [session]
    assert f"did you mean {session!r}?" in body["detail"]
    # Reset, the session is forgotten: never a 200 for what the journal no longer holds.
    server.reset(session)
    assert verdict(server, {"session": session}).status_code == 404


@pytest.mark.parametrize(
    ("query", "parameter", "said"),
    [
        pytest.param([], "session", "give one session=NAME (found none)", id="no-session"),
        pytest.param([("session", "")], "session", "found ''", id="empty-session"),
        pytest.param(
            [("session", "a"), ("session", "b")], "session", "found several", id="two-sessions"
        ),
        pytest.param(
            [("session", "a"), ("require", "AUTH_REQIRED")],
            "require",
            "AUTH_REQIRED (did you mean 'AUTH_REQUIRED'?)",
            id="mistyped-require",
        ),
        pytest.param(
            [("session", "a"), ("sesion", "a")],
            "sesion",
            "it takes session, require, initial_delay_ms",
            id="unknown-parameter",
        ),
        pytest.param(
            [("session", "a"), ("tolerance_ratio", "2")],
            "tolerance_ratio",
            "tolerance_ratio='2' is not a number",
            id="bad-policy-value",
        ),
    ],
)
def test_a_query_it_cannot_use_is_a_400_problem_naming_the_choices(
    server: Server, query: list[tuple[str, str]], parameter: str, said: str
) -> None:
    answer = verdict(server, query)
    assert answer.status_code == 400
    assert answer.headers["Content-Type"] == PROBLEM
    body = answer.json()
    assert body["type"] == "https://mockskill.dev/problems/bad-query"
    assert (body["status"], body["parameter"]) == (400, parameter)
    assert said in body["detail"]


def test_an_unknown_require_name_lists_every_name_the_gates_take(server: Server) -> None:
    body = verdict(server, {"session": "a", "require": "NOPE"}).json()
    assert body["expected"] == list(GATE_NAMES)
    assert "expected some of VALIDATION_ERROR, AUTH_REQUIRED" in body["detail"]


def test_it_asks_for_the_admin_token_as_every_admin_route(serve: Serve) -> None:
    server = serve(SCENARIO, admin_token="s3cret")
    session = new_session()
    invoke(server, session, "plain")
    assert verdict(server, {"session": session}).status_code == 401
    answer = requests.get(
        f"{server.url}/__admin/verdict",
        params={"session": session},
        headers={"Authorization": "Bearer s3cret"},
        timeout=10,
    )
    assert answer.status_code == 200
