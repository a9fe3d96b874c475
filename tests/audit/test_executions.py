"""duplicate-execution: a retry that ran an operation again, behind a proxy or scripted.

A front mockskill forwards to a second mockskill (the provider, whose own
journal says what really ran). ``committed`` lets the provider run and then
answers the consumer EXECUTION_TIMEOUT ("commit then fail"); ``refused``
fails instead of calling the provider; ``busy`` is the provider's own
retryable error, relayed as it is. A consumer that retries ``committed``
without an ``Idempotency-Key``, or with a new one, ran the operation twice:
a finding. One that keeps the key is clean, and so are retries the provider
never saw or whose failure the provider itself answered. Without a provider,
a scripted step with ``after:`` ran and lost its answer the same way, and a
skill with ``idempotency_key: true`` answers a kept key from its first run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests

import mockskill
from mockskill.audit.executions import RULE

ADVICE = "retry: {suggested_delay_ms: 20, max_attempts: 5}"


@pytest.fixture(scope="module")
def provider() -> Iterator[mockskill.Server]:
    text = f"""
name: provider
skills:
  - id: committed
  - id: busy
    invoke: {{error: ENDPOINT_UNREACHABLE, {ADVICE}}}
  - id: refused
  - id: slow
    invoke: {{delay: 400, json: {{done: true}}}}
"""
    with mockskill.Server(text) as server:
        yield server


@pytest.fixture(scope="module")
def front(provider: mockskill.Server) -> Iterator[mockskill.Server]:
    up = provider.url
    text = f"""
name: front
skills:
  - id: committed
    invoke: {{proxy: {up}, after: {{error: EXECUTION_TIMEOUT, {ADVICE}}}}}
  - {{id: busy, proxy: {up}}}
  - id: refused
    invoke: {{error: ENDPOINT_UNREACHABLE, {ADVICE}}}
  - {{id: slow, proxy: {up}}}
"""
    with mockskill.Server(text) as server:
        yield server


def attempts(
    front: mockskill.Server, skill: str, session: str, keys: list[str | None]
) -> list[int]:
    """One operation sent once per key (None: without the header), 60 ms apart."""
    statuses = []
    for i, key in enumerate(keys):
        if i:
            time.sleep(0.06)  # more than the advice: the timing rules stay quiet
        headers = {"Mockskill-Session": session}
        if key is not None:
            headers["Idempotency-Key"] = key
        answer = requests.post(
            f"{front.url}/skills/{skill}/invoke", json={"input": {"n": 1}}, headers=headers
        )
        statuses.append(answer.status_code)
    return statuses


def findings(front: mockskill.Server, session: str) -> list[dict[str, Any]]:
    report = front.report(session)
    return [f for f in report["sessions"][0]["findings"] if f["rule"] == RULE]


def ran(provider: mockskill.Server, session: str) -> int:
    return len([e for e in provider.journal(session) if e.endpoint == "invoke"])


def test_a_retry_without_a_key_after_a_commit_then_fail_is_a_duplicate_execution(
    front: mockskill.Server, provider: mockskill.Server
) -> None:
    assert attempts(front, "committed", "no-key", [None, None]) == [504, 504]
    assert ran(provider, "no-key") == 2  # what the finding says: the provider ran it twice
    (finding,) = findings(front, "no-key")
    first, second = (e.id for e in front.journal("no-key"))
    assert finding["attempts"] == [first, second]
    assert finding["endpoint"] == "POST /skills/committed/invoke"
    assert f"#{second} reached the provider again without Idempotency-Key" in finding["found"]
    assert f"after #{first} had reached it" in finding["found"]
    assert "replaced by 504 EXECUTION_TIMEOUT" in finding["found"]
    assert "Idempotency-Key" in finding["fix"]
    assert not front.report("no-key")["sessions"][0]["clean"]


def test_the_same_key_on_every_attempt_is_clean(front: mockskill.Server) -> None:
    assert attempts(front, "committed", "same-key", ["op-1", "op-1", "op-1"]) == [504] * 3
    assert findings(front, "same-key") == []
    entries = front.journal("same-key")
    assert [e.upstream["idempotency_key"] for e in entries if e.upstream] == ["op-1"] * 3


def test_a_new_key_for_a_retry_is_a_duplicate_execution_and_says_to_keep_it(
    front: mockskill.Server,
) -> None:
    attempts(front, "committed", "new-key", ["op-1", "op-2"])
    (finding,) = findings(front, "new-key")
    assert "with Idempotency-Key 'op-2'" in finding["found"]
    assert "its Idempotency-Key was 'op-1'" in finding["found"]
    assert "keep the value when retrying" in finding["fix"]


def test_a_failure_the_provider_answered_itself_is_not_a_duplicate(
    front: mockskill.Server, provider: mockskill.Server
) -> None:
    assert attempts(front, "busy", "busy", [None, None]) == [503, 503]
    assert ran(provider, "busy") == 2
    assert findings(front, "busy") == []  # the provider said it did not run it


def test_retries_that_never_reached_the_provider_are_not_duplicates(
    front: mockskill.Server,
) -> None:
    assert attempts(front, "refused", "refused", [None, None]) == [503, 503]
    assert findings(front, "refused") == []


def test_a_retry_that_ran_again_is_one_finding_per_chain_naming_each_pair(
    front: mockskill.Server,
) -> None:
    attempts(front, "committed", "three", [None, None, None])
    (finding,) = findings(front, "three")
    ids = [e.id for e in front.journal("three")]
    assert finding["attempts"] == ids
    assert finding["message"].startswith("2 retries ran the operation on the provider again")


def test_a_retry_after_the_consumers_own_timeout_is_a_duplicate_execution(
    front: mockskill.Server, provider: mockskill.Server
) -> None:
    headers = {"Mockskill-Session": "timed-out"}
    for _ in range(2):  # the consumer gives up after 100 ms; the provider takes 400
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.post(f"{front.url}/skills/slow/invoke", json={}, headers=headers, timeout=0.1)
    deadline = time.monotonic() + 5  # the server journals a hang-up as soon as it sees it
    while len(front.journal("timed-out")) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    (finding,) = findings(front, "timed-out")
    assert "the consumer gone before the answer" in finding["found"]


# -- scripted skills: after: on a scripted step, and a skill that honours the key ----------


@pytest.fixture(scope="module")
def scripted() -> Iterator[mockskill.Server]:
    """No provider behind: ``charge`` honours Idempotency-Key, ``ship`` does not; each ran
    its first invocation and lost the answer (a reset, a truncated body, a timeout)."""
    text = f"""
name: scripted
skills:
  - id: charge
    idempotency_key: true
    invoke:
      - {{json: {{charge: ch_1}}, after: {{fault: CONNECTION_RESET_BY_PEER}}}}
      - {{json: {{charge: ch_2}}}}
  - id: ship
    invoke:
      - {{json: {{parcel: p_1}}, after: {{fault: TRUNCATED_BODY}}}}
      - {{json: {{parcel: p_2}}}}
  - id: book
    invoke:
      - {{json: {{booking: b_1}}, after: {{error: EXECUTION_TIMEOUT, {ADVICE}}}}}
      - {{json: {{booking: b_2}}}}
"""
    with mockskill.Server(text) as server:
        yield server


def retried(server: mockskill.Server, skill: str, session: str, keys: list[str | None]) -> Any:
    """The operation sent with each of *keys* (None: no header) until one is answered whole,
    as a consumer catching requests' errors does; the JSON of the answer it got."""
    for key in keys:
        headers = {"Mockskill-Session": session}
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            answer = requests.post(
                f"{server.url}/skills/{skill}/invoke", json={"amount": 5}, headers=headers
            )
        except requests.exceptions.ConnectionError:
            continue  # the reset, or the body cut short
        if answer.ok:
            return answer.json()
    raise AssertionError("no attempt was answered")


def test_a_consumer_keeping_its_key_after_a_reset_gets_the_first_answer_and_is_clean(
    scripted: mockskill.Server,
) -> None:
    assert retried(scripted, "charge", "kept", ["op-1", "op-1"]) == {"charge": "ch_1"}
    first, second = scripted.journal("kept")
    assert (first.fault, first.executed, first.replayed) == (
        "CONNECTION_RESET_BY_PEER",
        True,
        False,
    )
    assert (second.status, second.executed, second.replayed) == (200, False, True)
    assert second.step is None  # a replay takes no step: the sequence did not move
    assert findings(scripted, "kept") == []


def test_a_consumer_dropping_its_key_after_a_reset_ran_it_twice(
    scripted: mockskill.Server,
) -> None:
    assert retried(scripted, "charge", "dropped", ["op-1", None]) == {"charge": "ch_2"}
    (finding,) = findings(scripted, "dropped")
    first, second = (e.id for e in scripted.journal("dropped"))
    assert finding["attempts"] == [first, second]
    assert f"#{second} reached the provider again without Idempotency-Key" in finding["found"]
    assert "its answer replaced by the fault CONNECTION_RESET_BY_PEER" in finding["found"]
    assert "its Idempotency-Key was 'op-1'" in finding["found"]


def test_a_consumer_making_a_new_key_for_its_retry_ran_it_twice(
    scripted: mockskill.Server,
) -> None:
    assert retried(scripted, "charge", "renewed", ["op-1", "op-2"]) == {"charge": "ch_2"}
    (finding,) = findings(scripted, "renewed")
    assert "with Idempotency-Key 'op-2'" in finding["found"]
    assert "keep the value when retrying" in finding["fix"]


def test_httpx_retrying_a_truncated_answer_without_a_key_ran_it_twice(
    scripted: mockskill.Server,
) -> None:
    headers = {"Mockskill-Session": "cut"}
    with httpx.Client(base_url=scripted.url, headers=headers) as client:
        with pytest.raises(httpx.RemoteProtocolError):  # the skill's answer, cut short
            client.post("/skills/ship/invoke", json={"to": "x"})
        assert client.post("/skills/ship/invoke", json={"to": "x"}).json() == {"parcel": "p_2"}
    first, _ = scripted.journal("cut")
    assert (first.fault, first.executed) == ("TRUNCATED_BODY", True)
    (finding,) = findings(scripted, "cut")
    assert "its answer replaced by the fault TRUNCATED_BODY" in finding["found"]


def test_an_error_after_the_work_was_done_is_a_lost_answer_and_its_retry_a_duplicate(
    scripted: mockskill.Server,
) -> None:
    assert attempts(scripted, "book", "timeout", [None, None]) == [504, 200]
    first, second = scripted.journal("timeout")
    assert (first.error_code, first.executed, second.executed) == ("EXECUTION_TIMEOUT", True, True)
    (finding,) = findings(scripted, "timeout")
    assert "the skill ran, its answer replaced by 504 EXECUTION_TIMEOUT" in finding["found"]


def test_a_scripted_skill_that_failed_without_running_is_not_a_duplicate(
    scripted: mockskill.Server,
) -> None:
    forced = {"Mockskill-Session": "forced", "Mockskill-Error": "ENDPOINT_UNREACHABLE"}
    for _ in range(2):
        requests.post(f"{scripted.url}/skills/book/invoke", json={}, headers=forced)
    assert [e.executed for e in scripted.journal("forced")] == [False, False]
    assert findings(scripted, "forced") == []
