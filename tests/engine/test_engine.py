"""The engine over the wire: what a consumer sees, through real clients on real sockets."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import requests

from mockskill import Server, load_text
from mockskill.protocol.catalog import CATEGORIES, SERVED_CODES

Serve = Callable[..., Server]

FLAKY_CYCLE = """
    name: flaky
    skills:
      - id: flaky
        invoke:
          end: cycle
          steps:
            - error: ENDPOINT_UNREACHABLE
              times: 2
            - json: {result: ok}
"""


def invoke(server: Server, skill: str, **kwargs: object) -> requests.Response:
    return requests.post(server.invoke_url(skill), timeout=10, **kwargs)  # type: ignore[arg-type]


def test_the_listing_names_every_skill_with_urls_on_this_server(bundled: Server) -> None:
    listing = requests.get(f"{bundled.url}/skills", timeout=10).json()["skills"]
    ids = [s["id"] for s in listing]
    assert {"translate", "flaky", "slow", "auth-required", "invalid-descriptor"} <= set(ids)
    translate = next(s for s in listing if s["id"] == "translate")
    assert translate == {
        "id": "translate",
        "name": "Translate",
        "scenario": "healthy",
        "descriptor_url": f"{bundled.url}/skills/translate",
        "invoke_url": f"{bundled.url}/skills/translate/invoke",
    }


def test_a_descriptor_is_merged_over_the_default_and_points_at_this_server(
    bundled: Server,
) -> None:
    response = requests.get(bundled.skill_url("translate"), timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    doc = response.json()
    assert doc["name"] == "Translate"  # from the scenario
    assert doc["capability_type"] == "api"
    assert doc["protocol_version"] == "1.0.0"  # from the default
    assert doc["endpoint"]["url"] == bundled.invoke_url("translate")
    assert doc["auth"] == {"type": "none"}


def test_the_base_url_follows_the_host_the_client_used(bundled: Server) -> None:
    response = requests.get(
        bundled.skill_url("translate"), headers={"Host": f"example.test:{bundled.port}"}, timeout=10
    )
    assert response.json()["endpoint"]["url"] == (
        f"http://example.test:{bundled.port}/skills/translate/invoke"
    )


def test_a_forged_host_header_cannot_inject_into_bodies(bundled: Server) -> None:
    response = requests.get(
        bundled.skill_url("translate"), headers={"Host": 'evil"}, "x": "'}, timeout=10
    )
    # Not a host: refused before any body is made from it (RFC 9112 3.2).
    assert response.status_code == 400
    assert response.json()["error"]["code"].startswith("MOCKSKILL_")
    assert "endpoint" not in response.json()


def test_a_raw_descriptor_is_served_exactly(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: broken
            raw_descriptor: [not, an, object]
        """
    )
    response = requests.get(server.skill_url("broken"), timeout=10)
    assert response.status_code == 200
    assert response.json() == ["not", "an", "object"]


def test_the_chapter_invalid_descriptor_is_served_for_validation_error(bundled: Server) -> None:
    doc = requests.get(bundled.skill_url("invalid-descriptor"), timeout=10).json()
    assert doc["capability_type"] == "unknown_type"
    assert "url" not in doc["endpoint"]


@pytest.mark.parametrize(
    ("skill", "status", "code", "retry_after"),
    [
        ("auth-required", 401, "AUTH_REQUIRED", None),
        ("permission-denied", 403, "PERMISSION_DENIED", None),
        ("skill-not-found", 404, "SKILL_NOT_FOUND", None),
        ("execution-timeout", 504, "EXECUTION_TIMEOUT", "5"),
        ("execution-timeout-408", 408, "EXECUTION_TIMEOUT", "1"),
        ("endpoint-unreachable", 503, "ENDPOINT_UNREACHABLE", "2"),
        ("bad-gateway", 502, "ENDPOINT_UNREACHABLE", "2"),
        ("version-incompatible", 422, "VERSION_INCOMPATIBLE", None),
    ],
)
def test_each_bundled_error_skill_answers_in_the_unified_body(
    bundled: Server, skill: str, status: int, code: str, retry_after: str | None
) -> None:
    response = invoke(bundled, skill)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert response.headers.get("Retry-After") == retry_after
    if retry_after is None:
        assert "retry" not in error
    else:
        delay = error["retry"]["suggested_delay_ms"]
        assert int(retry_after) == -(-delay // 1000)


def test_auth_required_names_the_way_to_authenticate(bundled: Server) -> None:
    response = invoke(bundled, "auth-required")
    details = response.json()["error"]["details"]
    assert details["required_auth_type"] == "oauth2"
    assert details["authorization_url"].startswith(bundled.url)
    assert details["scopes"] == ["skill:invoke"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer ")


def test_endpoint_unreachable_names_the_endpoint_on_this_server(bundled: Server) -> None:
    details = invoke(bundled, "endpoint-unreachable").json()["error"]["details"]
    assert details == {
        "endpoint_url": bundled.invoke_url("endpoint-unreachable"),
        "reason": "Connection refused",
    }


def test_an_unknown_skill_is_skill_not_found_with_a_suggestion(bundled: Server) -> None:
    for response in (
        requests.get(bundled.skill_url("transalte"), timeout=10),
        invoke(bundled, "transalte"),
    ):
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["code"] == "SKILL_NOT_FOUND"
        assert error["details"]["skill_id"] == "transalte"
        assert error["details"]["did_you_mean"] == ["translate"]
        assert error["details"]["url"].startswith(f"{bundled.url}/skills/transalte")


def test_a_request_that_matches_nothing_lists_its_near_misses(bundled: Server) -> None:
    response = requests.get(f"{bundled.url}/skills/translate/invoke", timeout=10)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "SKILL_NOT_FOUND"
    assert error["message"] == "No skill or route matches GET /skills/translate/invoke"
    nearest = error["details"]["near_misses"][0]
    assert nearest == {"route": "POST /skills/<id>/invoke", "reasons": ["method GET is not POST"]}
    assert len(error["details"]["near_misses"]) <= 3


def test_a_result_step_sends_status_headers_and_body(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: s
            invoke:
              - status: 201
                headers: {X-Trace: abc, Content-Type: application/vnd.skill+json}
                json: {made: true}
              - text: plain words
              - status: 204
        """
    )
    first = invoke(server, "s")
    assert first.status_code == 201
    assert first.headers["X-Trace"] == "abc"
    assert first.headers["Content-Type"] == "application/vnd.skill+json"
    assert first.json() == {"made": True}
    second = invoke(server, "s")
    assert second.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert second.text == "plain words"
    third = invoke(server, "s")
    assert third.status_code == 204
    assert third.content == b""


def test_error_overrides_are_served(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: s
            invoke:
              error: EXECUTION_TIMEOUT
              status: 408
              message: Took too long
              details: {timeout_ms: 100, elapsed_ms: 150, extra: true}
              retry: {suggested_delay_ms: 2500, max_attempts: 2}
        """
    )
    response = invoke(server, "s")
    assert response.status_code == 408
    assert response.headers["Retry-After"] == "3"
    assert response.json() == {
        "error": {
            "code": "EXECUTION_TIMEOUT",
            "message": "Took too long",
            "details": {"timeout_ms": 100, "elapsed_ms": 150, "extra": True},
            "retry": {"suggested_delay_ms": 2500, "max_attempts": 2},
        }
    }


def test_the_flaky_skill_fails_twice_then_succeeds_per_session(
    bundled: Server, session: dict[str, str]
) -> None:
    statuses = [invoke(bundled, "flaky", headers=session).status_code for _ in range(4)]
    assert statuses == [503, 503, 200, 200]
    other = {"Mockskill-Session": session["Mockskill-Session"] + "-other"}
    assert invoke(bundled, "flaky", headers=other).status_code == 503


def test_positions_are_kept_per_endpoint(serve: Serve, session: dict[str, str]) -> None:
    server = serve(
        """
        skills:
          - id: s
            describe:
              - error: SKILL_NOT_FOUND
              - descriptor: true
            invoke:
              - error: ENDPOINT_UNREACHABLE
              - json: {ok: true}
        """
    )
    assert invoke(server, "s", headers=session).status_code == 503
    assert requests.get(server.skill_url("s"), headers=session, timeout=10).status_code == 404
    assert requests.get(server.skill_url("s"), headers=session, timeout=10).status_code == 200
    assert invoke(server, "s", headers=session).status_code == 200


def test_end_fail_answers_a_clear_mockskill_error(serve: Serve, session: dict[str, str]) -> None:
    server = serve(
        """
        skills:
          - id: once
            invoke:
              end: fail
              steps:
                - json: {ok: true}
        """
    )
    assert invoke(server, "once", headers=session).status_code == 200
    response = invoke(server, "once", headers=session)
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_SEQUENCE_EXHAUSTED"
    assert "'once'" in error["message"]
    assert "ends with 'fail'" in error["message"]
    assert error["details"]["length"] == 1
    assert error["details"]["session"] == session["Mockskill-Session"]


def test_a_case_that_ends_with_next_passes_requests_on_once_its_steps_are_played(
    serve: Serve, session: dict[str, str]
) -> None:
    server = serve(
        """
        skills:
          - id: pay
            invoke:
              cases:
                - when: {}
                  steps: [{error: EXECUTION_TIMEOUT}]
                  end: next
                - when: {body: {/card: "4242"}}
                  steps: [{json: {paid: true}}]
                  end: next
              steps:
                - json: {paid: false}
          - id: once
            invoke:
              cases:
                - when: {headers: {X-Try: "1"}}
                  steps: [{json: {first: true}}]
                  end: next
        """
    )
    card = {"card": "4242"}
    answers = [invoke(server, "pay", json=card, headers=session).json() for _ in range(3)]
    assert answers[0]["error"]["code"] == "EXECUTION_TIMEOUT"
    assert answers[1:] == [{"paid": True}, {"paid": False}]
    # Per session, as every position: another session starts with the first case.
    other = invoke(server, "pay", json=card, headers={"Mockskill-Session": "other"})
    assert other.status_code == 504
    journal = server.journal(session["Mockskill-Session"])
    assert [(e.case, e.step) for e in journal] == [(0, 0), (1, 0), (None, 0)]
    tried = {**session, "X-Try": "1"}
    assert invoke(server, "once", headers=tried).json() == {"first": True}
    missed = invoke(server, "once", headers=tried)
    assert missed.status_code == 404
    assert missed.json()["error"]["details"]["near_misses"] == [
        {
            "route": "POST /skills/once/invoke, case 1",
            "reasons": ["used up: its steps are played (end: next)"],
        }
    ]
    assert server.journal(session["Mockskill-Session"])[-1].endpoint == "unmatched"


def test_a_case_passes_a_request_on_only_to_a_case_the_session_s_state_lets_take_it(
    serve: Serve, session: dict[str, str]
) -> None:
    server = serve(
        """
        name: login
        routes:
          - path: /login
            method: POST
            steps: [{status: 204, set_state: in}]
          - path: /me
            cases:
              - when: {}
                steps: [{json: {first: true}}]
                end: next
              - state: in
                json: {me: alice}
            steps: [{status: 401}]
        """
    )

    def me() -> requests.Response:
        return requests.get(f"{server.url}/me", headers=session, timeout=10)

    assert me().json() == {"first": True}
    assert me().status_code == 401  # not in: the default steps
    requests.post(f"{server.url}/login", headers=session, timeout=10)
    assert me().json() == {"me": "alice"}


def test_positions_are_exact_under_concurrency(serve: Serve) -> None:
    server = serve(FLAKY_CYCLE)
    headers = {"Mockskill-Session": "concurrency"}

    def client(_: int) -> list[int]:
        with requests.Session() as http:
            return [
                http.post(server.invoke_url("flaky"), headers=headers, timeout=30).status_code
                for _ in range(10)
            ]

    with ThreadPoolExecutor(max_workers=30) as pool:
        statuses = [s for batch in pool.map(client, range(30)) for s in batch]
    assert Counter(statuses) == {503: 200, 200: 100}


@pytest.mark.parametrize("code", SERVED_CODES)
def test_mockskill_error_forces_a_category_once_without_moving_the_sequence(
    bundled: Server, session: dict[str, str], code: str
) -> None:
    forced = invoke(bundled, "flaky", headers={**session, "Mockskill-Error": code})
    assert forced.status_code == CATEGORIES[code].status
    assert forced.json()["error"]["code"] == code
    # the flaky sequence has not moved: its first step still comes first
    assert invoke(bundled, "flaky", headers=session).status_code == 503


def test_mockskill_error_is_case_insensitive_and_works_with_httpx(bundled: Server) -> None:
    with httpx.Client() as client:
        response = client.post(
            bundled.invoke_url("translate"), headers={"Mockskill-Error": "auth_required"}
        )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "AUTH_REQUIRED"


def test_mockskill_error_with_an_unknown_code_is_a_bad_request(bundled: Server) -> None:
    response = invoke(bundled, "translate", headers={"Mockskill-Error": "AUTH_REQUIRD"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_BAD_REQUEST"
    assert "did you mean 'AUTH_REQUIRED'" in error["message"]


def test_forcing_validation_error_serves_an_invalid_descriptor(bundled: Server) -> None:
    headers = {"Mockskill-Error": "VALIDATION_ERROR"}
    doc = requests.get(bundled.skill_url("translate"), headers=headers, timeout=10).json()
    assert doc["id"] == "translate"
    assert doc["capability_type"] == "unknown_type"
    assert "url" not in doc["endpoint"]
    refused = invoke(bundled, "translate", headers=headers)
    assert refused.status_code == 400
    assert "descriptor request" in refused.json()["error"]["message"]


def test_free_routes_answer_outside_the_skill_surface(serve: Serve) -> None:
    server = serve(
        """
        routes:
          - path: /orders/<int:order>
            method: [GET, PUT]
            steps:
              - json: {order: found}
        """
    )
    assert requests.get(f"{server.url}/orders/7", timeout=10).json() == {"order": "found"}
    assert requests.put(f"{server.url}/orders/7", timeout=10).status_code == 200
    missed = requests.delete(f"{server.url}/orders/7", timeout=10)
    assert missed.status_code == 404
    near = missed.json()["error"]["details"]["near_misses"][0]
    assert near == {
        "route": "GET|PUT /orders/<int:order>",
        "reasons": ["method DELETE is not GET or PUT"],
    }


def test_a_delayed_request_does_not_block_others(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: slow
            invoke: {delay: 1500, json: {ok: true}}
          - id: fast
        """
    )
    slow_done = threading.Event()

    def slow() -> None:
        invoke(server, "slow")
        slow_done.set()

    thread = threading.Thread(target=slow)
    started = time.monotonic()
    thread.start()
    time.sleep(0.1)
    for _ in range(5):
        assert invoke(server, "fast").status_code == 200
    fast_elapsed = time.monotonic() - started
    assert not slow_done.is_set()
    assert fast_elapsed < 1.4
    thread.join()
    assert time.monotonic() - started >= 1.5


def test_each_request_is_recorded_once_in_the_journal(
    serve: Serve, session: dict[str, str]
) -> None:
    server = serve(FLAKY_CYCLE)
    for _ in range(3):
        invoke(server, "flaky", headers=session)
    requests.get(f"{server.url}/nowhere", headers=session, timeout=10)
    entries = server.state.journal(session["Mockskill-Session"])
    assert [(e.endpoint, e.status, e.error_code, e.step) for e in entries] == [
        ("invoke", 503, "ENDPOINT_UNREACHABLE", 0),
        ("invoke", 503, "ENDPOINT_UNREACHABLE", 0),
        ("invoke", 200, None, 1),
        ("unmatched", 404, "SKILL_NOT_FOUND", None),
    ]
    assert entries[3].near_misses
    assert all(e.finished >= e.started for e in entries)


def test_loading_new_scenarios_swaps_them_whole_for_the_next_request(serve: Serve) -> None:
    server = serve("skills: [{id: old}]")
    assert invoke(server, "old").status_code == 200
    server.engine.load(load_text("skills: [{id: new}]"))
    assert invoke(server, "old").status_code == 404
    assert invoke(server, "new").json() == {"skill": "new", "result": "ok"}


def test_head_is_answered_like_get_without_a_body(bundled: Server) -> None:
    response = requests.head(bundled.skill_url("translate"), timeout=10)
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["Content-Length"]) > 0


def test_admin_reset_starts_one_session_or_all_sessions_afresh(serve: Serve) -> None:
    server = serve(FLAKY_CYCLE)
    a, b = {"Mockskill-Session": "a"}, {"Mockskill-Session": "b"}
    for headers in (a, a, b, b):
        invoke(server, "flaky", headers=headers)
    reset = requests.post(f"{server.url}/__admin/reset", params={"session": "a"}, timeout=10)
    assert reset.json() == {"reset": "session", "session": "a"}
    assert invoke(server, "flaky", headers=a).status_code == 503  # a starts again
    assert invoke(server, "flaky", headers=b).status_code == 200  # b goes on
    everything = requests.post(f"{server.url}/__admin/reset?all=true", timeout=10)
    assert everything.json()["reset"] == "all"
    assert invoke(server, "flaky", headers=b).status_code == 503
    assert [e.session for e in server.state.journal()] == ["b"]


# -- what the retry audit compares: version, body digest, invalid descriptors -------------


def test_the_journal_records_the_consumers_protocol_version(bundled: Server) -> None:
    session = {"Mockskill-Session": f"v-{time.time_ns()}"}
    invoke(bundled, "translate", headers={**session, "Skill-Protocol-Version": "1.4.0"})
    invoke(bundled, "translate", headers=session)
    stated, unstated = bundled.state.journal(session["Mockskill-Session"])
    assert stated.protocol_version == "1.4.0"
    assert unstated.protocol_version is None


def test_the_journal_records_a_keyed_digest_of_the_body_never_the_body(serve: Serve) -> None:
    text = "skills: [{id: echo}]"
    server, other = serve(text), serve(text)
    secret = {"password": "hunter2"}
    for target in (server, server, other):
        invoke(target, "echo", json=secret)
    invoke(server, "echo", json={"password": "hunter3"})
    invoke(server, "echo")
    first, again, changed, empty = server.state.journal()
    (elsewhere,) = other.state.journal()
    assert first.body_digest is not None
    assert first.body_digest.startswith("hmac-sha256:")
    assert again.body_digest == first.body_digest  # the same body, the same digest
    assert changed.body_digest != first.body_digest
    assert empty.body_digest is None
    assert elsewhere.body_digest != first.body_digest  # keyed per server
    listed = requests.get(f"{server.url}/__admin/journal", timeout=10).text
    assert "hunter2" not in listed
    assert first.body_digest in listed


@pytest.mark.parametrize(
    ("skill", "invalid"),
    [
        ("translate", False),
        ("invalid-descriptor", True),
        ("version-incompatible", False),  # another version, but a valid descriptor
    ],
)
def test_a_descriptor_the_reference_validator_rejects_is_marked(
    bundled: Server, skill: str, invalid: bool
) -> None:
    session = f"d-{time.time_ns()}"
    response = requests.get(
        bundled.skill_url(skill), headers={"Mockskill-Session": session}, timeout=10
    )
    assert response.status_code == 200
    (entry,) = bundled.state.journal(session)
    assert entry.invalid_descriptor is invalid


def test_raw_and_scripted_descriptors_are_checked_as_served(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: raw
            raw_descriptor: [not, a, descriptor]
          - id: scripted
            describe: [{json: {status: ok}}, {text: not json}, {descriptor: true}]
        """
    )
    requests.get(server.skill_url("raw"), timeout=10)
    for _ in range(3):
        requests.get(server.skill_url("scripted"), timeout=10)
    requests.post(server.invoke_url("raw"), timeout=10)  # not a descriptor request
    assert [e.invalid_descriptor for e in server.state.journal()] == [
        True,
        True,
        True,
        False,
        False,
    ]
