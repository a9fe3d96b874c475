"""correlation-lost: a retry that drops or changes the Idempotency-Key, traceparent or
X-Request-Id its first attempt carried, judged on hand-made journal entries (headers as
the journal keeps them: (name as written, value) pairs; None: not kept, not judged)."""

from __future__ import annotations

from typing import Any

import pytest

from mockskill.audit import RULES, assert_clean, report
from mockskill.audit.correlation import RULE, correlation_lost, trace_id
from mockskill.engine.entries import Entry

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SAME_TRACE_NEW_SPAN = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
OTHER_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def attempt(n: int, headers: dict[str, str] | None, *, ok: bool = False) -> Entry:
    """Attempt *n* of one invocation (a second apart: the timing rules stay quiet)."""
    return Entry(
        n,
        1000.0 + 2 * n,
        1000.0 + 2 * n + 0.01,
        "s",
        "POST",
        "/skills/pay/invoke",
        200 if ok else 503,
        "invoke",
        skill="pay",
        error_code=None if ok else "ENDPOINT_UNREACHABLE",
        body_digest="hmac-sha256:same",
        headers=None if headers is None else tuple(headers.items()),
    )


def lost(*headers: dict[str, str] | None) -> list[dict[str, Any]]:
    chain = [attempt(i + 1, h, ok=i == len(headers) - 1) for i, h in enumerate(headers)]
    return [f.as_json() for f in correlation_lost("s", chain)]


def test_it_is_a_rule_of_the_audit() -> None:
    assert RULE in RULES


def test_retries_that_keep_every_header_are_clean() -> None:
    kept = {"Idempotency-Key": "op-1", "traceparent": TRACE, "X-Request-Id": "r-1"}
    assert lost(kept, kept, kept) == []


def test_a_dropped_idempotency_key_is_a_finding_naming_both_attempts() -> None:
    [finding] = lost({"Idempotency-Key": "op-1"}, {}, {"Idempotency-Key": "op-1"})
    assert finding["rule"] == "correlation-lost"
    assert finding["endpoint"] == "POST /skills/pay/invoke"
    assert finding["attempts"] == [1, 2]
    assert finding["message"] == "1 retry lost the first attempt's Idempotency-Key"
    assert finding["found"] == "#2 sent no Idempotency-Key (#1 sent 'op-1')"
    assert "outside what is retried" in finding["fix"]


def test_a_new_key_per_attempt_is_a_finding_for_each_retry() -> None:
    [finding] = lost({"Idempotency-Key": "a"}, {"Idempotency-Key": "b"}, {"Idempotency-Key": "c"})
    assert finding["attempts"] == [1, 2, 3]
    assert finding["message"] == "2 retries lost the first attempt's Idempotency-Key"
    assert (
        finding["found"]
        == "#2 sent Idempotency-Key 'b', #1 sent 'a'; #3 sent Idempotency-Key 'c', #1 sent 'a'"
    )


def test_headers_are_looked_up_in_any_case() -> None:
    assert lost({"idempotency-key": "k"}, {"IDEMPOTENCY-KEY": "k"}) == []
    assert lost({"x-request-id": "r"}, {"X-Request-ID": "r"}) == []
    [finding] = lost({"x-request-id": "r"}, {"X-Request-ID": "s"})
    assert finding["message"] == "1 retry lost the first attempt's X-Request-Id"


def test_a_traceparent_is_judged_by_its_trace_id_a_new_span_is_fine() -> None:
    assert lost({"traceparent": TRACE}, {"traceparent": SAME_TRACE_NEW_SPAN}) == []
    [finding] = lost({"traceparent": TRACE}, {"traceparent": OTHER_TRACE})
    assert "of another trace" in finding["found"]
    assert "traceparent's trace id" in finding["expected"]
    assert trace_id(TRACE) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id("not a traceparent") == "not a traceparent"


def test_every_header_lost_is_named_once() -> None:
    first = {"Idempotency-Key": "k", "traceparent": TRACE, "X-Request-Id": "r"}
    [finding] = lost(first, {"traceparent": OTHER_TRACE}, {"traceparent": OTHER_TRACE})
    assert finding["message"] == (
        "2 retries lost the first attempt's Idempotency-Key and traceparent and X-Request-Id"
    )


@pytest.mark.parametrize(
    "chain",
    [
        pytest.param(({}, {"Idempotency-Key": "k"}), id="the first carried none: nothing lost"),
        pytest.param((None, {}), id="the first attempt's headers not kept"),
        pytest.param(({"Idempotency-Key": "k"}, None), id="the retry's headers not kept"),
        pytest.param(({"Idempotency-Key": "k"},), id="no retry"),
    ],
)
def test_what_is_not_judged(chain: tuple[dict[str, str] | None, ...]) -> None:
    assert lost(*chain) == []


def test_the_report_lists_it_and_the_gate_fails_on_it() -> None:
    entries = [attempt(1, {"Idempotency-Key": "a"}), attempt(2, {"Idempotency-Key": "b"}, ok=True)]
    audited = report(entries)
    [session] = audited["sessions"]
    assert [f["rule"] for f in session["findings"]] == ["correlation-lost"]
    assert session["clean"] is False
    with pytest.raises(AssertionError, match="correlation-lost: 1 retry lost"):
        assert_clean(audited)
