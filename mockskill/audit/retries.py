"""Retry chains from the journal: what each answer meant, and which request was sent again.

An entry's :func:`outcome` is how the protocol classifies its answer (a
transport fault stands for ``ENDPOINT_UNREACHABLE``, a hang-up for
``EXECUTION_TIMEOUT``); :func:`acted_on` is when the consumer had what it
acted on; :func:`chains` groups one session's requests into retry chains —
the same request (method, path and body) sent again for as long as the
previous attempt failed (mockskill's own refusal of its control header, a
test's mistake, being no attempt: :func:`refused_control`). Pure functions
over entries, like all of the audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.state import Entry
from ..protocol.catalog import CATEGORIES, RATE_LIMITED, Retry

VALIDATION_ERROR = "VALIDATION_ERROR"


FAULT_STANDS_FOR = "ENDPOINT_UNREACHABLE"
"""A transport fault: the endpoint could not be reached properly (no answer to read)."""


TIMEOUT_STANDS_FOR = "EXECUTION_TIMEOUT"
"""The client hung up before the answer: to it, the execution timed out."""


@dataclass(frozen=True)
class AttemptOutcome:
    """What an attempt's answer means to a consumer."""

    failed: bool
    code: str | None = None
    """The category the failure is or stands for (a fault: ENDPOINT_UNREACHABLE)."""
    retryable: bool | None = None
    """None: a success, or a failure the protocol does not classify."""
    advice: Retry | None = None
    """The retry advice the answer carried (None: none was given)."""


def outcome(entry: Entry) -> AttemptOutcome:
    """How the protocol classifies *entry*'s answer."""
    if entry.fault is not None:
        return AttemptOutcome(True, FAULT_STANDS_FOR, True)
    stream = entry.stream
    if stream is not None and stream.get("ended") != "complete":
        if watch_left(stream):
            # A task's watch the consumer left: each event it got was the task's state (an
            # answer), and leaving is the consumer's choice, not a failure to retry.
            return AttemptOutcome(False)
        return stream_cut(entry, stream)
    if entry.status is None or not answered(entry):
        return AttemptOutcome(True, TIMEOUT_STANDS_FOR, True)
    if entry.invalid_descriptor:
        return AttemptOutcome(True, VALIDATION_ERROR, False)
    if task_answer(entry):
        # The request worked: it was answered with its task's state. A task that failed
        # carries its error's code, but there is nothing to retry: the poll succeeded.
        return AttemptOutcome(False)
    category = CATEGORIES.get(entry.error_code or "")
    if category is not None:
        return AttemptOutcome(True, category.code, category.retryable, entry.retry)
    if entry.status == 429 or entry.error_code == RATE_LIMITED.code:
        # Outside the chapter, but a rate limit's refusal asks to be retried later: with the
        # advice its headers gave (none: the missing and malformed Retry-After forms).
        return AttemptOutcome(True, RATE_LIMITED.code, True, entry.retry)
    if entry.status >= 400:
        return AttemptOutcome(True)
    return AttemptOutcome(False)


def stream_cut(entry: Entry, stream: dict[str, Any]) -> AttemptOutcome:
    """A stream that did not end with all its events (a fault after event N, a stall, the
    client gone): a failure after its ``200``, retryable — a transport fault's when the
    server cut it, a timeout's when the client left — with the SSE ``retry:`` it sent as
    its advice (the reconnection time, EventSource's and the chapter's wait alike)."""
    gone = entry.client_left is not None or stream.get("ended") == "client_left"
    code = TIMEOUT_STANDS_FOR if gone else FAULT_STANDS_FOR
    retry_ms = stream.get("retry_ms")
    advice = None
    if retry_ms is not None and stream.get("stalled_ms") is not None:  # the head (and it) went
        default = CATEGORIES[FAULT_STANDS_FOR].retry
        most = default.max_attempts if default is not None else 1
        advice = Retry(int(retry_ms), most)
    return AttemptOutcome(True, code, True, advice)


def watch_left(stream: dict[str, Any]) -> bool:
    """Whether *stream* (an ``Entry.stream``) was a task's watch its consumer left: nothing
    broke (docs/tasks.md, "Watching a task")."""
    return stream.get("watch") is not None and stream.get("ended") == "client_left"


def stream_cut_short(entry: Entry) -> bool:
    """Whether *entry* was a stream that did not end with all its events."""
    return entry.stream is not None and entry.stream.get("ended") != "complete"


def task_answer(entry: Entry) -> bool:
    """Whether *entry* was answered, successfully, with a long-running task's state (a
    202 or a 200 that may carry a failed task's error: the request worked, the task ended
    so), rather than by a failure of the request itself."""
    task = entry.task
    return (
        task is not None
        and bool(task.get("served"))
        and entry.status is not None
        and entry.status < 400
    )


def rate_limit_answer(entry: Entry) -> bool:
    """Whether *entry* was answered by a rate limit: a bucket's refusal or a scripted
    ``rate_limited:`` step (an admitted request of a limited endpoint is not one)."""
    limit = entry.rate_limit
    return limit is not None and bool(limit.get("refused") or limit.get("scripted"))


def refused_control(entry: Entry) -> bool:
    """Whether *entry* is mockskill's own refusal of its ``Mockskill-Error`` header (a
    category misspelt, or one the provider cannot send): the journal marks it forced, with
    a ``MOCKSKILL_`` code. The test's mistake, not an answer of the skill's: a request
    after it retries nothing, and it is no failed attempt of a chain."""
    return entry.forced and (entry.error_code or "").startswith("MOCKSKILL_")


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
    acted = acted_on_detail(previous, entry)
    return None if acted is None else acted[0]


def acted_on_detail(previous: Entry, entry: Entry) -> tuple[float, bool] | None:
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
    its own, and so is one that names another case of a pack (:func:`asked_case`). So is
    an attempt that :func:`overlaps` the last one of every
    chain it could continue: it is concurrent, not a retry. When it could
    continue several (identical requests in parallel), it goes with the
    :func:`likeliest`.
    """
    ordered = sorted(entries, key=lambda e: (e.started, e.id))
    waiting: dict[tuple[str, object, str | None], list[list[Entry]]] = {}  # last failed
    out: list[list[Entry]] = []
    for entry in ordered:
        if refused_control(entry):  # the skill never saw it: nothing to retry, no retry
            out.append([entry])
            continue
        key = (endpoint_of(entry), entry.body_digest, asked_case(entry))
        earlier = waiting.get(key)  # none for most: the first attempt of their operation
        open_chains = [c for c in earlier if outcome(c[-1]).failed] if earlier else []
        candidates = [c for c in open_chains if not overlaps(entry, c[-1])]
        chain = likeliest(entry, candidates) if candidates else None
        if chain is None:
            chain = []
            out.append(chain)
            open_chains.append(chain)
        chain.append(entry)
        waiting[key] = open_chains
    return out


CASE_HEADER = "mockskill-case"


def asked_case(entry: Entry) -> str | None:
    """The case *entry*'s ``Mockskill-Case`` header named (None: none, or headers not
    kept). A test that asks another case of a pack asks another operation: no retry."""
    if entry.case is None:
        return None  # no case answered it, so none was asked (most requests: no header read)
    for name, value in entry.headers or ():
        if name.lower() == CASE_HEADER:
            return value
    return None


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


def client_timeout_ms(entry: Entry) -> float | None:
    """After how long the client gave up without an answer it could act on (None: it did not)."""
    if entry.client_left is None or answered(entry):
        return None
    return round((entry.client_left - entry.started) * 1000, 1)
