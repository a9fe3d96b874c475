"""A task skill as the engine serves it: what is known of its ``task:`` at load, and its
answers (the 202 of a submit, the task as its status URL reports it, the refusals).

:class:`TaskSkill` is made once per skill when its routing table is built: the
store's name of the skill, how long the store keeps a task, the conditions an
input is checked against, the context its errors name. The answers are pure:
the task's state comes from :func:`.tasks.view` (a function of the scenario's
``task:`` and the store's record), its JSON and headers from :mod:`.tasks`'s wire
format (docs/tasks.md); URLs are written with ``{base_url}`` and filled per
request like every answer's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, Context
from ..scenario.model import Case, Reply, Skill, Task, TaskPhase
from ..scenario.when import Condition
from . import task_ids, task_wire, tasks
from .digests import KeyedDigest
from .entries import escaped, shorten

DEFAULT_MAX_TASKS = 20_000
"""The live tasks a server holds at most unless told (``--max-tasks``): tasks not yet
forgotten, each well under 2 KB in memory."""
EXPIRED_KEPT_MS = 1_000
"""How long past its time-to-live a task is still kept: a margin, no more (a task the store
forgot is answered ``TASK_EXPIRED`` as well: its id says mockskill handed it out)."""
UNSCRIPTED_FAILURE = "EXECUTION_TIMEOUT"
"""The error a ``failed`` phase with none scripted reports (:mod:`.task_wire` writes it)."""
MAX_SHOWN_ID = 120
"""The most of a task id a journal entry keeps (a consumer's made-up id is its own text)."""


@dataclass(frozen=True)
class TaskSkill:
    """A skill's ``task:``, with what every request of it reads, made once at load."""

    task: Task
    skill_id: str
    skill: str
    """The skill as the store's records name it (scenario-qualified: a record of another
    scenario's skill of the same id is not this skill's task)."""
    keep_ms: int
    """How long a Submit or Touch asks the store to keep a task from now: the most its life
    can still take (every timed phase, the cancel's settle), its time-to-live, and
    :data:`EXPIRED_KEPT_MS`. A phase counted by polls, or waiting for input, lasts only while
    the consumer polls it: each poll keeps it this long again."""
    submit_keep_ms: int
    """How long a Submit asks the store to keep a new task (:func:`.tasks.keep_ms_at_submit`,
    and :data:`EXPIRED_KEPT_MS`)."""
    inputs: tuple[tuple[int, tuple[Condition, ...]], ...]
    """Each ``input_required`` phase (its index into ``task.life``) and its ``expects:``,
    in order."""
    context: Context
    """What its errors name (its status URLs)."""
    failed_codes: tuple[str | None, ...] = ()
    """Per phase of its life, the code of a ``failed`` phase's error (None for the others):
    the code a failed task's answers are journalled with (``Entry.error_code``, which the
    audit's coverage counts by category)."""
    lives: tuple[TaskSkill, ...] = ()
    """The lives its invoke's cases script (``task_life:``), each a TaskSkill of its own
    name (:meth:`of_case`): a task id's mac names the life it was submitted with, so its
    status URL tells which one a task lives."""

    @classmethod
    def of(cls, skill: Skill) -> TaskSkill | None:
        """*skill*'s, or None: it is no task skill."""
        if skill.task is None:
            return None
        lives = tuple(
            cls._made(skill, case.task, f"#{case.index}")
            for case in skill.invoke_cases
            if case.task is not None
        )
        return dataclasses.replace(cls._made(skill, skill.task, ""), lives=lives)

    @classmethod
    def of_case(cls, skill: Skill, case: Case) -> TaskSkill | None:
        """The task skill a case of *skill*'s invoke submits to: its own life's when it
        scripts one (``task_life:``), else the skill's (None: no task skill)."""
        if case.task is None or skill.task is None:
            return cls.of(skill)
        return cls._made(skill, case.task, f"#{case.index}")

    @classmethod
    def _made(cls, skill: Skill, task: Task, suffix: str) -> TaskSkill:
        """*skill*'s with life *task*, named in the store with *suffix* (a case's)."""
        timed = sum(phase.duration_ms or 0 for phase in task.life)
        keep_ms = timed + task.cancel_settle_ms + task.ttl_ms + EXPIRED_KEPT_MS
        submit_keep_ms = tasks.keep_ms_at_submit(task) + EXPIRED_KEPT_MS
        inputs = tuple(
            (index, p.expects) for index, p in enumerate(task.life) if p.status == "input_required"
        )
        context = Context(skill.id, f"{BASE_URL}/skills/{skill.id}/tasks")
        qualified = f"{skill.scenario}/{skill.id}{suffix}"
        failed_codes = tuple(_failed_code(phase) for phase in task.life)
        return cls(
            task, skill.id, qualified, keep_ms, submit_keep_ms, inputs, context, failed_codes
        )

    def submitted(
        self, session: str, number: int, at_ms: float, keyed: KeyedDigest
    ) -> tuple[Reply, tasks.TaskView, str]:
        """The 202 of task *number* of *session*, submitted at *at_ms*: its reply (with
        ``{base_url}``), its state then, and its id."""
        task_id = task_ids.make(session, number, keyed, self.skill)
        view = tasks.view(self.task, tasks.submitted_record(self.skill, at_ms))
        return self.reply(202, view, task_id, at_ms), view, task_id

    def reply(self, status: int, view: tasks.TaskView, task_id: str, submitted_ms: float) -> Reply:
        """The task as it is (*view*), answered with *status* (with ``{base_url}``): a
        poll's 200, a submit's, a cancel's or an input's 202 (with ``Location``). A failed
        task's carries its error's code (:attr:`failed_codes`), as an error answer does."""
        reply = task_wire.reply(
            self.task,
            view,
            skill_id=self.skill_id,
            task_id=task_id,
            submitted_ms=submitted_ms,
            status=status,
        )
        if view.status == "failed":
            return dataclasses.replace(reply, error_code=self.failed_codes[view.phase])
        return reply

    def refused(
        self,
        code: str,
        task_id: str,
        view: tasks.TaskView | None = None,
        details: dict[str, Any] | None = None,
    ) -> Reply:
        """A request on task *task_id* refused with *code* (``TASK_...``, the catalog's), in
        the unified body; *view*: the task as it is, for one handed out."""
        return task_wire.refused(
            code,
            task_id=task_id,
            skill_id=self.skill_id,
            task=self.task,
            view=view,
            details=details,
        )


def _failed_code(phase: TaskPhase) -> str | None:
    """The code of *phase*'s error when it is ``failed`` (its scripted error's, or
    ``EXECUTION_TIMEOUT``: what the answer reports when none is scripted)."""
    if phase.status != "failed":
        return None
    scripted = phase.reply
    if scripted is None or scripted.error_code is None:
        return UNSCRIPTED_FAILURE
    return scripted.error_code


def not_found(skill_id: str | None, task_id: str) -> Reply:
    """404 ``TASK_NOT_FOUND`` for *task_id* (unknown, malformed, another server's, or not a
    task skill's), at skill *skill_id*'s status URLs."""
    return task_wire.refused("TASK_NOT_FOUND", task_id=task_id, skill_id=skill_id)


def over_cap(context: Context, limit: int) -> Reply:
    """503 ``ENDPOINT_UNREACHABLE``, with retry advice: the server holds *limit* live tasks."""
    message = f"The provider runs its limit of {limit} tasks: retry later"
    details = {"max_tasks": limit}
    return Reply.error(
        catalog.render("ENDPOINT_UNREACHABLE", context, message=message, details=details)
    )


def shown_id(task_id: str) -> str:
    """*task_id* as journal entries and error bodies show it: bounded, printable."""
    return shorten(escaped(task_id), MAX_SHOWN_ID)


def journalled(
    action: str,
    task_id: str,
    *,
    known: bool,
    served: bool,
    view: tasks.TaskView | None = None,
    poll: int | None = None,
    expired: bool = False,
) -> dict[str, Any]:
    """What a request did to a task, as its journal entry keeps it (``Entry.task``)."""
    return {
        "id": task_id if known else shown_id(task_id),  # (one handed out is bounded)
        "action": action,
        "known": known,
        "expired": expired,
        "served": served,
        "status": None if view is None else view.status,
        "cancelling": False if view is None else view.cancelling,
        "progress": None if view is None else view.progress,
        "poll": poll,
        "poll_after_ms": None if view is None or not served else view.poll_after_ms,
        "terminal_at_ms": None if view is None else view.terminal_at_ms,
    }
