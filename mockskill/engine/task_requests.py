"""Requests to a task's status URL: a poll (``GET``), a cancel (``DELETE``, ``POST
.../cancel``), an input (``POST`` with a JSON object), decided (docs/tasks.md).

As at the skill's invoke, ``Mockskill-Error`` answers first, then a caller without the
credentials the skill ``requires:`` is refused (401, 403); neither touches the task.
The id is read (:func:`.task_ids.read`): one mockskill did not hand out
(malformed, made up, another server's) is answered 404 ``TASK_NOT_FOUND`` with no
store round trip, and so is an input that is not a JSON object (422). An input's
*fits* (the input phases whose ``expects:`` its body meets) are worked out before the
store touches the task (:class:`~.store.Touch`: a poll counted, a cancel or an input
logged); the answer follows from its record: the task's state is :func:`.tasks.view`'s,
and an input counts only in a phase it fits (else 422 naming what the current phase's
``expects:`` found wanting, or 409 when the task awaits no input). The
request is the session's the id names, whatever header it carries. A poll of a
skill with ``polls:`` plays the step of its poll number (``task: status``
answers the task; any other step is played as on any endpoint). A poll answered with
the task as it stands is served by the engine on a kept path (:class:`Poll`,
:class:`Served`); everything else is decided here whole.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from ..scenario.model import Reply
from . import auth, callbacks, conditions, task_ids, task_watch, tasks
from .actions import Urls
from .callbacks import Notice
from .choosing import Chosen, Decided, poll_step
from .digests import KeyedDigest
from .entries import escaped, shorten
from .incoming import Incoming
from .matching import RoutingTable, Target, task_path_parts, task_request
from .pending import Later, Pending
from .replies import ERROR_HEADER, exhausted_reply, forced_reply
from .store import NeedAnswer, TaskRecord, Touch
from .task_skills import DEFAULT_MAX_TASKS, TaskSkill, journalled, not_found

_new = tuple.__new__
_new_poll = object.__new__
_ERROR = ERROR_HEADER.lower()  # (the request's headers, as read: lower case)


def decide(
    request: Incoming,
    started: float,
    session: str,
    table: RoutingTable,
    target: Target,
    urls: Urls,
) -> Later[Decided]:
    """What *request* to *target* (a status URL, matched on *table*) comes to; *session* is
    the one its header names, its entry's when the id names none."""
    method, path = request.method, request.path
    matched: tuple[str, str] | None
    if method == "GET" and path[-1] != "/":  # a poll (most requests here): the last segment
        matched = (path[path.rindex("/") + 1 :], "poll")
    else:
        matched = task_request(method, task_path_parts(path))
        assert matched is not None  # (matched as a status URL)
    task_id, action = matched
    tasked = target.tasked
    keyed = table.task_ids
    assert keyed is not None  # (set with the table's generations)
    read = None
    if tasked is not None:  # kept for the next poll (see _read): most polls find it here
        read = table.task_reads.get((tasked.skill, task_id))
        if read is None and tasked.lives:  # a task a case submitted lives that case's life
            tasked, read = _read_lives(table, task_id, keyed, tasked)
        elif read is None:
            read = _read(table, task_id, keyed, tasked.skill)
    # An id never handed out is journalled in the session it names, if it names one: the
    # consumer that built it is graded in its own session (status-url-ignored).
    owner = read[0] if read is not None else task_ids.claimed_session(task_id) or session
    known = read is not None and tasked is not None
    # As its invoke: Mockskill-Error answers first, then the skill's requires: refuses a
    # caller without its credentials (neither touches the task: no poll counted).
    code = request.headers.get(_ERROR)
    if code is not None:
        forced = urls.fill(forced_reply(target, code))
        decided = Decided(started, owner, table, target, urls, forced, True)
        decided.task = journalled(action, task_id, known=known, served=False)
        return decided
    skill = target.skill
    if skill is not None and skill.requires is not None:
        refused = auth.check(request, skill.requires, table.credentials, target.context)
        go_on = partial(
            _admitted, request, started, owner, table, target, tasked, urls, read, matched
        )
        if isinstance(refused, Pending):  # a token the store may know: judged on its answer
            return refused.then(go_on)
        return go_on(refused)
    return _admitted(request, started, owner, table, target, tasked, urls, read, matched, None)


def _admitted(
    request: Incoming,
    started: float,
    owner: str,
    table: RoutingTable,
    target: Target,
    tasked: TaskSkill | None,
    urls: Urls,
    read: tuple[str, int] | None,
    matched: tuple[str, str],
    refused: Reply | None,
) -> Later[Decided]:
    """:func:`decide` once the caller's credentials were judged (*refused*: the 401 or 403
    that answers it; None: let in): the task's id read (*read*, of a task of life *tasked*)
    decides the rest."""
    task_id, action = matched
    known = read is not None and tasked is not None
    if refused is not None:
        decided = Decided(started, owner, table, target, urls, urls.fill(refused), False)
        decided.task = journalled(action, task_id, known=known, served=False)
        return decided
    if read is None or tasked is None:
        refused = urls.fill(not_found(target.skill_id, task_id))
        decided = Decided(started, owner, table, target, urls, refused, False)
        decided.task = journalled(action, task_id, known=False, served=False)
        return decided
    number = read[1]
    if action == "poll" and tasked.task.watch:
        fmt = task_watch.watch_format(request.headers.get("accept"))
        if fmt is not None:  # a watch: the task's changes as a stream (task_watch.py)
            last = request.headers.get("last-event-id")
            watch = task_watch.TaskWatch(
                owner,
                number,
                task_id,
                tasked,
                urls,
                fmt,
                0.0,
                None if last is None else shorten(escaped(last)),
                task_watch.resumed_after(tasked.task, last),
            )
            decided = Decided(started, owner, table, target, urls, None, False)
            look = task_watch.look(watch)
            return _new(Pending, (look, partial(_watched, decided, watch)))
    if action == "poll":  # one the engine may serve on its kept path (see Poll)
        need = _new(Touch, (owner, number, action, tasked.keep_ms, tasked.skill, ()))
        # Its slots set here, not through an __init__: a call less on every poll.
        poll = _new_poll(Poll)
        poll.started, poll.session, poll.table, poll.target = started, owner, table, target
        poll.urls, poll.tasked, poll.task_id, poll.number = urls, tasked, task_id, number
        return _new(Pending, (need, poll))
    decided = Decided(started, owner, table, target, urls, None, False)
    failures: dict[int, list[str]] = {}
    fits: tuple[int, ...] = ()
    if action == "input":
        read_input = _read_input(tasked, task_id, request)
        if isinstance(read_input, Reply):  # not an object: never logged, the task goes on
            decided.reply = urls.fill(read_input)
            decided.task = journalled(action, task_id, known=True, served=False)
            return decided
        failures = read_input
        fits = tuple(index for index, failed in failures.items() if not failed)
    need = _new(Touch, (owner, number, action, tasked.keep_ms, tasked.skill, fits))
    touched = partial(_touched, decided, tasked, task_id, number, action, fits, failures)
    return _new(Pending, (need, touched))


MAX_BUILT_PATH = 4096
"""Characters of an unmatched path looked through for a task id (a longer one is not)."""
_BUILT_ACTIONS = {"GET": "poll", "HEAD": "poll", "DELETE": "cancel"}


def built(method: str, path: str) -> tuple[str, dict[str, Any]] | None:
    """For a request that matched nothing: when a segment of its *path* is a well-formed
    task id (``/tasks/<id>``, a URL the consumer built instead of following ``Location``),
    the session that id names and the journal's ``Entry.task`` saying so (``known``
    False: the audit's ``status-url-ignored``); None otherwise."""
    if len(path) > MAX_BUILT_PATH or "." not in path:
        return None
    for segment in path.split("/"):
        owner = task_ids.claimed_session(segment) if segment.count(".") == 2 else None
        if owner is not None:
            action = _BUILT_ACTIONS.get(method, "cancel" if path.endswith("/cancel") else "input")
            return owner, journalled(action, segment, known=False, served=False)
    return None


MAX_KEPT_READS = DEFAULT_MAX_TASKS
"""Task ids whose reading a table keeps: one per live task a server holds by default, so
that polls walking them all read each id once (beyond: read anew, then kept)."""


def _read(
    table: RoutingTable, task_id: str, keyed: KeyedDigest, skill: str
) -> tuple[str, int] | None:
    """What *task_id* reads at *skill*'s status URL (:func:`.task_ids.read`), not kept on
    *table* (:func:`decide` looks there first, by skill and id: an id is ours at its own
    skill's URL only); kept for the next poll when it is one of ours there (what a
    consumer makes up is read anew: it fills nothing)."""
    if len(task_id) > task_ids.MAX_TASK_ID:  # never one of ours
        return None
    reads = table.task_reads
    key = (skill, task_id)
    read = task_ids.read(task_id, keyed, skill)
    if read is not None:
        if len(reads) >= MAX_KEPT_READS:
            reads.clear()  # atomic, unlike evicting one: handle() runs on threads
        reads[key] = read
    return read


def _read_lives(
    table: RoutingTable, task_id: str, keyed: KeyedDigest, tasked: TaskSkill
) -> tuple[TaskSkill, tuple[str, int] | None]:
    """The life *task_id* was submitted with, *tasked*'s own or one of its cases'
    (``task_life:``), and what it reads there; *tasked* and None when it is none of
    theirs. Kept reads first: a poll of a case's task computes no mac it has not."""
    reads = table.task_reads
    for life in tasked.lives:
        read = reads.get((life.skill, task_id))
        if read is not None:
            return life, read
    for life in (tasked, *tasked.lives):
        read = _read(table, task_id, keyed, life.skill)
        if read is not None:
            return life, read
    return tasked, None


def _touched(
    decided: Decided,
    tasked: TaskSkill,
    task_id: str,
    number: int,
    action: str,
    fits: tuple[int, ...],
    failures: dict[int, list[str]],
    answer: NeedAnswer,
) -> Decided:
    """*decided*, answered once the store touched its task (*answer*: its record, or None);
    an input's *fits* and, per input phase, the conditions its body failed (*failures*)."""
    urls = decided.urls
    if not isinstance(answer, TaskRecord) or answer.skill != tasked.skill:
        if answer is None:  # handed out (its id says so), and forgotten since: gone
            decided.reply = urls.fill(_expired(tasked, task_id))
            decided.task = journalled(action, task_id, known=True, served=False, expired=True)
        else:  # another skill's task: not at this skill's URL
            decided.reply = urls.fill(not_found(tasked.skill_id, task_id))
            decided.task = journalled(action, task_id, known=True, served=False)
        return decided
    record = answer
    task = tasked.task
    if task.callback is not None:  # the courier finds what this request changed
        touched = Notice(decided.session, number, task_id, tasked, record, decided.urls)
        # (made whole from what the submit kept: a replica that did not submit it follows too)
        decided.callback = callbacks.followed(touched, decided.table.callback_hosts, task.callback)
    view = tasks.view(task, record)
    if view.expired:
        decided.reply = urls.fill(_expired(tasked, task_id))
        decided.task = journalled(
            action, task_id, known=True, served=False, view=view, expired=True
        )
        return decided
    if action == "poll":
        return _polled(decided, tasked, task_id, record, view)
    # A cancel or an input: judged by the state the task was in when it came.
    code = tasks.refusal(task, record, action, fits)
    if code == tasks.INPUT_INVALID:  # awaiting another input: what its expects: wanted
        reply = tasked.refused(code, task_id, details={"failed": failures.get(view.phase, [])})
    elif code is not None:  # logged, and counting for nothing (the life says so)
        reply = tasked.refused(code, task_id, view)
    elif action == "cancel":  # cancelling (202), or cancelled at once (settle 0: 200)
        status = 200 if view.status == "cancelled" else 202
        reply = tasked.reply(status, view, task_id, record.submitted_ms)
    else:  # an input: the task goes on
        reply = tasked.reply(202, view, task_id, record.submitted_ms)
    decided.reply = urls.fill(reply)
    decided.task = journalled(action, task_id, known=True, served=code is None, view=view)
    if code is None:  # it counted: a watch of the task plays what follows, at once
        decided.touched = (decided.session, number, record)
    return decided


Served = tuple[tasks.TaskView, float, "int | None", int]
"""A poll whose answer is the task as it stands (:meth:`Poll.served`), what the engine's
kept path writes and journals: the task's view, when it was submitted (epoch ms), the
``polls:`` step played (a ``task: status``; None without ``polls:``) and the poll's number
(counted from 0, its journal entry's position). A plain tuple: read unpacked."""


class Poll:
    """The rest of a poll once the store touched its task: called with the store's answer,
    the general path (:func:`_touched`); :meth:`served` tells the engine whether the answer
    is the task as it stands, which it serves on a kept path (``engine.Engine._kept_poll``).
    (Its Decided is made only for the general path: a kept poll needs none.)"""

    __slots__ = ("number", "session", "started", "table", "target", "task_id", "tasked", "urls")
    started: float
    session: str
    table: RoutingTable
    target: Target
    urls: Urls
    tasked: TaskSkill
    task_id: str
    number: int

    def __call__(self, answer: NeedAnswer) -> Decided:
        decided = Decided(
            self.started, self.session, self.table, self.target, self.urls, None, False
        )
        return _touched(decided, self.tasked, self.task_id, self.number, "poll", (), {}, answer)

    def served(self, answer: NeedAnswer) -> Served | None:
        """What the poll answered by *answer* (the store's) serves when it is the task as
        it stands: a task of this skill, not expired, no callbacks (the courier is told of
        each poll on the general path), and no ``polls:`` or a ``task: status`` step with
        no delay at this poll's number; None: anything else (the general path answers it)."""
        tasked = self.tasked
        # (The record's fields by index: a NamedTuple's attributes are slow lookups.)
        if type(answer) is not TaskRecord or answer[0] != tasked.skill:
            return None
        task = tasked.task
        if task.callback is not None:
            return None
        number = answer[2] - 1
        index = None
        polls = task.polls
        if polls is not None:
            index = polls.step_at(number)
            if index is None:
                return None
            step = polls.steps[index]
            if step.task != "status" or step.delay is not None or step.ran is not None:
                return None
        view = tasks.view(task, answer)
        if view[6]:  # expired
            return None
        return (view, answer[1], index, number)


def _polled(
    decided: Decided, tasked: TaskSkill, task_id: str, record: TaskRecord, view: tasks.TaskView
) -> Decided:
    """A poll's answer: the task (200), or its ``polls:`` step of this poll's number."""
    urls = decided.urls
    number = record.polls - 1
    polls = tasked.task.polls
    if polls is not None:
        index = polls.step_at(number)
        target = decided.target
        assert isinstance(target, Target)
        if index is None:  # its polls: are played out, and end with fail
            reply = exhausted_reply(target, decided.session, number)
            decided.chosen = Chosen(position=number, reply=urls.fill(reply))
            decided.task = journalled(
                "poll", task_id, known=True, served=False, view=view, poll=number
            )
            return decided
        step = polls.steps[index]
        if step.task != "status":  # an ordinary step: played as on any endpoint
            decided.chosen = poll_step(decided, step, index, number)
            decided.task = journalled(
                "poll", task_id, known=True, served=False, view=view, poll=number
            )
            return decided
        chosen = Chosen(step, index, number)
    else:
        chosen = Chosen(position=number)
    chosen.reply = urls.fill(tasked.reply(200, view, task_id, record.submitted_ms))
    decided.chosen = chosen
    decided.task = journalled("poll", task_id, known=True, served=True, view=view, poll=number)
    return decided


def _watched(decided: Decided, watch: task_watch.TaskWatch, answer: NeedAnswer) -> Decided:
    """*decided*, a watch, once the store read its task (*answer*): the watch to play, or
    the answer a poll would get when the task is gone (404 ``TASK_EXPIRED``)."""
    tasked, task_id = watch.tasked, watch.task_id
    if not isinstance(answer, TaskRecord) or answer.skill != tasked.skill:
        return _touched(decided, tasked, task_id, watch.number, "watch", (), {}, answer)
    view = tasks.view(tasked.task, answer)
    if view.expired:
        return _touched(decided, tasked, task_id, watch.number, "watch", (), {}, answer)
    decided.watch = dataclasses.replace(watch, submitted_ms=answer.submitted_ms, record=answer)
    decided.task = journalled("watch", task_id, known=True, served=True, view=view)
    decided.task["poll_after_ms"] = None  # a watch advises no wait: it shows the changes
    return decided


def _read_input(tasked: TaskSkill, task_id: str, request: Incoming) -> Reply | dict[int, list[str]]:
    """An input read against each input phase's ``expects:``: per phase (its index into
    the life), the conditions its body failed (none: it fits that phase); or 422
    ``TASK_INPUT_INVALID`` when it is not a JSON object."""
    facts = conditions.Facts(request)
    body = facts.json()
    if not isinstance(body, dict):
        why = "it is not an object"
        if isinstance(body, conditions.UnreadableBody):
            why = body.why
        unread = [f"the body: {why}; a task's input is a JSON object"]
        return tasked.refused(tasks.INPUT_INVALID, task_id, details={"failed": unread})
    return {
        index: [reason for c in expects if (reason := conditions.failed(c, facts))]
        for index, expects in tasked.inputs
    }


def _expired(tasked: TaskSkill, task_id: str) -> Reply:
    return tasked.refused("TASK_EXPIRED", task_id, details={"ttl_ms": tasked.task.ttl_ms})
