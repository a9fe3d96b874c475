"""All mutable runtime state, behind one lock.

Sequence positions per session and endpoint, the bounded request journal,
and the seeded random generator live here and nowhere else. The interface
is small on purpose (advance, record, read, reset) so that a shared backend
could replace memory when several processes serve one scenario set.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, TypeVar

from ..protocol.catalog import Retry

T = TypeVar("T")
DEFAULT_SESSION = "default"
DEFAULT_JOURNAL_SIZE = 10_000
DEFAULT_MAX_SESSIONS = 10_000
MAX_SESSION_NAME = 256
"""The longest session name served (characters); a longer one is refused with 400."""
MAX_PATH = 512
"""The longest request path an entry keeps (characters); a longer one is kept cut, marked."""
MAX_TEXT = 128
"""The longest of any other text a client chose that an entry keeps (the method, a
skill id from the path, header values, the path and method quoted in a near miss)."""
MAX_ENTRY_BYTES = 16 * 1024
"""What one journal entry can hold in memory at most, whatever the request (docs/admin.md)."""
MASK = "***"
"""What a hidden secret (:meth:`State.hide`) reads as in the journal."""


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """*text*, or its first *limit* characters and a marker saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more characters]"


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Controls, line and paragraph separators, and bidi overrides: text that prints
other than it reads (a client's ``/x%0Aforged`` would add a line to a report)."""


def escaped(text: str) -> str:
    """*text* with every character of :data:`_UNPRINTABLE` percent-escaped (UTF-8), as in a URL."""
    return _UNPRINTABLE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


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
    """``list``, ``describe``, ``invoke``, ``route``, ``token``, ``authorize``, ``unmatched``,
    or ``refused`` (turned away before matching: a body or a session name over the limit)."""
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
    """Wall-clock time the client closed the connection before the answer was complete."""
    headers_sent: float | None = None
    """For a slow body (a dribble): wall-clock time its status line and headers (with
    any ``Retry-After``) went out, what a client can act on before the body; then
    ``finished`` is when its last byte went out or, with ``client_left``, when the
    client abandoned it. None for an answer sent whole (at ``finished``) or not at all."""
    near_misses: tuple[dict[str, Any], ...] = ()
    credential: str | None = None
    """The credential the request carried, as its kind and a fingerprint keyed per
    server (``bearer hmac-sha256:…``, ``api_key hmac-sha256:…``; ``client ID`` at the
    token endpoint); never the secret. None: no credential was presented."""
    protocol_version: str | None = None
    """The consumer's ``Skill-Protocol-Version`` header as sent (None: not sent)."""
    body_digest: str | None = None
    """The request body as a digest keyed per server (``hmac-sha256:…``), so that
    the retry audit can tell an unchanged retry from a changed one; never the
    body. None: no body."""
    invalid_descriptor: bool = False
    """Whether the answer was a Skill Descriptor that the reference validator
    rejects: the consumer's own ``VALIDATION_ERROR``."""
    stopped: bool = False
    """Whether the server, stopping, cut the request after its grace period (no answer)."""

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["retry"] = None if self.retry is None else self.retry.as_json()
        data["near_misses"] = list(self.near_misses)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        """The entry :meth:`as_json` gave (also after a JSON round trip, as the journal serves it).

        Keys it does not know are left out, so that a newer server's journal
        still reads; a missing field raises ValueError naming it.
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        required = [
            f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
        ]
        missing = [name for name in required if name not in values]
        if missing:
            raise ValueError(
                f"a journal entry needs the fields {', '.join(required)}; "
                f"found none for {', '.join(missing)}"
            )
        retry = values.get("retry")
        if retry is not None:
            values["retry"] = Retry(int(retry["suggested_delay_ms"]), int(retry["max_attempts"]))
        values["near_misses"] = tuple(dict(m) for m in values.get("near_misses") or ())
        return cls(**values)


_BOUNDED = (
    ("session", MAX_SESSION_NAME),
    ("method", MAX_TEXT),
    ("path", MAX_PATH),
    ("skill", MAX_TEXT),
    ("credential", MAX_TEXT),
    ("protocol_version", MAX_TEXT),
)
"""The entry fields a client's text goes into, and how much of it each keeps."""


@dataclass
class _Token:
    scopes: frozenset[str]
    expires: float | None
    uses_left: int | None


class _Session:
    """What one session has done: positions in sequences, and its random generators."""

    __slots__ = ("positions", "retired", "streams")

    def __init__(self) -> None:
        self.positions: dict[str, int] = {}
        self.retired: dict[str, tuple[int, int]] = {}
        """Per key, the generation restarted last and the next position in it: requests
        matched before the restart (still in flight) count on here, not in the new one."""
        self.streams: dict[str, random.Random] = {}


class State:
    """Positions, journal and random generators of one server; thread-safe.

    At most *max_sessions* sessions are remembered: when a new one would
    exceed that, the one least recently used is forgotten (and starts
    afresh, as after a reset, if it comes back), so that a client sending a
    new session name with every request cannot grow memory without bound.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        journal_size: int = DEFAULT_JOURNAL_SIZE,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if journal_size < 1:
            raise ValueError(f"journal_size must be at least 1, not {journal_size}")
        if seed is None:
            seed = random.SystemRandom().randrange(2**32)
        self.seed = seed
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._journal: deque[Entry] = deque(maxlen=journal_size)
        self._ids = itertools.count(1)
        self._activated: dict[str, float] = {}
        self._generations: dict[str, int] = {}
        self._hidden: tuple[str, ...] = ()
        self._tokens: OrderedDict[str, _Token] = OrderedDict()

    def _session(self, name: str) -> _Session:
        """*name*'s record, now the most recently used (hold the lock)."""
        session = self._sessions.get(name)
        if session is None:
            session = self._sessions[name] = _Session()
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(name)
        return session

    def advance(self, session: str, key: str, generation: int | None = None) -> int:
        """Take the next position of sequence *key* for *session* (0 for the first request).

        *generation* is the key's generation (:meth:`restart`) that the
        caller matched the request on; None: the current one. A request
        matched before a restart of *key* counts on in the sequence it
        matched, so it never takes a position of the restarted one.
        """
        with self._lock:
            record = self._session(session)
            if generation is not None and generation != self._generations.get(key, 0):
                last, position = record.retired.get(key, (generation, 0))
                position = position if last == generation else 0
                record.retired[key] = (generation, position + 1)
                return position
            positions = record.positions
            position = positions.get(key, 0)
            positions[key] = position + 1
            return position

    def restart(self, keys: Iterable[str]) -> dict[str, int]:
        """Restart sequences *keys* for every session: a new generation of each; return all.

        The engine builds each routing table on the generations this
        returns (:meth:`advance` takes them), so that a request matched on
        an older table cannot take position 0 of a restarted sequence.
        """
        with self._lock:
            self._restart(set(keys), None, new_generation=True)
            return dict(self._generations)

    def _restart(
        self, keys: set[str], session: str | None, *, new_generation: bool = False
    ) -> None:
        """Positions of *keys* start afresh, for *session* or every one (hold the lock).

        With *new_generation* (for every session: a new table is served), the
        positions taken so far are kept for the requests still in flight on the
        old generation; else the table served stays, and so does its generation.
        """
        if new_generation:
            for key in keys:
                self._generations[key] = self._generations.get(key, 0) + 1
        for name, record in self._sessions.items():
            if session is None or name == session:
                for key in keys & (record.positions.keys() | record.retired.keys()):
                    position = record.positions.pop(key, None)
                    if new_generation and position is not None:
                        record.retired[key] = (self._generations[key] - 1, position)
                    else:
                        record.retired.pop(key, None)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def record(self, entry: Entry) -> None:
        """Keep *entry*, its texts cut to bounds (:data:`MAX_PATH` ...), secrets hidden."""
        entry = self._kept(entry)
        with self._lock:
            self._journal.append(entry)

    def hide(self, secret: str) -> None:
        """Never keep *secret* (the admin token) in the journal: it reads :data:`MASK`."""
        if secret and secret not in self._hidden:
            self._hidden = (*self._hidden, secret)

    def _kept(self, entry: Entry) -> Entry:
        """*entry* as the journal keeps it: what one request can make it hold is bounded.

        A client chooses the session name, method, path and header values;
        kept whole, a 60 KB value times the journal's entries would be
        gigabytes. Cut ones end with a marker saying how much was cut.
        Characters that print other than they read are kept escaped, so that
        no client text can forge a line of a report printed from the journal.
        """
        changes: dict[str, Any] = {}
        for name, limit in _BOUNDED:
            value = getattr(entry, name)
            if value is not None:
                kept = shorten(escaped(self._masked(value)), limit)
                if kept != value:
                    changes[name] = kept
        if entry.near_misses:
            near = tuple(
                {
                    **miss,
                    "reasons": [
                        shorten(escaped(self._masked(r)), MAX_PATH) for r in miss["reasons"]
                    ],
                }
                for miss in entry.near_misses
            )
            if near != entry.near_misses:
                changes["near_misses"] = near
        return dataclasses.replace(entry, **changes) if changes else entry

    def _masked(self, text: str) -> str:
        for secret in self._hidden:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    @property
    def capacity(self) -> int:
        """How many entries the journal keeps (the oldest go first beyond it)."""
        maxlen = self._journal.maxlen
        assert maxlen is not None
        return maxlen

    def journal(self, session: str | None = None) -> list[Entry]:
        """Recorded requests, oldest first, optionally of one session."""
        with self._lock:
            entries = list(self._journal)
        if session is None:
            return entries
        return [e for e in entries if e.session == session]

    def reset(self, session: str | None = None, keys: Iterable[str] | None = None) -> None:
        """Forget what was played: everything, one session's, or some sequences' positions.

        Everything, or a whole session, means positions, random draws and
        journal entries; *keys* name sequences whose positions alone restart.
        """
        with self._lock:
            if keys is not None:
                self._restart(set(keys), session)
            elif session is None:
                self._sessions.clear()
                self._journal.clear()
                self._tokens.clear()
            else:
                self._sessions.pop(session, None)
                self._journal = deque(
                    (e for e in self._journal if e.session != session), maxlen=self._journal.maxlen
                )

    def draw(
        self, session: str, stream: str, seed: int | None, draw: Callable[[random.Random], T]
    ) -> T:
        """Run *draw* on *session*'s generator for *stream* (a scenario), made on first use.

        It is seeded with *seed* (else the server's), the stream's and the
        session's names: the same seed and the same requests in a session
        replay the same draws, whatever other sessions do, and two sessions
        draw independently.
        """
        with self._lock:
            streams = self._session(session).streams
            rng = streams.get(stream)
            if rng is None:
                rng = random.Random(f"{self.seed if seed is None else seed}/{stream}/{session}")
                streams[stream] = rng
            return draw(rng)

    def issue_token(
        self, token: str, scopes: frozenset[str], seconds: int | None, uses: int | None
    ) -> None:
        """Remember an issued token (the oldest are forgotten beyond *max_sessions*)."""
        expires = None if seconds is None else time.monotonic() + seconds
        with self._lock:
            self._tokens[token] = _Token(scopes, expires, uses)
            while len(self._tokens) > self.max_sessions:
                self._tokens.popitem(last=False)

    def use_token(self, token: str) -> frozenset[str] | None:
        """The scopes of an issued token, spending one of its uses; None if unknown or expired."""
        with self._lock:
            issued = self._tokens.get(token)
            if issued is None:
                return None
            if issued.expires is not None and time.monotonic() >= issued.expires:
                del self._tokens[token]
                return None
            if issued.uses_left is not None:
                if issued.uses_left <= 0:
                    del self._tokens[token]
                    return None
                issued.uses_left -= 1
            return issued.scopes

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
