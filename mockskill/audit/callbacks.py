"""The rules of a task's callbacks: how a consumer receives the changes mockskill pushes.

A task skill with ``callback:`` pushes its state changes to the consumer's receiver,
signed, retried with backoff until the receiver answers 2xx within the timeout
(docs/tasks.md). Every delivery attempt is an entry of endpoint ``callback`` in the
task's session, made by mockskill (not a request of the consumer's), its
:attr:`Entry.task <mockskill.engine.entries.Entry.task>` saying which change it carried
(``delivery``, ``attempt``, ``pushed``), the task's scripted ``fault``, whether it was
``forged`` and ``acknowledged``. The three rules (docs/audit.md documents each):

- ``callback-not-acknowledged``: a delivery with a valid signature that the receiver
  did not acknowledge (a non-2xx, no answer, or a 2xx past the timeout), so mockskill
  had to retry it or give up;
- ``callback-signature-not-checked``: the receiver answered 2xx to a delivery signed
  under a wrong key (the ``forged`` fault);
- ``callback-without-reconcile``: under a lost callback (the ``never`` fault), the
  consumer never asked the status URL after the first change it should have been told
  of, by the task's end and a bound (:attr:`~.policy.Policy.abandoned_ms`), or the
  report's time.

A ``never`` task sends nothing: its fault is read from its submit's ``callback_fault``
(or from any entry of it naming the fault). :func:`callback_coverage` counts the tasks
each fault was served to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from ..scenario.model import CALLBACK_FAULTS, TERMINAL_STATUSES
from .findings import Finding, plural
from .policy import Policy
from .retries import answered, endpoint_of

CALLBACK_NOT_ACKNOWLEDGED = "callback-not-acknowledged"
CALLBACK_SIGNATURE_NOT_CHECKED = "callback-signature-not-checked"
CALLBACK_WITHOUT_RECONCILE = "callback-without-reconcile"

DELIVERY = "callback"
"""The endpoint (and ``Entry.task``'s action) of a delivery attempt mockskill made."""
NEVER = "never"
SERVED_FAULTS: tuple[str, ...] = tuple(f for f in CALLBACK_FAULTS if f != "none")
"""The faults coverage counts (``none`` is a callback delivered as it should be)."""
MAX_LISTED = 10
"""The most deliveries a finding's ``found`` spells out; it counts the rest."""


def _info(entry: Entry) -> dict[str, Any]:
    return entry.task or {}


def is_delivery(entry: Entry) -> bool:
    """Whether *entry* is a callback delivery attempt mockskill made (no consumer request)."""
    return entry.endpoint == DELIVERY or _info(entry).get("action") == DELIVERY


def receiver_took(entry: Entry) -> bool:
    """Whether the receiver answered *entry*, a delivery, with a 2xx (in time or not)."""
    return entry.status is not None and 200 <= entry.status < 300


def acknowledged(entry: Entry) -> bool:
    """Whether *entry*, a delivery, was acknowledged: 2xx within the timeout."""
    task = _info(entry)
    if "acknowledged" in task:
        return bool(task["acknowledged"])
    return receiver_took(entry)


def forged(entry: Entry) -> bool:
    return bool(_info(entry).get("forged"))


def task_fault(entries: Iterable[Entry]) -> str | None:
    """The callback fault scripted for the task of *entries* (None: no callback known):
    its submit's ``callback_fault``, or the ``fault`` its deliveries carried."""
    for entry in entries:
        task = _info(entry)
        fault = task.get("callback_fault") if task.get("action") == "submit" else None
        if fault is None and is_delivery(entry):
            fault = task.get("fault")
        if isinstance(fault, str):
            return fault
    return None


def terminal_acknowledged(deliveries: Iterable[Entry]) -> bool:
    """Whether one of *deliveries* (a task's) told the receiver of its end, and it took it."""
    return any(
        acknowledged(e) and not forged(e) and _info(e).get("pushed") in TERMINAL_STATUSES
        for e in deliveries
    )


def by_task(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """*entries* (a session's) grouped by the task they touched, in order; deliveries too."""
    grouped: dict[str, list[Entry]] = {}
    # Only what touched a task is ordered: most of a session's requests are no task's.
    touched = sorted((e for e in entries if e.task is not None), key=lambda e: (e.started, e.id))
    for entry in touched:
        ident = _info(entry).get("id")
        if ident and _info(entry).get("known", True) is not False:
            grouped.setdefault(str(ident), []).append(entry)
    return grouped


def callback_findings(
    session: str, entries: Iterable[Entry], policy: Policy, now: float
) -> list[Finding]:
    """The three callback rules' findings on one session's *entries* (requests and
    deliveries), judged at *now* (the report's time, seconds since the epoch)."""
    findings: list[Finding] = []
    for ident, items in by_task(entries).items():
        deliveries = [e for e in items if is_delivery(e)]
        for found in (
            not_acknowledged(session, ident, deliveries),
            signature_not_checked(session, ident, deliveries),
            without_reconcile(session, ident, items, policy, now),
        ):
            if found is not None:
                findings.append(found)
    return findings


# -- callback-not-acknowledged ----------------------------------------------------------


def not_acknowledged(session: str, ident: str, deliveries: Sequence[Entry]) -> Finding | None:
    """Deliveries of task *ident* with a valid signature its receiver did not acknowledge
    (a forged one refused is what a receiver should do: no finding)."""
    missed = [e for e in deliveries if not acknowledged(e) and not forged(e)]
    if not missed:
        return None
    retried = [e for e in missed if _retried(e, deliveries)]
    gave_up = [e for e in missed if not _retried(e, deliveries)]
    n = len(missed)
    steps = [f"#{e.id} {_delivery(e)}: {_receiver_answer(e)}" for e in missed]
    outcome = []
    if retried:
        outcome.append(f"mockskill retried {len(retried)}")
    if gave_up:
        outcome.append(f"gave up after {len(gave_up)}")
    return Finding(
        rule=CALLBACK_NOT_ACKNOWLEDGED,
        session=session,
        endpoint=endpoint_of(missed[0]),
        attempts=[e.id for e in missed],
        message=f"{n} {plural(n, 'delivery', 'deliveries')} of task {ident}'s callback not"
        f" acknowledged ({', '.join(outcome)})",
        expected="the receiver answers 2xx within the callback's timeout to every delivery"
        " whose signature is valid, a repeated one too (delivery.sequence tells it apart)",
        found=_listed(steps),
        fix="acknowledge at once (204) once the signature is checked and the delivery is"
        " stored, and do the work after answering; a delivery already seen (the same task"
        " and delivery.sequence) is answered 2xx too, not refused",
        task=ident,
    )


def _retried(entry: Entry, deliveries: Sequence[Entry]) -> bool:
    """Whether mockskill sent *entry*'s change again after it (a later attempt of it)."""
    task = _info(entry)
    return any(
        _info(e).get("delivery") == task.get("delivery")
        and (_info(e).get("attempt") or 0) > (task.get("attempt") or 0)
        for e in deliveries
    )


def _delivery(entry: Entry) -> str:
    task = _info(entry)
    return f"{task.get('pushed')} (delivery {task.get('delivery')}, attempt {task.get('attempt')})"


def _receiver_answer(entry: Entry) -> str:
    if entry.status is None:
        return "no answer (refused, or none within the timeout)"
    if receiver_took(entry):
        return f"{entry.status} past the timeout"
    return str(entry.status)


# -- callback-signature-not-checked -----------------------------------------------------


def signature_not_checked(session: str, ident: str, deliveries: Sequence[Entry]) -> Finding | None:
    """Deliveries of task *ident* signed under a wrong key that its receiver answered 2xx."""
    taken = [e for e in deliveries if forged(e) and (acknowledged(e) or receiver_took(e))]
    if not taken:
        return None
    n = len(taken)
    steps = [f"#{e.id} {_delivery(e)}: {e.status}" for e in taken]
    return Finding(
        rule=CALLBACK_SIGNATURE_NOT_CHECKED,
        session=session,
        endpoint=endpoint_of(taken[0]),
        attempts=[e.id for e in taken],
        message=f"{n} forged {plural(n, 'delivery', 'deliveries')} of task {ident}'s callback"
        " taken (2xx)",
        expected="the receiver refuses (401 or 403) a delivery whose signature header is not"
        " sha256= and the hex HMAC-SHA256 of the body's exact bytes under the shared secret",
        found=_listed(steps),
        fix="before parsing or acting on a delivery, compute HMAC-SHA256 of the raw body"
        " with the secret and compare it with the header in constant time"
        " (hmac.compare_digest, crypto.timingSafeEqual); refuse a mismatch or a missing header",
        task=ident,
    )


# -- callback-without-reconcile ---------------------------------------------------------


def without_reconcile(
    session: str, ident: str, items: Sequence[Entry], policy: Policy, now: float
) -> Finding | None:
    """Task *ident* (its entries, in order), if its callback was lost (``never``), when the
    consumer never asked its status URL after the first change it should have been told of,
    once that task ended and :attr:`~.policy.Policy.abandoned_ms` passed (a task with no
    known end: once the bound passed after its first change), by *now*."""
    if task_fault(items) != NEVER:
        return None
    submit = next((e for e in items if _info(e).get("action") == "submit"), None)
    if submit is None or not answered(submit) or not _info(submit).get("served", True):
        return None  # the consumer never had the task: nothing to reconcile
    if any(_info(e).get("action") == "cancel" and _info(e).get("served") for e in items):
        return None  # it gave the task up, its fate in its own hands: nothing to wait for
    change, end = _first_change(items)
    if change is None:
        return None  # nothing changed that it should have been told of (a life counting polls)
    deadline = (end if end is not None else change) + policy.abandoned_ms / 1000
    if now < deadline:
        return None  # the consumer may still look
    asked = [e for e in items if _info(e).get("action") not in ("submit", DELIVERY)]
    if any(_reconciles(e, change, deadline) for e in asked):
        return None
    changed_at = (change - submit.started) * 1000
    ended_text = (
        f"; it ended {(end - submit.started) * 1000:.0f} ms after the submit"
        if end is not None
        else ""
    )
    later = [e for e in asked if e.started >= deadline]
    came = (
        f"; the first request after, #{later[0].id}, {(later[0].started - deadline) * 1000:.0f}"
        " ms past the bound"
        if later
        else ""
    )
    return Finding(
        rule=CALLBACK_WITHOUT_RECONCILE,
        session=session,
        endpoint=endpoint_of(submit),
        attempts=[submit.id, *(e.id for e in asked)],
        message=f"task {ident}'s callback never came and its status URL was never asked after"
        " it changed",
        expected="a consumer waiting on callbacks also polls the status URL (its Location)"
        " when a callback is overdue, at the latest by the task's end and"
        f" {policy.abandoned_ms:.0f} ms",
        found=f"#{submit.id} started it; it first changed {changed_at:.0f} ms later"
        f"{ended_text}; no poll of it after that"
        + (f" ({len(asked)} before it)" if asked else "")
        + came,
        fix="treat callbacks as a hint: keep a timer per task (its poll_after_ms, or your"
        " own deadline) and, when no callback came by then, GET the status URL and act on"
        " what it says; poll once on start-up for the tasks you hold",
        task=ident,
    )


def _first_change(items: Sequence[Entry]) -> tuple[float | None, float | None]:
    """(when the task of *items* first changed after its submit, when it ended; each None
    when not known), seconds since the epoch: a change from a delivery's time (a withheld
    one, if journalled), a status served, or its end (``terminal_at_ms``, else the
    submit's ``settles_at_ms``, when past)."""
    end = math.inf
    for entry in items:
        task = _info(entry)
        at = task.get("terminal_at_ms")
        if isinstance(at, (int, float)):
            end = min(end, float(at) / 1000)
        if task.get("action") == "submit" and isinstance(task.get("settles_at_ms"), (int, float)):
            end = min(end, float(task["settles_at_ms"]) / 1000)
    change = end
    for entry in items:
        task = _info(entry)
        if is_delivery(entry):
            change = min(change, entry.started - float(task.get("late_ms") or 0) / 1000)
        elif (
            task.get("action") != "submit"
            and task.get("served")
            and task.get("status") not in (None, "submitted")
        ):
            change = min(change, entry.started)
    return (
        None if math.isinf(change) else change,
        None if math.isinf(end) else end,
    )


def _reconciles(entry: Entry, change: float, deadline: float) -> bool:
    """Whether *entry*, a request on the task, asked its status URL after its first
    *change* and by the *deadline*, or learnt of a change (a status other than submitted)."""
    task = _info(entry)
    learnt = task.get("served") and task.get("status") not in (None, "submitted")
    return entry.started < deadline and (bool(learnt) or entry.started >= change)


# -- coverage ---------------------------------------------------------------------------


def callback_coverage(entries: Iterable[Entry]) -> dict[str, int]:
    """How many tasks each callback fault (but ``none``) was served to, each task once: a
    delivered fault once a delivery carrying it was sent, ``never`` once its task was
    submitted (the consumer had the 202)."""
    served = dict.fromkeys(SERVED_FAULTS, 0)
    for items in by_task(entries).values():
        fault = task_fault(items)
        if fault not in served:
            continue
        assert fault is not None
        if fault == NEVER:
            met = any(_info(e).get("action") == "submit" and answered(e) for e in items)
        else:
            met = any(is_delivery(e) and _sent(e) for e in items)
        if met:
            served[fault] += 1
    return served


def _sent(entry: Entry) -> bool:
    """Whether a delivery went out (a journalled one always did; ``never`` sends none)."""
    return _info(entry).get("fault") != NEVER


def _listed(steps: Sequence[str]) -> str:
    if len(steps) <= MAX_LISTED:
        return "; ".join(steps)
    return "; ".join(steps[:MAX_LISTED]) + f"; and {len(steps) - MAX_LISTED} more"
