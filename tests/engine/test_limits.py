"""engine/limits.py: the bucket a request spends, and each wire form, without a server."""

from __future__ import annotations

import json
from email.utils import parsedate_to_datetime

import pytest

from mockskill.engine import limits
from mockskill.engine.entries import limit_record
from mockskill.engine.incoming import Incoming
from mockskill.protocol import catalog
from mockskill.scenario.model import RateAnswer, RateLimit, RateLimited
from mockskill.scenario.source import Position

HERE = Position("test.yaml", 1, 1)
NOW = 1_780_000_000.25  # a Friday, a quarter second past the second


def request(headers: dict[str, str] | None = None, body: bytes = b"") -> Incoming:
    def no_werkzeug() -> None:
        raise AssertionError("not needed")

    return Incoming(
        "POST", "/skills/s/invoke", headers or {}, body, ("localhost", 80), NOW, no_werkzeug
    )


def keyed(key: str, name: str | None = None) -> RateLimit:
    return RateLimit(2, 1.0, HERE, key, name)


@pytest.mark.parametrize(
    ("wait_ms", "text"), [(1500, "1.5"), (2000, "2.0"), (1, "0.001"), (10250, "10.25")]
)
def test_fractional_seconds_keep_a_point_and_at_most_three_decimals(
    wait_ms: int, text: str
) -> None:
    assert limits.fractional(wait_ms) == text


def test_each_retry_after_form_and_the_advice_it_states() -> None:
    assert limits.retry_after("seconds", 1001, NOW) == ([("Retry-After", "2")], 2000, "2")
    assert limits.retry_after("fractional", 1001, NOW) == (
        [("Retry-After", "1.001")],
        1001,
        "1.001",
    )
    assert limits.retry_after("ms", 1001, NOW) == (
        [("retry-after-ms", "1001"), ("Retry-After", "2")],
        1001,
        "1001",
    )
    assert limits.retry_after("missing", 1001, NOW) == ([], None, None)
    assert limits.retry_after("malformed", 1001, NOW) == ([("Retry-After", "soon")], None, "soon")
    (date, retry_after), advice, value = limits.retry_after("date", 1001, NOW)
    assert value == retry_after[1]
    assert date[0] == "Date"
    assert parsedate_to_datetime(date[1]).timestamp() == 1_780_000_000
    assert parsedate_to_datetime(retry_after[1]).timestamp() == 1_780_000_002
    assert advice == 1750  # the date, less the time it was answered


def test_each_rate_limit_header_form() -> None:
    assert limits.rate_headers("ietf", 5, 5, 3, 2100, NOW) == [
        ("RateLimit-Policy", '"default";q=5;w=5'),
        ("RateLimit", '"default";r=3;t=3'),
    ]
    assert limits.rate_headers("x-ratelimit", 5, 5, 3, 2100, NOW) == [
        ("X-RateLimit-Limit", "5"),
        ("X-RateLimit-Remaining", "3"),
        ("X-RateLimit-Reset", "3"),
    ]
    epoch = limits.rate_headers("x-ratelimit-epoch", 5, 5, 3, 2100, NOW)
    assert epoch[2] == ("X-RateLimit-Reset", "1780000003")
    assert limits.rate_headers("none", 5, 5, 3, 2100, NOW) == []


def test_the_window_is_the_time_to_fill_the_bucket() -> None:
    assert limits.window(RateLimit(5, 0.5, HERE)) == 10
    assert limits.window(RateLimit(1, 100, HERE)) == 1


def test_a_bucket_key_names_the_endpoint_the_kind_and_a_bounded_value() -> None:
    session = limits.bucket(keyed("session"), "8:scenario/skill/s/invoke", "s1")
    assert session.session == "s1"
    header = limits.bucket(keyed("header", "x-tenant"), "8:scenario/skill/s/invoke", "acme")
    assert header.session is None
    assert header.key != session.key
    shared = limits.bucket(keyed("header", "x-tenant"), "8:scenario/skill/s/invoke", None)
    assert shared.key not in (header.key, session.key)
    huge = limits.bucket(keyed("header", "x-tenant"), "e", "t" * 100_000)
    other = limits.bucket(keyed("header", "x-tenant"), "e", "t" * 99_999 + "u")
    assert len(huge.key) < 100
    assert huge.key != other.key


def test_the_key_the_journal_shows() -> None:
    assert limits.shown_key(keyed("session"), "s1") == "session: s1"
    assert limits.shown_key(keyed("header", "x-tenant"), "acme") == "header x-tenant: acme"
    assert limits.shown_key(keyed("body", "/tenant"), None) == "body /tenant"
    long = limits.shown_key(keyed("header", "x-tenant"), "t\n" * 1000)
    assert "\n" not in long
    assert len(long) < 200


def test_the_value_a_request_is_counted_by() -> None:
    header = keyed("header", "x-tenant")
    assert limits.key_value(header, "s", request({"x-tenant": "acme"}), None) == "acme"  # type: ignore[arg-type]
    assert limits.key_value(header, "s", request(), None) is None  # type: ignore[arg-type]
    body = keyed("body", "/input/a~1b")
    found = limits.key_value(body, "s", request(body=b'{"input": {"a/b": {"y": 1}}}'), None)  # type: ignore[arg-type]
    assert found == json.dumps({"y": 1})
    for sent in (b"", b"[", b'{"input": 3}', b"\xff", b"[" * 100_000):
        assert limits.key_value(body, "s", request(body=sent), None) is None  # type: ignore[arg-type]


def test_a_refusal_is_a_unified_body_with_its_forms() -> None:
    limit = RateLimit(3, 0.5, HERE, answer=RateAnswer(429, "ms", "x-ratelimit"))
    spent = (False, 0, 1234, 6000)
    reply, limited = limits.refusal(limit, spent, "s1", catalog.Context(), NOW)
    assert reply.status == 429
    body = json.loads(reply.body)
    assert catalog.error_body_problem(body) is None
    assert body["error"]["retry"] == {"suggested_delay_ms": 1234, "max_attempts": 5}
    assert reply.retry == catalog.Retry(1234, 5)
    assert dict(reply.headers) == {
        "retry-after-ms": "1234",
        "Retry-After": "2",
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "6",
    }
    assert isinstance(limited.record, dict)
    assert limited.record["wait_ms"] == 1234
    assert limited.record["retry_after_value"] == "1234"
    assert limited.record["key"] == "session: s1"
    assert not limited.added


def test_a_scripted_answer_states_its_own_limit_and_wait() -> None:
    step = RateLimited(1500, 20, RateAnswer(503, "missing", "ietf"))
    reply, limited = limits.scripted(step, catalog.Context.for_skill("s"), NOW)
    assert reply.status == 503
    assert reply.error_code == "ENDPOINT_UNREACHABLE"
    assert reply.retry is None
    assert dict(reply.headers) == {
        "RateLimit-Policy": '"default";q=20;w=2',
        "RateLimit": '"default";r=0;t=2',
    }
    assert limited.record["scripted"] is True
    assert (limited.record["next_ms"], limited.record["full_ms"]) == (1500, 1500)


def test_an_admitted_answer_gains_its_headers_on_a_head_rendered_once() -> None:
    from mockskill.engine.wire import Answer

    kept = Answer(200, (("Content-Type", "application/json"),), b"{}")
    policy = limits.Policy(RateLimit(5, 1.0, HERE, answer=RateAnswer(headers="x-ratelimit")))
    admitted = limits.admitted(policy, (True, 4, 0, 1000), "s1", NOW)
    assert admitted.headers == (
        ("X-RateLimit-Limit", "5"),
        ("X-RateLimit-Remaining", "4"),
        ("X-RateLimit-Reset", "1"),
    )
    made = limits.LimitedHead(kept, policy).answering(admitted.headers)
    assert made.wire(close=False) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-RateLimit-Limit: 5\r\n"
        b"X-RateLimit-Remaining: 4\r\nX-RateLimit-Reset: 1\r\nContent-Length: 2\r\n\r\n{}"
    )
    whole = limits.with_headers(kept, admitted.headers)
    assert made.wire(close=True) == whole.wire(close=True)
    assert made.headers == whole.headers


def test_the_none_form_adds_nothing_to_an_admitted_answer() -> None:
    policy = limits.Policy(RateLimit(5, 1.0, HERE, answer=RateAnswer(headers="none")))
    admitted = limits.admitted(policy, (True, 4, 0, 1000), "s1", NOW)
    assert (admitted.headers, admitted.added) == ((), False)
    shown = limit_record(admitted.record)  # (made a dict when its entry is shown)
    assert (shown["remaining"], shown["full_ms"], shown["key"]) == (4, 1000, "session: s1")


@pytest.mark.parametrize("form", ["seconds", "date", "fractional", "ms", "missing", "malformed"])
@pytest.mark.parametrize("headers", ["ietf", "x-ratelimit", "x-ratelimit-epoch", "none"])
def test_refusals_stating_the_same_values_answer_the_same(form: str, headers: str) -> None:
    # The engine keeps a refusal's answer per Policy.stated: equal values must mean equal
    # headers and advice, whatever the wait, the time to full and the clock.
    policy = limits.Policy(RateLimit(3, 0.5, HERE, answer=RateAnswer(429, form, headers)))
    answers: dict[object, limits.Advised] = {}
    for wait_ms in (1, 999, 1000, 1001, 1500, 1999, 2000, 2001):
        for full_ms in (wait_ms, wait_ms + 999, wait_ms + 1000, 6000):
            for now in (NOW, NOW + 0.5, NOW + 0.75, NOW + 1):
                spent = (False, 0, wait_ms, full_ms)
                advised = limits.refusal_headers(policy, spent, now)
                assert answers.setdefault(policy.stated(spent, now), advised) == advised
    assert len(answers) < 8 * 4 * 4 or form == "date"  # (some kept answers are shared)
