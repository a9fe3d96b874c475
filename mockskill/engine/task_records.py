"""The long-running tasks an in-memory store holds: :class:`TaskRecords`.

What the store keeps of a task is what the consumer did to it (when it was
submitted, its polls, its cancels and inputs), never its state: the engine
works that out from the record and the scenario's ``task:``
(:mod:`.tasks`). A task is kept until its *keep* time (asked by the Submit
and each Touch: its scripted life and time-to-live), then forgotten; the
tasks not yet forgotten count against the server's cap on live tasks
(``--max-tasks``), so thousands of abandoned tasks cannot grow memory without
bound. Tasks are numbered store-wide (0, 1, ...), never per session and never
again after a reset: a task id (session, number) is not handed out twice while the
server runs, so a consumer polling a task from before a reset is told it is gone,
never shown another. Not thread-safe: :class:`~.state.State` calls it under its lock.
"""

from __future__ import annotations

import heapq

from .store import MAX_TASK_EVENTS, Claim, Submit, Submitted, TaskEvent, TaskRecord, Touch

_new = tuple.__new__


class _Task:
    """One task as kept: its skill, when it was submitted, its polls and events, the time
    (epoch ms) it is kept until, its callback (as the Submit gave it) and the deliveries
    claimed of it."""

    __slots__ = ("callback", "claims", "events", "keep_until", "polls", "skill", "submitted_ms")

    def __init__(self, skill: str, submitted_ms: float, keep_until: float, callback: str) -> None:
        self.skill = skill
        self.submitted_ms = submitted_ms
        self.polls = 0
        self.events: tuple[TaskEvent, ...] = ()
        self.keep_until = keep_until
        self.callback = callback
        self.claims: set[str] | None = None


class TaskRecords:
    """Every live task of one store, by (session, number), and the number the next gets."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, int], _Task] = {}
        self._next = 0
        """The number the next task gets, whatever its session (a reset keeps it)."""
        self._live: dict[str, int] = {}
        """Per session, how many of its tasks are held (a session's reset finds them)."""
        self._deadlines: list[tuple[float, str, int]] = []
        """(keep_until, session, number) of the tasks, soonest first (a heap). A Touch that
        keeps a task longer leaves its entry as it was: when it comes up, it is pushed
        again with the task's new time (each task has one entry at a time)."""

    def __len__(self) -> int:
        return len(self._tasks)

    def submit(self, need: Submit, now_ms: float) -> Submitted:
        """Start a task of *need*, unless the store holds its limit of live ones."""
        self.forget_ended(now_ms)
        if len(self._tasks) >= need.limit:
            return Submitted(None, now_ms)
        session = need.session
        number = self._next
        self._next = number + 1
        keep_until = now_ms + need.keep_ms
        self._tasks[(session, number)] = _Task(need.skill, now_ms, keep_until, need.callback)
        self._live[session] = self._live.get(session, 0) + 1
        heapq.heappush(self._deadlines, (keep_until, session, number))
        return Submitted(number, now_ms)

    def touch(self, need: Touch, now_ms: float) -> TaskRecord | None:
        """Count a poll of (or log an event of) task *need*, kept at least *need.keep_ms*
        more; None when no such task is held (never submitted, or forgotten)."""
        # Unpacked at once: a NamedTuple's fields read one by one are slow attribute lookups.
        session, number, action, keep_ms, skill, fits = need
        key = (session, number)
        task = self._tasks.get(key)
        if task is None or task.skill != skill:
            return None
        if task.keep_until <= now_ms:  # its time is over: as good as forgotten
            self._drop(key)
            return None
        if action == "poll":
            task.polls += 1
        elif action == "look":
            pass  # the courier's: what the task is now, nothing counted
        elif action == "input" and not fits:
            pass  # an input that fits no phase counts for nothing: not logged, no event spent
        elif len(task.events) < MAX_TASK_EVENTS:
            task.events = (*task.events, TaskEvent(action, now_ms, task.polls, fits))
        task.keep_until = max(task.keep_until, now_ms + keep_ms)
        # (Made at once: a NamedTuple's keyword __new__ is a Python call on every poll.)
        record = (task.skill, task.submitted_ms, task.polls, task.events, now_ms, task.callback)
        return _new(TaskRecord, record)

    def claim(self, need: Claim, now_ms: float) -> bool:
        """Whether *need.key* is claimed now for the first time on a task held."""
        task = self._tasks.get((need.session, need.number))
        if task is None or task.keep_until <= now_ms:
            return False
        claims = task.claims
        if claims is None:
            claims = task.claims = set()
        elif need.key in claims:
            return False
        claims.add(need.key)
        return True

    def forget_ended(self, now_ms: float) -> None:
        """Forget the tasks kept until *now_ms* or before."""
        deadlines, tasks = self._deadlines, self._tasks
        while deadlines and deadlines[0][0] <= now_ms:
            _, session, number = heapq.heappop(deadlines)
            task = tasks.get((session, number))
            if task is None:
                continue  # forgotten already (a reset, or touched after its time)
            if task.keep_until > now_ms:  # kept longer since: its entry comes again then
                heapq.heappush(deadlines, (task.keep_until, session, number))
            else:
                self._drop((session, number))

    def forget(self, session: str | None = None) -> None:
        """Forget every task (a reset), or *session*'s; their numbers are not handed out
        again."""
        if session is None:
            self._tasks.clear()
            self._deadlines.clear()
            self._live.clear()
            return
        if self._live.pop(session, None) is not None:
            for key in [key for key in self._tasks if key[0] == session]:
                del self._tasks[key]
        # (Their deadlines' entries find no task when they come up.)

    def _drop(self, key: tuple[str, int]) -> None:
        """Forget task *key* (held)."""
        del self._tasks[key]
        session = key[0]
        left = self._live[session] - 1
        if left:
            self._live[session] = left
        else:
            del self._live[session]
