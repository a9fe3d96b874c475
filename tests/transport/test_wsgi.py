"""The WSGI handler: a Flask app served off the loop, never blocking the skill surface."""

from __future__ import annotations

import functools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from flask import Flask, request
from transport_helpers import JSON, Recorder

from mockskill.admin.json_provider import Provider
from mockskill.transport import Answer, Plan, Routes, ThreadedServer, WSGIHandler
from mockskill.transport.handler import Request
from mockskill.transport.wsgi import environ


@functools.cache
def busy_document(seconds: float) -> list[Any]:
    """A document json's C encoder takes at least *seconds* to write in one call here.

    Made of one block of report-like attempts, repeated: the same block
    listed many times costs the encoder each time, and memory once.
    """
    block = [
        {"id": n, "started": 1.7e9 + n / 7, "status": 503, "wait_ms": n / 3, "changed": ["body"]}
        for n in range(5000)
    ]
    started = time.perf_counter()
    json.dumps(block)
    once = max(time.perf_counter() - started, 1e-4)
    return [block] * (int(seconds / once) + 1)


def admin_app(release: threading.Event) -> Flask:
    app = Flask("admin")
    app.json = Provider(app)  # the admin app's: megabytes written in pieces

    @app.get("/__admin/busy")
    def busy() -> Any:
        # Like a report over a big journal: megabytes whose encoding is all CPU.
        return app.json.response(busy_document(0.6))

    @app.get("/__admin/slow")
    def slow() -> str:
        release.wait(10)  # held until the test says so: a slow report
        return "slow done"

    @app.route("/__admin/echo/<path:rest>", methods=["GET", "POST"])
    def echo(rest: str) -> dict[str, object]:
        return {
            "rest": rest,
            "args": request.args.to_dict(),
            "body": request.get_data(as_text=True),
            "header": request.headers.get("X-Thing"),
            "url": request.url,
        }

    @app.get("/__admin/boom")
    def boom() -> str:
        raise RuntimeError("a bug in the admin")

    return app


@pytest.fixture
def routed() -> object:
    release = threading.Event()
    admin = WSGIHandler(admin_app(release))
    skill = Recorder(lambda _: Plan(Answer(200, JSON, b'{"skill": true}')))
    server = ThreadedServer(Routes(skill, {"/__admin": admin})).start()
    yield server, release
    release.set()
    server.stop(grace=0)
    admin.close()


def test_a_slow_admin_request_does_not_delay_a_skill_request(routed: object) -> None:
    server, release = routed  # type: ignore[misc]
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(requests.get, f"{server.url}/__admin/slow", timeout=15)
        time.sleep(0.1)  # the admin request holds its worker now (pacing)
        started = time.monotonic()
        assert requests.get(f"{server.url}/skills", timeout=5).json() == {"skill": True}
        assert time.monotonic() - started < 0.5
        assert not slow.done()
        release.set()
        assert slow.result().text == "slow done"


def test_a_busy_admin_request_does_not_delay_a_skill_request(routed: object) -> None:
    """An admin answer that keeps a worker COMPUTING (its JSON alone takes json's C
    encoder ~0.6 s in one call) shares the GIL with the loop: written in pieces, it
    lets the loop's thread in between, and skill requests keep answering meanwhile,
    each in far less time than the admin answer takes (a generous bound: behaviour,
    not speed; written in one call, a skill request waited for all of it)."""
    server, _ = routed  # type: ignore[misc]
    busy_document(0.6)  # made (and timed) before, not while the server is busy
    with ThreadPoolExecutor(1) as pool, requests.Session() as session:
        assert session.get(f"{server.url}/skills", timeout=5).status_code == 200
        started = time.monotonic()
        busy = pool.submit(requests.get, f"{server.url}/__admin/busy", timeout=60)
        skill_ms = []
        while not busy.done():
            sent = time.monotonic()
            assert session.get(f"{server.url}/skills", timeout=30).json() == {"skill": True}
            skill_ms.append((time.monotonic() - sent) * 1000)
        busy_ms = (time.monotonic() - started) * 1000
        answer = busy.result()
    assert answer.status_code == 200
    assert len(answer.content) > 1_000_000
    assert busy_ms >= 300
    assert len(skill_ms) >= 5, skill_ms
    assert max(skill_ms) < busy_ms / 4, (max(skill_ms), busy_ms)


def test_the_admin_app_sees_a_proper_wsgi_request(routed: object) -> None:
    server, _ = routed  # type: ignore[misc]
    answer = requests.post(
        f"{server.url}/__admin/echo/a%20b/c?x=1&y=%C3%A9",
        data=b"the body",
        headers={"X-Thing": "thing"},
        timeout=5,
    ).json()
    assert answer["rest"] == "a b/c"
    assert answer["args"] == {"x": "1", "y": "é"}
    assert answer["body"] == "the body"
    assert answer["header"] == "thing"
    assert answer["url"].startswith(f"http://127.0.0.1:{server.port}/__admin/echo/")


def test_a_chunked_body_reaches_the_app_whole(routed: object) -> None:
    server, _ = routed  # type: ignore[misc]

    def chunks() -> object:
        yield b"in "
        yield b"pieces"

    answer = requests.post(f"{server.url}/__admin/echo/x", data=chunks(), timeout=5)  # type: ignore[arg-type]
    assert answer.json()["body"] == "in pieces"


def test_an_admin_bug_is_a_500_and_the_server_goes_on(routed: object) -> None:
    server, _ = routed  # type: ignore[misc]
    assert requests.get(f"{server.url}/__admin/boom", timeout=5).status_code == 500
    assert requests.get(f"{server.url}/__admin/echo/ok", timeout=5).status_code == 200


def test_routes_match_the_prefix_only_at_a_path_boundary(routed: object) -> None:
    server, _ = routed  # type: ignore[misc]
    assert requests.get(f"{server.url}/__administer", timeout=5).json() == {"skill": True}
    assert requests.get(f"{server.url}/__admin", timeout=5).status_code == 404  # Flask's


def test_admin_requests_on_one_keep_alive_connection(routed: object) -> None:
    server, _ = routed  # type: ignore[misc]
    with requests.Session() as session:
        for i in range(20):
            assert session.get(f"{server.url}/__admin/echo/{i}", timeout=5).json()["rest"] == str(i)
    assert server.server.accepted == 1


def test_the_environ_joins_repeated_headers_and_keeps_the_raw_target() -> None:
    request = Request(
        "GET",
        "/p%2Fq?a=1",
        "1.1",
        (("X-A", "1"), ("x-a", "2"), ("Content-Type", "text/plain")),
        b"",
        ("127.0.0.1", 5),
        ("127.0.0.1", 80),
        0.0,
        1,
        1,
    )
    env = environ(request)
    assert env["HTTP_X_A"] == "1,2"
    assert env["CONTENT_TYPE"] == "text/plain"
    assert env["PATH_INFO"] == "/p/q"
    assert env["RAW_URI"] == "/p%2Fq?a=1"
    assert env["QUERY_STRING"] == "a=1"
