"""The retry audit and category coverage: the journal turned into a verdict.

Pure functions over journal entries (:class:`~mockskill.engine.state.Entry`): no
I/O, no clock but the one the caller passes, no server. :func:`report`
groups each session's requests into **retry chains** — the same request
(method, path and body) sent again for as long as the previous attempt
failed — and checks every retry against the protocol's error chapter:

- ``non-retryable-retried``: a category that must not be retried
  (``AUTH_REQUIRED``, ``PERMISSION_DENIED``, ``SKILL_NOT_FOUND``,
  ``VERSION_INCOMPATIBLE``, an invalid descriptor) was retried without the
  change that could make it succeed (new credentials, another version), or a
  skill was invoked after its descriptor failed validation;
- ``retry-too-soon``: a retry came before the delay the previous answer
  advised (``retry.suggested_delay_ms``; ``Retry-After`` is that, rounded up);
- ``backoff-not-growing``: the waits did not grow as
  ``initial * 2^(retry - 1)`` (initial: the run's first advice, or the
  latest when lower);
- ``too-many-attempts``: more attempts than ``retry.max_attempts``.

It also counts the categories and transport faults each session has met
(coverage), and the consumer's real timeouts (when it hung up). A slow body
is judged by what the consumer had when it acted: a failure's status line
(and its advice) as soon as it went out, the whole answer once its last
byte did (:func:`acted_on`). The shape
of the report is the contract of ``GET /__admin/report`` and of the
dashboard; docs/audit.md documents every rule and the tolerance.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .engine.state import Entry
from .protocol.catalog import CATEGORIES, CODES, Retry, retry_after_seconds
from .scenario.model import FAULTS

RULES = ("non-retryable-retried", "retry-too-soon", "backoff-not-growing", "too-many-attempts")
FAULT_NAMES: tuple[str, ...] = tuple(FAULTS)
VALIDATION_ERROR = "VALIDATION_ERROR"
FAULT_STANDS_FOR = "ENDPOINT_UNREACHABLE"
"""A transport fault: the endpoint could not be reached properly (no answer to read)."""
TIMEOUT_STANDS_FOR = "EXECUTION_TIMEOUT"
"""The client hung up before the answer: to it, the execution timed out."""

# What must change before a non-retryable error can be retried; the other
# categories (SKILL_NOT_FOUND, an invalid descriptor) accept any change at
# all, so that the audit never flags a retry that might have been meant.
_MUST_CHANGE = {
    "AUTH_REQUIRED": ("credential",),
    "PERMISSION_DENIED": ("credential",),
    "VERSION_INCOMPATIBLE": ("protocol_version",),
}
_FINGERPRINT = ("credential", "protocol_version", "body_digest")
_FIELD_NAMES = {
    "credential": "credential",
    "protocol_version": "Skill-Protocol-Version",
    "body_digest": "body",
}


@dataclass(frozen=True)
class Policy:
    """The parameters the rules use (docs/audit.md).

    A wait passes when it is at least the required wait less the tolerance:
    the smaller of *tolerance_ms* and *tolerance_ratio* times the required
    wait. Both bound the noise of timers and clocks; neither lets a consumer
    subtract jitter from what the protocol asks (add it instead).
    """

    initial_delay_ms: float = 1000.0
    """The chapter's initial delay, for a failure whose answer gave no advice."""
    tolerance_ms: float = 50.0
    tolerance_ratio: float = 0.1

    def least(self, required_ms: float) -> float:
        """The shortest wait that still counts as *required_ms*."""
        return required_ms - min(self.tolerance_ms, self.tolerance_ratio * required_ms)

    def as_json(self) -> dict[str, float]:
        return {
            "initial_delay_ms": self.initial_delay_ms,
            "tolerance_ms": self.tolerance_ms,
            "tolerance_ratio": self.tolerance_ratio,
        }


@dataclass(frozen=True)
class Outcome:
    """What an attempt's answer means to a consumer."""

    failed: bool
    code: str | None = None
    """The category the failure is or stands for (a fault: ENDPOINT_UNREACHABLE)."""
    retryable: bool | None = None
    """None: a success, or a failure the protocol does not classify."""
    advice: Retry | None = None
    """The retry advice the answer carried (None: none was given)."""


def outcome(entry: Entry) -> Outcome:
    """How the protocol classifies *entry*'s answer."""
    if entry.fault is not None:
        return Outcome(True, FAULT_STANDS_FOR, True)
    if entry.status is None or not answered(entry):
        return Outcome(True, TIMEOUT_STANDS_FOR, True)
    if entry.invalid_descriptor:
        return Outcome(True, VALIDATION_ERROR, False)
    category = CATEGORIES.get(entry.error_code or "")
    if category is not None:
        return Outcome(True, category.code, category.retryable, entry.retry)
    if entry.status >= 400:
        return Outcome(True)
    return Outcome(False)


def answered(entry: Entry) -> bool:
    """Whether the consumer got an answer it could act on (a fault aside).

    A whole answer, or the status line of a failure whose slow body it did
    not read to the end: a failure status says what it needs to know (a
    client may retry on it alone, as aiohttp-retry does), and the advice is
    in its headers too (``Retry-After``). A success whose body it abandoned
    gave it nothing to use: to it, that request timed out.
    """
    if entry.status is None:
        return False
    return entry.client_left is None or entry.status >= 400


def endpoint_of(entry: Entry) -> str:
    return f"{entry.method} {entry.path}"


def ended(entry: Entry) -> float:
    """When the attempt ended for the consumer: when it hung up, else when it was answered."""
    return entry.client_left if entry.client_left is not None else entry.finished


HANGUP_SLACK = 0.05
"""Seconds: the server sees a hang-up a moment after it happens, so an attempt
that arrives up to this much before the hang-up was seen still follows it."""


def acted_on(previous: Entry, entry: Entry) -> float | None:
    """When the consumer had what it acted on in sending *entry* after *previous*.

    That is when *previous* ended (answered, or hung up on) — except for a
    failure whose slow body went out after its status line: a retry sent
    once the status line was out, before the last byte, acted on the status
    line (and its advice), and so did one sent after the client abandoned
    the body. None: *entry* started before the consumer had anything of
    *previous*: it is concurrent, not a retry.
    """
    acted = _acted_on(previous, entry)
    return None if acted is None else acted[0]


def _acted_on(previous: Entry, entry: Entry) -> tuple[float, bool] | None:
    """:func:`acted_on`, and whether that was a status line alone."""
    sent = previous.headers_sent
    if sent is not None and previous.status is not None and previous.status >= 400:
        if previous.client_left is None and entry.started >= previous.finished:
            return previous.finished, False  # it had the whole answer
        return (sent, True) if entry.started >= sent else None
    slack = HANGUP_SLACK if previous.client_left is not None else 0.0
    end = ended(previous)
    return (end, False) if entry.started >= end - slack else None


def overlaps(entry: Entry, previous: Entry) -> bool:
    """Whether *entry* started before the consumer had anything of *previous*: concurrent."""
    return acted_on(previous, entry) is None


def chains(entries: Iterable[Entry]) -> list[list[Entry]]:
    """One session's requests as retry chains, in order of their first attempt.

    A retry is the same request sent again: an attempt joins a chain of the
    same endpoint (method and path) and the same body whose last attempt
    failed; a success ends a chain. Requests at other endpoints in between
    (a token request, a descriptor) do not break it, and a retry may change
    its credential or protocol version (what a 401 or a 422 asks). A request
    with another body is another operation (a batch's next item): a chain of
    its own. So is an attempt that :func:`overlaps` the last one of every
    chain it could continue: it is concurrent, not a retry. When it could
    continue several (identical requests in parallel), it goes with the
    :func:`likeliest`.
    """
    ordered = sorted(entries, key=lambda e: (e.started, e.id))
    waiting: dict[tuple[str, str | None], list[list[Entry]]] = {}  # chains whose last failed
    out: list[list[Entry]] = []
    for entry in ordered:
        key = (endpoint_of(entry), entry.body_digest)
        open_chains = [c for c in waiting.get(key, []) if outcome(c[-1]).failed]
        chain = likeliest(entry, [c for c in open_chains if not overlaps(entry, c[-1])])
        if chain is None:
            chain = []
            out.append(chain)
            open_chains.append(chain)
        chain.append(entry)
        waiting[key] = open_chains
    return out


def likeliest(entry: Entry, candidates: Sequence[list[Entry]]) -> list[Entry] | None:
    """Of the chains *entry* could continue, the one it most likely retries (None: none).

    The one whose last attempt had the same credential and protocol version,
    then the one whose last attempt started last. A consumer that sends one
    request at a time has a single candidate at most: the choice only
    matters for identical requests sent in parallel.
    """

    def score(chain: list[Entry]) -> tuple[bool, bool, float, int]:
        last = chain[-1]
        return (
            last.credential == entry.credential,
            last.protocol_version == entry.protocol_version,
            last.started,
            last.id,
        )

    return max(candidates, key=score, default=None)


# -- one chain ------------------------------------------------------------------------


@dataclass
class _Attempt:
    entry: Entry
    outcome: Outcome
    wait_ms: float | None = None
    expected_wait_ms: float | None = None
    changed: tuple[str, ...] | None = None
    wait_from: float | None = None
    """When the wait before this attempt began (see :func:`acted_on`)."""
    on_status_line: bool = False
    """Whether it was sent on the previous answer's status line, its body unread."""


@dataclass
class _Finding:
    rule: str
    session: str
    endpoint: str
    attempts: list[int]
    message: str
    expected: str
    found: str
    fix: str

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "session": self.session,
            "endpoint": self.endpoint,
            "attempts": self.attempts,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "fix": self.fix,
        }


def _ms(value: float) -> str:
    return f"{value:.0f} ms"


def _changed(before: Entry, after: Entry) -> tuple[str, ...]:
    return tuple(f for f in _FINGERPRINT if getattr(before, f) != getattr(after, f))


def _advised_ms(o: Outcome, policy: Policy) -> float:
    return o.advice.suggested_delay_ms if o.advice is not None else policy.initial_delay_ms


def _max_attempts(o: Outcome) -> int | None:
    if o.advice is not None:
        return o.advice.max_attempts
    category = CATEGORIES.get(o.code or "")
    default = category.retry if category is not None else None
    return default.max_attempts if default is not None else None


def _audit_chain(
    session: str, chain: Sequence[Entry], policy: Policy
) -> tuple[list[_Attempt], list[_Finding]]:
    attempts = [_Attempt(e, outcome(e)) for e in chain]
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
            acted = _acted_on(before.entry, attempt.entry)
            # chains() puts no concurrent attempt in a chain; a chain made by hand may have one.
            attempt.wait_from, attempt.on_status_line = acted or (ended(before.entry), False)
            attempt.wait_ms = max(0.0, attempt.entry.started - attempt.wait_from) * 1000
            attempt.changed = _changed(before.entry, attempt.entry)
            previous = before.outcome
            if previous.retryable is False:
                needed = _MUST_CHANGE.get(previous.code or "", _FINGERPRINT)
                if not set(needed) & set(attempt.changed):
                    unchanged.append(i)
            elif previous.retryable is True and run_start is not None:
                retry = i - run_start  # 1 for the first retry of the run
                initial = _advised_ms(attempts[run_start].outcome, policy)
                advised = _advised_ms(previous, policy) if previous.advice else initial
                # The base of the backoff: the run's first advice, or the latest when the
                # provider has lowered it since (a consumer may follow either).
                required = max(advised, min(initial, advised) * 2 ** (retry - 1))
                attempt.expected_wait_ms = required
                if attempt.wait_ms < policy.least(advised):
                    too_soon.append(i)
                elif attempt.wait_ms < policy.least(required):
                    not_growing.append(i)
                allowed = _max_attempts(previous)
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


def _ids(attempts: list[_Attempt], indexes: Iterable[int], *, with_previous: bool) -> list[int]:
    wanted: set[int] = set()
    for i in indexes:
        wanted.add(i)
        if with_previous:
            wanted.add(i - 1)
    return [attempts[i].entry.id for i in sorted(wanted)]


def _label(attempt: _Attempt) -> str:
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
    session: str, endpoint: str, attempts: list[_Attempt], indexes: list[int]
) -> _Finding:
    codes = sorted({attempts[i - 1].outcome.code or "" for i in indexes})
    what = " and ".join(codes)
    retries = len(indexes)
    steps = []
    for i in indexes:
        before, after = attempts[i - 1], attempts[i]
        same = _MUST_CHANGE.get(before.outcome.code or "", _FINGERPRINT)
        kept = ", ".join(_describe_field(f, after.entry) for f in same)
        steps.append(
            f"#{after.entry.id} {_ms(after.wait_ms or 0)} after {_what(attempts, i)}"
            f" ({_label(before)}), with the same {kept}"
        )
    fixes = [CATEGORIES[c].fix for c in codes if c in CATEGORIES]
    return _Finding(
        rule="non-retryable-retried",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{what} retried unchanged ({retries} {_plural(retries, 'retry', 'retries')})",
        expected="; ".join(_needed(c) for c in codes),
        found="; ".join(steps),
        fix="stop retrying on " + what + ": " + "; ".join(fixes),
    )


_NEEDED = {
    "AUTH_REQUIRED": "retry only with new credentials (details.authorization_url, details.scopes)",
    "PERMISSION_DENIED": "retry only with credentials that grant the missing scopes",
    "VERSION_INCOMPATIBLE": "retry only with another Skill-Protocol-Version",
    "SKILL_NOT_FOUND": "do not ask again for what does not exist",
    VALIDATION_ERROR: "do not fetch the same descriptor again: it must be fixed",
}


def _needed(code: str) -> str:
    return f"{code} is not retryable: {_NEEDED.get(code, 'do not retry it unchanged')}"


def _describe_field(name: str, entry: Entry) -> str:
    value = getattr(entry, name)
    label = _FIELD_NAMES[name]
    if name == "body_digest":
        return "body" if value is not None else "body (none)"
    return f"{label} ({value if value is not None else 'none'})"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _retry_after(ms: float) -> str:
    return f"Retry-After: {retry_after_seconds(int(ms))} s"


def _tolerance(policy: Policy) -> str:
    return (
        f"tolerance: {policy.tolerance_ratio:.0%} of the wait, at most {policy.tolerance_ms:.0f} ms"
    )


def _waited(attempts: list[_Attempt], i: int) -> str:
    after = attempts[i]
    return f"#{after.entry.id} waited {_ms(after.wait_ms or 0)} after {_what(attempts, i)}"


def _what(attempts: list[_Attempt], i: int) -> str:
    """What attempt *i* waited after: the previous attempt, or its status line alone."""
    before = f"#{attempts[i - 1].entry.id}"
    return f"{before}'s status line" if attempts[i].on_status_line else before


def _cause(before: _Attempt, policy: Policy) -> str:
    source = "which advised" if before.outcome.advice else "no advice: the chapter's initial delay"
    return f"{_label(before)}, {source} {_ms(_advised_ms(before.outcome, policy))}"


def _too_soon(
    session: str, endpoint: str, attempts: list[_Attempt], indexes: list[int], policy: Policy
) -> _Finding:
    causes = {
        (_label(attempts[i - 1]), _advised_ms(attempts[i - 1].outcome, policy)) for i in indexes
    }
    steps = [
        _waited(attempts, i) + ("" if len(causes) == 1 else f" ({_cause(attempts[i - 1], policy)})")
        for i in indexes
    ]
    if len(causes) == 1:
        steps[-1] += f" (each after {_cause(attempts[indexes[0] - 1], policy)})"
    first = attempts[indexes[0] - 1].outcome
    advised = _advised_ms(first, policy)
    n = len(indexes)
    return _Finding(
        rule="retry-too-soon",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{n} {_plural(n, 'retry', 'retries')} sooner than the advised delay",
        expected=f"wait at least error.retry.suggested_delay_ms ({_ms(advised)};"
        f" {_retry_after(advised)}) before retrying ({_tolerance(policy)})"
        if first.advice
        else f"wait at least the chapter's initial delay ({_ms(advised)}) before retrying"
        f" a failure that gave no advice ({_tolerance(policy)})",
        found="; ".join(steps),
        fix="sleep before each retry: at least error.retry.suggested_delay_ms, or the"
        " Retry-After header (e.g. urllib3: Retry(respect_retry_after_header=True) with"
        " status_forcelist; tenacity: wait_exponential(multiplier=initial seconds))",
    )


def _not_growing(
    session: str, endpoint: str, attempts: list[_Attempt], indexes: list[int], policy: Policy
) -> _Finding:
    steps = [
        f"{_waited(attempts, i)} (owed {_ms(attempts[i].expected_wait_ms or 0)})" for i in indexes
    ]
    n = len(indexes)
    return _Finding(
        rule="backoff-not-growing",
        session=session,
        endpoint=endpoint,
        attempts=_ids(attempts, indexes, with_previous=True),
        message=f"{n} {_plural(n, 'retry', 'retries')} without exponential backoff",
        expected="the n-th retry waits at least initial * 2^(n-1), initial being the first"
        " error's suggested_delay_ms, or the latest one when smaller (the chapter's"
        f" {_ms(policy.initial_delay_ms)} when none was given) ({_tolerance(policy)})",
        found="; ".join(steps),
        fix="double the wait after every failed retry (e.g. tenacity: wait_exponential("
        "multiplier=initial seconds); urllib3: backoff_factor=initial seconds)",
    )


def _too_many(
    session: str,
    endpoint: str,
    attempts: list[_Attempt],
    indexes: list[int],
    limit: int,
    total: int,
) -> _Finding:
    extra = [f"#{attempts[i].entry.id} at +{_ms(_offset(attempts, i))}" for i in indexes]
    return _Finding(
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


def _offset(attempts: list[_Attempt], i: int) -> float:
    return (attempts[i].entry.started - attempts[0].entry.started) * 1000


def _client_timeout_ms(entry: Entry) -> float | None:
    """After how long the client gave up without an answer it could act on (None: it did not)."""
    if entry.client_left is None or answered(entry):
        return None
    return round((entry.client_left - entry.started) * 1000, 1)


def _attempt_json(attempts: list[_Attempt], i: int) -> dict[str, Any]:
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
        "client_timeout_ms": _client_timeout_ms(e),
        "stands_for": a.outcome.code,
        "retry": None if e.retry is None else e.retry.as_json(),
        "changed": None if a.changed is None else [_FIELD_NAMES[f] for f in a.changed],
        "invalid_descriptor": e.invalid_descriptor,
    }


# -- invalid descriptors that were used anyway ----------------------------------------


def _used_invalid(session: str, entries: Sequence[Entry]) -> list[_Finding]:
    """A skill invoked while the last descriptor of it this session fetched was invalid."""
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
            _Finding(
                rule="non-retryable-retried",
                session=session,
                endpoint=endpoint_of(invokes[0]),
                attempts=[e.id for e in group],
                message=f"skill {describe.skill!r} invoked after its descriptor failed validation",
                expected="VALIDATION_ERROR is not retryable: a consumer whose Schema Validator"
                " rejects a descriptor does not use it (the descriptor must be fixed)",
                found=f"#{describe.id} {endpoint_of(describe)} served an invalid descriptor;"
                f" then {n} {_plural(n, 'invocation', 'invocations')}: "
                + ", ".join(
                    f"#{e.id} {_ms((e.started - ended(describe)) * 1000)} later" for e in invokes
                ),
                fix="validate every descriptor before use (POST /__admin/validate is the"
                " reference) and stop with VALIDATION_ERROR when it has violations",
            )
        )
    return findings


# -- coverage and timeouts ------------------------------------------------------------


def coverage(entries: Iterable[Entry]) -> dict[str, Any]:
    """How often each category and each transport fault reached the consumer."""
    categories = dict.fromkeys(CODES, 0)
    faults = dict.fromkeys(FAULT_NAMES, 0)
    for entry in entries:
        if entry.fault is not None:
            if entry.fault in faults:
                faults[entry.fault] += 1
        elif not answered(entry):
            continue  # no answer reached the consumer
        elif entry.invalid_descriptor:
            categories[VALIDATION_ERROR] += 1
        elif entry.error_code in categories:
            categories[entry.error_code] += 1
    missing = {
        "categories": [c for c, n in categories.items() if not n],
        "faults": [f for f, n in faults.items() if not n],
    }
    return {
        "categories": categories,
        "faults": faults,
        "missing": missing,
        "complete": not missing["categories"] and not missing["faults"],
    }


def timeout_kind(entry: Entry) -> str:
    """What the client was waiting through when it hung up (inferred from the entry)."""
    elapsed = (entry.client_left or entry.finished) - entry.started
    if entry.status is not None:
        return "dribble"  # the status line (a success) was out: the body was coming slowly
    if entry.delay_ms and elapsed * 1000 <= entry.delay_ms:
        return "delay"
    if entry.execution_ms is not None:
        return "execution"
    return "hang"


def timeouts(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """The requests the client gave up on before it had an answer: when, and through what.

    A failure whose slow body the client left unread is not one: it had its
    answer (the status line), and may well have left because it acted on it.
    """
    return [
        {
            "id": e.id,
            "endpoint": endpoint_of(e),
            "skill": e.skill,
            "kind": timeout_kind(e),
            "client_timeout_ms": _client_timeout_ms(e),
        }
        for e in sorted(entries, key=lambda e: (e.started, e.id))
        if _client_timeout_ms(e) is not None
    ]


# -- the report -----------------------------------------------------------------------


def session_report(
    name: str, entries: Sequence[Entry], policy: Policy = Policy()
) -> dict[str, Any]:
    """The audit of one session's requests."""
    chain_list = []
    findings: list[_Finding] = []
    for chain in chains(entries):
        attempts, found = _audit_chain(name, chain, policy)
        findings.extend(found)
        chain_list.append(
            {
                "endpoint": endpoint_of(chain[0]),
                "skill": chain[0].skill,
                "attempts": [_attempt_json(attempts, i) for i in range(len(attempts))],
            }
        )
    findings.extend(_used_invalid(name, entries))
    findings.sort(key=lambda f: f.attempts[0])
    return {
        "session": name,
        "requests": len(entries),
        "clean": not findings,
        "coverage": coverage(entries),
        "chains": chain_list,
        "timeouts": timeouts(entries),
        "findings": [f.as_json() for f in findings],
    }


def report(
    entries: Iterable[Entry],
    policy: Policy = Policy(),
    *,
    sessions: Iterable[str] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The audit of every session in *entries* (or of *sessions*, even those with no request).

    Sessions come in the order of their first request in *entries*; named
    ones that sent nothing come last, with empty coverage.
    """
    grouped: dict[str, list[Entry]] = {}
    for entry in entries:
        grouped.setdefault(entry.session, []).append(entry)
    active = list(grouped)
    if sessions is not None:
        wanted = list(dict.fromkeys(sessions))
        grouped = {name: grouped.get(name, []) for name in [*grouped, *wanted] if name in wanted}
    reports = [session_report(name, items, policy) for name, items in grouped.items()]
    for r in reports:
        if not r["requests"]:
            # A session that sent nothing is most often a mistyped name or a
            # consumer that does not send Mockskill-Session: name the sessions
            # that did send something, so the gate's failure says where to look.
            r["did_you_mean"] = _nearest_sessions(r["session"], active)
    return {
        "clean": all(r["clean"] for r in reports),
        "generated": time.time() if now is None else now,
        "policy": policy.as_json(),
        "sessions": reports,
    }


def _nearest_sessions(name: str, active: list[str], n: int = 3) -> list[str]:
    """The sessions with requests closest to *name*; when none is close, the latest ones."""
    close = difflib.get_close_matches(name, active, n=n, cutoff=0.6)
    return close or active[::-1][:n]


# -- reading it ---------------------------------------------------------------------


def coverage_gaps(
    report: dict[str, Any], required: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Per session, the required categories and faults it has not met (sessions with gaps only).

    *required*: names of categories and faults (None: all of them).
    """
    wanted = set(CODES) | set(FAULT_NAMES) if required is None else set(required)
    unknown = wanted - set(CODES) - set(FAULT_NAMES)
    if unknown:
        raise ValueError(
            f"not a category or a transport fault: {', '.join(sorted(unknown))};"
            f" expected some of {', '.join(CODES + FAULT_NAMES)}"
        )
    gaps = {}
    for session in report["sessions"]:
        missing = session["coverage"]["missing"]
        lacking = [n for n in [*missing["categories"], *missing["faults"]] if n in wanted]
        if lacking:
            gaps[session["session"]] = lacking
    return gaps


def format_findings(report: dict[str, Any]) -> str:
    """Every finding of *report* as readable lines (empty when clean)."""
    lines: list[str] = []
    for session in report["sessions"]:
        findings = session["findings"]
        if not findings:
            continue
        n = len(findings)
        lines.append(
            f"mockskill retry audit: {n} {_plural(n, 'finding', 'findings')}"
            f" in session {session['session']!r}:"
        )
        lines.extend(finding_lines(findings, "  "))
    return "\n".join(lines)


def finding_lines(findings: Iterable[dict[str, Any]], indent: str = "") -> list[str]:
    """Findings (of one session) numbered, each with where, found, expected and fix."""
    lines = []
    for i, f in enumerate(findings, 1):
        ids = ", ".join(f"#{a}" for a in f["attempts"])
        pad = indent + " " * (len(str(i)) + 2)
        lines.append(f"{indent}{i}. {f['rule']}: {f['message']}")
        lines.append(f"{pad}at:       {f['endpoint']} (journal {ids})")
        lines.append(f"{pad}found:    {f['found']}")
        lines.append(f"{pad}expected: {f['expected']}")
        lines.append(f"{pad}fix:      {f['fix']}")
    return lines


def silent_sessions(report: dict[str, Any]) -> list[str]:
    """Why *report* proves nothing, one line per session that sent no request (or for none).

    A gate must never pass on an empty audit: a mistyped session name, or a
    consumer that does not send ``Mockskill-Session``, would otherwise show
    green. Both ``assert_clean`` and ``mockskill report``'s gates fail on it.
    """
    header = "is the Mockskill-Session header sent?"
    if not report["sessions"]:
        return [f"no session made a request ({header})"]
    lines = []
    for session in report["sessions"]:
        if session["requests"]:
            continue
        others = session.get("did_you_mean") or []
        hint = (
            f" did you mean {' or '.join(repr(o) for o in others)}?"
            if others
            else " no session has made a request"
        )
        lines.append(f"session {session['session']!r} made no request ({header}{hint})")
    return lines


def assert_clean(report: dict[str, Any], *, require_coverage: bool | Iterable[str] = False) -> None:
    """Raise AssertionError, with every finding spelt out, unless *report* is clean.

    *require_coverage*: also require every category and fault (True), or
    these ones (names), to have been met in each session of the report. A
    session without a single request fails too, and so does a report with
    no session at all: the consumer most likely did not send the
    ``Mockskill-Session`` header (or the name is mistyped), and an empty
    audit proves nothing.
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this one
    problems = []
    text = format_findings(report)
    if text:
        problems.append(text)
    problems.extend(f"mockskill retry audit: {line}" for line in silent_sessions(report))
    if require_coverage is not False:
        required = None if require_coverage is True else list(require_coverage)
        for name, lacking in coverage_gaps(report, required).items():
            problems.append(
                f"mockskill coverage: session {name!r} has not met {', '.join(lacking)}"
            )
    if problems:
        raise AssertionError("\n".join(problems))
