"""Record a real provider through mockskill, replay the file: the consumer sees the same.

The upstreams are real servers started here — a mockskill Server on the
bundled scenarios, and a small plain Flask provider that wants a bearer
token — the consumers real clients (requests, httpx). A run is recorded
through a recording proxy (``Server.recording``, ``mockskill record``), the
file is checked by the loader and served, and the same run replayed gets
the same status and body for every request (the servers' own URLs aside:
each names itself).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
import requests
import yaml
from click.testing import CliRunner
from flask import Flask, jsonify
from flask import request as flask_request
from werkzeug.serving import make_server

from mockskill import Server, load_text
from mockskill.cli import cli
from mockskill.scenario.model import ScenarioSet

SESSION = {"Mockskill-Session": "recorded-run"}

# A scripted consumer run over the bundled scenarios: (method, path, body, headers).
RUN: list[tuple[str, str, Any, dict[str, str]]] = [
    ("GET", "/skills/translate", None, {}),
    ("POST", "/skills/translate/invoke", {"input": {"text": "Hello"}}, {}),
    ("POST", "/skills/flaky/invoke", None, {}),
    ("POST", "/skills/flaky/invoke", None, {}),
    ("POST", "/skills/flaky/invoke", None, {}),
    ("POST", "/skills/flaky/invoke", None, {}),
    ("POST", "/skills/checks-input/invoke", {"input": {"text": "boom", "lang": "de"}}, {}),
    ("POST", "/skills/checks-input/invoke", {"input": {"text": "hello"}}, {}),
    ("POST", "/skills/checks-input/invoke", {"input": {"text": "hello", "lang": "de"}}, {}),
    ("GET", "/skills/keyed", None, {}),
    ("POST", "/skills/keyed/invoke", None, {}),
    ("POST", "/skills/keyed/invoke", None, {"X-API-Key": "demo-key"}),
    ("GET", "/skills/guarded", None, {}),
    ("POST", "/skills/guarded/invoke", None, {}),
    ("POST", "/skills/guarded/invoke", None, {"Authorization": "Bearer demo-token"}),
    ("POST", "/skills/admin/invoke", None, {"Authorization": "Bearer demo-token"}),
    ("GET", "/skills/next-gen", None, {}),
    ("POST", "/skills/next-gen/invoke", None, {"Skill-Protocol-Version": "1.4.0"}),
    ("POST", "/skills/next-gen/invoke", None, {"Skill-Protocol-Version": "2.0.0"}),
    ("GET", "/skills/invalid-descriptor", None, {}),
    ("POST", "/skills/permission-denied/invoke", None, {}),
    ("POST", "/skills/bad-gateway/invoke", None, {}),
    ("POST", "/skills/execution-timeout-408/invoke", None, {}),
    ("GET", "/skills/skill-not-found", None, {}),
    ("GET", "/status", None, {}),
]


def drive(base: str, client: Any) -> list[tuple[int, Any]]:
    """The run against *base*: each answer's status and body (JSON, or text)."""
    answers = []
    for method, path, body, headers in RUN:
        sent = {**SESSION, **headers}
        response = client.request(method, base + path, json=body, headers=sent, timeout=10)
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = response.text
        answers.append((response.status_code, parsed))
    return answers


def rebased(answers: list[tuple[int, Any]], *bases: str) -> list[tuple[int, Any]]:
    """*answers* with each server's own URL written as {base}."""
    text = json.dumps(answers)
    for base in bases:
        text = text.replace(base, "{base}")
    return [tuple(pair) for pair in json.loads(text)]  # type: ignore[misc]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with Server() as server:  # the bundled scenarios: the "real" provider here
        yield server


def test_the_bundled_scenarios_recorded_and_replayed_answer_the_same_run(
    upstream: Server,
) -> None:
    with Server(ScenarioSet()) as proxy:
        proxy.recording.start(upstream.url, delays=False)
        with requests.Session() as client:
            recorded = drive(proxy.url, client)
        assert proxy.recording.status()["count"] == len(RUN)
        stopped = proxy.recording.stop()
        proxy_url = proxy.url
    text = stopped.written.text
    load_text(text, "recorded.yaml")  # what mockskill validate checks
    for secret in ("demo-key", "demo-token"):
        assert secret not in text
    with Server(text) as replay, httpx.Client() as client:
        replayed = rebased(drive(replay.url, client), replay.url)
        listed = {s["id"] for s in client.get(f"{replay.url}/skills").json()["skills"]}
    for (method, path, _, _), got, was in zip(
        RUN, replayed, rebased(recorded, proxy_url, upstream.url), strict=True
    ):
        assert got == was, f"{method} {path}"
    assert listed == {path.split("/")[2] for _, path, _, _ in RUN if path.startswith("/skills/")}
    # the answers are the provider's, not a replay's defaults: the run met real failures
    assert [status for status, _ in recorded].count(503) == 2
    assert (401, 200) in zip([s for s, _ in recorded], [s for s, _ in recorded][1:], strict=False)


def test_mockskill_record_writes_the_file_on_sigterm(upstream: Server, tmp_path: Path) -> None:
    out = tmp_path / "provider.yaml"
    command = [sys.executable, "-m", "mockskill", "record", "--target", upstream.url]
    command += ["--port", "0", "--out", str(out), "--no-delay", "--quiet", "--grace", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("mockskill "), lines
        assert upstream.url in lines[0], lines
        base = lines[1].split("serving at ")[1].split(": point")[0]
        assert str(out) in lines[2]
        session = {"Mockskill-Session": "cli-run"}
        with httpx.Client() as client:
            first = client.post(f"{base}/skills/flaky/invoke", headers=session)
            second = client.get(f"{base}/status", headers=session)
        assert (first.status_code, second.status_code) == (503, 200)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert f"wrote {out}: 2 exchanges" in err
    validated = CliRunner().invoke(cli, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    with Server(str(out)) as replay:
        assert requests.post(replay.invoke_url("flaky"), timeout=10).status_code == 503
        assert requests.get(f"{replay.url}/status", timeout=10).json() == {"status": "up"}


def test_a_bad_target_is_a_mistyped_command_line(tmp_path: Path) -> None:
    out = str(tmp_path / "x.yaml")
    done = CliRunner().invoke(cli, ["record", "--target", "ftp://x", "--port", "0", "--out", out])
    assert done.exit_code == 2
    assert "--target" in done.output
    assert "not a provider's URL" in done.output


def test_record_does_not_replace_an_existing_out_without_force(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("# my own file\n", encoding="utf-8")
    command = ["record", "--target", "http://127.0.0.1:9", "--port", "0", "--out", str(out)]
    done = CliRunner().invoke(cli, command)
    assert done.exit_code == 2, done.output
    assert "--out" in done.output
    assert "exists; force replaces it" in done.output
    assert out.read_text(encoding="utf-8") == "# my own file\n"


def test_record_does_not_follow_a_symlinked_folder_out_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "rec").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "here")
    command = ["record", "--target", "http://127.0.0.1:9", "--port", "0", "--out", "rec/x.yaml"]
    done = CliRunner().invoke(cli, command)
    assert done.exit_code == 2, done.output
    assert "leads out of the working directory" in done.output


TOKEN = "flask-provider-secret-token-0123456789"


def flask_provider() -> Flask:
    """A plain provider: a descriptor, an invoke that wants a bearer token, a free route."""
    app = Flask("provider")

    @app.get("/skills/weather")
    def weather_descriptor() -> Any:
        base = flask_request.host_url.rstrip("/")
        return jsonify(
            protocol_version="1.0.0",
            id="weather",
            name="Weather",
            version="1.0.0",
            capability_type="api",
            endpoint={"url": f"{base}/skills/weather/invoke", "method": "POST"},
            auth={"type": "bearer"},
        )

    @app.post("/skills/weather/invoke")
    def weather() -> Any:
        if flask_request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return jsonify(error="unauthorized"), 401
        city = (flask_request.get_json(silent=True) or {}).get("city", "nowhere")
        return jsonify(result={"city": city, "forecast": "sun" if city == "Rome" else "rain"})

    @app.get("/v1/cities")
    def cities() -> Any:
        return jsonify(cities=["Rome", "Oslo"], page=flask_request.args.get("page", "1"))

    return app


@pytest.fixture(scope="module")
def flask_upstream() -> Iterator[str]:
    server = make_server("127.0.0.1", 0, flask_provider(), threaded=True)
    thread = threading.Thread(  # (a short poll: shutdown() returns soon)
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


def test_a_flask_provider_with_a_bearer_token_replays_without_the_token_in_the_file(
    flask_upstream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    run = [
        ("GET", "/skills/weather", None, {}),
        ("POST", "/skills/weather/invoke", {"city": "Rome"}, auth),
        ("POST", "/skills/weather/invoke", {"city": "Oslo"}, auth),
        ("GET", "/v1/cities?page=2", None, {}),
    ]
    monkeypatch.chdir(tmp_path)
    with Server(ScenarioSet()) as proxy:
        started = requests.post(
            f"{proxy.url}/__admin/recordings/start",
            json={"target": flask_upstream, "out": "weather.yaml"},
            timeout=10,
        )
        assert started.status_code == 201, started.text
        recorded = [
            requests.request(m, proxy.url + p, json=b, headers=h, timeout=10).json()
            for m, p, b, h in run
        ]
        stopped = requests.post(f"{proxy.url}/__admin/recordings/stop", timeout=10)
        assert stopped.status_code == 200, stopped.text
        assert "header Authorization" in stopped.json()["redacted"]
        proxy_url = proxy.url
    text = (tmp_path / "weather.yaml").read_text(encoding="utf-8")
    assert TOKEN not in text
    assert "# Redacted" in text
    skill = yaml.safe_load(text)["skills"][0]
    assert skill["requires"]["type"] == "bearer"
    with Server(text) as replay:
        replayed = [
            requests.request(m, replay.url + p, json=b, headers=h, timeout=10).json()
            for m, p, b, h in run
        ]
        refused = requests.post(replay.invoke_url("weather"), json={"city": "Rome"}, timeout=10)
        wrong = requests.post(
            replay.invoke_url("weather"),
            json={"city": "Rome"},
            headers={"Authorization": "Bearer not-the-token"},
            timeout=10,
        )
        assert replayed[0]["endpoint"]["url"] == replay.invoke_url("weather")
        replayed = rebased(replayed, replay.url)
    assert replayed == rebased(recorded, proxy_url, flask_upstream)
    assert (refused.status_code, wrong.status_code) == (401, 401)
    assert os.listdir(tmp_path) == ["weather.yaml"]  # written whole: no temporary file left


# Answers a provider sends as bytes: compressed (each coding), and binary.
PLAIN = json.dumps({"forecast": ["sun", "rain"] * 20}).encode()
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) + b"{base_url}\xff\xfe"
OPAQUE = bytes((i * 73 + 11) % 256 for i in range(64))  # a stand-in for brotli's bytes
ENCODED: dict[str, tuple[bytes, dict[str, str]]] = {
    "/gzip": (
        gzip.compress(PLAIN, mtime=0),
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    ),
    "/deflate": (
        zlib.compress(PLAIN),
        {"Content-Type": "application/json", "Content-Encoding": "deflate"},
    ),
    "/br": (OPAQUE, {"Content-Type": "text/plain; charset=utf-8", "Content-Encoding": "br"}),
    "/logo.png": (PNG, {"Content-Type": "image/png"}),
    "/blob": (OPAQUE, {"Content-Type": "application/octet-stream"}),
}


@pytest.fixture(scope="module")
def bytes_upstream() -> Iterator[str]:
    """A provider whose answers are the bytes of :data:`ENCODED`, sent as they are."""
    app = Flask("bytes")

    @app.get("/<path:name>")
    def answer(name: str) -> Any:
        body, headers = ENCODED[f"/{name}"]
        return app.response_class(body, headers=headers)

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(  # (a short poll: shutdown() returns soon)
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


def raw_get(base: str, path: str) -> tuple[dict[str, str], bytes]:
    """GET *path* over a plain socket: the answer's headers (lower-cased) and its exact body."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate, br\r\n"
        sock.sendall(f"{request}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert "transfer-encoding" not in headers, head
    assert int(headers["content-length"]) == len(body)
    return headers, body


def test_compressed_and_binary_answers_replay_byte_for_byte(bytes_upstream: str) -> None:
    with Server(ScenarioSet()) as proxy:
        proxy.recording.start(bytes_upstream, delays=False)
        recorded = {path: requests.get(proxy.url + path, timeout=10) for path in ENCODED}
        text = proxy.recording.stop().written.text
    assert "Note:" not in text  # nothing had to be changed to be kept
    with Server(text) as replay:
        for path, (sent, headers) in ENCODED.items():
            got = requests.get(replay.url + path, timeout=10)
            assert got.content == recorded[path].content, path  # decoded by requests alike
            raw_headers, raw_body = raw_get(replay.url, path)
            assert raw_body == sent, path
            assert raw_headers["content-type"] == headers["Content-Type"], path
            assert raw_headers.get("content-encoding") == headers.get("Content-Encoding"), path
    assert recorded["/gzip"].json() == json.loads(PLAIN)


# Secrets a consumer sends, each in its own place; an echoing provider puts them everywhere.
SECRETS = {
    "bearer": "bearer-secret-0123456789",
    "api_key": "api-key-secret-0123456789",
    "cookie": "cookie-secret-0123456789",
    "query": "query-secret/0123456789+",  # percent-encoded on the way
    "password": "password-secret-0123456789",
    "client_secret": "client-secret-0123456789",
}


@pytest.fixture(scope="module")
def echoing_upstream() -> Iterator[str]:
    """A provider that echoes what it was sent: in JSON, text, bytes, gzip, headers, Location."""
    app = Flask("echo")

    @app.route("/<path:name>", methods=["GET", "POST"])
    def echo(name: str) -> Any:
        seen = {
            "headers": dict(flask_request.headers),
            "query": flask_request.query_string.decode(),
            "body": flask_request.get_data().decode(),
        }
        everything = json.dumps(seen)
        headers = {
            "X-Echo": flask_request.headers.get("Authorization", ""),
            "Location": f"/next?{flask_request.query_string.decode()}",
            "Set-Cookie": f"sid={SECRETS['cookie']}; Path=/",
        }
        if name == "json":
            return jsonify(echo=seen, note=f"your key was {SECRETS['api_key']}"), 200, headers
        if name == "text":
            return app.response_class(everything, mimetype="text/plain", headers=headers)
        if name == "bytes":
            body = b"\x89PNG\xff\x00" + everything.encode() + b"\xfe"
            return app.response_class(body, mimetype="image/png", headers=headers)
        packed = gzip.compress(everything.encode(), mtime=0)
        return app.response_class(
            packed, mimetype="text/plain", headers={**headers, "Content-Encoding": "gzip"}
        )

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(  # (a short poll: shutdown() returns soon)
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


def test_a_recording_holds_no_secret_a_provider_echoed_anywhere(
    echoing_upstream: str, tmp_path: Path
) -> None:
    headers = {
        "Authorization": f"Bearer {SECRETS['bearer']}",
        "X-API-Key": SECRETS["api_key"],
        "Cookie": f"sid={SECRETS['cookie']}; theme=dark",
    }
    params = {"api_key": SECRETS["query"], "page": "2"}
    body = {"user": "ann", "password": SECRETS["password"]}
    form = {"client_id": "app", "client_secret": SECRETS["client_secret"]}
    with Server(ScenarioSet()) as proxy:
        proxy.recording.start(echoing_upstream, delays=False)
        for name in ("json", "text", "bytes", "gzip"):
            url = f"{proxy.url}/{name}"
            got = requests.post(url, params=params, headers=headers, json=body, timeout=10)
            assert got.status_code == 200
            assert SECRETS["bearer"] in got.text  # the provider did echo them
            requests.post(url, data=form, headers=headers, timeout=10)
        written = proxy.recording.stop().written
    text = written.text
    data = yaml.safe_load(text)
    found = [text]
    for route in data["routes"]:
        for case in route.get("cases", [route]):
            for step in case["steps"]:
                if "body_base64" in step:
                    raw = base64.b64decode(step["body_base64"])
                    found.append(raw.decode("latin-1"))
                    if step.get("headers", {}).get("Content-Encoding") == "gzip":
                        found.append(gzip.decompress(raw).decode())
    for where in found:
        for kind, secret in SECRETS.items():
            for form_ in (secret, quote(secret, safe=""), quote_plus(secret)):
                assert form_ not in where, (kind, where)
    assert "(redacted)" in text
    assert "Secret values echoed elsewhere" in text  # the header says so, truthfully
    assert written.echoed > 0
    assert any("compressed anew" in note for note in written.notes)
    load_text(text, "echoed.yaml")


def test_mockskill_record_says_on_the_console_what_it_scrubbed_and_could_not_keep(
    echoing_upstream: str, tmp_path: Path
) -> None:
    out = tmp_path / "echoed.yaml"
    command = [sys.executable, "-m", "mockskill", "record", "--target", echoing_upstream]
    command += ["--port", "0", "--out", str(out), "--no-delay", "--quiet", "--grace", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        base = lines[1].split("serving at ")[1].split(": point")[0]
        auth = {"Authorization": f"Bearer {SECRETS['bearer']}"}
        assert requests.get(f"{base}/gzip", headers=auth, timeout=10).status_code == 200
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "secret values echoed in answers replaced" in err
    assert "mockskill: note: a compressed answer held a secret" in err
    assert (
        SECRETS["bearer"]
        not in gzip.decompress(
            base64.b64decode(
                yaml.safe_load(out.read_text())["routes"][0]["steps"][0]["body_base64"]
            )
        ).decode()
    )


def test_exchanges_kept_from_a_failed_recording_are_for_the_user_alone(
    upstream: Server, tmp_path: Path
) -> None:
    out = tmp_path / "empty.yaml"
    command = [sys.executable, "-m", "mockskill", "record", "--target", upstream.url]
    command += ["--port", "0", "--out", str(out), "--quiet", "--grace", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        base = lines[1].split("serving at ")[1].split(": point")[0]
        # serving (its signals handled), and nothing forwarded: admin requests are not
        assert requests.get(f"{base}/__admin/recordings/status", timeout=10).json()["count"] == 0
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, err
    assert "nothing was recorded" in err
    kept = tmp_path / "empty.yaml.exchanges.json"
    assert json.loads(kept.read_text(encoding="utf-8")) == []
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert not out.exists()
