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
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .catalog import Retry

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
    status: int
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
        self._random = random.Random(seed)

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

    def random(self) -> float:
        """A draw from the seeded generator (the same seed replays the same draws)."""
        with self._lock:
            return self._random.random()
