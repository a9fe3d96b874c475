"""The rule ``rate-limit-ignored``: new requests sent on after "no tokens remain".

An answer of a limited endpoint says how many requests its bucket still
admits (``RateLimit: r=0``, ``X-RateLimit-Remaining: 0``), and a refusal
with ``Retry-After`` says when the next one will be. A consumer that paces
itself sends nothing more to that bucket until then; one that does not
keeps sending — and is refused, or (on a real provider) banned.

:func:`rate_limit_ignored` reads each answer that said no tokens remain
(the entry's ``rate_limit``: ``remaining`` 0 with rate-limit headers sent,
or a wait advised) and the requests to the same bucket (endpoint and key)
that started after the consumer had it and before the next token
(``next_ms``, less the tolerance). Only new operations count — the first
attempt of a chain (the next item of a batch): a retry is graded against
its own advice by ``retry-too-soon``. Nor do requests sent together with
the answer's operation (within :attr:`~.policy.Policy.burst_ms` of its first
attempt): they were on their way before anything was said.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .findings import Attempt, Finding, plural
from .policy import Policy
from .retries import ended, endpoint_of

RULE = "rate-limit-ignored"


def said_empty(limit: dict[str, Any] | None) -> bool:
    """Whether an answer's rate limit told the consumer no tokens remained."""
    if limit is None or not limit.get("next_ms"):
        return False
    if limit.get("wait_ms") is not None:
        return True  # a wait advised: a refusal, or a scripted rate_limited step
    return limit.get("remaining") == 0 and limit.get("headers") != "none"


def bucket_of(attempt: Attempt) -> tuple[str, str]:
    """The bucket a request counts against: its endpoint and the limit's key."""
    limit = attempt.entry.rate_limit or {}
    return endpoint_of(attempt.entry), json.dumps(limit.get("key"), sort_keys=True)


def rate_limit_ignored(
    session: str, chained: Sequence[Sequence[Attempt]], policy: Policy
) -> list[Finding]:
    """The ``rate-limit-ignored`` findings of one session's chains (their attempts, as audited)."""
    firsts: list[tuple[int, Attempt]] = []  # (chain, its first attempt) of limited endpoints
    told: list[tuple[int, Attempt, Attempt]] = []  # (chain, the answer, its chain's first)
    for n, chain in enumerate(chained):
        if chain[0].entry.rate_limit is not None:
            firsts.append((n, chain[0]))
        told.extend((n, a, chain[0]) for a in chain if said_empty(a.entry.rate_limit))
    flagged: dict[tuple[str, str], list[tuple[Attempt, list[Attempt]]]] = {}
    seen: set[int] = set()
    for index, answer, first in sorted(told, key=lambda t: t[1].entry.started):
        bucket = bucket_of(answer)
        limit = answer.entry.rate_limit or {}
        since = ended(answer.entry)
        early = [
            attempt
            for other, attempt in firsts
            if other != index
            and attempt.entry.id not in seen
            and bucket_of(attempt) == bucket
            and attempt.entry.started >= since
            and (attempt.entry.started - since) * 1000 < policy.least(float(limit["next_ms"]))
            and (attempt.entry.started - first.entry.started) * 1000 >= policy.burst_ms
        ]
        if early:
            seen.update(a.entry.id for a in early)
            flagged.setdefault(bucket, []).append((answer, early))
    return [_finding(session, bucket[0], told_early) for bucket, told_early in flagged.items()]


def _said(answer: Attempt) -> str:
    limit = answer.entry.rate_limit or {}
    if limit.get("wait_ms") is not None:
        status = answer.entry.status
        return f"{status} {answer.outcome.code or ''} with a wait of {limit['wait_ms']} ms".strip()
    return "remaining 0"


def _finding(
    session: str, endpoint: str, told_early: list[tuple[Attempt, list[Attempt]]]
) -> Finding:
    steps = []
    ids: set[int] = set()
    n = 0
    for answer, early in told_early:
        limit = answer.entry.rate_limit or {}
        since = ended(answer.entry)
        ids.add(answer.entry.id)
        ids.update(a.entry.id for a in early)
        n += len(early)
        later = ", ".join(
            f"#{a.entry.id} {(a.entry.started - since) * 1000:.0f} ms later" for a in early
        )
        steps.append(
            f"#{answer.entry.id} answered {_said(answer)}, the next token in"
            f" {limit['next_ms']} ms; then {later}"
        )
    refill = (told_early[0][0].entry.rate_limit or {}).get("refill")
    rate = f" (this limit refills {refill} a second)" if refill else ""
    return Finding(
        rule=RULE,
        session=session,
        endpoint=endpoint,
        attempts=sorted(ids),
        message=f"{n} new {plural(n, 'request', 'requests')} sent before the next token,"
        " after the consumer was told none remained",
        expected="after an answer that says no tokens remain (RateLimit r=0,"
        " X-RateLimit-Remaining: 0, or a 429/503 with Retry-After), no new request to that"
        f" endpoint and key until the next token comes{rate}",
        found="; ".join(steps),
        fix="pace requests: when the remaining count reaches 0, or a refusal says when,"
        " wait for the reset (RateLimit t=, X-RateLimit-Reset, Retry-After) before the next"
        " request, in every worker (one limiter shared by all, e.g. a token bucket at the"
        " provider's rate)",
    )
