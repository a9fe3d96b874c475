"""Request matching, on a real server with real clients: the case a request meets plays.

The issue's example end to end (``input.text == "boom"`` -> EXECUTION_TIMEOUT,
``input.lang`` absent -> a 400 result, anything else -> the translation),
each case's own positions per session, a route whose cases are all it has
(a request none takes is unmatched, and its near misses say which condition
failed), and the same through httpx and curl.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable

import httpx
import pytest
import requests

from mockskill import Server

TRANSLATE = """
name: matching
skills:
  - id: translate
    invoke:
      cases:
        - when:
            body: {/input/text: boom}
          error: EXECUTION_TIMEOUT
        - when:
            body: {/input/lang: {absent: true}}
          status: 400
          json: {error: input.lang is required}
        - when:
            headers: {X-Tenant: {matches: "^flaky-"}}
          steps:
            - error: ENDPOINT_UNREACHABLE
              times: 2
            - json: {translation: hola, tenant: flaky}
          end: cycle
      steps:
        - json: {translation: hola}
routes:
  - path: /orders
    method: POST
    cases:
      - when: {body: {/id: 1}, query: {expand: {exists: true}}}
        json: {order: 1, expanded: true}
      - when: {body: {/id: 1}}
        json: {order: 1}
"""


def invoke(server: Server, payload: object, **headers: str) -> requests.Response:
    return requests.post(server.invoke_url("translate"), json=payload, headers=headers, timeout=10)


def test_the_issues_example(serve: Callable[..., Server]) -> None:
    server = serve(TRANSLATE)
    boom = invoke(server, {"input": {"text": "boom", "lang": "es"}})
    assert boom.status_code == 504
    assert boom.json()["error"]["code"] == "EXECUTION_TIMEOUT"
    no_lang = invoke(server, {"input": {"text": "hello"}})
    assert (no_lang.status_code, no_lang.json()) == (400, {"error": "input.lang is required"})
    fine = invoke(server, {"input": {"text": "hello", "lang": "es"}})
    assert (fine.status_code, fine.json()) == (200, {"translation": "hola"})


def test_each_case_keeps_its_own_positions_per_session(
    serve: Callable[..., Server], session: dict[str, str]
) -> None:
    server = serve(TRANSLATE)
    body = {"input": {"text": "hello", "lang": "es"}}
    flaky = {"X-Tenant": "flaky-1", **session}
    statuses = []
    for n in range(6):  # the flaky case's cycle, with the default answering in between
        statuses.append(invoke(server, body, **flaky).status_code)
        assert invoke(server, body, **session).status_code == 200, n
    assert statuses == [503, 503, 200, 503, 503, 200]
    other = invoke(server, body, **{"X-Tenant": "flaky-2", "Mockskill-Session": "another"})
    assert other.status_code == 503  # another session: its own position in that case


def test_the_journal_names_the_case_each_request_played(serve: Callable[..., Server]) -> None:
    server = serve(TRANSLATE)
    invoke(server, {"input": {"text": "boom", "lang": "es"}})
    invoke(server, {"input": {"text": "hello"}})
    invoke(server, {"input": {"text": "hello", "lang": "es"}})
    invoke(server, {"input": {"text": "hello", "lang": "es"}}, **{"X-Tenant": "flaky-9"})
    boom, no_lang, default, flaky = server.journal()
    assert (boom.case, boom.status, boom.error_code, boom.step) == (0, 504, "EXECUTION_TIMEOUT", 0)
    assert (no_lang.case, no_lang.status) == (1, 400)
    assert (default.case, default.status, default.step) == (None, 200, 0)
    assert (flaky.case, flaky.status, flaky.position) == (2, 503, 0)
    shown = requests.get(f"{server.url}/__admin/journal", timeout=10).json()
    assert [e["case"] for e in shown.get("entries", shown.get("requests", []))] == [0, 1, None, 2]


def test_a_route_with_only_cases_leaves_other_requests_unmatched_saying_why(
    serve: Callable[..., Server],
) -> None:
    server = serve(TRANSLATE)
    expanded = requests.post(f"{server.url}/orders?expand=1", json={"id": 1}, timeout=10)
    assert expanded.json() == {"order": 1, "expanded": True}
    assert requests.post(f"{server.url}/orders", json={"id": 1}, timeout=10).json() == {"order": 1}
    missed = requests.post(f"{server.url}/orders", json={"id": 2}, timeout=10)
    assert missed.status_code == 404
    error = missed.json()["error"]
    assert error["code"] == "SKILL_NOT_FOUND"
    assert error["message"] == "No case of POST /orders matches the request"
    assert error["details"]["near_misses"][0]["route"] == "POST /orders, case 1"
    unmatched = requests.get(f"{server.url}/__admin/unmatched", timeout=10).json()
    [entry] = unmatched["requests"] if "requests" in unmatched else unmatched["entries"]
    assert entry["near_misses"] == [
        {
            "route": "POST /orders, case 1",
            "reasons": [
                "body /id equals 1: found 2",
                "query parameter expand exists: it is absent",
            ],
        },
        {"route": "POST /orders, case 2", "reasons": ["body /id equals 1: found 2"]},
    ]


def test_a_restart_restarts_every_cases_sequence(
    serve: Callable[..., Server], session: dict[str, str]
) -> None:
    server = serve(TRANSLATE)
    body, flaky = {"input": {"text": "hi", "lang": "es"}}, {"X-Tenant": "flaky-1", **session}
    assert [invoke(server, body, **flaky).status_code for _ in range(3)] == [503, 503, 200]
    server.reset()
    assert invoke(server, body, **flaky).status_code == 503


def test_httpx_and_curl_meet_the_same_cases(serve: Callable[..., Server]) -> None:
    server = serve(TRANSLATE)
    with httpx.Client(timeout=10) as client:
        answer = client.post(server.invoke_url("translate"), json={"input": {"text": "boom"}})
    assert answer.status_code == 504
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        [
            "curl", "-s", "-X", "POST", "-H", "content-type: application/json",
            "-d", json.dumps({"input": {"text": "x"}}), server.invoke_url("translate"),
        ],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == {"error": "input.lang is required"}


def test_a_skill_endpoint_with_only_cases_is_unmatched_when_none_holds(
    serve: Callable[..., Server],
) -> None:
    server = serve("""
    skills:
      - id: strict
        invoke:
          cases:
            - when: {headers: {X-Key: k1}}
              json: {ok: true}
    """)
    assert requests.post(server.invoke_url("strict"), headers={"X-Key": "k1"}, timeout=10).ok
    missed = requests.post(server.invoke_url("strict"), timeout=10)
    assert missed.status_code == 404
    error = missed.json()["error"]
    assert error["message"] == "No case of POST /skills/strict/invoke matches the request"
    assert error["details"]["near_misses"] == [
        {
            "route": "POST /skills/strict/invoke, case 1",
            "reasons": ["header x-key equals 'k1': it is absent"],
        }
    ]
    [entry] = server.journal()[1:]
    assert entry.endpoint == "unmatched"


def test_no_header_can_stall_the_server_through_a_regular_expression(
    serve: Callable[..., Server],
) -> None:
    """The issue's expression and header: a backtracking engine takes seconds (2**27 ways to
    split the a's) and every client waits; RE2 searches in time linear in the header."""
    server = serve("""
    skills:
      - id: tenants
        invoke:
          cases:
            - when: {headers: {X-Tenant: {matches: '^([a-z0-9]+-?)+$'}}}
              json: {tenant: named}
          steps:
            - json: {tenant: other}
    """)
    hostile = requests.post(
        server.invoke_url("tenants"), headers={"X-Tenant": "a" * 27 + "!"}, timeout=2
    )
    assert hostile.json() == {"tenant": "other"}
    named = requests.post(server.invoke_url("tenants"), headers={"X-Tenant": "acme-1"}, timeout=2)
    assert named.json() == {"tenant": "named"}
