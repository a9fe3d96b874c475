"""The rules of long-running tasks: how a consumer waits on a task (docs/tasks.md).

A task skill's invoke answers ``202 Accepted`` with a status URL; the consumer
follows it, polling no sooner than each answer's ``Retry-After``, until the task
is in a terminal status (``completed``, ``failed``, ``cancelled``), or cancels it.
Every request on a task journals :attr:`Entry.task <mockskill.engine.entries.Entry.task>`
(its id, the action, whether mockskill handed the id out, the status served, the
``poll_after_ms`` advised, the operation a submit stands for, ...). The five rules
read a session's entries, task by task (docs/audit.md documents each):

- ``poll-too-soon``: a poll sent before the previous answer's ``Retry-After`` had
  passed (measured as ``retry-too-soon`` measures a retry: from when the consumer
  had the previous answer, with the same tolerance);
- ``poll-after-terminal``: polls going on after an answer served a terminal
  status (one grace poll allowed);
- ``task-abandoned``: a task the consumer had, left unpolled past its next poll's
  due time by more than :attr:`~.policy.Policy.abandoned_ms`, by the report's time,
  though it never saw the task end and never cancelled it;
- ``reinvoked-while-running``: a submit that started a second task for the
  operation (the same ``Idempotency-Key``, or none and the same body) of a task
  still live (the ``duplicate-execution`` family);
- ``status-url-ignored``: requests to task URLs mockskill never handed out (the
  consumer built them instead of following ``Location``);

and, for a task with ``callback:``, :mod:`.callbacks`' three rules on its deliveries
(``callback-not-acknowledged``, ``callback-signature-not-checked``,
``callback-without-reconcile``). A delivery is mockskill's request, not the consumer's:
the five rules above read the consumer's requests only, and a task whose end reached the
receiver (acknowledged) is not abandoned for being left unpolled.

A poll's own failure (a scripted error or fault on the status URL) carries no task
state: retrying it is graded by the retry rules, on its chain, like any request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from ..scenario.model import TERMINAL_STATUSES
from .callbacks import (
    CALLBACK_WITHOUT_RECONCILE,
    callback_findings,
    is_delivery,
    terminal_acknowledged,
)
from .findings import Finding, plural
from .policy import Policy
from .retries import acted_on, answered, ended, endpoint_of

POLL_TOO_SOON = "poll-too-soon"
POLL_AFTER_TERMINAL = "poll-after-terminal"
TASK_ABANDONED = "task-abandoned"
REINVOKED_WHILE_RUNNING = "reinvoked-while-running"
STATUS_URL_IGNORED = "status-url-ignored"

MAX_LISTED = 10
"""The most requests (or task ids) a finding's ``found`` spells out; it counts the rest."""


def info(entry: Entry) -> dict[str, Any]:
    """What *entry* did to a task (:attr:`Entry.task`; empty: it touched none)."""
    return entry.task or {}


def served_status(entry: Entry) -> str | None:
    """The task status *entry*'s answer carried to the consumer (None: none reached it)."""
    task = info(entry)
    if not task.get("served") or not answered(entry):
        return None
    status = task.get("status")
    return status if isinstance(status, str) else None


def served_terminal(entry: Entry) -> bool:
    """Whether *entry*'s answer told the consumer its task had ended."""
    return served_status(entry) in TERMINAL_STATUSES


def cancel_accepted(entry: Entry) -> bool:
    """Whether *entry* was a cancel that counted (a 409 is not served: it changed nothing)."""
    task = info(entry)
    return task.get("action") == "cancel" and bool(task.get("served"))


def task_findings(
    session: str, entries: Iterable[Entry], policy: Policy, now: float
) -> list[Finding]:
    """The task rules' findings on one session's *entries* (its requests and mockskill's
    callback deliveries), judged at *now* (the report's time, seconds since the epoch:
    ``task-abandoned`` is silence until then)."""
    touched = sorted((e for e in entries if e.task is not None), key=lambda e: (e.started, e.id))
    if not touched:
        return []
    deliveries = [e for e in touched if is_delivery(e)]
    findings: list[Finding] = callback_findings(session, touched, policy, now)
    # A lost callback never reconciled is that rule's finding, not task-abandoned's too.
    unreconciled = {f.task for f in findings if f.rule == CALLBACK_WITHOUT_RECONCILE}
    told_end = {
        str(ident)
        for ident in {info(e).get("id") for e in deliveries}
        if terminal_acknowledged(e for e in deliveries if info(e).get("id") == ident)
    }
    touched = [e for e in touched if not is_delivery(e)]
    by_task: dict[str, list[Entry]] = {}
    built: list[Entry] = []  # requests to task URLs mockskill never handed out
    for entry in touched:
        task = info(entry)
        ident = task.get("id")
        if task.get("action") == "submit":
            if ident and task.get("known", True):
                by_task.setdefault(str(ident), []).append(entry)
        elif task.get("known") is False:
            built.append(entry)
        elif ident:
            by_task.setdefault(str(ident), []).append(entry)
    for ident, items in by_task.items():
        leaves = ident not in unreconciled and ident not in told_end
        for found in (
            poll_too_soon(session, ident, items, policy),
            poll_after_terminal(session, ident, items),
            task_abandoned(session, ident, items, policy, now) if leaves else None,
        ):
            if found is not None:
                findings.append(found)
    findings.extend(reinvoked_while_running(session, by_task))
    if built:
        findings.append(status_url_ignored(session, built))
    return findings


# -- poll-too-soon ----------------------------------------------------------------------


def previous_answer(items: Sequence[Entry], i: int) -> Entry | None:
    """The latest request of the task before ``items[i]`` whose answer (or hang-up) the
    consumer had when it sent ``items[i]`` (None: none): what that request acted on."""
    entry = items[i]
    for j in range(i - 1, -1, -1):
        before: Entry = items[j]
        if acted_on(before, entry) is not None:
            return before
    return None


def poll_too_soon(
    session: str, ident: str, items: Sequence[Entry], policy: Policy
) -> Finding | None:
    """Polls of task *ident* (its requests, in order) sent before the ``Retry-After`` of the
    answer before them had passed, from when the consumer had that answer."""
    early: list[tuple[Entry, Entry, float, float]] = []  # (poll, previous, waited, owed)
    for i, entry in enumerate(items):
        if info(entry).get("action") != "poll":
            continue
        before = previous_answer(items, i)
        if before is None or served_status(before) is None:
            continue  # nothing it had advised a wait (a failure is its chain's to grade)
        owed = info(before).get("poll_after_ms")
        if owed is None:
            continue  # a terminal answer advises none (poll-after-terminal's to judge)
        since = acted_on(before, entry)
        assert since is not None
        waited = max(0.0, entry.started - since) * 1000
        if waited < policy.least(float(owed)):
            early.append((entry, before, waited, float(owed)))
    if not early:
        return None
    n = len(early)
    steps = [
        f"#{poll.id} {waited:.0f} ms after #{before.id} ({_as_served(before)},"
        f" Retry-After {owed:.0f} ms)"
        for poll, before, waited, owed in early
    ]
    ids = sorted({e.id for poll, before, _, _ in early for e in (poll, before)})
    return Finding(
        rule=POLL_TOO_SOON,
        session=session,
        endpoint=endpoint_of(early[0][0]),
        attempts=ids,
        message=f"{n} {plural(n, 'poll', 'polls')} of task {ident} sooner than the"
        " Retry-After of the answer before",
        expected="poll the status URL no sooner than the previous answer's Retry-After"
        " (task.poll_after_ms) after it, read afresh from every answer"
        f" ({policy.tolerance_text()})",
        found=_listed(steps),
        fix="sleep the Retry-After of each answer (the 202's, then each poll's: it changes"
        " over the task's life) before the next poll; fall back to task.poll_after_ms,"
        " never to a fixed or zero interval",
        task=ident,
    )


def _as_served(entry: Entry) -> str:
    task = info(entry)
    return f"{task.get('action')} served {task.get('status')}"


# -- poll-after-terminal ----------------------------------------------------------------


def poll_after_terminal(session: str, ident: str, items: Sequence[Entry]) -> Finding | None:
    """Polls of task *ident* sent after the consumer had an answer serving its terminal
    status, but the first (a grace poll: a loop that checks the status after the poll)."""
    end = next((e for e in items if served_terminal(e)), None)
    if end is None:
        return None
    after = [
        e
        for e in items
        if e is not end and info(e).get("action") == "poll" and acted_on(end, e) is not None
    ]
    extra = after[1:]
    if not extra:
        return None
    n = len(extra)
    since = ended(end)
    steps = [f"#{e.id} {(e.started - since) * 1000:.0f} ms later" for e in after]
    steps[0] += " (the grace poll)"
    return Finding(
        rule=POLL_AFTER_TERMINAL,
        session=session,
        endpoint=endpoint_of(extra[0]),
        attempts=[end.id, *(e.id for e in after)],
        message=f"{n} {plural(n, 'poll', 'polls')} of task {ident} after it was served"
        f" {served_status(end)}",
        expected="stop polling once an answer serves a terminal status (completed, failed,"
        " cancelled; one more poll is allowed)",
        found=f"#{end.id} served {served_status(end)}; then " + _listed(steps),
        fix="end the poll loop on a terminal task.status and take the result (or the"
        " error) from that answer; a terminal answer has no Retry-After: its absence"
        " means stop, not poll at once",
        task=ident,
    )


# -- task-abandoned ---------------------------------------------------------------------


def task_abandoned(
    session: str, ident: str, items: Sequence[Entry], policy: Policy, now: float
) -> Finding | None:
    """Task *ident*, if the consumer had it (an answer about it reached it), never saw it
    end, never cancelled it, and left it unpolled longer than its next poll's due time
    plus :attr:`~.policy.Policy.abandoned_ms`: until *now*, or until a request that came
    back too late and found it expired (its time-to-live over)."""
    if not any(served_status(e) is not None for e in items):
        return None  # the consumer never learnt of it (its 202 lost): nothing to poll
    if any(served_terminal(e) or cancel_accepted(e) for e in items):
        return None
    last, until, expired = _silence(items, now)
    owed = info(last).get("poll_after_ms") if served_status(last) is not None else None
    due_ms = float(owed or 0)
    silent_ms = max(0.0, until - ended(last)) * 1000
    if silent_ms - due_ms <= policy.abandoned_ms:
        return None
    status = next((served_status(e) for e in reversed(items) if served_status(e) is not None), None)
    came_back = (
        f"; #{expired.id} came back after its time-to-live: expired"
        if expired is not None
        else " by the report's time"
    )
    return Finding(
        rule=TASK_ABANDONED,
        session=session,
        endpoint=endpoint_of(last),
        attempts=[e.id for e in (last, expired) if e is not None],
        message=f"task {ident} left {status} and unpolled for {silent_ms / 1000:.1f} s",
        expected="poll a task until it is served a terminal status, or cancel it (DELETE its"
        f" status URL) when giving up; silence past the next poll's due time ({due_ms:.0f} ms"
        f" after the last answer) for more than {policy.abandoned_ms:.0f} ms is leaving it",
        found=f"last served {status}; the last request, #{last.id} ({_answer(last)}), then"
        f" nothing for {silent_ms:.0f} ms{came_back}",
        fix="when the consumer stops waiting (its own timeout, an error, shutdown), DELETE"
        " the task's status URL so that the provider stops the work; otherwise keep polling"
        " until a terminal status",
        task=ident,
    )


def _silence(items: Sequence[Entry], now: float) -> tuple[Entry, float, Entry | None]:
    """(the request the silence follows, when the silence ended, the request that ended it
    by finding the task expired or None): the silence until the first request that found
    it expired, if one did, else until *now*."""
    for i, entry in enumerate(items):
        if info(entry).get("expired") and i > 0:
            last = max(items[:i], key=ended)
            return last, entry.started, entry
    return max(items, key=ended), now, None


# -- reinvoked-while-running ------------------------------------------------------------


def same_task_operation(earlier: Entry, later: Entry) -> bool:
    """Whether *earlier* and *later* are submits of one operation (the same key, or none and
    the same body): whether *later* started a second task for it is this rule's to judge,
    not ``duplicate-execution``'s (one double start, one finding)."""
    first, second = info(earlier), info(later)
    operation = first.get("operation")
    return (
        first.get("action") == second.get("action") == "submit"
        and operation is not None
        and operation == second.get("operation")
    )


def reinvoked_while_running(session: str, by_task: dict[str, list[Entry]]) -> list[Finding]:
    """Submits that started another task for the operation of a task still live (not yet
    served terminal, not past its ``settles_at_ms``, not cancelled): one finding per
    operation, naming the first task and the ones started beside it. One pass over each
    operation's submits: a batch of identical operations, run one after another, is read
    in linear time."""
    submits: dict[str, list[tuple[str, Entry]]] = {}  # operation -> (task id, submit)
    for ident, items in by_task.items():
        first = items[0]
        operation = info(first).get("operation")
        if info(first).get("action") == "submit" and operation:
            submits.setdefault(str(operation), []).append((ident, first))
    findings = []
    for operation, started in submits.items():
        if len(started) < 2:
            continue
        started.sort(key=lambda pair: (pair[1].started, pair[1].id))
        again: list[tuple[Entry, str, Entry, str]] = []  # (submit, live task, its submit, status)
        longest: tuple[float, str, Entry] | None = None  # the earlier task live the longest
        for ident, submit in started:
            if longest is not None and submit.started < longest[0]:
                _, earlier, earlier_submit = longest
                status = _status_at(by_task[earlier], submit.started)
                again.append((submit, earlier, earlier_submit, status))
            until = live_until(by_task[ident])
            if longest is None or until > longest[0]:
                longest = (until, ident, submit)
        if again:
            findings.append(_reinvoked(session, operation, again))
    return findings


def live_until(items: Sequence[Entry]) -> float:
    """When the task of *items* (its requests, its submit first) stopped being live, in
    seconds since the epoch (infinity: it has not): the end of its scripted life
    (``settles_at_ms``), or of the first answer that served its terminal status, accepted
    a cancel, or found it expired, whichever came first."""
    until = math.inf
    settles = info(items[0]).get("settles_at_ms")
    if settles is not None:
        until = float(settles) / 1000
    for entry in items:
        task = info(entry)
        status = task.get("status") if task.get("served") else None
        if status in TERMINAL_STATUSES or cancel_accepted(entry) or task.get("expired"):
            until = min(until, ended(entry))
    return until


def _status_at(items: Sequence[Entry], at: float) -> str:
    """The last status the task of *items* was served in before *at* (``submitted`` when
    no answer had ended by then)."""
    status = "submitted"
    for entry in items:
        task = info(entry)
        if ended(entry) <= at and task.get("served") and isinstance(task.get("status"), str):
            status = task["status"]
    return status


def _reinvoked(session: str, operation: str, again: list[tuple[Entry, str, Entry, str]]) -> Finding:
    _, first_ident, first, _ = again[0]  # the first task another was started beside
    steps = [
        f"#{submit.id} started task {info(submit).get('id')}"
        f" {(submit.started - earlier_submit.started) * 1000:.0f} ms after #{earlier_submit.id}"
        f" started task {earlier}, still {status}"
        for submit, earlier, earlier_submit, status in again
    ]
    n = len(again)
    kind, _, value = operation.partition(":")
    same = f"the same Idempotency-Key ({value})" if kind == "key" else "no key and the same body"
    ids = sorted({e.id for submit, _, earlier_submit, _ in again for e in (submit, earlier_submit)})
    return Finding(
        rule=REINVOKED_WHILE_RUNNING,
        session=session,
        endpoint=endpoint_of(first),
        attempts=ids,
        message=f"{n} more {plural(n, 'task', 'tasks')} started for the operation of task"
        f" {first_ident} while it was live ({same})",
        expected="one task per operation: while its task is live (not served a terminal"
        " status, not cancelled), follow its status URL instead of invoking again",
        found=_listed(steps),
        fix="keep the 202's Location (task.status_url) and poll it to the end; when the 202"
        " itself was lost, retry the invoke with the same Idempotency-Key (a provider that"
        " honours it answers with the same task); to start afresh, cancel the live task first",
        task=first_ident,
    )


# -- status-url-ignored -----------------------------------------------------------------


def status_url_ignored(session: str, built: Sequence[Entry]) -> Finding:
    """Requests (in order) to task URLs whose ids mockskill never handed out."""
    idents = list(dict.fromkeys(str(info(e).get("id")) for e in built))
    n = len(built)
    steps = [f"#{e.id} {e.method} {e.path} ({_answer(e)})" for e in built]
    return Finding(
        rule=STATUS_URL_IGNORED,
        session=session,
        endpoint=endpoint_of(built[0]),
        attempts=[e.id for e in built],
        message=f"{n} {plural(n, 'request', 'requests')} to task URLs mockskill never handed"
        f" out ({_listed([repr(i) for i in idents], ', ')})",
        expected="the status URL is the one the 202 gave: its Location header, the same as"
        " task.status_url, used verbatim (the id is opaque and carries the session)",
        found=_listed(steps),
        fix="follow Location (or task.status_url) as given; never build a task URL from"
        " parts, another server's base or a guessed id",
        task=idents[0],
    )


def _answer(entry: Entry) -> str:
    if entry.fault is not None:
        return entry.fault
    return f"{entry.status} {entry.error_code}" if entry.error_code else str(entry.status)


def _listed(steps: Sequence[str], between: str = "; ") -> str:
    """*steps* joined, the first :data:`MAX_LISTED` spelt out and the rest counted."""
    if len(steps) <= MAX_LISTED:
        return between.join(steps)
    more = len(steps) - MAX_LISTED
    return between.join(steps[:MAX_LISTED]) + f"{between}and {more} more"
