"""Needs met on the event loop: those of one loop turn in one pipelined write.

The transport plays many connections on one loop; each request that needs
the store awaits its answer. Sending each need alone would cost a write and
a round trip per request. Instead the needs that arrive during one turn of
the loop are queued, and the next turn (``call_soon``) writes them all at
once on the one connection (a pipeline, not a transaction: each command is
a script, atomic by itself). A batch does not wait for the one before it to
be answered: Redis answers the commands of one connection in the order it
read them, so the needs reach Redis in the order they were made (the
requests pipelined on one keep-alive connection take their positions in
their order) and a request waits for one round trip, not for the batches
queued before it.

The journal's entries recorded on the loop go out in the same writes: the
batcher's *rider* (:class:`~.loop_journal.LoopJournal`) adds its appends to
each batch, and has the batcher flush (:meth:`Batcher.wake`) when it has
entries and no need is queued.

A batch that fails (Redis gone, no reply within the socket timeout) fails
every need in it with :class:`~mockskill.engine.store.StoreUnavailable`;
a script Redis no longer knows (``NOSCRIPT``: it restarted) is loaded again
and its commands sent again, once (they did not run).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

from ..engine.store import StoreUnavailable
from .commands import packed
from .link import Link, LinkError, ReplyError, connect

Command = tuple[bytes, "asyncio.Future[Any]"]
"""One command in RESP and the future its reply (or its failure) is set on."""


class Rider(Protocol):
    """What goes out with each batch besides the needs (the loop's journal)."""

    def commands(self) -> list[Command]:
        """The commands to add to the batch being written (taken: sent now); often none."""
        ...

    def unreachable(self, reason: str) -> None:
        """No connection could be made: what the rider holds waits (it may wake later)."""
        ...

    def holds(self) -> bool:
        """Whether it has commands to add."""
        ...

    def now(self) -> None:
        """Add what it holds to the next batch, though it meant to wait (Redis was away)."""
        ...


class Batcher:
    """Writes the commands of each loop turn as one batch on one :class:`Link` to *url*.

    The link is made on first use and again after a failure (needs arriving
    meanwhile wait for it). *scripts* maps each script's digest to its source
    (for ``NOSCRIPT``); *reason* turns an error into the text a
    :class:`StoreUnavailable` says; *seen* is told of each batch's outcome
    (None: it succeeded) for the store's health.
    """

    def __init__(
        self,
        url: str,
        timeout: float,
        scripts: dict[str, str],
        reason: Callable[[BaseException], str],
        seen: Callable[[str | None], None],
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self._link: Link | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._scripts = scripts
        self._reason = reason
        self._seen = seen
        self._queue: list[tuple[bytes, asyncio.Future[Any]]] = []
        self._scheduled = False
        self._out: set[asyncio.Future[Any]] = set()
        """The batches written and not answered yet (and the reloads)."""
        self.rider: Rider | None = None
        """What adds its commands to each batch (the journal's entries recorded on the loop)."""
        self.batches = 0
        """How many batches were written (for the benchmarks)."""

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """The reply to *command* (one, in RESP), once the batch it joins is answered."""
        future: asyncio.Future[Any] = self.loop.create_future()
        self._queue.append((command, future))
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self.flush)
        return future

    def wake(self) -> None:
        """Write a batch at the next turn of the loop, though no need may be queued (the
        rider has commands): one per turn, the needs' and the rider's together."""
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now (the rider's too), connecting first if there is no link."""
        self._scheduled = False
        link = self._link
        if link is None or link.lost is not None:
            if self._connecting is None:  # the queue waits for the link, then goes at once
                self._connecting = self.loop.create_task(self._connect())
            return
        batch, self._queue = self._queue, []
        if self.rider is not None:
            batch += self.rider.commands()
        if batch:
            self._write(link, batch)

    async def _connect(self) -> None:
        try:
            self._link = await connect(self.url, self.timeout)
        except LinkError as error:
            batch, self._queue = self._queue, []
            self._failed(batch, error)
            if self.rider is not None:
                self.rider.unreachable(self._reason(error))
            return
        finally:
            self._connecting = None
        self.flush()  # what waited for the link (the needs', the rider's)

    def _write(self, link: Link, batch: list[tuple[bytes, asyncio.Future[Any]]]) -> None:
        self.batches += 1
        out: asyncio.Future[None] = self.loop.create_future()  # (what close() waits for)
        self._out.add(out)

        def answered(result: list[Any] | LinkError) -> None:
            # Called as the replies are read: the needs' futures are set in the same
            # callback (their requests go on at the next turn, not one turn later).
            self._out.discard(out)
            out.set_result(None)
            self._answered(batch, result)

        link.send(b"".join(command for command, _ in batch), len(batch), answered)

    def _answered(
        self, batch: list[tuple[bytes, asyncio.Future[Any]]], replies: list[Any] | LinkError
    ) -> None:
        if isinstance(replies, LinkError):
            self._failed(batch, replies)
            return
        again = [i for i, reply in enumerate(replies) if _noscript(reply)]
        if again:  # Redis restarted (its script cache is empty): load them, send those again
            reload = self.loop.create_task(self._reload([batch[i] for i in again]))
            self._out.add(reload)
            reload.add_done_callback(self._out.discard)
            batch = [needed for i, needed in enumerate(batch) if i not in again]
            replies = [reply for i, reply in enumerate(replies) if i not in again]
        failed = None
        for (_, future), reply in zip(batch, replies, strict=True):
            if isinstance(reply, ReplyError):
                failed = self._reason(reply)
                if not future.done():
                    future.set_exception(StoreUnavailable(failed))
            elif not future.done():
                future.set_result(reply)
        self._seen(failed)

    async def _reload(self, batch: list[tuple[bytes, asyncio.Future[Any]]]) -> None:
        link = self._link
        try:
            if link is None or link.lost is not None:
                raise LinkError(link.lost if link else "not connected")
            loads = [packed(("SCRIPT", "LOAD", code)) for code in self._scripts.values()]
            await link.request(b"".join(loads), len(loads))
        except LinkError as error:
            self._failed(batch, error)
            return
        self._write(link, batch)

    def _failed(self, batch: list[tuple[bytes, asyncio.Future[Any]]], error: BaseException) -> None:
        failure = self._reason(error)
        self._seen(failure)
        for _, future in batch:
            if not future.done():
                future.set_exception(StoreUnavailable(failure))

    async def guard(self) -> AsyncGenerator[None, None]:
        """Closes the connection when the loop ends: iterate it once on the loop.

        The loop's owner ends it with ``shutdown_asyncgens`` (``asyncio.run`` and
        the server's thread do), which closes this generator: the connection is
        closed while the loop still runs, whoever forgot to close the store.
        """
        try:
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        """Write what is queued (the rider's entries too), wait (within the timeout) for the
        batches written to be answered, then close the connection."""
        deadline = self.loop.time() + self.timeout
        if self.rider is not None and self.rider.holds():
            self.rider.now()
            self.flush()
        elif self._queue:
            self.flush()
        if self._connecting is not None:
            await asyncio.wait([self._connecting], timeout=self.timeout)
        while self._out and (left := deadline - self.loop.time()) > 0:
            await asyncio.wait(list(self._out), timeout=left)  # (a reload writes again)
        link, self._link = self._link, None
        if link is not None:
            link.close()
            # Closed when the loop has run its close: a loop closed before that holds it.
            await asyncio.wait([link.closed], timeout=self.timeout)


def _noscript(reply: object) -> bool:
    return isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT")
