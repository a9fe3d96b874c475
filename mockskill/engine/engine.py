"""One request through the scenarios: match → next step → act → record.

Its public face is small: :meth:`Engine.decide` (what a request comes to),
:meth:`Engine.plan` / :meth:`Engine.plan_async` (that, as a plan the
event-loop transport plays), and for a player that plays steps itself (a
WSGI server's thread: :func:`mockskill.wsgi.player.handle`, the only path
that imports Werkzeug) :attr:`Engine.entry` and :meth:`Engine.unavailable`.
Either way it reads the request through :class:`~.incoming.Incoming`, and
uses no Flask globals, so it can be driven without a server. It asks the
store nothing itself: what a request needs of it (a sequence step, a token's
use, a token issued) is handed out as a need (:mod:`.pending`) and the one
path of :meth:`Engine.decide` resumed with the answer, inline or awaited. It
reads the scenario set through one reference, swapped whole on reload, so a
request finishes on the configuration it started with.

The hot path is the ordinary path with what does not change kept: the
:class:`Urls` per address the client used, and the plan of a step whose
answer depends on nothing drawn or measured per request, per step and
address; a request is journalled as one :class:`~.entries.Entry` tuple.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, TypeAlias

from ..protocol import catalog
from ..scenario.model import INITIAL_STATE, Reply, ScenarioSet, Step
from . import (
    auth,
    builtin_answers,
    callbacks,
    choosing,
    idempotency,
    limits,
    task_requests,
    task_watch,
)
from . import plan as plans
from .actions import Planned, Urls, answer, answer_of
from .actions import plan as plan_step
from .addresses import MAX_CACHED, MAX_CACHED_BYTES, MAX_HOST, Addresses
from .builtin_answers import SESSION_HEADER as SESSION_HEADER
from .builtin_answers import STATE_UNAVAILABLE as STATE_UNAVAILABLE
from .builtin_answers import unavailable
from .callback_hosts import LOOPBACK_ONLY, CallbackHosts
from .capabilities import check_playable
from .choosing import Chosen, Decided, request_values
from .digests import KeyedDigest
from .entries import DEFAULT_BODY_LIMIT
from .exchange import Recorder as ExchangeRecorder
from .incoming import Incoming
from .journalling import Journalling, Plain, Plains, PolledTasks, RenderedPlain
from .matching import Miss, RoutingTable, Target
from .named_ports import HeldPort, TLSPorts
from .pending import Later, Pending, answered, awaited
from .proxying import Proxying
from .replies import (
    ERROR_HEADER,
    VERSION_HEADER,
    forced_reply,
    miss_reply,
    version_reply,
)
from .state import DEFAULT_SESSION, MAX_SESSION_NAME
from .store import ADMITTED, NeedAnswer, ReadState, Spent, Store, StoreUnavailable, TaskRecord
from .streams import KeptStreams
from .task_requests import Poll
from .task_skills import DEFAULT_MAX_TASKS

if TYPE_CHECKING:
    from werkzeug.wrappers import Request, Response

_SESSION, _ERROR, _VERSION = (h.lower() for h in (SESSION_HEADER, ERROR_HEADER, VERSION_HEADER))
"""The headers read on every request, as :attr:`Incoming.headers` names them."""
_KEY = idempotency.KEY
_CASE = builtin_answers.CASE_HEADER.lower()
_NAMEABLE = frozenset({"describe", "invoke", "route"})
"""The endpoints whose cases ``Mockskill-Case`` names (not the list, not a status URL)."""
_new = tuple.__new__
Recorder = Callable[[plans.Outcome], None]
Decision: TypeAlias = "Response | Reply | Decided"
"""What deciding a request comes to (:meth:`Engine.decide`): an answer mockskill gave
itself, journalled already (a refusal, the OAuth2 endpoints: a Werkzeug Response for
those), or the request's :class:`Decided`: a reply to send or a step to play."""


class Engine:
    """Answers skill-surface and free-route requests from a scenario set.

    *raw_socket* says whether the server hands the app each connection's
    socket (Werkzeug's does, as ``werkzeug.socket``); scenarios with
    transport faults are refused without it. *refused* is the port held for
    unreachable skills, *tls* the TLS faults' ports: both bound by the transport and
    handed in by the server (none without them). The journal keeps what each request
    sent, its body up to *journal_body_limit* bytes, unless not *journal_bodies*. The
    outage windows of *scenarios* start now, unless not *activate* (see :meth:`load`).
    Task skills' invokes start at most *max_tasks* live tasks (over it: 503 with retry
    advice, docs/tasks.md); their callbacks go to loopback and *callback_hosts* only.
    """

    def __init__(
        self,
        scenarios: ScenarioSet,
        state: Store,
        *,
        raw_socket: bool = False,
        refused: HeldPort | None = None,
        activate: bool = True,
        tls: TLSPorts | None = None,
        journal_bodies: bool = True,
        journal_body_limit: int = DEFAULT_BODY_LIMIT,
        max_tasks: int = DEFAULT_MAX_TASKS,
        callback_hosts: CallbackHosts = LOOPBACK_ONLY,
    ) -> None:
        if max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, not {max_tasks}")
        self.state = state
        self.max_tasks = max_tasks
        """The live tasks the server holds at most (``--max-tasks``)."""
        self.callback_hosts = callback_hosts
        """Where task callbacks may go besides loopback (``--callback-allow``); it judges
        the URL an invoke carries (:meth:`CallbackHosts.judge`)."""
        self.on_task_touched: Callable[[str, int, TaskRecord], None] | None = None
        """Told of every cancel or input that counted, with the store's record (the task
        watches'; None: nobody watches tasks)."""
        self.on_callback: Callable[[callbacks.Notice], None] | None = None
        """Told of every submit and touch of a task with callbacks (the courier's; None:
        nobody delivers them, as when the engine is driven without a server)."""
        # Task ids are signed with a key of their own, derived from the store's (the same
        # for every replica of a shared store: any of them reads any id).
        self._task_ids = KeyedDigest(KeyedDigest(state.digest_key).raw(b"task"))
        self._answer = None if state.remote else state.answer
        """An inline store's answer(): the driver inlined where a step needs it (no Pending
        made, nothing resumed); None for a remote store, whose needs are handed out."""
        self.raw_socket = raw_socket
        addresses = self._addresses = Addresses(refused, tls)
        self.refused = addresses.refused
        self.tls = tls
        """The TLS faults' ports (held by the server that serves them; None: none can be)."""
        self.secure_ports = addresses.secure_ports
        """The local ports that read requests over TLS (see :class:`Addresses`)."""
        self._urls = addresses.urls  # (a bound method: one lookup per request, as a method's)
        self._urls_by_host = addresses.by_host
        self._open = False
        journalling = self._journalling = Journalling(state, journal_bodies, journal_body_limit)
        self.entry = journalling.recorded
        """The journal's entry of a decided request as it was answered (for a player that
        plays the step itself: :mod:`mockskill.wsgi`); :attr:`state` records it."""
        self.sent_before_refusal = journalling.sent_before_refusal
        """What a request the transport refused sent, as its entry keeps it (by field)."""
        self._proxying = Proxying(journalling, state)
        self.matched: Callable[[Incoming, Target | Miss], None] | None = None
        """Called with each request once matched, before it is answered (None: nothing).
        Tests use it to land a change of scenarios between the two."""
        self.scenarios = ScenarioSet()
        self.table = RoutingTable(self.scenarios)
        self._plans: dict[tuple[int, int], tuple[Step, Urls, Planned]] = {}
        """Plans of steps that answer the same to every request (see :meth:`_planned`),
        by the step's id and the Urls; the step is kept with its plan, so its id cannot
        be another's while the plan is kept."""
        self._plans_bytes = 0
        """What the kept plans' filled replies weigh (see :data:`MAX_CACHED_BYTES`)."""
        self._plains: dict[tuple[int, int], tuple[object, object, Plains]] = {}
        """Plain steps' journalling and plans (see :class:`Plains`), by the ids of the target
        and the Urls."""
        self._polled: dict[tuple[int, int, int], tuple[object, object, object, PolledTasks]] = {}
        """Status URLs' kept polls (see :class:`PolledTasks`), by the ids of the target and
        the Urls (both kept with it)."""
        self._streams = KeptStreams()
        """Stream steps framed once per step, address and format (:mod:`.streams`)."""
        self.load(scenarios, activate=activate)

    @property
    def recorder(self) -> ExchangeRecorder | None:
        """Where proxied exchanges go while a recording is on (None: no recording); set and
        unset while serving, read once per proxied request (when it is planned)."""
        return self._proxying.recorder

    @recorder.setter
    def recorder(self, recorder: ExchangeRecorder | None) -> None:
        self._proxying.recorder = recorder

    def load(
        self, scenarios: ScenarioSet, restart: Iterable[str] = (), *, activate: bool = True
    ) -> None:
        """Serve *scenarios* from the next request on (requests in flight keep theirs).

        Sequences *restart* (their keys) start afresh for the requests that
        arrive from then on; a request in flight finishes on the table and
        sequence positions it matched. Raises ScenarioError, and keeps
        serving what it served, if this server cannot play them. Outage
        windows of newly loaded scenarios start now, unless not *activate*
        (another replica loaded them and started their windows in the shared
        store: starting them again here would move them).
        """
        check_playable(scenarios, raw_socket=self.raw_socket, tls=self.tls is not None)
        table = RoutingTable(scenarios)
        # Outage windows start when a scenario is loaded; one kept as it was
        # (the very object: Server.add, Server.remove) keeps its window.
        served = self.scenarios.scenarios
        if activate:
            self.state.activate(
                [
                    s.name
                    for s in scenarios.scenarios
                    if s.outage and not any(s is old for old in served)
                ]
            )
        # Restarted before the table is served, and the table built on the new
        # generations: no request can take a restarted position from the old one.
        table.generations = self.state.restart(restart)
        table.seed = self.state.seed
        table.credential_digest = self._journalling.credential_digest
        table.max_tasks, table.task_ids = self.max_tasks, self._task_ids
        table.callback_hosts = self.callback_hosts
        self.scenarios, self.table = scenarios, table
        self._plans.clear()  # the old steps' plans would only be kept alive, never asked for
        self._plains.clear()
        self._polled.clear()
        self._streams.clear()
        self._plans_bytes = 0
        if self._open:
            self.open()

    def open(self) -> None:
        """Start serving: hold the refused port while an unreachable skill needs it, and
        the TLS faults' ports theirs."""
        self._open = True
        self._addresses.open(self.scenarios.skills)

    def close(self) -> None:
        """Stop serving: let go of the held ports (:meth:`open` takes them again)."""
        self._open = False
        self._addresses.close()

    def plan(
        self, request: Incoming | Request, decision: Decision | None = None
    ) -> tuple[plans.Plan, Recorder]:
        """What to answer to *request*, and how, as a plan the transport plays.

        No I/O and no sleeping here: the store's answers come inline
        (:meth:`Store.answer`; for a remote store, only off the loop: on the
        loop, :meth:`plan_async`, which hands its decision in as *decision*). The
        second value records the request in the journal once the transport
        says how the plan went (call it once).
        """
        incoming = request if isinstance(request, Incoming) else Incoming.of(request)
        try:
            result = self.decide(incoming) if decision is None else decision
            if isinstance(result, Pending):
                need, resume = result  # unpacked: faster than a NamedTuple's attributes
                if type(resume) is Decided and self._answer is not None:
                    # A sequence step's Take, answered inline: a plain step is planned at once.
                    taken = self._answer(need)
                    plain = self._plain(incoming, resume, taken)
                    if plain is not None:  # most requests: journalled as planned
                        return plain, journalled
                    result = resume(taken)
                elif type(resume) is Poll and self._answer is not None:
                    # A poll's Touch, answered inline: the task as it stands is kept-planned.
                    taken = self._answer(need)
                    polled = self._kept_poll(incoming, resume, taken)
                    if polled is not None:  # journalled as planned
                        return polled, journalled
                    result = resume(taken)
            decided = answered(result, self.state) if isinstance(result, Pending) else result
        except StoreUnavailable as exc:
            return plans.Plan(answer(self.unavailable(incoming, exc))), journalled
        if not isinstance(decided, Decided):  # answered by mockskill itself, journalled already
            return plans.Plan(answer_of(decided)), journalled
        if decided.callback is not None and self.on_callback is not None:
            self.on_callback(decided.callback)  # (the courier plans; it sends later)
        touched = decided.touched
        if touched is not None and self.on_task_touched is not None:
            self.on_task_touched(*touched)  # (its watches play what follows)
        if decided.watch is not None:  # a task watched: its changes as a stream
            head, watch, play = task_watch.first(decided.watch)
            recorded = partial(self._journalling.watched, watch, incoming, decided)
            return plans.Plan(head, stream=play, watch=watch), recorded
        reply, chosen = decided.reply_to_send(), decided.chosen
        if reply is not None:  # nothing to play: the reply is the answer
            plan, served = plans.Plan(answer(reply)), reply
            if chosen is not None and chosen.delay_ms:  # (a scripted rate_limited step's)
                plan = plans.Plan(answer(reply), waits=(plans.Wait(chosen.delay_ms),))
            timed_out = None
        else:
            assert chosen is not None
            assert chosen.step is not None
            if chosen.step.proxy is not None:  # forwarded: planned and journalled by proxying
                table = decided.table  # a proxied list of skills gets the scripted ones
                scripted = table.listing if table.skills else None
                return self._proxying.plan(incoming, decided, chosen, scripted)
            stream = chosen.step.stream
            if stream is not None:  # its waits planned as any step's, then its events
                planned = self._planned(chosen, decided.urls)
                target: Target = decided.target  # type: ignore[assignment]  # a step's
                headers = incoming.headers
                framed = self._streams.framed(
                    stream, headers.get("accept"), target.context, decided.urls
                )
                # From the start, or after the event a resumable stream's request names.
                attempt = framed.attempt(headers.get("last-event-id"))
                plan = dataclasses.replace(planned.plan, answer=framed.answer, stream=attempt.play)
                limited = decided.limited
                if limited is not None and limited.added:
                    plan = plan.answering(limits.with_headers(plan.answer, limited.headers))
                streamed = partial(self._journalling.streamed, framed, attempt)
                return plan, partial(streamed, incoming, decided, chosen, planned.reply)
            if chosen.step.reply.template is None:
                planned = self._planned(chosen, decided.urls)
            else:  # made from this request: planned for it alone, never kept
                planned = self._templated(incoming, decided, chosen)
            plan, served, timed_out = planned.plan, planned.reply, planned.timed_out
        limited = decided.limited
        if limited is not None and limited.added:  # admitted by its limit: what is left
            plan = plan.answering(limits.with_headers(plan.answer, limited.headers))
        # A partial, not a closure: a closure's cells are made on every call of this method
        # (a plain step's too), and a waiting request would hold nine objects for the
        # collector to walk instead of two.
        dribbled = plan.dribble is not None
        played = self._journalling.played
        return plan, partial(played, incoming, decided, chosen, served, timed_out, dribbled)

    async def plan_async(
        self, request: Incoming | Request, going: Callable[[], bool] | None = None
    ) -> tuple[plans.Plan, Recorder]:
        """:meth:`plan`, the store's answers awaited (:meth:`Store.answer_async`): on the loop,
        for a remote store, which must never block it. *going* says whether the exchange is
        still on once the store answered (None: it is): a plan journalled as it is made says
        the request was answered, which a client gone meanwhile was not."""
        incoming = request if isinstance(request, Incoming) else Incoming.of(request)
        try:
            result = self.decide(incoming)
            if isinstance(result, Pending):
                need, resume = result  # unpacked: faster than a NamedTuple's attributes
                if type(resume) is Decided:
                    # A sequence step's Take: a plain step is planned at once, as in plan().
                    taken = await self.state.answer_async(need)
                    if going is None or going():
                        plain = self._plain(incoming, resume, taken)
                        if plain is not None:  # most requests: journalled as planned
                            return plain, journalled
                    result = resume(taken)
                elif type(resume) is Poll:  # a poll's Touch: as in plan()
                    taken = await self.state.answer_async(need)
                    if going is None or going():
                        polled = self._kept_poll(incoming, resume, taken)
                        if polled is not None:  # journalled as planned
                            return polled, journalled
                    result = resume(taken)
            decided = await awaited(result, self.state) if isinstance(result, Pending) else result
        except StoreUnavailable as exc:
            return plans.Plan(answer(self.unavailable(incoming, exc))), journalled
        return self.plan(incoming, decided)

    def unavailable(self, request: Incoming, exc: StoreUnavailable) -> Reply:
        """503 ``MOCKSKILL_STATE_UNAVAILABLE`` for *request*, journalled: the store could not
        answer what deciding it needed (:meth:`decide` raised *exc*)."""
        return unavailable(self._journalling, request, exc)

    def _choose(self, decided: Decided, request: Incoming) -> Later[Decided]:
        """*decided*, and when it has no reply, the step to play: asked of the store first
        (and, for a skill that honours it, what the request's key did before)."""
        target = decided.target
        if decided.reply is not None or isinstance(target, Miss):
            return decided
        if target.idempotent and _KEY in request.headers:
            return idempotency.keyed(request, decided, self.state.digest_key)
        return _new(Pending, (choosing.take(decided, target, request), decided))

    def _planned(self, chosen: Chosen, urls: Urls) -> Planned:
        """The plan of *chosen*'s step for *urls*: made once and kept when it is the same for
        every request (nothing drawn, no cut whose answer measures the time), else per
        request. A kept plan answers with the same Answer object, whose head renders once."""
        step = chosen.step
        assert step is not None
        cut = (
            chosen.execution_ms is not None
            and chosen.timeout is not None
            and chosen.execution_ms > chosen.timeout[0]
        )
        same_for_all = not chosen.drawn and not cut
        # By identity: Urls is a frozen dataclass, whose generated __hash__ (a Python call)
        # cost more than the rest of the lookup. The entry holds the step and the Urls, so
        # neither id can be reused while it is kept; the same address's requests get the
        # same Urls (_urls), and an equal Urls made anew only misses once.
        key = (id(step), id(urls))
        if same_for_all:
            kept = self._plans.get(key)
            if kept is not None and kept[0] is step and kept[1] is urls:
                return kept[2]
        planned = plan_step(
            step,
            urls,
            delay_ms=chosen.delay_ms,
            execution_ms=chosen.execution_ms,
            fault_seed=chosen.fault_seed,
            timeout=chosen.timeout,
        )
        if same_for_all:
            # Weighed by the copy it makes for this address: its reply, filled (a reply with
            # no placeholder is the model's own, shared by every address).
            size = 0 if planned.reply is step.reply else len(planned.reply.body)
            if len(self._plans) >= MAX_CACHED or self._plans_bytes + size > MAX_CACHED_BYTES:
                # Atomic, unlike evicting one: handle() runs on threads. The plains hold
                # these plans: they go with them.
                self._plans.clear()
                self._plains.clear()
                self._plans_bytes = 0
            self._plans[key] = (step, urls, planned)
            self._plans_bytes += size
        return planned

    def _templated(self, request: Incoming, decided: Decided, chosen: Chosen) -> Planned:
        """The plan of *chosen*'s step, whose reply has ``{{...}}`` placeholders, made for
        *request* (never kept: its answer is this request's)."""
        step = chosen.step
        assert step is not None
        return plan_step(
            step,
            decided.urls,
            delay_ms=chosen.delay_ms,
            execution_ms=chosen.execution_ms,
            fault_seed=chosen.fault_seed,
            timeout=chosen.timeout,
            values=request_values(request, decided, chosen),
        )

    def decide(
        self, request: Incoming, known: tuple[RoutingTable, str] | None = None
    ) -> Later[Decision]:
        """Everything about *request* up to its step: an answer mockskill gave itself
        (journalled already), or what to play; and what that needs of the store first,
        then the rest once answered (a sequence step's Take, resumed by its Decided; a
        credential's or the token endpoint's need). :meth:`plan` plays it on the loop's
        transport, :func:`mockskill.wsgi.player.handle` on a WSGI server's thread.

        An endpoint whose cases require a scenario state asks the store for the
        session's first (:class:`~.store.ReadState`), and is decided again with it,
        *known* (the table it was read for, and the state)."""
        # When the transport had it whole (a busy loop may plan it later); else now.
        started = request.arrived or time.time()
        table = self.table
        method, path = request.method, request.path
        headers = request.headers
        session = headers.get(_SESSION) or DEFAULT_SESSION
        if len(session) > MAX_SESSION_NAME:
            return builtin_answers.session_too_long(self._journalling, request, session, started)
        host = headers.get("host")
        if host is not None and len(host) > MAX_HOST:  # before its Urls are made and kept
            return builtin_answers.host_too_long(self._journalling, request, host, started)
        if path == catalog.TOKEN_PATH and (table.fallback is None or table.credentials.clients):
            # Behind a scenario's proxy with no clients of its own, the provider's token
            # endpoint answers (a recording of a provider's OAuth2 flow needs its tokens).
            return self._token(request, session, started)
        target = table.match(method, path)
        named = headers.get(_CASE) if type(target) is Target else None
        header_chose = False  # Mockskill-Case chose among the endpoint's cases
        if named is not None and isinstance(target, Target) and target.kind in _NAMEABLE:
            picked = table.named(target, named, request)
            if picked is None:  # never the default: the test asked for a case it lacks
                return builtin_answers.unknown_case(
                    self._journalling, request, session, started, named, table, target
                )
            if target.named:  # else it names none of its own: its cases as ever, below
                target, header_chose = picked, True
        if not header_chose and type(target) is Target and target.cases:
            # the request picks one of its cases
            if target.by_state is None:
                target = table.case(target, request)
            elif known is not None and known[0] is table:
                target = table.case_in(target, request, known[1])
            else:  # its cases require scenario states: the session's is read first
                return self._read_state(request, table, target, session)
        if self.matched is not None:
            self.matched(request, target)
        if isinstance(target, Miss) and path == catalog.AUTHORIZE_PATH:
            # Where default AUTH_REQUIRED details point; a scenario's own route there wins.
            return builtin_answers.authorize(self._journalling, request, session, started)
        # An invocation's answer names no TLS fault's port: no port is allotted for it.
        urls = self._urls(request, session, type(target) is not Target or target.kind != "invoke")
        if type(target) is Target and target.kind == "task":  # a status URL: its id decides
            return task_requests.decide(request, started, session, table, target, urls)
        forced = False
        reply: Reply | None
        if isinstance(target, Miss):
            reply = miss_reply(target)
            built = task_requests.built(method, path)
            if built is not None:  # a task URL the consumer built: graded in the id's session
                owner, task = built
                decided = Decided(started, owner, table, target, urls, urls.fill(reply), False)
                decided.task = task
                return decided
        elif (code := headers.get(_ERROR)) is not None:
            reply, forced = forced_reply(target, code), True
        elif target.sequence is None:
            reply = table.listing
        else:  # a provider refuses callers it must not serve before running the skill
            refusal = self._refusal(request, table, target)
            if isinstance(refusal, Pending):  # a token the store may know: judged on its answer
                state = None if known is None else known[1]
                return self._judged(
                    refusal, (request, state), started, session, table, target, urls
                )
            if refusal is None:  # a sequence step: the store takes the next position first
                decided = Decided(started, session, table, target, urls, None, False)
                if target.passes:  # a case that may pass the request on matches it again
                    decided.request = (request, None if known is None else known[1])
                if target.idempotent and _KEY in headers:  # the key is recalled before
                    return idempotency.keyed(request, decided, self.state.digest_key)
                return _new(Pending, (choosing.take(decided, target, request), decided))
            reply = refusal
        if reply is not None:
            reply = urls.fill(reply)
        return Decided(started, session, table, target, urls, reply, forced)

    def _read_state(
        self, request: Incoming, table: RoutingTable, target: Target, session: str
    ) -> Pending[Decision]:
        """:meth:`decide`, once the store says which state of *target*'s scenario *session*
        is in (a request matched on *table*: decided again on another, it is read again)."""
        need = ReadState(session, target.scenario or "")
        return _new(Pending, (need, partial(self._in_state, request, table)))

    def _in_state(
        self, request: Incoming, table: RoutingTable, state: NeedAnswer
    ) -> Later[Decision]:
        known = state if isinstance(state, str) else INITIAL_STATE
        return self.decide(request, (table, known))

    def _plain(self, request: Incoming, decided: Decided, taken: NeedAnswer) -> plans.Plan | None:
        """The kept plan of the plain step *decided*'s Take *taken* lands on (see
        :class:`Plains`), its request journalled now; None when that step is not plain (it
        draws, waits or proxies), the sequence is over or in its outage."""
        target: Target = decided.target  # type: ignore[assignment]  # a Take is for a Target
        position: int | None = taken[0]  # type: ignore[index,assignment]  # a Take: a Taken
        spent: Spent | None = taken[2]  # type: ignore[index,assignment,misc]  # a Take: a Taken
        if position is None and spent is not None and not spent[ADMITTED]:
            # Refused by its limit: the refusal's plan and journal row are kept, its request
            # journalled now.
            refusal, record = choosing.refused(decided, spent)
            journal: Plain | None = refusal.journal
            if journal is None:
                journal = refusal.journal = self._journalling.plain(
                    target, None, refusal.plan, refusal.reply
                )
            journal.record(request, decided.started, decided.session, None, record)
            return journal.plan
        if (target.draws and not target.renders) or position is None:  # (None: in the outage)
            return None
        if spent is None and decided.limited is not None:  # (passed on, admitted before)
            return None
        urls = decided.urls
        kept = self._plains.get((id(target), id(urls)))
        if kept is not None and kept[0] is target and kept[1] is urls:
            plains = kept[2]
        else:
            plains = self._plains_of(target, urls)
        index = plains.sequence.step_at(position)
        if index is None:
            return None
        plain = None if target.draws else plains.steps[index]
        if spent is not None:  # admitted by its limit (refused, it took no position)
            if plain is None:
                return None  # (its answer is made per request: the general path adds to it)
            policy = target.policy
            assert policy is not None
            _, remaining, next_ms, full_ms = spent
            said = (policy.admitted, decided.limit_value, remaining, next_ms, full_ms)
            plain.record(request, decided.started, decided.session, position, said)
            if policy.form == "none":  # (nothing to add: the step's kept plan as it is)
                return plain.plan
            return plain.limited_plan(policy, spent)
        if plain is None:  # not plain; a templated step may be plain but for its template
            rendered = plains.rendered[index] if target.renders else None
            if rendered is None:
                return None
            draw: int = taken[1]  # type: ignore[index,assignment]  # a Take: a Taken
            return rendered.plan(request, decided.session, decided.started, position, draw, index)
        plain.record(request, decided.started, decided.session, position)
        return plain.plan

    def _kept_poll(self, request: Incoming, poll: Poll, taken: NeedAnswer) -> plans.Plan | None:
        """The plan of a poll the store answered *taken*, when its answer is the task as it
        stands (:meth:`Poll.served`), journalled now (see :class:`PolledTasks`); None: the
        general path answers it (``poll(taken)``)."""
        served = poll.served(taken)
        if served is None:
            return None
        target, urls, tasked = poll.target, poll.urls, poll.tasked
        # (A task a case submitted has its case's life: kept apart from the skill's.)
        key = (id(target), id(urls), id(tasked))
        kept = self._polled.get(key)
        if kept is None or kept[0] is not target or kept[1] is not urls or kept[2] is not tasked:
            polled = PolledTasks(self._journalling, target, urls, tasked)
            if len(self._polled) >= MAX_CACHED:
                self._polled.clear()  # atomic, unlike evicting one: handle() runs on threads
            kept = self._polled[key] = (target, urls, tasked, polled)
        return kept[3].plan(request, poll, served)

    def _plains_of(self, target: Target, urls: Urls) -> Plains:
        """The plain steps of *target*'s sequence for *urls*, kept (see :class:`Plains`)."""
        sequence = target.sequence
        assert sequence is not None
        plains = Plains(target, urls, sequence)
        for index, step in enumerate(sequence.steps):
            # (A step with after: is not: its entry reads the request's Idempotency-Key.)
            quiet = step.delay is None and step.execution is None and step.ran is None
            # (A step with task: is not either: the store starts its task, answered per task.)
            quiet = quiet and step.task is None
            # (A stream is not either: its format is the request's Accept's: streams.py.)
            quiet = quiet and step.stream is None
            # (A step with set_state: is not either: its SetState is asked when it is chosen.)
            if (
                not step.random
                and quiet
                and not step.proxy
                and step.set_state is None
                and step.reply.template is None  # (made per request: rendering.py)
                and step.rate_limited is None  # (made per request: limits.py)
            ):
                planned = self._planned(Chosen(step, index, 0), urls)
                if planned.plan.instant:
                    plains.steps[index] = self._journalling.plain(
                        target, index, planned.plan, planned.reply
                    )
            elif _renders_plainly(step) and target.kind != "describe":
                reply = urls.fill_kept(step.reply)  # its template's literal text filled
                plan = plans.Plan(answer(reply))  # (the step's source form: a head to reuse)
                journal = self._journalling.plain(target, index, plan, reply)
                plains.rendered[index] = RenderedPlain(target, reply, journal, self._seed(target))
        if len(self._plains) >= MAX_CACHED:
            self._plains.clear()  # atomic, unlike evicting one: handle() runs on threads
        # The target and Urls kept with it: neither id can be another's while it is kept.
        self._plains[(id(target), id(urls))] = (target, urls, plains)
        return plains

    def _seed(self, target: Target) -> int:
        """The seed of *target*'s draws: its scenario's, else the server's (as choose())."""
        table = self.table
        scenario = table.scenarios[target.scenario] if target.scenario else None
        return table.seed if scenario is None or scenario.seed is None else scenario.seed

    def _judged(
        self,
        refusal: Pending[Reply | None],
        request: tuple[Incoming, str | None],
        started: float,
        session: str,
        table: RoutingTable,
        target: Target,
        urls: Urls,
    ) -> Pending[Decided]:
        """:meth:`decide`'s end for a request judged on the store's answer (a token): a
        method, not a closure there, whose captured names would cost every request a cell."""

        def judged(refused: Reply | None) -> Later[Decided]:
            filled = None if refused is None else urls.fill(refused)
            decided = Decided(started, session, table, target, urls, filled, False)
            if target.passes:
                decided.request = request
            return self._choose(decided, request[0])

        return refusal.then(judged)

    def _refusal(
        self, request: Incoming, table: RoutingTable, target: Target
    ) -> Later[Reply | None]:
        """401 or 403 for a caller without the credentials, 422 for an incompatible one.

        *table* is the one *target* was matched on (a change of scenarios
        since must not change the credentials it is judged by)."""
        skill = target.skill
        if skill is not None and skill.requires is not None and target.kind == "invoke":
            refused = auth.check(request, skill.requires, table.credentials, target.context)
            if isinstance(refused, Pending):
                return self._then_versions(refused, request, target)
            if refused is not None:
                return refused
        return self._versions(request, target)

    def _then_versions(
        self, refused: Pending[Reply | None], request: Incoming, target: Target
    ) -> Pending[Reply | None]:
        """*refused*, then :meth:`_versions` when the store's answer lets the caller in: a
        method, not a lambda in :meth:`_refusal`, whose captured names would cost a cell
        on every request."""
        return refused.then(lambda reply: reply or self._versions(request, target))

    def _versions(self, request: Incoming, target: Target) -> Reply | None:
        """422 for a caller asking for a protocol version the skill does not speak."""
        version = request.headers.get(_VERSION)
        return None if version is None else version_reply(target, version)

    def _token(self, request: Incoming, session: str, started: float) -> Later[Response]:
        credentials = self.table.credentials
        return builtin_answers.token(self._journalling, request, session, started, credentials)


def _renders_plainly(step: Step) -> bool:
    """Whether *step* is plain but for its template (which may draw): made per request
    by a :class:`RenderedPlain`, journalled as planned."""
    return (
        step.reply.template is not None
        and not step.choices
        and step.delay is None
        and step.execution is None
        and step.hang_ms is None
        and step.dribble is None
        and step.fault is None
        and step.keep_alive is None
        and step.proxy is None
        and step.set_state is None  # (its SetState is asked when it is chosen)
        and step.ran is None  # (after: its entry reads the request's Idempotency-Key)
        and step.rate_limited is None  # (its answer is the limit's: limits.py)
        and step.task is None  # (a submit's answer is its task's)
        and step.stream is None  # (its format is the request's: streams.py)
    )


def journalled(outcome: plans.Outcome) -> None:
    """The recorder of a plan journalled when it was made (recording nothing more)."""
