"""A task's life: its state at a moment, worked out from the scenario and the store's record.

No timer runs per task. The store keeps what happened to a task (:class:`~.store.TaskRecord`:
when it was submitted, how many polls it had, the cancels and inputs logged with their time
and the polls counted before each) and the scenario's ``task:`` (:class:`~.model.Task`)
says how it lives; :func:`view` is a pure function of the two, so every replica answering a
poll computes the same state (docs/tasks.md).

The life's clock:

- phase *k* begins when phase *k - 1* ends: after its ``for:`` time; after its ``polls:``
  count of polls, counted from when it began (a poll sees the phase while the polls counted,
  itself included, are at most that many: ``polls: 3`` answers three polls); or, for
  ``input_required``, when a valid input is logged. The last phase is terminal.
- ``progress`` values are spread evenly over their phase: value *i* of *n* from *i/n* of its
  time, or of its polls.
- A cancel counts only if the task's status at its time was one of ``cancel: allowed:`` (and
  only the first that counts does); the task then reports ``cancelling`` for ``settle`` while
  its life goes on. A terminal status the life reaches within the settle time (its end
  included) stands: the cancel lost the race. Else the task is ``cancelled`` when the settle
  ends (at once when ``settle`` is 0).
- An input counts only if the status at its time was ``input_required``, in a phase whose
  ``expects:`` its body meets (:attr:`~.store.TaskEvent.fits`, worked out by the engine when
  it came): a task with several input phases takes each its own input.
- A task ended at *T* is answered until *T* + ``ttl``; then it is expired.

The store keeps no poll's time (memory per task stays small), so where a ``polls:`` phase
meets a ``for:`` phase one moment is not known exactly. The rule is fixed, so that the
state is still one function of the record: the moments known are the submission and each
cancel or input logged (their time and the polls counted before them). A phase that follows
a ``polls:`` phase began at the last known moment before the poll that ended it; a ``polls:``
phase that follows a ``for:`` phase counts the polls from the last known moment before it
began; and a ``polls:`` phase does not end while a cancel settles (the settle wins). Lives
wholly on time, wholly on polls, or moved on by inputs, are exact.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

from ..scenario.model import TERMINAL_STATUSES, Task, TaskPhase
from .store import TaskEvent, TaskRecord

_new = tuple.__new__

__all__ = [
    "FINISHED",
    "INPUT_INVALID",
    "NOT_AWAITING_INPUT",
    "NOT_CANCELLABLE",
    "TaskView",
    "keep_ms",
    "keep_ms_at_submit",
    "refusal",
    "submitted_record",
    "view",
]

FINISHED = "TASK_FINISHED"
"""A cancel of a task already in a terminal status (409)."""
NOT_CANCELLABLE = "TASK_NOT_CANCELLABLE"
"""A cancel of a live task whose status is not one of ``cancel: allowed:`` (409)."""
NOT_AWAITING_INPUT = "TASK_NOT_AWAITING_INPUT"
"""An input to a task whose status is not ``input_required`` (409)."""
INPUT_INVALID = "TASK_INPUT_INVALID"
"""An input to a task awaiting one, whose body does not meet the current phase's
``expects:`` (422)."""


class TaskView(NamedTuple):
    """A task as it is at the record's ``now_ms``: what its status URL answers."""

    status: str
    """One of :data:`~.model.TASK_STATUSES`."""
    phase: int
    """Index into ``task.life``: the phase the life is in (for a task cancelled when its
    settle ended, the phase its life had reached)."""
    progress: int | None
    """The percentage reported (None: the phase scripts none)."""
    poll_after_ms: int | None
    """The ``Retry-After`` its answers advise, in ms; None on a terminal status."""
    cancelling: bool
    """A cancel counted and is settling (False once the task is terminal)."""
    terminal_at_ms: float | None
    """When it reached its terminal status (epoch ms); None: not yet."""
    expired: bool
    """Its time-to-live has run out: ``terminal_at_ms + ttl_ms <= now_ms``."""
    settles_at_ms: float | None
    """When its life ends if nothing disturbs it (epoch ms; the settle's end for a task
    cancelling, unless its life ends first); None: it waits for input or counts polls."""

    @property
    def terminal(self) -> bool:
        return self.terminal_at_ms is not None


class _Life:
    """The life walked forward through the record's moments: the phase reached, where it
    began (time and polls counted), and the cancel, if one counted."""

    __slots__ = (
        "begin_count",
        "begin_ms",
        "cancel_ms",
        "cancelled",
        "known",
        "phase",
        "task",
        "terminal_at",
    )

    def __init__(self, task: Task, record: TaskRecord) -> None:
        self.task = task
        self.phase = 0
        self.begin_ms = record.submitted_ms
        self.begin_count = 0
        self.cancel_ms: float | None = None
        self.cancelled = False
        self.terminal_at: float | None = None
        # The moments whose polls counted are known: (time, polls counted before it).
        self.known = [(record.submitted_ms, 0)] + [(e.at_ms, e.polls) for e in record.events]
        self._enter()

    @property
    def settle_end(self) -> float | None:
        if self.cancel_ms is None or self.terminal_at is not None:
            return None
        return self.cancel_ms + self.task.cancel_settle_ms

    @property
    def status(self) -> str:
        return "cancelled" if self.cancelled else self.task.life[self.phase].status

    def _enter(self) -> None:
        if self.task.life[self.phase].status in TERMINAL_STATUSES:
            self.terminal_at = self.begin_ms

    def _polls_at(self, at_ms: float) -> int:
        """The polls counted at the last known moment at or before *at_ms*."""
        return max(count for when, count in self.known if when <= at_ms)

    def _time_before(self, count: int) -> float:
        """The last known moment at which at most *count* polls were counted."""
        return max(when for when, counted in self.known if counted <= count)

    def _next(self, now_ms: float, polls: int) -> tuple[float, int] | None:
        """When and at what count the current phase ended, if it has by (*now_ms*, *polls*)."""
        phase = self.task.life[self.phase]
        if phase.duration_ms is not None:
            end_ms = self.begin_ms + phase.duration_ms
            if end_ms > now_ms:
                return None
            return end_ms, max(self.begin_count, self._polls_at(end_ms))
        if phase.polls is not None:
            if self.cancel_ms is not None:
                # Which came first, the settle's end or the poll that ended the phase, is
                # not known (no poll's time is kept): the settle wins, always the same way.
                return None
            last = self.begin_count + phase.polls
            if polls <= last:
                return None
            return max(self.begin_ms, self._time_before(last)), last
        return None  # input_required: only an input moves it on

    def advance(self, now_ms: float, polls: int) -> None:
        """Walk the life up to the moment *now_ms*, with *polls* counted."""
        while self.terminal_at is None:
            ended = self._next(now_ms, polls)
            settle_end = self.settle_end
            if ended is None or (settle_end is not None and ended[0] > settle_end):
                break
            self.phase += 1
            self.begin_ms, self.begin_count = ended
            self._enter()
        settle_end = self.settle_end
        if settle_end is not None and settle_end <= now_ms:
            self.cancelled = True
            self.terminal_at = settle_end

    def apply(self, event: TaskEvent) -> str | None:
        """Log *event* into the life (the life advanced to its moment first): None when it
        counted, else the code its answer was refused with."""
        self.advance(event.at_ms, event.polls)
        if event.action == "cancel":
            if self.terminal_at is not None:
                return FINISHED
            if self.status not in self.task.cancellable:
                return NOT_CANCELLABLE
            if self.cancel_ms is None:
                self.cancel_ms = event.at_ms
                if self.task.cancel_settle_ms == 0:
                    self.cancelled = True
                    self.terminal_at = event.at_ms
            return None
        if event.action == "input":
            if self.terminal_at is not None or self.status != "input_required":
                return NOT_AWAITING_INPUT
            if self.phase not in event.fits:  # meant for another input phase, or none
                return INPUT_INVALID
            self.phase += 1
            self.begin_ms, self.begin_count = event.at_ms, event.polls
            self._enter()
            return None
        return None  # an action this module does not know changes nothing

    def progress(self, now_ms: float, polls: int) -> int | None:
        phase = self.task.life[self.phase]
        values = phase.progress
        if not values:
            return None
        if phase.terminal:
            return values[-1]
        return values[_spread(phase, self, now_ms, polls, len(values))]

    def settles_at(self) -> float | None:
        if self.terminal_at is not None:
            return self.terminal_at
        life_end: float | None = self.begin_ms
        for index in range(self.phase, len(self.task.life)):
            phase = self.task.life[index]
            if phase.terminal:
                break
            if phase.duration_ms is None:
                life_end = None
                break
            assert life_end is not None
            life_end += phase.duration_ms
        settle_end = self.settle_end
        if settle_end is None:
            return life_end
        return life_end if life_end is not None and life_end <= settle_end else settle_end


def _spread(phase: TaskPhase, life: _Life, now_ms: float, polls: int, n: int) -> int:
    """Which of *n* progress values the phase shows: value *i* from *i/n* of it."""
    if phase.duration_ms is not None:
        if phase.duration_ms <= 0:
            return n - 1
        until = now_ms if life.terminal_at is None else min(now_ms, life.terminal_at)
        elapsed = max(0.0, until - life.begin_ms)  # (a cancelled task: as its settle ended)
        index = math.floor(elapsed * n / phase.duration_ms)
    elif phase.polls is not None:
        if phase.polls <= 0:
            return n - 1
        # The polls before the last one counted: the phase's first poll shows value 0.
        index = (polls - life.begin_count - 1) * n // phase.polls
    else:
        index = 0
    return min(n - 1, max(0, index))


def _walk(task: Task, record: TaskRecord, events: tuple[TaskEvent, ...]) -> _Life:
    life = _Life(task, record)
    for event in events:
        life.apply(event)
    life.advance(record.now_ms, record.polls)
    return life


class _Timeline:
    """What a task's life is when nothing disturbs it, worked out once per :class:`Task`:
    the leading run of ``for:`` phases (most lives are wholly one), so that the state of a
    task with no cancel or input logged is a lookup rather than a walk (a poll's view)."""

    __slots__ = ("ends", "phases", "task")

    def __init__(self, task: Task) -> None:
        self.task = task
        begins: list[int] = []
        ends: list[int] = []
        at = 0
        for phase in task.life:  # up to the first phase not on time (or the terminal one)
            begins.append(at)
            if phase.terminal or phase.duration_ms is None:
                break
            at += phase.duration_ms
            ends.append(at)
        self.ends: tuple[int, ...] = tuple(ends)
        """When each ``for:`` phase of the run ends, ms after the submission."""
        phases: list[_TimedPhase] = []
        for index, begin in enumerate(begins):
            left: int | None = 0
            for later in task.life[index:]:
                if later.terminal:
                    break
                if later.duration_ms is None:
                    left = None
                    break
                assert left is not None
                left += later.duration_ms
            phase = task.life[index]
            poll_after = task.poll_after_ms if phase.poll_after_ms is None else phase.poll_after_ms
            timed = (phase.status, phase.terminal, phase.duration_ms, phase.progress, poll_after)
            phases.append((*timed, begin, left))
        self.phases: tuple[_TimedPhase, ...] = tuple(phases)
        """Each phase of the run (one more than :attr:`ends`: the phase the run leads to),
        as a view reads it: its status, whether it is terminal, its ``for:`` time, its
        progress values, the ``Retry-After`` its answers advise (the task's if it sets
        none), when it begins (ms after the submission) and what is left of the life from
        then (None: a wait in it)."""

    def view(self, submitted: float, now: float) -> TaskView | None:
        """The view at *now* of a task submitted at *submitted* (epoch ms) with no event
        logged (None: its life has reached a phase that is not on time, which only the walk
        knows)."""
        index = bisect.bisect_right(self.ends, now - submitted)
        status, terminal, duration, values, poll_after, begin_ms, rest = self.phases[index]
        begin = submitted + begin_ms
        if terminal:
            return _new(  # (at once: a NamedTuple's keyword __new__ is a Python call)
                TaskView,
                (
                    status,
                    index,
                    values[-1] if values else None,
                    None,
                    False,
                    begin,
                    begin + self.task.ttl_ms <= now,
                    begin,
                ),
            )
        if duration is None:
            return None
        progress = None
        if values:
            n = len(values)
            if duration <= 0:
                progress = values[-1]
            else:  # as _spread counts it
                spread = math.floor(max(0.0, now - begin) * n / duration)
                progress = values[min(n - 1, max(0, spread))]
        return _new(
            TaskView,
            (
                status,
                index,
                progress,
                poll_after,
                False,
                None,
                False,
                None if rest is None else begin + rest,
            ),
        )


_TimedPhase = tuple[str, bool, "int | None", "tuple[int, ...]", "int | None", int, "int | None"]
"""A phase as :attr:`_Timeline.phases` keeps it."""


MAX_TIMELINES = 1024
"""Lives whose :class:`_Timeline` is kept (a scenario's task skills are few; beyond: made
anew, then kept)."""
_timelines: dict[int, tuple[Task, _Timeline]] = {}


def _timeline(task: Task) -> _Timeline:
    """*task*'s timeline, made and kept (:func:`view` finds it kept by identity: hashing a
    whole life per poll would cost more than the walk; the entry holds the task, so its id
    is not reused meanwhile)."""
    made = _Timeline(task)
    if len(_timelines) >= MAX_TIMELINES:
        _timelines.clear()  # atomic, unlike evicting one: views are made on threads
    _timelines[id(task)] = (task, made)
    return made


def view(task: Task, record: TaskRecord) -> TaskView:
    """The task as it is at ``record.now_ms``, with ``record.polls`` counted (a poll's
    record counts the poll itself)."""
    # (Its fields by index: a NamedTuple's attributes are slow lookups, and a poll asks.)
    if not record[3]:  # no event logged: the life on its own, looked up when on time
        kept = _timelines.get(id(task))
        timeline = kept[1] if kept is not None and kept[0] is task else _timeline(task)
        timed = timeline.view(record[1], record[4])
        if timed is not None:
            return timed
    return _walked(task, record)


def _walked(task: Task, record: TaskRecord) -> TaskView:
    """:func:`view`, the life walked through the record's moments (every life's way)."""
    life = _walk(task, record, record.events)
    terminal = life.terminal_at is not None
    phase = task.life[life.phase]
    return TaskView(
        status=life.status,
        phase=life.phase,
        progress=life.progress(record.now_ms, record.polls),
        poll_after_ms=None
        if terminal
        else (phase.poll_after_ms if phase.poll_after_ms is not None else task.poll_after_ms),
        cancelling=life.cancel_ms is not None and not terminal,
        terminal_at_ms=life.terminal_at,
        expired=life.terminal_at is not None and life.terminal_at + task.ttl_ms <= record.now_ms,
        settles_at_ms=life.settles_at(),
    )


def refusal(task: Task, record: TaskRecord, action: str, fits: tuple[int, ...] = ()) -> str | None:
    """What a ``cancel`` or ``input`` at ``record.now_ms`` comes to: None when it counts,
    else the code it is refused with (:data:`FINISHED`, :data:`NOT_CANCELLABLE`,
    :data:`NOT_AWAITING_INPUT`, :data:`INPUT_INVALID`); an input's *fits*: the phases whose
    ``expects:`` its body meets.

    *record* is the answer to the :class:`~.store.Touch` that logged it (its last event, at
    ``now_ms``); when the store logged it no more (:data:`~.store.MAX_TASK_EVENTS`, or an
    input that fits no phase, which can count for nothing), it is judged as if it had been."""
    made = TaskEvent(action, record.now_ms, record.polls, fits)
    events = record.events
    if events and events[-1] == made:
        events = events[:-1]
    life = _walk(task, record, events)
    return life.apply(made)


def submitted_record(skill: str, at_ms: float) -> TaskRecord:
    """A task's record as its submission leaves it (no poll, no event), at *at_ms*."""
    return TaskRecord(skill, at_ms, 0, (), at_ms)


def keep_ms(task: Task, task_view: TaskView, now_ms: float) -> int:
    """How long from *now_ms* the store must keep the task (what :class:`~.store.Submit`
    and :class:`~.store.Touch` ask): until its time-to-live ends after the life settles.

    A task that waits for input or counts polls is kept as if the wait ended now: each
    request on it renews this, and one left alone is dropped ``ttl`` after the last."""
    end = task_view.terminal_at_ms
    if end is None:
        end = task_view.settles_at_ms
    if end is None:
        end = now_ms + _timed_rest(task, task_view.phase)
    return max(0, math.ceil(end + task.ttl_ms - now_ms))


def keep_ms_at_submit(task: Task) -> int:
    """:func:`keep_ms` of a task just submitted (what :class:`~.store.Submit` asks)."""
    return keep_ms(task, view(task, submitted_record("", 0.0)), 0.0)


def _timed_rest(task: Task, phase: int) -> int:
    """The ``for:`` time of *phase* and those after it (waits counted as none): at least
    what is left of the life once the waits end."""
    return sum(p.duration_ms or 0 for p in task.life[phase:])
