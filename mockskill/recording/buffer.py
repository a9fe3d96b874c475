"""A recording while it runs: the exchanges a proxy hands over, kept in order and bounded.

:class:`Recording` is the :class:`~mockskill.engine.exchange.Recorder` the
engine calls on the serving loop for every proxied exchange. Its API is
locked: :meth:`Recording.add` (the loop's) takes one lock for the time of a
list append, and the readers (:meth:`~Recording.exchanges`,
:meth:`~Recording.status`, on the admin's threads or a signal handler) hold
it only to copy the list, so ``add`` never waits on anything slow.

The bound keeps the *first* exchanges: a recording is a consumer's run from
its start, and a sequence cut at its front would replay the wrong answers.
What comes after the bound is counted (:attr:`Status.dropped`) and said, in
the status and in the file's header.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
import time
from dataclasses import dataclass

from ..engine.exchange import Exchange

MAX_EXCHANGES = 2000
"""Exchanges a recording keeps by default."""
MAX_BYTES = 512 * 1024
"""Request and answer bodies a recording keeps by default, together (a relayed stream's
events counted beside its body): the file it
becomes stays under the loader's 1 MiB a file."""


@dataclass(frozen=True)
class Status:
    """What a recording holds so far (``/__admin/recordings/status``)."""

    recording: bool
    target: str | None
    since: float | None
    """When it started (seconds since the epoch)."""
    count: int
    """Exchanges kept."""
    dropped: int
    """Exchanges that came after the bound and were not kept."""
    bytes: int
    """Body bytes kept (requests and answers)."""

    def as_json(self) -> dict[str, object]:
        return {
            "recording": self.recording,
            "target": self.target,
            "since": self.since,
            "count": self.count,
            "dropped": self.dropped,
            "bytes": self.bytes,
        }


class Recording:
    """The exchanges of one recording, in the order they were handed over (a Recorder)."""

    def __init__(
        self,
        target: str | None = None,
        *,
        max_exchanges: int = MAX_EXCHANGES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        if max_exchanges < 1 or max_bytes < 1:
            raise ValueError("a recording keeps at least one exchange and one byte")
        self.target = target
        self.max_exchanges = max_exchanges
        self.max_bytes = max_bytes
        self.since = time.time()
        self._lock = threading.Lock()
        self._kept: list[Exchange] = []
        self._bytes = 0
        self._dropped = 0
        self._open = True

    def add(self, exchange: Exchange) -> None:
        """Keep *exchange*, or count it as dropped past the bound (the loop's: never waits)."""
        size = len(exchange.body) + len(exchange.response_body)
        if exchange.stream is not None:  # its events, kept beside the body's bytes
            size += sum(len(event.data) for event in exchange.stream.events)
        with self._lock:
            if (
                not self._open
                or len(self._kept) >= self.max_exchanges
                or self._bytes + size > self.max_bytes
            ):
                self._dropped += self._open
                return
            self._kept.append(exchange)
            self._bytes += size

    def close(self) -> None:
        """Keep nothing more (a stopped recording: what comes later is not counted)."""
        with self._lock:
            self._open = False

    def exchanges(self) -> tuple[Exchange, ...]:
        """What was kept, in order (a copy)."""
        with self._lock:
            return tuple(self._kept)

    def status(self) -> Status:
        with self._lock:
            return Status(
                self._open, self.target, self.since, len(self._kept), self._dropped, self._bytes
            )


def dump(exchanges: tuple[Exchange, ...]) -> str:
    """*exchanges* as JSON (bodies in base64), to keep a recording no file could be made of."""

    def plain(exchange: Exchange) -> dict[str, object]:
        out = dataclasses.asdict(exchange)
        for key in ("body", "response_body"):
            out[key] = base64.b64encode(getattr(exchange, key)).decode()
        if exchange.stream is not None:
            stream = exchange.stream
            events = [event._asdict() for event in stream.events]
            out["stream"] = {**stream._asdict(), "events": events}
        return out

    return json.dumps([plain(e) for e in exchanges], indent=1) + "\n"
