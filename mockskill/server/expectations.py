"""Expectations from Python, as pytest-httpserver users write them.

``server.expect("/orders", method="POST", body={"/id": 1}).respond_with_json({...})``
scripts a route or a skill from a test. The expectations are written here as
one scenario document (``expectations-N``), the keys a YAML file has: each
expectation a case (its conditions the case's ``when:``, its answer a step),
loaded by the same loader and served by the same engine, made again whenever
one changes. A bad argument is the problem a bad YAML would be, raised by the
call that gave it.

An expectation used ``once`` is a case that plays one step, then passes
requests on (``end: next``); ordered ones are chained by scenario states (each
requires the state the one before moves the session into). Which expectation
a request met is read from the journal (the entry's scenario, endpoint and
case), so nothing is added to the request path. :meth:`Expectations.check`
raises AssertionError naming every expectation never met, and the near misses
of the requests that matched nothing.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import parse_qsl

from ..engine.entries import Entry
from ..scenario.loader import load_any
from ..scenario.model import INITIAL_STATE

if TYPE_CHECKING:
    from ..control.registry import LoadedScenario, Registry
    from ..engine.engine import Engine
    from ..scenario.loader import Source

Mode = Literal["always", "once", "ordered"]
"""How often an expectation answers: every time, once, or once and after the ones before."""
SESSION_HEADER = "Mockskill-Session"
_SKILL = re.compile(r"^/skills/(?P<id>[^/]+)(?P<invoke>/invoke)?$")
_UNSET: Any = object()
"""An argument not given (``retry=None`` means something: no retry advice)."""


class Serving(Protocol):
    """What expectations use of their server (a :class:`~.server.Server`)."""

    registry: Registry
    engine: Engine

    def add(
        self, scenarios: Source | Iterable[Source], *, active: bool = ..., replace: bool = ...
    ) -> tuple[LoadedScenario, ...]: ...

    def remove(self, name: str) -> None: ...

    def journal(self, session: str | None = None) -> list[Entry]: ...


@dataclass(eq=False)
class Expectation:
    """One expected request and its answer; ``respond_with_*`` sets the answer (and returns it)."""

    owner: Expectations = field(repr=False)
    number: int
    endpoint: str
    """``invoke``, ``describe`` or ``route``."""
    method: str
    path: str
    when: dict[str, Any]
    mode: Mode
    session: str | None
    answer: dict[str, Any]
    met: list[int] = field(default_factory=list)
    """The journal ids of the requests that met it, oldest first."""
    skill: str | None = None
    """The skill id of a skill's endpoint (None: a route)."""

    @property
    def label(self) -> str:
        """``POST /orders when {...} (once)``: how failures name it."""
        shown = {k: v for k, v in self.when.items() if not (k == "headers" and self.session)}
        if self.session is not None:
            headers = {k: v for k, v in self.when.get("headers", {}).items() if k != SESSION_HEADER}
            if headers:
                shown["headers"] = headers
        text = f"{self.method} {self.path}"
        if shown:
            text += f" when {json.dumps(shown, sort_keys=True)}"
        if self.mode != "always":
            text += f" ({self.mode})"
        return text

    def respond_with(self, step: Mapping[str, Any] | None = None, **keys: Any) -> Expectation:
        """Answer with a step written as in a scenario file (``{"hang": 1000}``, or keywords)."""
        answer = {**(step or {}), **keys}
        self.owner.answer(self, answer)
        return self

    def respond_with_json(
        self,
        data: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: Any = None,
    ) -> Expectation:
        """Answer *data* as a JSON body (``json:``), with *status*, *headers* and a *delay*."""
        return self.respond_with(_step(json=data, status=status, headers=headers, delay=delay))

    def respond_with_data(
        self,
        text: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: Any = None,
    ) -> Expectation:
        """Answer *text* as a text body (``text:``)."""
        return self.respond_with(_step(text=text, status=status, headers=headers, delay=delay))

    def respond_with_error(
        self,
        code: str,
        *,
        status: int | None = None,
        message: str | None = None,
        details: Mapping[str, Any] | None = None,
        retry: Mapping[str, Any] | None = _UNSET,
        headers: Mapping[str, str] | None = None,
        delay: Any = None,
    ) -> Expectation:
        """Answer a protocol error (``error: CODE``) in the unified body; ``retry=None``
        removes the retry advice, as ``retry: null`` does."""
        step = _step(error=code, status=status, message=message, details=details, headers=headers)
        if retry is not _UNSET:
            step["retry"] = retry
        if delay is not None:
            step["delay"] = delay
        return self.respond_with(step)

    def respond_with_fault(self, fault: str, *, delay: Any = None, **keys: Any) -> Expectation:
        """Do a transport fault (``fault: NAME``, docs/faults.md) instead of answering."""
        return self.respond_with(_step(fault=fault, delay=delay), **keys)


def _step(**keys: Any) -> dict[str, Any]:
    """A step of the keys given (None: not given)."""
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in keys.items() if v is not None}


class Expectations:
    """A server's expectations: add (:meth:`expect`), check (:meth:`check`), clear."""

    def __init__(self, server: Serving) -> None:
        self._server = server
        self._lock = threading.RLock()
        self._members: list[Expectation] = []
        self._numbers = itertools.count(1)
        self._generations = itertools.count(1)
        self._name = ""
        """The scenario's name; a new one each time it is served anew (after a clear), so
        that no session is left in a state of the last one's ordered expectations."""
        self._played: dict[tuple[str, str, int], Expectation] = {}
        """(endpoint, skill id or route label, case) of the scenario served -> its expectation."""
        self._served = False
        self._seen = 0
        """The id of the last journal entry read for which expectation it met."""
        self._since = 0
        """The id of the last journal entry before the first expectation (since a clear)."""

    def expect(
        self,
        path: str,
        *,
        method: str | None = None,
        headers: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        json: Any = _UNSET,
        raw_body: Any = None,
        once: bool = False,
        ordered: bool = False,
        session: str | None = None,
        query_string: str | Mapping[str, Any] | None = None,
        data: str | bytes | None = None,
    ) -> Expectation:
        """Expect a request to *path* (a route's Werkzeug rule, or ``/skills/ID`` and
        ``/skills/ID/invoke``), with the conditions of ``cases: when:`` (*headers*,
        *query*, *body* by JSON Pointer, *raw_body*; *json*: the whole body equals it).

        It answers ``200`` (an invoke: ``{"skill": ID, "result": "ok"}``; a
        describe: the descriptor) until a ``respond_with_*`` call; *once*: one
        request only; *ordered*: once, and only after every ordered one before it
        (per session); *session*: only requests of that ``Mockskill-Session``.
        pytest-httpserver's *query_string* (``"a=1&b=2"``, or a mapping) and *data*
        (the raw body) are *query* and *raw_body* equal to them. Raises ScenarioError
        as a scenario file with these conditions would.
        """
        endpoint, skill, method = _endpoint(path, method)
        if query_string is not None:
            given = (
                dict(parse_qsl(query_string, keep_blank_values=True))
                if isinstance(query_string, str)
                else query_string
            )
            query = {**given, **(query or {})}
        if data is not None and raw_body is None:
            raw_body = data.decode() if isinstance(data, bytes) else data
        when: dict[str, Any] = {}
        header_tests = dict(headers or {})
        if session is not None:
            header_tests[SESSION_HEADER] = session
        for key, value in (("headers", header_tests), ("query", query), ("body", body)):
            if value:
                when[key] = dict(value)
        if json is not _UNSET:
            when.setdefault("body", {})[""] = {"equals": json}
        if raw_body is not None:
            when["raw_body"] = raw_body
        if endpoint == "describe":
            answer: dict[str, Any] = {"descriptor": True}
        elif endpoint == "invoke":
            answer = {"json": {"skill": skill, "result": "ok"}}
        else:
            answer = {"status": 200}
        mode: Mode = "ordered" if ordered else "once" if once else "always"
        with self._lock:
            expectation = Expectation(
                self, next(self._numbers), endpoint, method, path, when, mode, session, answer
            )
            expectation.skill = skill
            first = not self._members
            self._members.append(expectation)
            try:
                self._serve(f"expect({method} {path})")
            except BaseException:
                self._members.remove(expectation)
                raise
            if first:
                self._since = self._seen  # the first expectation: misses count from here
            return expectation

    def answer(self, expectation: Expectation, answer: dict[str, Any]) -> None:
        """Make *answer* (a step) the expectation's; raises ScenarioError as a bad step would."""
        with self._lock:
            before, expectation.answer = expectation.answer, answer
            if not any(e is expectation for e in self._members):
                return  # cleared: nothing to serve
            try:
                self._serve(f"expect({expectation.method} {expectation.path})")
            except BaseException:
                expectation.answer = before
                raise

    @property
    def all(self) -> list[Expectation]:
        """Every expectation, in the order given."""
        with self._lock:
            return list(self._members)

    def check(self, session: str | None = None, *, misses: bool = True) -> None:
        """Raise AssertionError if an expectation (of *session*, or any) was never met, or
        (*misses*) a request since the first expectation matched nothing (a ``once`` one
        used up, an ordered one out of order, say); with the near misses of the requests
        that matched nothing. Each miss is said once. Else nothing."""
        with self._lock:
            self._read_journal()
            mine = [e for e in self._members if session is None or e.session == session]
            if not mine:
                return  # nothing expected: the misses are the scenarios' (the plugin's check)
            unmet = [e for e in mine if not e.met]
            entries = [e for e in self._server.journal(session) if e.id > self._since]
            missed = [e for e in entries if e.endpoint == "unmatched"]
            if not unmet and not (misses and missed):
                return
            # Said once, as pytest-httpserver's check_assertions says each failure once: a
            # test that caught it is not failed for it again. An unmet expectation stays.
            if misses and entries:
                self._since = max(self._since, entries[-1].id)
        lines = []
        if unmet:
            noun = "expectation was" if len(unmet) == 1 else "expectations were"
            lines.append(f"mockskill: {len(unmet)} {noun} never met:")
            lines += [f"  {e.label}" for e in unmet]
        if missed:
            lines.append("requests that matched nothing:")
            for entry in missed:
                lines.append(f"  {entry.method} {entry.path} ({entry.status})")
                for miss in entry.near_misses:
                    reasons = "; ".join(str(r) for r in miss.get("reasons", ()))
                    lines.append(f"    near miss {miss.get('route')}: {reasons}")
        elif unmet:
            lines.append("  (no request matched nothing: were they sent to this server?)")
        raise AssertionError("\n".join(lines))

    def clear(self, session: str | None = None) -> None:
        """Forget the expectations (of *session*, or all): their skills and routes are no
        longer served from the next request on."""
        with self._lock:
            self._read_journal()
            self._members = [
                e for e in self._members if session is not None and e.session != session
            ]
            if not self._members and self._served:
                self._server.remove(self._name)
                self._served, self._played = False, {}
            elif self._members:
                self._serve("clear_expectations()")
            self._since = self._seen

    # -- the scenario document ---------------------------------------------------

    def _new_name(self) -> str:
        """``expectations-N``; on a scenario set shared with other servers (processes that
        have expectations of their own) also this process's mark, so that none replaces
        another's."""
        name = f"expectations-{next(self._generations)}"
        if self._server.registry.shared is not None:
            name += f"-{uuid.uuid4().hex[:8]}"
        return name

    def _serve(self, label: str) -> None:
        """Serve the expectations as one scenario (made again: the ``once`` ones met left
        out), or stop serving it when nothing is left to play; *label* names the document
        in problems."""
        self._read_journal()
        name = self._name if self._served else self._new_name()
        document, played = _document(name, self._members)
        if document is None:
            if self._served:
                self._server.remove(self._name)
                self._served, self._played = False, {}
            return
        loaded = load_any(document, max_delay_ms=self._server.registry.max_delay_ms, name=label)
        self._server.add(loaded, replace=True)
        self._name, self._served, self._played = name, True, played

    def _read_journal(self) -> None:
        """Note, for each request journalled since last time, which expectation it met."""
        entries = self._server.journal()
        table = self._server.engine.table
        for entry in entries:
            if entry.id <= self._seen or entry.scenario != self._name or entry.case is None:
                continue
            if entry.skill is not None:
                owner = entry.skill
            else:  # which route: the one the engine matches the request to (a route's
                # entry keeps the request's path, not the rule)
                target = table.match(entry.method, entry.path)
                route = getattr(target, "route", None)
                if route is None:
                    continue
                owner = route.label
            met = self._played.get((entry.endpoint, owner, entry.case))
            if met is not None:
                met.met.append(entry.id)
        if entries:
            self._seen = max(self._seen, entries[-1].id)


def _endpoint(path: str, method: str | None) -> tuple[str, str | None, str]:
    """(endpoint, skill id or None, method) of an expected request."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"expect: a path starting with '/' (a route, or /skills/ID), not {path!r}")
    found = _SKILL.match(path)
    if found is None:
        return "route", None, (method or "GET").upper()
    allowed: tuple[str, ...]
    if found["invoke"]:
        endpoint, allowed = "invoke", ("POST",)
    else:
        endpoint, allowed = "describe", ("GET", "HEAD")
    method = (method or allowed[0]).upper()
    if method not in allowed:
        raise ValueError(
            f"expect: {path} answers {' or '.join(allowed)}, not {method} "
            f"(a skill's {endpoint} endpoint)"
        )
    return endpoint, found["id"], allowed[0]


def _document(
    name: str, members: list[Expectation]
) -> tuple[dict[str, Any] | None, dict[tuple[str, str, int], Expectation]]:
    """The scenario of *members*, and which expectation each (endpoint, skill id or route
    label, case) plays.

    Each expectation is a case of its skill's endpoint or of its route (path and
    method), tried as pytest-httpserver tries its handlers: the ordered ones, then
    the ``once`` ones, then the others, each kind in the order given. A ``once`` one
    plays one step and ends with ``next``: the request after it goes on to the
    cases after it, or is a miss; one met is left out (the scenario made again
    restarts its positions). The ordered ones are chained by scenario states: the
    first takes a session in ``Started``, each moves it into the state the next
    requires, so that one asked for out of order is a miss that says so.
    """
    played: dict[tuple[str, str, int], Expectation] = {}
    skills: dict[str, dict[str, list[dict[str, Any]]]] = {}
    routes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    ordered = [e for e in members if e.mode == "ordered"]
    states = [INITIAL_STATE] + [_state_after(i, e) for i, e in enumerate(ordered, 1)]
    for mode in ("ordered", "once", "always"):
        for e in members:
            if e.mode != mode or (mode == "once" and e.met):
                continue
            case: dict[str, Any] = {"when": e.when, "steps": [dict(e.answer)], "end": "next"}
            if mode == "ordered":
                k = ordered.index(e)
                case["state"] = states[k]
                case["steps"][0]["set_state"] = states[k + 1]
            elif mode == "always":
                case["end"] = "last"
            if e.skill is not None:
                cases = skills.setdefault(e.skill, {}).setdefault(e.endpoint, [])
                owner = e.skill
            else:
                cases = routes.setdefault((e.path, e.method), [])
                owner = f"{e.method} {e.path}"
            played[(e.endpoint, owner, len(cases))] = e
            cases.append(case)
    if not skills and not routes:
        return None, played
    document: dict[str, Any] = {"name": name}
    if skills:
        document["skills"] = [
            {"id": skill, **{endpoint: {"cases": cases} for endpoint, cases in by.items()}}
            for skill, by in skills.items()
        ]
    if routes:
        document["routes"] = [
            {"path": path, "method": method, "cases": cases}
            for (path, method), cases in routes.items()
        ]
    return document, played


def _state_after(k: int, e: Expectation) -> str:
    """The scenario state a session is in once it met ordered expectation *k* (1-based)."""
    return f"ordered {k} met: {e.method} {e.path}"[:100]


class Expecting:
    """The expectation methods of a :class:`~.server.Server` (and their pytest-httpserver
    names), over its :attr:`expectations`."""

    expectations: Expectations

    def expect(self, path: str, **conditions: Any) -> Expectation:
        """Expect a request (:meth:`Expectations.expect`); chain a ``respond_with_*``."""
        return self.expectations.expect(path, **conditions)

    def expect_request(self, path: str, **conditions: Any) -> Expectation:
        """pytest-httpserver's name for :meth:`expect`."""
        return self.expectations.expect(path, **conditions)

    def expect_oneshot_request(self, path: str, **conditions: Any) -> Expectation:
        """:meth:`expect` with ``once=True``: one request only."""
        return self.expectations.expect(path, once=True, **conditions)

    def expect_ordered_request(self, path: str, **conditions: Any) -> Expectation:
        """:meth:`expect` with ``ordered=True``: once, after the ordered ones before it."""
        return self.expectations.expect(path, ordered=True, **conditions)

    def check_expectations(self, session: str | None = None) -> None:
        """Raise AssertionError, with near misses, if an expectation was not met as asked."""
        __tracebackhide__ = True
        self.expectations.check(session)

    def check_assertions(self, session: str | None = None) -> None:
        """pytest-httpserver's name for :meth:`check_expectations`."""
        __tracebackhide__ = True
        self.expectations.check(session)

    def clear_expectations(self, session: str | None = None) -> None:
        """Forget every expectation (or *session*'s); their skills and routes go."""
        self.expectations.clear(session)
