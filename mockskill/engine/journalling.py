"""How the engine's requests read in the journal: :class:`Journalling`.

Every request is recorded as one :class:`~.entries.Entry`: one played from a
scenario (:meth:`Journalling.recorded`, :class:`Plain`), or an answer
mockskill gave itself (a refusal, the OAuth2 endpoints, the store
unavailable: :meth:`Journalling.own`). What the consumer sent (target, headers,
body) is kept as read, cut to its bounds (:func:`sent`), unless journal bodies
are off; bodies are also kept as keyed digests, and credentials as keyed
fingerprints, never as they were (the entry shown masks them: :mod:`.entries`).
A poll answered with the task as it stands is planned and journalled on a kept path
(:class:`PolledTasks`), as a plain step is.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..scenario.model import JSON_TYPE, Reply, Sequence
from ..scenario.templates import NotRendered, Reading
from . import request_facts as facts
from . import task_watch
from .actions import TimedOut, Urls, answer
from .choosing import Chosen, draw_prefix, prefixed_draw_key
from .digests import LATER_BYTES, KeyedDigest
from .entries import (
    DEFAULT_BODY_LIMIT,
    MAX_HEADER_BYTES,
    MAX_TARGET,
    Entry,
    LaterRecord,
    LaterTask,
    escaped,
    headers_size,
    sent_headers,
    sent_target,
    shorten,
)
from .incoming import Incoming
from .limits import LimitedHead, Policy, stated_headers
from .matching import Miss, Target, task_path_parts, task_request
from .plan import Outcome, Plan
from .rendering import RequestValues
from .replies import VERSION_HEADER
from .store import Spent, Store
from .streams import CONTENT_TYPES
from .task_skills import journalled as task_journalled
from .task_wire import StateText, state_text, written
from .wire import Answer

if TYPE_CHECKING:
    from .choosing import Decided
    from .streams import FramedStream, StreamAttempt
    from .task_requests import Poll, Served
    from .task_skills import TaskSkill
    from .tasks import TaskView

_VERSION = VERSION_HEADER.lower()
_API_KEY = facts.API_KEY
_new_entry = tuple.__new__
_time = time.time
_NOT_SENT = (None, None, None, None, None, None, None)
"""An Entry's fields upstream, tls, target, headers, body, body_encoding and body_size for
a request that was not proxied, what it sent not kept (journal bodies off)."""
SentFields = tuple[None, None, str, Any, Any, None, int | None]
_DID_NOT_RUN = (False, False, None)
"""An Entry's fields executed, replayed and idempotency_key for a request that did not
run its skill."""
_RAN = (True, False, None)
"""The same, for a request that ran its skill (a plain step's result: :class:`Plain`)."""

_KEY = "idempotency-key"
_RUN = ("invoke", "route")
"""The endpoints whose result says their operation ran (the list and a descriptor run none)."""


def sent(request: Incoming, body: bytes, limit: int) -> SentFields:
    """An Entry's fields upstream to body_size for *request* (*body*, its body), what it
    sent kept: the target, the headers as read (bytes) and the body's first *limit* bytes
    (bytes), each cut to its bound; decoded and masked when the entry is shown
    (:mod:`.entries`)."""
    target = request.target
    if len(target) > MAX_TARGET:
        target = shorten(target, MAX_TARGET)
    pairs = request.raw_headers
    if request.head_bytes > MAX_HEADER_BYTES:
        pairs = sent_headers(pairs, request.head_bytes)
    if not body:
        return (None, None, target, pairs, None, None, None)
    size = len(body)
    return (None, None, target, pairs, body if size <= limit else body[:limit], None, size)


class Journalling:
    """The records of one engine's requests, kept in *state*'s journal.

    With *bodies* (the default), what each request sent is kept too (:func:`sent`), its
    body up to *body_limit* bytes; without, entries hold its body's digest alone.
    """

    def __init__(
        self, state: Store, bodies: bool = True, body_limit: int = DEFAULT_BODY_LIMIT
    ) -> None:
        if body_limit < 0:
            raise ValueError(f"the journal's body limit must be at least 0, not {body_limit}")
        self.state = state
        self.bodies, self.body_limit = bodies, body_limit
        # The store's key (shared by every replica on a shared store), one derived key per
        # use: a short body (a PIN, a password) cannot be guessed back from its digest.
        key = state.digest_key
        derive = KeyedDigest(key).raw
        # A body the entry keeps whole is digested when the entry is shown, as a short one.
        later = max(LATER_BYTES, body_limit) if bodies else LATER_BYTES
        self.body_digest = KeyedDigest(derive(b"body"), later)
        self.credential_digest = KeyedDigest(derive(b"credential"))

    def sent_before_refusal(
        self, target: str | None, headers: Iterable[tuple[str, str]]
    ) -> dict[str, Any]:
        """The fields of what a request the transport refused sent before it was (its
        target and headers as read, decoded as Latin-1; no body), by name; none with
        journal bodies off or no target read."""
        if not self.bodies or target is None:
            return {}
        pairs = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)
        return {"target": sent_target(target), "headers": sent_headers(pairs, headers_size(pairs))}

    def sent(self, request: Incoming) -> dict[str, Any]:
        """The fields of what *request* sent, as :func:`sent` keeps them (by name); none
        with journal bodies off."""
        if not self.bodies:
            return {}
        names = ("target", "headers", "body", "body_encoding", "body_size")
        return dict(zip(names, sent(request, request.body, self.body_limit)[2:], strict=True))

    def recorded(
        self,
        request: Incoming,
        decided: Decided,
        chosen: Chosen | None,
        status: int | None,
        served: Reply,
        finished: float | None = None,
        fault: str | None = None,
        client_left: float | None = None,
        headers_sent: float | None = None,
        stopped: bool = False,
    ) -> Entry:
        """The journal's record of *request*, answered with *served* (finished: now if None)."""
        target = decided.target
        task = decided.task
        if isinstance(target, Miss):
            endpoint, scenario, near_misses = "unmatched", None, target.near_misses
            case = None
            if task is None:  # a status URL of a skill unknown here: a task it knows not
                task = missed_task(request)
        else:
            endpoint, scenario, near_misses = target.kind, target.scenario, ()
            case = None if target.case is None else target.case.index
        invalid = False
        if endpoint == "describe" and status == 200:
            invalid = facts.invalid_descriptor(served.body)
        body = request.body
        headers = request.headers
        ran: tuple[object, ...] = _DID_NOT_RUN
        if chosen is None:
            step = position = choice = delay_ms = execution_ms = None
            outage = False
        else:
            step, position, outage = chosen.index, chosen.position, chosen.outage
            choice, delay_ms, execution_ms = chosen.choice, chosen.delay_ms, chosen.execution_ms
            played = chosen.step
            if played is not None and played.ran is not None:  # it ran, then was lost
                key = headers.get(_KEY)
                ran = (True, False, None if key is None else shorten(escaped(key)))
            elif endpoint in _RUN and status is not None and 200 <= status < 300:
                ran = _RAN  # (a fault sends no status)
        keyed = decided.idempotency
        if keyed is not None:  # a skill that honours Idempotency-Key: what it decided
            ran = (keyed.executed, keyed.replayed, keyed.shown)
        limited = decided.limited
        # Positional, in Entry's field order: tuple.__new__ skips the NamedTuple's keyword
        # __new__ (this runs for every request).
        return _new_entry(
            Entry,
            (  # joined, not unpacked into one display: that is the list this avoids
                self.state.next_id(),
                decided.started,
                time.time() if finished is None else finished,
                decided.session,
                request.method,
                request.path,
                status,
                endpoint,
                target.skill_id,
                scenario,
                step,
                position,
                served.error_code,
                served.retry,
                decided.forced,
                outage,
                choice,
                delay_ms,
                execution_ms,
                fault,
                client_left,
                headers_sent,
                near_misses,
                facts.credential(request, self.credential_digest),
                headers.get(_VERSION),
                self.body_digest.later(body) if body else None,
                invalid,
                stopped,
                None,  # replica: a shared journal names it when it sends the entry
                case,
            )
            # upstream (a proxied request's is proxying's, engine/proxying.py), tls (a
            # failed handshake's, never a request's), what it sent and whether it ran,
            # joined on (see Plain).
            + (sent(request, body, self.body_limit) if self.bodies else _NOT_SENT)
            + ran
            + (
                None if limited is None else limited.record,
                request.peer,
                None if task is None else self._task(task, request, body),
                None,  # stream: a stream's outcome fills it when it is played
            ),
        )

    def _task(self, task: dict[str, Any], request: Incoming, body: bytes) -> dict[str, Any]:
        """*task* (what the request did to a task: ``Entry.task``), and for a submit the
        operation it started: its ``Idempotency-Key``, else its body's digest (what a
        second invoke of the same operation repeats)."""
        if task["action"] != "submit":
            return task
        key = request.headers.get(_KEY)
        if key is not None:
            operation = f"key:{shorten(escaped(key))}"
        else:
            operation = f"body:{self.body_digest.digest(body)}"
        return {**task, "operation": operation}

    def played(
        self,
        request: Incoming,
        decided: Decided,
        chosen: Chosen | None,
        served: Reply,
        timed_out: TimedOut | None,
        dribbled: bool,
        outcome: Outcome,
    ) -> None:
        """Journal *request* as :meth:`~.engine.Engine.plan` planned it and it was played:
        *outcome* (when the plan's cut answered, *timed_out*'s reply made again from the
        time the outcome measured: the one sent)."""
        cut_ms = outcome.cut_ms
        shown = served if timed_out is None or cut_ms is None else timed_out.reply(cut_ms)
        headers_sent = outcome.headers_at if dribbled and not outcome.cut else None
        self.state.record(
            self.outcome_entry(request, decided, chosen, shown, outcome, headers_sent)
        )

    def streamed(
        self,
        stream: FramedStream,
        attempt: StreamAttempt,
        request: Incoming,
        decided: Decided,
        chosen: Chosen | None,
        served: Reply,
        outcome: Outcome,
    ) -> None:
        """Journal *request*, answered with *attempt* of *stream* (a stream step's) as
        *outcome* says it went: its entry's ``stream`` is the attempt's record
        (:meth:`FramedStream.record`)."""
        entry = self.outcome_entry(request, decided, chosen, served, outcome, outcome.headers_at)
        entry = entry._replace(stream=stream.record(outcome, attempt))
        error = stream.error_sent(outcome)
        if error is not None:  # an error event: its code and advice, as an error answer's
            entry = entry._replace(error_code=error[0], retry=error[1])
        self.state.record(entry)

    def watched(
        self, watch: task_watch.TaskWatch, request: Incoming, decided: Decided, outcome: Outcome
    ) -> None:
        """Journal *request*, a watch of a task (:mod:`.task_watch`), as *outcome* says it
        went: its entry's ``stream`` says what it sent and how it ended, its ``task`` the
        status of the last change it sent."""
        served = Reply(200, (), b"", CONTENT_TYPES[watch.format])
        entry = self.outcome_entry(request, decided, None, served, outcome, outcome.headers_at)
        task = entry.task
        if task is not None:
            entry = entry._replace(task=task_watch.served(watch, task, outcome))
        entry = entry._replace(stream=task_watch.journalled_stream(watch, outcome))
        self.state.record(entry)

    def outcome_entry(
        self,
        request: Incoming,
        decided: Decided,
        chosen: Chosen | None,
        served: Reply,
        outcome: Outcome,
        headers_sent: float | None = None,
        cut: bool = False,
    ) -> Entry:
        """The entry of *request* as the transport played it: *outcome* says when it ended,
        how (a fault, the client gone, a stop) and what status went out (none: no answer,
        a fault, or *cut* short)."""
        fault = outcome.fault
        status = None if outcome.answer is None or fault or cut else outcome.answer.status
        return self.recorded(  # positionally: this runs for every request played
            request,
            decided,
            chosen,
            status,
            served,
            outcome.last_byte_at,
            fault,
            outcome.client_left_at,
            headers_sent,
            outcome.stopped,
        )

    def plain(self, target: Target, index: int | None, plan: Plan, served: Reply) -> Plain:
        """The journalling of *target*'s step *index*, a plain one (see :class:`Plain`); or
        with no *index*, of a refusal of its rate limit (no step played)."""
        return Plain(self, target, index, plan, served)

    def own(
        self,
        request: Incoming,
        session: str,
        started: float,
        status: int,
        endpoint: str,
        **fields: Any,
    ) -> None:
        """Journal an answer mockskill gave itself, outside any scenario, finished now."""
        peer: Any = request.peer  # as read: shown as text (entries.kept)
        entry = Entry(
            id=self.state.next_id(),
            started=started,
            finished=time.time(),
            session=session,
            method=request.method,
            path=request.path,
            status=status,
            endpoint=endpoint,
            **self.sent(request),
            connection=peer,
            **fields,
        )
        self.state.record(entry)


class Plain:
    """A plain step's *plan* (answered at once, nothing drawn or measured), journalled as it
    is planned, with everything that is the same for all its requests made once.

    :meth:`Journalling.recorded` of such a request, fed the outcome of an answer sent whole
    (what the transport reports for an instant plan), gives the same values: the request's
    are its id, times, session, method, path, position, credential, protocol version,
    body digest and connection; the rest is the step's and its *target*'s. It is recorded
    when planned (there is nothing to wait for, so "finished" is then), which spares the
    engine the request's Decided, Chosen and recorder, and the transport's report a lookup.
    """

    __slots__ = (
        "_bodies",
        "_body_digest",
        "_body_limit",
        "_case",
        "_credential_digest",
        "_endpoint",
        "_error_code",
        "_executed",
        "_index",
        "_invalid",
        "_limited_head",
        "_limited_plans",
        "_next_id",
        "_record",
        "_retry",
        "_scenario",
        "_skill",
        "_status",
        "plan",
        "target",
    )

    def __init__(
        self,
        journalling: Journalling,
        target: Target,
        index: int | None,
        plan: Plan,
        served: Reply,
    ) -> None:
        state = journalling.state
        self._record, self._next_id = state.record, state.next_id
        self._body_digest = journalling.body_digest.later
        self._bodies, self._body_limit = journalling.bodies, journalling.body_limit
        self._credential_digest = journalling.credential_digest
        # Marked: the transport reports no outcome of it when sent whole at once, as it
        # always is (Plan.journalled), since it is recorded here as it is planned.
        self.plan, self.target = dataclasses.replace(plan, journalled=True), target
        status = self._status = plan.answer.status
        endpoint = self._endpoint = target.kind
        self._skill, self._scenario, self._index = target.skill_id, target.scenario, index
        self._error_code, self._retry = served.error_code, served.retry
        self._invalid = (
            endpoint == "describe" and status == 200 and facts.invalid_descriptor(served.body)
        )
        self._case = None if target.case is None else target.case.index
        # A result of an invocation (or a route) ran it (a plain step has no fault, no cut).
        ran = endpoint in _RUN and 200 <= status < 300
        self._executed = _RAN if ran else _DID_NOT_RUN
        self._limited_head: LimitedHead | None = None
        self._limited_plans: dict[tuple[int, int], Plan] = {}

    def limited_plan(self, policy: Policy, spent: Spent) -> Plan:
        """Its plan, its answer with the rate-limit headers of an admitted request that
        *spent* a token now added (the head before them rendered once:
        :class:`~.limits.LimitedHead`; its target's limit is *policy*). Kept per value the
        headers state (the whole tokens left and the reset): they change only when the
        bucket's whole tokens or the seconds to its reset do, so most requests find theirs
        made, nothing formatted."""
        _, remaining, _, full_ms = spent
        stated = (remaining, policy.reset_now(full_ms))
        plans = self._limited_plans
        plan = plans.get(stated)
        if plan is None:
            head = self._limited_head
            if head is None:
                head = self._limited_head = LimitedHead(self.plan.answer, policy)
            if len(plans) >= MAX_KEPT_LIMITED:
                plans.clear()  # atomic, unlike evicting one: handle() runs on threads
            headers = policy.fixed + stated_headers(policy.form, *stated)
            plan = plans[stated] = self.plan.answering(head.answering(headers))
        return plan

    def record(
        self,
        request: Incoming,
        started: float,
        session: str,
        position: int | None,
        rate_limit: LaterRecord | None = None,
        task: LaterTask | None = None,
    ) -> None:
        """Journal *request*, the *position*-th of its sequence in *session* (None: a
        refusal, no position taken), answered now (*rate_limit*: what its endpoint's limit
        said, ``Entry.rate_limit``; *task*: what a poll did to its task, ``Entry.task``)."""
        headers = request.headers
        credential = None
        if "authorization" in headers or _API_KEY in headers:
            credential = facts.credential(request, self._credential_digest)
        body = request._body  # the bytes the transport read (not the property: a call)
        if body is None:  # (a WSGI request's, read on first use)
            body = request.body
        # Entry's fields in its order (see recorded(); tests/engine/test_hotpath.py holds
        # each in its place), one tuple built at once: the step's kept, the request's own.
        self._record(
            _new_entry(
                Entry,
                (  # joined, not unpacked into one display: that is the list this avoids
                    self._next_id(),
                    started,
                    _time(),
                    session,
                    request.method,
                    request.path,
                    self._status,
                    self._endpoint,
                    self._skill,
                    self._scenario,
                    self._index,
                    position,
                    self._error_code,
                    self._retry,
                    False,  # forced
                    False,  # outage
                    None,  # choice
                    None,  # delay_ms
                    None,  # execution_ms
                    None,  # fault
                    None,  # client_left
                    None,  # headers_sent
                    (),  # near_misses
                    credential,
                    headers.get(_VERSION),
                    self._body_digest(body) if body else None,
                    self._invalid,
                    False,  # stopped
                    None,  # replica
                    self._case,
                )
                # upstream and tls (a plain step is neither proxied nor a handshake), what
                # it sent and whether it ran, joined on: a tuple display this long compiles
                # to a list appended item by item.
                + (sent(request, body, self._body_limit) if self._bodies else _NOT_SENT)
                + (*self._executed, rate_limit, request.peer, task, None),  # (no stream)
            )
        )


MAX_KEPT_LIMITED = 64
"""Plans with an admitted request's rate-limit headers a :class:`Plain` keeps (per value)."""


class Plains:
    """What the engine keeps of a target's sequence for one Urls: each step's
    :class:`Plain` if it is plain — nothing drawn, no delay, execution, hang,
    dribble or fault (its plan answers at once, the same to every request) — else None;
    and the same of each templated step that is otherwise plain: its :class:`RenderedPlain`."""

    __slots__ = ("rendered", "sequence", "steps", "target", "urls")

    def __init__(self, target: Target, urls: Urls, sequence: Sequence) -> None:
        self.target, self.urls, self.sequence = target, urls, sequence
        self.steps: list[Plain | None] = [None] * len(sequence.steps)
        self.rendered: list[RenderedPlain | None] = [None] * len(sequence.steps)
        """Each step's :class:`RenderedPlain` if it is one (templated, otherwise plain)."""


def head_of(answer: Answer) -> bytes:
    """*answer*'s head up to its ``Content-Length:`` value: what
    :meth:`~.wire.Answer.framed` completes per request."""
    head = answer.head(close=False)
    return head[: head.rindex(b"Content-Length: ") + len(b"Content-Length: ")]


class RenderedPlain:
    """A templated step that is otherwise plain (nothing but its template drawn, no wait,
    no fault, a skill's invoke or a route), kept per target and address like a
    :class:`~.journalling.Plain`: its plan and its head made once, its body per request,
    journalled by *journal* (its Plain) as it is planned.

    What it renders matches the general path's (:meth:`~.engine.Engine.plan` through
    :func:`~.choosing.choose`, :mod:`.rendering`): the same generator, drawn from in the
    same order."""

    __slots__ = ("head", "headed", "journal", "prefixes", "reply", "seed", "target", "template")

    def __init__(self, target: Target, reply: Reply, journal: Plain, seed: int) -> None:
        template = reply.template
        assert template is not None
        self.target, self.reply, self.journal, self.template = target, reply, journal, template
        self.seed = seed
        """The seed of its draws (its scenario's, else the server's)."""
        self.head = head_of(journal.plan.answer)
        self.headed = any(template.headers)
        """Whether a header is rendered too (else only the body: the head is kept)."""
        self.prefixes: dict[str, bytes] = {}
        """Each session's :func:`~.choosing.draw_prefix`, kept (bounded) if it draws."""

    def plan(
        self, request: Incoming, session: str, started: float, position: int, draw: int, index: int
    ) -> Plan | None:
        """The plan of *request*, journalled; None when its answer cannot be rendered (the
        general path then answers it, with mockskill's labelled error)."""
        template, key = self.template, None
        if template.draws:  # its ids and numbers: digests of the draw's key (as choose())
            prefix = self.prefixes.get(session)
            if prefix is None:
                prefix = self._prefix(session)
            key = prefixed_draw_key(prefix, draw)
        values = RequestValues(request, self.target, session, started, position, index, key)
        reading = Reading(values)
        if self.headed:
            made = self.reply.rendered(reading)
            if isinstance(made, NotRendered):
                return None
            planned = self.journal.plan.answering(answer(made))
        else:
            body = template.body_of(reading)
            if body is None or isinstance(body, NotRendered):
                return None
            plain = self.journal.plan
            sent = plain.answer
            planned = plain.answering(Answer.framed(sent.status, sent.headers, body, self.head))
        self.journal.record(request, started, session, position)
        return planned

    def _prefix(self, session: str) -> bytes:
        """*session*'s draw prefix, made and kept (a client inventing sessions grows nothing:
        past :data:`MAX_KEPT_PREFIXES` the kept ones are let go)."""
        prefixes = self.prefixes
        if len(prefixes) >= MAX_KEPT_PREFIXES:
            prefixes.clear()  # atomic, unlike evicting one: handle() runs on threads
        made = prefixes[session] = draw_prefix(self.seed, self.target.scenario or "", session)
        return made


class PolledTasks:
    """A task skill's status URL (*target*) for one address (*urls*), its polls served on a
    kept path like a :class:`RenderedPlain`'s: a poll whose answer is the task as it stands
    (:class:`~.task_requests.Served`) gets its state's kept answer — its head up to its
    ``Content-Length:`` (per the answer's fixed headers: the ``polls:`` step played,
    ``Retry-After``, a failed task's error code), its text (:func:`~.task_wire.state_text`,
    filled for *urls*) and its ``Entry.task`` record — made once per state; per poll only
    the body is written (the id and ``created_at`` put in), and it is journalled as it is
    planned (by that head's :class:`Plain`, its ``Entry.task`` a
    :data:`~.entries.LaterTask`).

    What it answers and journals matches the general path's
    (:func:`~.task_requests._polled`, :meth:`Journalling.played`)."""

    __slots__ = ("heads", "journalling", "states", "target", "tasked", "urls")

    def __init__(
        self, journalling: Journalling, target: Target, urls: Urls, tasked: TaskSkill
    ) -> None:
        self.journalling, self.target, self.urls, self.tasked = journalling, target, urls, tasked
        self.heads: dict[
            tuple[int | None, tuple[tuple[str, str], ...], str | None], tuple[Plain, bytes]
        ] = {}
        """Each fixed head's journalling (its plan's answer has the head, an empty body)
        and the head up to its ``Content-Length:`` value (:func:`head_of`)."""
        self.states: dict[tuple[tuple[object, ...], int | None], PolledState] = {}
        """Each state's kept answer, by the view's fields that make the state (its status,
        phase, progress, ``poll_after_ms``, cancelling) and the ``polls:`` step played."""

    def plan(self, request: Incoming, poll: Poll, served: Served) -> Plan:
        """The plan of *request*, the poll *served*, journalled."""
        view, submitted_ms, step, position = served
        state = self.states.get((view[:5], step))
        if state is None:
            state = self._state(view, step)
        text, journal, head, record = state
        task_id = poll.task_id
        # (An id that reads is written as it is: nothing in it to escape.)
        body = written(text, task_id.encode(), submitted_ms)
        plan = journal.plan
        planned = plan.answering(Answer.framed(200, plan.answer.headers, body, head))
        task = (record, task_id, position, view[5])  # (view[5]: its terminal_at_ms)
        journal.record(request, poll.started, poll.session, position, None, task)
        return planned

    def _state(self, view: TaskView, step: int | None) -> PolledState:
        """The kept answer of *view*'s state (the ``polls:`` step *step* played), made."""
        tasked = self.tasked
        text = state_text(tasked.task, view, tasked.skill_id).filled(self.urls.fill_text)
        error_code = tasked.failed_codes[view.phase] if view.status == "failed" else None
        key = (step, text.retry_after, error_code)
        headed = self.heads.get(key)
        if headed is None:
            fixed = Reply(200, text.retry_after, b"", JSON_TYPE, error_code)
            plan = Plan(answer(fixed))
            journal = self.journalling.plain(self.target, step, plan, fixed)
            if len(self.heads) >= MAX_KEPT_STATES:
                self.heads.clear()  # atomic, unlike evicting one: handle() runs on threads
            headed = self.heads[key] = (journal, head_of(journal.plan.answer))
        # Entry.task of its polls, but their own id, number and terminal time (LaterTask).
        record = task_journalled("poll", "", known=True, served=True, view=view)
        state = (text, headed[0], headed[1], record)
        if len(self.states) >= MAX_KEPT_STATES:
            self.states.clear()  # atomic, unlike evicting one: handle() runs on threads
        self.states[(view[:5], step)] = state
        return state


PolledState = tuple[StateText, Plain, bytes, dict[str, Any]]
"""A state's kept answer (:class:`PolledTasks`): its text filled for the address, its
head's journalling and the head up to its ``Content-Length:`` value, its polls'
``Entry.task`` record."""


MAX_KEPT_STATES = 256
"""States (and fixed heads) a :class:`PolledTasks` keeps (a skill's are few)."""


MAX_KEPT_PREFIXES = 256
"""Sessions whose draw prefix a :class:`RenderedPlain` keeps."""


def missed_task(request: Incoming) -> dict[str, Any] | None:
    """What an unmatched *request* did to a task: one to a status URL of a skill no scenario
    has (``/skills/{id}/tasks/{task id}``) names a task mockskill does not know (``known``
    False, as the audit's ``status-url-ignored`` reads it); None for any other request."""
    matched = task_request(request.method, task_path_parts(request.path))
    if matched is None:
        return None
    task_id, action = matched
    return task_journalled(action, task_id, known=False, served=False)
