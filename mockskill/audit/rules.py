"""The audit's rules, named once: each rule's id, title, when it finds, its fix, its docs.

The modules that apply the rules (:mod:`.findings`, :mod:`.executions`, ...) make
findings under these ids; the reports that must describe a rule apart from its
findings (SARIF's ``tool.driver.rules``, a JUnit failure's type) read it here.
docs/audit.md's table of the rules lists the same rules in the same order (a
test holds the two together), and :attr:`Rule.help_uri` points into its sections.
"""

from __future__ import annotations

from dataclasses import dataclass

AUDIT_DOCS = "https://mockskill.dev/audit/"
"""Where docs/audit.md is published: a rule's ``helpUri`` is this and its section's anchor."""


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    """What the rule says a consumer must do, in a few words."""
    when: str
    """When it makes a finding (docs/audit.md's table says the same)."""
    fix: str
    section: str
    """The anchor of the section of docs/audit.md that explains it."""

    @property
    def help_uri(self) -> str:
        return f"{AUDIT_DOCS}#{self.section}"


_RETRIES = "the-rules"
_WAITS = "waits-what-is-owed-and-the-tolerance"
_RATE_LIMITS = "rate-limits"
_TASKS = "tasks-how-a-consumer-waits"
_CALLBACKS = "callbacks-how-a-consumer-receives-them"
_STREAMS = "streams-how-a-consumer-recovers"

CATALOGUE: tuple[Rule, ...] = (
    Rule(
        "non-retryable-retried",
        "Do not retry what the protocol says is not retryable",
        "A category that must not be retried was retried unchanged, or a skill was invoked"
        " after its descriptor failed validation.",
        "Stop, and do what the category asks (credentials, scopes, an upgrade, a fixed"
        " descriptor).",
        "not-retryable-and-what-unchanged-means",
    ),
    Rule(
        "retry-too-soon",
        "Wait the advised delay before a retry",
        "A retry came before the delay the previous answer advised (retry.suggested_delay_ms,"
        " or Retry-After).",
        "Sleep the advice before each retry.",
        _WAITS,
    ),
    Rule(
        "backoff-not-growing",
        "Back off exponentially between retries",
        "The n-th retry of a run came before initial * 2^(n-1).",
        "Double the wait after every failure.",
        _WAITS,
    ),
    Rule(
        "too-many-attempts",
        "Give up after retry.max_attempts",
        "A run had more attempts, the first included, than retry.max_attempts.",
        "Count attempts and give up.",
        _RETRIES,
    ),
    Rule(
        "duplicate-execution",
        "Retry an operation with its idempotency key",
        "A retry ran the operation again after an attempt that had run and whose answer the"
        " consumer never got, without that attempt's Idempotency-Key.",
        "Send an Idempotency-Key, the same on every attempt of one operation.",
        "retries-that-run-an-operation-twice",
    ),
    Rule(
        "correlation-lost",
        "Keep an operation's correlation headers on every attempt",
        "A retry dropped or changed the Idempotency-Key, traceparent (its trace id) or"
        " X-Request-Id that the chain's first attempt carried.",
        "Make those headers once per operation, outside what is retried, and send them on"
        " every attempt.",
        "retries-that-lose-their-correlation",
    ),
    Rule(
        "retry-herd",
        "Add jitter to waits on a rate limit",
        "Three or more chains waiting at once retried in lockstep after rate-limit answers that"
        " advised the same wait.",
        "Add random jitter on top of Retry-After.",
        _RATE_LIMITS,
    ),
    Rule(
        "rate-limit-ignored",
        "Pace requests to a limit that said no tokens remain",
        "After an answer said no tokens remained, new requests to the same limit arrived before"
        " its next token.",
        "Pace requests: wait for the reset before the next one, in every worker.",
        _RATE_LIMITS,
    ),
    Rule(
        "poll-too-soon",
        "Poll a task no sooner than its Retry-After",
        "A poll of a task came before the Retry-After of the answer before it had passed.",
        "Sleep each answer's Retry-After, read afresh every time, before the next poll.",
        _TASKS,
    ),
    Rule(
        "poll-after-terminal",
        "Stop polling a task that has ended",
        "Polls of a task went on after an answer served its terminal status (one grace poll"
        " allowed).",
        "End the poll loop on a terminal status and take the result or error from that answer.",
        _TASKS,
    ),
    Rule(
        "task-abandoned",
        "Poll a task to its end, or cancel it",
        "A task was left unpolled past its next poll's due time (and abandoned_ms), never seen"
        " to end and never cancelled.",
        "Poll until a terminal status, or DELETE the status URL when giving up.",
        _TASKS,
    ),
    Rule(
        "reinvoked-while-running",
        "Start no second task for an operation still running",
        "An invoke started a second task for the operation of a task still live.",
        "Follow the first task's status URL; retry a lost 202 with the same Idempotency-Key.",
        _TASKS,
    ),
    Rule(
        "status-url-ignored",
        "Follow the status URL a task was given",
        "Requests went to task URLs mockskill never handed out: the consumer built the URL"
        " instead of following Location.",
        "Use Location (or task.status_url) verbatim.",
        _TASKS,
    ),
    Rule(
        "callback-not-acknowledged",
        "Acknowledge a task's callback at once",
        "A callback delivery with a valid signature was not acknowledged with a 2xx in time.",
        "Answer 2xx at once once the signature is checked and the delivery stored, a repeated"
        " delivery too; work after answering.",
        _CALLBACKS,
    ),
    Rule(
        "callback-signature-not-checked",
        "Check a callback's signature",
        "The receiver answered 2xx to a delivery signed under a wrong key.",
        "Check the sha256= HMAC-SHA256 of the raw body under the secret, in constant time, and"
        " refuse a mismatch (401/403).",
        _CALLBACKS,
    ),
    Rule(
        "callback-without-reconcile",
        "Poll the status URL when a callback never comes",
        "Under a lost callback, the consumer never asked the task's status URL after its first"
        " change.",
        "Treat callbacks as a hint: when one is overdue, poll the status URL.",
        _CALLBACKS,
    ),
    Rule(
        "resume-ignored",
        "Resume a cut stream with Last-Event-ID",
        "A resumable stream cut short after sending an id was re-requested without"
        " Last-Event-ID, or with an id no attempt of it was sent.",
        "Send the id of the last event received as Last-Event-ID when reconnecting.",
        _STREAMS,
    ),
    Rule(
        "stall-not-detected",
        "Detect a stalled stream",
        "The consumer held a stream whose bytes had stopped for longer than its idle bound.",
        "A read (idle) timeout on the stream, a few heartbeats long; on it, close and re-request.",
        _STREAMS,
    ),
    Rule(
        "gave-up-despite-progress",
        "Do not leave a stream still delivering",
        "The consumer left a stream still delivering sooner than its expected duration.",
        "Time a stream by its progress: an idle timeout that each event resets, no total"
        " timeout shorter than the stream.",
        _STREAMS,
    ),
)

RULES: tuple[str, ...] = tuple(rule.id for rule in CATALOGUE)
"""The rules' ids, in the order docs/audit.md lists them."""

BY_ID: dict[str, Rule] = {rule.id: rule for rule in CATALOGUE}

NO_REQUEST = "no-request"
"""What the reports call a session that made no request: no rule's finding, but what every
gate fails on (a mistyped session name must not read clean); JUnit gives it a failure,
GitHub an error annotation, SARIF a tool notification."""
