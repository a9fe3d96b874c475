"""The retry audit proved on real consumers: urllib3, tenacity, httpx, OAuth, batches, wrong ones.

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

import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import requests
import requests.adapters
import tenacity
import urllib3
from urllib3.util.retry import Retry

from mockskill import Server
from mockskill.audit import Policy
from mockskill.audit import report as audit_report
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


# -- issue 6: hunting false positives and misses with realistic consumers ----------------
#
# Each consumer below is what someone would really write; the verdict is asserted exactly:
# the correct ones clean, the wrong ones with each fault named. Custom skills (CONSUMERS)
# keep the advice at 50-200 ms so that the whole section runs in a few seconds.

CONSUMERS = """
    name: consumers
    auth:
      clients: [{client_id: app, client_secret: app-secret, scopes: [skill:invoke]}]
      token_lifetime: {uses: 1}
    skills:
      - id: single-use
        requires: true
      - id: fast-down
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 50, max_attempts: 3}}
      - id: jittery
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 100, max_attempts: 4}}
      - id: batch
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 150, max_attempts: 3}}
      - id: other-batch
        invoke: {error: EXECUTION_TIMEOUT, retry: {suggested_delay_ms: 100, max_attempts: 3}}
      - id: slow-advice
        invoke:
          - error: ENDPOINT_UNREACHABLE
            retry: {suggested_delay_ms: 1500, max_attempts: 2}
          - json: {result: ok}
      - id: recovers-once
        invoke:
          - error: ENDPOINT_UNREACHABLE
            retry: {suggested_delay_ms: 100, max_attempts: 3}
          - json: {result: ok}
      - id: reset-once
        invoke: [{fault: CONNECTION_RESET_BY_PEER}, {json: {result: ok}}]
      - id: hang
        invoke: {hang: 5000}
      - id: delayed
        invoke: {delay: 5000, json: {result: late}}
"""


class Own:
    """A consumer's own session on a server of CONSUMERS (or any server)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.session = f"consumer-{uuid.uuid4().hex[:10]}"
        self.headers = {"Mockskill-Session": self.session}

    def report(self, policy: Policy | None = None) -> dict[str, Any]:
        whole = audit_report(self.server.state.journal(self.session), policy or Policy())
        (session,) = whole["sessions"]
        return dict(session)

    def rules(self, policy: Policy | None = None) -> list[str]:
        return [f["rule"] for f in self.report(policy)["findings"]]


@pytest.fixture
def consumers(serve: Callable[..., Server]) -> Server:
    return serve(CONSUMERS)


def url_path(url: str) -> str:
    return urlsplit(url).path


def error_of(response: requests.Response | httpx.Response) -> dict[str, Any]:
    if response.status_code < 400:
        return {}
    return dict(response.json().get("error", {}))


# 1. The OAuth flow: a 401 is answered with a token, and the retry comes at once.


def test_oauth_client_credentials_flow_then_an_immediate_retry_is_clean(
    mockskill: MockskillSession,
) -> None:
    url = mockskill.invoke_url("guarded")
    first = requests.post(url, headers=mockskill.headers, timeout=10)
    assert first.status_code == 401
    details = error_of(first)["details"]
    token = requests.post(
        details["authorization_url"],
        data={"grant_type": "client_credentials", "scope": " ".join(details["scopes"])},
        auth=("demo-client", "demo-secret"),
        headers=mockskill.headers,
        timeout=10,
    ).json()["access_token"]
    bearer = {**mockskill.headers, "Authorization": f"Bearer {token}"}
    assert requests.post(url, headers=bearer, timeout=10).status_code == 200
    report = mockskill.assert_clean_audit(require_coverage=["AUTH_REQUIRED"])
    (session,) = report["sessions"]
    invoke = next(c for c in session["chains"] if c["endpoint"] == f"POST {url_path(url)}")
    assert [a["status"] for a in invoke["attempts"]] == [401, 200]
    assert invoke["attempts"][1]["changed"] == ["credential"]
    assert invoke["attempts"][1]["expected_wait_ms"] is None  # a 401 owes no wait


def test_an_expired_token_refreshed_at_once_is_clean(consumers: Server) -> None:
    me = Own(consumers)
    url = consumers.invoke_url("single-use")

    def fetch_token() -> str:
        response = requests.post(
            f"{consumers.url}/oauth/token",
            data={"grant_type": "client_credentials"},
            auth=("app", "app-secret"),
            headers=me.headers,
            timeout=10,
        )
        return str(response.json()["access_token"])

    token = fetch_token()
    statuses = []
    for _ in range(2):  # the token allows one use: the second call finds it expired
        response = requests.post(url, headers={**me.headers, "Authorization": f"Bearer {token}"})
        if response.status_code == 401:
            token = fetch_token()
            response = requests.post(
                url, headers={**me.headers, "Authorization": f"Bearer {token}"}, timeout=10
            )
        statuses.append(response.status_code)
    assert statuses == [200, 200]
    assert [e.status for e in consumers.state.journal(me.session) if e.endpoint == "invoke"] == [
        200,
        401,
        200,
    ]
    assert me.rules() == []
    # Retrying the 401 with the expired token instead is named.
    wrong = Own(consumers)
    me = wrong  # fetch_token() asks in the session of *me*
    token = fetch_token()
    for _ in range(3):
        requests.post(url, headers={**me.headers, "Authorization": f"Bearer {token}"}, timeout=10)
    assert wrong.rules() == ["non-retryable-retried"]


# 2. VERSION_INCOMPATIBLE: retry at once with another version, never with the same one.


def test_version_incompatible_retried_with_a_compatible_version_is_clean(
    mockskill: MockskillSession,
) -> None:
    url = mockskill.invoke_url("next-gen")
    old = {**mockskill.headers, "Skill-Protocol-Version": "1.0.0"}
    response = requests.post(url, headers=old, timeout=10)
    assert response.status_code == 422
    supported = error_of(response)["details"]["descriptor_version"]
    new = {**mockskill.headers, "Skill-Protocol-Version": supported}
    assert requests.post(url, headers=new, timeout=10).status_code == 200
    mockskill.assert_clean_audit()


def test_version_incompatible_retried_with_the_same_version_is_named(
    mockskill: MockskillSession,
) -> None:
    old = {**mockskill.headers, "Skill-Protocol-Version": "1.0.0"}
    for _ in range(2):
        requests.post(mockskill.invoke_url("next-gen"), headers=old, json={"n": 1}, timeout=10)
    (finding,) = findings(mockskill)
    assert finding["rule"] == "non-retryable-retried"
    assert "VERSION_INCOMPATIBLE" in finding["message"]
    assert "Skill-Protocol-Version (1.0.0)" in finding["found"]


# 3. Jitter: added to the wait is fine; taken from it ("equal jitter") is named.


def jittered_invoke(server: Server, session: Own, waits: list[float]) -> None:
    requests.post(server.invoke_url("jittery"), headers=session.headers, timeout=10)
    for wait in waits:
        time.sleep(wait)
        requests.post(server.invoke_url("jittery"), headers=session.headers, timeout=10)


def test_full_jitter_above_the_backoff_is_clean(consumers: Server) -> None:
    rng = random.Random(6)
    base = 0.1  # the advice, in seconds
    # The n-th retry waits base * 2^(n-1) + random(0, base): never less than owed.
    waits = [base * 2 ** (n - 1) + rng.uniform(0, base) for n in (1, 2, 3)]
    me = Own(consumers)
    jittered_invoke(consumers, me, waits)
    assert me.rules() == []
    (chain,) = me.report()["chains"]
    assert [a["expected_wait_ms"] for a in chain["attempts"]] == [None, 100, 200, 400]


def test_equal_jitter_below_the_backoff_is_named(consumers: Server) -> None:
    # "Equal jitter" (AWS): half the backoff plus random(0, half): as little as half of what is
    # owed. These draws fall at 55 % and 60 % of what is owed, far under the 10 % tolerance.
    waits = [0.1 * 0.55, 0.2 * 0.6]
    me = Own(consumers)
    jittered_invoke(consumers, me, waits)
    assert me.rules() == ["retry-too-soon", "backoff-not-growing"]


# 4. Concurrency: parallel operations in one session, each retrying correctly.


def retrying(server: Server, session: Own, skill: str, body: Any, tries: int, base: float) -> None:
    """One operation: *tries* attempts with *body*, waiting base * 2^(n-1) before the n-th retry."""
    for n in range(1, tries + 1):
        requests.post(server.invoke_url(skill), headers=session.headers, json=body, timeout=10)
        if n < tries:
            time.sleep(base * 2 ** (n - 1) * 1.1)


def in_parallel(*calls: Callable[[], None]) -> None:
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)


def test_parallel_retries_at_different_skills_are_clean(consumers: Server) -> None:
    me = Own(consumers)
    in_parallel(
        lambda: retrying(consumers, me, "batch", {"q": 1}, 3, 0.15),
        lambda: retrying(consumers, me, "other-batch", {"q": 1}, 3, 0.1),
        lambda: retrying(consumers, me, "fast-down", {"q": 1}, 3, 0.05),
    )
    session = me.report()
    assert sorted(len(c["attempts"]) for c in session["chains"]) == [3, 3, 3]
    assert session["findings"] == []


def test_a_parallel_batch_at_one_skill_retrying_correctly_is_clean(consumers: Server) -> None:
    # Three items of a batch invoked at once, each retried on its own as advised: the
    # requests of one round do not overlap on a fast server, yet none is a retry of another.
    me = Own(consumers)
    in_parallel(
        *(lambda i=i: retrying(consumers, me, "batch", {"item": i}, 3, 0.15) for i in range(3))
    )
    session = me.report()
    assert session["findings"] == []
    assert [len(c["attempts"]) for c in session["chains"]] == [3, 3, 3]
    for chain in session["chains"]:
        assert [a["expected_wait_ms"] for a in chain["attempts"]] == [None, 150, 300]


def test_a_parallel_batch_that_hammers_has_each_item_named(consumers: Server) -> None:
    me = Own(consumers)
    in_parallel(
        *(lambda i=i: retrying(consumers, me, "batch", {"item": i}, 4, 0.0) for i in range(3))
    )
    session = me.report()
    assert [len(c["attempts"]) for c in session["chains"]] == [4, 4, 4]
    assert (
        sorted(f["rule"] for f in session["findings"])
        == ["retry-too-soon"] * 3 + ["too-many-attempts"] * 3
    )
    for finding in session["findings"]:
        if finding["rule"] == "too-many-attempts":
            assert finding["message"] == "4 attempts where the advice allows 3"


# 5. Retry-After is the advice rounded up: honouring either one is clean.


def test_retry_after_or_the_advice_in_the_body_are_both_honoured(consumers: Server) -> None:
    by_header, by_body = Own(consumers), Own(consumers)

    def honour(me: Own, wait: Callable[[requests.Response], float]) -> None:
        response = requests.post(consumers.invoke_url("slow-advice"), headers=me.headers)
        assert response.headers["Retry-After"] == "2"  # 1500 ms, rounded up
        time.sleep(wait(response))
        assert requests.post(consumers.invoke_url("slow-advice"), headers=me.headers).ok

    in_parallel(
        lambda: honour(by_header, lambda r: float(r.headers["Retry-After"])),
        lambda: honour(by_body, lambda r: error_of(r)["retry"]["suggested_delay_ms"] / 1000),
    )
    for me in (by_header, by_body):
        assert me.rules() == []
        (chain,) = me.report()["chains"]
        assert chain["attempts"][1]["expected_wait_ms"] == 1500


# 6. httpx with a retry loop of its own; requests with urllib3's Retry (the docs' subclass).


def httpx_invoke(client: httpx.Client, url: str, headers: dict[str, str]) -> httpx.Response:
    """Retry what the protocol calls retryable, sleeping the advice doubled each time."""
    attempt = 1
    while True:
        response = client.post(url, headers=headers)
        error = error_of(response)
        retry = error.get("retry")
        if error.get("code") not in ("EXECUTION_TIMEOUT", "ENDPOINT_UNREACHABLE") or not retry:
            return response
        if attempt >= retry["max_attempts"]:
            return response
        time.sleep(retry["suggested_delay_ms"] / 1000 * 2 ** (attempt - 1))
        attempt += 1


def test_httpx_with_its_own_retry_loop_is_clean(mockskill: MockskillSession) -> None:
    with httpx.Client(timeout=10) as client:
        for skill in ("retry-recovers", "retry-timeout"):
            assert httpx_invoke(client, mockskill.invoke_url(skill), mockskill.headers).is_success
    mockskill.assert_clean_audit(require_coverage=["ENDPOINT_UNREACHABLE", "EXECUTION_TIMEOUT"])


class ProtocolRetry(Retry):
    """docs/audit.md's subclass: sleeps Retry-After or the backoff, whichever is longer."""

    def sleep(self, response: Any = None) -> None:
        retry_after = self.get_retry_after(response) if response is not None else None
        time.sleep(max(retry_after or 0, self.get_backoff_time()))


def test_requests_with_urllib3s_protocol_retry_is_clean(consumers: Server) -> None:
    me = Own(consumers)
    retries = ProtocolRetry(
        total=2,
        backoff_factor=0.1,
        status_forcelist=RETRYABLE,
        allowed_methods=None,
        raise_on_status=False,
    )
    with requests.Session() as http:
        http.mount("http://", requests.adapters.HTTPAdapter(max_retries=retries))
        response = http.post(consumers.invoke_url("recovers-once"), headers=me.headers, timeout=10)
    assert response.status_code == 200
    assert me.rules() == []
    (chain,) = me.report()["chains"]
    assert [a["status"] for a in chain["attempts"]] == [503, 200]
    assert chain["attempts"][1]["wait_ms"] >= 1000  # Retry-After: 1 over 100 ms of backoff


# 7. A success ends a chain: what comes after it is a new operation.


def test_a_new_request_right_after_a_recovered_fault_is_not_a_retry(consumers: Server) -> None:
    me = Own(consumers)
    url = consumers.invoke_url("reset-once")
    with pytest.raises(requests.ConnectionError):
        requests.post(url, headers=me.headers, timeout=10)
    time.sleep(0.15)  # the policy below owes 100 ms after a fault (no advice)
    assert requests.post(url, headers=me.headers, timeout=10).ok
    assert requests.post(url, headers=me.headers, json={"next": 1}, timeout=10).ok
    assert requests.post(url, headers=me.headers, json={"next": 2}, timeout=10).ok
    quick = Policy(initial_delay_ms=100)
    assert me.rules(quick) == []
    assert [len(c["attempts"]) for c in me.report(quick)["chains"]] == [2, 1, 1]
    assert me.rules() == ["retry-too-soon"]  # by the chapter's 1000 ms, 150 ms is too soon


# 8. An invalid descriptor: fetching it again is named; fetching another skill's is not.


def test_refetching_an_invalid_descriptor_is_named_but_moving_on_is_not(
    mockskill: MockskillSession,
) -> None:
    def describe(skill: str) -> None:
        requests.get(mockskill.skill_url(skill), headers=mockskill.headers, timeout=10)

    describe("invalid-descriptor")
    describe("retry-recovers")
    mockskill.assert_clean_audit(require_coverage=["VALIDATION_ERROR"])
    describe("invalid-descriptor")
    (finding,) = findings(mockskill)
    assert finding["rule"] == "non-retryable-retried"
    assert finding["endpoint"] == "GET /skills/invalid-descriptor"
    assert "VALIDATION_ERROR" in finding["message"]


# 9. too-many-attempts is exact: max_attempts 3 allows three attempts, not four.


def test_too_many_attempts_is_exact(consumers: Server) -> None:
    three, four = Own(consumers), Own(consumers)
    in_parallel(
        lambda: retrying(consumers, three, "fast-down", None, 3, 0.05),
        lambda: retrying(consumers, four, "fast-down", None, 4, 0.05),
    )
    assert three.rules() == []
    assert four.rules() == ["too-many-attempts"]
    (finding,) = four.report()["findings"]
    assert finding["message"] == "4 attempts where the advice allows 3"
    assert finding["attempts"] == [consumers.state.journal(four.session)[-1].id]


# 10. The consumer's real timeout, from requests and from httpx.


@pytest.mark.parametrize(("skill", "kind"), [("hang", "hang"), ("delayed", "delay")])
def test_a_300_ms_client_timeout_is_reported_as_such(
    consumers: Server, skill: str, kind: str
) -> None:
    with_requests, with_httpx = Own(consumers), Own(consumers)
    with pytest.raises(requests.ReadTimeout):
        requests.post(consumers.invoke_url(skill), headers=with_requests.headers, timeout=(5, 0.3))
    with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(5, read=0.3)) as c:
        c.post(consumers.invoke_url(skill), headers=with_httpx.headers)
    for me in (with_requests, with_httpx):
        deadline = time.monotonic() + 3
        while not consumers.state.journal(me.session):
            assert time.monotonic() < deadline, "the hang-up was not recorded"
            time.sleep(0.02)
        (timeout,) = me.report()["timeouts"]
        assert timeout["kind"] == kind
        # Measured by the server from when it had the request whole: on a loaded
        # machine that is later than when the client's 300 ms began, never earlier.
        assert 150 <= timeout["client_timeout_ms"] < 1500
