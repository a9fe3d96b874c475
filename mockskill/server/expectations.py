"""Expectations from Python, as pytest-httpserver users write them.

``server.expect("/orders", method="POST", body={"/id": 1}).respond_with_json({...})``
scripts a route or a skill from a test. Each expectation is written here as
a scenario document, the keys a YAML file has (its conditions a case's
``when:``, its answer a step), loaded by the same loader and served by the same
engine: a bad argument is the problem a bad YAML would be, raised by the call
that gave it. The expectations of one skill, or of one route (path and method),
are one scenario (``expect-N``), made again whenever one of them changes.

Which expectation a request met is read from the journal (the entry's scenario,
case and step), so nothing is added to the request path. An expectation used
``once`` (or ``ordered``) is a case that plays one step, then passes requests
on (``end: next``); one met is left out of the document when it is made again,
so that adding another does not replay it.
:meth:`Expectations.check` raises AssertionError naming every expectation never
met, every ordered one met out of order, and the near misses of the requests
that matched nothing.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..engine.entries import Entry
from ..scenario.loader import load_any

if TYPE_CHECKING:
    from ..control.registry import LoadedScenario, Registry
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


@dataclass
class _Group:
    """The expectations of one skill or route: one scenario, and what its steps play."""

    name: str
    skill: str | None
    route: tuple[str, str] | None
    members: list[Expectation] = field(default_factory=list)
    played: dict[tuple[str, int, int], Expectation] = field(default_factory=dict)
    """(endpoint, case, step) of the scenario served -> the expectation it plays."""
    served: bool = False


class Expectations:
    """A server's expectations: add (:meth:`expect`), check (:meth:`check`), clear."""

    def __init__(self, server: Serving) -> None:
        self._server = server
        self._lock = threading.RLock()
        self._groups: dict[tuple[str, ...], _Group] = {}
        self._by_name: dict[str, _Group] = {}
        self._numbers = itertools.count(1)
        self._names = itertools.count(1)
        self._seen = 0
        """The id of the last journal entry read for which expectation it met."""
        self._since = 0
        self._told: set[str] = set()
        """The ordered expectations met out of order that :meth:`check` said already."""
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
    ) -> Expectation:
        """Expect a request to *path* (a route's Werkzeug rule, or ``/skills/ID`` and
        ``/skills/ID/invoke``), with the conditions of ``cases: when:`` (*headers*,
        *query*, *body* by JSON Pointer, *raw_body*; *json*: the whole body equals it).

        It answers ``200`` (an invoke: ``{"skill": ID, "result": "ok"}``; a
        describe: the descriptor) until a ``respond_with_*`` call; *once*: one
        request only; *ordered*: once, and after every ordered one before it;
        *session*: only requests of that ``Mockskill-Session``. Raises ScenarioError
        as a scenario file with these conditions would.
        """
        endpoint, skill, method = _endpoint(path, method)
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
            group_key = ("skill", skill) if skill is not None else ("route", path, method)
            group = self._groups.get(group_key)
            if group is None:
                route = None if skill is not None else (path, method)
                group = _Group(f"expect-{next(self._names)}", skill, route)
            group.members.append(expectation)
            try:
                self._serve(group)
            except BaseException:
                group.members.remove(expectation)
                raise
            if not self._by_name:
                self._since = self._seen  # the first expectation: misses count from here
            self._groups[group_key] = self._by_name[group.name] = group
            return expectation

    def answer(self, expectation: Expectation, answer: dict[str, Any]) -> None:
        """Make *answer* (a step) the expectation's; raises ScenarioError as a bad step would."""
        with self._lock:
            before, expectation.answer = expectation.answer, answer
            group = self._group_of(expectation)
            if group is None:
                return
            try:
                self._serve(group)
            except BaseException:
                expectation.answer = before
                raise

    @property
    def all(self) -> list[Expectation]:
        """Every expectation, in the order given."""
        with self._lock:
            return sorted(
                (e for g in self._groups.values() for e in g.members), key=lambda e: e.number
            )

    def check(self, session: str | None = None, *, misses: bool = True) -> None:
        """Raise AssertionError if an expectation (of *session*, or any) was never met or an
        ordered one was met out of order, or (*misses*) a request since the first
        expectation matched nothing (a ``once`` one used up, say); with the near misses
        of the requests that matched nothing. Else nothing."""
        with self._lock:
            self._read_journal()
            mine = [e for e in self.all if session is None or e.session == session]
            if not mine:
                return  # nothing expected: the misses are the scenarios' (the plugin's check)
            unmet = [e for e in mine if not e.met]
            wrong = _out_of_order([e for e in mine if e.mode == "ordered"])
            wrong = [text for text in wrong if text not in self._told]
            entries = [e for e in self._server.journal(session) if e.id > self._since]
            missed = [e for e in entries if e.endpoint == "unmatched"]
            if not unmet and not wrong and not (misses and missed):
                return
            # Said once, as pytest-httpserver's check_assertions says each failure once: a
            # test that caught it is not failed for it again. An unmet expectation stays.
            self._told.update(wrong)
            if misses and entries:
                self._since = max(self._since, entries[-1].id)
        lines = []
        if unmet:
            noun = "expectation was" if len(unmet) == 1 else "expectations were"
            lines.append(f"mockskill: {len(unmet)} {noun} never met:")
            lines += [f"  {e.label}" for e in unmet]
        if wrong:
            lines.append("mockskill: ordered expectations met out of order:")
            lines += [f"  {text}" for text in wrong]
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
            for key, group in list(self._groups.items()):
                group.members = [
                    e for e in group.members if session is not None and e.session != session
                ]
                self._serve(group)
                if not group.members:
                    del self._groups[key]
                    self._by_name.pop(group.name, None)
            self._since = self._seen
            self._told.clear()

    # -- the scenario documents --------------------------------------------------

    def _group_of(self, expectation: Expectation) -> _Group | None:
        for group in self._groups.values():
            if any(e is expectation for e in group.members):
                return group
        return None

    def _serve(self, group: _Group) -> None:
        """Serve *group* as its scenario (made again; the expectations met once left out),
        or stop serving it when nothing of it is left to play."""
        self._read_journal()
        document, played = _document(group)
        if document is None:
            if group.served:
                self._server.remove(group.name)
                group.served, group.played = False, {}
            return
        loaded = load_any(
            document,
            max_delay_ms=self._server.registry.max_delay_ms,
            name=f"expect({group.members[-1].method} {group.members[-1].path})",
        )
        self._server.add(loaded, replace=True)
        group.served, group.played = True, played

    def _read_journal(self) -> None:
        """Note, for each request journalled since last time, which expectation it met."""
        entries = self._server.journal()
        for entry in entries:
            if entry.id <= self._seen:
                continue
            group = self._by_name.get(entry.scenario or "")
            if group is None or entry.case is None or entry.step is None:
                continue
            met = group.played.get((entry.endpoint, entry.case, entry.step))
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
    group: _Group,
) -> tuple[dict[str, Any] | None, dict[tuple[str, int, int], Expectation]]:
    """*group*'s scenario document, and which expectation each (endpoint, case, step) plays.

    Each expectation is a case of its endpoint, tried as pytest-httpserver tries its
    handlers: the ordered ones, then the ``once`` ones, then the others, each kind in
    the order given. A ``once`` (or ordered) case plays one step and ends with
    ``next``: the request after it goes on to the cases after it, or is a miss.
    """
    played: dict[tuple[str, int, int], Expectation] = {}
    endpoints: dict[str, list[dict[str, Any]]] = {}
    for endpoint in ("describe", "invoke", "route"):
        cases: list[dict[str, Any]] = []
        for mode in ("ordered", "once", "always"):
            for e in group.members:
                if e.endpoint != endpoint or e.mode != mode or (mode != "always" and e.met):
                    continue  # one met once is not played again when the scenario is made again
                played[(endpoint, len(cases), 0)] = e
                end = "last" if mode == "always" else "next"
                cases.append({"when": e.when, "steps": [dict(e.answer)], "end": end})
        if cases:
            endpoints[endpoint] = cases
    if not endpoints:
        return None, played
    document: dict[str, Any] = {"name": group.name}
    if group.skill is not None:
        skill: dict[str, Any] = {"id": group.skill}
        for endpoint, cases in endpoints.items():
            skill[endpoint] = {"cases": cases}
        document["skills"] = [skill]
    else:
        assert group.route is not None
        path, method = group.route
        document["routes"] = [{"path": path, "method": method, "cases": endpoints["route"]}]
    return document, played


def _out_of_order(ordered: list[Expectation]) -> list[str]:
    """What was met out of the order *ordered* (oldest given first) asks."""
    wrong = []
    for before, after in itertools.pairwise(ordered):
        if after.met and (not before.met or before.met[0] > after.met[0]):
            when = "never" if not before.met else "after it"
            wrong.append(f"{after.label} was met before {before.label} ({when})")
    return wrong


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
