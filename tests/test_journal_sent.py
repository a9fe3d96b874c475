"""The journal keeps what the consumer sent (issue 28 item 1), checked from outside: a real
server, real clients (requests, httpx, curl, a raw socket), ``GET /__admin/journal``."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests

from mockskill import Server
from mockskill.engine.entries import DEFAULT_BODY_LIMIT, MASK, MAX_HEADER_BYTES
from mockskill.scenario.loader import load_text

ECHO = load_text("name: echo\nskills: [{id: echo}]\n", "echo.yaml")


@pytest.fixture
def server() -> Iterator[Server]:
    with Server(ECHO) as server:
        yield server


def journal(server: Server) -> list[dict[str, Any]]:
    answer = requests.get(f"{server.url}/__admin/journal", timeout=10)
    assert answer.status_code == 200
    return list(answer.json()["entries"])


def header(entry: dict[str, Any], name: str) -> list[str]:
    """The values of header *name* (any case) in *entry*, in order."""
    return [v for k, v in entry["headers"] if k.lower() == name.lower()]


def test_a_json_body_and_its_headers_come_back_exactly_as_sent(server: Server) -> None:
    body = {"input": {"text": "héllo ✓", "n": 1}}
    sent = json.dumps(body, ensure_ascii=False, indent=1).encode()
    with httpx.Client() as client:
        answer = client.post(
            f"{server.url}/skills/echo/invoke?lang=fr&x=%2F",
            content=sent,
            headers=[
                ("Content-Type", "application/json"),
                ("X-Trace-ID", "t-1"),
                ("x-repeated", "one"),
                ("X-Repeated", "two"),
            ],
        )
    assert answer.status_code == 200
    (entry,) = journal(server)
    assert entry["target"] == "/skills/echo/invoke?lang=fr&x=%2F"
    assert entry["path"] == "/skills/echo/invoke"
    assert entry["body"] == sent.decode()
    assert (entry["body_encoding"], entry["body_size"]) == ("text", len(sent))
    ours = ("content-type", "x-trace-id", "x-repeated")
    names = [name for name, _ in entry["headers"] if name.lower() in ours]
    # Names as written, in order, repeats kept.
    assert names == ["Content-Type", "X-Trace-ID", "x-repeated", "X-Repeated"]
    assert header(entry, "x-repeated") == ["one", "two"]
    assert entry["body_digest"].startswith("hmac-sha256:")


def test_a_binary_body_comes_back_as_base64(server: Server) -> None:
    data = bytes(range(256)) * 3
    requests.post(f"{server.url}/skills/echo/invoke", data=data, timeout=10)
    (entry,) = journal(server)
    assert entry["body_encoding"] == "base64"
    assert base64.b64decode(entry["body"]) == data
    assert entry["body_size"] == len(data)


def test_a_body_over_the_limit_is_cut_never_refused(server: Server) -> None:
    data = b"x" * (100 * 1024)
    answer = requests.post(f"{server.url}/skills/echo/invoke", data=data, timeout=10)
    assert answer.status_code == 200
    (entry,) = journal(server)
    assert entry["body"] == "x" * DEFAULT_BODY_LIMIT
    assert entry["body_size"] == 100 * 1024  # more than the body holds: it was cut
    assert entry["body_encoding"] == "text"


def test_a_text_body_cut_inside_a_character_stays_text(server: Server) -> None:
    data = ("a" + "é" * DEFAULT_BODY_LIMIT).encode()  # the limit falls inside an é
    requests.post(f"{server.url}/skills/echo/invoke", data=data, timeout=10)
    (entry,) = journal(server)
    assert entry["body_encoding"] == "text"
    assert entry["body"] == "a" + "é" * ((DEFAULT_BODY_LIMIT - 1) // 2)


def test_credentials_are_masked_wherever_they_appear(server: Server) -> None:
    requests.post(
        f"{server.url}/skills/echo/invoke?access_token=tok1&page=2&api_key=k3y",
        json={"client_secret": "s3cret", "input": {"password": "pw", "text": "kept"}},
        headers={
            "Authorization": "Bearer abc.def",
            "Proxy-Authorization": "Basic dXNlcjpwYXNz",
            "X-API-Key": "key-1",
            "Cookie": "sid=c00k1e-v4l; theme=dark",
        },
        timeout=10,
    )
    (entry,) = journal(server)
    assert entry["target"] == f"/skills/echo/invoke?access_token={MASK}&page=2&api_key={MASK}"
    assert header(entry, "Authorization") == [f"Bearer {MASK}"]
    assert header(entry, "Proxy-Authorization") == [f"Basic {MASK}"]
    assert header(entry, "X-API-Key") == [MASK]
    assert header(entry, "Cookie") == [f"sid={MASK}; theme={MASK}"]
    # The document keeps its shape, its text too: only the secrets' values change.
    assert entry["body"] == (
        f'{{"client_secret": "{MASK}", "input": {{"password": "{MASK}", "text": "kept"}}}}'
    )
    text = json.dumps(entry)
    # (each unlike a timestamp, a port or a hex digest, which the entry also holds)
    for secret in (
        "tok1",
        "k3y",
        "abc.def",
        "dXNlcjpwYXNz",
        "key-1",
        "c00k1e-v4l",
        "s3cret",
        '"pw"',
    ):
        assert secret not in text


def test_a_token_request_s_form_is_kept_its_client_secret_masked(server: Server) -> None:
    form = {"grant_type": "client_credentials", "client_id": "app", "client_secret": "shh"}
    requests.post(f"{server.url}/oauth/token", data=form, timeout=10)
    (entry,) = journal(server)
    assert entry["endpoint"] == "token"
    assert entry["body"] == f"grant_type=client_credentials&client_id=app&client_secret={MASK}"


def test_names_the_user_adds_are_masked_too() -> None:
    with Server(ECHO, redact=["X-Tenant-Secret", "pin"]) as server:
        requests.post(
            f"{server.url}/skills/echo/invoke?pin=1234",
            json={"PIN": 9876, "text": "kept"},
            headers={"x-tenant-secret": "t-42"},
            timeout=10,
        )
        (entry,) = journal(server)
    assert entry["target"] == f"/skills/echo/invoke?pin={MASK}"
    assert header(entry, "X-Tenant-Secret") == [MASK]
    assert entry["body"] == f'{{"PIN": "{MASK}", "text": "kept"}}'


def test_journal_bodies_off_keeps_today_s_digest_only_entries() -> None:
    with Server(ECHO, journal_bodies=False) as server:
        requests.post(f"{server.url}/skills/echo/invoke?q=1", json={"a": 1}, timeout=10)
        (entry,) = journal(server)
    assert entry["body_digest"].startswith("hmac-sha256:")
    for field in ("target", "headers", "body", "body_encoding", "body_size"):
        assert entry[field] is None, field


def test_a_smaller_body_limit_cuts_sooner() -> None:
    with Server(ECHO, journal_body_limit=4) as server:
        requests.post(f"{server.url}/skills/echo/invoke", data=b"abcdefgh", timeout=10)
        (entry,) = journal(server)
    assert (entry["body"], entry["body_size"]) == ("abcd", 8)


def test_over_long_headers_are_cut_in_the_journal_never_refused(server: Server) -> None:
    long = "v" * (3 * MAX_HEADER_BYTES)
    answer = requests.post(
        f"{server.url}/skills/echo/invoke",
        headers={"X-Long": long, "X-After": "a"},
        data=b"{}",
        timeout=10,
    )
    assert answer.status_code == 200
    (entry,) = journal(server)
    (kept,) = header(entry, "X-Long")
    assert kept.startswith("v" * 100)
    assert kept.endswith(" more bytes]")
    assert len(kept) < MAX_HEADER_BYTES + 40
    # Every header is still listed, in order, past the cut.
    assert [name for name, _ in entry["headers"]][-3:-1] == ["X-Long", "X-After"]
    assert sum(len(k) + len(v) for k, v in entry["headers"]) < MAX_HEADER_BYTES + 400


def test_a_raw_request_comes_back_byte_for_byte(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    body = b'{"input": {"text": "raw"}}'
    head = (
        b"POST /skills/echo/invoke?a=1&b=%C3%A9 HTTP/1.1\r\n"
        b"Host: x\r\nx-lower: 1\r\nX-MiXeD: two words\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + body)
        while sock.recv(65536):
            pass
    (entry,) = journal(server)
    assert entry["target"] == "/skills/echo/invoke?a=1&b=%C3%A9"
    assert entry["headers"] == [
        ["Host", "x"],
        ["x-lower", "1"],
        ["X-MiXeD", "two words"],
        ["Content-Length", str(len(body))],
        ["Connection", "close"],
    ]
    assert entry["body"] == body.decode()


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_s_request_comes_back_as_curl_sent_it(server: Server) -> None:
    subprocess.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Authorization: Bearer from-curl",
            "--data-binary",
            '{"input":{"text":"curl"}}',
            f"{server.url}/skills/echo/invoke?token=t0k&q=x",
        ],
        check=True,
        timeout=30,
    )
    (entry,) = journal(server)
    assert entry["target"] == f"/skills/echo/invoke?token={MASK}&q=x"
    assert entry["body"] == '{"input":{"text":"curl"}}'
    assert header(entry, "Authorization") == [f"Bearer {MASK}"]
    assert header(entry, "User-Agent")[0].startswith("curl/")


def test_an_unmatched_request_keeps_what_it_sent(server: Server) -> None:
    requests.put(f"{server.url}/nowhere?x=1", data=b"hello", timeout=10)
    (entry,) = journal(server)
    assert entry["endpoint"] == "unmatched"
    assert (entry["target"], entry["body"]) == ("/nowhere?x=1", "hello")


def test_a_request_refused_for_its_body_keeps_its_target_and_headers() -> None:
    with Server(ECHO, max_body_bytes=10) as server:
        answer = requests.post(
            f"{server.url}/skills/echo/invoke?k=v",
            data=b"x" * 100,
            headers={"X-Who": "me"},
            timeout=10,
        )
        assert answer.status_code == 413
        (entry,) = journal(server)
    assert entry["endpoint"] == "refused"
    assert entry["target"] == "/skills/echo/invoke?k=v"
    assert header(entry, "X-Who") == ["me"]
    assert entry["body"] is None


def test_the_digest_is_of_the_whole_body_even_past_the_cut(server: Server) -> None:
    head = b"x" * DEFAULT_BODY_LIMIT
    for tail in (b"one", b"two", b"one"):
        requests.post(f"{server.url}/skills/echo/invoke", data=head + tail, timeout=10)
    first, second, third = journal(server)
    assert first["body"] == second["body"] == third["body"]  # the same once cut
    # The retry audit still tells a changed retry from an unchanged one.
    assert first["body_digest"] != second["body_digest"]
    assert first["body_digest"] == third["body_digest"]
