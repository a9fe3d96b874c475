"""The plan the transport plays for one request: what to answer, and how; and how it went.

A plan is data. Whoever decides (the engine) builds it without touching a
socket or a clock; the transport (:mod:`mockskill.transport.connection`)
plays it with timers on the event loop. That split is what makes the
deciding side testable without a server, and lets one loop hold thousands of
waiting requests without a thread each.

A plan is, in the order it is played:

1. :attr:`Plan.waits` — pauses before the answer (a delay, a hang, an
   execution). A wait with a :class:`Cut` ends early, at ``after_ms``, with
   the cut's answer instead of the plan's: the skill's ``timeout_ms``
   cutting an execution short. Every wait ends at once when the client
   leaves, and the client's departure is reported, not the answer.
2. the answer — :attr:`Plan.answer`, sent whole, or :attr:`Plan.dribble`
   (its body in timed chunks), or replaced by a transport :attr:`Plan.fault`;
3. what the connection does after: stay open (HTTP/1.1 keep-alive), close
   with ``Connection: close`` (:attr:`Plan.close`), or one of the faults that
   only keep-alive makes possible (:class:`KeepAlive`).

The transport reports back what happened as an :class:`Outcome` (client
left at, headers sent at, last byte at, cut), which the engine journals.
Both live here, in the engine, which produces the one and reads the other;
the transport (:mod:`mockskill.transport`) imports them.

The transport owns the framing headers (``Content-Length``,
``Transfer-Encoding``, ``Connection``): the ones in :attr:`Answer.headers` are
not sent, so a plan cannot frame its answer wrongly by accident; framing
wrongly on purpose is what :data:`Fault` is for.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, Protocol

from .forwarding import HOP_BY_HOP, Relayed, Upstream, upstream_journal
from .wire import FRAMING_HEADERS, Answer, Fault

__all__ = [
    "FRAMING_HEADERS",
    "HOP_BY_HOP",
    "STREAM_ENDINGS",
    "Answer",
    "Cut",
    "Dribble",
    "Fault",
    "KeepAlive",
    "Measured",
    "Outcome",
    "Plan",
    "Relayed",
    "Stale",
    "StreamPiece",
    "StreamPlay",
    "Streamed",
    "Upstream",
    "Wait",
    "WaitKind",
    "upstream_journal",
]
"""The plan's types; an answer and a fault (:mod:`.wire`) and a proxy step's part
(:mod:`.forwarding`) live in their own modules and are named from here too."""


class WaitKind(enum.StrEnum):
    """What a wait stands for, so that the journal can say which one was cut short."""

    DELAY = "delay"
    HANG = "hang"
    EXECUTION = "execution"


class Measured(Protocol):
    """A cut's answer made from the milliseconds measured when the cut happens: the one
    thing about a plan decided at play time, because an ``EXECUTION_TIMEOUT`` body reports
    the time measured, not the time scripted. A frozen value (the engine's
    :class:`~mockskill.engine.actions.TimedOut`), never a closure: a plan is data, equal to
    the same plan made again, and what the cut did is read back from the :class:`Outcome`
    (:attr:`Outcome.cut_ms`), not written aside while it plays."""

    def answer(self, elapsed_ms: float) -> Answer:
        """The answer to send when the cut ends the wait after *elapsed_ms*."""
        ...


@dataclass(frozen=True)
class Cut:
    """The wait ends at *after_ms* with this answer instead of the plan's (see
    :class:`Measured` for an answer that reports the time measured)."""

    after_ms: float
    answer: Answer | Measured

    def __post_init__(self) -> None:
        if self.after_ms < 0:
            raise ValueError(f"after_ms must be >= 0, got {self.after_ms}")


@dataclass(frozen=True)
class Wait:
    """A pause before the answer; ended by the client leaving or by its cut."""

    ms: float
    kind: WaitKind = WaitKind.DELAY
    cut: Cut | None = None

    def __post_init__(self) -> None:
        if self.ms < 0:
            raise ValueError(f"ms must be >= 0, got {self.ms}")


@dataclass(frozen=True)
class Dribble:
    """Send the body in *chunks* pieces, *over_ms* in all: a pause before each piece.

    The status line and headers go at once (a slow body, not a slow start),
    with the full ``Content-Length``.
    """

    chunks: int
    over_ms: float

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ValueError(f"chunks must be >= 1, got {self.chunks}")
        if self.over_ms < 0:
            raise ValueError(f"over_ms must be >= 0, got {self.over_ms}")

    def pieces(self, body: bytes) -> list[bytes]:
        size = -(-len(body) // self.chunks) or 1
        return [body[i : i + size] for i in range(0, len(body), size)] or [b""]


class StreamPiece(NamedTuple):
    """What a stream sends at one moment: *data* (framed as sent: an event, a comment, the
    ``retry:`` field, or the malformed bytes of a fault) after *delay_ms* from the piece
    before it."""

    delay_ms: float
    data: bytes
    event_id: str | None = None
    """The id it carries (the journal's last id sent), None: none."""
    counts: bool = True
    """It is an event (the journal counts the events sent); a comment or ``retry:`` is not."""


STREAM_ENDINGS = ("complete", "reset", "close", "stall", "broken_chunking")
"""How the transport ends a stream once its pieces are sent: ``complete`` (the chunked
body's last chunk; keep-alive as usual), or the fault the scenario scripted."""


RUN_BYTES = 64 * 1024
"""Bytes of pieces due together one run holds at most (but for one larger piece): the
transport writes a run at once and looks at flow control between runs, so a stream of a
hundred thousand events due at once is not one write."""


class StreamRuns(NamedTuple):
    """A play's pieces as runs (:func:`stream_runs`): run *r* is a piece with a delay and
    the pieces with none after it, which are due together, up to :data:`RUN_BYTES`.
    Tuples of numbers, strings and bytes, which the cyclic collector stops tracking: a
    play kept for every request of its step costs it nothing to walk."""

    ends: tuple[int, ...]
    """Run *r* is the pieces ``ends[r - 1]`` (0 for the first) to ``ends[r]``."""
    events: tuple[int, ...]
    """Events sent once run *r* is: the journal's count."""
    last_ids: tuple[str | None, ...]
    """The last id sent once run *r* is (None: none yet)."""
    data: tuple[bytes, ...]
    """The bytes of run *r*, its pieces' joined (a run of one piece: that piece's bytes,
    not a copy)."""
    copied: int
    """Bytes joined into runs of several pieces: what the runs keep beyond the pieces."""


def stream_runs(pieces: tuple[StreamPiece, ...]) -> StreamRuns:
    """*pieces* as the runs they are due in (:class:`StreamRuns`)."""
    ends: list[int] = []
    counted: list[int] = []
    last_ids: list[str | None] = []
    data: list[bytes] = []
    events, last_id, size, start, copied = 0, None, 0, 0, 0
    for n in range(len(pieces) + 1):
        piece = pieces[n] if n < len(pieces) else None
        if n and (piece is None or piece.delay_ms > 0 or size >= RUN_BYTES):
            ends.append(n)
            counted.append(events)
            last_ids.append(last_id)
            if n == start + 1:
                data.append(pieces[start].data)
            else:
                data.append(b"".join([p.data for p in pieces[start:n]]))
                copied += size
            size, start = 0, n
        if piece is not None:
            size += len(piece.data)
            if piece.counts:
                events += 1
                if piece.event_id is not None:
                    last_id = piece.event_id
    return StreamRuns(tuple(ends), tuple(counted), tuple(last_ids), tuple(data), copied)


@dataclass(frozen=True)
class StreamPlay:
    """An answer that is a stream of events (a step's ``stream:``): the plan's
    :attr:`Plan.answer` gives the status and headers (sent at once, the body chunked, or
    closed-delimited for an HTTP/1.0 client), then each piece after its delay, a heartbeat
    while a delay lasts longer than :attr:`heartbeat_ms`, then :attr:`ending`. The engine
    frames every byte (a malformed event is a piece); the transport only times and ends.

    Its :attr:`runs` are found as it is made: a play is made once per step, address and
    format and kept (:class:`~.streams.KeptStreams`), so every request of it shares them."""

    pieces: tuple[StreamPiece, ...]
    ending: str = "complete"
    """:data:`STREAM_ENDINGS`, or ``open``: a watched task's play that more may follow
    (:mod:`.task_watch`), held with its heartbeats meanwhile."""
    heartbeat_ms: float | None = None
    heartbeat: bytes = b""
    stall_ms: float | None = None
    """``stall``: how long before the connection is closed (None: the server's bound)."""
    runs: StreamRuns = field(init=False, repr=False, compare=False)
    """:attr:`pieces` as the runs they are due in (:func:`stream_runs`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", stream_runs(self.pieces))


class Stale(enum.StrEnum):
    """How a connection kept open as if alive goes stale after its idle time."""

    CLOSE = "close"
    """Closed (FIN) without ``Connection: close``: a client that reuses it
    without looking first sends into a closed connection."""
    DROP_NEXT = "drop_next"
    """Left open; the next request on it is read and the connection closed
    without a byte — the race a real provider's idle timer loses with a
    client's pooled request, made certain."""


@dataclass(frozen=True)
class KeepAlive:
    """Faults that only keep-alive makes possible, done after the answer.

    None of them sends ``Connection: close``: the consumer is told the
    connection stays open, and its pool believes it.
    """

    stale_after_ms: float | None = None
    """After this long idle, the connection goes stale (see :attr:`stale`)."""
    stale: Stale = Stale.CLOSE
    close_after: bool = False
    """Close right after this answer."""
    max_requests: int | None = None
    """The connection serves at most this many requests; the last closes it."""

    def __post_init__(self) -> None:
        if self.stale_after_ms is not None and self.stale_after_ms < 0:
            raise ValueError(f"stale_after_ms must be >= 0, got {self.stale_after_ms}")
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {self.max_requests}")


@dataclass(frozen=True)
class Plan:
    """What to answer to one request, and how (see the module's docstring)."""

    answer: Answer
    waits: tuple[Wait, ...] = ()
    dribble: Dribble | None = None
    fault: Fault | None = None
    fault_seed: int = 0
    """Seeds the random bytes of ``RANDOM_DATA_THEN_CLOSE``."""
    close: bool = False
    """Close the connection after the answer, saying so (``Connection: close``)."""
    keep_alive: KeepAlive | None = None
    upstream: Upstream | None = None
    """Forward the request to a real provider after the waits, and relay its answer
    (:mod:`.proxying`); :attr:`answer` is then not sent."""
    stream: StreamPlay | None = None
    """Answer with a stream of events after the waits: :attr:`answer`'s status and headers,
    then the stream's pieces (its body is not sent)."""
    watch: object | None = None
    """:attr:`stream` is a watched task's first events, and this its
    :class:`~.task_watch.TaskWatch` (typed loosely: that module plans with this one's
    types): the transport reads the task's record again when it says, and plays what
    follows in place of what was left."""
    journalled: bool = False
    """The handler journalled the exchange as it planned it, as the outcome of an answer
    sent whole at once — what always happens to an instant plan, written as soon as it is
    asked for: the transport then reports nothing to the handler's ``played``. Set by the
    engine on a plain step's kept plan (an outcome built and handed over only to be
    dropped cost a twentieth of the request); a handler that wants every outcome (a
    request log) answers with :attr:`reported` instead."""
    instant: bool = field(init=False, repr=False, compare=False)
    """Nothing to wait for: the transport writes it at once, without a task."""

    def __post_init__(self) -> None:
        if self.fault is not None and self.dribble is not None:
            raise ValueError("a plan has a fault or a dribble, not both")
        if self.close and self.keep_alive is not None:
            raise ValueError("a plan that closes saying so has no keep-alive fault")
        object.__setattr__(
            self,
            "instant",
            not self.waits
            and self.dribble is None
            and self.fault is None
            and not self.upstream
            and self.stream is None,
        )
        if self.journalled and not self.instant:
            raise ValueError("only an instant plan can be journalled as it is planned")

    def answering(self, answer: Answer) -> Plan:
        """This plan with *answer* instead (a templated step's, made per request): its
        other fields were checked when this one was made."""
        made: Plan = _new(Plan)
        fields = made.__dict__
        fields.update(self.__dict__)
        fields["answer"] = answer
        fields.pop("reported", None)
        return made

    @cached_property
    def reported(self) -> Plan:
        """This plan with every outcome reported (not :attr:`journalled`): made once."""
        return dataclasses.replace(self, journalled=False) if self.journalled else self


_new = object.__new__


class Streamed(NamedTuple):
    """How a stream went: the events sent (pieces that count), the last id sent, how it
    ended, and when its last byte went."""

    events: int
    last_id: str | None
    ended: str
    """An ending of :data:`STREAM_ENDINGS` done, or ``client_left`` (the client went
    first), ``gave_up`` (the client read nothing for the server's bound: its buffer was not
    drained), ``stopped`` (the server stopped)."""
    at: float
    """Wall-clock time it ended."""
    last_byte_at: float | None = None
    """Wall-clock time the last bytes of it were written (the head, an event, a heartbeat),
    so the journal can say how long the bytes had stopped when it ended (None: not told)."""


@dataclass
class Outcome:
    """What happened on the wire, for the journal. Times are wall-clock.

    Read-only once reported. Not a frozen dataclass: one is built per
    request, and a frozen one's ``__init__`` costs several times as much.
    Not slotted either: the defaults stay class attributes, so that
    :meth:`sent` (the outcome of nearly every request) stores only the
    fields that differ from them.
    """

    answer: Answer | None
    """The answer sent (the cut's, when a cut happened), None when none was started."""
    started: float
    """When playing began."""
    headers_at: float | None = None
    """When the status line and headers went out."""
    last_byte_at: float | None = None
    """When the last byte of the answer was handed to the kernel."""
    client_left_at: float | None = None
    """When the client was seen to leave, if it left before the answer was complete."""
    cut: bool = False
    """A wait's :class:`~mockskill.engine.plan.Cut` answered instead of the plan."""
    cut_ms: float | None = None
    """How long the wait that was cut lasted, measured (None: no cut): what a
    :class:`Measured` answer was made from, so the engine can journal the same."""
    waited_ms: float = 0.0
    """Time spent in the plan's waits, measured."""
    fault: Fault | None = None
    """The fault done to the connection (None if the client left first)."""
    stopped: bool = False
    """The server, stopping, cut the exchange after its grace period."""
    closed: bool = False
    """The connection was closed after this exchange (by the plan, the client, or a fault)."""
    dropped: bool = False
    """The request was read and dropped unanswered: its connection had gone stale
    (:attr:`~mockskill.engine.plan.Stale.DROP_NEXT`); no plan was asked for."""
    upstream: Relayed | None = None
    """What happened upstream, for a plan with :attr:`Plan.upstream` that got that far."""
    stream: Streamed | None = None
    """How a stream went, for a plan with :attr:`Plan.stream` whose head was sent."""

    @classmethod
    def sent(cls, answer: Answer, at: float, closed: bool) -> Outcome:
        """An answer written whole at *at*, as soon as it was asked for: the instant plan's.

        The same as ``Outcome(answer, at, headers_at=at, last_byte_at=at,
        closed=closed)``, without the generated ``__init__`` (a call through
        the type, and a store per field).
        """
        outcome: Outcome = _new(cls)
        outcome.answer, outcome.started, outcome.closed = answer, at, closed
        outcome.headers_at = outcome.last_byte_at = at
        return outcome
