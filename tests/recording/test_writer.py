"""The writer: recorded exchanges in, a scenario file out that a replay serves the same.

The exchanges are built here as a proxy hands them over (the wire's values,
secrets included); each written file is loaded and served by a real
:class:`~mockskill.Server`, and real requests check what a replay answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
from mockskill.engine.exchange import Exchange
from mockskill.recording import RecordingError, write, writer

UP = "http://127.0.0.1:9"
JSON = (("Content-Type", "application/json"),)


def exchange(
    method: str,
    target: str,
    answer: Any = None,
    *,
    status: int = 200,
    body: Any = b"",
    headers: tuple[tuple[str, str], ...] = (),
    response_headers: tuple[tuple[str, str], ...] = JSON,
    text: bytes | None = None,
    ms: float = 3.0,
    session: str = "default",
) -> Exchange:
    """One proxied exchange: a JSON *answer* (or raw *text*), a JSON or raw request *body*."""
    sent = body if isinstance(body, bytes) else json.dumps(body).encode()
    answered = text if text is not None else b"" if answer is None else json.dumps(answer).encode()
    return Exchange(
        at=1_700_000_000.0,
        session=session,
        method=method,
        target=target,
        headers=(("Host", "127.0.0.1:8080"), ("User-Agent", "test"), *headers),
        body=sent,
        upstream=UP,
        status=status,
        response_headers=response_headers,
        response_body=answered,
        truncated=False,
        upstream_ms=ms,
    )


def descriptor(skill: str) -> dict[str, Any]:
    return {
        "protocol_version": "1.0.0",
        "id": skill,
        "name": skill.title(),
        "version": "1.0.0",
        "capability_type": "api",
        "endpoint": {"url": f"{UP}/skills/{skill}/invoke", "method": "POST"},
        "auth": {"type": "none"},
    }


UNREACHABLE = {
    "error": {
        "code": "ENDPOINT_UNREACHABLE",
        "message": "Failed to connect to skill endpoint",
        "details": {"endpoint_url": f"{UP}/skills/flaky/invoke", "reason": "Connection refused"},
        "retry": {"suggested_delay_ms": 2000, "max_attempts": 5},
    }
}


@pytest.fixture
def replay() -> Iterator[Any]:
    """``replay(text)``: a started Server on a written file (stopped after the test)."""
    servers: list[Server] = []

    def start(text: str) -> Server:
        server = Server(text).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_a_skill_per_id_its_descriptor_pointing_back_at_the_replay(replay: Any) -> None:
    written = write(
        [
            exchange("GET", "/skills/translate", descriptor("translate")),
            exchange("POST", "/skills/translate/invoke", {"result": {"text": "Hallo"}}),
        ],
        delays=False,
    )
    data = yaml.safe_load(written.text)
    (skill,) = data["skills"]
    assert skill["id"] == "translate"
    assert skill["raw_descriptor"]["endpoint"]["url"] == "{base_url}/skills/translate/invoke"
    assert skill["describe"] == {"steps": [{"descriptor": True}]}
    assert "routes" not in data
    server = replay(written.text)
    served = requests.get(server.skill_url("translate"), timeout=10).json()
    assert served["endpoint"]["url"] == server.invoke_url("translate")
    assert served == {**descriptor("translate"), "endpoint": served["endpoint"]}
    invoked = requests.post(served["endpoint"]["url"], timeout=10)
    assert invoked.json() == {"result": {"text": "Hallo"}}
    listed = requests.get(f"{server.url}/skills", timeout=10).json()["skills"]
    assert [s["id"] for s in listed] == ["translate"]


def test_identical_requests_replay_their_answers_in_the_order_seen(replay: Any) -> None:
    answers = [(503, UNREACHABLE), (503, UNREACHABLE), (200, {"result": "ok"})]
    written = write(
        [
            exchange(
                "POST",
                "/skills/flaky/invoke",
                answer,
                status=status,
                response_headers=(*JSON, ("Retry-After", "2")) if status == 503 else JSON,
            )
            for status, answer in answers
        ],
        delays=False,
    )
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    # the unified body of a protocol error is written as the error step that renders it
    assert [s.get("error", s.get("status", 200)) for s in steps] == ["ENDPOINT_UNREACHABLE", 200]
    assert steps[0]["times"] == 2
    server = replay(written.text)
    got = [requests.post(server.invoke_url("flaky"), timeout=10) for _ in range(4)]
    assert [r.status_code for r in got] == [503, 503, 200, 200]  # end: last
    assert got[0].headers["Retry-After"] == "2"
    details = got[0].json()["error"]["details"]
    assert details["endpoint_url"] == server.invoke_url("flaky")  # the provider's URL, rebased
    # a replay journals the category, so the retry audit grades the consumer as before
    assert [e.error_code for e in server.journal()][:2] == ["ENDPOINT_UNREACHABLE"] * 2


def test_an_error_body_mockskill_would_not_render_the_same_stays_a_result(replay: Any) -> None:
    odd = {"error": {"code": "ENDPOINT_UNREACHABLE", "message": "down", "extra": 1}}
    written = write([exchange("POST", "/skills/odd/invoke", odd, status=503)], delays=False)
    (step,) = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    assert step == {"status": 503, "json": odd}
    server = replay(written.text)
    assert requests.post(server.invoke_url("odd"), timeout=10).json() == odd


def test_requests_that_differed_become_cases_that_tell_them_apart(replay: Any) -> None:
    path = "/skills/checks-input/invoke"
    boom = {"input": {"text": "boom", "lang": "de"}}
    hello = {"input": {"text": "hello", "lang": "de"}}
    nolang = {"input": {"text": "hello"}}
    written = write(
        [
            exchange("POST", path, {"result": "hallo"}, body=hello),
            exchange("POST", path, UNREACHABLE, status=503, body=boom),
            exchange("POST", path, {"error": "lang"}, status=400, body=nolang),
            exchange("POST", path, {"result": "hallo again"}, body=hello),
        ],
        delays=False,
    )
    cases = yaml.safe_load(written.text)["skills"][0]["invoke"]["cases"]
    assert len(cases) == 3
    for case in cases:  # pointers into the body, not whole bodies, tell these apart
        assert set(case["when"]) == {"body"}
        assert "" not in case["when"]["body"]
    server = replay(written.text)
    url = server.invoke_url("checks-input")

    def post(body: Any) -> requests.Response:
        return requests.post(url, json=body, timeout=10)

    assert post(boom).status_code == 503
    assert post(nolang).json() == {"error": "lang"}
    # each case keeps its own sequence: the boom in between did not move hello's
    assert post(hello).json() == {"result": "hallo"}
    assert post(hello).json() == {"result": "hallo again"}
    unseen = post({"input": {"text": "new", "lang": "fr"}})
    assert unseen.status_code == 404  # nothing recorded for it: a near miss says why
    assert "near_misses" in unseen.json()["error"]["details"]


def test_query_headers_and_raw_bodies_tell_requests_apart(replay: Any) -> None:
    written = write(
        [
            exchange("GET", "/orders?id=1", {"order": 1}),
            exchange("GET", "/orders?id=2", {"order": 2}),
            exchange("GET", "/orders", {"orders": []}),
            exchange(
                "POST", "/notes", text=b"one", body=b"plain one", headers=(("X-Tenant", "a"),)
            ),
            exchange(
                "POST", "/notes", text=b"two", body=b"plain one", headers=(("X-Tenant", "b"),)
            ),
            exchange(
                "POST", "/notes", text=b"three", body=b"plain two", headers=(("X-Tenant", "b"),)
            ),
        ],
        delays=False,
    )
    routes = yaml.safe_load(written.text)["routes"]
    assert [(r["path"], r.get("method", "GET")) for r in routes] == [
        ("/orders", "GET"),
        ("/notes", "POST"),
    ]
    server = replay(written.text)
    base = server.url
    assert requests.get(f"{base}/orders?id=2", timeout=10).json() == {"order": 2}
    assert requests.get(f"{base}/orders", timeout=10).json() == {"orders": []}
    assert requests.get(f"{base}/orders?id=1", timeout=10).json() == {"order": 1}

    def note(body: bytes, tenant: str) -> str:
        return requests.post(
            f"{base}/notes", data=body, headers={"X-Tenant": tenant}, timeout=10
        ).text

    assert note(b"plain two", "b") == "three"
    assert note(b"plain one", "b") == "two"
    assert note(b"plain one", "a") == "one"


def test_measured_latency_is_the_delay_unless_left_out() -> None:
    exchanges = [exchange("POST", "/skills/slow/invoke", {"result": "ok"}, ms=1499.6)]
    kept = yaml.safe_load(write(exchanges).text)["skills"][0]["invoke"]["steps"]
    assert kept == [{"json": {"result": "ok"}, "delay": 1500}]
    dropped = write(exchanges, delays=False)
    assert yaml.safe_load(dropped.text)["skills"][0]["invoke"]["steps"] == [
        {"json": {"result": "ok"}}
    ]
    assert "# Measured latencies were left out (--no-delay)." in dropped.text


def test_a_run_of_one_answer_keeps_the_median_latency() -> None:
    exchanges = [exchange("POST", "/skills/s/invoke", {"r": 1}, ms=ms) for ms in (10, 400, 30)]
    steps = yaml.safe_load(write(exchanges).text)["skills"][0]["invoke"]["steps"]
    assert steps == [{"json": {"r": 1}, "times": 3, "delay": 30}]


BEARER = "eyJ-the-consumers-real-token"
KEY = "ak_live_0123456789"
CLIENT_SECRET = "client-secret-value"
ISSUED = "at_issued_by_the_provider"


def test_secrets_never_reach_the_file_and_replay_accepts_the_consumers(replay: Any) -> None:
    written = write(
        [
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(
                    ("Authorization", f"Bearer {BEARER}"),
                    ("Proxy-Authorization", "Basic cHJveHktc2VjcmV0"),
                    ("Cookie", "sid=cookie-value"),
                ),
                response_headers=(*JSON, ("Set-Cookie", "sid=set-cookie-value")),
            ),
            exchange(
                "POST", "/skills/keyed/invoke", {"result": "keyed"}, headers=(("X-API-Key", KEY),)
            ),
            exchange(
                "POST",
                "/login/token",
                {"access_token": ISSUED, "token_type": "Bearer", "scope": "skill:invoke"},
                body=f"grant_type=client_credentials&client_id=me&client_secret={CLIENT_SECRET}".encode(),
                headers=(("Content-Type", "application/x-www-form-urlencoded"),),
            ),
            exchange(
                "POST",
                "/skills/issued/invoke",
                {"result": "issued"},
                headers=(("Authorization", f"Bearer {ISSUED}"),),
            ),
        ],
        delays=False,
    )
    secrets = (BEARER, KEY, CLIENT_SECRET, ISSUED, "cookie-value", "set-cookie-value")
    for secret in (*secrets, "cHJveHktc2VjcmV0"):
        assert secret not in written.text
    header = [line for line in written.text.splitlines() if line.startswith("#")]
    for name in (
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "X-API-Key",
        "client_secret",
        "access_token",
    ):
        assert any(name in line for line in header), name
    assert set(written.redacted) >= {"header Authorization", "body field client_secret"}
    skills = {s["id"]: s for s in yaml.safe_load(written.text)["skills"]}
    assert skills["guarded"]["requires"] == {"type": "bearer", "scopes": ["skill:invoke"]}
    assert skills["keyed"]["requires"]["type"] == "api_key"
    server = replay(written.text)

    def invoke(skill: str, **headers: str) -> requests.Response:
        return requests.post(server.invoke_url(skill), headers=headers, timeout=10)

    assert invoke("guarded", Authorization=f"Bearer {BEARER}").json() == {"result": "ok"}
    assert invoke("guarded", Authorization="Bearer someone-else").status_code == 401
    assert invoke("guarded").status_code == 401
    assert invoke("keyed", **{"X-API-Key": KEY}).json() == {"result": "keyed"}
    assert invoke("keyed", **{"X-API-Key": "nope"}).status_code == 401
    # the token route hands out a stand-in, which the replay accepts where the real one was
    handed = requests.post(
        f"{server.url}/login/token",
        data={"grant_type": "client_credentials", "client_id": "me", "client_secret": "any"},
        timeout=10,
    ).json()["access_token"]
    assert handed != ISSUED
    assert invoke("issued", Authorization=f"Bearer {handed}").json() == {"result": "issued"}


def test_an_oauth_token_endpoint_is_mockskills_own_on_replay(replay: Any) -> None:
    written = write(
        [
            exchange(
                "POST",
                "/oauth/token",
                {"access_token": ISSUED, "token_type": "Bearer", "scope": "skill:invoke"},
                body=b"grant_type=client_credentials",
                headers=(("Authorization", "Basic bWU6Y2xpZW50LXNlY3JldC12YWx1ZQ=="),),  # me:...
            ),
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(("Authorization", f"Bearer {ISSUED}"),),
            ),
        ],
        delays=False,
    )
    assert CLIENT_SECRET not in written.text
    assert ISSUED not in written.text
    data = yaml.safe_load(written.text)
    assert [c["client_id"] for c in data["auth"]["clients"]] == ["me"]
    assert "tokens" not in data["auth"]  # the replay issues its own
    assert data["skills"][0]["requires"]["type"] == "oauth2"
    server = replay(written.text)
    issued = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=("me", CLIENT_SECRET),
        timeout=10,
    ).json()["access_token"]
    invoked = requests.post(
        server.invoke_url("guarded"), headers={"Authorization": f"Bearer {issued}"}, timeout=10
    )
    assert invoked.json() == {"result": "ok"}


def test_a_recording_that_cannot_make_a_valid_file_is_an_error_naming_why() -> None:
    bad = exchange("GET", "/status", {"up": True}, response_headers=(*JSON, ("X-Bad", "a\x01b")))
    with pytest.raises(RecordingError) as caught:
        write([bad])
    assert caught.value.problems
    assert "X-Bad" in str(caught.value)


def test_the_written_file_passes_mockskill_validate(tmp_path: Path) -> None:
    written = write(
        [
            exchange("GET", "/skills/translate", descriptor("translate")),
            exchange("GET", "/status", {"up": True}),
        ]
    )
    path = tmp_path / "recorded.yaml"
    path.write_text(written.text, encoding="utf-8")
    done = CliRunner().invoke(cli, ["validate", str(path)])
    assert done.exit_code == 0, done.output
    assert "1 scenario, 1 skill" in done.output


def test_the_header_says_when_what_and_how_much_was_dropped() -> None:
    written = write(
        [exchange("GET", "/status", {"up": True}), exchange("HEAD", "/status")],
        target="http://provider.test",
        dropped=3,
        at=0.0,
    )
    header = written.text.split("\nname:")[0]
    assert "from http://provider.test at 1970-01-01T00:00:00Z: 2 exchanges" in header
    assert "3 more exchanges were dropped" in header
    assert "1 HEAD requests" in header


def test_a_refused_invocation_is_the_replays_own_refusal_not_a_step(replay: Any) -> None:
    # The consumer first called without its token (the provider said 401), then with it.
    refused = {"error": {"code": "AUTH_REQUIRED", "message": "no token"}}
    written = write(
        [
            exchange("POST", "/skills/guarded/invoke", refused, status=401),
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(("Authorization", f"Bearer {BEARER}"),),
            ),
        ],
        delays=False,
    )
    skill = yaml.safe_load(written.text)["skills"][0]
    assert skill["invoke"] == {"steps": [{"json": {"result": "ok"}}]}
    server = replay(written.text)
    url = server.invoke_url("guarded")
    assert requests.post(url, timeout=10).status_code == 401  # mockskill's own, not a step
    answered = requests.post(url, headers={"Authorization": f"Bearer {BEARER}"}, timeout=10)
    assert answered.json() == {"result": "ok"}


def test_an_empty_recording_says_nothing_was_forwarded() -> None:
    with pytest.raises(RecordingError, match="nothing was recorded"):
        write([])


def test_a_file_over_the_loaders_size_is_an_error_not_a_file_it_would_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writer, "MAX_FILE_BYTES", 2000)  # the loader's 1 MiB, made small
    write([exchange("GET", "/small", text=b"x" * 100, response_headers=())])
    big = exchange("GET", "/big", text=b"x" * 2000, response_headers=())
    with pytest.raises(RecordingError, match="over the 2000 a scenario file may be"):
        write([big])


def test_a_descriptor_naming_another_host_points_at_the_replay_as_the_proxy_showed_it(
    replay: Any,
) -> None:
    elsewhere = {**descriptor("far"), "endpoint": {"url": "https://far.example/v2/run?x=1"}}
    written = write([exchange("GET", "/skills/far", elsewhere)], delays=False)
    data = yaml.safe_load(written.text)
    assert data["skills"][0]["raw_descriptor"]["endpoint"] == {"url": "{base_url}/v2/run?x=1"}
    server = replay(written.text)
    served = requests.get(server.skill_url("far"), timeout=10).json()
    assert served["endpoint"]["url"] == f"{server.url}/v2/run?x=1"


def test_a_secret_in_the_query_is_no_condition_and_named_in_the_header() -> None:
    written = write(
        [
            exchange("GET", "/feed?access_token=query-secret-1&page=1", {"page": 1}),
            exchange("GET", "/feed?access_token=query-secret-2&page=2", {"page": 2}),
        ],
        delays=False,
    )
    assert "query-secret" not in written.text
    assert "query parameter access_token" in written.redacted
    cases = yaml.safe_load(written.text)["routes"][0]["cases"]
    assert [c["when"] for c in cases] == [{"query": {"page": "1"}}, {"query": {"page": "2"}}]


def test_requests_no_condition_tells_apart_share_one_sequence(replay: Any) -> None:
    # 1 and 1.0 are one JSON value to a condition: the two bodies cannot be told apart.
    path = "/skills/numbers/invoke"
    written = write(
        [
            exchange("POST", path, {"n": "first"}, body=b'{"n": 1}'),
            exchange("POST", path, {"n": "second"}, body=b'{"n": 1.0}'),
        ],
        delays=False,
    )
    invoke = yaml.safe_load(written.text)["skills"][0]["invoke"]
    assert invoke == {"steps": [{"json": {"n": "first"}}, {"json": {"n": "second"}}]}


def test_an_endpoint_of_many_different_requests_plays_them_in_order() -> None:
    many = [
        exchange("POST", "/skills/ids/invoke", {"i": i}, body={"request_id": i})
        for i in range(writer.MAX_CASES + 1)
    ]
    written = write(many, delays=False)
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    assert [s["json"]["i"] for s in steps] == list(range(writer.MAX_CASES + 1))
    assert f"more than {writer.MAX_CASES} different requests" in written.text


def test_sessions_that_saw_the_same_answers_share_one_sequence(replay: Any) -> None:
    # Two consumers ran at once, each in its own session: their requests interleave.
    answers = [(503, UNREACHABLE), (503, UNREACHABLE), (200, {"result": "ok"})]
    retry = (*JSON, ("Retry-After", "2"))
    exchanges = [
        exchange(
            "POST",
            "/skills/flaky/invoke",
            answer,
            status=status,
            session=session,
            response_headers=retry if status == 503 else JSON,
        )
        for status, answer in answers
        for session in ("one", "two")
    ]
    written = write(exchanges, delays=False)
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    assert [(s.get("error"), s.get("times", 1)) for s in steps] == [
        ("ENDPOINT_UNREACHABLE", 2),
        (None, 1),
    ]
    server = replay(written.text)
    for session in ("one", "two", "a-new-one"):  # each session replays the run afresh
        headers = {"Mockskill-Session": session}
        got = [
            requests.post(server.invoke_url("flaky"), headers=headers, timeout=10).status_code
            for _ in range(3)
        ]
        assert got == [503, 503, 200], session


def test_sessions_that_saw_different_answers_are_told_apart_by_session(replay: Any) -> None:
    exchanges = [
        exchange("GET", "/quota", {"left": 10}, session="default"),
        exchange("GET", "/quota", {"left": 0}, status=429, session="spent"),
        exchange("GET", "/quota", {"left": 9}, session="default"),
    ]
    written = write(exchanges, delays=False)
    cases = yaml.safe_load(written.text)["routes"][0]["cases"]
    whens = [c["when"]["headers"]["mockskill-session"] for c in cases]
    assert sorted(map(str, whens)) == sorted(["spent", str({"absent": True})])
    server = replay(written.text)
    url = f"{server.url}/quota"
    spent = requests.get(url, headers={"Mockskill-Session": "spent"}, timeout=10)
    assert (spent.status_code, spent.json()) == (429, {"left": 0})
    assert [requests.get(url, timeout=10).json()["left"] for _ in range(2)] == [10, 9]
    # a session the recording never saw gets the first session's answers
    other = {"Mockskill-Session": "another-run"}
    assert requests.get(url, headers=other, timeout=10).json() == {"left": 10}


def test_only_the_providers_own_urls_are_rebased() -> None:
    body = {
        "self": f"{UP}/orders/1",
        "longer_port": f"{UP}0/orders/1",  # http://127.0.0.1:90: another server
        "proxy": "http://127.0.0.1:8080/x",  # the consumer's Host: the proxy it reached
        "other": "http://127.0.0.1:80801/x",
    }
    written = write([exchange("GET", "/orders/1", body)], delays=False)
    step = yaml.safe_load(written.text)["routes"][0]["steps"][0]
    assert step["json"] == {
        "self": "{base_url}/orders/1",
        "longer_port": f"{UP}0/orders/1",
        "proxy": "{base_url}/x",
        "other": "http://127.0.0.1:80801/x",
    }
