"""The courier: task callbacks sent, on the serving loop (docs/tasks.md, "Callbacks").

It decides nothing: :mod:`mockskill.engine.callbacks` says which changes a task makes,
when each delivery is due, what it says and how it is signed. The courier keeps, per task
with a receiver, its last record and :class:`~mockskill.engine.callbacks.Course`, and:

- on a notice (the engine's, for a submit or a request that touched the task, on this
  replica) finds the changes up to now, then sets one loop timer for the next moment the
  task may change by time; when it fires, it reads the task from a shared store (a
  ``look`` :class:`~mockskill.engine.store.Touch`: another replica may have served a cancel
  or an input since) and finds its changes as it is then (a change that no longer happens is
  not pushed); a task the store no longer holds (a reset) is forgotten;
- sends each delivery at its due time (a loop timer), as an HTTP/1.1 POST through the
  upstream client's keep-alive pool (:mod:`.upstream`), each attempt within the callback's
  timeout; a non-2xx, a refused connection or a late answer is retried after the backoff,
  doubled per retry, until the attempts run out; every attempt is journalled in the task's
  session (an entry of endpoint ``callback``).

Each attempt is sent only once the store answers its :class:`~mockskill.engine.store.Claim`
True: every replica that served a task follows it and plans the same deliveries, and the
first to claim an attempt sends it (on one server, the claim is its own; after a reset of
the task's session, no claim is granted, so nothing planned before it is sent).

Bounded: at most *max_pending* deliveries wait or are in flight (beyond, a change's
deliveries are dropped, and counted in :attr:`Courier.dropped`); a task is forgotten once
it is terminal and its deliveries are sent. It is a companion of the serving
:class:`~.loop_server.LoopServer`: it starts with it and its stop cancels what is left.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections import Counter
from collections.abc import Coroutine
from functools import partial
from typing import Any

from ..engine import callbacks
from ..engine.callback_hosts import Receiver
from ..engine.callbacks import Course, Delivery, Notice
from ..engine.entries import Entry
from ..engine.store import Claim, Store, StoreUnavailable, TaskRecord, Touch
from ..scenario.model import Proxy
from .loop_server import DEFAULT_GRACE
from .upstream import UpstreamConnection, UpstreamError, pool

DEFAULT_MAX_PENDING = 50_000
"""Deliveries waiting or in flight at most (each a few hundred bytes)."""
MAX_CONNECTIONS = 32
"""Connections open to one receiver at most (the upstream pool keeps as many idle): a burst
of changes queues for them instead of opening a connection each."""
DEFAULT_MAX_TRACKED = 50_000
"""Tasks with a receiver followed at most (beyond, a new one is not followed)."""

_Key = tuple[str, int]


class _Tracked:
    """A task followed: its notice at submit (receiver, fault, how URLs are filled), its
    latest record, how far its changes were found, and its timer for the next moment."""

    __slots__ = ("course", "notice", "record", "target", "timer")

    def __init__(self, notice: Notice, target: Proxy) -> None:
        self.notice = notice
        self.record = notice.record
        self.course: Course = callbacks.started(notice.tasked.task, notice.record)
        self.target = target
        self.timer: asyncio.TimerHandle | None = None


class Courier:
    """Sends the task callbacks the engine plans (see the module's docstring)."""

    def __init__(
        self,
        state: Store,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_tracked: int = DEFAULT_MAX_TRACKED,
    ) -> None:
        self._state = state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tracked: dict[_Key, _Tracked] = {}
        self._ended: set[_Key] = set()
        """Tasks seen to their end here (at most *max_tracked*)."""
        self._running: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._lanes: dict[tuple[str, str, int], asyncio.Semaphore] = {}
        """Per receiver (scheme, host, port): the connections it may still be sent on."""
        self.pending = 0
        """Deliveries waiting for their time or being sent."""
        self.max_pending, self.max_tracked = max_pending, max_tracked
        self.dropped = 0
        """Deliveries not sent because :attr:`max_pending` were pending."""
        self.failures: Counter[str] = Counter()
        """Attempts that got no whole answer, by kind (``refused``, ``unreachable``,
        ``TimeoutError``...): the journal says which attempts, this says why."""

    # -- a companion of the serving loop -------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    async def stop(self, grace: float = DEFAULT_GRACE) -> bool:
        """Cancel every timer and send (a server stopping sends nothing more)."""
        for tracked in self._tracked.values():
            if tracked.timer is not None:
                tracked.timer.cancel()
        self._tracked.clear()
        self._ended.clear()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        sends = list(self._running)
        for send in sends:
            send.cancel()
        if sends:
            await asyncio.gather(*sends, return_exceptions=True)
        self.pending = 0
        self._lanes.clear()
        self._loop = None
        return True

    def hurry(self) -> None:
        pass

    # -- notices ---------------------------------------------------------------------------

    def notice(self, notice: Notice) -> None:
        """What the engine tells of a task with callbacks; from any thread (handled on the
        serving loop)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if loop is None:
            return  # not serving: nothing is delivered
        if running is loop:
            self._noticed(notice)
        else:
            loop.call_soon_threadsafe(self._noticed, notice)

    def _noticed(self, notice: Notice) -> None:
        key = (notice.session, notice.number)  # (numbers are store-wide: never twice)
        tracked = self._tracked.get(key)
        if tracked is None:  # followed from now: its changes found from its submission
            if notice.receiver is None or key in self._ended:
                return  # no receiver this server may call, or seen to its end here
            if len(self._tracked) >= self.max_tracked:
                return
            target = _target(notice.receiver)
            tracked = self._tracked[key] = _Tracked(notice, target)
        elif notice.record.now_ms < tracked.record.now_ms:
            return  # (an older answer, handed over late from a thread)
        else:
            tracked.record = notice.record
        self._look(key, tracked, notice.record.now_ms)

    def _look(self, key: _Key, tracked: _Tracked, now_ms: float) -> None:
        """Find *tracked*'s changes up to *now_ms*, plan their deliveries, and set the timer
        for its next moment (or forget it: terminal, its deliveries planned)."""
        notice = tracked.notice
        callback = notice.tasked.task.callback
        assert callback is not None  # (a notice is made for such tasks only)
        task = notice.tasked.task
        record = tracked.record
        now_ms = max(now_ms, tracked.course.at_ms)  # (a thread's notice may come late)
        course, changes = callbacks.observe(tracked.course, callback, task, record, now_ms)
        for change in changes:
            course, planned = callbacks.deliveries(course, callback, notice.fault, change)
            if planned:
                self._plan(tracked, planned)
        tracked.course = course
        if tracked.timer is not None:
            tracked.timer.cancel()
            tracked.timer = None
        view_terminal = course.status in ("completed", "failed", "cancelled")
        if view_terminal:
            if course.held is not None:  # (out_of_order: nothing follows it now)
                self._plan(tracked, [course.held._replace(due_ms=now_ms)])
                tracked.course = course._replace(held=None)
            self._end(key)
            return
        loop = self._loop
        assert loop is not None
        moment = callbacks.next_moment(task, record, now_ms)
        if moment is None:  # only a request moves it on (its notice looks again), unless
            # none comes before the store forgets the task: then it is forgotten here too
            at = loop.time() + notice.tasked.keep_ms / 1000
            tracked.timer = loop.call_at(at, self._forget, key, tracked, record)
            return
        delay = max(0.0, (moment - time.time() * 1000) / 1000)
        tracked.timer = loop.call_at(loop.time() + delay, self._due, key, tracked, moment)

    def _due(self, key: _Key, tracked: _Tracked, moment: float) -> None:
        tracked.timer = None
        if self._tracked.get(key) is not tracked:
            return
        if self._state.remote:  # another replica may have served a request on it since
            self._spawn(self._reread(key, tracked, moment))
        else:  # a store of this server's only: each request on the task was noticed here
            self._look(key, tracked, max(moment, time.time() * 1000))

    async def _reread(self, key: _Key, tracked: _Tracked, moment: float) -> None:
        """Look at *tracked* at *moment* as the store holds it now (another replica may
        have logged a cancel or an input since this one last saw it)."""
        notice = tracked.notice
        look = Touch(notice.session, notice.number, "look", 0, notice.tasked.skill)
        try:
            record = await self._state.answer_async(look)
        except StoreUnavailable:
            self.failures["store"] += 1
            record = tracked.record  # (what this replica knows: the store may be back soon)
        if self._tracked.get(key) is not tracked:
            return
        if not isinstance(record, TaskRecord):  # not held any more: a reset, or over
            del self._tracked[key]
            return
        if record.now_ms >= tracked.record.now_ms:
            tracked.record = record
        self._look(key, tracked, max(moment, time.time() * 1000))

    def _forget(self, key: _Key, tracked: _Tracked, record: TaskRecord) -> None:
        """Forget *tracked*, left alone (no request since *record*) as long as the store
        keeps a task."""
        tracked.timer = None
        if self._tracked.get(key) is tracked and tracked.record is record:
            del self._tracked[key]

    def _end(self, key: _Key) -> None:
        """Forget task *key*, seen to its end (its last deliveries planned): a later request
        touching it does not make this replica follow it again."""
        del self._tracked[key]
        ended = self._ended
        if len(ended) >= self.max_tracked:
            ended.clear()  # (bounded: forgetting one only costs a claim refused per delivery)
        ended.add(key)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    # -- deliveries ------------------------------------------------------------------------

    def _plan(self, tracked: _Tracked, planned: list[Delivery]) -> None:
        """Send *planned* (one change's deliveries, due together) at their time, one after
        the other in their order (``out_of_order``'s later change first, ``twice``'s
        copies)."""
        room = self.max_pending - self.pending
        if room < len(planned):
            self.dropped += len(planned) - max(0, room)
            planned = planned[: max(0, room)]
            if not planned:
                return
        loop = self._loop
        assert loop is not None
        self.pending += len(planned)
        delay = max(0.0, (planned[0].due_ms - time.time() * 1000) / 1000)
        if delay <= 0:
            self._begin(tracked, planned, None)
            return
        timer: asyncio.TimerHandle
        timer = loop.call_at(loop.time() + delay, lambda: self._begin(tracked, planned, timer))
        self._timers.add(timer)

    def _begin(
        self, tracked: _Tracked, planned: list[Delivery], timer: asyncio.TimerHandle | None
    ) -> None:
        if timer is not None:
            self._timers.discard(timer)
        self._spawn(self._send_in_turn(tracked, planned))

    async def _send_in_turn(self, tracked: _Tracked, planned: list[Delivery]) -> None:
        for delivery in planned:
            try:
                await self._send(tracked, delivery)
            finally:
                self.pending = max(0, self.pending - 1)

    async def _send(self, tracked: _Tracked, delivery: Delivery) -> None:
        """Every attempt of *delivery* this replica claims, each journalled, until one is
        acknowledged."""
        notice = tracked.notice
        callback = notice.tasked.task.callback
        assert callback is not None
        attempt = 0
        while True:
            claim = Claim(notice.session, notice.number, callbacks.claim_key(delivery, attempt))
            try:
                claimed = await self._state.answer_async(claim)
            except StoreUnavailable:
                self.failures["store"] += 1
                return  # (unclaimed, it could be sent twice: not sent)
            if claimed is not True:
                return  # another replica sends it, or the task is gone (a reset)
            started = time.time()
            payload = callbacks.body(notice, delivery, attempt)
            signed = callbacks.signature(callback, payload, delivery.forged)
            receiver = notice.receiver
            assert receiver is not None  # (a submit's notice, kept)
            lane = self._lanes.get((receiver.scheme, receiver.host, receiver.port))
            if lane is None:
                lane = asyncio.Semaphore(MAX_CONNECTIONS)
                self._lanes[(receiver.scheme, receiver.host, receiver.port)] = lane
            async with lane:
                status = await self._post(tracked, payload, signed, callback.timeout_ms / 1000)
            finished = time.time()
            acknowledged = status is not None and 200 <= status < 300
            self._journal(tracked, delivery, attempt, status, acknowledged, started, finished)
            if acknowledged:
                return
            wait = callbacks.retry_after_ms(callback, attempt)
            if wait is None:
                return
            await asyncio.sleep(wait / 1000)
            attempt += 1

    async def _post(
        self, tracked: _Tracked, payload: bytes, signed: str, timeout: float
    ) -> int | None:
        """POST *payload* to the receiver: its status, or None (refused, broken, or no whole
        answer within *timeout* seconds)."""
        notice = tracked.notice
        callback = notice.tasked.task.callback
        assert callback is not None
        target = tracked.target
        loop = self._loop
        assert loop is not None
        connections = pool(loop)
        deadline = loop.time() + timeout
        up: UpstreamConnection | None = None
        try:
            up = connections.idle(target)
            if up is None:
                up = await connections.connect(target, timeout)
            assert notice.receiver is not None  # (a submit's notice, kept)
            head = _head(
                notice.receiver, notice.task_id, callback.signature_header, signed, len(payload)
            )
            up.begin(head, payload, head_only=False)
            while not up.complete and up.error is None and not up.lost:
                if loop.time() >= deadline:
                    raise TimeoutError
                ready: asyncio.Future[None] = loop.create_future()
                wake = partial(_wake, ready)
                up.when_ready(wake)
                # A timer, not asyncio.wait_for: that makes a task per wait.
                timeout_timer = loop.call_at(deadline, wake)
                try:
                    await ready
                finally:
                    timeout_timer.cancel()
            if not up.complete or up.error is not None:
                self.failures[up.error.kind if up.error is not None else "unreachable"] += 1
                up.close()
                return None
            status = up.status
            up.take_chunks()
            up.done()
            return status
        except (TimeoutError, UpstreamError, OSError) as exc:
            kind = exc.kind if isinstance(exc, UpstreamError) else type(exc).__name__
            self.failures[kind] += 1
            if up is not None:
                up.close()
            return None
        except asyncio.CancelledError:  # the server stops: the connection goes with it
            if up is not None:
                up.close()
            raise

    def _journal(
        self,
        tracked: _Tracked,
        delivery: Delivery,
        attempt: int,
        status: int | None,
        acknowledged: bool,
        started: float,
        finished: float,
    ) -> None:
        notice = tracked.notice
        receiver = notice.receiver
        assert receiver is not None  # (a submit's notice, kept)
        task: dict[str, Any] = callbacks.journalled(
            notice,
            delivery,
            attempt,
            fault=notice.fault,
            acknowledged=acknowledged,
            sent_ms=started * 1000,
            receiver=receiver.address,
        )
        path = receiver.target
        entry = Entry(
            self._state.next_id(),
            started,
            finished,
            notice.session,
            "POST",
            path,
            status,
            "callback",
            skill=notice.tasked.skill_id,
            scenario=notice.scenario,
            task=task,
        )
        self._state.record(entry)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _target(receiver: Receiver) -> Proxy:
    """The receiver as the upstream client connects to it (by scheme, host and port)."""
    return Proxy(receiver.url, receiver.scheme, receiver.host, receiver.port)


def _head(
    receiver: Receiver, task_id: str, signature_header: str, signed: str, length: int
) -> bytes:
    """A delivery's request head (the judged URL has only RFC 3986's characters)."""
    return (
        f"POST {receiver.target} HTTP/1.1\r\n"
        f"Host: {urllib.parse.urlsplit(receiver.url).netloc}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {length}\r\n"
        f"{signature_header}: {signed}\r\n"
        f"Mockskill-Task: {task_id}\r\n"
        "User-Agent: mockskill-courier\r\n"
        "\r\n"
    ).encode("latin-1")
