"""The retry audit proved on real consumers: urllib3's Retry, tenacity, and a wrong one.

Each test runs a real retrying client against the bundled ``retries``
scenario (short advice, so that backoff is over in a second or two) in the
test's own session (the plugin's ``mockskill`` fixture), then asserts
exactly what the audit says: the correct consumers are clean, the wrong
one has each of its faults named, and nothing else.

urllib3 needs knowing: ``Retry.get_backoff_time()`` is 0 for the first
retry (it backs off only from the second), so without
``respect_retry_after_header`` its first retry comes at once — which the
audit names, rightly. With it (the default), urllib3 sleeps ``Retry-After``
(the advice rounded up to whole seconds) instead.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
import tenacity
import urllib3
from urllib3.util.retry import Retry

from mockskill.pytest_plugin import MockskillSession

RETRYABLE = (408, 502, 503, 504)


def urllib3_retry(*, respect_retry_after_header: bool) -> Retry:
    """urllib3's Retry set up for the skill protocol (see docs/audit.md)."""
    return Retry(
        total=2,  # max_attempts 3: the first attempt and two retries
        backoff_factor=0.2,  # seconds: the advice, so that the 2nd retry waits 2 * 0.2
        status_forcelist=RETRYABLE,
        allowed_methods=None,  # POST too: invocations are what is retried
        respect_retry_after_header=respect_retry_after_header,
        raise_on_status=False,
    )


def findings(mockskill: MockskillSession) -> list[dict[str, Any]]:
    (session,) = mockskill.report()["sessions"]
    return list(session["findings"])


def attempts(mockskill: MockskillSession) -> list[dict[str, Any]]:
    (session,) = mockskill.report()["sessions"]
    (chain,) = session["chains"]
    return list(chain["attempts"])


# -- urllib3 ----------------------------------------------------------------------------


def test_urllib3_honouring_retry_after_is_clean(mockskill: MockskillSession) -> None:
    http = urllib3.PoolManager(retries=urllib3_retry(respect_retry_after_header=True))
    response = http.request(
        "POST", mockskill.invoke_url("retry-recovers"), headers=mockskill.headers
    )
    assert response.status == 200
    report = mockskill.assert_clean_audit()
    assert report["clean"] is True
    tried = attempts(mockskill)
    assert [a["status"] for a in tried] == [503, 503, 200]
    # It slept Retry-After (1 s: 200 ms rounded up), more than the 200 and 400 ms owed.
    assert [a["expected_wait_ms"] for a in tried] == [None, 200, 400]
    assert all(a["wait_ms"] >= 1000 for a in tried[1:])


def test_urllib3_without_retry_after_retries_at_once_the_first_time(
    mockskill: MockskillSession,
) -> None:
    http = urllib3.PoolManager(retries=urllib3_retry(respect_retry_after_header=False))
    response = http.request(
        "POST", mockskill.invoke_url("retry-recovers"), headers=mockskill.headers
    )
    assert response.status == 200
    first, second, third = attempts(mockskill)
    # get_backoff_time() is 0 for the first retry, then backoff_factor * 2^(n-1): 0.4 s.
    assert second["wait_ms"] < 150
    assert third["wait_ms"] >= 400
    (finding,) = findings(mockskill)
    assert finding["rule"] == "retry-too-soon"
    assert finding["attempts"] == [first["id"], second["id"]]
    with pytest.raises(AssertionError, match="retry-too-soon"):
        mockskill.assert_clean_audit()


def test_urllib3_stops_at_max_attempts(mockskill: MockskillSession) -> None:
    retry = Retry(
        total=2,
        backoff_factor=1.0,
        status_forcelist=RETRYABLE,
        allowed_methods=None,
        raise_on_status=False,
    )
    response = urllib3.PoolManager(retries=retry).request(
        "POST", mockskill.invoke_url("retry-down"), headers=mockskill.headers
    )
    assert response.status == 503
    assert len(attempts(mockskill)) == 3
    mockskill.assert_clean_audit()


# -- tenacity ---------------------------------------------------------------------------


def tenacity_invoke(mockskill: MockskillSession, skill: str, initial_s: float) -> int:
    """Invoke with tenacity: exponential waits from *initial_s*, at most 3 attempts."""

    @tenacity.retry(
        wait=tenacity.wait_exponential(multiplier=initial_s),  # initial * 2^(attempt - 1)
        stop=tenacity.stop_after_attempt(3),
        retry=tenacity.retry_if_result(lambda r: r.status_code in RETRYABLE),
        retry_error_callback=lambda state: state.outcome.result(),
    )
    def call() -> requests.Response:
        return requests.post(mockskill.invoke_url(skill), headers=mockskill.headers, timeout=10)

    return int(call().status_code)


def test_tenacity_with_exponential_wait_is_clean(mockskill: MockskillSession) -> None:
    assert tenacity_invoke(mockskill, "retry-recovers", 0.2) == 200
    mockskill.assert_clean_audit()
    tried = attempts(mockskill)
    assert [a["expected_wait_ms"] for a in tried] == [None, 200, 400]
    assert 200 <= tried[1]["wait_ms"] < 1000
    assert 400 <= tried[2]["wait_ms"] < 1500


def test_tenacity_gives_up_at_max_attempts_and_is_clean(mockskill: MockskillSession) -> None:
    assert tenacity_invoke(mockskill, "retry-down", 0.5) == 503
    mockskill.assert_clean_audit()
    assert len(attempts(mockskill)) == 3


def test_tenacity_against_execution_timeouts_is_clean(mockskill: MockskillSession) -> None:
    assert tenacity_invoke(mockskill, "retry-timeout", 0.15) == 200
    mockskill.assert_clean_audit()
    assert [a["error_code"] for a in attempts(mockskill)] == ["EXECUTION_TIMEOUT"] * 2 + [None]


def test_tenacity_with_too_small_a_multiplier_is_named(mockskill: MockskillSession) -> None:
    assert tenacity_invoke(mockskill, "retry-recovers", 0.02) == 200
    (finding,) = findings(mockskill)
    assert finding["rule"] == "retry-too-soon"
    assert len(finding["attempts"]) == 3


# -- a wrong consumer -------------------------------------------------------------------


def wrong_consumer(mockskill: MockskillSession) -> None:
    """No backoff, retries a 401 unchanged, ignores max_attempts: five tries at anything."""
    for skill in ("retry-down", "auth-required"):
        for _ in range(5):
            response = requests.post(
                mockskill.invoke_url(skill), headers=mockskill.headers, timeout=10
            )
            if response.ok:
                break


def test_the_wrong_consumer_gets_exactly_its_three_faults(mockskill: MockskillSession) -> None:
    wrong_consumer(mockskill)
    found = findings(mockskill)
    assert [f["rule"] for f in found] == [
        "retry-too-soon",
        "too-many-attempts",
        "non-retryable-retried",
    ]
    down = [e.id for e in mockskill.journal() if e.skill == "retry-down"]
    auth = [e.id for e in mockskill.journal() if e.skill == "auth-required"]
    too_soon, too_many, unchanged = found
    assert too_soon["endpoint"] == "POST /skills/retry-down/invoke"
    assert too_soon["attempts"] == down  # every retry came at once
    assert too_many["attempts"] == down[3:]  # the 4th and 5th of 3 allowed
    assert too_many["message"] == "5 attempts where the advice allows 3"
    assert unchanged["endpoint"] == "POST /skills/auth-required/invoke"
    assert unchanged["attempts"] == auth
    assert unchanged["message"] == "AUTH_REQUIRED retried unchanged (4 retries)"
    with pytest.raises(AssertionError) as raised:
        mockskill.assert_clean_audit()
    message = str(raised.value)
    assert "3 findings" in message
    for rule in ("retry-too-soon", "too-many-attempts", "non-retryable-retried"):
        assert rule in message
