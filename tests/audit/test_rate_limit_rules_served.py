"""Rate limits graded end to end: a real server's limits, real clients in real threads.

Each test plays consumers right and wrong against a limited skill and reads the audit of
the server's journal: lockstep workers (each sleeping exactly ``Retry-After``) against
jittered ones, a batch that paces itself on ``X-RateLimit-Remaining`` against one that
ignores it, and urllib3's ``Retry`` (which parses the date form) against a client that
cannot read a date. Jitter is drawn from seeded generators; only the machine's timer
noise varies, far below the rules' bounds (docs/audit.md).
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests
import urllib3

from mockskill import Server
from mockskill.audit import Policy, report

Serve = Callable[..., Server]

SCENARIO = """
    name: limits
    skills:
      - id: burst          # two at once, then one every 2 s: Retry-After: 2
        rate_limit: {capacity: 2, refill: 0.5}
        invoke: {json: {result: ok}}
      - id: batch          # two at once, one a second; X-RateLimit-* headers
        rate_limit: {capacity: 2, refill: 1, headers: x-ratelimit}
        invoke: {json: {result: ok}}
      - id: flood          # five at once, then one every 10 s
        rate_limit: {capacity: 5, refill: 0.1}
        invoke: {json: {result: ok}}
      - id: scripted       # refused as a limit would, without timing: Retry-After: 1
        invoke:
          - rate_limited: {retry_after_ms: 1000}
            times: 3
          - json: {result: ok}
      - id: scripted-503   # the same, in protocol
        invoke:
          - rate_limited: {retry_after_ms: 1000, status: 503}
            times: 3
          - json: {result: ok}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


@pytest.fixture(scope="module")
def bundled_limits() -> Any:
    with Server() as server:  # the bundled scenarios, rate-limits among them
        yield server


def audit(server: Server, session: str, policy: Policy | None = None) -> dict[str, Any]:
    (one,) = report(server.state.journal(session), policy or Policy())["sessions"]
    return dict(one)


TOGETHER = Policy(burst_ms=1500)
"""For the herds: their workers' first requests start together, but a loaded machine may
spread them past the default burst window, where ``rate-limit-ignored`` would read a worker
still starting as one sending on; what these tests grade is the retries."""


def rules(session: dict[str, Any]) -> list[str]:
    return sorted({f["rule"] for f in session["findings"]})


def herd(
    server: Server,
    workers: int,
    wait: Callable[[float, random.Random], float],
    skill: str = "burst",
) -> str:
    """*workers* threads in one session invoke *skill* together; each refused one retries
    once, after ``wait(Retry-After seconds, its own seeded generator)``. The session."""
    session = f"herd-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(workers)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            rng = random.Random(n)
            http = requests.Session()
            headers = {"Mockskill-Session": session}
            url = server.invoke_url(skill)
            # Connected before the start (the descriptor is not limited): the workers'
            # first requests go out together, as a pool's would.
            http.get(server.skill_url(skill), headers=headers, timeout=30)
            start.wait(timeout=30)
            answer = http.post(url, json={"item": n}, headers=headers, timeout=30)
            if answer.status_code in (429, 503):
                time.sleep(wait(float(answer.headers["Retry-After"]), rng))
                http.post(url, json={"item": n}, headers=headers, timeout=30)
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    return session


def exactly(retry_after: float, rng: random.Random) -> float:
    return retry_after


def up_to_a_quarter(retry_after: float, rng: random.Random) -> float:
    return retry_after * rng.uniform(1.0, 1.25)


def full_jitter(retry_after: float, rng: random.Random) -> float:
    return retry_after + rng.uniform(0, retry_after)


def test_twenty_workers_sleeping_exactly_retry_after_are_a_herd(server: Server) -> None:
    session = audit(server, herd(server, 20, exactly), TOGETHER)
    assert rules(session) == ["retry-herd"], session["findings"]
    [finding] = session["findings"]
    refused = 20 - 2  # a bucket of two
    assert f"of the {refused} chains waiting together" in finding["found"]
    # Most of them in lockstep (a thread the machine held up past the window may be out).
    lockstep = re.match(r"(\d+) chains retried in lockstep", finding["message"])
    assert lockstep is not None, finding
    assert int(lockstep[1]) >= 2 / 3 * refused, finding
    assert "(Retry-After: 2): no jitter" in finding["message"]
    assert session["coverage"]["rate_limited"]["RATE_LIMITED"] >= refused


@pytest.mark.parametrize("skill", ["scripted", "scripted-503"])
def test_three_workers_sleeping_exactly_retry_after_are_a_herd(server: Server, skill: str) -> None:
    # A bucket admits one of any three at least: scripted refusals refuse all three.
    session = audit(server, herd(server, 3, exactly, skill=skill), TOGETHER)
    assert rules(session) == ["retry-herd"], session["findings"]
    assert session["findings"][0]["message"].startswith("3 chains retried in lockstep")


def test_three_jittered_workers_are_clean(server: Server) -> None:
    def spread(retry_after: float, rng: random.Random) -> float:
        return retry_after * (1 + 0.1 * next(steps))  # 0, 10 and 20 % past the advice

    steps = iter(range(3))
    session = audit(server, herd(server, 3, spread, skill="scripted"), TOGETHER)
    assert session["findings"] == []


@pytest.mark.parametrize("jitter", [up_to_a_quarter, full_jitter])
def test_twenty_jittered_workers_are_clean(server: Server, jitter: Any) -> None:
    session = audit(server, herd(server, 20, jitter), TOGETHER)
    assert session["findings"] == []


def batch(server: Server, items: int, *, paced: bool) -> str:
    """A consumer that sends *items* one after another to ``batch``, retrying a 429 after
    its Retry-After; *paced*: it also waits for the reset when told none remain."""
    session = f"batch-{uuid.uuid4().hex[:8]}"
    http = requests.Session()
    http.headers["Mockskill-Session"] = session
    url = server.invoke_url("batch")
    for n in range(items):
        answer = http.post(url, json={"item": n}, timeout=30)
        while answer.status_code == 429:
            time.sleep(float(answer.headers["Retry-After"]))
            answer = http.post(url, json={"item": n}, timeout=30)
        if paced and answer.headers["X-RateLimit-Remaining"] == "0":
            time.sleep(float(answer.headers["X-RateLimit-Reset"]))
    return session


def test_a_batch_that_waits_for_the_reset_at_remaining_0_is_clean(server: Server) -> None:
    session = audit(server, batch(server, 4, paced=True))
    assert session["findings"] == []
    assert session["coverage"]["rate_limited"]["RATE_LIMITED"] == 0  # never refused


def test_a_batch_that_ignores_remaining_0_is_named(server: Server) -> None:
    session = audit(server, batch(server, 4, paced=False))
    assert rules(session) == ["rate-limit-ignored"], session["findings"]
    [finding] = session["findings"]
    assert finding["endpoint"] == "POST /skills/batch/invoke"
    assert "answered remaining 0" in finding["found"]
    assert session["coverage"]["rate_limited"]["RATE_LIMITED"] >= 1


def test_a_batch_sent_back_to_back_on_one_connection_ignoring_r_0_is_named(
    server: Server,
) -> None:
    # All of it inside the burst window on localhost: told apart from a burst by its
    # connection (one keep-alive connection: each request sent after the previous answer).
    session = f"flood-{uuid.uuid4().hex[:8]}"
    http = requests.Session()
    http.headers["Mockskill-Session"] = session
    statuses = [
        http.post(server.invoke_url("flood"), json={"item": n}, timeout=30).status_code
        for n in range(40)
    ]
    assert statuses == [200] * 5 + [429] * 35
    found = audit(server, session)
    assert rules(found) == ["rate-limit-ignored"], found["findings"]
    [finding] = found["findings"]
    assert finding["message"].startswith("35 new requests sent before the next token")
    assert finding["found"].startswith("#5 answered remaining 0")
    connections = {e.connection for e in server.state.journal(session)}
    [connection] = connections  # the client's end, as the server saw it
    assert re.fullmatch(r"127\.0\.0\.1:\d+", connection or ""), connection


def test_eight_threads_firing_once_each_are_a_burst_not_named(server: Server) -> None:
    session = f"burst-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(8)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            http = requests.Session()
            http.headers["Mockskill-Session"] = session
            # Connected before the start (the descriptor is not limited): the eight go out
            # together, each on its own connection, as a pool's would.
            http.get(server.skill_url("flood"), timeout=30)
            start.wait(timeout=30)
            answer = http.post(server.invoke_url("flood"), json={"item": n}, timeout=30)
            statuses.append(answer.status_code)
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(statuses) == [200] * 5 + [429] * 3  # told "none remain", on other connections
    found = audit(server, session)
    assert found["findings"] == []
    posts = [e for e in server.state.journal(session) if e.method == "POST"]
    assert len({e.connection for e in posts}) == 8


def urllib3_retrying(session: str) -> urllib3.PoolManager:
    retry = urllib3.Retry(
        total=4,
        status_forcelist=[429, 503],
        allowed_methods=None,  # retry POST too
        respect_retry_after_header=True,
        backoff_factor=0,
    )
    return urllib3.PoolManager(retries=retry, headers={"Mockskill-Session": session})


def test_urllib3_waits_until_the_retry_after_date_and_is_clean(
    bundled_limits: Server,
) -> None:
    session = f"date-{uuid.uuid4().hex[:8]}"
    http = urllib3_retrying(session)
    answer = http.request("POST", bundled_limits.invoke_url("retry-after-date"), json={})
    assert answer.status == 200
    graded = audit(bundled_limits, session)
    assert graded["findings"] == []
    waits = [a["wait_ms"] for a in graded["chains"][0]["attempts"][1:]]
    assert len(waits) == 2
    assert min(waits) >= 1950  # a date 2 s or more after the answer


def test_a_client_that_cannot_read_a_date_retries_at_once_and_is_too_soon(
    bundled_limits: Server,
) -> None:
    session = f"date-{uuid.uuid4().hex[:8]}"
    url = bundled_limits.invoke_url("retry-after-date")
    headers = {"Mockskill-Session": session}
    for _ in range(3):
        answer = requests.post(url, json={}, headers=headers, timeout=30)
        # "Fri, 04 Dec 2026 ..." is no number: retried at once.
        with contextlib.suppress(ValueError):
            time.sleep(float(answer.headers.get("Retry-After", "0")))
    graded = audit(bundled_limits, session)
    assert rules(graded) == ["retry-too-soon"]
    [finding] = graded["findings"]
    assert "after the answer went out" in finding["expected"]


@pytest.mark.parametrize("skill", ["retry-after-missing", "retry-after-malformed"])
def test_no_advice_and_no_backoff_is_backoff_not_growing(
    bundled_limits: Server, skill: str
) -> None:
    session = f"none-{uuid.uuid4().hex[:8]}"
    url = bundled_limits.invoke_url(skill)
    headers = {"Mockskill-Session": session}
    for _ in range(3):
        requests.post(url, json={}, headers=headers, timeout=30)  # no wait at all
    graded = audit(bundled_limits, session)
    assert rules(graded) == ["backoff-not-growing"]
    assert "no excuse" in graded["findings"][0]["fix"]


def test_retry_after_ms_honoured_is_clean_and_the_gate_counts_it(bundled_limits: Server) -> None:
    session = f"ms-{uuid.uuid4().hex[:8]}"
    url = bundled_limits.invoke_url("retry-after-ms")
    headers = {"Mockskill-Session": session}
    answer = requests.post(url, json={}, headers=headers, timeout=30)
    while answer.status_code == 429:
        time.sleep(int(answer.headers["retry-after-ms"]) / 1000)  # 1.5 s, not Retry-After: 2
        answer = requests.post(url, json={}, headers=headers, timeout=30)
    whole = report(bundled_limits.state.journal(session))
    assert whole["sessions"][0]["findings"] == []
    assert whole["sessions"][0]["coverage"]["rate_limited"] == {
        "RATE_LIMITED": 2,
        "ENDPOINT_UNREACHABLE": 0,
    }
