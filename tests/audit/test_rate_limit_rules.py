"""Rate limits graded, on hand-made journal entries (the journal's shape: Entry.rate_limit).

A refusal (429 RATE_LIMITED or the in-protocol 503) is a retryable failure with the advice
its headers gave; ``retry-too-soon`` reads every Retry-After form; a limit without advice
that is retried at once is ``backoff-not-growing``; ``retry-herd`` names chains retrying in
lockstep; ``rate-limit-ignored`` names new requests sent after "no tokens remain". Times
are seconds from an arbitrary origin; waits are chosen far from the rules' bounds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import requests

from mockskill import Server
from mockskill.audit import (
    RULES,
    Policy,
    assert_clean,
    coverage,
    coverage_gaps,
    outcome,
    report,
)
from mockskill.audit.herds import RULE as HERD
from mockskill.audit.pacing import RULE as IGNORED
from mockskill.audit.table import table
from mockskill.engine.entries import Entry
from mockskill.protocol.catalog import RATE_LIMITED, Retry

T0 = 1_000_000.0
PATH = "/skills/search/invoke"
KEY = "session: s"


class Journal:
    """A session's entries, made in order: ids count up."""

    def __init__(self, session: str = "s") -> None:
        self.session = session
        self.entries: list[Entry] = []

    def add(
        self,
        at: float,
        *,
        status: int = 200,
        body: str = "item-1",
        took: float = 0.001,
        path: str = PATH,
        **fields: Any,
    ) -> Entry:
        entry = Entry(
            len(self.entries) + 1,
            T0 + at,
            T0 + at + took,
            self.session,
            "POST",
            path,
            status,
            "invoke",
            skill="search",
            body_digest=f"hmac-sha256:{body}",
            **fields,
        )
        self.entries.append(entry)
        return entry

    def refused(
        self,
        at: float,
        *,
        advice_ms: int | None = 1000,
        form: str = "seconds",
        value: str | None = "1",
        status: int = 429,
        next_ms: int = 1000,
        body: str = "item-1",
        key: str | None = KEY,
        scripted: bool = False,
        headers: str = "ietf",
        connection: str | None = None,
    ) -> Entry:
        """A rate-limit answer: a bucket's refusal (or a scripted step) advising *advice_ms*."""
        code = "RATE_LIMITED" if status == 429 else "ENDPOINT_UNREACHABLE"
        return self.add(
            at,
            status=status,
            body=body,
            error_code=code,
            retry=None if advice_ms is None else Retry(advice_ms, 5),
            rate_limit=limit(
                refused=not scripted,
                scripted=scripted,
                status=status,
                retry_after=form,
                headers=headers,
                remaining=0,
                wait_ms=advice_ms,
                next_ms=next_ms,
                retry_after_value=value,
                key=key,
            ),
            connection=connection,
        )

    def admitted(
        self,
        at: float,
        *,
        remaining: int,
        next_ms: int = 0,
        body: str = "item-1",
        key: str | None = KEY,
        headers: str = "ietf",
        connection: str | None = None,
    ) -> Entry:
        """An answer of a limited endpoint that was admitted, with *remaining* tokens left."""
        return self.add(
            at,
            body=body,
            rate_limit=limit(remaining=remaining, next_ms=next_ms, key=key, headers=headers),
            connection=connection,
        )

    def report(self, policy: Policy | None = None) -> dict[str, Any]:
        (session,) = report(self.entries, policy or Policy())["sessions"]
        return dict(session)

    def findings(self, rule: str | None = None) -> list[dict[str, Any]]:
        found = self.report()["findings"]
        return [f for f in found if rule is None or f["rule"] == rule]

    def rules(self) -> list[str]:
        return [f["rule"] for f in self.findings()]


def limit(**given: Any) -> dict[str, Any]:
    """Entry.rate_limit as its docstring has it (a bucket of 5, one a second)."""
    values: dict[str, Any] = {
        "refused": False,
        "scripted": False,
        "status": 429,
        "retry_after": "seconds",
        "headers": "ietf",
        "limit": 5,
        "remaining": 4,
        "refill": 1.0,
        "wait_ms": None,
        "next_ms": 0,
        "full_ms": 1000,
        "retry_after_value": None,
        "key": KEY,
    }
    values.update(given)
    return values


# -- what a rate-limit answer means ------------------------------------------------------


def test_the_new_rules_are_rules_of_the_audit() -> None:
    assert HERD in RULES
    assert IGNORED in RULES


def test_a_429_refusal_is_a_retryable_rate_limited_with_its_advice() -> None:
    j = Journal()
    refused = j.refused(0, advice_ms=1500, form="fractional", value="1.5")
    o = outcome(refused)
    assert (o.failed, o.code, o.retryable, o.advice) == (True, "RATE_LIMITED", True, Retry(1500, 5))


def test_any_429_is_a_retryable_rate_limited_even_without_the_unified_body() -> None:
    plain = Journal().add(0, status=429)
    o = outcome(plain)
    assert (o.failed, o.code, o.retryable, o.advice) == (True, "RATE_LIMITED", True, None)


def test_a_limits_503_is_the_chapters_endpoint_unreachable() -> None:
    o = outcome(Journal().refused(0, status=503, advice_ms=2000, value="2"))
    assert (o.code, o.retryable, o.advice) == ("ENDPOINT_UNREACHABLE", True, Retry(2000, 5))


def test_attempts_after_a_429_without_advice_are_counted_against_rate_limiteds_five() -> None:
    assert RATE_LIMITED.retry is not None
    allowed = RATE_LIMITED.retry.max_attempts
    j = Journal()
    at = 0.0
    for n in range(allowed + 1):
        j.add(at, status=429)  # no advice: the waits grow from the chapter's 1000 ms
        at += 0.001 + 1.1 * 2**n
    [finding] = j.findings()
    assert finding["rule"] == "too-many-attempts"
    assert finding["message"] == f"{allowed + 1} attempts where the advice allows {allowed}"


# -- retry-too-soon in every form -----------------------------------------------------------

FORMS = [
    # (form, the header's value, the advice it gave, in ms)
    ("seconds", "2", 2000),
    ("fractional", "1.5", 1500),
    ("ms", "1500", 1500),
    ("date", "Fri, 04 Dec 2026 04:00:03 GMT", 1600),  # sent at 04:00:01.4
]


@pytest.mark.parametrize(("form", "value", "advice"), FORMS)
def test_a_retry_before_the_advice_is_too_soon_in_every_form(
    form: str, value: str, advice: int
) -> None:
    j = Journal()
    j.refused(0, advice_ms=advice, form=form, value=value, next_ms=advice)
    j.add(0.001 + advice / 1000 / 2)  # half the advice: a client that misread it
    [finding] = j.findings()
    assert finding["rule"] == "retry-too-soon"
    assert finding["attempts"] == [1, 2]
    assert f"({advice} ms;" in finding["expected"]
    header = "retry-after-ms" if form == "ms" else "Retry-After"
    assert f"{header}: {value}" in finding["expected"]
    if form == "date":
        assert f"{advice} ms after the answer went out" in finding["expected"]


@pytest.mark.parametrize(("form", "value", "advice"), FORMS)
def test_a_retry_after_the_advice_is_clean_in_every_form(
    form: str, value: str, advice: int
) -> None:
    j = Journal()
    j.refused(0, advice_ms=advice, form=form, value=value, next_ms=advice)
    j.add(0.001 + advice / 1000 + 0.01)
    assert j.findings() == []


def test_a_client_that_cannot_parse_the_date_and_retries_at_once_is_too_soon() -> None:
    j = Journal()
    j.refused(0, advice_ms=1600, form="date", value="Fri, 04 Dec 2026 04:00:03 GMT")
    j.add(0.005)  # as go-retryablehttp did: the date unparsed, no wait at all
    assert j.rules() == ["retry-too-soon"]


def test_a_refusal_advises_the_buckets_next_token() -> None:
    j = Journal()
    j.refused(0, advice_ms=700, form="ms", value="700", next_ms=700)
    j.add(0.3)
    j.refused(1.0, advice_ms=700, form="ms", value="700", next_ms=700, body="item-2")
    j.add(1.0 + 0.001 + 0.72, body="item-2")
    [finding] = j.findings()
    assert (finding["rule"], finding["attempts"]) == ("retry-too-soon", [1, 2])


def test_waiting_out_a_limits_advice_each_time_owes_no_doubling() -> None:
    j = Journal()
    at = 0.0
    for _ in range(3):  # refused three times, each retry one advice later, then admitted
        j.refused(at)
        at += 0.001 + 1.02
    j.admitted(at, remaining=0, next_ms=1000)
    assert j.findings() == []


@pytest.mark.parametrize(("form", "value"), [("missing", None), ("malformed", "soon")])
def test_a_limit_without_advice_retried_at_once_is_backoff_not_growing(
    form: str, value: str | None
) -> None:
    j = Journal()
    j.refused(0, advice_ms=None, form=form, value=value)
    j.add(0.02)
    [finding] = j.findings()
    assert finding["rule"] == "backoff-not-growing"  # not too soon: there was no advice
    assert finding["attempts"] == [1, 2]
    assert f"a rate-limit answer with a {form} Retry-After advised nothing" in finding["expected"]
    assert finding["fix"].startswith("a missing or malformed Retry-After is no excuse")


@pytest.mark.parametrize(("form", "value"), [("missing", None), ("malformed", "soon")])
def test_a_limit_without_advice_backed_off_from_the_initial_delay_is_clean(
    form: str, value: str | None
) -> None:
    j = Journal()
    j.refused(0, advice_ms=None, form=form, value=value)
    j.refused(1.05, advice_ms=None, form=form, value=value)
    j.add(1.05 + 0.001 + 2.05)
    assert j.findings() == []


def test_a_scripted_rate_limited_step_is_graded_like_a_refusal() -> None:
    j = Journal()
    j.refused(0, scripted=True, status=503, advice_ms=1500, form="ms", value="1500")
    j.add(0.5)
    assert j.rules() == ["retry-too-soon"]


# -- retry-herd ------------------------------------------------------------------------------


def herd(lateness_ms: Callable[[int], float], n: int, advice_ms: int = 1000) -> Journal:
    """*n* chains refused 1 ms apart with the same advice, each retrying *lateness_ms(i)*
    past it."""
    j = Journal()
    retries = []
    for i in range(n):
        at = i * 0.001
        j.refused(at, advice_ms=advice_ms, value=str(advice_ms // 1000), body=f"item-{i}")
        retries.append((at + 0.001 + (advice_ms + lateness_ms(i)) / 1000, i))
    for at, i in sorted(retries):
        j.add(at, body=f"item-{i}")
    return j


@pytest.mark.parametrize("n", [3, 20])
def test_chains_sleeping_exactly_retry_after_are_a_herd(n: int) -> None:
    noise = random.Random(n)
    j = herd(lambda i: 1 + noise.uniform(0, 8), n)  # timer noise: a few ms
    [finding] = j.findings()
    assert finding["rule"] == "retry-herd"
    assert finding["message"] == (
        f"{n} chains retried in lockstep after the same advice (Retry-After: 1): no jitter"
    )
    assert len(finding["attempts"]) == 2 * n  # every answer and every retry
    assert f"{n} of the {n} chains waiting together" in finding["found"]
    assert "jitter" in finding["fix"]


JITTERS: dict[str, Callable[[random.Random], float]] = {
    # what each client adds to a 1000 ms advice, in ms
    "up to 10 %": lambda r: r.uniform(0, 100),
    "up to 25 %": lambda r: r.uniform(0, 250),
    "10 to 25 %": lambda r: r.uniform(100, 250),
    "full jitter": lambda r: r.uniform(0, 1000),
}


@pytest.mark.parametrize("jitter", list(JITTERS))
def test_twenty_jittered_chains_are_no_herd(jitter: str) -> None:
    # 14 of 20 (two thirds) in one 20 ms window has a chance below 1e-4 even at 10 %
    # (docs/audit.md): every seed of these is clean.
    for seed in range(10):
        r = random.Random(seed)
        j = herd(_given([JITTERS[jitter](r) for _ in range(20)]), 20)
        assert j.findings(HERD) == [], (jitter, seed)


def _given(waits: list[float]) -> Callable[[int], float]:
    return lambda i: waits[i]


def test_three_chains_whose_waits_past_the_advice_differ_by_the_window_are_no_herd() -> None:
    j = herd(lambda i: 5 + 30 * i, 3)  # 30 ms apart: more than the 20 ms window
    assert j.findings() == []


def test_a_few_chains_in_lockstep_among_many_jittered_ones_are_no_herd() -> None:
    r = random.Random(7)
    # 3 chains land together, the other 17 spread: jitter seen across the group.
    j = herd(lambda i: 300 + i if i < 3 else r.uniform(0, 250), 20)
    assert j.findings(HERD) == []


def test_chains_that_meet_the_limit_one_after_another_are_no_herd() -> None:
    j = Journal()
    at = 0.0
    for i in range(4):  # one operation at a time, each sleeping exactly Retry-After
        j.refused(at, body=f"item-{i}")
        j.add(at + 0.001 + 1.002, body=f"item-{i}")
        at += 1.1
    assert j.findings() == []


def test_retries_after_different_advice_are_judged_apart() -> None:
    j = Journal()
    for i in range(3):
        advice = 1000 * (i + 1)
        j.refused(i * 0.001, advice_ms=advice, value=str(i + 1), body=f"item-{i}")
    for i in range(3):
        j.add(i * 0.001 + 0.001 + (i + 1) + 0.002, body=f"item-{i}")
    assert j.findings() == []


def test_the_herd_window_grows_with_the_advice() -> None:
    # 10 s advised: the window is 2 % of it, 200 ms; retries 50 ms apart are in lockstep.
    j = herd(lambda i: 50.0 * i, 3, advice_ms=10_000)
    assert j.rules() == ["retry-herd"]
    assert Policy().herd_window(10_000) == 200
    assert Policy().herd_window(100) == 20


def test_k_is_a_parameter() -> None:
    j = herd(lambda i: 2.0, 3)
    assert j.report(Policy(herd_chains=4))["findings"] == []


# -- rate-limit-ignored ----------------------------------------------------------------------


def test_new_requests_sent_after_remaining_0_before_the_next_token_are_named() -> None:
    j = Journal()
    j.admitted(0, remaining=1, body="item-1")
    j.admitted(0.2, remaining=0, next_ms=1000, body="item-2")  # no tokens remain
    j.refused(0.4, body="item-3", advice_ms=1000, value="1", next_ms=800)
    j.admitted(1.45, remaining=0, next_ms=1000, body="item-3")  # its retry: not judged here
    [finding] = j.findings()
    assert finding["rule"] == "rate-limit-ignored"
    assert finding["endpoint"] == f"POST {PATH}"
    assert finding["attempts"] == [2, 3]
    assert finding["message"] == (
        "1 new request sent before the next token, after the consumer was told none remained"
    )
    assert finding["found"] == (
        "#2 answered remaining 0, the next token in 1000 ms; then #3 199 ms later"
    )
    assert "refills 1.0 a second" in finding["expected"]
    assert finding["fix"].startswith("pace requests")


def test_a_batch_that_keeps_sending_after_a_refusal_is_named() -> None:
    j = Journal()
    j.refused(0, body="item-1", advice_ms=1000, value="1", next_ms=1000)
    j.refused(0.3, body="item-2", advice_ms=1000, value="1", next_ms=700)
    j.refused(0.6, body="item-3", advice_ms=1000, value="1", next_ms=400)
    [finding] = j.findings(IGNORED)
    assert finding["attempts"] == [1, 2, 3]
    assert "#1 answered 429 RATE_LIMITED with a wait of 1000 ms" in finding["found"]


def test_a_consumer_that_waits_for_the_next_token_is_clean() -> None:
    j = Journal()
    j.admitted(0, remaining=1, body="item-1")
    j.admitted(0.2, remaining=0, next_ms=1000, body="item-2")
    j.admitted(1.25, remaining=0, next_ms=1000, body="item-3")
    j.admitted(2.3, remaining=0, next_ms=1000, body="item-4")
    assert j.findings() == []


def test_requests_sent_together_with_the_answers_operation_are_not_judged() -> None:
    j = Journal()
    for i in range(6):  # a burst: six sent at once, the bucket held five
        if i < 5:
            j.admitted(i * 0.002, remaining=4 - i, next_ms=1000 if i == 4 else 0, body=f"b{i}")
        else:
            j.refused(i * 0.002, body=f"b{i}")
    j.add(5 * 0.002 + 0.001 + 1.05, body="b5")  # its retry, after the advice
    assert j.findings() == []


def batch(j: Journal, connections: list[str | None]) -> None:
    """Eight items to a bucket of five, each sent 1 ms after the previous answer (on one
    event loop, a parallel burst arrives just so), the *n*-th on ``connections[n]``."""
    for i, connection in enumerate(connections):
        if i < 5:
            next_ms = 1000 if i == 4 else 0
            j.admitted(
                i * 0.002, remaining=4 - i, next_ms=next_ms, body=f"b{i}", connection=connection
            )
        else:
            j.refused(i * 0.002, body=f"b{i}", next_ms=1000 - 2 * i, connection=connection)


def test_a_batch_sent_on_the_answers_connection_after_remaining_0_is_named_at_once() -> None:
    j = Journal()
    batch(j, ["127.0.0.1:50001"] * 8)  # one keep-alive connection: it had each answer
    [finding] = j.findings(IGNORED)
    assert finding["attempts"] == [5, 6, 7, 8]
    assert finding["found"] == (
        "#5 answered remaining 0, the next token in 1000 ms;"
        " then #6 1 ms later, #7 3 ms later, #8 5 ms later"
    )


def test_the_same_batch_on_a_connection_each_is_a_burst_not_judged() -> None:
    j = Journal()
    batch(j, [f"127.0.0.1:{50001 + i}" for i in range(8)])  # eight workers, one request each
    assert j.findings(IGNORED) == []


def test_inside_the_burst_window_only_the_answers_own_connection_is_judged() -> None:
    j = Journal()
    batch(j, ["127.0.0.1:50001"] * 5 + ["127.0.0.1:50002", "127.0.0.1:50001", None])
    [finding] = j.findings(IGNORED)
    assert finding["attempts"] == [5, 7]  # #6 on another connection, #8 on one not known
    assert finding["found"].endswith("then #7 3 ms later")


def test_a_request_pipelined_on_the_connection_before_the_answer_went_out_is_not_judged() -> None:
    j = Journal()
    connection = "127.0.0.1:50001"
    j.admitted(0, remaining=0, next_ms=1000, body="item-1", connection=connection)
    # Sent before the answer came back (HTTP/1.1 pipelining): it could not have read it.
    j.add(0.0005, body="item-2", rate_limit=limit(remaining=0, next_ms=1000), connection=connection)
    assert j.findings(IGNORED) == []


def test_an_answer_with_no_rate_limit_headers_told_nothing() -> None:
    j = Journal()
    j.admitted(0, remaining=0, next_ms=1000, body="item-1", headers="none")
    j.admitted(0.3, remaining=0, next_ms=1000, body="item-2", headers="none")
    assert j.findings() == []


def test_another_key_is_another_bucket() -> None:
    j = Journal()
    j.admitted(0, remaining=0, next_ms=1000, body="item-1", key="header x-tenant: a")
    j.admitted(0.3, remaining=0, next_ms=1000, body="item-2", key="header x-tenant: b")
    assert j.findings() == []


# -- coverage --------------------------------------------------------------------------------


def test_rate_limit_answers_are_counted_in_a_row_of_their_own() -> None:
    j = Journal()
    j.refused(0)
    j.refused(1.1, status=503, value="1")
    j.refused(2.2, status=503, value="1", scripted=True)
    j.admitted(3.3, remaining=0, next_ms=1000)  # admitted: no rate-limit answer
    met = coverage(j.entries)
    assert met["rate_limited"] == {"RATE_LIMITED": 1, "ENDPOINT_UNREACHABLE": 2}
    assert met["categories"]["ENDPOINT_UNREACHABLE"] == 2  # in protocol: the category too
    assert "RATE_LIMITED" not in met["categories"]  # outside the chapter
    assert met["missing"]["rate_limited"] == []


def test_a_plain_endpoint_unreachable_is_no_rate_limit_answer() -> None:
    j = Journal()
    j.add(0, status=503, error_code="ENDPOINT_UNREACHABLE", retry=Retry(100, 5))
    met = coverage(j.entries)
    assert met["rate_limited"] == {"RATE_LIMITED": 0, "ENDPOINT_UNREACHABLE": 0}
    assert met["missing"]["rate_limited"] == ["RATE_LIMITED"]


def test_the_gate_can_require_a_rate_limit_answer() -> None:
    limited, plain = Journal("limited"), Journal("plain")
    limited.refused(0)
    limited.add(1.1)
    plain.add(0)
    whole = report([*limited.entries, *plain.entries])
    assert coverage_gaps(whole, ["RATE_LIMITED"]) == {"plain": ["RATE_LIMITED"]}
    everything = coverage_gaps(whole)  # every category and fault: no rate limit asked
    assert set(everything) == {"limited", "plain"}
    assert all("RATE_LIMITED" not in gaps for gaps in everything.values())
    with pytest.raises(AssertionError, match="session 'plain' has not met RATE_LIMITED"):
        assert_clean(whole, require_coverage=["RATE_LIMITED"])
    with pytest.raises(ValueError, match="did you mean 'RATE_LIMITED'"):
        coverage_gaps(whole, ["rate-limited"])


# -- the report's parameters -----------------------------------------------------------------


def test_get_admin_report_takes_the_new_rules_parameters(serve: Callable[..., Server]) -> None:
    server = serve("name: p\nskills: [{id: fine}]\n")
    url = f"{server.url}/__admin/report"
    query = {"herd_chains": "4", "herd_window_ms": "5", "herd_share": "1", "burst_ms": "0"}
    policy = requests.get(url, params=query, timeout=10).json()["policy"]
    assert (policy["herd_chains"], policy["herd_window_ms"]) == (4, 5)
    assert (policy["herd_share"], policy["burst_ms"]) == (1, 0)
    for name, bad in [("herd_chains", "1"), ("herd_chains", "2.5"), ("herd_share", "0")]:
        refused = requests.get(url, params={name: bad}, timeout=10)
        assert refused.status_code == 400, (name, bad)
        assert refused.json()["error"]["details"]["parameter"] == name


def test_mockskill_reports_table_prints_the_rate_limit_row_once_one_was_met() -> None:
    limited, plain = Journal("limited"), Journal("plain")
    limited.refused(0)
    limited.refused(1.1, status=503, value="1")
    limited.add(2.2)
    plain.add(0)
    text = table(report([*limited.entries, *plain.entries]))
    rows = [line.strip() for line in text.splitlines() if "rate-limit answers" in line]
    assert rows == ["rate-limit answers: RATE_LIMITED x1, ENDPOINT_UNREACHABLE x1"], text
