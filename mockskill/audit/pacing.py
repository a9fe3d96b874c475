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
its own advice by ``retry-too-soon``. Requests sent together with the
answer's operation (within :attr:`~.policy.Policy.burst_ms` of its first
attempt) are not judged: they may have been on their way before anything was
said — a parallel burst on one event loop arrives as a strict sequence, each
just after the previous answer, and timing cannot tell it from a consumer
sending on. Unless one came on the answer's own connection (``Entry.connection``),
after the answer was sent: HTTP/1.1 answers a connection's requests in order,
so its sender had the answer (a batch sent back to back on one keep-alive
connection). A consumer opening a new connection per request inside the burst
window is not told apart from a parallel burst.
"""

from __future__ import annotations

import heapq
import math
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


Window = tuple[float, float, Attempt]
"""When an answer that said no tokens remained is in force: (from, until, the answer)."""


def rate_limit_ignored(
    session: str, chained: Sequence[Sequence[Attempt]], policy: Policy
) -> list[Finding]:
    """The ``rate-limit-ignored`` findings of one session's chains (their attempts, as audited).

    Per bucket, one sweep in time over its answers that said no tokens remained and its
    chains' first attempts: a long session is read once, not once per answer; and one per
    connection of those answers, over the burst window its own requests are judged in. A
    first attempt is never judged against its own chain's answers (they came after it).
    """
    arrivals: dict[Bucket, list[Attempt]] = {}  # chains' first attempts
    told: dict[Bucket, list[Window]] = {}
    # Inside the burst window, judged only on the answer's connection (one that has none
    # known, an entry of an earlier version, is not judged there).
    told_on: dict[Bucket, dict[str, list[Window]]] = {}
    for chain in chained:
        first = chain[0]
        if first.entry.rate_limit is not None:
            arrivals.setdefault(bucket_of(first), []).append(first)
        for answer in chain:
            limit = answer.entry.rate_limit
            if said_empty(limit):
                assert limit is not None
                since = ended(answer.entry)
                until = since + policy.least(float(limit["next_ms"])) / 1000
                # Judged from when the consumer had the answer, or from when a request sent
                # with the answer's operation can no longer have been on its way: the later.
                burst_over = first.entry.started + policy.burst_ms / 1000
                bucket = bucket_of(answer)
                told.setdefault(bucket, []).append((max(since, burst_over), until, answer))
                connection = answer.entry.connection
                if connection is not None and since < burst_over:
                    # Strictly after it ended (a refusal can end the instant it started).
                    window = (math.nextafter(since, math.inf), min(burst_over, until), answer)
                    told_on.setdefault(bucket, {}).setdefault(connection, []).append(window)
    findings = []
    for bucket, in_bucket in arrivals.items():
        if bucket not in told:
            continue
        in_bucket.sort(key=lambda a: (a.entry.started, a.entry.id))
        early = _told_early(in_bucket, told[bucket])
        for connection, windows in told_on.get(bucket, {}).items():
            on_it = [a for a in in_bucket if a.entry.connection == connection]
            for ident, answer in _told_early(on_it, windows).items():
                known = early.get(ident)
                if known is None or _order(answer) < _order(known):
                    early[ident] = answer
        if early:
            by_answer: dict[int, tuple[Attempt, list[Attempt]]] = {}
            for arrival in in_bucket:
                told_by = early.get(arrival.entry.id)
                if told_by is not None:
                    by_answer.setdefault(told_by.entry.id, (told_by, []))[1].append(arrival)
            findings.append(_finding(session, bucket[0], list(by_answer.values())))
    return findings


def _order(answer: Attempt) -> tuple[float, int]:
    return answer.entry.started, answer.entry.id


def _told_early(arrivals: list[Attempt], windows: list[Window]) -> dict[int, Attempt]:
    """Each of *arrivals* (in time order) that started inside one of *windows*, by its entry
    id: the earliest answer (by start) of those in force then. One sweep of both in time."""
    windows = sorted(windows, key=lambda w: (w[0], w[2].entry.id))
    early: dict[int, Attempt] = {}
    active: list[tuple[float, int, float, Attempt]] = []  # (started, id, until, answer)
    n = 0
    for arrival in arrivals:
        at = arrival.entry.started
        while n < len(windows) and windows[n][0] <= at:
            _, until, answer = windows[n]
            heapq.heappush(active, (answer.entry.started, answer.entry.id, until, answer))
            n += 1
        while active and active[0][2] <= at:  # over: never again, time only goes on
            heapq.heappop(active)
        if active:  # the earliest answer that said none remained, still in force
            early[arrival.entry.id] = active[0][3]
    return early


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
