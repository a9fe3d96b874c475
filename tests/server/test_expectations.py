"""Expectations from Python (mockskill/server/expectations.py): a server scripted as
pytest-httpserver users script theirs, served as scenarios and checked from the journal."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from mockskill import ScenarioError, Server
from mockskill.scenario.loader import load_text


@pytest.fixture
def server() -> Iterator[Server]:
    with Server([]) as served:
        yield served


def test_an_expectation_answers_its_json_to_a_matching_request_and_nothing_else(
    server: Server,
) -> None:
    server.expect("/orders", method="POST", body={"/id": 1}).respond_with_json(
        {"order": 1}, status=201, headers={"Location": "/orders/1"}
    )
    answer = requests.post(f"{server.url}/orders", json={"id": 1}, timeout=10)
    assert (answer.status_code, answer.json()) == (201, {"order": 1})
    assert answer.headers["Location"] == "/orders/1"
    miss = requests.post(f"{server.url}/orders", json={"id": 2}, timeout=10)
    assert miss.status_code == 404
    assert miss.json()["error"]["details"]["near_misses"] == [
        {"route": "POST /orders, case 1", "reasons": ["body /id equals 1: found 2"]}
    ]


def test_a_skill_answers_a_protocol_error_in_the_unified_body_after_its_delay(
    server: Server,
) -> None:
    server.expect("/skills/translate/invoke").respond_with_error(
        "ENDPOINT_UNREACHABLE", status=502, retry=None, delay=40
    )
    answer = requests.post(server.invoke_url("translate"), json={}, timeout=10)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "ENDPOINT_UNREACHABLE"
    assert "retry" not in answer.json()["error"]
    (entry,) = server.journal()
    assert (entry.skill, entry.error_code, entry.delay_ms) == (
        "translate",
        "ENDPOINT_UNREACHABLE",
        40,
    )
    # The descriptor is the skill's, as for a skill of a scenario file.
    assert requests.get(server.skill_url("translate"), timeout=10).json()["id"] == "translate"


def test_a_fault_is_done_to_the_connection(server: Server) -> None:
    server.expect("/skills/flaky/invoke").respond_with_fault("CONNECTION_RESET_BY_PEER")
    with pytest.raises(requests.ConnectionError):
        requests.post(server.invoke_url("flaky"), json={}, timeout=10)
    server.check_expectations()  # met: the request was taken, the fault done


def test_headers_query_and_the_whole_json_body_are_matched_as_cases_match_them(
    server: Server,
) -> None:
    server.expect(
        "/search",
        method="PUT",
        headers={"X-Tenant": {"matches": "^acme-"}},
        query={"page": "2"},
        json={"q": "shoes"},
    ).respond_with_data("found")
    url = f"{server.url}/search?page=2"
    hit = requests.put(url, json={"q": "shoes"}, headers={"x-tenant": "acme-eu"}, timeout=10)
    assert (hit.status_code, hit.text) == (200, "found")
    miss = requests.put(url, json={"q": "shoes"}, headers={"x-tenant": "other"}, timeout=10)
    (near,) = miss.json()["error"]["details"]["near_misses"]
    assert near["reasons"] == ["header x-tenant matches '^acme-': found \"other\""]


def test_a_once_expectation_answers_once_then_the_next_alike_one(server: Server) -> None:
    server.expect_oneshot_request("/skills/echo/invoke").respond_with_error("EXECUTION_TIMEOUT")
    server.expect("/skills/echo/invoke").respond_with_json({"result": "ok"})
    statuses = [
        requests.post(server.invoke_url("echo"), json={}, timeout=10).status_code for _ in range(3)
    ]
    assert statuses == [504, 200, 200]
    server.check_expectations()


def test_a_once_expectation_used_up_passes_requests_on_to_the_next_that_takes_them(
    server: Server,
) -> None:
    server.expect("/orders", method="POST", json={"sku": "A1"}, once=True).respond_with_json(
        {"id": 1}, status=201
    )
    server.expect("/orders", method="POST", body={"/sku": {"exists": True}}).respond_with_error(
        "ENDPOINT_UNREACHABLE"
    )
    statuses = [
        requests.post(f"{server.url}/orders", json={"sku": "A1"}, timeout=10).status_code
        for _ in range(2)
    ]
    assert statuses == [201, 503]
    server.check_expectations()


def test_a_once_expectation_used_up_is_a_miss_the_check_names(server: Server) -> None:
    server.expect("/ping", once=True).respond_with_json({"pong": 1})
    assert requests.get(f"{server.url}/ping", timeout=10).status_code == 200
    again = requests.get(f"{server.url}/ping", timeout=10)
    assert again.status_code == 404
    assert again.json()["error"]["details"]["near_misses"] == [
        {"route": "GET /ping, case 1", "reasons": ["used up: its steps are played (end: next)"]}
    ]
    with pytest.raises(AssertionError) as failed:
        server.check_expectations()
    assert str(failed.value).splitlines() == [
        "requests that matched nothing:",
        "  GET /ping (404)",
        "    near miss GET /ping, case 1: used up: its steps are played (end: next)",
    ]
    server.check_expectations()  # each failure is said once, as pytest-httpserver says it


def test_an_expectation_added_later_does_not_replay_a_once_one_already_met(
    server: Server,
) -> None:
    server.expect("/ping", once=True).respond_with_json({"first": True})
    assert requests.get(f"{server.url}/ping", timeout=10).json() == {"first": True}
    server.expect("/ping").respond_with_json({"then": True})
    assert requests.get(f"{server.url}/ping", timeout=10).json() == {"then": True}
    server.check_expectations()


def test_an_expectation_never_met_fails_the_check_with_the_near_misses(server: Server) -> None:
    server.expect("/skills/echo/invoke", body={"/input/text": "hello"}).respond_with_json({})
    requests.post(server.invoke_url("echo"), json={"input": {"text": "hallo"}}, timeout=10)
    with pytest.raises(AssertionError) as failed:
        server.check_assertions()  # pytest-httpserver's name
    assert str(failed.value).splitlines() == [
        "mockskill: 1 expectation was never met:",
        '  POST /skills/echo/invoke when {"body": {"/input/text": "hello"}}',
        "requests that matched nothing:",
        "  POST /skills/echo/invoke (404)",
        "    near miss POST /skills/echo/invoke, case 1: "
        "body /input/text equals 'hello': found \"hallo\"",
    ]


def test_an_ordered_expectation_asked_for_out_of_order_is_a_miss_saying_so(
    server: Server,
) -> None:
    server.expect_ordered_request("/login", method="POST").respond_with_json({"token": "t"})
    server.expect_ordered_request("/orders").respond_with_json([])
    early = requests.get(f"{server.url}/orders", timeout=10)
    assert early.status_code == 404
    assert early.json()["error"]["details"]["near_misses"] == [
        {
            "route": "GET /orders, case 1",
            "reasons": ["the session's state is 'Started', not 'ordered 1 met: POST /login'"],
        }
    ]
    assert requests.post(f"{server.url}/login", timeout=10).json() == {"token": "t"}
    with pytest.raises(AssertionError) as failed:
        server.check_expectations()
    assert str(failed.value).splitlines() == [
        "mockskill: 1 expectation was never met:",
        "  GET /orders (ordered)",
        "requests that matched nothing:",
        "  GET /orders (404)",
        "    near miss GET /orders, case 1: "
        "the session's state is 'Started', not 'ordered 1 met: POST /login'",
    ]
    # In order now: the login moved the session on; each ordered one answers once.
    assert requests.get(f"{server.url}/orders", timeout=10).json() == []
    assert requests.post(f"{server.url}/login", timeout=10).status_code == 404
    with pytest.raises(AssertionError, match="POST /login \\(404\\)"):
        server.check_expectations()
    server.check_expectations()


def test_ordered_expectations_are_followed_per_session(server: Server) -> None:
    server.expect_ordered_request("/a").respond_with_data("a")
    server.expect_ordered_request("/b").respond_with_data("b")
    for name in ("alice", "bob"):
        session = {"Mockskill-Session": name}
        answers = [requests.get(f"{server.url}/{p}", headers=session, timeout=10) for p in "ab"]
        assert [a.text for a in answers] == ["a", "b"]
    server.check_expectations()
    server.clear_expectations()
    # A new set of ordered expectations starts every session afresh.
    server.expect_ordered_request("/b").respond_with_data("b first")
    assert requests.get(f"{server.url}/b", timeout=10).text == "b first"


def test_ordered_expectations_met_in_order_hold(server: Server) -> None:
    server.expect_ordered_request("/login", method="POST").respond_with_json({"token": "t"})
    server.expect_ordered_request("/orders").respond_with_json([])
    requests.post(f"{server.url}/login", timeout=10)
    requests.get(f"{server.url}/orders", timeout=10)
    server.check_expectations()


def test_bad_conditions_raise_the_problems_the_same_yaml_has(server: Server) -> None:
    yaml = """\
name: same
routes:
  - path: /orders
    method: POST
    cases:
      - when: {body: {/id: {equal: 1}}, query: {page: {matches: "(("}}}
        steps: [{status: 200}]
        end: last
"""
    with pytest.raises(ScenarioError) as from_yaml:
        load_text(yaml)
    with pytest.raises(ScenarioError) as from_python:
        server.expect(
            "/orders", method="POST", body={"/id": {"equal": 1}}, query={"page": {"matches": "(("}}
        )
    said = [(p.path, p.expected, p.found, p.hint) for p in from_python.value.problems]
    assert said == [(p.path, p.expected, p.found, p.hint) for p in from_yaml.value.problems]
    assert len(said) == 2
    assert "did you mean 'equals'" in str(from_python.value)
    assert str(from_python.value).startswith("expect(POST /orders): routes[0].cases[0].when")
    assert server.scenario_names == []  # nothing was served


def test_a_bad_answer_raises_where_it_is_given_and_the_last_good_one_goes_on(
    server: Server,
) -> None:
    expectation = server.expect("/jobs").respond_with_json({"jobs": []})
    with pytest.raises(
        ScenarioError, match=r"expect\(GET /jobs\): .*did you mean 'EXECUTION_TIMEOUT'"
    ):
        expectation.respond_with_error("EXECUTION_TIMEOT")
    assert requests.get(f"{server.url}/jobs", timeout=10).json() == {"jobs": []}


def test_an_expectation_on_a_skill_a_scenario_serves_is_refused_as_a_clash() -> None:
    clash = "found 'echo', served by active scenario 'file'"
    with (
        Server("name: file\nskills: [{id: echo}]\n") as server,
        pytest.raises(ScenarioError, match=clash),
    ):
        server.expect("/skills/echo/invoke")


def test_cleared_expectations_are_no_longer_served(server: Server) -> None:
    server.expect("/orders").respond_with_json([])
    server.clear_expectations()
    assert server.scenario_names == []
    assert requests.get(f"{server.url}/orders", timeout=10).status_code == 404
    server.check_expectations()  # nothing is expected any more


def test_an_expectation_of_a_session_answers_that_session_only(server: Server) -> None:
    server.expect("/me", session="alice").respond_with_json({"me": "alice"})
    mine = requests.get(f"{server.url}/me", headers={"Mockskill-Session": "alice"}, timeout=10)
    assert mine.json() == {"me": "alice"}
    other = requests.get(f"{server.url}/me", headers={"Mockskill-Session": "bob"}, timeout=10)
    assert other.status_code == 404
    server.check_expectations("alice")


def test_once_and_ordered_expectations_hold_on_a_shared_state_store(redis_url: str) -> None:
    """On Redis the passing on and the states are needs awaited on the loop, as in memory."""
    with Server([], state=redis_url, shared_scenarios="memory") as shared:
        shared.expect("/pay", method="POST", once=True).respond_with_error("EXECUTION_TIMEOUT")
        shared.expect("/pay", method="POST").respond_with_json({"paid": True})
        shared.expect_ordered_request("/a").respond_with_data("a")
        shared.expect_ordered_request("/b").respond_with_data("b")
        pay = [requests.post(f"{shared.url}/pay", timeout=10).status_code for _ in range(2)]
        assert pay == [504, 200]
        assert requests.get(f"{shared.url}/b", timeout=10).status_code == 404
        assert [requests.get(f"{shared.url}/{p}", timeout=10).text for p in "ab"] == ["a", "b"]
        with pytest.raises(AssertionError, match=r"GET /b \(404\)"):
            shared.check_expectations()
        shared.check_expectations()
        shared.reset()


def test_pytest_httpserver_s_query_string_and_data_match_the_query_and_raw_body(
    server: Server,
) -> None:
    server.expect_request("/find", query_string="q=shoes&page=2").respond_with_data("found")
    server.expect_request("/echo", method="POST", data="plain words").respond_with_data("heard")
    assert requests.get(f"{server.url}/find?page=2&q=shoes", timeout=10).text == "found"
    assert requests.post(f"{server.url}/echo", data="plain words", timeout=10).text == "heard"
    missed = requests.get(f"{server.url}/find?q=shoes", timeout=10)
    assert missed.json()["error"]["details"]["near_misses"][0]["reasons"] == [
        "query parameter page equals '2': it is absent"
    ]
    with pytest.raises(AssertionError, match=r"GET /find \(404\)"):
        server.check_expectations()


def test_servers_sharing_a_scenario_set_serve_each_other_s_expectations(redis_url: str) -> None:
    """Replicas of one set (the pytest plugin's servers under xdist on --mockskill-state
    redis://...) each name their expectations apart: none replaces another's."""
    with Server([], state=redis_url) as first, Server(state=redis_url) as second:
        first.expect("/from-first").respond_with_data("1")
        second.registry.catch_up()  # (as its poller would, within a second)
        second.expect("/from-second").respond_with_data("2")
        first.registry.catch_up()
        for server in (first, second):
            answers = [
                requests.get(f"{server.url}/from-{n}", timeout=10).text for n in ("first", "second")
            ]
            assert answers == ["1", "2"]
        first.clear_expectations()
        second.clear_expectations()
        first.reset()
