"""Watched tasks followed: their records read again, their next events played (docs/tasks.md,
"Watching a task").

It decides nothing: :mod:`mockskill.engine.task_watch` plans a watch's events from a
reading of the task's record (:func:`~mockskill.engine.task_watch.segment`). The first
segment is the plan's stream, played by the connection's :class:`~.streaming.Streaming`;
:class:`TaskWatches` then, per watch:

- reads the record again (a ``look`` :class:`~mockskill.engine.store.Touch`: nothing
  counted) when the segment says (the ``Retry-After`` a poll is advised, never sooner than
  :data:`~mockskill.engine.task_watch.MIN_REREAD_MS`: no tight loop on the store), and
  plays the segment planned from it in place of what was left
  (:meth:`Streaming.follow <.streaming.Streaming.follow>`): a cancel or an input served by
  another replica of a shared store shows then;
- is told at once of a cancel or an input this server served on the task (:meth:`touched`,
  the engine's hook, with the record the store answered), and replans from it.

Each watch costs one loop timer at a time, and is forgotten when its stream is over. It is
a companion of the serving :class:`~.loop_server.LoopServer`: its stop ends every watch at
once (a watch has no end of its own for the server's grace to wait for).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from ..engine import task_watch
from ..engine.store import Store, StoreUnavailable, TaskRecord
from ..engine.task_watch import TaskWatch
from .streaming import Streaming
from .waiting import STOP

_Key = tuple[str, int]


class _Watched:
    """One watch: its stream, what it follows, and its timer for the next reading."""

    __slots__ = ("streaming", "timer", "watch")

    def __init__(self, streaming: Streaming, watch: TaskWatch) -> None:
        self.streaming = streaming
        self.watch = watch
        self.timer: asyncio.TimerHandle | None = None


class TaskWatches:
    """The watches a server's connections play (see the module's docstring)."""

    def __init__(self, state: Store) -> None:
        self._state = state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watched: dict[_Key, list[_Watched]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self.store_failures = 0
        """Readings the store did not answer (the watch goes on with what it had)."""

    def __len__(self) -> int:
        return sum(len(watched) for watched in self._watched.values())

    # -- a companion of the serving loop -------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    async def stop(self, grace: float = 0.0) -> bool:
        """End every watch now (``stopped``), its timer and reading cancelled: a watch has
        no end of its own to drain towards, so the server's grace is not spent on it."""
        every = [one for watched in self._watched.values() for one in watched]
        self._watched.clear()
        for one in every:
            if one.timer is not None:
                one.timer.cancel()
            one.streaming.interrupt(STOP)
        readings = list(self._running)
        for reading in readings:
            reading.cancel()
        if readings:
            await asyncio.gather(*readings, return_exceptions=True)
        self._loop = None
        return True

    def hurry(self) -> None:
        pass

    # -- what the connections and the engine call ---------------------------------------

    def follow(self, streaming: Streaming, watch: object) -> None:
        """Follow *watch* (a :class:`~mockskill.engine.task_watch.TaskWatch`), whose first
        events *streaming* plays (on the serving loop)."""
        if streaming.over or self._loop is None or not isinstance(watch, TaskWatch):
            return
        one = _Watched(streaming, watch)
        self._watched.setdefault((watch.session, watch.number), []).append(one)
        self._arm(one, watch.reread_ms)

    def unfollow(self, streaming: Streaming) -> None:
        """*streaming* is over: its watch is forgotten."""
        watch = streaming.plan.watch
        if not isinstance(watch, TaskWatch):
            return
        key = (watch.session, watch.number)
        watched = self._watched.get(key)
        if not watched:
            return
        for one in watched:
            if one.streaming is streaming and one.timer is not None:
                one.timer.cancel()
        left = [one for one in watched if one.streaming is not streaming]
        if left:
            self._watched[key] = left
        else:
            del self._watched[key]

    def touched(self, session: str, number: int, record: TaskRecord) -> None:
        """A cancel or an input this server served on task (*session*, *number*), *record*
        the store's answer to it: its watches play what follows from it, at once. From any
        thread (handled on the serving loop)."""
        loop = self._loop
        if loop is None or (session, number) not in self._watched:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._replan_all((session, number), record)
        else:
            loop.call_soon_threadsafe(self._replan_all, (session, number), record)

    # -- following ------------------------------------------------------------------------

    def _arm(self, one: _Watched, reread_ms: float | None) -> None:
        if one.timer is not None:
            one.timer.cancel()
            one.timer = None
        if reread_ms is None:
            return  # over by time alone, or moved on only by this server's requests
        loop = self._loop
        assert loop is not None
        one.timer = loop.call_later(reread_ms / 1000, self._due, one)

    def _due(self, one: _Watched) -> None:
        one.timer = None
        if one.streaming.over:
            return
        if self._state.remote:
            self._spawn(self._reread(one))
            return
        record = self._state.answer(task_watch.look(one.watch))
        self._replan(one, record if isinstance(record, TaskRecord) else None)

    async def _reread(self, one: _Watched) -> None:
        try:
            record = await self._state.answer_async(task_watch.look(one.watch))
        except StoreUnavailable:
            self.store_failures += 1
            if not one.streaming.over:
                self._arm(one, one.watch.reread_ms)  # (the store may be back soon)
            return
        self._replan(one, record if isinstance(record, TaskRecord) else None)

    def _replan_all(self, key: _Key, record: TaskRecord) -> None:
        for one in list(self._watched.get(key, ())):
            self._replan(one, record)

    def _replan(self, one: _Watched, record: TaskRecord | None) -> None:
        """Play *one*'s events from *record* on (None: the store holds the task no more)."""
        streaming = one.streaming
        if streaming.over:
            return
        sent = streaming.last_id
        after = int(sent) if sent is not None else one.watch.resumed_from
        planned = task_watch.segment(one.watch, record, after)
        streaming.follow(planned.play)
        if not streaming.over:
            self._arm(one, planned.reread_ms)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
