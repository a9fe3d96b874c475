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
from .retries import (
    VALIDATION_ERROR,
    answered,
    client_timeout_ms,
    endpoint_of,
    rate_limit_answer,
)

FAULT_NAMES: tuple[str, ...] = tuple(FAULTS)

RATE_LIMITED_ROW = RATE_LIMITED.code
"""The name of the rate-limit row (``coverage["rate_limited"]``) for the gates
(``--require RATE_LIMITED``): met by any rate-limit answer, the 429 ``RATE_LIMITED``
or the in-protocol 503 ``ENDPOINT_UNREACHABLE`` that a limit answered."""


def coverage(entries: Iterable[Entry]) -> dict[str, Any]:
    """How often each category and each transport fault reached the consumer, and the
    rate-limit answers in a row of their own (by the code they carried).

    A 503 a limit answered counts as ``ENDPOINT_UNREACHABLE`` too (it is one, in
    protocol); the 429 is outside the chapter, so only in its row. "complete" asks for
    the chapter's categories and the faults, never for a rate limit (the gates can:
    :data:`RATE_LIMITED_ROW`)."""
    categories = dict.fromkeys(CODES, 0)
    faults = dict.fromkeys(FAULT_NAMES, 0)
    limited = {RATE_LIMITED.code: 0, "ENDPOINT_UNREACHABLE": 0}
    for entry in entries:
        if entry.fault is not None:
            if entry.fault in faults:
                faults[entry.fault] += 1
            continue
        if not answered(entry):
            continue  # no answer reached the consumer
        if entry.invalid_descriptor:
            categories[VALIDATION_ERROR] += 1
        elif entry.error_code in categories:
            categories[entry.error_code] += 1
        if entry.error_code in limited and (
            rate_limit_answer(entry) or entry.error_code == RATE_LIMITED.code
        ):
            limited[entry.error_code] += 1
    missing = {
        "categories": [c for c, n in categories.items() if not n],
        "faults": [f for f, n in faults.items() if not n],
        "rate_limited": [] if any(limited.values()) else [RATE_LIMITED_ROW],
    }
    return {
        "categories": categories,
        "faults": faults,
        "rate_limited": limited,
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
            "client_timeout_ms": client_timeout_ms(e),
        }
        for e in sorted(entries, key=lambda e: (e.started, e.id))
        if client_timeout_ms(e) is not None
    ]
