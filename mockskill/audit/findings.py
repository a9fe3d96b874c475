"""The retry rules, applied to one retry chain, and the findings they make.

``non-retryable-retried``, ``retry-too-soon``, ``backoff-not-growing`` and
``too-many-attempts`` (docs/audit.md documents each): :func:`audit_chain`
measures every attempt's wait against the :mod:`policy <mockskill.audit.policy>`,
and each breach becomes a :class:`Finding` that says what was found, what
the chapter expects and the fix. :func:`used_invalid` finds skills invoked
after their descriptor failed validation. A rate limit's answer is judged on the
advice its header gave (waiting it out is enough: no doubling owed), and one that gave
none (``Retry-After`` missing or malformed) retried at once is ``backoff-not-growing``,
there being no advice to be too soon for. The fifth rule,
``duplicate-execution`` (a retry that ran an operation twice, behind a proxy
or on a scripted skill), is :mod:`.executions`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.state import Entry
from ..protocol.catalog import CATEGORIES, retry_after_seconds
from .policy import FIELD_NAMES, FINGERPRINT, MUST_CHANGE, Policy, advised_ms, max_attempts, needed
from .retries import (
    AttemptOutcome,
    acted_on_detail,
    answered,
    client_timeout_ms,
    ended,
    endpoint_of,
    outcome,
    rate_limit_answer,
)

RULES = (
    "non-retryable-retried",
    "retry-too-soon",
    "backoff-not-growing",
    "too-many-attempts",
    "duplicate-execution",  # audit/executions.py: retries that ran an operation again
    "correlation-lost",  # audit/correlation.py: retries that drop or change a correlation header
    "retry-herd",  # audit/herds.py: chains retrying in lockstep after the same rate-limit advice
    "rate-limit-ignored",  # audit/pacing.py: requests sent on after "no tokens remain"
    # audit/tasks.py: how a consumer waits on a long-running task
    "poll-too-soon",  # a poll before the previous answer's Retry-After
    "poll-after-terminal",  # polls after a terminal status was served (one grace poll)
    "task-abandoned",  # a live task left unpolled and never cancelled
    "reinvoked-while-running",  # a second task for the operation of a live one
    "status-url-ignored",  # requests to task URLs mockskill never handed out
    # audit/callbacks.py: how a consumer receives a task's callbacks
    "callback-not-acknowledged",  # a valid delivery not answered 2xx in time
    "callback-signature-not-checked",  # a forged delivery answered 2xx
    "callback-without-reconcile",  # a lost callback, the status URL never asked after
    # audit/streams.py: how a consumer recovers from a stream that went wrong
    "resume-ignored",  # a cut resumable stream re-requested without Last-Event-ID
    "stall-not-detected",  # a stalled stream held open past the idle bound
    "gave-up-despite-progress",  # a stream left while delivering, before its expected end
)


@dataclass
class Attempt:
    entry: Entry
    outcome: AttemptOutcome
    wait_ms: float | None = None
    expected_wait_ms: float | None = None
    changed: tuple[str, ...] | None = None
    wait_from: float | None = None
    """When the wait before this attempt began (see :func:`acted_on`)."""
    on_status_line: bool = False
    """Whether it was sent on the previous answer's status line, its body unread."""


@dataclass
class Finding:
    rule: str
    session: str
    endpoint: str
    attempts: list[int]
    message: str
    expected: str
    found: str
    fix: str
    task: str | None = None
    """The long-running task the finding is about (its id), for a task rule; else None."""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rule": self.rule,
            "session": self.session,
            "endpoint": self.endpoint,
            "attempts": self.attempts,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "fix": self.fix,
        }
        if self.task is not None:
            data["task"] = self.task
        return data


def _ms(value: float) -> str:
    return f"{value:.0f} ms"


def _changed(before: Entry, after: Entry) -> tuple[str, ...]:
    return tuple(f for f in FINGERPRINT if getattr(before, f) != getattr(after, f))


def audit_chain(
    session: str, chain: Sequence[Entry], policy: Policy
) -> tuple[list[Attempt], list[Finding]]:
    attempts = [Attempt(e, outcome(e)) for e in chain]
    if len(attempts) < 2:
        return attempts, []  # sent once: no retry to judge (most chains of a session)
    endpoint = endpoint_of(chain[0])
    unchanged: list[int] = []  # indexes of non-retryable retries made without the needed change
    too_soon: list[int] = []
    not_growing: list[int] = []
    too_many: list[int] = []
    limit = total = 0  # of the run that went on too long: what was allowed, what was made
    run_start: int | None = None  # first attempt of the current run of retryable failures
    for i, attempt in enumerate(attempts):
        if i > 0:
            before = attempts[i - 1]
            acted = acted_on_detail(before.entry, attempt.entry)
            # chains() puts no concurrent attempt in a chain; a chain made by hand may have one.
            attempt.wait_from, attempt.on_status_line = acted or (ended(before.entry), False)
            attempt.wait_ms = max(0.0, attempt.entry.started - attempt.wait_from) * 1000
            attempt.changed = _changed(before.entry, attempt.entry)
            previous = before.outcome
            if previous.retryable is False:
                needed = MUST_CHANGE.get(previous.code or "", FINGERPRINT)
                if not set(needed) & set(attempt.changed):
                    unchanged.append(i)
            elif previous.retryable is True and run_start is not None:
                retry = i - run_start  # 1 for the first retry of the run
                initial = advised_ms(attempts[run_start].outcome, policy)
                advised = advised_ms(previous, policy) if previous.advice else initial
                # The base of the backoff: the run's first advice, or the latest when the
                # provider has lowered it since (a consumer may follow either).
                required = max(advised, min(initial, advised) * 2 ** (retry - 1))
                limited = rate_limit_answer(before.entry)
                if limited and previous.advice:
                    # A rate limit's advice is when its next token comes: waiting it out is
                    # enough (a client honouring Retry-After, as urllib3 does, is right).
                    required = advised
                attempt.expected_wait_ms = required
                if attempt.wait_ms < policy.least(advised):
                    # A limit that gave no advice (Retry-After missing or malformed) leaves
                    # nothing to be too soon for; not backing off at all is the fault.
                    (not_growing if limited and not previous.advice else too_soon).append(i)
                elif attempt.wait_ms < policy.least(required):
                    not_growing.append(i)
                allowed = max_attempts(previous)
                if allowed is not None and retry + 1 > allowed:
                    too_many.append(i)
                    limit, total = allowed, retry + 1
        if attempt.outcome.retryable is True:
            run_start = i if run_start is None else run_start
        else:
            run_start = None
    findings = []
    if unchanged:
        findings.append(_non_retryable(session, endpoint, attempts, unchanged))
    if too_soon:
        findings.append(_too_soon(session, endpoint, attempts, too_soon, policy))
    if not_growing:
        findings.append(_not_growing(session, endpoint, attempts, not_growing, policy))
    if too_many:
        findings.append(_too_many(session, endpoint, attempts, too_many, limit, total))
    return attempts, findings


def _ids(attempts: list[Attempt], indexes: Iterable[int], *, with_previous: bool) -> list[int]:
    wanted: set[int] = set()
    for i in indexes:
        wanted.add(i)
        if with_previous:
            wanted.add(i - 1)
    return [attempts[i].entry.id for i in sorted(wanted)]


def _label(attempt: Attempt) -> str:
    e = attempt.entry
    if e.fault is not None:
        return e.fault
    if e.status is None:
        return "no answer (client left)"
    if not answered(e):
        return f"{e.status} with a body the client left unread"
    code = attempt.outcome.code
    return f"{e.status} {code}" if code else str(e.status)


def _non_retryable(
    session: str, endpoint: str, attempts: list[Attempt], indexes: list[int]
) -> Finding:
    codes = sorted({attempts[i - 1].outcome.code or "" for i in indexes})
    what = " and ".join(codes)
    retries = len(indexes)
    steps = []
    for i in indexes:
        before, after = attempts[i - 1], attempts[i]
        same = MUST_CHANGE.get(before.outcome.code or "", FINGERPRINT)
        kept = ", ".join(_describe_field(f, after.entry) for f in same)
        steps.append(
            f"#{after.entry.id} {_ms(after.wait_ms or 0)} after {_what(attempts, i)}"
            f" ({_label(before)}), with the same {kept}"
        )
    fixes = [CATEGORIES[c].fix for c in codes if c in CATEGORIES]
    return Finding(
        rule="non-retryable-retried",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{what} retried unchanged ({retries} {plural(retries, 'retry', 'retries')})",
        expected="; ".join(needed(c) for c in codes),
        found="; ".join(steps),
        fix="stop retrying on " + what + ": " + "; ".join(fixes),
    )


def _describe_field(name: str, entry: Entry) -> str:
    value = getattr(entry, name)
    label = FIELD_NAMES[name]
    if name == "body_digest":
        return "body" if value is not None else "body (none)"
    return f"{label} ({value if value is not None else 'none'})"


def plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _retry_after(ms: float) -> str:
    return f"Retry-After: {retry_after_seconds(int(ms))} s"


def _advice_header(entry: Entry, advised_ms: float) -> str:
    """The header that gave *entry*'s advice, as sent (a rate limit says which form it
    used: a date is measured from when the answer went out)."""
    stream = entry.stream
    if stream is not None:  # a stream's advice: its retry: field, or its error event's
        if stream.get("ended") != "complete":
            return f"the stream's retry: {stream.get('retry_ms')}"
        return "its error event's error.retry"
    limit = entry.rate_limit or {}
    value = limit.get("retry_after_value")
    form = limit.get("retry_after")
    if value is None or form is None:
        return _retry_after(advised_ms)
    if form == "ms":
        return f"retry-after-ms: {value}"
    if form == "date":
        return f"Retry-After: {value}, {_ms(advised_ms)} after the answer went out"
    return f"Retry-After: {value}"


def _waited(attempts: list[Attempt], i: int) -> str:
    after = attempts[i]
    return f"#{after.entry.id} waited {_ms(after.wait_ms or 0)} after {_what(attempts, i)}"


def _what(attempts: list[Attempt], i: int) -> str:
    """What attempt *i* waited after: the previous attempt, or its status line alone."""
    before = f"#{attempts[i - 1].entry.id}"
    return f"{before}'s status line" if attempts[i].on_status_line else before


def _cause(before: Attempt, policy: Policy) -> str:
    source = "which advised" if before.outcome.advice else "no advice: the chapter's initial delay"
    return f"{_label(before)}, {source} {_ms(advised_ms(before.outcome, policy))}"


def _too_soon(
    session: str, endpoint: str, attempts: list[Attempt], indexes: list[int], policy: Policy
) -> Finding:
    causes = {
        (_label(attempts[i - 1]), advised_ms(attempts[i - 1].outcome, policy)) for i in indexes
    }
    steps = [
        _waited(attempts, i) + ("" if len(causes) == 1 else f" ({_cause(attempts[i - 1], policy)})")
        for i in indexes
    ]
    if len(causes) == 1:
        steps[-1] += f" (each after {_cause(attempts[indexes[0] - 1], policy)})"
    first = attempts[indexes[0] - 1].outcome
    advised = advised_ms(first, policy)
    n = len(indexes)
    return Finding(
        rule="retry-too-soon",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{n} {plural(n, 'retry', 'retries')} sooner than the advised delay",
        expected=f"wait at least error.retry.suggested_delay_ms ({_ms(advised)};"
        f" {_advice_header(attempts[indexes[0] - 1].entry, advised)}) before retrying"
        f" ({policy.tolerance_text()})"
        if first.advice
        else f"wait at least the chapter's initial delay ({_ms(advised)}) before retrying"
        f" a failure that gave no advice ({policy.tolerance_text()})",
        found="; ".join(steps),
        fix="sleep before each retry: at least error.retry.suggested_delay_ms, or the"
        " Retry-After header (e.g. urllib3: Retry(respect_retry_after_header=True) with"
        " status_forcelist; tenacity: wait_exponential(multiplier=initial seconds))"
        + (
            "; before re-requesting a stream, its last retry: field (the reconnection time)"
            " or its error event's error.retry"
            if any(attempts[i - 1].entry.stream is not None for i in indexes)
            else ""
        ),
    )


def _not_growing(
    session: str, endpoint: str, attempts: list[Attempt], indexes: list[int], policy: Policy
) -> Finding:
    steps = [
        f"{_waited(attempts, i)} (owed {_ms(attempts[i].expected_wait_ms or 0)})" for i in indexes
    ]
    n = len(indexes)
    unadvised = [i for i in indexes if _unadvised_limit(attempts[i - 1])]
    expected = (
        "the n-th retry waits at least initial * 2^(n-1), initial being the first"
        " error's suggested_delay_ms, or the latest one when smaller (the chapter's"
        f" {_ms(policy.initial_delay_ms)} when none was given) ({policy.tolerance_text()})"
    )
    fix = (
        "double the wait after every failed retry (e.g. tenacity: wait_exponential("
        "multiplier=initial seconds); urllib3: backoff_factor=initial seconds)"
    )
    if unadvised:
        forms = sorted({_retry_after_form(attempts[i - 1].entry) for i in unadvised})
        expected = (
            f"a rate-limit answer with a {' or '.join(forms)} Retry-After advised nothing:"
            f" back off all the same, from the chapter's initial delay; {expected}"
        )
        fix = (
            "a missing or malformed Retry-After is no excuse: when it cannot be read,"
            f" fall back to exponential backoff from {_ms(policy.initial_delay_ms)}; " + fix
        )
    return Finding(
        rule="backoff-not-growing",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{n} {plural(n, 'retry', 'retries')} without exponential backoff",
        expected=expected,
        found="; ".join(steps),
        fix=fix,
    )


def _unadvised_limit(attempt: Attempt) -> bool:
    """Whether *attempt* was a rate-limit answer that gave no advice."""
    return rate_limit_answer(attempt.entry) and attempt.outcome.advice is None


def _retry_after_form(entry: Entry) -> str:
    """How a rate-limit answer without advice wrote its Retry-After: missing or malformed."""
    form = (entry.rate_limit or {}).get("retry_after")
    return "malformed" if form == "malformed" else "missing"


def _too_many(
    session: str,
    endpoint: str,
    attempts: list[Attempt],
    indexes: list[int],
    limit: int,
    total: int,
) -> Finding:
    extra = [f"#{attempts[i].entry.id} at +{_ms(_offset(attempts, i))}" for i in indexes]
    return Finding(
        rule="too-many-attempts",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=False),
        message=f"{total} attempts where the advice allows {limit}",
        expected=f"at most error.retry.max_attempts = {limit} attempts in all, the first included",
        found=f"{len(indexes)} more: " + ", ".join(extra),
        fix="count attempts and give up after max_attempts (e.g. urllib3:"
        " Retry(total=max_attempts - 1); tenacity: stop_after_attempt(max_attempts))",
    )


def _offset(attempts: list[Attempt], i: int) -> float:
    return (attempts[i].entry.started - attempts[0].entry.started) * 1000


def attempt_json(attempts: list[Attempt], i: int) -> dict[str, Any]:
    a = attempts[i]
    e = a.entry
    return {
        "id": e.id,
        "started": e.started,
        "finished": e.finished,
        "offset_ms": round(_offset(attempts, i), 1),
        "status": e.status,
        "error_code": e.error_code,
        "fault": e.fault,
        "retryable": a.outcome.retryable if a.outcome.failed else None,
        "wait_ms": None if a.wait_ms is None else round(a.wait_ms, 1),
        "wait_from": a.wait_from,
        "headers_sent": e.headers_sent,
        "expected_wait_ms": a.expected_wait_ms,
        "client_timeout_ms": client_timeout_ms(e),
        "stands_for": a.outcome.code,
        "retry": None if e.retry is None else e.retry.as_json(),
        "changed": None if a.changed is None else [FIELD_NAMES[f] for f in a.changed],
        "invalid_descriptor": e.invalid_descriptor,
    }


def used_invalid(session: str, entries: Sequence[Entry]) -> list[Finding]:
    """A skill invoked while the last descriptor of it this session fetched was invalid."""
    if not any(e.endpoint == "describe" and e.invalid_descriptor for e in entries):
        return []  # the common case, told in one pass without ordering the session
    last_describe: dict[str, Entry] = {}
    used: dict[int, list[Entry]] = {}
    for entry in sorted(entries, key=lambda e: (e.started, e.id)):
        if entry.skill is None:
            continue
        if entry.endpoint == "describe" and entry.status == 200:
            last_describe[entry.skill] = entry
        elif entry.endpoint == "invoke":
            describe = last_describe.get(entry.skill)
            if describe is not None and describe.invalid_descriptor:
                used.setdefault(describe.id, [describe]).append(entry)
    findings = []
    for group in used.values():
        describe, invokes = group[0], group[1:]
        n = len(invokes)
        findings.append(
            Finding(
                rule="non-retryable-retried",
                session=session,
                endpoint=endpoint_of(invokes[0]),
                attempts=[e.id for e in group],
                message=f"skill {describe.skill!r} invoked after its descriptor failed validation",
                expected="VALIDATION_ERROR is not retryable: a consumer whose Schema Validator"
                " rejects a descriptor does not use it (the descriptor must be fixed)",
                found=f"#{describe.id} {endpoint_of(describe)} served an invalid descriptor;"
                f" then {n} {plural(n, 'invocation', 'invocations')}: "
                + ", ".join(
                    f"#{e.id} {_ms((e.started - ended(describe)) * 1000)} later" for e in invokes
                ),
                fix="validate every descriptor before use (POST /__admin/validate is the"
                " reference) and stop with VALIDATION_ERROR when it has violations",
            )
        )
    return findings
