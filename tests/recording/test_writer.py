"""The writer: recorded exchanges in, a scenario file out that a replay serves the same.

The exchanges are built as a proxy hands them over (the wire's values,
secrets included, ``recording_helpers``); each written file is loaded and
served by a real :class:`~mockskill.Server`, and real requests check what a
replay answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from click.testing import CliRunner
from recording_helpers import JSON, UNREACHABLE, UP, descriptor, exchange, replay

from mockskill.cli import cli
from mockskill.recording import RecordingError, write, writer

__all__ = ["replay"]  # the fixture, used by name


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


@pytest.mark.parametrize(
    ("content_type", "body", "key"),
    [
        ("text/plain", "héllo\r\n".encode(), "text"),
        ("application/xml", b"<a/>", "text"),
        ("", b"plain", "text"),
        ("application/octet-stream", b"ascii bytes", "body_base64"),
        ("image/svg+xml", b"<svg/>", "text"),
        ("text/plain; charset=iso-8859-1", "héllo".encode("latin-1"), "body_base64"),
        ("image/png", b"\x89PNG\r\n\x1a\n", "body_base64"),
    ],
)
def test_text_answers_are_text_and_others_their_exact_bytes(
    replay: Any, content_type: str, body: bytes, key: str
) -> None:
    headers = (("Content-Type", content_type),) if content_type else ()
    written = write([exchange("GET", "/thing", text=body, response_headers=headers)], delays=False)
    (step,) = yaml.safe_load(written.text)["routes"][0]["steps"]
    assert key in step
    served = requests.get(f"{replay(written.text).url}/thing", timeout=10)
    assert served.content == body
    if content_type:
        assert served.headers["Content-Type"] == content_type


def test_an_access_token_echoed_elsewhere_becomes_its_stand_in_there_too() -> None:
    token = "tok-abcdef-0123456789"
    written = write(
        [
            exchange("POST", "/login", {"access_token": token, "scope": "skill:invoke"}),
            exchange(
                "GET",
                "/me",
                text=f"you are {token}".encode(),
                response_headers=(("Content-Type", "text/plain"), ("X-Seen", token)),
            ),
        ],
        delays=False,
    )
    assert token not in written.text
    me = yaml.safe_load(written.text)["routes"][1]["steps"][0]
    assert me["text"] == "you are recorded-token-1"
    assert me["headers"]["X-Seen"] == "recorded-token-1"
    assert written.echoed == 2


def test_a_secret_too_short_to_search_for_is_said() -> None:
    written = write(
        [exchange("GET", "/x", {"echo": "abc"}, headers=(("X-API-Key", "abc"),))], delays=False
    )
    assert any("shorter than 4 characters" in note for note in written.notes)
    assert "shorter than 4 characters" in written.text


def test_an_answer_that_echoes_its_request_replays_each_new_requests_values(replay: Any) -> None:
    written = write(
        [
            exchange(
                "POST",
                "/skills/echo/invoke",
                {"result": {"text": "hello there", "id": "req-42", "lang": "en", "n": 7}},
                body={"input": {"text": "hello there", "lang": "en", "n": 7}, "id": "req-42"},
                headers=(("X-Request-Id", "abc-123"),),
                response_headers=(*JSON, ("X-Request-Id", "abc-123"), ("X-Note", "a {{b}}")),
            )
        ],
        delays=False,
    )
    (skill,) = yaml.safe_load(written.text)["skills"]
    (step,) = skill["invoke"]["steps"]
    assert step["json"]["result"] == {
        "text": "{{request.body/input/text}}",
        "id": "{{request.body/id}}",
        "lang": "en",  # too short to be told from a coincidence
        "n": 7,
    }
    assert step["headers"] == {
        "X-Request-Id": "{{request.header.X-Request-Id}}",
        "X-Note": "a \\{{b}}",
    }
    server = replay(written.text)
    answer = requests.post(
        server.invoke_url("echo"),
        json={"input": {"text": "other words", "lang": "en", "n": 7}, "id": "req-43"},
        headers={"X-Request-Id": "xyz-9"},
        timeout=10,
    )
    assert answer.json()["result"]["text"] == "other words"
    assert answer.json()["result"]["id"] == "req-43"
    assert answer.headers["X-Request-Id"] == "xyz-9"
    assert answer.headers["X-Note"] == "a {{b}}"  # a provider's own braces, escaped, not read


def test_a_provider_answer_holding_braces_is_escaped_not_read_as_a_template(replay: Any) -> None:
    odd = {"template": "Hi {{name}}", "path": "C:\\{{x}}"}
    written = write([exchange("POST", "/skills/odd/invoke", odd)], delays=False)
    server = replay(written.text)
    assert requests.post(server.invoke_url("odd"), timeout=10).json() == odd
