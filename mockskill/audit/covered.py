"""Coverage and timeouts: what each session met, and the requests its consumer gave up on.

:func:`coverage` counts the categories and transport faults that reached the
consumer; :func:`timeouts` lists its real timeouts (when it hung up without
an answer it could act on), and what it was waiting through.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine.state import Entry
from ..protocol.catalog import CODES, RATE_LIMITED
from ..scenario.model import FAULTS
from .callbacks import SERVED_FAULTS, callback_coverage, is_delivery
from .retries import (
    VALIDATION_ERROR,
    answered,
    client_timeout_ms,
    endpoint_of,
    rate_limit_answer,
    task_answer,
)

FAULT_NAMES: tuple[str, ...] = tuple(FAULTS)

RATE_LIMITED_ROW = RATE_LIMITED.code
"""The name of the rate-limit row (``coverage["rate_limited"]``) for the gates
(``--require RATE_LIMITED``): met by any rate-limit answer, the 429 ``RATE_LIMITED``
or the in-protocol 503 ``ENDPOINT_UNREACHABLE`` that a limit answered."""


TASK_FAILED_ROW = "TASK_FAILED"
"""The gates' name (``--require TASK_FAILED``) for a task the consumer saw fail, whatever
its error's category; ``TASK_FAILED:<CATEGORY>`` (:func:`task_failed_name`) for one of a
category."""
TASK_CANCELLED_ROW = "TASK_CANCELLED"
"""The gates' name (``--require TASK_CANCELLED``) for a task the consumer saw cancelled."""


CALLBACK_FAULT_ROW = "CALLBACK_FAULT"
"""The gates' name (``--require CALLBACK_FAULT``) for a task whose callback was served a
fault, whichever; ``CALLBACK_FAULT:<fault>`` (:func:`callback_fault_name`) for one."""


def task_failed_name(code: str) -> str:
    """The gates' name for a task the consumer saw fail with a *code* error."""
    return f"{TASK_FAILED_ROW}:{code}"


def callback_fault_name(fault: str) -> str:
    """The gates' name for a task whose callback was served the *fault*."""
    return f"{CALLBACK_FAULT_ROW}:{fault}"


TASK_ROWS: tuple[str, ...] = (
    TASK_FAILED_ROW,
    *(task_failed_name(code) for code in CODES),
    TASK_CANCELLED_ROW,
    CALLBACK_FAULT_ROW,
    *(callback_fault_name(fault) for fault in SERVED_FAULTS),
)
"""Every name the gates know for the task rows (``coverage["tasks"]``)."""


def coverage(entries: Iterable[Entry]) -> dict[str, Any]:
    """How often each category and each transport fault reached the consumer, and the
    rate-limit answers and the tasks that ended unsuccessfully in rows of their own.

    A 503 a limit answered counts as ``ENDPOINT_UNREACHABLE`` too (it is one, in
    protocol); the 429 is outside the chapter, so only in its row. "complete" asks for
    the chapter's categories and the faults, never for a rate limit or a task (the gates
    can: :data:`RATE_LIMITED_ROW`, :data:`TASK_ROWS`)."""
    entries = list(entries)
    categories = dict.fromkeys(CODES, 0)
    faults = dict.fromkeys(FAULT_NAMES, 0)
    limited = {RATE_LIMITED.code: 0, "ENDPOINT_UNREACHABLE": 0}
    for entry in entries:
        if entry.fault is not None:
            if entry.fault in faults:
                faults[entry.fault] += 1
            continue
        if not answered(entry) or is_delivery(entry):
            continue  # no answer reached the consumer, or mockskill's own callback
        if task_answer(entry):
            continue  # a task's state: a failed task counts once for its category, below
        if entry.invalid_descriptor:
            categories[VALIDATION_ERROR] += 1
        elif entry.error_code in categories:
            categories[entry.error_code] += 1
        if entry.error_code in limited and (
            rate_limit_answer(entry) or entry.error_code == RATE_LIMITED.code
        ):
            limited[entry.error_code] += 1
    tasks = task_coverage(entries)
    for code, count in tasks["failed"].items():
        if code in categories:
            categories[code] += count  # the consumer met the error, as its task's end
    missing = {
        "categories": [c for c, n in categories.items() if not n],
        "faults": [f for f, n in faults.items() if not n],
        "rate_limited": [] if any(limited.values()) else [RATE_LIMITED_ROW],
        "tasks": _tasks_missing(tasks),
    }
    return {
        "categories": categories,
        "faults": faults,
        "rate_limited": limited,
        "tasks": tasks,
        "missing": missing,
        "complete": not missing["categories"] and not missing["faults"],
    }


def task_coverage(entries: Iterable[Entry]) -> dict[str, Any]:
    """The tasks whose end reached the consumer unsuccessfully, each counted once: ``failed``
    by the category of its error (the answer's ``error_code``; another code is counted
    under its own name), and ``cancelled`` (by the consumer, or by the provider). A failed
    task counts once for its category among the categories too (:func:`coverage`).
    ``callbacks``: the tasks each callback fault was served to (:func:`.callback_coverage`)."""
    entries = list(entries)
    failed = dict.fromkeys(CODES, 0)
    cancelled = 0
    ended: set[str] = set()
    for entry in entries:
        task = entry.task
        if task is None or is_delivery(entry) or not task_answer(entry) or not answered(entry):
            continue
        status, ident = task.get("status"), str(task.get("id"))
        if status not in ("failed", "cancelled") or ident in ended:
            continue
        ended.add(ident)
        if status == "cancelled":
            cancelled += 1
        else:
            code = entry.error_code or "unknown"
            failed[code] = failed.get(code, 0) + 1
    return {"failed": failed, "cancelled": cancelled, "callbacks": callback_coverage(entries)}


def _tasks_missing(tasks: dict[str, Any]) -> list[str]:
    """The names of :data:`TASK_ROWS` that *tasks* (:func:`task_coverage`) has not met."""
    failed: dict[str, int] = tasks["failed"]
    missing = [] if any(failed.values()) else [TASK_FAILED_ROW]
    missing.extend(task_failed_name(code) for code in CODES if not failed[code])
    if not tasks["cancelled"]:
        missing.append(TASK_CANCELLED_ROW)
    callbacks: dict[str, int] = tasks["callbacks"]
    if not any(callbacks.values()):
        missing.append(CALLBACK_FAULT_ROW)
    missing.extend(callback_fault_name(f) for f in SERVED_FAULTS if not callbacks[f])
    return missing


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
            "client_timeout_ms": client_timeout_ms(e),
        }
        for e in sorted(entries, key=lambda e: (e.started, e.id))
        if client_timeout_ms(e) is not None
    ]
