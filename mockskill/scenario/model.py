"""The scenario model: what the loaded scenario files say, frozen.

Frozen dataclasses, no I/O, no Flask. The loader builds them once, checked
and pre-rendered; the engine only reads them, so a model can be swapped in
whole (on reload) while requests that started on the old one finish on it.

Names follow the YAML keys one to one (``times``, ``end``, ``delay`` …) so a
problem's path in a file points at the attribute here too.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..protocol.catalog import UPGRADE_URL, Retry
from ..protocol.versions import Range, parse_version
from .delays import Delay, LogNormal, Uniform
from .kinds import FAULT_NAMES, RANDOM_FAULTS, TLS_FAULT_NAMES
from .reply import JSON_TYPE, TEXT_TYPE, Reply
from .source import Position
from .when import Check, Condition, Operator, ValueSource

__all__ = [
    "CASE_END_RULES",
    "END_RULES",
    "FAULTS",
    "INITIAL_STATE",
    "JSON_TYPE",
    "LIMIT_KEYS",
    "MAX_EVENT_BYTES",
    "MAX_STREAM_EVENTS",
    "RATE_ANSWERS",
    "RATE_HEADER_FORMS",
    "RETRY_AFTER_FORMS",
    "STALE_MODES",
    "STREAM_FAULTS",
    "STREAM_FORMATS",
    "TEXT_TYPE",
    "TLS_FAULTS",
    "Case",
    "Check",
    "Choice",
    "Client",
    "Condition",
    "Credentials",
    "Dribble",
    "EndRule",
    "EndpointKind",
    "KeepAlive",
    "Lifetime",
    "Operator",
    "Outage",
    "Proxy",
    "RateAnswer",
    "RateLimit",
    "RateLimited",
    "Reply",
    "Requirement",
    "Route",
    "Scenario",
    "ScenarioSet",
    "Sequence",
    "Skill",
    "Step",
    "Stream",
    "StreamEnd",
    "StreamEvent",
    "StreamFault",
    "ValueSource",
]
"""The frozen values; a reply and a case's conditions live in their own modules and are
named from here too (:mod:`.reply`, :mod:`.conditions`)."""

EndRule = Literal["last", "cycle", "fail", "next"]
END_RULES: tuple[EndRule, ...] = ("last", "cycle", "fail")
"""What an endpoint's sequence may do after its last step."""
CASE_END_RULES: tuple[EndRule, ...] = (*END_RULES, "next")
"""What a case's may: ``next`` passes the request on to the cases after it (then the
endpoint's steps, else a miss), as if the case did not hold."""
FAULTS: tuple[str, ...] = FAULT_NAMES
"""The transport faults a step may name (``fault:``), as :mod:`.kinds` declares them."""
TLS_FAULTS: tuple[str, ...] = TLS_FAULT_NAMES
"""The TLS faults a skill may name (``tls:``), as :mod:`.kinds` declares them;
mockskill/transport/tls_faults.py does each."""
EndpointKind = Literal["describe", "invoke", "route"]
INITIAL_STATE = "Started"
"""The state a session is in, in every scenario, until a step moves it (WireMock's name)."""


@dataclass(frozen=True)
class Dribble:
    """Send the body in *chunks* pieces spread over *over_ms*: a slow body, not a slow start."""

    chunks: int
    over_ms: int


STALE_MODES = ("close", "drop_next")
"""What a connection kept open as if alive does once stale: close, or drop the next request."""


@dataclass(frozen=True)
class KeepAlive:
    """Faults only keep-alive makes possible, done after the step's answer.

    None says ``Connection: close``: the consumer's pool believes the
    connection stays open.
    """

    close_after: bool = False
    """Close the connection right after the answer."""
    stale_after_ms: int | None = None
    """After this long idle, the connection goes stale (:attr:`stale`)."""
    stale: str = "close"
    """``close`` (closed, unannounced) or ``drop_next`` (the next request on it is
    read and the connection closed without a byte)."""
    max_requests: int | None = None
    """The connection serves at most this many requests; the last closes it."""


@dataclass(frozen=True)
class Proxy:
    """Forward the request to a real provider (a ``proxy`` step), and relay its answer.

    *url* is the upstream's base, ``scheme://host[:port]`` (no path, query or
    fragment: the request's own path and query are forwarded as sent).
    """

    url: str
    scheme: str
    host: str
    port: int
    verify: bool | str = True
    """Verify the upstream's TLS certificate (True), not at all (False), or against
    the CA certificates of this file."""
    timeout_ms: int = 30_000
    """How long connecting, and then each wait for the upstream's next bytes, may take."""
    after: Step | None = None
    """Commit then fail: the upstream answers, then this step's error or fault replaces
    the answer (None: the upstream's answer is relayed)."""
    streams: ProviderStreams | None = None
    """What the provider's streams promise, for the audit (None: nothing declared)."""


@dataclass(frozen=True)
class ProviderStreams:
    """What a proxied provider's streams promise (``proxy: {streams: ...}``), which their
    bytes cannot say: the stream rules grade a relayed stream by it (docs/streams.md)."""

    resumable: bool = False
    """They honour ``Last-Event-ID`` (then ``resume-ignored`` applies)."""
    idle_bound_ms: int | None = None
    """How long they may send no byte (None: 3 x the longest pause seen, at least 1 s)."""
    expected_ms: int | None = None
    """How long they are declared to last (None: not said; no ``gave-up-despite-progress``)."""


RETRY_AFTER_FORMS: tuple[str, ...] = ("seconds", "date", "fractional", "ms", "missing", "malformed")
"""How a rate-limited answer writes its wait (``retry_after:``; docs/rate-limits.md):
``Retry-After: 2``; an HTTP-date (with a ``Date`` header, the clock of the answer);
``Retry-After: 1.5``; ``retry-after-ms: 1500`` (with ``Retry-After`` in whole seconds, as
the providers that send it do); none at all; ``Retry-After: soon``. The last two carry no
advice in the body either: nothing tells the consumer how long to wait."""
RATE_HEADER_FORMS: tuple[str, ...] = ("ietf", "x-ratelimit", "x-ratelimit-epoch", "none")
"""Which rate-limit headers a limited endpoint sends (``headers:``): the IETF draft's
``RateLimit`` and ``RateLimit-Policy``; ``X-RateLimit-Limit``/``-Remaining``/``-Reset``
with the reset in seconds left, or in epoch seconds; or none."""
LIMIT_KEYS: tuple[str, ...] = ("session", "credential", "client", "header", "body")
"""What a limit counts per (``key:``): the ``Mockskill-Session``, the credential presented,
the client's address, a request header's value (``{header: NAME}``), or a JSON body's value
at a JSON Pointer (``{body: /tenant}``). A request without the header, the body or the
value falls in one bucket shared by all such requests."""
RATE_ANSWERS: tuple[int, ...] = (429, 503)
"""How a limit refuses: ``429`` with the unified body and the code ``RATE_LIMITED`` (outside
the chapter's seven), or ``503`` ``ENDPOINT_UNREACHABLE``, in-protocol."""


@dataclass(frozen=True)
class RateAnswer:
    """How a rate-limited answer is written: its status and the headers' forms."""

    status: int = 429
    """:data:`RATE_ANSWERS`."""
    retry_after: str = "seconds"
    """:data:`RETRY_AFTER_FORMS`."""
    headers: str = "ietf"
    """:data:`RATE_HEADER_FORMS`."""


@dataclass(frozen=True)
class RateLimit:
    """A token bucket on a skill's invocations or a route's requests (``rate_limit:``).

    A request that finds no token is not played: it is answered as :attr:`answer` says,
    with the wait until the next token as its advice."""

    capacity: int
    """The burst: tokens the bucket holds at most (>= 1); it starts full."""
    refill: float
    """Tokens a second (> 0)."""
    where: Position
    key: str = "session"
    """:data:`LIMIT_KEYS`."""
    key_name: str | None = None
    """The header's name, lower-case (``key: {header: ...}``), or the JSON Pointer
    (``key: {body: ...}``); None for the other keys."""
    answer: RateAnswer = RateAnswer()


@dataclass(frozen=True)
class RateLimited:
    """A scripted rate-limited answer (a step's ``rate_limited:``): no bucket, the wait given.

    It is played like the limit's refusal, for exact tests without timing."""

    wait_ms: int
    """The wait the answer advises (``retry_after_ms:``; written as :attr:`answer` says)."""
    limit: int = 1
    """The limit the rate-limit headers state (``limit:``); ``Remaining`` is 0."""
    answer: RateAnswer = RateAnswer()


STREAM_FORMATS = ("sse", "ndjson")
"""How a stream step frames its events: Server-Sent Events (``text/event-stream``) or JSON
lines (``application/x-ndjson``)."""
STREAM_FAULTS = (
    "reset",
    "close",
    "stall",
    "bad_utf8",
    "no_blank_line",
    "oversized_line",
    "not_json",
    "duplicate_id",
    "out_of_order_id",
    "broken_chunking",
)
"""What a stream's ``fault:`` does once *after* events were sent (docs/streams.md):
``reset`` the connection (RST); ``close`` it cleanly with no terminal event; ``stall``
(bytes stop, the socket stays open); send one malformed event (``bad_utf8``,
``no_blank_line``, ``oversized_line``, ``not_json``: a ``data`` that is not JSON where JSON
is promised) or an event whose id repeats the last (``duplicate_id``) or goes back
(``out_of_order_id``), then go on; or break the chunked framing (``broken_chunking``).
An error event mid-stream is not a fault: it is the stream's ``end:`` (``error:``)."""
MAX_STREAM_EVENTS = 100_000
"""Events a stream step sends at most (a ``repeat`` included)."""
MAX_EVENT_BYTES = 64 * 1024
"""A scripted event's framed size at most (a larger one is a load problem); the
``oversized_line`` fault sends a line past it on purpose."""


@dataclass(frozen=True)
class StreamEvent:
    """One event a stream sends (a ``repeat`` is unrolled at load), or a comment."""

    where: Position
    data: str | None = None
    """What it carries, as sent: a scripted JSON value is dumped once at load (compact);
    a text may have several lines (SSE: one ``data:`` line each). None: a comment only."""
    name: str | None = None
    """SSE's ``event:`` (NDJSON: the object's ``event`` member); None: none sent."""
    id: str | None = None
    """SSE's ``id:`` (NDJSON: the ``id`` member); never with a line break (a load
    problem). None: none sent."""
    delay_ms: int = 0
    """The pause before it, after the previous event (a ``rate:`` is made into this)."""
    comment: str | None = None
    """An SSE comment line (``: text``) sent with it, or alone when :attr:`data` is None
    (NDJSON sends no comments)."""
    is_json: bool = False
    """:attr:`data` is a JSON value as scripted (dumped at load): NDJSON sends it as that
    value; False: a text (NDJSON sends it as a JSON string, ``"42"`` for the text 42)."""


@dataclass(frozen=True)
class StreamFault:
    """A stream's fault (:data:`STREAM_FAULTS`), done once *after* events were sent."""

    kind: str
    after: int
    """Events sent before it (0: before the first)."""
    stall_ms: int | None = None
    """``stall``: how long the bytes stop before the connection is closed (None: until the
    client leaves, or the server's stall bound, docs/streams.md)."""


MIN_IDLE_BOUND_MS = 1000
"""The least default idle bound of a stream (``Stream.idle_bound``): 1 s."""


@dataclass(frozen=True)
class StreamEnd:
    """How a stream ends when no fault ends it first: its terminal event, a result or an
    error event carrying the protocol's unified body (with its retry advice)."""

    event: StreamEvent
    """The terminal event (its name ``result`` or ``error`` unless scripted)."""
    error_code: str | None = None
    """An error event's code (its body is the catalog's unified body); None: a result."""
    retry: Retry | None = None
    """An error event's retry advice, as its body carries it (None: a result, or a
    category that gives none): what the journal's entry carries, as an error answer's."""


@dataclass(frozen=True)
class Stream:
    """A step that answers with a stream of events (``stream:``, docs/streams.md): its
    head at once, then each event after its delay, then its :attr:`end` — unless its
    :attr:`fault` comes first."""

    where: Position
    events: tuple[StreamEvent, ...]
    formats: tuple[str, ...] = ("sse",)
    """The framings it may answer with (:data:`STREAM_FORMATS`); the first is the default,
    the request's ``Accept`` chooses among several."""
    end: StreamEnd | None = None
    """None: the stream closes cleanly after its events, with no terminal event."""
    heartbeat_ms: int | None = None
    """While a pause between events lasts, a heartbeat every this long (SSE: a comment
    line; NDJSON: an empty line). None: none."""
    retry_ms: int | None = None
    """SSE's ``retry:`` field, sent first (the reconnection time it advises)."""
    fault: StreamFault | None = None
    resumable: bool = False
    """It honours ``Last-Event-ID``: a request carrying one continues after that id."""
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    """Headers besides the framing and ``Content-Type`` (which the format sets)."""
    idle_bound_ms: int | None = None
    """``idle_bound:``: how long a consumer may see no byte of it (no event, no heartbeat)
    before it should take the stream for stalled and leave (the audit's
    ``stall-not-detected``). None: :meth:`idle_bound`'s default."""
    expected_ms: int | None = None
    """``expected:``: how long the stream is declared to last; a consumer that leaves it
    sooner while it still delivers is ``gave-up-despite-progress``. None: the scripted
    duration (:meth:`expected`)."""

    def idle_bound(self) -> int:
        """The idle bound in ms: :attr:`idle_bound_ms`, else 3 times the longest pause between
        bytes (events, the end, heartbeats: a heartbeat shortens every pause it fills), at
        least :data:`MIN_IDLE_BOUND_MS`."""
        if self.idle_bound_ms is not None:
            return self.idle_bound_ms
        pauses = [event.delay_ms for event in self.events]
        if self.end is not None:
            pauses.append(self.end.event.delay_ms)
        longest = max(pauses, default=0)
        if self.heartbeat_ms is not None:
            longest = min(longest, self.heartbeat_ms)
        return max(MIN_IDLE_BOUND_MS, 3 * longest)

    def expected(self) -> int:
        """The expected duration in ms: :attr:`expected_ms`, else the scripted one (every
        pause, the end's included), from the head to the last event."""
        if self.expected_ms is not None:
            return self.expected_ms
        total = sum(event.delay_ms for event in self.events)
        return total + (self.end.event.delay_ms if self.end is not None else 0)


@dataclass(frozen=True)
class Step:
    """One step of a sequence, played *times* requests in a row.

    It answers with :attr:`reply` — after :attr:`delay`, spending
    :attr:`execution` (which the skill's timeout cuts short), or after
    holding the connection for :attr:`hang_ms` — unless it does
    :attr:`fault` to the connection instead. A step with :attr:`choices`
    stands for one of them, drawn per request.
    """

    reply: Reply
    where: Position
    times: int = 1
    delay: Delay | None = None
    execution: Delay | None = None
    hang_ms: int | None = None
    """Hold the connection without answering for this long (or until the client leaves)."""
    dribble: Dribble | None = None
    fault: str | None = None
    """A transport fault's name (declared in :mod:`.kinds`)."""
    keep_alive: KeepAlive | None = None
    """What the connection does after the answer (only the event-loop transport plays it)."""
    choices: tuple[Choice, ...] = ()
    proxy: Proxy | None = None
    """Forward to a real provider instead of answering with :attr:`reply`."""
    set_state: str | None = None
    """Playing it moves the session into this state of the scenario (``set_state:``; None:
    the state stays): what a case's :attr:`Case.state` requires."""
    rate_limited: RateLimited | None = None
    """A scripted rate-limited answer instead of :attr:`reply` (``rate_limited:``; its
    headers are made per request, the date form reading the clock)."""
    ran: Reply | None = None
    """A scripted step with ``after:`` (commit then fail): the answer the skill made when
    it ran, which :attr:`reply` (``after``'s error) or :attr:`fault` then replaced; what a
    skill honouring ``Idempotency-Key`` answers a retry with. None: no ``after``."""
    task: str | None = None
    """``task:`` (:data:`TASK_STEP_KINDS`): ``submit`` starts a task instead of answering
    :attr:`reply` (a task skill's invoke); ``status`` answers its task as it is now (its
    status URL's ``polls:``). None: neither."""
    stream: Stream | None = None
    """``stream:``: answer with a stream of events instead of :attr:`reply` (whose status
    and headers are the stream's head)."""

    @functools.cached_property  # read on every request; the step never changes
    def random(self) -> bool:
        """Whether playing it draws from the random generator (a template's ``{{id}}`` and
        ``{{random.int}}`` too)."""
        template = self.reply.template
        return (
            bool(self.choices)
            or self.fault in RANDOM_FAULTS
            or any(isinstance(d, (Uniform, LogNormal)) for d in (self.delay, self.execution))
            or (template is not None and template.draws)
        )

    @property
    def needs_socket(self) -> bool:
        """Whether it acts on the raw connection (transport faults)."""
        return self.fault is not None or any(c.step.needs_socket for c in self.choices)

    @property
    def streams(self) -> bool:
        """Whether it (or one of its choices) answers with a stream of events."""
        return self.stream is not None or any(c.step.streams for c in self.choices)

    @property
    def proxied(self) -> bool:
        """Whether it (or one of its choices) forwards to a real provider."""
        return self.proxy is not None or any(c.step.proxied for c in self.choices)


@dataclass(frozen=True)
class Choice:
    """One weighted outcome of a random step."""

    weight: float
    step: Step


@dataclass(frozen=True)
class Sequence:
    """The steps an endpoint plays, request after request, and what happens after the last."""

    steps: tuple[Step, ...]
    end: EndRule = "last"
    _ends: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a sequence needs at least one step")
        ends, total = [], 0
        for step in self.steps:
            total += step.times
            ends.append(total)
        object.__setattr__(self, "_ends", tuple(ends))

    @property
    def length(self) -> int:
        """Requests the sequence answers before its end rule applies."""
        return self._ends[-1]

    @property
    def ends(self) -> tuple[int, ...]:
        """Where each step's requests end: request *n* (0-based, under :attr:`length`) is
        answered by the first step whose end is over *n* (``bisect_right(ends, n)``)."""
        return self._ends

    def step_at(self, position: int) -> int | None:
        """The index of the step that answers request number *position* (0-based).

        None when the sequence is exhausted and its end rule is ``fail`` (or a case's
        ``next``: the request is passed on).
        """
        ends = self._ends
        length = ends[-1]  # self.length, without a property call: this runs for every request
        if position >= length:
            if self.end == "last":
                return len(self.steps) - 1
            if self.end != "cycle":  # fail, or next
                return None
            position %= length
        return bisect.bisect_right(ends, position)


@dataclass(frozen=True)
class Case:
    """One case of an endpoint: its conditions and the sequence it plays."""

    index: int
    conditions: tuple[Condition, ...]
    sequence: Sequence
    where: Position
    state: str | None = None
    """The state of the scenario the session must be in for the case to take a request
    (``state:``; None: any): a step's :attr:`Step.set_state` moves it."""
    name: str | None = None
    """``name:``: a request's ``Mockskill-Case`` header naming it plays it, whatever its
    conditions (None: only its conditions choose it). Unique in its skill or route."""
    task: Task | None = None
    """``task_life:``, in a task skill's invoke: the life of the tasks this case's
    ``task: submit`` starts, in place of the skill's ``task:`` (None: the skill's)."""

    @property
    def label(self) -> str:
        return f"case {self.name!r}" if self.name is not None else f"case {self.index + 1}"


TASK_STATUSES = ("submitted", "working", "input_required", "completed", "failed", "cancelled")
"""A task's statuses (docs/tasks.md), as MCP's Tasks and A2A name them."""
TERMINAL_STATUSES = ("completed", "failed", "cancelled")
"""The statuses a task ends in: its status URL answers them until its time-to-live ends."""
TASK_STEP_KINDS = ("submit", "status")
"""A step's ``task:``: ``submit`` (in a task skill's invoke: start a task, answer 202) or
``status`` (on its status URL: answer the task as it is now)."""


@dataclass(frozen=True)
class TaskPhase:
    """One stretch of a task's life (``task: life:`` in order): a status held for a time
    (``for:``, counted from when the phase began), for a number of polls (``polls:``), until
    the consumer posts input (``input_required``), or for good (a terminal status, last)."""

    status: str
    """One of :data:`TASK_STATUSES`."""
    where: Position
    duration_ms: int | None = None
    """``for:``: how long the phase lasts. None: :attr:`polls` counts it, it waits for input,
    or it is terminal."""
    polls: int | None = None
    """``polls:``: the phase lasts this many polls of the status URL (exact tests)."""
    progress: tuple[int, ...] = ()
    """Percentages the task reports in turn over the phase, evenly spread over its time or
    its polls (``progress: [10, 40, 80]``; empty: none reported)."""
    poll_after_ms: int | None = None
    """The ``Retry-After`` of answers in this phase (None: :attr:`Task.poll_after_ms`)."""
    reply: Reply | None = None
    """``completed``: the result (as an invoke's ``json:``); ``failed``: the error (as a
    step's ``error:``, any of the seven categories, with its retry advice). None otherwise."""
    expects: tuple[Condition, ...] = ()
    """``input_required``: what the posted input must meet (``expects:``, the ``when:``
    conditions of cases, read against the input request); empty: any JSON object."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


CALLBACK_FAULTS = ("none", "twice", "late", "out_of_order", "never", "forged")
"""What a task's callback deliveries do (``callback: fault:``, docs/tasks.md): delivered as
they happen, each delivered twice, late, the changes out of order, never, or signed with a
forged signature."""


@dataclass(frozen=True)
class TaskCallback:
    """``task: callback:``: the task's state changes pushed to a URL the consumer gave,
    signed, retried with backoff until the receiver answers 2xx or attempts run out."""

    url_from: tuple[str, str]
    """Where the invoke carries the receiver's URL: (``header``, its name) or (``body``, a
    JSON Pointer)."""
    where: Position
    signature_header: str = "Mockskill-Signature"
    """The header carrying ``sha256=`` and the hex HMAC-SHA256 of the delivery's body."""
    secret: str = ""
    """The HMAC's key (``secret:``; the loader requires one)."""
    attempts: int = 5
    """Deliveries of one change at most (the first and its retries)."""
    backoff_ms: int = 1000
    """The wait before the first retry; doubled before each next one."""
    timeout_ms: int = 5000
    """A receiver answering later than this has not acknowledged (retried as a non-2xx)."""
    on: tuple[str, ...] = ("working", "input_required", "completed", "failed", "cancelled")
    """The statuses whose reaching is pushed."""
    faults: tuple[str, ...] = ("none",)
    """:data:`CALLBACK_FAULTS`, for the skill's tasks in turn (task n gets
    ``faults[n % len(faults)]``, n its number in its session's submissions)."""
    late_ms: int = 2000
    """How late the ``late`` fault delivers."""


@dataclass(frozen=True)
class Task:
    """A skill run as a long-running task (``task:``): its invoke answers 202 with a status
    URL that reports the task's state as its :attr:`life` moves on (docs/tasks.md)."""

    life: tuple[TaskPhase, ...]
    """Its phases in order; the last is terminal (the loader holds it)."""
    where: Position
    poll_after_ms: int = 1000
    """The ``Retry-After`` of every non-terminal answer, unless its phase says otherwise."""
    ttl_ms: int = 300_000
    """How long after it ends (a terminal status) its status URL still answers; then 404
    ``TASK_EXPIRED``."""
    cancellable: tuple[str, ...] = ("submitted", "working", "input_required")
    """The statuses in which ``DELETE`` on the status URL is accepted (``cancel: allowed:``)."""
    cancel_settle_ms: int = 0
    """``cancel: settle:``: after a cancel is accepted, the task reports it is cancelling
    (``task.cancelling``) this long, while its life goes on (it may still complete: the race
    a real provider has); then it is ``cancelled`` unless it ended first."""
    polls: Sequence | None = None
    """``polls:``: ordinary steps played on its status URL by poll number (errors, delays,
    faults, a step with ``task: status`` answering the task as it is). None: every poll
    answers the task."""
    callback: TaskCallback | None = None
    """``callback:``: its state changes pushed to the consumer's URL (None: polled only)."""
    watch: bool = True
    """``watch:``: its status URL answers a ``GET`` that accepts a stream (SSE or JSON lines)
    with the task's state changes as a stream (docs/tasks.md, "Watching a task"); False:
    such a request gets the plain poll answer."""
    watch_heartbeat_ms: int = 15_000
    """``watch: {heartbeat:}``: a heartbeat every this long while a watch waits for the
    next change."""


@dataclass(frozen=True)
class Skill:
    """A skill: its descriptor and the two sequences of its endpoints."""

    id: str
    name: str
    scenario: str
    descriptor: bytes
    """The descriptor as served (JSON, ``{base_url}`` unfilled); raw ones too."""
    raw: bool
    describe: Sequence | None
    """``GET /skills/{id}``: the default sequence (None: only cases, see :attr:`cases`)."""
    invoke: Sequence | None
    """``POST /skills/{id}/invoke``: the default sequence (None: only cases)."""
    where: Position
    timeout_ms: int | None = None
    """Execution longer than this is cut short with ``EXECUTION_TIMEOUT``."""
    timeout_status: int = 504
    unreachable: bool = False
    """Whether the descriptor's ``endpoint.url`` names a port where nothing listens."""
    protocol_version: str | None = None
    """The descriptor's ``protocol_version``, when it has a semantic one."""
    accepts: Range | None = None
    """Consumer protocol versions it serves (default: the descriptor's major)."""
    upgrade_url: str = UPGRADE_URL
    requires: Requirement | None = None
    """Credentials its invocation needs (None: none)."""
    describe_cases: tuple[Case, ...] = ()
    invoke_cases: tuple[Case, ...] = ()
    """The cases of each endpoint, tried in order before its default sequence."""
    tls: str | None = None
    """The TLS fault of its invoke endpoint (:data:`TLS_FAULTS`; None: none): the
    descriptor's ``endpoint.url`` names a port of its own whose handshake fails so."""
    idempotency_key: bool = False
    """Whether it honours ``Idempotency-Key`` (docs/scenarios.md): an invocation repeating
    an executed one's key and body gets its first answer again instead of running."""
    rate_limit: RateLimit | None = None
    """The token bucket its invocations spend (``rate_limit:``; None: no limit). The
    descriptor is not limited."""
    task: Task | None = None
    """Run as a long-running task (``task:``; None: it answers its invocations itself). Its
    descriptor says ``capability_type: task`` (the loader sets it, unless served raw)."""

    @property
    def sequences(self) -> tuple[Sequence, ...]:
        """Every sequence its endpoints may play: defaults and cases', and its task's status
        URL's ``polls:``."""
        polls = self.task.polls if self.task is not None else None
        return _sequences(
            (self.describe, self.invoke, polls), self.describe_cases + self.invoke_cases
        )

    @property
    def accepted(self) -> Range | None:
        """The consumer versions this skill serves; None: any."""
        if self.accepts is not None:
            return self.accepts
        version = parse_version(self.protocol_version) if self.protocol_version else None
        return Range.same_major(version) if version else None


@dataclass(frozen=True)
class Route:
    """A free route outside the skill surface (Werkzeug rule syntax)."""

    path: str
    methods: tuple[str, ...]
    sequence: Sequence | None
    """The default sequence (None: only :attr:`cases`; a request none takes is unmatched)."""
    scenario: str
    index: int
    where: Position
    cases: tuple[Case, ...] = ()
    rate_limit: RateLimit | None = None
    """The token bucket its requests spend (``rate_limit:``; None: no limit)."""

    @property
    def label(self) -> str:
        return f"{'|'.join(self.methods)} {self.path}"

    @property
    def sequences(self) -> tuple[Sequence, ...]:
        """Every sequence it may play: its default and its cases'."""
        return _sequences((self.sequence,), self.cases)


def _sequences(
    defaults: tuple[Sequence | None, ...], cases: tuple[Case, ...]
) -> tuple[Sequence, ...]:
    return (*(s for s in defaults if s is not None), *(case.sequence for case in cases))


@dataclass(frozen=True)
class Lifetime:
    """How long an issued token lasts: seconds, uses, either or both (None: no limit)."""

    seconds: int | None = None
    uses: int | None = None


@dataclass(frozen=True)
class Client:
    """An OAuth2 client of the mock token endpoint."""

    client_id: str
    client_secret: str
    scopes: frozenset[str]
    secret_sha256: str | None = None
    """The secret's SHA-256 digest (hex) when the file holds that instead of the secret."""

    def accepts(self, secret: str) -> bool:
        """Whether *secret* is this client's (compared in constant time)."""
        import hashlib  # on the first token request: OpenSSL's hashes are no part of start-up
        import hmac

        if self.secret_sha256 is not None:
            digest = hashlib.sha256(secret.encode()).hexdigest()
            return hmac.compare_digest(self.secret_sha256, digest)
        return hmac.compare_digest(self.client_secret.encode(), secret.encode())


@dataclass(frozen=True)
class Credentials:
    """Credentials and the scopes they grant (see :mod:`mockskill.engine.auth`)."""

    tokens: Mapping[str, frozenset[str]] = field(default_factory=dict)
    api_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    clients: Mapping[str, Client] = field(default_factory=dict)
    lifetime: Lifetime = Lifetime()
    token_digests: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Bearer tokens by their SHA-256 digest (hex, lower case), and the scopes each grants."""
    key_digests: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """API keys by their SHA-256 digest."""


@dataclass(frozen=True)
class Requirement:
    """What a protected skill asks of a caller: an auth type and scopes."""

    type: str
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """One scenario: a name, its skills and its free routes."""

    name: str
    description: str
    file: str
    skills: tuple[Skill, ...]
    routes: tuple[Route, ...]
    where: Position
    seed: int | None = None
    """Seeds this scenario's own random generator (else: the server's seed and the name)."""
    outage: Outage | None = None
    credentials: Credentials = Credentials()
    text: str = field(default="", compare=False, repr=False)
    """All of the text (YAML or JSON) of the file or body it was read from; "" when it was
    built in Python. Not part of what the scenario *is* (a comment is not), only where it
    can be read again: a shared scenario set stores it, so that every replica reads the
    same scenario from it."""
    proxy: Sequence | None = None
    """``proxy: URL`` on the scenario: what every request it does not script plays (one
    proxy step); its skills and routes win."""

    def renamed(self, name: str) -> Scenario:
        """This scenario under another name (its skills and routes say whose they are too)."""
        return dataclasses.replace(
            self,
            name=name,
            skills=tuple(dataclasses.replace(s, scenario=name) for s in self.skills),
            routes=tuple(dataclasses.replace(r, scenario=name) for r in self.routes),
        )


@dataclass(frozen=True)
class Outage:
    """A time window, from when the scenario is activated, in which *step* answers everything."""

    start_ms: int
    duration_ms: int
    step: Step

    def covers(self, elapsed_ms: float) -> bool:
        return self.start_ms <= elapsed_ms < self.start_ms + self.duration_ms


@dataclass(frozen=True)
class ScenarioSet:
    """Everything that is served at once; replaced whole, never edited."""

    scenarios: tuple[Scenario, ...] = ()

    @property
    def skills(self) -> tuple[Skill, ...]:
        return tuple(s for scenario in self.scenarios for s in scenario.skills)

    @property
    def routes(self) -> tuple[Route, ...]:
        return tuple(r for scenario in self.scenarios for r in scenario.routes)

    @property
    def credentials(self) -> Credentials:
        """Every scenario's credentials together (the loader keeps them unique)."""
        parts = [s.credentials for s in self.scenarios]
        return Credentials(
            tokens={k: v for c in parts for k, v in c.tokens.items()},
            api_keys={k: v for c in parts for k, v in c.api_keys.items()},
            clients={k: v for c in parts for k, v in c.clients.items()},
            lifetime=next((c.lifetime for c in parts if c.clients), Lifetime()),
            token_digests={k: v for c in parts for k, v in c.token_digests.items()},
            key_digests={k: v for c in parts for k, v in c.key_digests.items()},
        )
