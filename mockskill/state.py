"""All mutable runtime state, behind one lock.

Sequence positions per session and endpoint, the bounded request journal,
and the seeded random generator live here and nowhere else. The interface
is small on purpose (advance, record, read, reset) so that a shared backend
could replace memory when several processes serve one scenario set.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from .catalog import Retry

T = TypeVar("T")
DEFAULT_SESSION = "default"
DEFAULT_JOURNAL_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class Entry:
    """One request as the server answered it; recorded exactly once."""

    id: int
    started: float
    """Wall-clock time the request arrived (seconds since the epoch)."""
    finished: float
    session: str
    method: str
    path: str
    status: int | None
    """The HTTP status answered; None when no answer was sent (a fault, a client gone)."""
    endpoint: str
    """``list``, ``describe``, ``invoke``, ``route`` or ``unmatched``."""
    skill: str | None = None
    scenario: str | None = None
    step: int | None = None
    """Index of the step served in its sequence (None: not from a sequence)."""
    position: int | None = None
    """The request's number in its sequence for this session (0-based)."""
    error_code: str | None = None
    retry: Retry | None = None
    forced: bool = False
    """Whether ``Mockskill-Error`` chose the answer."""
    outage: bool = False
    """Whether the scenario's outage window answered instead of the sequence."""
    choice: int | None = None
    """Which outcome of a random step was drawn (its index)."""
    delay_ms: float | None = None
    """The delay drawn for this request."""
    execution_ms: float | None = None
    """The execution time drawn for this request."""
    fault: str | None = None
    """The transport fault done to the connection."""
    client_left: float | None = None
    """Wall-clock time the client closed the connection before the answer (its timeout)."""
    near_misses: tuple[dict[str, Any], ...] = ()

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["near_misses"] = list(self.near_misses)
        return data


class State:
    """Positions, journal and random generator of one server; thread-safe."""

    def __init__(self, *, seed: int | None = None, journal_size: int = DEFAULT_JOURNAL_SIZE):
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self.seed = seed
        self._lock = threading.Lock()
        self._positions: dict[tuple[str, str], int] = {}
        self._journal: deque[Entry] = deque(maxlen=journal_size)
        self._ids = itertools.count(1)
        self._streams: dict[str, random.Random] = {}
        self._activated: dict[str, float] = {}

    def advance(self, session: str, key: str) -> int:
        """Take the next position of sequence *key* for *session* (0 for the first request)."""
        with self._lock:
            position = self._positions.get((session, key), 0)
            self._positions[(session, key)] = position + 1
            return position

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def record(self, entry: Entry) -> None:
        with self._lock:
            self._journal.append(entry)

    def journal(self, session: str | None = None) -> list[Entry]:
        """Recorded requests, oldest first, optionally of one session."""
        with self._lock:
            entries = list(self._journal)
        if session is None:
            return entries
        return [e for e in entries if e.session == session]

    def reset(self, session: str | None = None, keys: Iterable[str] | None = None) -> None:
        """Forget positions and journal: of everything, of one session, or of some sequences."""
        wanted = set(keys) if keys is not None else None
        with self._lock:
            if session is None and wanted is None:
                self._positions.clear()
                self._journal.clear()
                self._streams.clear()
                return
            self._positions = {
                (s, k): n
                for (s, k), n in self._positions.items()
                if not ((session is None or s == session) and (wanted is None or k in wanted))
            }
            if wanted is None:
                self._journal = deque(
                    (e for e in self._journal if e.session != session), maxlen=self._journal.maxlen
                )

    def draw(self, stream: str, seed: int | None, draw: Callable[[random.Random], T]) -> T:
        """Run *draw* on the generator of *stream*, made on first use.

        A stream's generator is seeded with *seed* (else the server's) and
        the stream's name: the same seed and the same requests in a stream
        replay the same draws, whatever other streams do, and two streams
        draw independently.
        """
        with self._lock:
            rng = self._streams.get(stream)
            if rng is None:
                rng = random.Random(f"{self.seed if seed is None else seed}/{stream}")
                self._streams[stream] = rng
            return draw(rng)

    def activate(self, names: Iterable[str]) -> None:
        """Note that scenarios *names* start now (for their outage windows)."""
        now = time.monotonic()
        with self._lock:
            for name in names:
                self._activated[name] = now

    def since_activated(self, name: str) -> float:
        """Seconds since scenario *name* was activated."""
        with self._lock:
            return time.monotonic() - self._activated.get(name, 0.0)
