"""The rule ``retry-herd``: chains that retry in lockstep after the same rate-limit advice.

Twenty workers that each get ``429`` with ``Retry-After: 1`` and each sleep
exactly one second come back together, and the limit refuses most of them
again: a thundering herd. The cure is jitter — each worker adds a random part
to the advised wait — so the audit looks for its absence.

:func:`retry_herds` takes, per chain, the first retry after a rate-limit
answer (:func:`~.retries.rate_limit_answer`) that gave advice, and groups
the retries by the advice as its header said it (the same ``Retry-After``
value). In a group, the chains that were waiting at the same time (their
waits overlapping) are judged together: a retry's *lateness* is how long it
waited past the advice; retries are in lockstep when their lateness lies
within :meth:`Policy.herd_window <.policy.Policy.herd_window>` of each
other. A herd is at least :attr:`~.policy.Policy.herd_chains` chains in
lockstep making at least :attr:`~.policy.Policy.herd_share` of those waiting
together: with jitter, a few chains of many always land close by chance,
most of them never do. docs/audit.md gives the numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from .findings import Attempt, Finding, plural
from .policy import Policy
from .retries import endpoint_of, rate_limit_answer

RULE = "retry-herd"


@dataclass(frozen=True)
class Waiter:
    """A chain's retry after a rate-limit answer that advised a wait."""

    answer: Attempt
    retry: Attempt
    advised_ms: float
    lateness_ms: float
    """How long the retry waited past the advice (below 0: it came early)."""
    since: float
    """When its wait began (the answer, as the consumer had it)."""


def _advice_said(attempt: Attempt) -> str:
    """The advice as the answer's header wrote it (``Retry-After: 1``)."""
    limit = attempt.entry.rate_limit or {}
    value = limit.get("retry_after_value")
    if value is None:
        advice = attempt.outcome.advice
        return f"{advice.suggested_delay_ms if advice else 0} ms advised"
    name = "retry-after-ms" if limit.get("retry_after") == "ms" else "Retry-After"
    return f"{name}: {value}"


def waiters(chain: Sequence[Attempt]) -> dict[str, Waiter]:
    """*chain*'s first retry after each advice (by what its header said) of a rate limit."""
    found: dict[str, Waiter] = {}
    for before, after in itertools.pairwise(chain):
        advice = before.outcome.advice
        if advice is None or not rate_limit_answer(before.entry) or after.wait_ms is None:
            continue
        said = _advice_said(before)
        if said not in found and after.wait_from is not None:
            advised = float(advice.suggested_delay_ms)
            found[said] = Waiter(before, after, advised, after.wait_ms - advised, after.wait_from)
    return found


def together(group: list[Waiter]) -> list[list[Waiter]]:
    """*group* split into the sets of chains that were waiting at the same time (a
    consumer that meets limits one operation after another never has two)."""
    sets: list[list[Waiter]] = []
    last_end = 0.0
    for waiter in sorted(group, key=lambda w: w.since):
        if sets and waiter.since < last_end:
            sets[-1].append(waiter)
            last_end = max(last_end, waiter.retry.entry.started)
        else:
            sets.append([waiter])
            last_end = waiter.retry.entry.started
    return sets


def lockstep(waiting: list[Waiter], window_ms: float) -> list[Waiter]:
    """The most retries of *waiting* whose lateness lies within *window_ms* of each other."""
    ordered = sorted(waiting, key=lambda w: w.lateness_ms)
    best: list[Waiter] = []
    first = 0
    for last, waiter in enumerate(ordered):
        while waiter.lateness_ms - ordered[first].lateness_ms > window_ms:
            first += 1
        if last + 1 - first > len(best):
            best = ordered[first : last + 1]
    return best


def retry_herds(
    session: str, chained: Sequence[Sequence[Attempt]], policy: Policy
) -> list[Finding]:
    """The ``retry-herd`` findings of one session's chains (their attempts, as audited)."""
    groups: dict[str, list[Waiter]] = {}
    for chain in chained:
        for said, waiter in waiters(chain).items():
            groups.setdefault(said, []).append(waiter)
    findings = []
    for said, group in groups.items():
        for waiting in together(group):
            if len(waiting) < policy.herd_chains:
                continue
            window = policy.herd_window(max(w.advised_ms for w in waiting))
            herd = lockstep(waiting, window)
            if len(herd) >= policy.herd_chains and len(herd) >= policy.herd_share * len(waiting):
                findings.append(_finding(session, said, herd, len(waiting), window, policy))
    return findings


def _finding(
    session: str, said: str, herd: list[Waiter], waiting: int, window: float, policy: Policy
) -> Finding:
    n = len(herd)
    endpoints = sorted({endpoint_of(w.retry.entry) for w in herd})
    ids = sorted({i for w in herd for i in (w.answer.entry.id, w.retry.entry.id)})
    late = [w.lateness_ms for w in herd]
    spread = max(late) - min(late)
    retries = ", ".join(
        f"#{w.retry.entry.id} {w.lateness_ms:+.0f} ms"
        for w in sorted(herd, key=lambda w: w.retry.entry.started)
    )
    return Finding(
        rule=RULE,
        session=session,
        endpoint=", ".join(endpoints),
        attempts=ids,
        message=f"{n} chains retried in lockstep after the same advice ({said}): no jitter",
        expected=f"retries spread by jitter: fewer than {policy.herd_chains} chains, or fewer"
        f" than {policy.herd_share:.0%} of those waiting together, retrying within"
        f" {window:.0f} ms of each other past the advice (the larger of"
        f" {policy.herd_window_ms:.0f} ms and {policy.herd_window_ratio:.0%} of it)",
        found=f"{n} of the {waiting} {plural(waiting, 'chain', 'chains')} waiting together"
        f" retried within {spread:.0f} ms of each other, past the advised"
        f" {max(w.advised_ms for w in herd):.0f} ms by: {retries}",
        fix="add a random part to every wait, on top of Retry-After: e.g. sleep(retry_after"
        " * random.uniform(1, 1.25)) or retry_after + random.uniform(0, retry_after) (full"
        " jitter); urllib3's Retry sleeps Retry-After exactly (its backoff_jitter applies to"
        " its own backoff only), so add the jitter around it (tenacity: + wait_random(0, x))",
    )
