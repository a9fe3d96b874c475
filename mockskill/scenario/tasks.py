"""A skill's ``task:`` — a long-running task's life, its cancel rule and its polls → checked model.

:func:`read_task` reads the YAML of a skill run as a task (docs/scenarios.md, "Long-running
tasks") into a frozen :class:`~.model.Task`: ``poll_after`` and ``ttl`` (durations,
:mod:`.durations`), ``cancel: {allowed, settle}``, the ``life`` in phases
(:class:`~.model.TaskPhase`) and ``polls:``, an ordinary sequence played on the status URL
(:func:`.steps.read_sequence`). Each part of a phase is read by the reader that owns its
concept: a completed phase's ``json:`` and a failed one's ``error:`` by the step reader (as
an invoke's result and a step's error), an ``input_required`` phase's ``expects:`` by the
``when:`` reader of cases (:func:`.cases.read_when`).

What only a whole life can get wrong is checked here: one terminal phase and it last, a
live phase that ends (``for:`` or ``polls:``, or input for ``input_required``), progress
rising within 0..100, a cancel allowed only in live statuses. A ``callback:`` is read by
:mod:`.task_callbacks`. Whether a skill's invoke can start its task at all (a
``task: submit`` step) is :func:`starts_task`'s question, asked by :mod:`.skills`. How a
task moves on at run time is the engine's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..protocol import catalog
from .cases import read_when
from .durations import read_duration
from .kinds import listed
from .model import (
    TASK_STATUSES,
    TERMINAL_STATUSES,
    Case,
    Condition,
    Reply,
    Sequence,
    Step,
    Task,
    TaskPhase,
)
from .problems import Path, describe
from .reader import Reader
from .source import Position
from .steps import StepContext, read_sequence, read_step
from .task_callbacks import read_callback

__all__ = [
    "CANCEL_KEYS",
    "ERROR_KEYS",
    "MAX_POLLS",
    "MAX_SPAN_MS",
    "PHASE_KEYS",
    "TASK_KEYS",
    "WATCH_KEYS",
    "read_case_lives",
    "read_task",
    "starts_task",
]

TASK_KEYS = ("poll_after", "ttl", "cancel", "life", "polls", "callback", "watch")
CANCEL_KEYS = ("allowed", "settle")
WATCH_KEYS = ("heartbeat",)
ERROR_KEYS = ("error", "status_code", "message", "details", "retry")
"""A failed phase's error, as a step's ``error:`` and its overrides (``status_code`` for the
step's ``status``, which names the task's status here)."""
PHASE_KEYS = ("status", "for", "polls", "progress", "poll_after", "json", *ERROR_KEYS, "expects")
LIVE_STATUSES = tuple(s for s in TASK_STATUSES if s not in TERMINAL_STATUSES)
INPUT = "input_required"
MAX_SPAN_MS = 86_400_000
"""The longest phase (``for:``) or time-to-live a task may have: a day, far beyond a test."""
MAX_POLLS = 1_000_000
"""The most polls a phase may last."""
_DEFAULTS = Task(life=(), where=Position("", 0, 0))
"""A task with every default: what a ``task:`` leaves out is read from it."""


def read_task(r: Reader, value: Any, path: Path, ctx: StepContext) -> Task | None:
    """A skill's ``task:`` (*ctx*: its invoke's, whose error context its errors are written
    in); None when the value is null, or (with problems recorded) when it is wrong."""
    if value is None:
        return None
    raw = r.mapping(
        value, path, "a task: a mapping with life: (and poll_after, ttl, cancel, polls, callback)"
    )
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, TASK_KEYS, required=("life",))
    poll_after = _duration(r, raw, "poll_after", path, _DEFAULTS.poll_after_ms, r.max_delay_ms)
    ttl = _duration(r, raw, "ttl", path, _DEFAULTS.ttl_ms, MAX_SPAN_MS)
    cancel = _cancel(r, raw.get("cancel"), (*path, "cancel"))
    life = _life(r, raw["life"], (*path, "life"), ctx) if "life" in raw else None
    polls: Sequence | None = None
    if raw.get("polls") is not None:
        polls_ctx = dataclasses.replace(ctx, tasks=("status",))
        polls = read_sequence(r, raw["polls"], (*path, "polls"), polls_ctx)
    callback = read_callback(r, raw.get("callback"), (*path, "callback"))
    watch = _watch(r, raw.get("watch", True), (*path, "watch"))
    if len(r.problems) > before or life is None or cancel is None or watch is None:
        return None
    if poll_after is None or ttl is None:
        return None
    allowed, settle = cancel
    if callback is not None and "on" in raw["callback"]:
        _unreached(r, callback.on, life, allowed, (*path, "callback", "on"))
    return Task(
        life=life,
        where=r.position(path),
        poll_after_ms=poll_after,
        ttl_ms=ttl,
        cancellable=allowed,
        cancel_settle_ms=settle,
        polls=polls,
        callback=callback,
        watch=watch[0],
        watch_heartbeat_ms=watch[1],
    )


def read_case_lives(
    r: Reader,
    raw_cases: Any,
    path: Path,
    cases: tuple[Case, ...],
    ctx: StepContext,
    skills_task: Task,
) -> tuple[Case, ...]:
    """*cases* (a task skill's invoke's, read from *raw_cases* at *path*) with the life each
    one's ``task_life:`` scripts: a task as :func:`read_task` reads the skill's
    (*skills_task*), whose ``callback:`` it takes when it gives none (a receiver the
    consumer names is the same whichever life its task lives); problems recorded."""
    if not isinstance(raw_cases, list):
        return cases
    read = []
    for case in cases:
        raw = raw_cases[case.index]
        if not isinstance(raw, dict) or "task_life" not in raw:
            read.append(case)
            continue
        where = (*path, case.index, "task_life")
        value = raw["task_life"]
        life = read_task(r, value, where, ctx)
        if value is None:
            r.bad(where, "a task: a mapping with life:", "null")
        elif life is not None and not starts_task([case.sequence]):
            r.bad(
                where,
                "a case that submits the task its task_life: scripts",
                f"{case.label}, whose steps have no task: submit",
                "add the step {task: submit} to the case",
                at_key=True,
            )
        if life is not None and "callback" not in value:
            life = dataclasses.replace(life, callback=skills_task.callback)
        read.append(dataclasses.replace(case, task=life))
    return tuple(read)


def _unreached(
    r: Reader,
    on: tuple[str, ...],
    life: tuple[TaskPhase, ...],
    cancellable: tuple[str, ...],
    path: Path,
) -> None:
    """A warning for each status ``callback: on:`` pushes that the task never reaches (its
    life has no such phase, and ``cancelled`` needs one or an allowed cancel): a push that
    cannot happen is likely a typo for one that can."""
    reached = {phase.status for phase in life}
    if cancellable:
        reached.add("cancelled")
    for status in on:
        if status not in reached:
            r.warn(
                path,
                f"statuses the task reaches: {listed(sorted(reached - {'submitted'}))}",
                f"{status!r}, which its life never reaches",
                "nothing is ever pushed for it; keep it only if you mean that",
            )


def starts_task(sequences: Iterable[Sequence]) -> bool:
    """Whether some step of *sequences* (or an outcome of one) is ``task: submit``: a task
    skill's invoke with none could never start its task."""
    return any(_submits(step) for sequence in sequences for step in sequence.steps)


def _submits(step: Step) -> bool:
    return step.task == "submit" or any(_submits(choice.step) for choice in step.choices)


def _duration(
    r: Reader, raw: dict[str, Any], key: str, path: Path, default: int, maximum: int
) -> int | None:
    if key not in raw:
        return default
    return read_duration(r, raw[key], (*path, key), minimum=1, maximum=maximum)


def _watch(r: Reader, value: Any, path: Path) -> tuple[bool, int] | None:
    """``watch:``: ``true`` (the default), ``false``, or ``{heartbeat: DURATION}`` (watched,
    with that heartbeat): whether the status URL answers a stream, and its heartbeat."""
    heartbeat = _DEFAULTS.watch_heartbeat_ms
    if isinstance(value, dict):
        if not r.keys(value, path, WATCH_KEYS):
            return None
        if "heartbeat" in value:
            read = read_duration(
                r, value["heartbeat"], (*path, "heartbeat"), minimum=1, maximum=r.max_delay_ms
            )
            if read is None:
                return None
            heartbeat = read
        return True, heartbeat
    watched = r.boolean(value, path, "true, false, or {heartbeat: DURATION}")
    return None if watched is None else (watched, heartbeat)


def _cancel(r: Reader, value: Any, path: Path) -> tuple[tuple[str, ...], int] | None:
    """``cancel: {allowed: [...], settle: DURATION}``: the statuses a cancel is accepted in,
    and how long it settles; the defaults for what is left out."""
    allowed, settle = _DEFAULTS.cancellable, _DEFAULTS.cancel_settle_ms
    if value is None:
        return allowed, settle
    raw = r.mapping(value, path, "{allowed: [STATUS, ...], settle: DURATION}")
    if raw is None or not r.keys(raw, path, CANCEL_KEYS):
        return None
    ok = True
    if "allowed" in raw:
        statuses = raw["allowed"]
        if not isinstance(statuses, list):
            r.bad(
                (*path, "allowed"),
                f"a list of live statuses ({listed(LIVE_STATUSES, 'and')}; [] for never)",
                describe(statuses),
            )
            return None
        found: list[str] = []
        for i, status in enumerate(statuses):
            where = (*path, "allowed", i)
            if status in TERMINAL_STATUSES:
                r.bad(
                    where,
                    f"a live status: {listed(LIVE_STATUSES)}",
                    f"{status!r}, a terminal status",
                    "a task that has ended cannot be cancelled (a cancel then gets 409)",
                )
                ok = False
            elif not r.among(status, where, LIVE_STATUSES):
                ok = False
            elif status not in found:
                found.append(status)
        allowed = tuple(found)
    if "settle" in raw:
        settled = read_duration(r, raw["settle"], (*path, "settle"), maximum=r.max_delay_ms)
        if settled is None:
            ok = False
        else:
            settle = settled
    return (allowed, settle) if ok else None


def _life(r: Reader, value: Any, path: Path, ctx: StepContext) -> tuple[TaskPhase, ...] | None:
    if not isinstance(value, list) or not value:
        r.bad(
            path,
            "a list of phases, the last terminal: [{status: working, for: 2s}, "
            "{status: completed, json: ...}]",
            describe(value),
        )
        return None
    before = len(r.problems)
    phases = [_phase(r, item, (*path, i), ctx) for i, item in enumerate(value)]
    last = len(value) - 1
    for i, item in enumerate(value):
        status = item.get("status") if isinstance(item, dict) else None
        if status not in TASK_STATUSES:
            continue  # (reported by its phase)
        where = (*path, i, "status")
        if status in TERMINAL_STATUSES and i != last:
            r.bad(
                where,
                "a terminal status (completed, failed, cancelled) in the last phase only",
                f"{status!r} in phase {i + 1} of {len(value)}",
                "a task ends once: the phases after it would never be reached",
            )
        elif status not in TERMINAL_STATUSES and i == last:
            r.bad(
                where,
                "a terminal status in the last phase: completed, failed or cancelled",
                f"{status!r}, a live status",
                "say how it ends: add {status: completed} (or failed, with its error)",
            )
    if len(r.problems) > before:
        return None
    return tuple(phase for phase in phases if phase is not None)


def _phase(r: Reader, value: Any, path: Path, ctx: StepContext) -> TaskPhase | None:
    raw = r.mapping(value, path, "a phase: {status: STATUS, for: DURATION, ...}")
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, PHASE_KEYS, required=("status",))
    if "status" not in raw or not r.among(raw["status"], (*path, "status"), TASK_STATUSES):
        return None
    status: str = raw["status"]
    terminal = status in TERMINAL_STATUSES
    duration, polls = _length(r, raw, path, status)
    progress = _progress(r, raw, path, lasts="for" in raw or "polls" in raw)
    poll_after = None
    if "poll_after" in raw:
        if terminal:
            _not_here(
                r,
                path,
                "poll_after",
                "live phases",
                status,
                "a terminal answer has no Retry-After: polling is over",
            )
        else:
            poll_after = read_duration(
                r, raw["poll_after"], (*path, "poll_after"), minimum=1, maximum=r.max_delay_ms
            )
    reply = _outcome(r, raw, path, status, ctx)
    expects: tuple[Condition, ...] | None = ()
    if "expects" in raw:
        if status != INPUT:
            _not_here(
                r,
                path,
                "expects",
                "an input_required phase",
                status,
                "it is what the consumer's input must meet",
            )
        else:
            expects = read_when(r, raw["expects"], (*path, "expects"), methods=("POST",))
    if len(r.problems) > before or expects is None:
        return None
    return TaskPhase(
        status=status,
        where=r.position(path),
        duration_ms=duration,
        polls=polls,
        progress=progress,
        poll_after_ms=poll_after,
        reply=reply,
        expects=expects,
    )


def _length(
    r: Reader, raw: dict[str, Any], path: Path, status: str
) -> tuple[int | None, int | None]:
    """The phase's ``for:`` (ms) and ``polls:``, each None when not given: a live phase has
    one of them, but ``input_required`` (input ends it) and a terminal one (it never ends)."""
    given = [key for key in ("for", "polls") if key in raw]
    if len(given) == 2:
        r.bad(
            (*path, "polls"),
            "for: or polls: (a phase lasts a time, or a number of polls)",
            "both",
            "keep one",
            at_key=True,
        )
        return None, None
    if status in TERMINAL_STATUSES or status == INPUT:
        for key in given:
            why = (
                "the consumer's input ends it (POST to the status URL)"
                if status == INPUT
                else "a task's last phase lasts until its ttl"
            )
            r.bad(
                (*path, key),
                f"no {key}: on {'an' if status == INPUT else 'a'} {status} phase",
                f"{key}: {raw[key]}",
                why,
                at_key=True,
            )
        return None, None
    if not given:
        r.bad(
            path,
            "for: DURATION or polls: N (how long the phase lasts)",
            f"a {status} phase with neither: its states never end",
            "write for: 2s, or polls: 3 (only input_required waits without either)",
        )
        return None, None
    if given == ["for"]:
        return read_duration(r, raw["for"], (*path, "for"), minimum=1, maximum=MAX_SPAN_MS), None
    return None, r.integer(raw, "polls", path, default=1, minimum=1, maximum=MAX_POLLS)


def _progress(r: Reader, raw: dict[str, Any], path: Path, *, lasts: bool) -> tuple[int, ...]:
    """The percentages a phase reports in turn, whole numbers rising within 0..100."""
    if "progress" not in raw:
        return ()
    where = (*path, "progress")
    value = raw["progress"]
    if not lasts:
        r.bad(
            where,
            "progress on a phase with for: or polls: (its values are spread over them)",
            f"progress on a phase without either ({raw.get('status')})",
            at_key=True,
        )
        return ()
    if not isinstance(value, list) or not value:
        r.bad(where, "a list of percentages, rising: [10, 40, 80]", describe(value))
        return ()
    values: list[int] = []
    for i, item in enumerate(value):
        number = r.number_at(item, (*where, i), minimum=0, maximum=100)
        if number is None:
            return ()
        if values and number <= values[-1]:
            r.bad(
                (*where, i),
                f"a percentage above the one before ({values[-1]})",
                describe(item),
                "progress rises: list the values in the order the task reports them",
            )
            return ()
        values.append(number)
    return tuple(values)


def _outcome(
    r: Reader, raw: dict[str, Any], path: Path, status: str, ctx: StepContext
) -> Reply | None:
    """A completed phase's result (``json:``, as an invoke's; default the skill's default
    result), a failed one's error (``error:`` and its overrides, as a step's); None else."""
    if "json" in raw and status != "completed":
        hint = "a failed task's error goes in error:" if status == "failed" else ""
        _not_here(r, path, "json", "a completed phase (its result)", status, hint)
    given = [key for key in ERROR_KEYS if key in raw]
    if given and status != "failed":
        _not_here(r, path, given[0], "a failed phase (its error)", status, "")
    if status == "completed":
        if "json" not in raw:
            return Reply.json(200, {"skill": ctx.error_context.skill_id, "result": "ok"})
        return _fixed(r, {"json": raw["json"]}, path, "json", ctx)
    if status != "failed":
        return None
    if "error" not in raw:
        r.bad(
            path,
            "the key 'error' (the category it failed with, as a step's error:)",
            "it missing",
            "error: EXECUTION_TIMEOUT, say, with status_code, message, details or retry",
        )
        return None
    step = {key: raw[key] for key in given if key != "status_code"}
    if "status_code" in raw:
        status_code = _status_code(r, raw, path)
        if status_code is None:
            return None
        step["status"] = status_code
    return _fixed(r, step, path, "error", ctx)


def _status_code(r: Reader, raw: dict[str, Any], path: Path) -> int | None:
    """A failed phase's ``status_code``, checked here so that a problem names this key (the
    step reader calls it ``status``, which is the task's status in a phase)."""
    code, value = raw["error"], raw["status_code"]
    if code not in catalog.CODES or not catalog.CATEGORIES[code].statuses:
        return None  # (the step reader says what is wrong with the code)
    problem = None
    if isinstance(value, int) and not isinstance(value, bool):
        problem = catalog.status_problem(code, value)
        if problem is None:
            return value
    allowed = " or ".join(str(s) for s in catalog.CATEGORIES[code].statuses)
    r.bad((*path, "status_code"), f"HTTP {allowed} for {code}", describe(value), problem or "")
    return None


def _fixed(r: Reader, step: dict[str, Any], path: Path, key: str, ctx: StepContext) -> Reply | None:
    """*step* read as a step's answer, which must not depend on a request (no ``{{...}}``):
    a task's result and error are the same for every poll."""
    read = read_step(r, step, path, ctx)
    if read is None:
        return None
    if read.reply.template is not None:
        r.bad(
            (*path, key),
            "a fixed answer, without {{...}} placeholders",
            "placeholders",
            "a task's result or error is the same for every poll (no request to read)",
        )
        return None
    return read.reply


def _not_here(r: Reader, path: Path, key: str, where: str, status: str, hint: str) -> None:
    r.bad((*path, key), f"{key}: only on {where}", f"{key}: on a {status} phase", hint, at_key=True)
