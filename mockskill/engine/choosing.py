"""Which step a request plays: the next of its sequence (or the outage's), and its draws.

A session's position in the sequence, the outage clock and the session's
draw count are the store's: :func:`take` says what to take of them (a
:class:`~.store.Take`, on the routing table the request was matched on) and
:func:`choose` reads what was taken into the request's :class:`Decided` (what
the engine found of it before its step). Both are pure. A random step's values
are drawn from a generator seeded by :func:`generator` from the seed, the
scenario, the session and the draw number, in a fixed order: the same seed
and the same requests replay the same values, whichever process serves each.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from ..protocol import catalog
from ..scenario.model import Reply, Step
from . import callbacks, limits, tasks
from . import plan as plans
from .actions import Urls, answer
from .callback_hosts import Receiver, Refused
from .entries import LaterRecord, escaped, shorten
from .incoming import Incoming
from .matching import Miss, RoutingTable, Target
from .pending import Later, Pending
from .rendering import RequestValues
from .replies import exhausted_reply, miss_reply
from .store import (
    ADMITTED,
    Bucket,
    NeedAnswer,
    SetState,
    Spent,
    Submit,
    Submitted,
    Take,
    Taken,
    TaskRecord,
)
from .task_skills import journalled as task_journalled
from .task_skills import over_cap
from .task_watch import TaskWatch

_new = tuple.__new__
"""Take's fields, positionally: tuple.__new__ skips the NamedTuple's keyword __new__."""


@dataclass(slots=True)
class Chosen:
    """The step to play and its random values, or (*step* None) the reply instead."""

    step: Step | None = None
    index: int | None = None
    """The step's index in its sequence (None: the outage's, or the sequence is over)."""
    position: int | None = None
    outage: bool = False
    choice: int | None = None
    delay_ms: float | None = None
    execution_ms: float | None = None
    fault_seed: int = 0
    drawn: bool = False
    """Whether the step's values were drawn from the session's generator (it is random)."""
    timeout: tuple[int, int, catalog.Context] | None = None
    reply: Reply | None = None
    draw_key: bytes | None = None
    """Its draw's key (:func:`draw_key`), for what its template draws (ids, numbers)."""


def take(decided: Decided, target: Target, request: Incoming) -> Take:
    """What *target*'s next *request* in *decided*'s session takes of the store, on the
    table it was matched on (a scenario removed or deactivated since the match is not in
    it); for a limited endpoint, a token of its bucket first (:mod:`.limits`)."""
    table, session = decided.table, decided.session
    tasked = target.tasked
    if tasked is not None and tasked.task.callback is not None:  # read now: a submit needs it
        decided.callback_url = callbacks.receiver(tasked.task.callback, request)
    takes = table.takes.get(target.key)
    if takes is None:
        takes = table.takes[target.key] = {}
    took = takes.get(session)
    if took is None:  # the same for every request of the session on the table: made once
        if len(takes) >= MAX_KEPT_TAKES:
            takes.clear()  # atomic, unlike evicting one: handle() runs on threads
        took = takes[session] = _new(Take, (session, *_take_parts(table, target, session)))
    limit = target.limit
    if limit is None:
        return took
    if limit.key == "session":  # (a session's bucket is in its kept Take)
        decided.limit_value = session
        return took
    # Keyed by what the request carries: its bucket, hence its Take, is made per request.
    credentials = table.credential_digest
    assert credentials is not None
    value = decided.limit_value = limits.key_value(limit, session, request, credentials)
    bucket = limits.bucket(limit, _endpoint(target), value)
    return _new(Take, (*took[:6], bucket))


MAX_KEPT_TAKES = 256
"""Sessions whose Take of a sequence a table keeps (beyond: made anew, then kept)."""


def _take_parts(
    table: RoutingTable, target: Target, session: str
) -> tuple[str, int, str, tuple[float, float] | None, bool, Bucket | None]:
    """A Take of *target* on *table* in *session*, but the session: key, generation,
    scenario, outage window (``[start_ms, end_ms)`` after the scenario's activation), draws
    and the session's bucket (for a limit per session)."""
    name = target.scenario or ""
    key = target.key
    generation = table.generations.get(key, 0)
    scenario = table.scenarios[name] if name else None
    outage = scenario.outage if scenario else None
    limit = target.limit
    bucket = None
    if limit is not None and limit.key == "session":
        bucket = limits.bucket(limit, _endpoint(target), session)
    if outage is None:
        return key, generation, name, None, target.draws, bucket
    window = (float(outage.start_ms), float(outage.start_ms + outage.duration_ms))
    return key, generation, name, window, target.draws or outage.step.random, bucket


def _endpoint(target: Target) -> str:
    """What a limit's buckets at *target* are per: its scenario and endpoint."""
    scenario = target.scenario or ""
    return f"{len(scenario)}:{scenario}/{target.endpoint}"


def choose(decided: Decided, taken: NeedAnswer) -> Later[Decided]:
    """*decided* with its :attr:`Decided.chosen`: its target's step and random
    values, as *taken* (the answer to :func:`take`), all of it on the table it was
    matched on; or, when the sequence is exhausted, the reply saying so (a case that
    ends with ``next``: the request passed on, :func:`passed_on`). The draws are
    seeded by the scenario's seed, else the server's (the table's).

    Nothing but *decided* and *taken* decides it. It is a Decided called, the
    Take's resumption, in one function: this runs for every request. A step that moves
    the session's scenario state (``set_state:``) comes as the store's
    :class:`~.store.SetState` to answer first.
    """
    target: Target = decided.target  # type: ignore[assignment]  # a Take is for a Target
    sequence = target.sequence
    assert sequence is not None
    table, name = decided.table, target.scenario
    index = None
    answered: Taken = taken  # type: ignore[assignment]  # a Take is answered a Taken
    position, draw, spent = answered  # unpacked: faster than a NamedTuple's attributes
    if spent is not None:  # a limited endpoint: what its bucket said
        limit = target.limit
        assert limit is not None
        if not spent[ADMITTED]:  # not played: refused, advised when the next token comes
            refusal, record = refused(decided, spent)
            decided.chosen = Chosen(reply=refusal.reply)
            decided.limited = _new(limits.Limited, (refusal.advised.headers, False, record))
            return decided
        policy = target.policy
        assert policy is not None
        decided.limited = limits.admitted(policy, spent, decided.limit_value, time.time())
    if position is None:  # in the scenario's outage
        scenario = table.scenarios[name] if name else None
        assert scenario is not None
        assert scenario.outage is not None
        step, in_outage = scenario.outage.step, True
    else:
        index = sequence.step_at(position)
        if index is None:
            if target.passes:
                return passed_on(decided, target)
            reply = decided.urls.fill(exhausted_reply(target, decided.session, position))
            decided.chosen = Chosen(position=position, reply=reply)
            return decided
        step, in_outage = sequence.steps[index], False
    if step.task == "submit":  # a task skill's invoke: the store starts its task first
        delay_ms = None
        if step.delay is not None:  # the 202 comes this late (the task started already)
            rng = _NO_RANDOM
            if step.random:  # (a delay drawn: from the session's generator, as any step's)
                scenario = table.scenarios[name] if name else None
                seed = table.seed if scenario is None or scenario.seed is None else scenario.seed
                rng = keyed_generator(draw_key(seed, name or "", decided.session, draw))
            delay_ms = round(step.delay.draw(rng), 3)
        decided.chosen = Chosen(step, index, position, in_outage, delay_ms=delay_ms)
        return _submit(decided, target)
    if step.rate_limited is not None:
        delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
        chosen = Chosen(step, index, position, in_outage, delay_ms=delay_ms)
        return _scripted_limit(decided, chosen, step.set_state)
    skill = target.skill
    timeout = None
    if skill is not None and skill.timeout_ms is not None:
        timeout = (skill.timeout_ms, skill.timeout_status, target.context)
    if step.random:
        scenario = table.scenarios[name] if name else None
        seed = table.seed if scenario is None or scenario.seed is None else scenario.seed
        key = draw_key(seed, name or "", decided.session, draw)
        drawn, choice, delay_ms, execution_ms, fault_seed = _draw(step, keyed_generator(key))
        if drawn.rate_limited is not None:  # (an outcome of a one_of)
            chosen = Chosen(drawn, index, position, in_outage, choice, delay_ms, drawn=True)
            moves = step.set_state if drawn.set_state is None else drawn.set_state
            return _scripted_limit(decided, chosen, moves)
        decided.chosen = Chosen(
            drawn,
            index,
            position,
            in_outage,
            choice,
            delay_ms,
            execution_ms,
            fault_seed,
            True,
            timeout,
            draw_key=key,
        )
        # The outcome drawn moves the state, else the step it is an outcome of.
        moves = step.set_state if drawn.set_state is None else drawn.set_state
        if moves is None:
            return decided
        return _new(Pending, (SetState(decided.session, name or "", moves), decided.unchanged))
    # Nothing to draw: no generator is made. Positional: one per request.
    delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
    execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
    decided.chosen = Chosen(
        step, index, position, in_outage, None, delay_ms, execution_ms, 0, False, timeout
    )
    if step.set_state is None:
        return decided
    return _new(Pending, (SetState(decided.session, name or "", step.set_state), decided.unchanged))


def poll_step(decided: Decided, step: Step, index: int, poll: int) -> Chosen:
    """*step* (of a task's ``polls:``, at *index*) chosen for poll number *poll* of
    *decided*'s task, its values drawn as :func:`choose` draws a sequence step's: the poll
    number stands for the draw number (the store counted it: any replica draws the same),
    in a stream of the skill's status URLs."""
    target: Target = decided.target  # type: ignore[assignment]  # a status URL's Target
    skill = target.skill
    timeout = None
    if skill is not None and skill.timeout_ms is not None:
        timeout = (skill.timeout_ms, skill.timeout_status, target.context)
    if not step.random:
        delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
        execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
        return Chosen(step, index, poll, False, None, delay_ms, execution_ms, 0, False, timeout)
    table, name = decided.table, target.scenario or ""
    scenario = table.scenarios.get(name)
    seed = table.seed if scenario is None or scenario.seed is None else scenario.seed
    key = draw_key(seed, f"{name}/{target.key}", decided.session, poll)
    drawn, choice, delay_ms, execution_ms, fault_seed = _draw(step, keyed_generator(key))
    return Chosen(
        drawn,
        index,
        poll,
        False,
        choice,
        delay_ms,
        execution_ms,
        fault_seed,
        True,
        timeout,
        draw_key=key,
    )


def _submit(decided: Decided, target: Target) -> Later[Decided]:
    """*decided*, a task skill's invoke whose step is ``task: submit``, once the store has
    started its task (:class:`~.store.Submit`): answered 202 (:meth:`Decided.submitted`)."""
    tasked = target.tasked
    assert tasked is not None, "the loader puts task: submit in task skills' invokes only"
    url = decided.callback_url
    kept = ""  # what any replica needs to follow its callbacks (none without a receiver)
    if url is not None:  # a receiver mockskill may not call: refused, and no task started
        judged = decided.table.callback_hosts.judge(url)
        if isinstance(judged, Refused):
            chosen = decided.chosen
            assert chosen is not None
            chosen.reply = decided.urls.fill(callbacks.refused_reply(tasked.skill_id, judged))
            decided.task = task_journalled("submit", "", known=False, served=False)
            return decided
        decided.callback_url = judged
        kept = callbacks.follow_text(judged, decided.urls, target.scenario)
    limit = decided.table.max_tasks
    need = _new(Submit, (decided.session, tasked.skill, tasked.submit_keep_ms, limit, kept))
    return _new(Pending, (need, decided.submitted))


def _lose(chosen: Chosen, step: Step, accepted: Reply, urls: Urls) -> None:
    """*chosen*, a ``task: submit`` with ``after:``, once its task started: its 202
    (*accepted*) is what ran (the journal and an idempotent replay read it); what is sent is
    ``after``'s error, or the 202 with ``after``'s fault done to the connection."""
    error = step.reply is not step.ran  # (the loader's: after's error, else the 202's stand-in)
    sent = urls.fill(step.reply) if error else accepted
    chosen.step = dataclasses.replace(step, reply=sent, ran=accepted)
    if step.fault is None:
        chosen.reply = sent
        return
    # Played as a step (the fault is the plan's), made for this task: never a kept plan.
    chosen.reply = None
    chosen.drawn = True


def _scripted_limit(decided: Decided, chosen: Chosen, moves: str | None) -> Later[Decided]:
    """*decided*, its *chosen* step a scripted ``rate_limited:`` answer, made now for when
    it is sent, after its delay (the date form reads the clock): answered, not played;
    the step moves the session's state to *moves* first (None: it stays)."""
    step, target = chosen.step, decided.target
    assert step is not None
    assert step.rate_limited is not None
    assert isinstance(target, Target), "a step is a target's"
    sent_at = time.time() + (chosen.delay_ms or 0) / 1000
    reply, decided.limited = limits.scripted(step.rate_limited, target.context, sent_at)
    chosen.reply = decided.urls.fill(reply)
    decided.chosen = chosen
    if moves is None:
        return decided
    need = SetState(decided.session, target.scenario or "", moves)
    return _new(Pending, (need, decided.unchanged))


def refused(decided: Decided, spent: Spent) -> tuple[Refusal, LaterRecord]:
    """The answer to *decided*'s request, refused by its limit (*spent*: no token), and its
    journal's record (``Entry.rate_limit``). The answer is kept on the table per target (a
    case's journal row names its case), address and the values it states
    (:meth:`.limits.Policy.stated`): most refusals repeat one, and its body, head and
    journal row are made once."""
    target: Target = decided.target  # type: ignore[assignment]  # a limit is a Target's
    urls = decided.urls
    policy = target.policy
    assert policy is not None
    now = time.time()
    refusals = decided.table.refusals
    key = (id(target), id(urls), policy.stated(spent, now))
    kept = refusals.get(key)
    if kept is None or kept.target is not target or kept.urls is not urls:
        kept = Refusal(target, urls, policy, limits.refusal_headers(policy, spent, now))
        if len(refusals) >= MAX_KEPT_REFUSALS:
            refusals.clear()  # atomic, unlike evicting one: handle() runs on threads
        refusals[key] = kept  # (the target and Urls kept with it: their ids stay their own)
    _, remaining, next_ms, full_ms = spent
    return kept, (kept.record, decided.limit_value, remaining, next_ms, full_ms)


class Refusal:
    """A refusal's answer as it is kept (:func:`refused`): its reply and plan (marked
    journalled: the caller records it as planned), the headers and advice it states, and
    the journal's record of it but for what varies per request."""

    __slots__ = ("advised", "journal", "plan", "record", "reply", "target", "urls")

    def __init__(
        self, target: Target, urls: Urls, policy: limits.Policy, advised: limits.Advised
    ) -> None:
        self.target, self.urls, self.advised = target, urls, advised
        self.reply = urls.fill(limits.refusal_reply(policy.limit, target.context, advised))
        self.plan = plans.Plan(answer(self.reply), journalled=True)
        self.record = limits.refused_record(policy, advised)
        self.journal: Any = None
        """Its journal row: a :class:`~.journalling.Plain` the engine makes on first use
        (a type this module cannot name: journalling imports it); None until then."""


MAX_KEPT_REFUSALS = 256
"""Refusals (replies and plans) a table keeps (beyond: made anew, then kept)."""


def passed_on(decided: Decided, used: Target) -> Decided | Pending[Decided]:
    """*decided*, its request passed on by *used* (a case over that ends with ``next``) to
    the next case that takes it, the endpoint's steps, or a miss (:meth:`RoutingTable.passed_on`):
    then its Take, resumed as the first was."""
    kept = decided.request
    assert kept is not None  # (kept for a target that passes: Engine.decide)
    target = decided.table.passed_on(used, *kept)
    decided.target = target
    if isinstance(target, Miss):
        decided.reply = decided.urls.fill(miss_reply(target))
        return decided
    took = take(decided, target, kept[0])
    if decided.limited is not None:  # its endpoint's limit admitted it already: not twice
        took = _new(Take, (*took[:6], None))
    return _new(Pending, (took, decided))


@dataclass(slots=True)
class Keyed:
    """What a request's ``Idempotency-Key`` decided (:mod:`.idempotency`), for a skill that
    honours it: the journal reads it (:mod:`.journalling`)."""

    key: str
    digest: str
    executed: bool = False
    replayed: bool = False

    @property
    def shown(self) -> str:
        """The key as the journal keeps it: bounded, printable."""
        return shorten(escaped(self.key))


@dataclass(slots=True)
class Decided:
    """What :meth:`Engine.decide` found: a reply, or a target whose step is to play.

    One whose step the store is still to take is the resumption of its Take's
    :class:`~.pending.Pending`: called with what was taken, it chooses (:func:`choose`).
    """

    started: float
    session: str
    table: RoutingTable
    target: Target | Miss
    urls: Urls
    reply: Reply | None
    forced: bool
    """Whether ``Mockskill-Error`` chose the reply."""
    chosen: Chosen | None = None
    """The step to play, once the store answered the :class:`~.store.Take` (reply None)."""
    idempotency: Keyed | None = None
    """What its ``Idempotency-Key`` decided, for a skill that honours it (None: not such a
    request; see :mod:`.idempotency`)."""
    request: tuple[Incoming, str | None] | None = None
    """The request and its session's scenario state (None: not read), kept only when its
    case may pass it on (``end: next``), to match the cases after it."""
    limit_value: str | None = None
    """What its endpoint's limit counts it by: its session, a header's value, ...
    (:func:`take`; None: the endpoint's shared bucket, or not limited)."""
    limited: limits.Limited | None = None
    """What a rate limit said of it: its bucket's (admitted or refused) or a scripted
    ``rate_limited:`` step's (None: nothing limits it)."""
    task: dict[str, Any] | None = None
    """What it did to a long-running task, as its journal entry keeps it (``Entry.task``;
    None: it touched none)."""
    callback_url: object | Receiver = None
    """The receiver's URL its invoke carries, for a task skill with ``callback:`` (None:
    none), as judged once its submit is played (a :class:`~.callback_hosts.Receiver`)."""
    callback: callbacks.Notice | None = None
    touched: tuple[str, int, TaskRecord] | None = None
    """A cancel or an input that counted: the task's session, number and record as the
    store answered it (what the task's watches follow from)."""
    watch: TaskWatch | None = None
    """A poll asking for a stream, of a task skill that is watched (:mod:`.task_watch`):
    answered with the task's changes as a stream (None: not a watch)."""
    """What the courier is told of the task it submitted or touched (one with callbacks)."""

    __call__ = choose
    """Resumed with what the :class:`~.store.Take` of its request took: the step chosen
    (:func:`choose`, as a method: one frame per request)."""

    def submitted(self, answer: NeedAnswer) -> Decided:
        """Itself, answered now that the store started its task (a :class:`~.store.Submitted`):
        202 with the task, or 503 with retry advice when the server holds its limit."""
        target = self.target
        assert isinstance(target, Target)
        tasked = target.tasked
        assert tasked is not None  # (see _submit)
        chosen = self.chosen
        assert chosen is not None
        assert isinstance(answer, Submitted)  # a Submit is answered a Submitted
        number, at_ms = answer
        step = chosen.step
        assert step is not None
        if number is None:
            chosen.reply = self.urls.fill(over_cap(target.context, self.table.max_tasks))
            self.task = task_journalled("submit", "", known=False, served=False)
            if step.ran is not None:  # no task started: nothing ran for after: to lose
                chosen.step = dataclasses.replace(step, ran=None, fault=None)
            return self
        keyed = self.table.task_ids
        assert keyed is not None  # (set with the table's generations)
        reply, view, task_id = tasked.submitted(self.session, number, at_ms, keyed)
        chosen.reply = accepted = self.urls.fill(reply)
        lost = step.ran is not None
        record = task_journalled("submit", task_id, known=True, served=not lost, view=view)
        record["settles_at_ms"] = view.settles_at_ms
        self.task = record
        callback = tasked.task.callback
        if callback is not None and isinstance(self.callback_url, Receiver):
            fault = callbacks.fault_of(callback, number)
            record["callback_fault"] = fault  # (a never task sends nothing: the audit reads it)
            self.callback = callbacks.Notice(
                self.session,
                number,
                task_id,
                tasked,
                tasks.submitted_record(tasked.skill, at_ms),
                self.urls,
                self.callback_url,
                fault,
                target.scenario,
            )
        if lost:
            _lose(chosen, step, accepted, self.urls)
        return self

    def unchanged(self, answer: NeedAnswer) -> Decided:
        """Itself, once the store has moved the session's state (the chosen step's
        :class:`~.store.SetState`, answered None)."""
        return self

    def reply_to_send(self) -> Reply | None:
        """The reply that answers it as it is (a refusal, a miss, a listing, the sequence
        over), or None: its chosen step is to be played."""
        reply = self.reply
        if reply is None:
            chosen = self.chosen
            assert chosen is not None
            reply = chosen.reply
        return reply


def generator(seed: int, stream: str, session: str, draw: int) -> random.Random:
    """The generator of draw number *draw* of *session* in *stream* (a scenario's name).

    A pure function of its arguments, so any process makes the same one: the
    store only counts the draws. The names are length-prefixed, so that no two
    (stream, session) pairs read alike; their BLAKE2b digest seeds a
    :class:`_SplitMix`: one is made per drawn request, and seeding a Mersenne
    Twister (``random.Random(seed)``) cost twice the whole draw.
    """
    return keyed_generator(draw_key(seed, stream, session, draw))


def keyed_generator(key: bytes) -> random.Random:
    """The generator whose seed is the digest of *key* (:func:`draw_key`'s)."""
    return _SplitMix(int.from_bytes(blake2b(key, digest_size=8).digest(), "big"))


def draw_key(seed: int, stream: str, session: str, draw: int) -> bytes:
    """What names draw number *draw* of *session* in *stream* under *seed*: its generator's
    seed is this key's digest, and a template's ids and numbers are digests of it too
    (:class:`~.rendering.RequestValues`), so the same seed replays both."""
    return prefixed_draw_key(draw_prefix(seed, stream, session), draw)


def prefixed_draw_key(prefix: bytes, draw: int) -> bytes:
    """:func:`draw_key` of draw number *draw* from its session's :func:`draw_prefix`."""
    return b"%s%d" % (prefix, draw)


def draw_prefix(seed: int, stream: str, session: str) -> bytes:
    """What :func:`draw_key` begins with for every draw of *session* in *stream* under
    *seed* (a caller making many keys of one session keeps it)."""
    text = f"{seed}:{len(stream)}:{stream}:{len(session)}:{session}:"
    return text.encode("utf-8", "surrogatepass")


_MASK = (1 << 64) - 1


class _SplitMix(random.Random):
    """``random.Random``'s methods over SplitMix64 (Steele, Lea and Flood, 2014).

    A 64-bit state, made in one assignment (no 624-word table to seed), whose
    outputs pass TestU01's BigCrush: as good as the Mersenne Twister for the
    few values a step draws. ``random()`` and ``getrandbits()`` are its own;
    every other method of ``random.Random`` is built on them.
    """

    def __init__(self, state: int) -> None:  # not Random's: it would seed the Twister
        self._state = state
        self.gauss_next = None  # what Random.seed sets for gauss()

    def seed(self, *args: object, **kwargs: object) -> None:
        """Seeded once, when made."""

    def _next(self) -> int:
        self._state = z = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self._next() >> 11) * (1.0 / (1 << 53))

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        bits, have = 0, 0
        while have < k:
            bits, have = (bits << 64) | self._next(), have + 64
        return bits >> (have - k)


_NO_RANDOM = random.Random(0)
"""Handed to fixed delays, which draw nothing from it."""


def _draw(
    step: Step, rng: random.Random
) -> tuple[Step, int | None, float | None, float | None, int]:
    """Every random value a step needs, in a fixed order (so a seed replays it)."""
    choice = None
    if step.choices:
        total = sum(c.weight for c in step.choices)
        roll, choice = rng.random() * total, len(step.choices) - 1
        for i, option in enumerate(step.choices):
            roll -= option.weight
            if roll < 0:
                choice = i
                break
        step = step.choices[choice].step
    delay = round(step.delay.draw(rng), 3) if step.delay else None
    execution = round(step.execution.draw(rng), 3) if step.execution else None
    return step, choice, delay, execution, rng.getrandbits(32)


def request_values(request: Incoming, decided: Decided, chosen: Chosen) -> RequestValues:
    """What a template reads of *request*, whose step *chosen* is (with its draws' generator,
    if it drew): :mod:`.rendering`'s source."""
    target = decided.target
    assert isinstance(target, Target), "a step is played for a target, never a miss"
    started, session = decided.started, decided.session
    return RequestValues(
        request, target, session, started, chosen.position, chosen.index, chosen.draw_key
    )
