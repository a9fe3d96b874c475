"""The retry audit, rule by rule, over real journals: a real server, real clients, real waits.

Each test plays a consumer with requests (sleeping what the consumer under
test would sleep) and reads the verdict from ``mockskill.audit.report``
over the server's journal, or from ``GET /__admin/report``. Waits are
chosen far from the rules' bounds (this runs on shared, noisy machines):
a measured wait is never shorter than the consumer's sleep, only longer.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
import tenacity
import urllib3
from conftest import EVERY_FAILURE

from mockskill import Server
from mockskill.audit import (
    RULES,
    TASK_ROWS,
    AttemptOutcome,
    Policy,
    acted_on,
    assert_clean,
    chains,
    outcome,
    report,
)
from mockskill.engine.state import Entry
from mockskill.protocol.catalog import CODES
from mockskill.scenario.model import FAULTS

Serve = Callable[..., Server]

SCENARIO = """
    name: audit
    auth:
      tokens:
        - {token: good-token, scopes: [skill:invoke]}
        - {token: narrow-token, scopes: [skill:read]}
    skills:
      - id: down
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 100, max_attempts: 5}}
      - id: patient
        invoke: {error: EXECUTION_TIMEOUT, retry: {suggested_delay_ms: 400, max_attempts: 3}}
      - id: limited
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 50, max_attempts: 2}}
      - id: strict
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 300, max_attempts: 2}}
      - id: steady
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 250, max_attempts: 5}}
      - id: recovers
        invoke:
          - error: ENDPOINT_UNREACHABLE
            retry: {suggested_delay_ms: 100, max_attempts: 4}
            times: 2
          - json: {result: ok}
      - id: no-advice
        invoke: {error: ENDPOINT_UNREACHABLE, retry: null}
      - id: guarded
        requires: true
      - id: guarded-down
        requires: true
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 50, max_attempts: 2}}
      - id: next-gen
        descriptor: {protocol_version: 2.0.0}
      - id: broken
        descriptor: {capability_type: unknown_type}
      - id: fine
      - id: reset
        invoke: [{fault: CONNECTION_RESET_BY_PEER}, {json: {result: ok}}]
      - id: hang
        invoke: {hang: 5000}
      - id: delayed
        invoke: {delay: 5000, json: {result: late}}
      - id: runs-long
        invoke: {execution: 5000, json: {result: late}}
      - id: dribble
        invoke: {dribble: {chunks: 2, over: 4000}, json: {result: slowly}}
      - id: slow-fail
        invoke: {delay: 300, error: ENDPOINT_UNREACHABLE}
      - id: lowers-advice
        invoke:
          - error: EXECUTION_TIMEOUT
            retry: {suggested_delay_ms: 400, max_attempts: 5}
          - error: ENDPOINT_UNREACHABLE
            retry: {suggested_delay_ms: 100, max_attempts: 5}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


class Consumer:
    """A consumer in a session of its own that sleeps exactly what it is told to."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.session = f"audit-{uuid.uuid4().hex[:10]}"
        self.headers = {"Mockskill-Session": self.session}

    def invoke(self, skill: str, **kwargs: Any) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 10)
        return requests.post(self.server.invoke_url(skill), headers=headers, **kwargs)

    def describe(self, skill: str, **kwargs: Any) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return requests.get(self.server.skill_url(skill), headers=headers, timeout=10, **kwargs)

    def retry(self, skill: str, waits: list[float], **kwargs: Any) -> list[int]:
        """Invoke *skill* once, then again after each wait (seconds); the statuses."""
        statuses = [self.invoke(skill, **kwargs).status_code]
        for wait in waits:
            time.sleep(wait)
            statuses.append(self.invoke(skill, **kwargs).status_code)
        return statuses

    def report(self, policy: Policy | None = None) -> dict[str, Any]:
        journal = self.server.state.journal(self.session)
        (session,) = report(journal, policy or Policy())["sessions"]
        assert session["session"] == self.session
        return dict(session)

    def findings(self, policy: Policy | None = None) -> list[dict[str, Any]]:
        return list(self.report(policy)["findings"])

    def ids(self) -> list[int]:
        return [e.id for e in self.server.state.journal(self.session)]

    def wait_for(self, n: int, within: float = 3.0) -> None:
        """Until *n* requests are recorded (a request the client left is recorded when seen)."""
        deadline = time.monotonic() + within
        while len(self.server.state.journal(self.session)) < n:
            assert time.monotonic() < deadline, "the journal did not record the requests"
            time.sleep(0.02)


@pytest.fixture
def consumer(server: Server) -> Consumer:
    return Consumer(server)


def rules(findings: list[dict[str, Any]]) -> list[str]:
    return [f["rule"] for f in findings]


# -- chains -----------------------------------------------------------------------------


def test_a_consumer_that_backs_off_as_advised_is_clean(consumer: Consumer) -> None:
    assert consumer.retry("recovers", [0.15, 0.3]) == [503, 503, 200]
    session = consumer.report()
    assert session["clean"] is True
    assert session["findings"] == []
    assert session["requests"] == 3
    (chain,) = session["chains"]
    assert chain["endpoint"] == "POST /skills/recovers/invoke"
    assert chain["skill"] == "recovers"
    attempts = chain["attempts"]
    assert [a["id"] for a in attempts] == consumer.ids()
    assert [a["status"] for a in attempts] == [503, 503, 200]
    assert [a["error_code"] for a in attempts] == ["ENDPOINT_UNREACHABLE"] * 2 + [None]
    assert [a["retryable"] for a in attempts] == [True, True, None]
    assert [a["expected_wait_ms"] for a in attempts] == [None, 100, 200]
    assert attempts[0]["wait_ms"] is None
    assert attempts[0]["offset_ms"] == 0
    assert 150 <= attempts[1]["wait_ms"] < 2000
    assert 300 <= attempts[2]["wait_ms"] < 2000
    assert attempts[2]["offset_ms"] >= 450
    assert attempts[0]["retry"] == {"suggested_delay_ms": 100, "max_attempts": 4}
    assert attempts[1]["changed"] == []


def test_a_success_ends_a_chain_and_other_endpoints_do_not_break_one(consumer: Consumer) -> None:
    consumer.invoke("recovers")
    consumer.describe("recovers")  # in between: not an attempt at the same endpoint
    time.sleep(0.15)
    consumer.invoke("recovers")
    time.sleep(0.3)
    consumer.invoke("recovers")  # 200: the chain ends
    consumer.invoke("recovers")  # a new chain (its step is the last, 200 again)
    lengths = [(c["endpoint"], len(c["attempts"])) for c in consumer.report()["chains"]]
    assert lengths == [
        ("POST /skills/recovers/invoke", 3),
        ("GET /skills/recovers", 1),
        ("POST /skills/recovers/invoke", 1),
    ]
    assert consumer.findings() == []


def test_overlapping_requests_are_not_retries_of_each_other(
    server: Server, consumer: Consumer
) -> None:
    threads = [threading.Thread(target=consumer.invoke, args=("slow-fail",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    session = consumer.report()
    assert [len(c["attempts"]) for c in session["chains"]] == [1, 1]
    assert session["findings"] == []


def test_a_retry_is_paired_with_the_attempt_it_does_not_overlap(consumer: Consumer) -> None:
    # A (slow, 300 ms) and B (while A runs) in parallel; then A again, right after A ended but
    # while B still runs: a retry of A, too soon. B's overlap does not hide it.
    first = threading.Thread(target=consumer.invoke, args=("slow-fail",))
    first.start()
    time.sleep(0.1)
    second = threading.Thread(target=consumer.invoke, args=("slow-fail",))
    second.start()
    first.join(timeout=10)
    consumer.invoke("slow-fail")
    second.join(timeout=10)
    a, b, again = sorted(consumer.server.state.journal(consumer.session), key=lambda e: e.started)
    assert again.started < b.finished  # it did overlap B
    session = consumer.report()
    assert [[x["id"] for x in c["attempts"]] for c in session["chains"]] == [
        [a.id, again.id],
        [b.id],
    ]
    (finding,) = session["findings"]
    assert finding["rule"] == "retry-too-soon"
    assert finding["attempts"] == [a.id, again.id]


# -- retry-too-soon, backoff-not-growing, too-many-attempts --------------------------------


def test_a_retry_sooner_than_the_advice_is_retry_too_soon(consumer: Consumer) -> None:
    assert consumer.retry("patient", [0.0, 0.85]) == [504, 504, 504]
    (finding,) = consumer.findings()
    first, second, third = consumer.ids()
    assert finding["rule"] == "retry-too-soon"
    assert finding["endpoint"] == "POST /skills/patient/invoke"
    assert finding["session"] == consumer.session
    assert finding["attempts"] == [first, second]  # the 0.85 s wait (owed 800 ms) was enough
    assert f"#{second} waited" in finding["found"]
    assert f"after #{first}" in finding["found"]
    assert "400 ms" in finding["expected"]
    assert "Retry-After: 1 s" in finding["expected"]
    assert "Retry-After" in finding["fix"]
    assert third not in finding["attempts"]


def test_waits_that_do_not_double_are_backoff_not_growing(consumer: Consumer) -> None:
    # The advice each time (250 ms), but the 2nd and 3rd retries are owed 500 and 1000 ms.
    consumer.retry("steady", [0.3, 0.3, 0.3])
    (finding,) = consumer.findings()
    ids = consumer.ids()
    assert finding["rule"] == "backoff-not-growing"
    assert finding["attempts"] == ids[1:]
    assert "owed 500 ms" in finding["found"]
    assert "owed 1000 ms" in finding["found"]
    attempts = consumer.report()["chains"][0]["attempts"]
    assert [a["expected_wait_ms"] for a in attempts] == [None, 250, 500, 1000]


def test_waits_within_the_tolerance_pass_and_waits_outside_do_not(consumer: Consumer) -> None:
    # 400 ms advised; the tolerance is min(50 ms, 10 %) = 40 ms: 365 ms passes, 200 ms does not.
    consumer.retry("patient", [0.365])
    assert consumer.findings() == []
    hasty = Consumer(consumer.server)
    hasty.retry("patient", [0.2])
    assert rules(hasty.findings()) == ["retry-too-soon"]
    # The policy sets the tolerance: min(250 ms, 90 %) lets 200 ms pass.
    assert hasty.findings(Policy(tolerance_ms=250, tolerance_ratio=0.9)) == []
    # Small advice, small tolerance: 10 % of 100 ms is 10 ms, so no wait is not enough.
    prompt = Consumer(consumer.server)
    prompt.retry("down", [0.0])
    assert rules(prompt.findings()) == ["retry-too-soon"]


def test_the_backoff_may_grow_from_advice_the_provider_lowered(consumer: Consumer) -> None:
    # 504 advising 400 ms, then 503s advising 100 ms: a consumer that doubles the latest advice
    # waits 400, then 100 * 2 = 200 ms. It followed the provider; the first advice doubled
    # (800 ms) is not owed.
    consumer.retry("lowers-advice", [0.45, 0.25, 0.45])
    assert consumer.findings() == []
    attempts = consumer.report()["chains"][0]["attempts"]
    assert [a["expected_wait_ms"] for a in attempts] == [None, 400, 200, 400]
    # Still doubling from the lowered advice: the advice alone (120 ms of 200) is not enough.
    hasty = Consumer(consumer.server)
    hasty.retry("lowers-advice", [0.45, 0.12])
    (finding,) = hasty.findings()
    assert finding["rule"] == "backoff-not-growing"
    assert "owed 200 ms" in finding["found"]


def test_more_attempts_than_max_attempts_is_too_many_attempts(consumer: Consumer) -> None:
    consumer.retry("limited", [0.06, 0.12, 0.24])  # 4 attempts, the advice allows 2
    (finding,) = consumer.findings()
    ids = consumer.ids()
    assert finding["rule"] == "too-many-attempts"
    assert finding["attempts"] == ids[2:]
    assert "4 attempts where the advice allows 2" in finding["message"]
    assert "max_attempts = 2" in finding["expected"]
    assert "stop_after_attempt" in finding["fix"]


def test_attempts_are_counted_from_the_first_retryable_failure(consumer: Consumer) -> None:
    bearer = {"Authorization": "Bearer good-token"}
    assert consumer.invoke("guarded-down").status_code == 401  # not counted: not retryable
    assert consumer.retry("guarded-down", [0.06, 0.12], headers=bearer) == [503] * 3
    (finding,) = consumer.findings()
    assert finding["rule"] == "too-many-attempts"
    assert finding["message"] == "3 attempts where the advice allows 2"
    assert finding["attempts"] == consumer.ids()[3:]
    (chain,) = consumer.report()["chains"]
    assert [a["retryable"] for a in chain["attempts"]] == [False, True, True, True]
    assert [a["expected_wait_ms"] for a in chain["attempts"]] == [None, None, 50, 100]


def test_stopping_at_max_attempts_is_fine(consumer: Consumer) -> None:
    consumer.retry("limited", [0.06])
    assert consumer.findings() == []


def test_without_advice_the_chapters_initial_delay_is_owed(consumer: Consumer) -> None:
    consumer.retry("no-advice", [0.2, 0.4])
    attempts = consumer.report()["chains"][0]["attempts"]
    assert [a["expected_wait_ms"] for a in attempts] == [None, 1000, 2000]
    (finding,) = consumer.findings()
    assert finding["rule"] == "retry-too-soon"
    assert "initial delay (1000 ms)" in finding["expected"]
    # The policy says what is owed: with a 100 ms initial delay, these waits are right.
    assert consumer.findings(Policy(initial_delay_ms=100)) == []


# -- non-retryable categories ----------------------------------------------------------


def test_auth_required_retried_unchanged_is_a_finding(consumer: Consumer) -> None:
    assert consumer.retry("guarded", [0.0]) == [401, 401]
    (finding,) = consumer.findings()
    assert finding["rule"] == "non-retryable-retried"
    assert finding["attempts"] == consumer.ids()
    assert finding["message"] == "AUTH_REQUIRED retried unchanged (1 retry)"
    assert "same credential (none)" in finding["found"]
    assert "new credentials" in finding["expected"]
    assert "credentials must be supplied" in finding["fix"]


def test_auth_required_retried_with_credentials_is_fine(consumer: Consumer) -> None:
    assert consumer.invoke("guarded").status_code == 401
    bearer = {"Authorization": "Bearer good-token"}
    assert consumer.invoke("guarded", headers=bearer).status_code == 200
    session = consumer.report()
    assert session["findings"] == []
    assert session["chains"][0]["attempts"][1]["changed"] == ["credential"]


def test_a_request_with_another_body_is_another_operation_not_a_retry(
    consumer: Consumer,
) -> None:
    # A retry is the same request again: a batch's next item is not a retry of the last one.
    consumer.invoke("guarded", json={"text": "one"})
    consumer.invoke("guarded", json={"text": "two"})
    assert [len(c["attempts"]) for c in consumer.report()["chains"]] == [1, 1]
    assert consumer.findings() == []
    consumer.invoke("guarded", json={"text": "one"})  # the first one again, unchanged
    (finding,) = consumer.findings()
    assert finding["rule"] == "non-retryable-retried"
    first, _, again = consumer.ids()
    assert finding["attempts"] == [first, again]
    attempts = consumer.report()["chains"][0]["attempts"]
    assert attempts[1]["changed"] == []


def test_permission_denied_retried_with_the_same_token_is_a_finding(consumer: Consumer) -> None:
    narrow = {"Authorization": "Bearer narrow-token"}
    assert consumer.retry("guarded", [0.0], headers=narrow) == [403, 403]
    assert rules(consumer.findings()) == ["non-retryable-retried"]
    assert "PERMISSION_DENIED" in consumer.findings()[0]["message"]
    other = Consumer(consumer.server)
    other.invoke("guarded", headers=narrow)
    assert other.invoke("guarded", headers={"Authorization": "Bearer good-token"}).ok
    assert other.findings() == []


def test_version_incompatible_retried_with_the_same_version_is_a_finding(
    consumer: Consumer,
) -> None:
    old = {"Skill-Protocol-Version": "1.4.0"}
    assert consumer.retry("next-gen", [0.0], headers=old) == [422, 422]
    (finding,) = consumer.findings()
    assert finding["rule"] == "non-retryable-retried"
    assert "Skill-Protocol-Version (1.4.0)" in finding["found"]
    upgraded = Consumer(consumer.server)
    upgraded.invoke("next-gen", headers=old)
    assert upgraded.invoke("next-gen", headers={"Skill-Protocol-Version": "2.0.0"}).ok
    assert upgraded.findings() == []


def test_skill_not_found_asked_again_is_a_finding(consumer: Consumer) -> None:
    for _ in range(3):
        assert consumer.describe("no-such-skill").status_code == 404
    (finding,) = consumer.findings()
    assert finding["rule"] == "non-retryable-retried"
    assert finding["endpoint"] == "GET /skills/no-such-skill"
    assert finding["message"] == "SKILL_NOT_FOUND retried unchanged (2 retries)"
    assert finding["attempts"] == consumer.ids()


def test_no_timing_rule_applies_after_a_non_retryable_error(consumer: Consumer) -> None:
    consumer.invoke("guarded")
    for _ in range(6):  # no wait, far beyond any max_attempts: only the one rule
        consumer.invoke("guarded", headers={"Authorization": f"Bearer {uuid.uuid4().hex}"})
    assert consumer.findings() == []


# -- invalid descriptors (the consumer's VALIDATION_ERROR) ---------------------------------


def test_an_invalid_descriptor_is_marked_and_counted(server: Server, consumer: Consumer) -> None:
    assert consumer.describe("broken").status_code == 200
    assert consumer.describe("fine").status_code == 200
    broken, fine = server.state.journal(consumer.session)
    assert broken.invalid_descriptor is True
    assert fine.invalid_descriptor is False
    session = consumer.report()
    assert session["coverage"]["categories"]["VALIDATION_ERROR"] == 1
    assert session["findings"] == []  # a consumer that stops there did right


def test_fetching_an_invalid_descriptor_again_is_a_finding(consumer: Consumer) -> None:
    consumer.describe("broken")
    consumer.describe("broken")
    (finding,) = consumer.findings()
    assert finding["rule"] == "non-retryable-retried"
    assert finding["endpoint"] == "GET /skills/broken"
    assert "VALIDATION_ERROR" in finding["message"]
    assert "must be fixed" in finding["expected"]


def test_invoking_a_skill_whose_descriptor_is_invalid_is_a_finding(consumer: Consumer) -> None:
    consumer.describe("broken")
    consumer.invoke("broken")
    consumer.invoke("broken")
    (finding,) = consumer.findings()
    describe, *invokes = consumer.ids()
    assert finding["rule"] == "non-retryable-retried"
    assert finding["endpoint"] == "POST /skills/broken/invoke"
    assert finding["attempts"] == [describe, *invokes]
    assert finding["message"] == "skill 'broken' invoked after its descriptor failed validation"


def test_a_forced_validation_error_serves_an_invalid_descriptor(consumer: Consumer) -> None:
    consumer.describe("fine", headers={"Mockskill-Error": "VALIDATION_ERROR"})
    (entry,) = consumer.server.state.journal(consumer.session)
    assert entry.invalid_descriptor is True
    assert consumer.report()["coverage"]["categories"]["VALIDATION_ERROR"] == 1


# -- faults and timeouts ---------------------------------------------------------------


def test_a_retry_right_after_a_transport_fault_is_too_soon(consumer: Consumer) -> None:
    with pytest.raises(requests.ConnectionError):
        consumer.invoke("reset")
    assert consumer.invoke("reset").status_code == 200
    session = consumer.report()
    first, second = session["chains"][0]["attempts"]
    assert first["fault"] == "CONNECTION_RESET_BY_PEER"
    assert first["status"] is None
    assert first["retryable"] is True
    assert first["stands_for"] == "ENDPOINT_UNREACHABLE"
    assert second["expected_wait_ms"] == 1000
    assert rules(session["findings"]) == ["retry-too-soon"]
    assert "CONNECTION_RESET_BY_PEER" in session["findings"][0]["found"]
    assert session["coverage"]["faults"]["CONNECTION_RESET_BY_PEER"] == 1


@pytest.mark.parametrize(
    ("skill", "kind"),
    [("hang", "hang"), ("delayed", "delay"), ("runs-long", "execution"), ("dribble", "dribble")],
)
def test_the_consumers_real_timeout_is_reported(consumer: Consumer, skill: str, kind: str) -> None:
    with pytest.raises(requests.exceptions.RequestException):
        _ = consumer.invoke(skill, timeout=(5, 0.5)).content
    consumer.wait_for(1)
    session = consumer.report()
    (timeout,) = session["timeouts"]
    (entry,) = consumer.server.state.journal(consumer.session)
    assert timeout["id"] == entry.id
    assert timeout["endpoint"] == f"POST /skills/{skill}/invoke"
    assert timeout["kind"] == kind
    assert 450 <= timeout["client_timeout_ms"] < 3000
    (attempt,) = session["chains"][0]["attempts"]
    assert attempt["client_timeout_ms"] == timeout["client_timeout_ms"]
    assert attempt["stands_for"] == "EXECUTION_TIMEOUT"


def test_a_retry_right_after_the_client_timed_out_is_too_soon(consumer: Consumer) -> None:
    for _ in range(2):
        with pytest.raises(requests.ReadTimeout):
            consumer.invoke("hang", timeout=(5, 0.3))
    consumer.wait_for(2)
    session = consumer.report()
    assert [len(c["attempts"]) for c in session["chains"]] == [2]
    assert rules(session["findings"]) == ["retry-too-soon"]
    assert len(session["timeouts"]) == 2


# -- slow bodies: judged by what the consumer had when it acted ---------------------------

SLOW = """
    name: slow
    skills:
      - id: slow-down
        invoke:
          error: ENDPOINT_UNREACHABLE
          retry: {suggested_delay_ms: 700, max_attempts: 2}
          dribble: {chunks: 4, over: 400}
"""
"""A 503 whose status line (with ``Retry-After: 1``) comes at once and whose body takes
400 ms; advice other than the defaults of what a no-answer would stand for."""


def slow_consumer(serve: Serve) -> Consumer:
    return Consumer(serve(SLOW))


def status_line_waits(consumer: Consumer) -> list[float]:
    """Each retry's wait_ms, checked to be measured from the previous status line."""
    entries = consumer.server.state.journal(consumer.session)
    ((_, *retries),) = [c["attempts"] for c in consumer.report()["chains"]]
    assert len(retries) == len(entries) - 1
    for before, attempt in zip(entries, retries, strict=False):
        assert before.headers_sent is not None
        assert attempt["wait_from"] == before.headers_sent
    return [a["wait_ms"] for a in retries]


def assert_too_soon_and_too_many(consumer: Consumer, *, on_status_line: bool) -> None:
    """Exactly what three quick attempts at slow-down deserve: both findings, no timeout."""
    consumer.wait_for(3)
    session = consumer.report()
    ids = consumer.ids()
    assert [[a["id"] for a in c["attempts"]] for c in session["chains"]] == [ids]
    too_soon, too_many = session["findings"]
    assert too_soon["rule"] == "retry-too-soon"
    assert too_soon["attempts"] == ids
    assert "(each after 503 ENDPOINT_UNREACHABLE, which advised 700 ms)" in too_soon["found"]
    assert ("'s status line" in too_soon["found"]) is on_status_line
    assert "no answer" not in too_soon["found"]
    assert too_many["rule"] == "too-many-attempts"
    assert too_many["message"] == "3 attempts where the advice allows 2"
    assert too_many["attempts"] == ids[2:]
    assert session["timeouts"] == []  # it had its answer: it did not time out
    assert session["coverage"]["categories"]["ENDPOINT_UNREACHABLE"] == 3
    attempts = session["chains"][0]["attempts"]
    assert [a["stands_for"] for a in attempts] == ["ENDPOINT_UNREACHABLE"] * 3
    assert [a["client_timeout_ms"] for a in attempts] == [None] * 3


def test_a_retry_on_the_status_line_of_a_slow_failure_is_judged_from_that_line(
    serve: Serve,
) -> None:
    # A client that reads the status line, drops the connection, waits 100 ms and retries:
    # it waited 100 ms after a 503 (not 0 ms after "no answer"), too soon, once too often.
    consumer = slow_consumer(serve)
    for attempt in range(3):
        if attempt:
            time.sleep(0.1)
        response = consumer.invoke("slow-down", stream=True)
        assert (response.status_code, response.headers["Retry-After"]) == (503, "1")
        response.close()  # the body unread
    assert_too_soon_and_too_many(consumer, on_status_line=True)
    assert all(100 <= wait < 2000 for wait in status_line_waits(consumer))


def test_a_retrier_that_leaves_slow_bodies_open_is_not_read_as_concurrent(
    serve: Serve,
) -> None:
    # As aiohttp-retry does: retry on the status, leaving the unread response open, so
    # each body is still coming (and then complete) when the next attempt starts.
    consumer = slow_consumer(serve)
    opened: list[requests.Response] = []

    def attempt() -> requests.Response:
        opened.append(consumer.invoke("slow-down", stream=True))
        return opened[-1]

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_result(lambda r: r.status_code == 503),
        wait=tenacity.wait_fixed(0.05),
        stop=tenacity.stop_after_attempt(3),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    last = retrying(attempt)
    assert last.status_code == 503
    assert len(opened) == 3
    consumer.wait_for(3)
    for response in opened:
        response.close()
    entries = consumer.server.state.journal(consumer.session)
    assert all(e.client_left is None for e in entries)  # each body was sent whole...
    assert entries[1].started < entries[0].finished  # ...after the next attempt began
    assert_too_soon_and_too_many(consumer, on_status_line=True)
    assert all(50 <= wait < 2000 for wait in status_line_waits(consumer))


def test_a_client_that_reads_a_slow_failure_whole_is_judged_from_its_last_byte(
    serve: Serve,
) -> None:
    # urllib3 reads (drains) the body of a status it retries, then retries at once.
    consumer = slow_consumer(serve)
    retries = urllib3.Retry(
        total=2,
        status_forcelist=[503],
        allowed_methods=None,
        backoff_factor=0,
        respect_retry_after_header=False,
        raise_on_status=False,
    )
    with urllib3.PoolManager(retries=retries) as pool:
        response = pool.request(
            "POST", consumer.server.invoke_url("slow-down"), headers=consumer.headers
        )
    assert response.status == 503
    assert response.json()["error"]["code"] == "ENDPOINT_UNREACHABLE"
    assert_too_soon_and_too_many(consumer, on_status_line=False)
    entries = consumer.server.state.journal(consumer.session)
    assert all(e.client_left is None for e in entries)
    retried = consumer.report()["chains"][0]["attempts"][1:]
    assert [a["wait_from"] for a in retried] == [e.finished for e in entries[:2]]
    # From the last byte: a few ms. From the status line it would be over 400 ms.
    assert all(a["wait_ms"] < 300 for a in retried)


def read_whole_answer(port: int, session: str) -> socket.socket:
    """POST slow-down on a bare socket and read the answer to its last byte; the socket."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        "POST /skills/slow-down/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
        f"Mockskill-Session: {session}\r\n\r\n".encode()
    )
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, body = received.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 503")
    return sock


def test_a_client_that_keeps_the_connection_after_a_whole_slow_body_is_judged_from_it(
    serve: Serve,
) -> None:
    # A pooling client may hold the connection after the last byte (the server closes it
    # later): a retry 1 ms after that byte is still a retry of the 503, not concurrent.
    consumer = slow_consumer(serve)
    held = []
    for attempt in range(3):
        if attempt:
            time.sleep(0.001)
        held.append(read_whole_answer(consumer.server.port, consumer.session))
    consumer.wait_for(3)
    for sock in held:
        sock.close()
    assert_too_soon_and_too_many(consumer, on_status_line=False)
    retried = consumer.report()["chains"][0]["attempts"][1:]
    assert all(a["wait_ms"] < 300 for a in retried)


def test_a_client_that_honours_a_slow_failures_advice_from_its_status_line_is_clean(
    serve: Serve,
) -> None:
    consumer = slow_consumer(serve)
    for attempt in range(2):
        if attempt:
            time.sleep(0.8)  # the advice: 700 ms (Retry-After: 1, rounded up)
        response = consumer.invoke("slow-down", stream=True)
        assert response.status_code == 503
        response.close()
    consumer.wait_for(2)
    session = consumer.report()
    assert session["findings"] == []
    assert session["timeouts"] == []
    (chain,) = session["chains"]
    assert [a["expected_wait_ms"] for a in chain["attempts"]] == [None, 700]
    assert session["coverage"]["categories"]["ENDPOINT_UNREACHABLE"] == 2


def attempt_at(started: float, **fields: Any) -> Entry:
    """A journal entry of an invoke at *started* (seconds), answered at once unless told."""
    values: dict[str, Any] = {
        "id": 1,
        "started": started,
        "finished": started,
        "session": "s",
        "method": "POST",
        "path": "/skills/x/invoke",
        "status": 503,
        "endpoint": "invoke",
    }
    return Entry(**{**values, **fields})


# A slow 503: status line at 1.0, last byte at 2.0 (or the client left at 1.5).
_SLOW_503 = {"headers_sent": 1.0, "finished": 2.0}
_LEFT_503 = {"headers_sent": 1.0, "finished": 1.5, "client_left": 1.5}
_LEFT_200 = {"headers_sent": 1.0, "finished": 1.5, "client_left": 1.5, "status": 200}


@pytest.mark.parametrize(
    ("previous", "retry_at", "acted"),
    [
        pytest.param({"finished": 1.0}, 0.5, None, id="before a whole answer: concurrent"),
        pytest.param({"finished": 1.0}, 1.2, 1.0, id="after a whole answer: from its end"),
        pytest.param(_SLOW_503, 0.5, None, id="before a slow 503's status line: concurrent"),
        pytest.param(_SLOW_503, 1.2, 1.0, id="during a slow 503's body: from its status line"),
        pytest.param(_SLOW_503, 2.1, 2.0, id="after a slow 503's last byte: from that byte"),
        pytest.param(_LEFT_503, 1.7, 1.0, id="after leaving a slow 503: from its status line"),
        pytest.param(_LEFT_200, 1.2, None, id="during a slow 200's body: concurrent"),
        pytest.param(_LEFT_200, 1.7, 1.5, id="after leaving a slow 200: from the hang-up"),
    ],
)
def test_a_retry_is_timed_from_what_the_consumer_had_of_the_previous_answer(
    previous: dict[str, Any], retry_at: float, acted: float | None
) -> None:
    assert acted_on(attempt_at(0.0, **previous), attempt_at(retry_at, id=2)) == acted


def test_only_a_success_whose_body_was_left_unread_is_no_answer() -> None:
    assert outcome(
        attempt_at(0.0, **_LEFT_503, error_code="ENDPOINT_UNREACHABLE")
    ) == AttemptOutcome(True, "ENDPOINT_UNREACHABLE", True)
    assert outcome(attempt_at(0.0, **_LEFT_200)) == AttemptOutcome(True, "EXECUTION_TIMEOUT", True)


# -- coverage --------------------------------------------------------------------------


def test_coverage_lists_what_a_session_met_and_what_it_missed(consumer: Consumer) -> None:
    consumer.invoke("down")
    consumer.invoke("guarded")
    with contextlib.suppress(requests.ConnectionError):
        consumer.invoke("reset")
    coverage = consumer.report()["coverage"]
    assert list(coverage["categories"]) == list(CODES)
    assert list(coverage["faults"]) == list(FAULTS)
    assert coverage["categories"]["ENDPOINT_UNREACHABLE"] == 1
    assert coverage["categories"]["AUTH_REQUIRED"] == 1
    assert coverage["faults"]["CONNECTION_RESET_BY_PEER"] == 1
    assert coverage["missing"]["categories"] == [
        c for c in CODES if c not in ("ENDPOINT_UNREACHABLE", "AUTH_REQUIRED")
    ]
    assert coverage["missing"]["faults"] == [f for f in FAULTS if f != "CONNECTION_RESET_BY_PEER"]
    assert coverage["complete"] is False


def test_walking_the_bundled_catalog_and_faults_covers_everything(bundled: Server) -> None:
    walker = Consumer(bundled)
    walker.describe("invalid-descriptor")
    for skill in EVERY_FAILURE:
        with contextlib.suppress(requests.RequestException):
            _ = walker.invoke(skill, headers={"Skill-Protocol-Version": "1.0.0"}).content
    coverage = walker.report()["coverage"]
    # Complete: a rate limit and a task's end are outside the chapter, only asked for by
    # name (RATE_LIMITED, TASK_FAILED, TASK_CANCELLED, ...).
    assert coverage["missing"] == {
        "categories": [],
        "faults": [],
        "rate_limited": ["RATE_LIMITED"],
        "tasks": list(TASK_ROWS),
        "cases": [],  # the bundled scenarios name no case
    }
    assert coverage["complete"] is True
    assert set(coverage["categories"].values()) == {1}


# -- the report ------------------------------------------------------------------------


def test_the_report_has_every_session_and_names_the_policy(server: Server) -> None:
    a, b = Consumer(server), Consumer(server)
    a.invoke("fine")
    b.retry("guarded", [0.0])
    a.invoke("fine")
    whole = report(server.state.journal(), now=1234.5)
    assert whole["generated"] == 1234.5
    assert whole["policy"] == {
        "initial_delay_ms": 1000,
        "tolerance_ms": 50,
        "tolerance_ratio": 0.1,
        "herd_chains": 3,
        "herd_window_ms": 20,
        "herd_window_ratio": 0.02,
        "herd_share": 2 / 3,
        "burst_ms": 100,
        "abandoned_ms": 5000,
        "idle_slack_ms": 250,
    }
    assert [s["session"] for s in whole["sessions"]] == [a.session, b.session]
    assert [s["requests"] for s in whole["sessions"]] == [2, 2]
    assert [s["clean"] for s in whole["sessions"]] == [True, False]
    assert whole["clean"] is False
    only_a = report(server.state.journal(), sessions=[a.session])
    assert [s["session"] for s in only_a["sessions"]] == [a.session]
    assert only_a["clean"] is True


def test_a_named_session_without_requests_is_reported_empty(server: Server) -> None:
    empty = report(server.state.journal(), sessions=["nobody"])
    (session,) = empty["sessions"]
    assert session["requests"] == 0
    assert session["chains"] == []
    assert session["coverage"]["complete"] is False
    with pytest.raises(AssertionError, match="session 'nobody' made no request"):
        assert_clean(empty)


def test_assert_clean_fails_on_a_report_of_no_session_at_all(server: Server) -> None:
    # The journal of a session that sent nothing is empty: so is its report.
    nothing = report(server.journal(f"nobody-{uuid.uuid4().hex}"))
    assert nothing["sessions"] == []
    with pytest.raises(AssertionError, match="no session made a request"):
        assert_clean(nothing)


def test_a_mistyped_session_is_told_the_sessions_that_exist(consumer: Consumer) -> None:
    consumer.invoke("down")
    typo = consumer.session + "x"
    (empty,) = report(consumer.server.journal(), sessions=[typo])["sessions"]
    assert empty["did_you_mean"][0] == consumer.session
    with pytest.raises(AssertionError, match=rf"did you mean {consumer.session!r}\?"):
        assert_clean(report(consumer.server.journal(), sessions=[typo]))


def test_the_http_verdict_of_a_session_that_sent_nothing_is_not_clean(
    consumer: Consumer,
) -> None:
    # docs/any-language.md gates on "clean" over HTTP: a mistyped session must not pass.
    consumer.invoke("down")
    url = f"{consumer.server.url}/__admin/report"
    typo = requests.get(url, params={"session": consumer.session + "x"}, timeout=10).json()
    (empty,) = typo["sessions"]
    assert (empty["requests"], empty["findings"]) == (0, [])
    assert (empty["clean"], typo["clean"]) == (False, False)
    assert empty["did_you_mean"][0] == consumer.session
    both = requests.get(
        url, params=[("session", consumer.session), ("session", "nobody")], timeout=10
    ).json()
    assert [s["clean"] for s in both["sessions"]] == [True, False]
    assert both["clean"] is False
    assert report([])["clean"] is False  # no session at all proves nothing either
    sent = requests.get(url, params={"session": consumer.session}, timeout=10).json()
    assert (sent["sessions"][0]["clean"], sent["clean"]) == (True, True)


def test_assert_clean_spells_out_every_finding(consumer: Consumer) -> None:
    consumer.retry("guarded", [0.0])
    consumer.retry("strict", [0.0, 0.0])
    whole = report(consumer.server.state.journal(consumer.session))
    with pytest.raises(AssertionError) as raised:
        assert_clean(whole)
    text = str(raised.value)
    lines = text.splitlines()
    assert lines[0] == f"mockskill retry audit: 3 findings in session {consumer.session!r}:"
    assert lines[1].startswith("  1. non-retryable-retried: AUTH_REQUIRED retried unchanged")
    assert "  2. retry-too-soon:" in text
    assert "  3. too-many-attempts:" in text
    for label in ("at:", "found:", "expected:", "fix:"):
        assert sum(line.strip().startswith(label) for line in lines) == 3


def test_assert_clean_can_require_coverage(consumer: Consumer) -> None:
    consumer.invoke("down")
    consumer.invoke("guarded")
    whole = report(consumer.server.state.journal(consumer.session))
    assert_clean(whole)
    assert_clean(whole, require_coverage=["AUTH_REQUIRED", "ENDPOINT_UNREACHABLE"])
    with pytest.raises(AssertionError, match=r"has not met PERMISSION_DENIED$"):
        assert_clean(whole, require_coverage=["AUTH_REQUIRED", "PERMISSION_DENIED"])
    with pytest.raises(AssertionError, match="has not met VALIDATION_ERROR, PERMISSION_DENIED"):
        assert_clean(whole, require_coverage=True)
    with pytest.raises(ValueError, match="not a category or a transport fault: AUTH"):
        assert_clean(whole, require_coverage=["AUTH"])


def test_chains_are_a_pure_function_of_the_entries(consumer: Consumer) -> None:
    consumer.retry("recovers", [0.15, 0.3])
    entries = consumer.server.state.journal(consumer.session)
    assert chains(reversed(entries)) == chains(entries) == [entries]
    assert report(entries, now=1.0) == report(list(entries), now=1.0)


# -- over HTTP ---------------------------------------------------------------------------


def test_get_admin_report_is_the_audit_of_the_journal(server: Server, consumer: Consumer) -> None:
    consumer.retry("guarded", [0.0])
    consumer.invoke("fine")
    response = requests.get(
        f"{server.url}/__admin/report", params={"session": consumer.session}, timeout=10
    )
    assert response.status_code == 200
    body = response.json()
    expected = report(server.state.journal(consumer.session), now=body["generated"])
    assert body == expected
    assert rules(body["sessions"][0]["findings"]) == ["non-retryable-retried"]
    assert abs(body["generated"] - time.time()) < 60


def test_get_admin_report_filters_by_skill_and_takes_a_policy(
    server: Server, consumer: Consumer
) -> None:
    consumer.retry("no-advice", [0.2])
    consumer.invoke("fine")
    url = f"{server.url}/__admin/report"
    params: dict[str, Any] = {"session": consumer.session, "skill": "no-advice"}
    body = requests.get(url, params=params, timeout=10).json()
    (session,) = body["sessions"]
    assert session["requests"] == 2
    assert rules(session["findings"]) == ["retry-too-soon"]
    lenient = requests.get(url, params={**params, "initial_delay_ms": "100"}, timeout=10).json()
    assert lenient["policy"]["initial_delay_ms"] == 100
    assert lenient["clean"] is True
    named = requests.get(url, params={"session": ["x", "y"]}, timeout=10).json()
    assert [s["session"] for s in named["sessions"]] == ["x", "y"]


@pytest.mark.parametrize(
    ("query", "parameter", "says"),
    [
        ({"sesion": "x"}, "sesion", "did you mean 'session'?"),
        ({"tolerance_ms": "-1"}, "tolerance_ms", "not a number of at least 0"),
        ({"tolerance_ratio": "1.5"}, "tolerance_ratio", "below 1.0"),
        ({"initial_delay_ms": "soon"}, "initial_delay_ms", "'soon'"),
    ],
)
def test_get_admin_report_refuses_a_bad_query(
    server: Server, query: dict[str, str], parameter: str, says: str
) -> None:
    response = requests.get(f"{server.url}/__admin/report", params=query, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_BAD_REQUEST"
    assert error["details"]["parameter"] == parameter
    assert says in error["message"]


def test_docs_audit_md_documents_every_rule() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    section = text.split("## The rules", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z-]+)` \|", section, re.MULTILINE)
    assert documented == list(RULES)


def test_mockskills_refusal_of_a_misspelt_error_header_is_no_attempt_retried(
    consumer: Consumer,
) -> None:
    """A test's own mistake (Mockskill-Error: AUTH_REQIRED, refused with a 400 by mockskill
    itself), then the consumer's request: the 400 was no answer of the skill's, so the
    consumer retried nothing and sent one request to the skill."""
    typo = consumer.invoke("fine", headers={"Mockskill-Error": "AUTH_REQIRED"})
    assert typo.status_code == 400
    assert typo.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"
    assert consumer.invoke("fine").status_code == 200
    session = consumer.report()
    assert session["findings"] == []
    assert [[a["status"] for a in c["attempts"]] for c in session["chains"]] == [[400], [200]]
    # the same after a request to the skill failed: the refusal neither continues nor
    # breaks its chain
    assert consumer.invoke("down").status_code == 503
    consumer.invoke("down", headers={"Mockskill-Error": "NOT_A_CODE"})
    consumer.invoke("down")
    chains = consumer.report()["chains"][2:]
    assert [[a["status"] for a in c["attempts"]] for c in chains] == [[503, 503], [400]]
