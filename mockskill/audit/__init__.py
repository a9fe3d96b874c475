"""Grading a consumer: the retry audit and category coverage, from the journal.

Pure functions over journal entries (:class:`~mockskill.engine.state.Entry`):
no I/O, no clock but the one the caller passes, no server. The stage is split
by concept, in the order a report is made:

- ``retries`` — what each answer meant to the consumer and the retry chains
  of a session (the same request sent again while the previous one failed);
- ``policy`` — what the error chapter asks of a retry, and the tolerance;
- ``findings`` — the four rules (``non-retryable-retried``,
  ``retry-too-soon``, ``backoff-not-growing``, ``too-many-attempts``) applied
  to each chain;
- ``executions`` — the fifth, ``duplicate-execution``: a retry that ran an
  operation again (on a real provider behind a ``proxy`` step, or a scripted
  skill) after an attempt that had run unseen, without the earlier attempt's
  idempotency key;
- ``correlation`` — the sixth, ``correlation-lost``: a retry that dropped or
  changed the ``Idempotency-Key``, ``traceparent`` (its trace id) or
  ``X-Request-Id`` its chain's first attempt carried;
- ``herds`` — the seventh, ``retry-herd``: chains that retried in lockstep after the same
  rate-limit advice (no jitter);
- ``pacing`` — the eighth, ``rate-limit-ignored``: new requests sent to a limit after it
  said no tokens remained, before the next one;
- ``tasks`` — the rules of long-running tasks, how a consumer waits: ``poll-too-soon``,
  ``poll-after-terminal``, ``task-abandoned``, ``reinvoked-while-running`` and
  ``status-url-ignored``, on each request's ``Entry.task``;
- ``callbacks`` — the rules of a task's callbacks, on mockskill's deliveries (entries of
  endpoint ``callback``): ``callback-not-acknowledged``, ``callback-signature-not-checked``
  and ``callback-without-reconcile``, and the callback faults each session was served;
- ``streams`` — the rules of streams, on each request's ``Entry.stream``:
  ``resume-ignored``, ``stall-not-detected`` and ``gave-up-despite-progress`` (a stream cut
  short is a failed attempt of its chain, an error event an error answer: the retry rules
  grade their re-issues);
- ``cases`` — the named cases (a failure pack's) each session was served, and the gaps
  ``case-unexercised`` (never served) and ``case-mishandled`` (its answer drew a finding);
- ``covered`` — the categories and transport faults each session met (the
  rate-limit answers, and the tasks seen failed or cancelled, in rows of their own),
  and the consumer's real timeouts;
- ``handshakes`` — TLS handshakes that failed on a fault port: no attempt
  of a chain, counted in coverage, and retrying a certificate that cannot
  become valid is ``non-retryable-retried``;
- ``timelines`` — a session's tasks as the report gives the dashboard to draw them, a
  row a task: its requests as marks, the statuses they served as bands, its callbacks;
  and its stream attempts, a bar each: the events sent, the last id, how it ended;
- ``verdict`` — the report (the contract of ``GET /__admin/report`` and of
  the dashboard), the gates that read it (:func:`assert_clean`), and one session's
  pass or fail (:func:`session_verdict`, ``GET /__admin/verdict``'s);
- ``table`` — the report as the table ``mockskill report`` prints;
- ``rules`` — the rules' catalogue: each rule's id, title, when it finds, fix and
  section of docs/audit.md (what SARIF's rules and the reports' links read);
- ``formats`` — the report as CI systems read it: JUnit XML, SARIF 2.1.0, GitHub
  Actions annotations (and the table and JSON: every ``mockskill report --format``).

docs/audit.md documents every rule and the tolerance. ``mockskill.audit``
keeps the names it has always had (``report``, ``assert_clean``, ``Policy``,
``chains``, ...): import them from here.

It may import :mod:`mockskill.engine` (the journal's entries),
:mod:`mockskill.scenario` and :mod:`mockskill.protocol`; it serves nothing and
controls nothing, so the admin API and the faces call it, never the reverse.
"""

from __future__ import annotations

from .cases import CASE_ROWS, CASES_ROW, NamedCases, case_coverage, named_cases
from .covered import (
    FAULT_NAMES,
    RATE_LIMITED_ROW,
    TASK_ROWS,
    coverage,
    task_coverage,
    timeout_kind,
    timeouts,
)
from .policy import Policy
from .retries import (
    FAULT_STANDS_FOR,
    HANGUP_SLACK,
    TIMEOUT_STANDS_FOR,
    VALIDATION_ERROR,
    AttemptOutcome,
    acted_on,
    answered,
    chains,
    ended,
    endpoint_of,
    likeliest,
    outcome,
    overlaps,
    rate_limit_answer,
)
from .rules import CATALOGUE, RULES, Rule
from .verdict import (
    GATE_NAMES,
    assert_clean,
    coverage_gaps,
    finding_lines,
    format_findings,
    report,
    required_names,
    session_report,
    session_verdict,
    silent_sessions,
    unknown_session,
)

__all__ = [
    "CASES_ROW",
    "CASE_ROWS",
    "CATALOGUE",
    "FAULT_NAMES",
    "FAULT_STANDS_FOR",
    "GATE_NAMES",
    "HANGUP_SLACK",
    "RATE_LIMITED_ROW",
    "RULES",
    "TASK_ROWS",
    "TIMEOUT_STANDS_FOR",
    "VALIDATION_ERROR",
    "AttemptOutcome",
    "NamedCases",
    "Policy",
    "Rule",
    "acted_on",
    "answered",
    "assert_clean",
    "case_coverage",
    "chains",
    "coverage",
    "coverage_gaps",
    "ended",
    "endpoint_of",
    "finding_lines",
    "format_findings",
    "likeliest",
    "named_cases",
    "outcome",
    "overlaps",
    "rate_limit_answer",
    "report",
    "required_names",
    "session_report",
    "session_verdict",
    "silent_sessions",
    "task_coverage",
    "timeout_kind",
    "timeouts",
    "unknown_session",
]
