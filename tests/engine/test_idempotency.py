"""A skill that honours Idempotency-Key: a retry gets the key's first answer, from outside.

``pay`` declares ``idempotency_key: true``: its first invocation runs (and,
with ``after:``, loses its answer), and a retry carrying the same key and body
gets that first answer (status, headers, body) without running again; the same
key with another body gets 422, a retry while the first still runs 409.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import requests

import mockskill
from mockskill.engine import idempotency
from mockskill.engine.incoming import Incoming
from mockskill.engine.matching import Miss, Target
from mockskill.scenario.model import Reply

SCENARIO = """
name: payments
skills:
  - id: pay
    idempotency_key: true
    invoke:
      - {status: 201, json: {payment: pay_1}, headers: {Location: /payments/pay_1},
         after: {error: EXECUTION_TIMEOUT}}
      - {status: 201, json: {payment: pay_2}}
  - id: flaky
    idempotency_key: true
    invoke:
      - {error: ENDPOINT_UNREACHABLE}
      - {json: {done: 1}}
  - id: slow
    idempotency_key: true
    invoke: {json: {done: true}, delay: 800}
  - id: plain
    invoke:
      - {json: {n: 1}}
      - {json: {n: 2}}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[mockskill.Server]:
    with mockskill.Server(SCENARIO) as running:
        yield running


def invoke(
    server: mockskill.Server, skill: str, session: str, key: str | None, body: object
) -> requests.Response:
    headers = {"Mockskill-Session": session}
    if key is not None:
        headers["Idempotency-Key"] = key
    return requests.post(f"{server.url}/skills/{skill}/invoke", json=body, headers=headers)


def test_a_retry_with_the_same_key_and_body_gets_the_first_answer_again(
    server: mockskill.Server,
) -> None:
    lost = invoke(server, "pay", "same", "k-1", {"amount": 5})
    assert lost.status_code == 504  # the skill ran; its answer was lost (after:)
    again = invoke(server, "pay", "same", "k-1", {"amount": 5})
    assert again.status_code == 201
    assert again.json() == {"payment": "pay_1"}
    assert again.headers["Location"] == "/payments/pay_1"
    assert again.headers["Idempotent-Replayed"] == "true"
    once_more = invoke(server, "pay", "same", "k-1", {"amount": 5})
    assert (once_more.status_code, once_more.content) == (201, again.content)
    ran, *replays = server.journal("same")
    assert (ran.executed, ran.replayed, ran.idempotency_key) == (True, False, "k-1")
    assert [(e.executed, e.replayed, e.step) for e in replays] == [(False, True, None)] * 2


def test_a_replay_does_not_move_the_sequence_and_a_new_key_runs_its_next_step(
    server: mockskill.Server,
) -> None:
    invoke(server, "pay", "next", "k-1", {"amount": 5})
    invoke(server, "pay", "next", "k-1", {"amount": 5})  # replayed
    fresh = invoke(server, "pay", "next", "k-2", {"amount": 5})
    assert (fresh.status_code, fresh.json()) == (201, {"payment": "pay_2"})
    assert "Idempotent-Replayed" not in fresh.headers
    assert [e.step for e in server.journal("next")] == [0, None, 1]


def test_the_same_key_with_another_body_is_422_in_the_unified_body(
    server: mockskill.Server,
) -> None:
    invoke(server, "pay", "other-body", "k-1", {"amount": 5})
    refused = invoke(server, "pay", "other-body", "k-1", {"amount": 500})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["idempotency_key"] == "k-1"
    assert "another request body" in error["message"]
    last = server.journal("other-body")[-1]
    assert (last.status, last.executed, last.replayed) == (422, False, False)


def test_a_retry_while_the_first_still_runs_is_409_with_retry_advice(
    server: mockskill.Server,
) -> None:
    matched = threading.Event()

    def seen(request: Incoming, target: Target | Miss) -> None:
        if request.headers.get("mockskill-session") == "in-flight":
            matched.set()

    server.engine.matched = seen
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(invoke, server, "slow", "in-flight", "k-1", {})
            # Decided (and the key reserved) on the loop before it reads the next request.
            assert matched.wait(5)
            server.engine.matched = None
            busy = invoke(server, "slow", "in-flight", "k-1", {})
            assert first.result().status_code == 200
    finally:
        server.engine.matched = None
    assert busy.status_code == 409
    error = busy.json()["error"]
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["details"]["in_flight"] is True
    assert 0 < error["retry"]["suggested_delay_ms"] <= 800
    assert int(busy.headers["Retry-After"]) >= 1
    after = invoke(server, "slow", "in-flight", "k-1", {})
    assert (after.status_code, after.headers["Idempotent-Replayed"]) == (200, "true")


def test_a_key_whose_attempt_did_not_run_is_free_for_the_retry(
    server: mockskill.Server,
) -> None:
    failed = invoke(server, "flaky", "not-run", "k-1", {})
    assert failed.status_code == 503  # an error step: the skill never ran
    retry = invoke(server, "flaky", "not-run", "k-1", {})
    assert (retry.status_code, retry.json()) == (200, {"done": 1})
    assert [(e.executed, e.replayed) for e in server.journal("not-run")] == [
        (False, False),
        (True, False),
    ]


def test_keys_are_per_session_and_a_reset_forgets_them(server: mockskill.Server) -> None:
    invoke(server, "pay", "a", "k-1", {"amount": 5})
    other = invoke(server, "pay", "b", "k-1", {"amount": 5})
    assert other.status_code == 504  # session b's own first run
    server.reset("a")
    fresh = invoke(server, "pay", "a", "k-1", {"amount": 5})
    assert fresh.status_code == 504
    assert "Idempotent-Replayed" not in fresh.headers


@pytest.mark.parametrize("key", ["", "k" * (idempotency.MAX_KEY + 1)])
def test_an_empty_or_overlong_key_is_400_in_the_unified_body(
    server: mockskill.Server, key: str
) -> None:
    with httpx.Client(base_url=server.url) as client:
        answer = client.post(
            "/skills/pay/invoke",
            json={},
            headers={"Mockskill-Session": "bad-key", "Idempotency-Key": key},
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "VALIDATION_ERROR"
    assert f"1 to {idempotency.MAX_KEY} characters" in answer.json()["error"]["message"]


def test_a_skill_that_does_not_declare_it_runs_every_request(server: mockskill.Server) -> None:
    first = invoke(server, "plain", "plain", "k-1", {})
    second = invoke(server, "plain", "plain", "k-1", {})
    assert [json.loads(r.content) for r in (first, second)] == [{"n": 1}, {"n": 2}]
    assert [(e.executed, e.replayed) for e in server.journal("plain")] == [(True, False)] * 2


def test_a_replayed_answer_is_the_first_one_even_when_its_body_is_binary() -> None:
    reply = idempotency.decoded(
        idempotency.encoded(Reply(200, (("X-A", "1"),), b"\x00\xff", "image/png"))
    )
    assert (reply.status, reply.body, reply.content_type) == (200, b"\x00\xff", "image/png")
    assert reply.headers == (("X-A", "1"), ("Idempotent-Replayed", "true"))


def test_replicas_sharing_redis_replay_each_others_first_answer(redis_url: str) -> None:
    with (
        mockskill.Server(SCENARIO, state=redis_url) as one,
        mockskill.Server(SCENARIO, state=redis_url) as two,
    ):
        lost = invoke(one, "pay", "shared", "k-1", {"amount": 5})
        assert lost.status_code == 504
        again = invoke(two, "pay", "shared", "k-1", {"amount": 5})
        assert (again.status_code, again.json()) == (201, {"payment": "pay_1"})
        assert again.headers["Idempotent-Replayed"] == "true"
        refused = invoke(two, "pay", "shared", "k-1", {"amount": 6})
        assert refused.status_code == 422
        fresh = invoke(one, "pay", "shared", "k-2", {"amount": 5})
        assert (fresh.status_code, fresh.json()) == (201, {"payment": "pay_2"})
        # The shared journal: both replicas', each once its flusher has sent it.
        deadline = time.monotonic() + 10
        while len(entries := one.journal("shared")) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        # (In the order they came: each replica's batch lands in the stream as it is flushed.)
        entries.sort(key=lambda e: e.started)
        assert [(e.status, e.executed, e.replayed) for e in entries] == [
            (504, True, False),
            (201, False, True),
            (422, False, False),
            (201, True, False),
        ]
