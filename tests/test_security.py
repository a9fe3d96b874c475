"""Safe defaults: loopback unless told, the admin token, the body limit, CORS, no leaked secrets."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.client
import json
import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from click.testing import CliRunner

from mockskill import Server, ServerError, load_text
from mockskill.cli import cli
from mockskill.engine.addresses import MAX_HOST
from mockskill.engine.entries import (
    DEFAULT_BODY_LIMIT,
    MAX_HEADER_BYTES,
    MAX_TARGET,
    max_entry_bytes,
)
from mockskill.engine.state import MAX_ENTRY_BYTES, MAX_PATH, MAX_SESSION_NAME, MAX_TEXT

TOKEN = "s3cret-admin-token"
SCENARIO = load_text("skills: [{id: echo}]", "sec.yaml")


def raw(server: Server, request: bytes) -> bytes:
    """Send *request* as is; return everything answered (the server closes after it)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.fixture
def guarded() -> Iterator[Server]:
    with Server(SCENARIO, admin_token=TOKEN) as server:
        yield server


# -- the admin token ------------------------------------------------------------------------


def test_admin_without_the_token_is_refused_with_401(guarded: Server) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Mockskill-Admin-Token": "nope"}):
        response = requests.post(f"{guarded.url}/__admin/reset", headers=headers, timeout=10)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="mockskill-admin"'
        error = response.json()["error"]
        assert error["code"] == "MOCKSKILL_ADMIN_TOKEN_REQUIRED"
        assert "Authorization: Bearer TOKEN" in error["message"]
        assert TOKEN not in response.text


def test_admin_with_the_token_is_served(guarded: Server) -> None:
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, {"Mockskill-Admin-Token": TOKEN}):
        response = requests.get(f"{guarded.url}/__admin/health", headers=headers, timeout=10)
        assert response.status_code == 200
        assert response.json()["status"] == "ok"


def test_a_token_in_the_query_string_is_not_accepted(guarded: Server) -> None:
    response = requests.get(f"{guarded.url}/__admin/health", params={"token": TOKEN}, timeout=10)
    assert response.status_code == 401


def test_the_dashboards_files_alone_are_served_without_the_token(guarded: Server) -> None:
    """They hold no data: the page asks for the token and sends it with every fetch."""
    public = ("/__admin/", "/__admin/dashboard/dashboard.js", "/__admin/dashboard/dashboard.css")
    for path in public:
        response = requests.get(f"{guarded.url}{path}", timeout=10)
        assert response.status_code == 200, path
        assert TOKEN not in response.text
    bare = requests.get(f"{guarded.url}/__admin", allow_redirects=False, timeout=10)
    assert bare.status_code == 308
    # Anything else still needs it: another method, another file, a path climbing out.
    assert requests.post(f"{guarded.url}/__admin/", timeout=10).status_code == 401
    assert requests.get(f"{guarded.url}/__admin/dashboard/x.js", timeout=10).status_code == 401
    for path in (
        "/__admin/dashboard/../health",
        "/__admin/dashboard/%2e%2e/journal",
        "/__admin/dashboard/dashboard.js/../../health",
        "/__admin//health",
    ):
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        answer = raw(guarded, request)
        assert answer.startswith(b"HTTP/1.1 401 "), (path, answer[:60])


def test_the_skill_surface_and_token_endpoint_ignore_the_admin_token(guarded: Server) -> None:
    assert requests.get(f"{guarded.url}/skills", timeout=10).status_code == 200
    assert requests.post(guarded.invoke_url("echo"), timeout=10).status_code == 200
    token = requests.post(f"{guarded.url}/oauth/token", timeout=10)
    assert "MOCKSKILL_ADMIN_TOKEN_REQUIRED" not in token.text


def test_without_a_token_admin_on_loopback_is_open() -> None:
    with Server(SCENARIO) as server:
        assert requests.get(f"{server.url}/__admin/health", timeout=10).status_code == 200


def test_the_token_is_in_neither_the_journal_nor_the_request_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mockskill.access")
    with Server(SCENARIO, admin_token=TOKEN, quiet=False) as server:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        requests.post(server.invoke_url("echo"), headers=auth, timeout=10)
        requests.get(f"{server.url}/__admin/health?token={TOKEN}", timeout=10)
        requests.get(f"{server.url}/__admin/health", headers=auth, timeout=10)
        entries = server.journal()
    assert len(entries) == 1
    assert all(TOKEN not in repr(entry) for entry in entries)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/__admin/health" in logged
    assert "token=***" in logged
    assert TOKEN not in logged


def test_secrets_in_a_query_string_are_masked_in_the_request_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mockskill.access")
    with Server(SCENARIO, quiet=False) as server:
        query = (
            "client_secret=cs-1&api_key=ak-2&access_token=at-3&keep=visible"
            "&client%5Fsecret=cs-4&API_KEY=ak-5&refresh_token=rt-6"
        )
        requests.post(f"{server.url}/skills/echo/invoke?{query}", timeout=10)
        requests.get(f"{server.url}/a%20b?access_token=at-7", timeout=10)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in ("cs-1", "ak-2", "at-3", "cs-4", "ak-5", "rt-6", "at-7"):
        assert secret not in logged
    for shown in ("client_secret=***", "api_key=***", "access_token=***", "API_KEY=***"):
        assert shown in logged
    assert logged.count("client_secret=***") == 2  # also spelt client%5Fsecret
    assert "keep=visible" in logged
    assert "/a%20b?access_token=***" in logged  # and a percent sign logs as itself


def test_the_admin_token_in_a_request_path_is_masked_in_the_journal(guarded: Server) -> None:
    session = {"Mockskill-Session": f"ci-{TOKEN}"}
    requests.get(f"{guarded.url}/{TOKEN}", headers=session, timeout=10)
    requests.post(f"{guarded.url}/skills/{TOKEN}/invoke", timeout=10)
    requests.get(f"{guarded.url}/skills/x{TOKEN}x", timeout=10)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    journal = requests.get(f"{guarded.url}/__admin/journal", headers=auth, timeout=10)
    entries = journal.json()["entries"]
    assert [e["path"] for e in entries] == ["/***", "/skills/***/invoke", "/skills/x***x"]
    assert entries[0]["session"] == "ci-***"
    assert entries[1]["skill"] == "***"
    assert TOKEN not in journal.text
    assert TOKEN not in repr(guarded.journal())


def test_a_path_cannot_forge_a_line_of_a_report_printed_from_the_journal(
    bundled: Server,
) -> None:
    # %0A is a line break once decoded, U+202E turns the text after it around.
    session = {"Mockskill-Session": "forged-path"}
    requests.get(f"{bundled.url}/x%0Aforged%E2%80%AEevil", headers=session, timeout=10)
    (entry,) = bundled.journal("forged-path")
    assert entry.path == "/x%0Aforged%E2%80%AEevil"
    reasons = [r for miss in entry.near_misses for r in miss["reasons"]]
    assert reasons
    assert not any(c in r for r in reasons for c in "\n\u202e")


def test_credential_fingerprints_are_keyed_per_server() -> None:
    scenario = load_text(
        "auth: {tokens: [{token: weak, scopes: [run]}]}\n"
        "skills: [{id: echo, requires: {scopes: [run]}}]",
        "weak.yaml",
    )
    seen = []
    for _ in range(2):
        with Server(scenario) as server:
            for _ in range(2):
                headers = {"Authorization": "Bearer weak"}
                assert requests.post(server.invoke_url("echo"), headers=headers, timeout=10).ok
            first, second = (e.credential for e in server.journal())
            assert first == second  # within a server: the same secret, the same fingerprint
            seen.append(first)
    assert seen[0] != seen[1]  # keyed per server: no table of weak tokens matches it
    unkeyed = hashlib.sha256(b"weak").hexdigest()
    assert all(fingerprint is not None for fingerprint in seen)
    assert not any(unkeyed[:12] in str(fingerprint) for fingerprint in seen)


# -- where it listens -----------------------------------------------------------------------


def test_a_non_loopback_address_without_a_token_is_refused() -> None:
    with pytest.raises(ServerError) as caught:
        Server(SCENARIO, host="0.0.0.0")
    message = str(caught.value)
    assert "0.0.0.0" in message
    assert "--admin-token TOKEN" in message
    assert "MOCKSKILL_ADMIN_TOKEN" in message
    assert "--insecure-admin" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    Server(SCENARIO, host=host)  # constructed: not refused


def test_a_non_loopback_address_with_a_token_starts() -> None:
    with Server(SCENARIO, host="0.0.0.0", admin_token=TOKEN) as server:
        assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
        assert requests.get(f"{server.url}/__admin/health", timeout=10).status_code == 401


def test_insecure_admin_starts_without_a_token() -> None:
    with Server(SCENARIO, host="0.0.0.0", insecure_admin=True) as server:
        assert requests.get(f"{server.url}/__admin/health", timeout=10).status_code == 200


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(ServerError, match="empty"):
        Server(SCENARIO, admin_token="  ")


def test_the_cli_refuses_a_non_loopback_host_without_a_token() -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0"], env={})
    assert result.exit_code == 1
    assert "--admin-token TOKEN" in result.output
    assert "Traceback" not in result.output


def test_the_cli_warns_about_insecure_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    def serve_forever(self: Server, *, freeze: bool = False) -> None:
        self.stop()  # at once

    monkeypatch.setattr(Server, "serve_forever", serve_forever)
    result = CliRunner().invoke(
        cli, ["serve", "--host", "0.0.0.0", "--port", "0", "--insecure-admin"], env={}
    )
    assert result.exit_code == 0, result.output
    assert "WARNING: --insecure-admin" in result.stderr
    assert "--admin-token TOKEN" in result.stderr


def test_the_cli_reads_the_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def serve_forever(self: Server, *, freeze: bool = False) -> None:
        seen.append(self.admin_required)
        self.stop()

    monkeypatch.setattr(Server, "serve_forever", serve_forever)
    result = CliRunner().invoke(
        cli,
        ["serve", "--host", "0.0.0.0", "--port", "0"],
        env={"MOCKSKILL_ADMIN_TOKEN": TOKEN},
    )
    assert result.exit_code == 0, result.output
    assert seen == [True]
    assert "asks for the admin token" in result.output
    assert TOKEN not in result.output


# -- the body limit -------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_by_its_content_length() -> None:
    with Server(SCENARIO, max_body_bytes=1000) as server:
        ok = requests.post(server.invoke_url("echo"), data=b"x" * 1000, timeout=10)
        assert ok.status_code == 200
        response = requests.post(server.invoke_url("echo"), data=b"x" * 5000, timeout=10)
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["code"] == "MOCKSKILL_BODY_TOO_LARGE"
        assert "1000 bytes" in error["message"]
        admin = requests.post(f"{server.url}/__admin/validate", data=b"{" * 5000, timeout=10)
        assert admin.status_code == 413
        refused = server.journal()[-1]
        assert (refused.status, refused.endpoint) == (413, "refused")
        assert refused.error_code == "MOCKSKILL_BODY_TOO_LARGE"


def test_the_default_limit_is_one_mebibyte(bundled: Server) -> None:
    big = b"x" * (1024 * 1024 + 1)
    response = requests.post(f"{bundled.url}/skills/nope/invoke", data=big, timeout=10)
    assert response.status_code == 413


def chunked(path: str, size: int, piece: int = 300) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    body = b""
    for start in range(0, size, piece):
        part = b"y" * min(piece, size - start)
        body += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return head + body + b"0\r\n\r\n"


@pytest.mark.parametrize("path", ["/skills/echo/invoke", "/__admin/validate"])
def test_a_chunked_body_over_the_limit_is_refused(path: str) -> None:
    with Server(SCENARIO, max_body_bytes=1000) as server:
        answer = raw(server, chunked(path, 5000))
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b"MOCKSKILL_BODY_TOO_LARGE" in answer


def test_a_chunked_body_within_the_limit_is_served() -> None:
    with Server(SCENARIO, max_body_bytes=1000) as server:
        assert raw(server, chunked("/skills/echo/invoke", 900)).startswith(b"HTTP/1.1 200 ")
        answer = raw(server, chunked("/__admin/validate", 900))
        # A body of 'y's reached the validator (400: not JSON), not the limit.
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]


# -- CORS -----------------------------------------------------------------------------------


def test_no_cors_headers_unless_enabled() -> None:
    with Server(SCENARIO) as server:
        response = requests.get(f"{server.url}/skills", headers={"Origin": "http://a"}, timeout=10)
        assert "Access-Control-Allow-Origin" not in response.headers
        preflight = requests.options(
            server.invoke_url("echo"),
            headers={"Origin": "http://a", "Access-Control-Request-Method": "POST"},
            timeout=10,
        )
        assert preflight.status_code != 204  # the engine answered it, as before
        assert "Access-Control-Allow-Origin" not in preflight.headers


def test_cors_adds_the_origin_header_and_answers_preflight() -> None:
    with Server(SCENARIO, cors=True, admin_token=TOKEN, max_body_bytes=10) as server:
        for response in (
            requests.get(f"{server.url}/skills", timeout=10),
            requests.post(server.invoke_url("echo"), timeout=10),
            requests.get(f"{server.url}/skills/missing", timeout=10),
            requests.get(f"{server.url}/__admin/health", timeout=10),  # 401
            requests.post(server.invoke_url("echo"), data=b"x" * 20, timeout=10),  # 413
        ):
            assert response.headers["Access-Control-Allow-Origin"] == "*"
        preflight = requests.options(
            server.invoke_url("echo"),
            headers={
                "Origin": "http://a",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "Mockskill-Session, Content-Type",
            },
            timeout=10,
        )
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == "*"
        assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
        allowed = preflight.headers["Access-Control-Allow-Headers"]
        for header in (
            "Mockskill-Session",
            "Mockskill-Error",
            "Mockskill-Case",
            "Skill-Protocol-Version",
            "Authorization",
            "Content-Type",
            "X-API-Key",
        ):
            assert header in allowed


def test_cors_for_named_origins_lets_in_those_alone() -> None:
    app = "http://localhost:3000"
    with Server(SCENARIO, cors=[f"{app}/", "https://Tool.Example"]) as server:
        named = requests.get(f"{server.url}/skills", headers={"Origin": app}, timeout=10)
        assert named.headers["Access-Control-Allow-Origin"] == app
        assert named.headers["Vary"] == "Origin"
        other = requests.get(f"{server.url}/skills", headers={"Origin": "http://a"}, timeout=10)
        assert "Access-Control-Allow-Origin" not in other.headers
        asked = {"Access-Control-Request-Method": "POST"}
        preflight = requests.options(
            server.invoke_url("echo"),
            headers={**asked, "Origin": "https://tool.example"},
            timeout=10,
        )
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == "https://tool.example"
        unnamed = requests.options(
            server.invoke_url("echo"), headers={**asked, "Origin": "http://a"}
        )
        assert "Access-Control-Allow-Origin" not in unnamed.headers
        # /__admin: a named origin's page may use it, another's is refused.
        json_type = {"Content-Type": "application/json"}
        reset = f"{server.url}/__admin/reset?all=true"
        by_app = requests.post(reset, headers={**json_type, "Origin": app}, timeout=10)
        assert (by_app.status_code, by_app.headers["Access-Control-Allow-Origin"]) == (200, app)
        by_other = requests.post(reset, headers={**json_type, "Origin": "http://a"}, timeout=10)
        assert by_other.status_code == 403
        assert "--cors-origin http://a" in by_other.json()["error"]["message"]


def test_a_cors_origin_that_is_not_one_is_refused_at_start() -> None:
    with pytest.raises(ServerError, match="'localhost:3000' is not an origin"):
        Server(SCENARIO, cors=["localhost:3000"])
    result = CliRunner().invoke(cli, ["serve", "--port", "0", "--cors-origin", "/path"])
    assert result.exit_code == 1
    assert "'/path' is not an origin" in result.output


# -- what one request can make the server keep ---------------------------------------------


def footprint(value: object, seen: set[int] | None = None) -> int:
    """Bytes *value* holds in memory, with everything it refers to (each object once)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(footprint(k, seen) + footprint(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        size += sum(footprint(v, seen) for v in value)
    elif dataclasses.is_dataclass(value):
        size += sum(footprint(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    return size


def test_an_over_long_session_name_is_refused_with_400_and_kept_cut() -> None:
    with Server(SCENARIO) as server:
        longest = "s" * MAX_SESSION_NAME
        served = requests.post(
            server.invoke_url("echo"), headers={"Mockskill-Session": longest}, timeout=10
        )
        assert served.status_code == 200
        response = requests.post(
            server.invoke_url("echo"), headers={"Mockskill-Session": "s" * 60_000}, timeout=10
        )
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "MOCKSKILL_BAD_REQUEST"
        assert f"at most {MAX_SESSION_NAME}" in error["message"]
        assert error["details"] == {
            "header": "Mockskill-Session",
            "length": 60_000,
            "limit": MAX_SESSION_NAME,
        }
        ok, refused = server.journal()
        assert ok.session == longest
        assert (refused.endpoint, refused.status) == ("refused", 400)
        assert refused.session == "s" * MAX_SESSION_NAME + "...[59744 more characters]"


def test_a_host_longer_than_any_host_is_refused_with_400_not_echoed_in_every_url() -> None:
    many = load_text("skills: [" + ", ".join(f"{{id: s{i}}}" for i in range(20)) + "]", "m.yaml")
    with Server(many) as server:
        longest = "h" * (MAX_HOST - len(":65535")) + ":65535"
        listing = raw(
            server,
            b"GET /skills HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % longest.encode(),
        )
        assert listing.startswith(b"HTTP/1.1 200 ")
        assert longest.encode() in listing
        hostile = "h" * 250_000
        answer = raw(
            server,
            b"GET /skills HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % hostile.encode(),
        )
        head, body = answer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 400 ")
        assert len(answer) < 1000  # not an answer the size of the Host, let alone 20 of them
        error = json.loads(body)["error"]
        assert error["code"] == "MOCKSKILL_BAD_REQUEST"
        assert error["details"] == {"header": "Host", "length": 250_000, "limit": MAX_HOST}
        listed, refused = server.journal()
        assert (listed.status, refused.endpoint, refused.status) == (200, "refused", 400)


def test_a_hostile_request_leaves_an_entry_of_bounded_size_its_texts_marked_cut() -> None:
    wide = "\U0001f600" * 4_000  # four bytes a character in memory: the worst case
    scenario = load_text(
        "name: auth\nauth: {clients: [{client_id: c, client_secret: s}]}\nskills: [{id: echo}]"
    )
    with Server(scenario) as server:
        hostile = {
            "Mockskill-Session": "s" * MAX_SESSION_NAME,
            "Skill-Protocol-Version": "v" * 60_000,
            "Authorization": "Bearer " + "t" * 60_000,
        }
        requests.get(f"{server.url}/{wide}", headers=hostile, timeout=30)
        requests.get(f"{server.url}/skills/{wide}", headers=hostile, timeout=30)
        requests.post(f"{server.url}/skills/{wide}/invoke", headers=hostile, timeout=30)
        requests.request("X" * 50_000, f"{server.url}/{wide[:300]}", timeout=30)
        requests.post(
            f"{server.url}/oauth/token",
            data={"grant_type": "client_credentials", "client_id": wide},
            headers=hostile,
            timeout=30,
        )
        entries = server.journal()
    assert len(entries) == 5
    for entry in entries:
        assert footprint(entry) <= MAX_ENTRY_BYTES, entry.path[:50]
        assert len(entry.path) <= MAX_PATH + 40
    unmatched = entries[0]
    assert unmatched.endpoint == "unmatched"
    assert unmatched.path.endswith(f"...[{len(wide) + 1 - MAX_PATH} more characters]")
    reasons = [r for miss in unmatched.near_misses for r in miss["reasons"]]
    assert len(reasons) >= 3
    assert all(len(r) < 2 * MAX_PATH for r in reasons)
    assert any(f"...[{len(wide) + 1 - MAX_TEXT} more characters]" in r for r in reasons)
    cut = f"...[{len(wide) - MAX_TEXT} more characters]"
    assert [entries[1].skill, entries[2].skill] == [wide[:MAX_TEXT] + cut] * 2
    assert entries[1].protocol_version == "v" * MAX_TEXT + "...[59872 more characters]"
    # A method llhttp refuses is kept from the packet that held the refusal: how much of the
    # 50 000 X's that was depends on how loopback cut the stream (49 872 more, or 32 613).
    method = re.fullmatch(r"(X+)\.\.\.\[(\d+) more characters\]", entries[3].method)
    assert method is not None, entries[3].method[:200]
    assert len(method[1]) == MAX_TEXT
    assert 0 < int(method[2]) <= 50_000 - MAX_TEXT
    assert (
        entries[4].credential
        == f"client {wide[: MAX_TEXT - 7]}...[{len(wide) - 121} more characters]"
    )


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")  # pragma: no cover


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_floods_of_long_session_names_and_paths_leave_memory_bounded(tmp_path: Path) -> None:
    scenario = tmp_path / "echo.yaml"
    scenario.write_text("skills: [{id: echo}]\n", encoding="utf-8")
    command = [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--quiet"]
    process = subprocess.Popen(
        [*command, str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        url = re.search(r"at (http://\S+)", process.stdout.readline())
        assert url, "mockskill serve printed no URL"
        base = url.group(1)
        # One kept-alive connection of the standard library's client: requests spends more
        # time checking a 60 000-character header and parsing a 30 000-character URL than
        # the server spends on the request.
        with contextlib.closing(
            http.client.HTTPConnection(urlsplit(base).netloc, timeout=10)
        ) as client:

            def send(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> None:
                client.request(method, path, body=body or None, headers=headers)
                client.getresponse().read()

            empty = {"Content-Length": "0"}
            for _ in range(50):  # warm up: what any server allocates once
                send("POST", "/skills/echo/invoke", empty)
                send("GET", f"/{'a' * 30_000}", {})
            before = rss_kib(process.pid)
            for i in range(500):
                session = f"{i:05d}" + "s" * 60_000
                # with a body an entry holds until read (LATER_BYTES)
                body = b"%05d" % i + b"b" * 1019
                send("POST", "/skills/echo/invoke", {"Mockskill-Session": session}, body)
                send("GET", f"/{i:05d}{'a' * 30_000}", {})
            grown = rss_kib(process.pid) - before
        journal = requests.get(f"{base}/__admin/journal", timeout=30).json()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert journal["size"] == 1_100
    # 1 000 hostile requests, each keeping under its bound (unbounded: ~90 MB).
    # Each entry keeps its texts (16 KiB at most) and what its request sent: the hostile
    # session header or target cut to 8 KiB (MAX_HEADER_BYTES, MAX_TARGET) and a 1 KiB body.
    per_entry = 16 * 1024 + max(MAX_HEADER_BYTES, MAX_TARGET) + 1024
    assert grown < 1_000 * per_entry // 1024 + 20_000, f"RSS grew {grown} KiB"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def flood_of_big_bodies(
    tmp_path: Path, capacity: int, options: tuple[str, ...] = (), flood: int = 1_500
) -> tuple[dict[str, Any], int]:
    """A server's journal after *flood* requests with 64 KiB bodies and 8 KiB of headers, and
    how much its RSS grew (KiB). Each body is text a character wider than Latin-1 makes 4
    bytes a character when shown: the worst case. The journal, read at the end, is shown."""
    scenario = tmp_path / "echo.yaml"
    scenario.write_text("skills: [{id: echo}]\n", encoding="utf-8")
    command = [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--quiet"]
    process = subprocess.Popen(
        [*command, "--journal-size", str(capacity), *options, str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        url = re.search(r"at (http://\S+)", process.stdout.readline())
        assert url, "mockskill serve printed no URL"
        base = url.group(1)
        headers = {f"X-Pad-{n}": "h" * 1000 for n in range(8)}  # 8 KiB of headers
        with contextlib.closing(
            http.client.HTTPConnection(urlsplit(base).netloc, timeout=30)
        ) as client:

            def send(n: int, size: int = DEFAULT_BODY_LIMIT) -> None:
                body = ("\U0001f600" + f"{n:06d}" + "b" * (size - 10)).encode()
                client.request("POST", "/skills/echo/invoke", body=body, headers=headers)
                assert client.getresponse().read()

            # Warm up: what any server allocates once (big bodies read), then the journal
            # full of small entries, read (shown): the flood's entries replace them.
            for n in range(5):
                send(n)
            for n in range(2 * min(capacity, 200)):
                send(n, 100)
            requests.get(f"{base}/__admin/journal", timeout=30)
            before = rss_kib(process.pid)
            for n in range(flood):
                send(n)
        journal = requests.get(f"{base}/__admin/journal", timeout=60).json()
        grown = rss_kib(process.pid) - before
    finally:
        process.terminate()
        process.communicate(timeout=10)
    last = journal["entries"][-1]
    assert last["body_size"] == DEFAULT_BODY_LIMIT  # kept whole: the limit
    assert last["body"].endswith("b")
    assert len(last["headers"]) >= 8
    return journal, grown


def test_a_flood_of_64_kib_bodies_and_8_kib_headers_keeps_the_journal_within_its_bound(
    tmp_path: Path,
) -> None:
    capacity = 100
    journal, grown = flood_of_big_bodies(tmp_path, capacity)
    assert journal["size"] == capacity
    # Within the stated worst case of the whole journal (and not the flood's ~110 MB).
    bound = capacity * max_entry_bytes(DEFAULT_BODY_LIMIT) // 1024
    assert grown < bound + 20_000, f"RSS grew {grown} KiB (bound {bound} KiB)"


def test_a_flood_of_big_bodies_shortens_the_journal_to_its_bytes_instead_of_growing_it(
    tmp_path: Path,
) -> None:
    # A journal of the default size, but 4 MiB of bodies: the oldest entries go.
    budget = 4 * 1024 * 1024
    # 400 requests send 28 MB: seven times the bound.
    options = ("--journal-bytes", str(budget))
    journal, grown = flood_of_big_bodies(tmp_path, 10_000, options, flood=400)
    assert len(journal["entries"]) == budget // DEFAULT_BODY_LIMIT
    # Within the journal's worst case for what it holds (and not the flood's ~110 MB).
    bound = (len(journal["entries"]) * MAX_ENTRY_BYTES + 4 * budget) // 1024
    assert grown < bound + 20_000, f"RSS grew {grown} KiB (bound {bound} KiB)"
