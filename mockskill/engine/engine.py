"""One request through the scenarios: match → next step → act → record.

The engine takes a Werkzeug request and returns a Werkzeug response; it
uses no Flask globals, so it can be driven without a server. It reads the
scenario set through one reference, swapped whole on reload, so a request
finishes on the configuration it started with.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.wrappers import Request, Response

from ..protocol import catalog
from ..scenario.model import Reply, ScenarioSet, Step
from ..scenario.problems import Problem, ScenarioError
from . import auth
from . import plan as plans
from . import request_facts as facts
from .actions import Connection, Cut, Planned, Urls, answer, answer_of, play, respond
from .actions import plan as plan_step
from .matching import Miss, RoutingTable, Target
from .ports import RefusedPort
from .replies import (
    ERROR_HEADER,
    VERSION_HEADER,
    exhausted_reply,
    forced_reply,
    miss_reply,
    version_reply,
)
from .state import DEFAULT_SESSION, MAX_SESSION_NAME, Entry, State

SESSION_HEADER = "Mockskill-Session"


class Engine:
    """Answers skill-surface and free-route requests from a scenario set.

    *raw_socket* says whether the server hands the app each connection's
    socket (Werkzeug's does, as ``werkzeug.socket``); scenarios with
    transport faults are refused without it. *host* is where a port is held
    for unreachable skills.
    """

    def __init__(
        self,
        scenarios: ScenarioSet,
        state: State,
        *,
        raw_socket: bool = False,
        host: str = "127.0.0.1",
    ) -> None:
        self.state = state
        self.raw_socket = raw_socket
        self.refused = RefusedPort(host)
        self._open = False
        # Keys the journal's body digests: a short body (a PIN, a password)
        # cannot be guessed back from its digest without it.
        self._digest_key = secrets.token_bytes(32)
        self._credential_key = secrets.token_bytes(32)  # the same, for credential fingerprints
        self.matched: Callable[[Request, Target | Miss], None] | None = None
        """Called with each request once matched, before it is answered (None: nothing).
        Tests use it to land a change of scenarios between the two."""
        self.scenarios = ScenarioSet()
        self.table = RoutingTable(self.scenarios)
        self.load(scenarios)

    def load(self, scenarios: ScenarioSet, restart: Iterable[str] = ()) -> None:
        """Serve *scenarios* from the next request on (requests in flight keep theirs).

        Sequences *restart* (their keys) start afresh for the requests that
        arrive from then on; a request in flight finishes on the table and
        sequence positions it matched. Raises ScenarioError, and keeps
        serving what it served, if this server cannot play them. Outage
        windows of newly loaded scenarios start now.
        """
        _check_playable(scenarios, raw_socket=self.raw_socket)
        table = RoutingTable(scenarios)
        # Outage windows start when a scenario is loaded; one kept as it was
        # (the very object: Server.add, Server.remove) keeps its window.
        served = self.scenarios.scenarios
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
        self.scenarios, self.table = scenarios, table
        if self._open:
            self.open()

    def open(self) -> None:
        """Start serving: hold the refused port while an unreachable skill needs it."""
        self._open = True
        if any(skill.unreachable for skill in self.scenarios.skills):
            self.refused.open()

    def close(self) -> None:
        """Stop serving: let go of the held port (:meth:`open` takes one again)."""
        self._open = False
        self.refused.close()

    def handle(self, request: Request) -> Response:
        """Answer *request* on this thread: waits are slept (a WSGI server's way).

        The event-loop transport asks :meth:`plan` instead and plays the waits
        with timers; both decide through :meth:`_decide`.
        """
        decided = self._decide(request)
        if isinstance(decided, Response):
            return decided
        reply, fields = decided.reply, decided.fields
        if reply is None:
            assert isinstance(decided.target, Target)
            response, fields = self._play(
                request, decided.table, decided.target, decided.session, decided.urls
            )
        else:
            response = respond(reply)
            fields.update(error_code=reply.error_code, retry=reply.retry)
        served = fields.pop("served", reply)
        connection = fields.pop("connection", None)
        entry = self._entry(
            request, decided, fields.pop("status", response.status_code), served, fields
        )
        if connection is None:
            self.state.record(entry)
        else:  # a dribbled body: recorded just before its last byte goes (or when abandoned)
            connection.on_done = lambda: self.state.record(_finished(entry, connection))
            response.call_on_close(connection.done)  # a body never iterated (HEAD)
        return response

    def plan(self, request: Request) -> tuple[plans.Plan, Callable[[plans.Outcome], None]]:
        """What to answer to *request*, and how, as a plan the transport plays.

        No I/O and no sleeping here. The second value records the request in
        the journal once the transport says how the plan went (call it once).
        """
        decided = self._decide(request)
        if isinstance(decided, Response):  # answered by mockskill itself, journalled already
            return plans.Plan(answer_of(decided)), _nothing
        reply, fields = decided.reply, decided.fields
        planned: Planned | None = None
        if reply is None:
            assert isinstance(decided.target, Target)
            chosen = self._choose(decided.table, decided.target, decided.session, decided.urls)
            fields.update(chosen.fields)
            if chosen.step is None:
                reply = chosen.reply
        if reply is not None:
            fields.update(error_code=reply.error_code, retry=reply.retry)
            the_plan, served = plans.Plan(answer(reply)), reply
        else:
            assert chosen.step is not None
            planned = plan_step(
                chosen.step,
                decided.urls,
                delay_ms=chosen.delay_ms,
                execution_ms=chosen.execution_ms,
                fault_seed=chosen.fault_seed,
                timeout=chosen.timeout,
            )
            the_plan, served = planned.plan, planned.reply
        dribbled = the_plan.dribble is not None

        def record(outcome: plans.Outcome) -> None:
            played = dict(fields)
            shown = served
            if planned is not None:
                if planned.timed_out and outcome.cut:
                    shown = planned.timed_out[-1]
                played.update(
                    fault=outcome.fault.value if outcome.fault is not None else None,
                    error_code=shown.error_code,
                    retry=shown.retry,
                    client_left=outcome.client_left_at,
                )
                if dribbled and not outcome.cut:
                    played["headers_sent"] = outcome.headers_at
            status = outcome.answer.status if outcome.answer is not None else None
            if outcome.fault is not None:
                status = None
            if outcome.stopped:
                played["stopped"] = True
            finished = outcome.last_byte_at or time.time()
            self.state.record(self._entry(request, decided, status, shown, played, finished))

        return the_plan, record

    def _decide(self, request: Request) -> Response | _Decided:
        """Everything about *request* that needs no step: an answer, or what to play."""
        # When the transport had it whole (a busy loop may plan it later); else now.
        started = request.environ.get("mockskill.arrived") or time.time()
        table = self.table
        method, path = request.method, request.path
        session = request.headers.get(SESSION_HEADER) or DEFAULT_SESSION
        if len(session) > MAX_SESSION_NAME:
            return self._session_too_long(request, session, started)
        if path == catalog.TOKEN_PATH:
            return self._token(request, session, started)
        target = table.match(method, path)
        if self.matched is not None:
            self.matched(request, target)
        if isinstance(target, Miss) and path == catalog.AUTHORIZE_PATH:
            # Where default AUTH_REQUIRED details point; a scenario's own route there wins.
            return self._authorize(request, session, started)
        urls = self._urls(request)
        fields: dict[str, Any] = {}
        reply: Reply | None
        if isinstance(target, Miss):
            reply = miss_reply(target)
        elif ERROR_HEADER in request.headers:
            reply, fields["forced"] = forced_reply(target, request.headers[ERROR_HEADER]), True
        elif target.sequence is None:
            reply = table.listing
        else:  # a provider refuses callers it must not serve before running the skill
            reply = self._refusal(request, table, target)
        if reply is not None:
            reply = urls.fill(reply)
        return _Decided(started, session, table, target, urls, reply, fields)

    def _entry(
        self,
        request: Request,
        decided: _Decided,
        status: int | None,
        served: Reply | None,
        fields: dict[str, Any],
        finished: float | None = None,
    ) -> Entry:
        target = decided.target
        entry = Entry(
            id=self.state.next_id(),
            started=decided.started,
            finished=time.time() if finished is None else finished,
            session=decided.session,
            method=request.method,
            path=request.path,
            status=status,
            endpoint="unmatched" if isinstance(target, Miss) else target.kind,
            skill=facts.skill_id(target),
            scenario=None if isinstance(target, Miss) else target.scenario,
            near_misses=target.near_misses if isinstance(target, Miss) else (),
            credential=facts.credential(request, self._credential_key),
            protocol_version=request.headers.get(VERSION_HEADER),
            body_digest=self._digest(request),
            **fields,
        )
        if entry.endpoint == "describe" and entry.status == 200 and served is not None:
            invalid = facts.invalid_descriptor(served.body)
            entry = dataclasses.replace(entry, invalid_descriptor=invalid)
        return entry

    def _digest(self, request: Request) -> str | None:
        """``hmac-sha256:…`` of the request body (keyed per server); None for no body."""
        environ = request.environ
        if environ.get("CONTENT_LENGTH") in (None, "", "0") and "mockskill.request" in environ:
            return None  # the transport's requests say their length (a chunked one: whole)
        body = request.get_data(cache=True)
        if not body:
            return None
        return "hmac-sha256:" + hmac.new(self._digest_key, body, hashlib.sha256).hexdigest()[:16]

    def _refusal(self, request: Request, table: RoutingTable, target: Target) -> Reply | None:
        """401 or 403 for a caller without the credentials, 422 for an incompatible one.

        *table* is the one *target* was matched on (a change of scenarios
        since must not change the credentials it is judged by)."""
        skill = target.skill
        if skill is not None and skill.requires is not None and target.kind == "invoke":
            refused = auth.check(
                request, skill.requires, table.credentials, self.state, target.context
            )
            if refused is not None:
                return refused
        return version_reply(target, request.headers.get(VERSION_HEADER))

    def _session_too_long(self, request: Request, session: str, started: float) -> Response:
        """400 for a session name over :data:`MAX_SESSION_NAME`: the session table keys on it."""
        message = (
            f"the {SESSION_HEADER} header is {len(session)} characters long; a session name"
            f" has at most {MAX_SESSION_NAME}: send a shorter one"
        )
        details = {"header": SESSION_HEADER, "length": len(session), "limit": MAX_SESSION_NAME}
        reply = Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))
        # Kept cut to the limit, so the journal shows what was refused.
        code = reply.error_code
        self._record(request, session, started, reply.status, "refused", error_code=code)
        return respond(reply)

    def _token(self, request: Request, session: str, started: float) -> Response:
        """The mock OAuth2 token endpoint; recorded like any request (never its secrets)."""
        response = auth.token_endpoint(request, self.table.credentials, self.state)
        status, credential = response.status_code, facts.client(request)
        self._record(request, session, started, status, "token", credential=credential)
        return response

    def _authorize(self, request: Request, session: str, started: float) -> Response:
        """The mock OAuth2 authorization endpoint; recorded like any request."""
        response = auth.authorization_endpoint(request, facts.base_url(request))
        self._record(request, session, started, response.status_code, "authorize")
        return response

    def _record(
        self,
        request: Request,
        session: str,
        started: float,
        status: int,
        endpoint: str,
        **fields: Any,
    ) -> None:
        """Journal an answer mockskill gave itself, outside any scenario, finished now."""
        entry = Entry(
            id=self.state.next_id(),
            started=started,
            finished=time.time(),
            session=session,
            method=request.method,
            path=request.path,
            status=status,
            endpoint=endpoint,
            **fields,
        )
        self.state.record(entry)

    def _choose(self, table: RoutingTable, target: Target, session: str, urls: Urls) -> _Chosen:
        """*target*'s next step and its random values, all of it on *table* (the one it
        was matched on); or, when the sequence is exhausted, the reply saying so."""
        assert target.sequence is not None
        # Not the live table: a scenario removed or deactivated since the match is not in it.
        scenario = table.scenarios[target.scenario] if target.scenario else None
        seed = scenario.seed if scenario else None
        fields: dict[str, Any] = {}
        outage = scenario.outage if scenario else None
        if outage and scenario and outage.covers(self.state.since_activated(scenario.name) * 1000):
            step, fields["outage"] = outage.step, True
        else:
            generation = table.generations.get(target.key, 0)
            position = self.state.advance(session, target.key, generation)
            index = target.sequence.step_at(position)
            fields.update(position=position, step=index)
            if index is None:
                reply = urls.fill(exhausted_reply(target, session, position))
                return _Chosen({**fields, "error_code": reply.error_code}, reply=reply)
            step = target.sequence.steps[index]
        if step.random:
            step, choice, delay_ms, execution_ms, fault_seed = self.state.draw(
                session, target.scenario or "", seed, lambda rng: _draw(step, rng)
            )
        else:  # nothing to draw: no generator is made for the session
            choice, fault_seed = None, 0
            delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
            execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
        skill = target.skill
        timeout = None
        if skill is not None and skill.timeout_ms is not None:
            timeout = (skill.timeout_ms, skill.timeout_status, target.context)
        fields.update(choice=choice, delay_ms=delay_ms, execution_ms=execution_ms)
        return _Chosen(fields, step, delay_ms, execution_ms, fault_seed, timeout)

    def _play(
        self, request: Request, table: RoutingTable, target: Target, session: str, urls: Urls
    ) -> tuple[Response, dict[str, Any]]:
        """Play *target*'s next step on this thread (see :meth:`handle`)."""
        chosen = self._choose(table, target, session, urls)
        fields = chosen.fields
        step = chosen.step
        if step is None:
            assert chosen.reply is not None
            return respond(chosen.reply), fields
        connection = Connection(request.environ)
        if chosen.delay_ms or chosen.execution_ms or step.hang_ms or step.dribble or step.fault:
            # Read the whole request first: a fault must not strike while the
            # client is still sending, and during a wait a readable socket
            # must mean the client's goodbye.
            request.get_data()
        response, played = play(
            step,
            connection,
            urls,
            delay_ms=chosen.delay_ms,
            execution_ms=chosen.execution_ms,
            fault_seed=chosen.fault_seed,
            timeout=chosen.timeout,
        )
        fields.update(
            fault=played.fault,
            error_code=played.reply.error_code,
            retry=played.reply.retry,
            client_left=connection.left_at,
            served=played.reply,
        )
        if isinstance(response, Cut):
            fields["status"] = None  # nothing was answered
        if step.dribble is not None and not played.timed_out:
            fields["connection"] = connection
        return response, fields

    def _urls(self, request: Request) -> Urls:
        base = facts.base_url(request)
        if self.refused.port is None:
            return Urls(base)
        hostname = base.rsplit(":", 1)[0] if base.count(":") > 1 else base
        return Urls(base, f"{hostname}:{self.refused.port}")


_NO_RANDOM = random.Random(0)
"""Handed to fixed delays, which draw nothing from it."""


@dataclasses.dataclass
class _Decided:
    """What :meth:`Engine._decide` found: a reply, or a target whose step is to play."""

    started: float
    session: str
    table: RoutingTable
    target: Target | Miss
    urls: Urls
    reply: Reply | None
    fields: dict[str, Any]


@dataclasses.dataclass
class _Chosen:
    """The step to play and its random values, or (*step* None) the reply instead."""

    fields: dict[str, Any]
    step: Step | None = None
    delay_ms: float | None = None
    execution_ms: float | None = None
    fault_seed: int = 0
    timeout: tuple[int, int, catalog.Context] | None = None
    reply: Reply | None = None


def _nothing(outcome: plans.Outcome) -> None:
    """Recording nothing: the answer was journalled when it was decided."""


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


def _finished(entry: Entry, connection: Connection) -> Entry:
    return dataclasses.replace(
        entry,
        finished=time.time(),
        client_left=connection.left_at,
        headers_sent=connection.headers_sent,
    )


def _check_playable(scenarios: ScenarioSet, *, raw_socket: bool) -> None:
    if raw_socket:
        return
    problems = []
    for skill in scenarios.skills:
        for sequence in (skill.describe, skill.invoke):
            for step in sequence.steps:
                if step.needs_socket:
                    problems.append(_socket_problem(step))
    for route in scenarios.routes:
        problems.extend(_socket_problem(s) for s in route.sequence.steps if s.needs_socket)
    for scenario in scenarios.scenarios:
        if scenario.outage and scenario.outage.step.needs_socket:
            problems.append(_socket_problem(scenario.outage.step))
    if problems:
        raise ScenarioError(problems)


def _socket_problem(step: Step) -> Problem:
    where = step.where
    return Problem(
        where.file,
        where.line,
        where.column,
        "fault",
        "a step this server can play",
        "a transport fault, which needs the raw socket of Werkzeug's server",
        "serve with `mockskill serve` or mockskill.Server; this WSGI server hides the socket",
    )
