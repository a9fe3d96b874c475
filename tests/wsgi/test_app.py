"""The app: /__admin goes to Flask, everything else to the engine, errors in one shape."""

from __future__ import annotations

import pytest
from werkzeug.test import Client

from mockskill import create_app, load_text
from mockskill.engine.engine import Engine
from mockskill.engine.state import State


@pytest.fixture
def client() -> Client:
    scenarios = load_text("skills: [{id: echo}]\nroutes: [{path: /__adminx, steps: [{json: 1}]}]")
    return Client(create_app(Engine(scenarios, State())))


def test_the_skill_surface_is_answered_by_the_engine(client: Client) -> None:
    response = client.post("/skills/echo/invoke")
    assert response.status_code == 200
    assert response.json == {"skill": "echo", "result": "ok"}


def test_admin_paths_go_to_flask_and_lookalikes_to_the_engine(client: Client) -> None:
    assert client.get("/__admin/health").json["status"] == "ok"
    assert client.get("/__adminx").json == 1  # a free route, not the admin blueprint


def test_an_unknown_admin_path_is_a_unified_error(client: Client) -> None:
    response = client.get("/__admin/nothing")
    assert response.status_code == 404
    assert response.json["error"]["code"] == "MOCKSKILL_HTTP_404"


def test_a_failure_inside_the_engine_is_a_unified_500(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: Engine, request: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Engine, "decide", broken)
    response = client.post("/skills/echo/invoke")
    assert response.status_code == 500
    error = response.json["error"]
    assert error["code"] == "MOCKSKILL_INTERNAL_ERROR"
    assert "RuntimeError: boom" in error["message"]
    assert "mockskill failed while answering POST /skills/echo/invoke" in caplog.text


def test_an_app_made_without_an_engine_serves_nothing_but_answers(client: Client) -> None:
    bare = Client(create_app())
    response = bare.get("/skills")
    assert response.json == {"skills": []}


def test_scenario_states_hold_on_a_wsgi_server_too() -> None:
    scenarios = load_text(
        "name: orders\n"
        "routes:\n"
        "  - {path: /orders, method: POST, steps: [{json: placed, set_state: placed}]}\n"
        "  - path: /orders/1\n"
        "    cases: [{state: placed, json: found}]\n"
        "    steps: [{status: 404, json: missing}]\n"
    )
    client = Client(create_app(Engine(scenarios, State())))
    assert client.get("/orders/1").status_code == 404
    assert client.post("/orders").json == "placed"
    assert client.get("/orders/1").json == "found"
    assert client.get("/orders/1", headers={"Mockskill-Session": "other"}).status_code == 404


def test_a_named_case_is_picked_by_its_header_on_a_wsgi_server_too() -> None:
    scenarios = load_text(
        "name: orders\n"
        "routes:\n"
        "  - path: /orders/1\n"
        "    cases: [{name: gone, when: {query: {x: never}}, status: 410, json: gone}]\n"
        "    steps: [{json: found}]\n"
    )
    client = Client(create_app(Engine(scenarios, State())))
    assert client.get("/orders/1").json == "found"
    assert client.get("/orders/1", headers={"Mockskill-Case": "gone"}).status_code == 410
    refused = client.get("/orders/1", headers={"Mockskill-Case": "gon"})
    assert refused.status_code == 400
    assert refused.json["error"]["details"]["valid_cases"] == ["gone"]


def test_a_wsgi_server_replays_an_idempotency_keys_first_answer_too() -> None:
    text = """
skills:
  - id: pay
    idempotency_key: true
    invoke:
      - {json: {payment: 1}, after: {error: EXECUTION_TIMEOUT}}
      - {json: {payment: 2}}
"""
    state = State()
    client = Client(create_app(Engine(load_text(text), state)))
    key = {"Idempotency-Key": "k-1"}
    answers = [client.post("/skills/pay/invoke", json=b, headers=key) for b in ({}, {}, {"a": 1})]
    assert [a.status_code for a in answers] == [504, 200, 422]
    assert answers[1].json == {"payment": 1}
    assert answers[1].headers["Idempotent-Replayed"] == "true"
    assert [(e.executed, e.replayed) for e in state.journal()] == [
        (True, False),
        (False, True),
        (False, False),
    ]


def test_the_journal_names_the_connection_the_wsgi_server_says_the_request_came_on() -> None:
    state = State()
    client = Client(create_app(Engine(load_text("skills: [{id: echo}]"), state)))
    for address, port in (("10.0.0.7", "50123"), ("::1", "50124")):
        remote = {"REMOTE_ADDR": address, "REMOTE_PORT": port}
        client.post("/skills/echo/invoke", environ_overrides=remote)
    client.post("/skills/echo/invoke", environ_overrides={"REMOTE_ADDR": ""})  # not said
    assert [e.connection for e in state.journal()] == ["10.0.0.7:50123", "[::1]:50124", None]
