"""``after:``, commit then fail: a step's answer made (the skill ran), then lost.

One vocabulary for every step that can run: behind a ``proxy`` the provider
answers and ``after``'s error or fault replaces its answer
(:mod:`.proxy_config`); on a scripted step the step's own answer is what the
skill made (:attr:`~.model.Step.ran`), and ``after`` says how it was lost: its
error answered instead (an ``EXECUTION_TIMEOUT`` once the work was done), or
its fault done to the connection (reset, or ``TRUNCATED_BODY`` cutting the
answer the skill made). :func:`read_after` reads ``after``'s value for both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .kinds import WRITTEN_BODIES, listed
from .model import Step
from .problems import Path, describe
from .reader import Reader
from .waits_and_faults import BAD

AFTER_KEYS = ("error", "status", "message", "details", "retry", "headers", "fault")
"""What ``after:`` holds: an error step's keys, a fault, or both."""
NOT_BESIDE = ("fault", "hang", "dribble")
"""A scripted step's keys that cannot be beside ``after``: they say how the answer is
(not) sent, which ``after`` says. (Beside ``failure_rate``, ``after`` is its success's;
``one_of`` puts it in its outcomes.)"""
_SHAPE = "{error: CODE, ...} or {fault: NAME}: what replaces the answer once the skill ran"

ReadStep = Callable[[Reader, Any, Path, Any], "Step | None"]


def read_after(r: Reader, value: Any, path: Path, ctx: Any, read: ReadStep) -> Any:
    """``after``'s value as a step (its reply, its fault), or BAD (problems recorded)."""
    if not isinstance(value, dict) or not value:
        r.bad(path, _SHAPE, describe(value))
        return BAD
    if not r.keys(value, path, AFTER_KEYS):
        return BAD
    if "error" not in value and "fault" not in value:
        r.bad(path, _SHAPE, describe(value))
        return BAD
    step = read(r, value, path, ctx)
    return BAD if step is None else step


def scripted_after(
    r: Reader, raw: dict[str, Any], path: Path, ctx: Any, read: ReadStep, read_own: ReadStep
) -> Step | None:
    """A scripted step with ``after``: the step *raw* without it (read by *read_own*, its
    keys checked already) is what the skill answered (:attr:`~.model.Step.ran`); what is
    sent is ``after``'s error, or the skill's answer with ``after``'s fault
    (``TRUNCATED_BODY``: that answer cut). *read* reads ``after``'s step."""
    where = (*path, "after")
    for key in NOT_BESIDE:
        if key in raw:
            r.bad(
                (*path, key),
                "no fault, hang or dribble beside after",
                f"{key} as well",
                "after: says how the answer the skill made was lost; put after: in each"
                " outcome of a random step",
                at_key=True,
            )
            return None
    if "error" in raw:
        r.bad(
            (*path, "error"),
            "the answer the skill made beside after (json, text, body_base64, ...)",
            "an error",
            "after: follows a skill that ran; an error step did not: put the error in after:",
            at_key=True,
        )
        return None
    own = {k: v for k, v in raw.items() if k != "after"}
    made = tuple(k for k in WRITTEN_BODIES if k != "error")  # an error did not run (above)
    if not any(k in own for k in (*made, "status")):
        r.bad(
            path,
            f"the answer the skill made beside after ({listed(made)}), or proxy",
            describe(raw),
            "after: says how a skill's answer was lost once it ran",
        )
        return None
    step = read_own(r, own, path, ctx)
    after = read_after(r, raw["after"], where, ctx, read)
    if step is None or after is BAD:
        return None
    assert isinstance(after, Step)
    reply = after.reply if "error" in raw["after"] else step.reply
    return dataclasses.replace(step, reply=reply, fault=after.fault, ran=step.reply)
