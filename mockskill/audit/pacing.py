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

import heapq
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


Bucket = tuple[str, str | None]
"""A bucket as the audit tells them apart: the endpoint, and the limit's key (its kind,
name and value as a string: ``session: s1``; None: a scripted step's, no bucket)."""


def bucket_of(attempt: Attempt) -> Bucket:
    """The bucket a request counts against: its endpoint and the limit's key."""
    key = (attempt.entry.rate_limit or {}).get("key")
    return endpoint_of(attempt.entry), None if key is None else str(key)


def rate_limit_ignored(
    session: str, chained: Sequence[Sequence[Attempt]], policy: Policy
) -> list[Finding]:
    """The ``rate-limit-ignored`` findings of one session's chains (their attempts, as audited).

    Per bucket, one sweep in time over its answers that said no tokens remained and its
    chains' first attempts: a long session is read once, not once per answer. A first
    attempt is never judged against its own chain's answers (they came after it).
    """
    arrivals: dict[Bucket, list[Attempt]] = {}  # chains' first attempts
    told: dict[Bucket, list[tuple[float, float, Attempt]]] = {}  # (from, until, answer)
    for chain in chained:
        first = chain[0]
        if first.entry.rate_limit is not None:
            arrivals.setdefault(bucket_of(first), []).append(first)
        for answer in chain:
            limit = answer.entry.rate_limit
            if said_empty(limit):
                assert limit is not None
                since = ended(answer.entry)
                # Judged from when the consumer had the answer, or from when a request sent
                # with the answer's operation can no longer have been on its way: the later.
                judged_from = max(since, first.entry.started + policy.burst_ms / 1000)
                until = since + policy.least(float(limit["next_ms"])) / 1000
                told.setdefault(bucket_of(answer), []).append((judged_from, until, answer))
    findings = []
    for bucket, answers in told.items():
        answers.sort(key=lambda t: (t[0], t[2].entry.id))
        early: dict[int, tuple[Attempt, list[Attempt]]] = {}  # by answer id
        active: list[tuple[float, int, float, Attempt]] = []  # (started, id, until, answer)
        n = 0
        for arrival in sorted(
            arrivals.get(bucket, []), key=lambda a: (a.entry.started, a.entry.id)
        ):
            at = arrival.entry.started
            while n < len(answers) and answers[n][0] <= at:
                judged_from, until, answer = answers[n]
                heapq.heappush(active, (answer.entry.started, answer.entry.id, until, answer))
                n += 1
            while active and active[0][2] <= at:  # over: never again, time only goes on
                heapq.heappop(active)
            if active:  # the earliest answer that said none remained, still in force
                answer = active[0][3]
                early.setdefault(answer.entry.id, (answer, []))[1].append(arrival)
        if early:
            findings.append(_finding(session, bucket[0], list(early.values())))
    return findings


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
