"""Faults around a real provider: proxy steps composed with every step feature, end to end.

The provider is a second mockskill server (its journal says what really ran)
or a plain Flask one (tests/upstreams.py); the front is a mockskill server
whose skills forward to it, with delays before, faults instead of and
faults after the upstream call, sequences per session, a recording on, and
a whole scenario in front of a provider.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests
from upstreams import Provider
from werkzeug.test import Client

import mockskill
from mockskill.engine.engine import Engine
from mockskill.engine.exchange import Exchange
from mockskill.engine.state import State
from mockskill.scenario.loader import load_text
from mockskill.wsgi.app import create_app

SKILLS = ("echo", "flaky", "committed", "dropped", "late", "once", "failing")


@pytest.fixture(scope="module")
def upstream() -> Iterator[mockskill.Server]:
    skills = "\n".join(f"  - id: {s}" for s in SKILLS if s != "failing")
    failing = "  - id: failing\n    invoke: {error: EXECUTION_TIMEOUT}\n"
    text = f"name: real\nskills:\n{skills}\n{failing}"
    with mockskill.Server(text) as server:
        yield server


@pytest.fixture(scope="module")
def front(upstream: mockskill.Server) -> Iterator[mockskill.Server]:
    up = upstream.url
    text = f"""
name: front
seed: 7
skills:
  - {{id: echo, proxy: {up}}}
  - id: flaky
    invoke:
      failure_rate: 0.5
      failure: {{error: ENDPOINT_UNREACHABLE}}
      proxy: {up}
  - id: committed
    invoke: {{proxy: {up}, after: {{error: EXECUTION_TIMEOUT}}}}
  - id: dropped
    invoke: {{proxy: {up}, after: {{fault: CONNECTION_RESET_BY_PEER}}}}
  - id: late
    invoke: {{proxy: {up}, delay: 150}}
  - id: once
    invoke:
      - proxy: {up}
      - error: ENDPOINT_UNREACHABLE
  - {{id: failing, proxy: {up}}}
"""
    with mockskill.Server(text) as server:
        yield server


def ran(upstream: mockskill.Server, skill: str, session: str) -> int:
    """How many invokes of *skill* in *session* the provider really ran."""
    return sum(1 for e in upstream.journal(session) if e.skill == skill and e.endpoint == "invoke")


def invoke(front: mockskill.Server, skill: str, session: str) -> requests.Response:
    return requests.post(
        f"{front.url}/skills/{skill}/invoke",
        json={"input": {"text": "hi"}},
        headers={"Mockskill-Session": session},
        timeout=10,
    )


def test_a_proxied_descriptor_points_back_at_mockskill_so_invokes_come_through_it(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    descriptor = requests.get(
        f"{front.url}/skills/echo", headers={"Mockskill-Session": "rewrite"}, timeout=10
    ).json()
    url = descriptor["endpoint"]["url"]
    assert url == f"{front.url}/skills/echo/invoke"
    response = requests.post(url, json={}, headers={"Mockskill-Session": "rewrite"}, timeout=10)
    assert response.json() == {"skill": "echo", "result": "ok"}
    entries = front.journal("rewrite")
    assert [(e.endpoint, e.status) for e in entries] == [("describe", 200), ("invoke", 200)]
    assert all(e.upstream and e.upstream["reached"] for e in entries)
    assert entries[0].upstream == {**entries[0].upstream, "url": upstream.url, "status": 200}
    assert [e.endpoint for e in upstream.journal("rewrite")] == ["describe", "invoke"]
    # What the consumer sent is journalled by the front as by the provider (issue 28).
    front_invoke, up_invoke = entries[1], upstream.journal("rewrite")[1]
    assert front_invoke.target == up_invoke.target == "/skills/echo/invoke"
    assert front_invoke.body == up_invoke.body == "{}"
    assert ("Mockskill-Session", "rewrite") in (front_invoke.headers or ())


def test_failure_rate_fails_instead_of_the_upstream_call_seeded(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    statuses = [invoke(front, "flaky", "rate").status_code for _ in range(16)]
    assert set(statuses) == {200, 503}
    assert ran(upstream, "flaky", "rate") == statuses.count(200)
    for entry in front.journal("rate"):
        if entry.status == 503:
            assert entry.upstream is None  # not proxied: the failure answered instead
        else:
            assert entry.upstream is not None
            assert entry.upstream["reached"]
    front.reset("rate")
    assert [invoke(front, "flaky", "rate").status_code for _ in range(16)] == statuses


def test_after_an_error_replaces_the_answer_of_an_upstream_that_ran(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    response = invoke(front, "committed", "commit")
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "EXECUTION_TIMEOUT"
    assert ran(upstream, "committed", "commit") == 1  # the provider ran it all the same
    [entry] = front.journal("commit")
    assert (entry.status, entry.error_code) == (504, "EXECUTION_TIMEOUT")
    assert entry.upstream is not None
    assert (entry.upstream["reached"], entry.upstream["status"]) == (True, 200)


def test_after_a_fault_cuts_the_answer_of_an_upstream_that_ran(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    with pytest.raises(requests.ConnectionError):
        invoke(front, "dropped", "drop")
    assert ran(upstream, "dropped", "drop") == 1
    [entry] = front.journal("drop")
    assert entry.fault == "CONNECTION_RESET_BY_PEER"
    assert entry.status is None
    assert entry.upstream is not None
    assert entry.upstream["status"] == 200


def test_a_delay_waits_before_the_upstream_call(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    started = time.monotonic()
    response = invoke(front, "late", "late")
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.14
    [entry] = front.journal("late")
    assert entry.delay_ms == 150
    assert ran(upstream, "late", "late") == 1


def test_sequence_positions_are_per_session(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    assert [invoke(front, "once", "one").status_code for _ in range(3)] == [200, 503, 503]
    assert invoke(front, "once", "two").status_code == 200
    assert ran(upstream, "once", "one") == 1
    assert [e.upstream is not None for e in front.journal("one")] == [True, False, False]


def test_a_proxied_error_is_journalled_and_graded_like_a_scripted_one(
    front: mockskill.Server,
) -> None:
    response = invoke(front, "failing", "graded")
    assert response.status_code == 504
    [entry] = front.journal("graded")
    assert entry.error_code == "EXECUTION_TIMEOUT"
    assert entry.retry is not None
    assert entry.retry.max_attempts == 3


def test_a_forced_error_is_answered_without_calling_the_upstream(
    front: mockskill.Server, upstream: mockskill.Server
) -> None:
    response = requests.post(
        f"{front.url}/skills/echo/invoke",
        headers={"Mockskill-Session": "forced", "Mockskill-Error": "AUTH_REQUIRED"},
        timeout=10,
    )
    assert response.status_code == 401
    assert ran(upstream, "echo", "forced") == 0


def test_a_recorder_gets_each_proxied_exchange_while_it_is_set(front: mockskill.Server) -> None:
    got: list[Exchange] = []

    class Recorder:
        def add(self, exchange: Exchange) -> None:
            got.append(exchange)

    front.engine.recorder = Recorder()
    try:
        requests.post(
            f"{front.url}/skills/echo/invoke?v=1",
            data=b'{"input": 1}',
            headers={"Mockskill-Session": "rec", "Authorization": "Bearer s3cret"},
            timeout=10,
        )
        invoke(front, "flaky", "rec-none")  # a failure drawn first may not reach it: either way
    finally:
        front.engine.recorder = None
    invoke(front, "echo", "rec")
    exchange = got[0]
    assert (exchange.method, exchange.target, exchange.session) == (
        "POST",
        "/skills/echo/invoke?v=1",
        "rec",
    )
    assert ("Authorization", "Bearer s3cret") in exchange.headers  # the recorder redacts
    assert exchange.body == b'{"input": 1}'
    assert exchange.status == 200
    assert exchange.response_body == b'{"skill": "echo", "result": "ok"}'
    assert not exchange.truncated
    assert exchange.upstream_ms >= 0
    assert len([e for e in got if e.session == "rec"]) == 1  # none after it was unset


# -- a whole scenario in front of a provider -----------------------------------


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    made = Provider()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def fallback(provider: Provider) -> Iterator[mockskill.Server]:
    text = f"""
name: in-front
proxy: {provider.url}
skills:
  - id: mine
    invoke: {{json: {{scripted: true}}}}
"""
    with mockskill.Server(text) as server:
        yield server


def test_a_scenario_proxy_forwards_what_it_does_not_script(
    fallback: mockskill.Server, provider: Provider
) -> None:
    listing = requests.get(f"{fallback.url}/skills", timeout=10).json()
    assert listing["skills"][0]["descriptor_url"] == f"{fallback.url}/skills/real"
    # The scripted skill is listed too, where discovery finds it, after the provider's.
    assert [s["id"] for s in listing["skills"]][-1] == "mine"
    assert listing["skills"][-1]["invoke_url"] == f"{fallback.url}/skills/mine/invoke"
    descriptor = requests.get(f"{fallback.url}/skills/real", timeout=10).json()
    assert descriptor["endpoint"]["url"] == f"{fallback.url}/skills/real/invoke"
    assert requests.post(descriptor["endpoint"]["url"], timeout=10).json()["ran"] == "real"
    assert requests.get(f"{fallback.url}/echo?a=b", timeout=10).json()["query"] == "a=b"
    scripted = requests.post(f"{fallback.url}/skills/mine/invoke", timeout=10)
    assert scripted.json() == {"scripted": True}
    assert not [s for s in provider.seen if s["path"].startswith("/skills/mine")]


def test_a_scenario_proxy_forwards_the_token_endpoint_unless_its_scenarios_have_clients(
    fallback: mockskill.Server, provider: Provider
) -> None:
    form = {"grant_type": "client_credentials", "client_id": "app", "client_secret": "s"}
    got = requests.post(f"{fallback.url}/oauth/token", data=form, timeout=10)
    assert got.json()["access_token"] == "the-providers-own"  # the provider's, not the mock's
    clients = "auth: {clients: [{client_id: app, client_secret: s, scopes: [a]}]}"
    with mockskill.Server(f"name: own\nproxy: {provider.url}\n{clients}\n") as own:
        issued = requests.post(f"{own.url}/oauth/token", data=form, timeout=10).json()
    assert issued["access_token"] != "the-providers-own"  # a scenario's clients: mockskill's own


def test_a_recording_keeps_a_bounded_part_of_a_big_body_and_the_consumer_gets_all_of_it(
    fallback: mockskill.Server,
) -> None:
    got: list[Exchange] = []

    class Recorder:
        def add(self, exchange: Exchange) -> None:
            got.append(exchange)

    size = 2 * 1024 * 1024 + 5
    fallback.engine.recorder = Recorder()
    try:
        response = requests.get(f"{fallback.url}/big?n={size}", timeout=20)
    finally:
        fallback.engine.recorder = None
    assert len(response.content) == size
    assert response.headers["Content-Length"] == str(size)
    [exchange] = got
    assert exchange.truncated
    assert len(exchange.response_body) == 1024 * 1024


def test_a_descriptor_that_is_not_json_is_relayed_and_recorded_as_it_came(
    fallback: mockskill.Server,
) -> None:
    got: list[Exchange] = []

    class Recorder:
        def add(self, exchange: Exchange) -> None:
            got.append(exchange)

    fallback.engine.recorder = Recorder()
    try:
        response = requests.get(f"{fallback.url}/skills/not-json", timeout=10)
    finally:
        fallback.engine.recorder = None
    assert response.content == b"not a descriptor"
    [exchange] = got
    assert exchange.response_body == b"not a descriptor"


# -- the WSGI path -------------------------------------------------------------


def test_a_wsgi_server_answers_a_proxy_step_with_a_clear_error() -> None:
    scenarios = load_text("name: w\nskills:\n  - {id: p, proxy: 'http://127.0.0.1:9'}\n")
    client = Client(create_app(Engine(scenarios, State())))
    response = client.post("/skills/p/invoke", json={})
    assert response.status_code == 501
    error = response.get_json()["error"]
    assert error["code"] == "MOCKSKILL_PROXY_UNSUPPORTED"
    assert "mockskill serve" in error["message"]
