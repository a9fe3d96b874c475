"""``mockskill verify URL``: exit 0 when it held, 1 (near misses printed) when it did not,
2 for a mistyped command line or bad conditions, 3 when the server cannot be asked."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
import requests
from click.testing import CliRunner, Result

from mockskill import Server
from mockskill.cli import cli

Serve = Callable[..., Server]

SCENARIO = """
    name: cli-verify
    skills:
      - id: echo
        invoke: {json: {result: ok}}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


def sent(server: Server, *texts: str) -> str:
    session = f"cli-{uuid.uuid4().hex[:10]}"
    for text in texts:
        requests.post(
            server.invoke_url("echo"),
            json={"input": {"text": text}},
            headers={"Mockskill-Session": session},
            timeout=10,
        )
    return session


def verify(*args: str) -> Result:
    return CliRunner().invoke(cli, ["verify", *args])


def test_it_exits_0_when_it_held(server: Server) -> None:
    session = sent(server, "hello")
    when = '{"body": {"/input/text": "hello"}}'
    result = verify(server.url, "--session", session, "--when", when, "--count", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("verify held: expected exactly 1 request of session")
    assert "found 1" in result.stdout


def test_it_exits_1_with_the_near_misses_when_it_did_not(server: Server) -> None:
    session = sent(server, "hola")
    result = verify(
        server.url,
        "--session",
        session,
        "--skill",
        "echo",
        "--when",
        '{"body": {"/input/text": "hello"}}',
    )
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("verify did not hold: expected at least 1 request to skill 'echo'")
    assert lines[1:] == [
        "closest requests (fewest failed conditions first):",
        f"  #{server.journal(session)[0].id} POST /skills/echo/invoke (skill 'echo', 200)",
        "    body /input/text equals 'hello': found \"hola\"",
    ]


def test_json_prints_the_servers_answer(server: Server) -> None:
    session = sent(server, "hello", "hello")
    result = verify(server.url, "--session", session, "--at-most", "1", "--json")
    assert result.exit_code == 1
    details = json.loads(result.stdout)["error"]["details"]
    assert (details["count"], details["expected"]) == (2, "at most 1")


def test_bad_conditions_are_told_at_their_place_in_the_option_and_exit_2(server: Server) -> None:
    result = verify(server.url, "--when", '{"body": {"/input/text": {"machtes": "^h"}}}')
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "mockskill: --when:1:27: body./input/text.machtes: expected a known key, found unknown"
        " key 'machtes'; did you mean 'matches'?"
    )
    assert verify(server.url, "--when", "{not json").exit_code == 2
    assert verify(server.url, "--method", "GET", "--when", '{"body": {"/a": 1}}').exit_code == 2
    assert verify(server.url, "--count", "1", "--at-least", "1").exit_code == 2
    assert verify(server.url, "--count", "-1").exit_code == 2
    assert verify("ftp://nowhere").exit_code == 2


def test_an_unreachable_server_exits_3() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = verify(f"http://127.0.0.1:{port}", "--session", "S")
    assert result.exit_code == 3
    assert "cannot reach" in result.stderr


def test_the_console_script_runs_it(server: Server) -> None:
    session = sent(server, "hello")
    done = subprocess.run(
        [sys.executable, "-m", "mockskill", "verify", server.url, "--session", session],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
