"""The state interface: what the engine asks of the store, as data, and the store's faces.

Everything mutable that two replicas must agree on goes through a
:class:`Store`: the embedded in-memory one (:class:`~mockskill.engine.state.State`,
the default) or a shared one (``mockskill.store.redis``, for ``--state
redis://...``). The engine never calls a shared store itself: where a
request's plan needs the store (a sequence step, a token use, a token
issued), the engine hands out the *need* as a value (:class:`Take`,
:class:`UseToken`, :class:`IssueToken`, a scenario state's :class:`ReadState` and
:class:`SetState`) and is resumed with the answer. An
in-memory store answers inline (:meth:`Store.answer`); a remote one is
awaited by the transport (:meth:`Store.answer_async`), so the loop never
blocks on a round trip. Each need is one atomic step on either backend (a
Lua script on Redis).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

if TYPE_CHECKING:
    from .entries import Entry


class Take(NamedTuple):
    """Take *session*'s next step of sequence *key*, unless *scenario*'s outage covers now.

    Atomically: if *outage* (``[start_ms, end_ms)`` after *scenario* was
    activated) holds the time now, no position is taken; else the next
    position of *key* in *generation* (see :meth:`Store.restart`). When
    *draws*, the next draw number of the session's stream for *scenario* is
    taken too (the engine seeds that draw's generator from the scenario's
    seed, the stream, the session and the number: the same seed and the same
    requests replay the same values whichever replica serves them).

    A NamedTuple, not a frozen dataclass like the other needs: one is made per
    request, and a frozen dataclass's ``__init__`` (``object.__setattr__`` per
    field) cost more than the rest of the Take's path.
    """

    session: str
    key: str
    generation: int
    scenario: str
    """The scenario the sequence is in ('' for none): its outage and its draws."""
    outage: tuple[float, float] | None
    draws: bool
    limit: Bucket | None = None
    """The rate limit's token bucket the request spends one token of first (None: no
    limit). Without a token, nothing else is taken: the request is refused, not played."""


class Bucket(NamedTuple):
    """A token bucket (a ``rate_limit:``): it holds *capacity* tokens at most (the burst),
    gains *refill* tokens a second, and starts full. Spending one (a :class:`Take` with a
    limit) first refills it for the time since it was last spent, on the store's clock
    (one clock for every replica of a shared store)."""

    key: str
    """Which bucket: the scenario, the endpoint and the limited value (a session, a
    credential's fingerprint, a client address, a header's or a body field's value)."""
    capacity: int
    refill: float
    """Tokens a second (> 0; may be fractional: 0.5 is one token every two seconds)."""
    session: str | None
    """The session the bucket belongs to when the limit is per session: a reset of that
    session empties it. None: shared by the sessions (per credential, client, ...)."""


Spent: TypeAlias = tuple[bool, int, int, int]
"""What spending a token of a :class:`Bucket` came to: (admitted, remaining, next_ms,
full_ms), read by the indexes below or unpacked. A plain tuple, not a named one: one is
made per limited request, and a plain tuple is one step to make (a named tuple, through
``tuple.__new__``, several) and the collector stops watching it at its first pass.

- *admitted*: whether a token was there (and is now spent): the request is played;
- *remaining*: whole tokens left after this request;
- *next_ms*: milliseconds until the bucket holds one whole token again (0: it holds one
  now): the wait a refused request is advised;
- *full_ms*: milliseconds until the bucket is full again (0: it is full).
"""
ADMITTED, REMAINING, NEXT_MS, FULL_MS = range(4)
"""A :data:`Spent`'s fields, by index."""


class Taken(NamedTuple):
    """What a :class:`Take` took."""

    position: int | None
    """The sequence position taken (0 for a session's first request); None: in the outage,
    or refused by the rate limit (not :data:`ADMITTED`)."""
    draw: int
    """The draw number taken (0, 1, ...), or -1 when none was asked for (or refused)."""
    spent: Spent | None = None
    """The token spent of the Take's :attr:`Take.limit` (None: it has none)."""


@dataclass(frozen=True, slots=True)
class UseToken:
    """Spend one use of an issued OAuth2 token; answered with its scopes, or None
    when it is unknown, expired or used up (then it is forgotten)."""

    token: str


@dataclass(frozen=True, slots=True)
class IssueToken:
    """Remember an issued token, its scopes, lifetime (*seconds*) and *uses* (None: no bound)."""

    token: str
    scopes: frozenset[str]
    seconds: int | None
    uses: int | None


@dataclass(frozen=True, slots=True)
class ReadState:
    """The state *session* is in, in *scenario*: answered with its name, or None while no
    step has moved it (the initial state). Only asked for an endpoint whose cases
    require a state."""

    session: str
    scenario: str


@dataclass(frozen=True, slots=True)
class SetState:
    """Move *session* into *state* in *scenario* (a step's ``set_state:``); answered None."""

    session: str
    scenario: str
    state: str


@dataclass(frozen=True, slots=True)
class Recall:
    """What *session*'s skill *skill* did with ``Idempotency-Key`` *key*; one it does not
    know (or whose reservation lapsed) is reserved, in flight, for *reserve_ms* at most.

    Answered with a :class:`Recalled`. Only a skill that honours the key asks (see
    :mod:`.idempotency`): the key's first execution and its body's *digest* are kept.
    """

    session: str
    skill: str
    key: str
    digest: str
    reserve_ms: int


class Recalled(NamedTuple):
    """A :class:`Recall`'s answer: ``new`` (reserved now), ``replay`` (*answer*: the first
    answer, as :func:`.idempotency.encoded` made it), ``conflict`` (another body), or
    ``in_flight`` (the first still runs: for *wait_ms* more)."""

    state: str
    answer: bytes | None = None
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class Settle:
    """The key a :class:`Recall` reserved ran: keep *answer* (encoded), ready to replay in
    *busy_ms*; or (*answer* None) it did not run: forget the reservation. Answered None."""

    session: str
    skill: str
    key: str
    digest: str
    answer: bytes | None
    busy_ms: int


class Submit(NamedTuple):
    """Start a long-running task of *skill* in *session*, unless the server already holds
    *limit* live tasks (then none is started: :attr:`Submitted.number` None). The store
    keeps it at least *keep_ms* (its scripted life and time-to-live), longer when a later
    :class:`Touch` asks."""

    session: str
    skill: str
    """The task's skill, scenario-qualified (what the engine finds its ``task:`` by)."""
    keep_ms: int
    limit: int
    """The live tasks the server holds at most (``--max-tasks``)."""
    callback: str = ""
    """What any replica needs to send the task's callbacks (its receiver, how its answers'
    URLs are filled: :func:`.callbacks.follow_text`), kept with the task and handed back in
    each :class:`TaskRecord`; opaque to the store. Empty: the task has no receiver."""


class Submitted(NamedTuple):
    """What a :class:`Submit` came to."""

    number: int | None
    """The task's number, store-wide (0, 1, ...; never again, a reset included; its id is
    made from it and the session); None: refused, the server holds its limit of live
    tasks."""
    at_ms: float
    """When it was submitted, on the store's clock (epoch ms: one clock for all replicas)."""


class TaskEvent(NamedTuple):
    """Something the consumer did to a task besides polling it."""

    action: str
    """``cancel`` or ``input`` (an input the engine found valid)."""
    at_ms: float
    """When, on the store's clock (epoch ms)."""
    polls: int
    """The task's polls counted before it."""
    fits: tuple[int, ...] = ()
    """An input's: the phases (indexes into ``task.life``) whose ``expects:`` its body
    meets; it counts only if the task is in one of them at its moment."""


class Touch(NamedTuple):
    """Task *number* of *session*, a task of *skill*, touched atomically: a ``poll``
    counted, a ``cancel`` or an ``input`` logged (:class:`TaskEvent`, with *fits*; at most
    :data:`MAX_TASK_EVENTS` kept), or a ``look`` (the courier's: nothing counted or logged),
    and kept at least *keep_ms* from now. Answered a
    :class:`TaskRecord`, or None when the store holds no such task of *skill* (never
    submitted, forgotten after its time, or another skill's: nothing counted then)."""

    session: str
    number: int
    action: str
    keep_ms: int
    skill: str
    """The skill whose status URL was asked (as :attr:`Submit.skill`)."""
    fits: tuple[int, ...] = ()
    """An input's phases whose ``expects:`` its body meets (:attr:`TaskEvent.fits`)."""


MAX_TASK_EVENTS = 16
"""Cancels and inputs a store keeps per task (later ones are not logged: a task's life has
fewer input phases than this, and only its first accepted cancel counts)."""


class TaskRecord(NamedTuple):
    """A task as the store holds it: the engine works out its state from this and the
    scenario's ``task:`` (the store never knows a scenario)."""

    skill: str
    submitted_ms: float
    polls: int
    """Polls counted, this one included for a ``poll`` Touch (its number is ``polls - 1``)."""
    events: tuple[TaskEvent, ...]
    now_ms: float
    """The store's clock when it answered (epoch ms)."""
    callback: str = ""
    """Its :attr:`Submit.callback`, as the submit left it."""


class Claim(NamedTuple):
    """Claim *key* (one delivery of a task's callbacks: its change's number and copy) on
    task *number* of *session*, for the replica that asks: answered True the first time
    while the store holds the task, False after (another replica claimed it, or it is
    forgotten: reset or over). Every replica following a task plans the same deliveries;
    the one whose claim is answered True sends it, so each is sent once across replicas."""

    session: str
    number: int
    key: str


Need = (
    Take | UseToken | IssueToken | ReadState | SetState | Recall | Settle | Submit | Touch | Claim
)
NeedAnswer = Taken | Recalled | Submitted | TaskRecord | frozenset[str] | str | bool | None
"""What a need is answered with: a :class:`Taken`, a :class:`Recalled`, a token's scopes
(or None), a state's name (or None), a claim's bool, None."""


class StoreUnavailable(Exception):
    """A shared store could not answer (unreachable, timed out): the request cannot be
    planned. Skill requests then get ``MOCKSKILL_STATE_UNAVAILABLE`` (503), which is not a
    protocol category, so no consumer mistakes it for a scripted failure."""


class Health(NamedTuple):
    """How the store is: ``ok``, or ``degraded`` with the reason; entries it could not keep."""

    status: str
    reason: str | None = None
    lost_entries: int = 0
    backend: str = "memory"
    """Which store: ``memory``, or a shared one's URL (its password masked)."""


class Store(Protocol):
    """Sequence positions, scenario states, tokens, outage clocks, draws and the journal of
    a server."""

    seed: int
    """The seed draws use when a scenario sets none."""
    digest_key: bytes
    """Keys the journal's digests (request bodies, credential fingerprints): the same for
    every process sharing the store, so that a retry another replica served is known for
    the same request; secret, so that a short body cannot be guessed back from its digest."""
    remote: bool
    """Whether needs must be awaited (:meth:`answer_async`) rather than answered inline."""
    replica: str | None
    """This process's name in a shared journal; None for an embedded store."""

    @property
    def capacity(self) -> int:
        """How many entries the journal keeps (the oldest go first beyond it)."""
        ...

    def answer(self, need: Need) -> NeedAnswer:
        """Answer *need* now (blocking on a remote store: only off the loop)."""
        ...

    async def answer_async(self, need: Need) -> NeedAnswer:
        """Answer *need* on the event loop; raises :class:`StoreUnavailable`."""
        ...

    def next_id(self) -> int:
        """A journal id for an entry about to be recorded (a shared journal may renumber)."""
        ...

    def record(self, entry: Entry) -> None:
        """Keep *entry* in the journal; never blocks (a shared store sends it in batches)."""
        ...

    def journal(self, session: str | None = None) -> list[Entry]:
        """Recorded requests, oldest first, optionally of one session (all replicas')."""
        ...

    def reset(self, session: str | None = None, keys: Iterable[str] | None = None) -> None:
        """Forget what was played: everything, one session's, or some sequences' positions."""
        ...

    def restart(self, keys: Iterable[str]) -> dict[str, int]:
        """Restart sequences *keys* for every session (a new generation each); all generations."""
        ...

    def activate(self, names: Iterable[str]) -> None:
        """Note that scenarios *names* start now (their outage windows count from now)."""
        ...

    def hide(self, secret: str) -> None:
        """Never keep *secret* (the admin token) in the journal from now on."""
        ...

    def compact(self, budget: int = ...) -> bool:
        """Pack up to *budget* journal entries kept in memory; True once all are."""
        ...

    def health(self) -> Health:
        """How the store is now."""
        ...

    def close(self) -> None:
        """Let go of connections and background work (the store is not used after)."""
        ...
