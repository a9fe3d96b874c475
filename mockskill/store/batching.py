"""Needs met on the event loop: those of one loop turn in one pipelined round trip.

The transport plays many connections on one loop; each request that needs
the store awaits its answer. Sending each need alone would cost a round
trip per request and a task per send. Instead the needs that arrive during
one turn of the loop are queued, and the next turn (``call_soon``) writes
them all at once on one connection and reads their replies in order
(a pipeline, not a transaction: each command is a script, atomic by itself).
At most one batch is on the wire at a time: what arrives meanwhile goes in
the next one, so the needs reach Redis in the order they were made (the
requests pipelined on one keep-alive connection take their positions in
their order) and a busy loop sends bigger batches, not more of them.

A batch that fails (Redis gone, a reply later than the socket timeout)
fails every need in it with :class:`~mockskill.engine.store.StoreUnavailable`;
a script Redis no longer knows (``NOSCRIPT``: it restarted) is loaded again
and its commands sent again, once (they did not run).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..engine.store import StoreUnavailable
from .link import Link, LinkError, ReplyError, connect
from .needs import packed


class Batcher:
    """Sends the commands of each loop turn in one pipeline on one :class:`Link` to *url*.

    One connection is enough: one batch at a time is on the wire. It is
    made on first use and again after a failure. *scripts* maps each
    script's digest to its source (for ``NOSCRIPT``); *reason* turns an
    error into the text a :class:`StoreUnavailable` says; *seen* is told of
    each batch's outcome (None: it succeeded) for the store's health.
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
        self._scripts = scripts
        self._reason = reason
        self._seen = seen
        self._queue: list[tuple[bytes, asyncio.Future[Any]]] = []
        self._scheduled = False
        self._sending: asyncio.Task[None] | None = None
        self.batches = 0
        """How many pipelines were sent (for the benchmarks)."""

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """The reply to *command* (one, in RESP), once the batch it joins has been answered."""
        future: asyncio.Future[Any] = self.loop.create_future()
        self._queue.append((command, future))
        if not self._scheduled and self._sending is None:
            self._scheduled = True
            self.loop.call_soon(self._start)
        return future

    def _start(self) -> None:
        self._scheduled = False
        batch, self._queue = self._queue, []
        if batch:
            self._sending = self.loop.create_task(self._send(batch))

    async def _send(self, batch: list[tuple[bytes, asyncio.Future[Any]]]) -> None:
        self.batches += 1
        try:
            replies = await self._pipeline([command for command, _ in batch])
            again = [i for i, reply in enumerate(replies) if _noscript(reply)]
            if again:  # Redis restarted (its script cache is empty): load them, send those again
                await self._pipeline(
                    [packed(("SCRIPT", "LOAD", c)) for c in self._scripts.values()]
                )
                sent = await self._pipeline([batch[i][0] for i in again])
                for i, reply in zip(again, sent, strict=True):
                    replies[i] = reply
        except LinkError as error:
            failure = self._reason(error)
            self._seen(failure)
            for _, future in batch:
                if not future.done():
                    future.set_exception(StoreUnavailable(failure))
        else:
            failed = None
            for (_, future), reply in zip(batch, replies, strict=True):
                if isinstance(reply, ReplyError):
                    failed = self._reason(reply)
                    if not future.done():
                        future.set_exception(StoreUnavailable(failed))
                elif not future.done():
                    future.set_result(reply)
            self._seen(failed)
        finally:
            self._sending = None
            if self._queue:  # what arrived meanwhile: the next batch, at once
                self._start()

    async def _pipeline(self, commands: list[bytes]) -> list[Any]:
        """Each command's reply (a ReplyError for one that failed), in one round trip."""
        link = self._link
        if link is None or link.lost is not None:
            link = self._link = await connect(self.url, self.timeout)
        return await link.request(b"".join(commands), len(commands))

    async def guard(self) -> AsyncIterator[None]:
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
        """Wait for the batch on the wire, then close the connection."""
        sending = self._sending
        if sending is not None:
            await asyncio.wait([sending])
        link, self._link = self._link, None
        if link is not None:
            link.close()
            # Closed when the loop has run its close: a loop closed before that holds it.
            await asyncio.wait([link.closed], timeout=self.timeout)


def _noscript(reply: object) -> bool:
    return isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT")
