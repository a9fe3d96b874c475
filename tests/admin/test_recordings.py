"""``/__admin/recordings``: start, status and stop over HTTP, on a real upstream."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from mockskill import Server, load_text
from mockskill.engine.exchange import Exchange
from mockskill.scenario.model import ScenarioSet

UPSTREAM = """
name: provider
skills:
  - id: echo
    invoke: [{json: {n: 1}}, {json: {n: 2}}]
routes:
  - {path: /status, steps: [{json: {up: true}}]}
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    with Server(UPSTREAM) as server:
        yield server


@pytest.fixture
def proxy() -> Iterator[Server]:
    with Server(ScenarioSet()) as server:
        yield server


def admin(server: Server, what: str, **body: object) -> requests.Response:
    method = "GET" if what == "status" else "POST"
    url = f"{server.url}/__admin/recordings/{what}"
    return requests.request(method, url, json=body or None, timeout=10)


def test_start_status_stop_answers_the_file(upstream: Server, proxy: Server) -> None:
    assert admin(proxy, "status").json()["recording"] is False
    started = admin(proxy, "start", target=upstream.url, delays=False)
    assert started.status_code == 201
    assert started.json()["target"] == upstream.url
    session = {"Mockskill-Session": "admin-start-stop"}
    for _ in range(2):
        requests.post(proxy.invoke_url("echo"), headers=session, timeout=10)
    status = admin(proxy, "status").json()
    assert (status["recording"], status["count"], status["dropped"]) == (True, 2, 0)
    assert status["since"] > 0
    stopped = admin(proxy, "stop")
    assert stopped.status_code == 200
    assert stopped.headers["Content-Type"].startswith("application/yaml")
    load_text(stopped.text, "recorded.yaml")
    steps = yaml.safe_load(stopped.text)["skills"][0]["invoke"]["steps"]
    assert steps == [{"json": {"n": 1}}, {"json": {"n": 2}}]
    # stopped: nothing forwards any more (the recording's proxy scenario is gone)
    assert requests.post(proxy.invoke_url("echo"), timeout=10).status_code == 404
    assert admin(proxy, "status").json()["recording"] is False


def test_stop_writes_to_out_under_the_working_directory(
    upstream: Server, proxy: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert admin(proxy, "start", target=upstream.url, out="rec/status.yaml").status_code == 400
    (tmp_path / "rec").mkdir()
    assert admin(proxy, "start", target=upstream.url, out="rec/status.yaml").status_code == 201
    requests.get(f"{proxy.url}/status", timeout=10)
    stopped = admin(proxy, "stop")
    assert stopped.json() == {
        "out": "rec/status.yaml",
        "count": 1,
        "dropped": 0,
        "redacted": [],
        "echoed": 0,
        "notes": [],
    }
    written = (tmp_path / "rec" / "status.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(written)["routes"][0]["path"] == "/status"


@pytest.mark.parametrize(
    "body",
    [
        {"target": "ftp://nowhere"},
        {"target": "http://127.0.0.1:9", "out": "/etc/recorded.yaml"},
        {"target": "http://127.0.0.1:9", "out": "../recorded.yaml"},
        {"target": "http://127.0.0.1:9", "out": "recorded.txt"},
        {"target": "http://127.0.0.1:9", "name": "not a name"},
        {"target": "http://127.0.0.1:9", "delays": "no"},
        {"target": "http://127.0.0.1:9", "tagret": "x"},
        {},  # nothing here forwards anywhere
    ],
)
def test_bad_starts_are_refused_and_start_nothing(proxy: Server, body: dict[str, object]) -> None:
    refused = requests.post(f"{proxy.url}/__admin/recordings/start", json=body, timeout=10)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"
    assert admin(proxy, "status").json()["recording"] is False


def test_one_recording_at_a_time_and_stop_needs_one(upstream: Server, proxy: Server) -> None:
    assert admin(proxy, "stop").status_code == 409
    assert admin(proxy, "start", target=upstream.url).status_code == 201
    again = admin(proxy, "start", target=upstream.url)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "MOCKSKILL_RECORDING_CONFLICT"


def test_a_recording_that_makes_no_valid_file_is_kept_and_says_why(
    upstream: Server, proxy: Server
) -> None:
    admin(proxy, "start", target=upstream.url)
    requests.get(f"{proxy.url}/status", timeout=10)
    recording = proxy.recording.current
    assert recording is not None
    recording.add(  # an answer header no step can hold (a control character)
        Exchange(
            0.0,
            "default",
            "GET",
            "/odd",
            (),
            b"",
            upstream.url,
            200,
            (("X-Odd", "a\x01b"),),
            b"",
            False,
            1.0,
        )
    )
    refused = admin(proxy, "stop")
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "MOCKSKILL_RECORDING_INVALID"
    assert error["details"]["kept"] is True
    assert any("X-Odd" in p["path"] or "X-Odd" in str(p) for p in error["details"]["problems"])
    status = admin(proxy, "status").json()
    assert (status["recording"], status["count"], status.get("failed")) == (False, 2, True)
    assert len(proxy.recording.failed.exchanges()) == 2  # type: ignore[union-attr]


def test_without_a_target_what_the_served_proxies_forward_is_recorded(upstream: Server) -> None:
    scenario = f"""
name: front
skills:
  - {{id: echo, proxy: {upstream.url}}}
  - {{id: scripted, invoke: {{json: {{here: true}}}}}}
"""
    with Server(scenario) as front:
        assert admin(front, "start").status_code == 201
        session = {"Mockskill-Session": "admin-no-target"}
        requests.post(front.invoke_url("echo"), headers=session, timeout=10)
        requests.post(front.invoke_url("scripted"), headers=session, timeout=10)
        text = admin(front, "stop").text
        # the server's own scenarios are untouched by the recording
        assert front.scenario_names == ["front"]
    skills = yaml.safe_load(text)["skills"]
    assert [s["id"] for s in skills] == ["echo"]  # only what reached the provider
    (step,) = skills[0]["invoke"]["steps"]
    assert step["json"] == {"n": 1}
    assert set(step) <= {"json", "delay"}  # the measured latency kept, by default


def test_out_through_a_symlinked_folder_out_of_the_working_directory_is_refused(
    upstream: Server, proxy: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    (here / "rec").symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.chdir(here)
    refused = admin(proxy, "start", target=upstream.url, out="rec/out.yaml")
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"
    assert "leads out of the working directory" in refused.json()["error"]["message"]
    assert admin(proxy, "status").json()["recording"] is False
    # nor at stop: a start without out, then a stop that names it
    assert admin(proxy, "start", target=upstream.url).status_code == 201
    requests.get(f"{proxy.url}/status", timeout=10)
    assert admin(proxy, "stop", out="rec/out.yaml").status_code == 400
    assert list(elsewhere.iterdir()) == []
    assert admin(proxy, "stop", out="out.yaml").status_code == 200  # kept: it tries again
    assert (here / "out.yaml").is_file()


def test_an_existing_out_is_replaced_only_with_force(
    upstream: Server, proxy: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine.yaml"
    mine.write_text("# my own file\n", encoding="utf-8")
    refused = admin(proxy, "start", target=upstream.url, out="mine.yaml")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "MOCKSKILL_RECORDING_EXISTS"
    assert refused.json()["error"]["details"]["out"] == "mine.yaml"
    assert admin(proxy, "status").json()["recording"] is False
    # a file that appears while recording is not replaced either, and nothing is lost
    assert admin(proxy, "start", target=upstream.url, out="late.yaml").status_code == 201
    requests.get(f"{proxy.url}/status", timeout=10)
    (tmp_path / "late.yaml").write_text("# appeared meanwhile\n", encoding="utf-8")
    late = admin(proxy, "stop")
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "MOCKSKILL_RECORDING_EXISTS"
    assert (tmp_path / "late.yaml").read_text(encoding="utf-8") == "# appeared meanwhile\n"
    assert admin(proxy, "status").json()["failed"] is True
    forced = admin(proxy, "stop", out="mine.yaml", force=True)
    assert forced.status_code == 200, forced.text
    assert "routes" in yaml.safe_load(mine.read_text(encoding="utf-8"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.yaml", "mine.yaml"]


def test_a_recorded_file_has_the_usual_permissions(
    upstream: Server, proxy: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = os.umask(0o022)
    try:
        assert admin(proxy, "start", target=upstream.url, out="shared.yaml").status_code == 201
        requests.get(f"{proxy.url}/status", timeout=10)
        assert admin(proxy, "stop").status_code == 200
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "shared.yaml").stat().st_mode) == 0o644
