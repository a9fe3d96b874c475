"""Plans played by a task: a dribbled body, and a plan the handler makes off the loop.

Most plans never come here: an instant one is written from the parser's
callback and a waiting one is played by loop timers (:class:`~.waiting.Waits`).
A dribble needs a pause between pieces and the client reading what was
written, and a plan made off the loop (the admin app's, in its thread pool)
needs awaiting: :class:`Playing` is the part of a
:class:`~.connection.Connection` that plays those as a task. It decides
nothing: the plan says what to write and when; the connection reports how
it went (:meth:`Playing._report`) and what comes after (:meth:`Playing._after`).
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable

from ..engine.plan import Answer, Outcome, Plan
from .handler import Refusal, Request
from .shared import Shared
from .waiting import LEFT, Waiting


class Playing(Waiting):
    """A connection's task-played plans (its attributes and hooks are the connection's)."""

    # Slots, as the connection's: a new attribute has to be named here.
    __slots__ = ("_busy", "_task")

    _busy: bool
    _task: asyncio.Task[None] | None

    _closed: bool
    _shared: Shared
    _write_paused: bool

    @abc.abstractmethod
    def _advance(self) -> None:
        """Answer what is queued next (the connection's)."""

    @abc.abstractmethod
    def _gone(self, item: Request | Refusal, reason: str, outcome: Outcome) -> None:
        """The exchange ended early, for *reason*: report it and close."""

    @abc.abstractmethod
    def _finish(
        self,
        item: Request | Refusal,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        cut_ms: float | None,
        waited: float,
    ) -> None:
        """After the waits: the plan's fault, or its whole answer (*cut_ms*: how long the
        wait a cut ended lasted, None when none did)."""

    @abc.abstractmethod
    def _closes_silently(self, item: Request | Refusal, plan: Plan) -> bool:
        """Whether the connection closes after this answer without saying so."""

    @abc.abstractmethod
    def _after(self, plan: Plan, close: bool) -> None:
        """What the connection does once the answer is written."""

    @abc.abstractmethod
    def _report(self, item: Request | Refusal, outcome: Outcome) -> None:
        """Tell the handler how the exchange went."""

    @abc.abstractmethod
    async def _relay(
        self, item: Request | Refusal, plan: Plan, close: bool, started: float, waited: float
    ) -> None:
        """Forward the request upstream and relay the answer (:mod:`.relaying`)."""

    async def _play(
        self, item: Request | Refusal, planned: Plan | Awaitable[Plan], close: bool
    ) -> None:
        started = time.time()
        try:
            if isinstance(planned, Plan):
                plan = planned
            else:
                reason, got = await self._planned(planned)
                if got is None:
                    self._gone(item, reason or LEFT, Outcome(None, started))
                    return
                plan = got
            await self._play_plan(item, plan, close, started)
        finally:
            self._busy = False
            self._task = None
            if not self._closed:
                self._advance()
            else:
                self._shared.check_quiet()

    async def _play_plan(
        self, item: Request | Refusal, plan: Plan, close: bool, started: float
    ) -> None:
        answer, cut_ms, waited = plan.answer, None, 0.0
        for wait in plan.waits:
            seconds, alternative = wait.ms / 1000, None
            if wait.cut is not None and wait.cut.after_ms < wait.ms:
                seconds, alternative = wait.cut.after_ms / 1000, wait.cut
            begun = self._loop.time()
            reason = await self._wait(seconds)
            spent = (self._loop.time() - begun) * 1000
            waited += spent
            if reason is not None:
                self._gone(item, reason, Outcome(None, started, waited_ms=waited))
                return
            if alternative is not None:
                cut_answer = alternative.answer
                answer = cut_answer if isinstance(cut_answer, Answer) else cut_answer.answer(spent)
                cut_ms = spent
                break
        if plan.upstream is not None and cut_ms is None:  # a proxy step: forwarded after its waits
            await self._relay(item, plan, close, started, waited)
            return
        if plan.dribble is not None and cut_ms is None and answer.has_body:
            await self._dribble(item, plan, answer, close, started, waited)
            return
        self._finish(item, plan, answer, close, started, cut_ms, waited)

    async def _dribble(
        self,
        item: Request | Refusal,
        plan: Plan,
        answer: Answer,
        close: bool,
        started: float,
        waited: float,
    ) -> None:
        assert self._transport is not None
        assert plan.dribble is not None
        close = close or plan.close or self._shared.draining
        silent = self._closes_silently(item, plan)
        pieces = plan.dribble.pieces(answer.body)
        if isinstance(item, Request) and item.method == "HEAD":
            pieces = [b""]
        pause = plan.dribble.over_ms / 1000 / len(pieces)
        headers_at = time.time()
        self._transport.write(answer.head(close=close))
        for i, piece in enumerate(pieces):
            begun = self._loop.time()
            reason = await self._wait(pause)
            if reason is None and self._write_paused:
                reason = await self._drained()
            waited += (self._loop.time() - begun) * 1000
            if reason is not None:
                outcome = Outcome(answer, started, headers_at=headers_at, waited_ms=waited)
                self._gone(item, reason, outcome)
                return
            if i == len(pieces) - 1:
                self._report(
                    item,
                    Outcome(
                        answer,
                        started,
                        headers_at=headers_at,
                        last_byte_at=time.time(),
                        waited_ms=waited,
                        closed=close or silent,
                    ),
                )
            self._transport.write(piece)
        self._after(plan, close or silent)
