"""The WSGI handler: a Flask app served off the loop, never blocking the skill surface."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from flask import Flask, request
from transport_helpers import JSON, Recorder

from mockskill.transport import Answer, Plan, Routes, ThreadedServer, WSGIHandler
from mockskill.transport.handler import Request
from mockskill.transport.wsgi import environ


def admin_app(release: threading.Event) -> Flask:
    app = Flask("admin")

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
