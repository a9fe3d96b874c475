"""Rate limits in a scenario file: ``rate_limit:`` and the ``rate_limited:`` step → checked model.

A skill's or a route's ``rate_limit:`` is a token bucket
(:class:`~.model.RateLimit`): ``capacity`` (the burst), ``refill`` (tokens a
second), what it counts per (``key``) and how a refusal is written
(``status``, ``retry_after``, ``headers``: :class:`~.model.RateAnswer`). A
step's ``rate_limited:`` is one such refusal scripted, with the wait given
(:class:`~.model.RateLimited`), for exact tests without timing. The engine
spends the buckets and writes the answers (docs/rate-limits.md); this module
only reads them.
"""

from __future__ import annotations

from typing import Any

from ..protocol import catalog
from .kinds import listed
from .model import (
    LIMIT_KEYS,
    RATE_ANSWERS,
    RATE_HEADER_FORMS,
    RETRY_AFTER_FORMS,
    TEXT_TYPE,
    RateAnswer,
    RateLimit,
    RateLimited,
    Reply,
    Step,
)
from .problems import Path, describe, did_you_mean
from .reader import Reader
from .template_syntax import HEADER_NAME_CHARS
from .waits_and_faults import BAD
from .waits_and_faults import delay as read_delay
from .when import parse_pointer

__all__ = [
    "BESIDE_RATE_LIMITED",
    "MAX_TOKENS",
    "NAMED_KEYS",
    "RATE_LIMITED_KEYS",
    "RATE_LIMIT_KEYS",
    "read_rate_limit",
    "scripted_step",
]

ANSWER_KEYS = ("status", "retry_after", "headers")
"""How a refusal is written: :class:`~.model.RateAnswer`'s fields, in both mappings."""
RATE_LIMIT_KEYS = ("capacity", "refill", "key", *ANSWER_KEYS)
RATE_LIMITED_KEYS = ("retry_after_ms", "limit", *ANSWER_KEYS)
BESIDE_RATE_LIMITED = ("rate_limited", "times", "delay", "set_state")
"""A scripted rate-limited step's keys: its answer is made per request from ``rate_limited``
alone (:attr:`.kinds.StepKind.made_per_request`)."""
MAX_TOKENS = 1_000_000
"""The largest capacity, refill or stated limit: far beyond a test's needs, and a bound
keeps the rate-limit headers sane numbers."""
NAMED_KEYS = ("header", "body")
"""The key kinds written as a mapping, ``{header: NAME}`` and ``{body: /POINTER}``."""
_KEY = "session, credential, client, {header: NAME} or {body: /POINTER}"
_STATUS = "429 (RATE_LIMITED, outside the chapter) or 503 (ENDPOINT_UNREACHABLE, in-protocol)"


def read_rate_limit(r: Reader, raw: dict[str, Any], path: Path) -> RateLimit | None:
    """*raw*'s ``rate_limit:`` (a skill's or a route's); None when it has none, or (with
    problems recorded) when it is wrong."""
    value = raw.get("rate_limit")
    if value is None:
        return None
    where = (*path, "rate_limit")
    if not isinstance(value, dict):
        r.bad(where, "{capacity: N, refill: TOKENS_PER_SECOND, ...}", describe(value))
        return None
    if not r.keys(value, where, RATE_LIMIT_KEYS, required=("capacity", "refill")):
        return None
    capacity = r.integer(value, "capacity", where, default=1, minimum=1, maximum=MAX_TOKENS)
    refill = _refill(r, value["refill"], (*where, "refill"))
    key = _key(r, value.get("key", "session"), (*where, "key"))
    answer = _answer(r, value, where)
    if capacity is None or refill is None or key is None or answer is None:
        return None
    kind, name = key
    return RateLimit(capacity, refill, r.position(where), kind, name, answer)


def scripted_step(r: Reader, raw: dict[str, Any], path: Path) -> Step | None:
    """A step with ``rate_limited:`` (its ``times`` and ``set_state`` are read by the caller).

    Its :attr:`~.model.Step.reply` only describes the answer — the status, the code
    (``RATE_LIMITED`` or ``ENDPOINT_UNREACHABLE``) and no body: the engine writes the
    real one per request from :attr:`~.model.Step.rate_limited` (the unified body, the
    advice, the headers, the date form reading the clock)."""
    others = [k for k in raw if k not in BESIDE_RATE_LIMITED]
    if others:
        r.bad(
            (*path, others[0]),
            f"only {listed(BESIDE_RATE_LIMITED[1:], 'and')} beside rate_limited",
            f"{others[0]} as well",
            "the answer is written from rate_limited alone (status, retry_after, headers and"
            " limit go inside it); another answer goes in another step",
            at_key=True,
        )
        return None
    scripted = _rate_limited(r, raw["rate_limited"], (*path, "rate_limited"))
    delay = read_delay(r, raw, "delay", path)
    if scripted is None or delay is BAD:
        return None
    code = catalog.RATE_LIMITED.code if scripted.answer.status == 429 else "ENDPOINT_UNREACHABLE"
    reply = Reply.make(scripted.answer.status, b"", TEXT_TYPE, error_code=code)
    return Step(reply, r.position(path), delay=delay, rate_limited=scripted)


def _rate_limited(r: Reader, value: Any, path: Path) -> RateLimited | None:
    if not isinstance(value, dict):
        r.bad(path, "{retry_after_ms: MS, retry_after: FORM, headers: FORM, ...}", describe(value))
        return None
    if not r.keys(value, path, RATE_LIMITED_KEYS, required=("retry_after_ms",)):
        return None
    # At most the longest wait a step may script, as a retry's advice: the consumer
    # that follows it waits that long in its test run.
    wait = r.integer(
        value, "retry_after_ms", path, default=0, minimum=0, maximum=r.max_delay_ms, unit="ms"
    )
    limit = r.integer(value, "limit", path, default=1, minimum=1, maximum=MAX_TOKENS)
    answer = _answer(r, value, path)
    if wait is None or limit is None or answer is None:
        return None
    return RateLimited(wait, limit, answer)


def _refill(r: Reader, value: Any, path: Path) -> float | None:
    """Tokens a second: above 0, and at least one token in the longest wait a step may
    script, so that a refusal's advice is a wait a test can follow (as ``retry``'s is)."""
    slowest = 1000 / r.max_delay_ms
    expected = (
        f"a number of tokens a second, from {slowest:.6g} (one every {r.max_delay_ms} ms,"
        f" the longest wait) to {MAX_TOKENS}"
    )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        r.bad(path, expected, describe(value))
        return None
    if not slowest <= value <= MAX_TOKENS:  # (false for .nan too)
        hint = "0.5 is one token every 2 s" if value <= 0 else ""
        if 0 < value < slowest:
            hint = "slower refills advise waits longer than a step may script"
        r.bad(path, expected, describe(value), hint)
        return None
    return float(value)


def _key(r: Reader, value: Any, path: Path) -> tuple[str, str | None] | None:
    """What the bucket counts per: (its kind, the header's name or the pointer)."""
    if isinstance(value, str) and value in LIMIT_KEYS and value not in NAMED_KEYS:
        return value, None
    if isinstance(value, str):
        named = {"header": "{header: X-Tenant}", "body": "{body: /tenant}"}
        hint = f"name what it reads: {named[value]}" if value in named else ""
        r.bad(path, f"one of {_KEY}", describe(value), hint or did_you_mean(value, LIMIT_KEYS))
        return None
    if not isinstance(value, dict) or len(value) != 1:
        r.bad(path, f"one of {_KEY}", describe(value))
        return None
    if not r.keys(value, path, NAMED_KEYS):
        return None
    [(kind, name)] = value.items()
    where = (*path, kind)
    if kind == "header":
        if not isinstance(name, str) or not name or not all(c in HEADER_NAME_CHARS for c in name):
            r.bad(where, "a header name (letters, digits, - and the like)", describe(name))
            return None
        return kind, name.lower()
    if not isinstance(name, str) or not name or parse_pointer(name) is None:
        r.bad(
            where,
            "a JSON Pointer to a value in the body: /key/0/... (~0 for ~, ~1 for /)",
            describe(name),
            "write the path from the body's root, beginning with /",
        )
        return None
    return kind, name


def _answer(r: Reader, value: dict[str, Any], path: Path) -> RateAnswer | None:
    """How the refusal is written (the keys left out keep :class:`~.model.RateAnswer`'s
    defaults)."""
    default = RateAnswer()
    status = value.get("status", default.status)
    retry_after = value.get("retry_after", default.retry_after)
    headers = value.get("headers", default.headers)
    ok = True
    if not isinstance(status, int) or isinstance(status, bool) or status not in RATE_ANSWERS:
        r.bad((*path, "status"), _STATUS, describe(status))
        ok = False
    if not r.among(retry_after, (*path, "retry_after"), RETRY_AFTER_FORMS):
        ok = False
    if not r.among(headers, (*path, "headers"), RATE_HEADER_FORMS):
        ok = False
    return RateAnswer(status, retry_after, headers) if ok else None
