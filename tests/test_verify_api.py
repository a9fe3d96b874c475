"""Verifying what a consumer sent, end to end: Server.verify/requests and RemoteServer's.

Real clients (httpx, requests, curl) send bodies, headers and query strings to
a real server; ``verify`` finds them by conditions in the language of
``when:`` and, when it does not hold, raises AssertionError naming the closest
requests and every condition each failed; ``requests`` lists them with what
was sent.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable

import httpx
import pytest
import requests

from mockskill import Server
from mockskill.scenario.verification import BadVerification
from mockskill.server.remote import RemoteServer

Serve = Callable[..., Server]

SCENARIO = """
    name: shop
    skills:
      - id: echo
        invoke:
          steps:
            - json: {result: ok}
    routes:
      - path: /orders
        method: POST
        steps:
          - json: {order: made}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


def new_session() -> str:
    return f"verify-{uuid.uuid4().hex[:10]}"


def test_verify_finds_what_httpx_sent(server: Server) -> None:
    session = new_session()
    with httpx.Client(headers={"Mockskill-Session": session}) as client:
        client.post(
            server.invoke_url("echo"),
            params={"lang": "en"},
            json={"input": {"text": "hello"}},
            headers={"Idempotency-Key": "k-1"},
        )
        client.post(server.invoke_url("echo"), json={"input": {"text": "hola"}})
    matched = server.verify(
        {
            "body": {"/input/text": "hello"},
            "headers": {"idempotency-key": "k-1"},
            "query": {"lang": "en"},
        },
        session=session,
        skill="echo",
        count=1,
    )
    assert [e.target for e in matched] == ["/skills/echo/invoke?lang=en"]
    assert matched[0].body == '{"input":{"text":"hello"}}'
    assert server.verify(session=session, method="post", path="/skills/echo/invoke", count=2)


def test_a_verification_that_does_not_hold_fails_with_the_near_misses(server: Server) -> None:
    session = new_session()
    requests.post(
        server.invoke_url("echo"),
        json={"input": {"text": "hola"}},
        headers={"Mockskill-Session": session},
        timeout=10,
    )
    with pytest.raises(AssertionError) as raised:
        server.verify({"body": {"/input/text": "hello"}}, session=session, skill="echo")
    assert str(raised.value).splitlines() == [
        f"verify did not hold: expected at least 1 request to skill 'echo' of session {session!r}"
        " where body /input/text equals 'hello'; found 0",
        "closest requests (fewest failed conditions first):",
        f"  #{server.journal(session)[0].id} POST /skills/echo/invoke (skill 'echo', 200)",
        "    body /input/text equals 'hello': found \"hola\"",
    ]


def test_a_bad_condition_raises_its_problem_placed_by_path(server: Server) -> None:
    with pytest.raises(BadVerification) as raised:
        server.verify({"body": {"input/text": "hello"}})
    [problem] = raised.value.problems
    assert (problem.path, problem.line) == ("when.body.input/text", 0)
    assert problem.expected.startswith("a JSON Pointer")


def test_requests_lists_what_was_sent_with_its_filters(server: Server) -> None:
    session = new_session()
    headers = {"Mockskill-Session": session, "X-Trace": "t-1"}
    requests.post(f"{server.url}/orders", json={"item": 3}, headers=headers, timeout=10)
    requests.post(server.invoke_url("echo"), data="plain", headers=headers, timeout=10)
    mine = server.requests(session)
    assert [e.path for e in mine] == ["/orders", "/skills/echo/invoke"]
    assert ("X-Trace", "t-1") in (mine[0].headers or ())
    assert mine[1].body == "plain"
    assert [e.path for e in server.requests(session, skill="echo")] == ["/skills/echo/invoke"]
    assert [e.path for e in server.requests(session, path="/orders")] == ["/orders"]
    assert [e.path for e in server.requests(session, limit=1)] == ["/skills/echo/invoke"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl sends the request")
def test_remote_server_verifies_and_lists_as_server_does(server: Server) -> None:
    session = new_session()
    subprocess.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-X",
            "POST",
            "-H",
            f"Mockskill-Session: {session}",
            "-H",
            "Content-Type: application/json",
            "-d",
            '{"input": {"text": "hello"}}',
            server.invoke_url("echo"),
        ],
        check=True,
        timeout=30,
    )
    remote = RemoteServer(server.url)
    matched = remote.verify({"body": {"/input/text": "hello"}}, session=session, count=1)
    assert matched == server.verify({"body": {"/input/text": "hello"}}, session=session)
    assert remote.requests(session) == server.requests(session)
    assert remote.requests(session, method="GET") == []
    with pytest.raises(AssertionError) as raised:
        remote.verify({"body": {"/input/text": "bye"}}, session=session)
    with pytest.raises(AssertionError) as local:
        server.verify({"body": {"/input/text": "bye"}}, session=session)
    assert str(raised.value) == str(local.value)
    with pytest.raises(BadVerification):
        remote.verify({"body": {"/input/text": {"machtes": "x"}}})


def test_replicas_sharing_a_journal_on_redis_verify_every_replicas_requests(
    serve: Serve, redis_url: str
) -> None:
    first, second = serve(SCENARIO, state=redis_url), serve(SCENARIO, state=redis_url)
    session = new_session()
    for server, text in ((first, "hello"), (second, "hola")):
        requests.post(
            server.invoke_url("echo"),
            json={"input": {"text": text}},
            headers={"Mockskill-Session": session, "X-Replica": server.url},
            timeout=10,
        )
    second.requests(session)  # (a replica's read sends its own entries first)
    assert len(first.requests(session)) == 2
    (sent,) = first.verify({"body": {"/input/text": "hola"}}, session=session, count=1)
    assert ("X-Replica", second.url) in (sent.headers or ())
    with pytest.raises(AssertionError, match='found "hello"'):
        second.verify({"body": {"/input/text": "bonjour"}}, session=session)
