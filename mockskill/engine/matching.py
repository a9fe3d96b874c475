"""Which endpoint a request is for: the skill surface, free routes, or nothing.

A :class:`RoutingTable` is compiled once per scenario set. The skill surface
(``GET /skills``, ``GET /skills/{id}``, ``POST /skills/{id}/invoke``) is
matched by splitting the path and one dict lookup; free routes by one
:class:`~mockskill.scenario.routes.Router` (Werkzeug's rule syntax and matching,
without importing Werkzeug). A request that matches nothing gets
its near misses: the closest routes, each with the reasons it missed.

A miss costs about what a match does, however many routes there are: the
rules its path matches are found by one walk of a router of them all, and
the similarity of its path (a quadratic comparison) is measured only
against the rules nearest it in sorted order, by their beginnings and by
their ends (:class:`_NearIndex`, built on the first miss).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..protocol.catalog import BASE_URL, Context
from ..protocol.descriptor import descriptor_url, invoke_url
from ..scenario.model import (
    INITIAL_STATE,
    Case,
    RateLimit,
    Reply,
    Route,
    Scenario,
    ScenarioSet,
    Sequence,
    Skill,
)
from ..scenario.routes import Router
from . import conditions, limits
from .callback_hosts import LOOPBACK_ONLY
from .state import MAX_PATH, shorten
from .task_skills import DEFAULT_MAX_TASKS, TaskSkill

if TYPE_CHECKING:
    from .digests import KeyedDigest
    from .incoming import Incoming
    from .store import Take

Kind = Literal["list", "describe", "invoke", "route", "task"]
_SURFACE = (
    ("GET", "/skills", "the list of skills"),
    ("GET", "/skills/<id>", "a skill's descriptor"),
    ("POST", "/skills/<id>/invoke", "invoking a skill"),
)
"""The skill surface a miss is measured against. Not a task's status URLs: a consumer
follows the ``Location`` it was given, and one that builds them is told so by their
404 ``TASK_NOT_FOUND`` (a near miss would only crowd out the likelier ones)."""
TASK_ACTIONS = {"GET": "poll", "HEAD": "poll", "DELETE": "cancel", "POST": "input"}
"""What a request to a task's status URL does to the task, by method (``POST .../cancel``:
a cancel)."""
MAX_NEAR_MISSES = 3


@dataclass(frozen=True)
class Target:
    """What a request matched: an endpoint and the sequence it plays."""

    kind: Kind
    key: str
    """Names the sequence in the store (unique per scenario set)."""
    context: Context
    sequence: Sequence | None = None
    """What it plays; None for the list, and for an endpoint whose cases are all it has."""
    skill: Skill | None = None
    route: Route | None = None
    cases: tuple[Target, ...] = ()
    """An endpoint's cases, in order, each a target of its own (its sequence and key):
    :meth:`RoutingTable.case` picks the request's. None of them has cases."""
    case: Case | None = None
    """The case this target plays (None: the endpoint's default sequence)."""
    endpoint_cases: tuple[Case, ...] = ()
    """The cases of :attr:`cases`, in order."""
    picker: conditions.Picker | None = field(default=None, compare=False, repr=False)
    """What tries :attr:`endpoint_cases` on a request (of an endpoint whose cases require
    scenario states: those that require none, for a session in a state none requires)."""
    by_state: Mapping[str, conditions.Picker] | None = field(
        default=None, compare=False, repr=False
    )
    """Set when a case requires a scenario state: per state required, what tries the cases
    a session in that state may take (:meth:`RoutingTable.case_in`)."""

    named: Mapping[str, Target] = field(default_factory=dict, compare=False, repr=False)
    """Its named cases by name, each played by a request whose ``Mockskill-Case`` header
    names it (:meth:`RoutingTable.named`): its conditions and state unasked, and a case
    that ends with ``next`` staying on its last step (the header asked for it)."""
    unnamed: conditions.Picker | None = field(default=None, compare=False, repr=False)
    """What tries its unnamed cases that require no state (set when some case is named):
    a request naming another endpoint's case meets these, then the default sequence."""

    scenario: str | None = field(init=False, compare=False)
    """The scenario of the skill or route (None for the list)."""
    skill_id: str | None = field(init=False, compare=False)
    """The skill's id (None for a route or the list), as :attr:`Miss.skill_id` is a miss's.
    Both are read on every request, so set once."""
    draws: bool = field(init=False, compare=False)
    """Whether a step of the sequence is random: its requests take draw numbers."""
    idempotent: bool = field(init=False, compare=False)
    """Whether it is the invoke endpoint of a skill that honours ``Idempotency-Key``."""
    passes: bool = field(init=False, compare=False)
    """Whether it is a case whose sequence, once over, passes a request on (``end: next``)."""
    renders: bool = field(init=False, compare=False)
    """Whether a step of the sequence has a ``{{...}}`` template (made per request)."""
    limit: RateLimit | None = field(init=False, compare=False)
    """The token bucket its requests spend (a skill's ``rate_limit:`` for its invoke, a
    route's for its requests; None: no limit), set at load: read on every request."""
    policy: limits.Policy | None = field(init=False, compare=False, repr=False)
    """Its limit as its answers state it, made once (None: no limit)."""
    endpoint: str = field(init=False, compare=False)
    """The endpoint's key (a case's is its endpoint's): what its limit's buckets are per."""
    tasked: TaskSkill | None = field(init=False, compare=False, repr=False)
    """Its skill's ``task:`` as requests read it, for its invoke and its status URLs (None:
    no task skill, or another endpoint)."""

    def __post_init__(self) -> None:
        owner = self.skill or self.route
        object.__setattr__(self, "scenario", owner.scenario if owner else None)
        object.__setattr__(self, "skill_id", self.skill.id if self.skill else None)
        steps = self.sequence.steps if self.sequence else ()
        object.__setattr__(self, "draws", any(step.random for step in steps))
        honours = self.skill is not None and self.skill.idempotency_key
        object.__setattr__(self, "idempotent", honours and self.kind == "invoke")
        passes = self.case is not None and self.sequence is not None and self.sequence.end == "next"
        object.__setattr__(self, "passes", passes)
        object.__setattr__(self, "renders", any(s.reply.template is not None for s in steps))
        limit = self.route.rate_limit if self.route is not None else None
        if self.skill is not None:
            limit = self.skill.rate_limit if self.kind == "invoke" else None
        object.__setattr__(self, "limit", limit)
        object.__setattr__(self, "policy", None if limit is None else limits.Policy(limit))
        # A case's key is its endpoint's with "/case/N" added (with_cases): its limit is
        # the endpoint's, one bucket for all its cases.
        endpoint = self.key.rsplit("/case/", 1)[0] if self.case is not None else self.key
        object.__setattr__(self, "endpoint", endpoint)
        tasked = None
        if self.skill is not None and self.kind in ("invoke", "task"):
            if self.case is not None and self.kind == "invoke":
                tasked = TaskSkill.of_case(self.skill, self.case)
            else:
                tasked = TaskSkill.of(self.skill)
        object.__setattr__(self, "tasked", tasked)

    @property
    def label(self) -> str:
        of = f" of {self.case.label}" if self.case is not None else ""
        if self.skill is not None:
            return f"the {self.kind} sequence{of} of skill {self.skill.id!r}"
        if self.route is not None:
            return f"the sequence{of} of route {self.route.label}"
        return "the list of skills"

    def with_cases(self, cases: tuple[Case, ...]) -> Target:
        """This endpoint's target with a target for each of *cases* (keys: its own, then
        ``/case/N``: each case keeps its own positions per session)."""
        if not cases:
            return self
        targets = tuple(
            Target(
                self.kind,
                f"{self.key}/case/{case.index}",
                self.context,
                case.sequence,
                self.skill,
                self.route,
                case=case,
            )
            for case in cases
        )
        named = {
            case.name: dataclasses.replace(
                target,
                sequence=dataclasses.replace(case.sequence, end="last"),
            )
            if case.sequence.end == "next"
            else target
            for case, target in zip(cases, targets, strict=True)
            if case.name is not None
        }
        unnamed = None
        if named:
            unnamed = conditions.Picker([c for c in cases if c.name is None and c.state is None])
        base = dataclasses.replace(self, named=named, unnamed=unnamed)
        required = {case.state for case in cases if case.state is not None}
        if not required:
            picker = conditions.Picker(cases)
            return dataclasses.replace(base, cases=targets, endpoint_cases=cases, picker=picker)
        # One picker per state: the cases a session in it may take, in order.
        by_state = {
            state: conditions.Picker([c for c in cases if c.state in (None, state)])
            for state in required
        }
        stateless = conditions.Picker([c for c in cases if c.state is None])
        return dataclasses.replace(
            base, cases=targets, endpoint_cases=cases, picker=stateless, by_state=by_state
        )


@dataclass(frozen=True)
class Miss:
    """No endpoint: an unknown skill id, or a path nothing serves."""

    method: str
    path: str
    skill_id: str | None = None
    """Set when the path was the skill surface's, but the id is unknown."""
    suggestions: tuple[str, ...] = ()
    near_misses: tuple[dict[str, Any], ...] = ()
    endpoint: str | None = None
    """Set when the path and method were an endpoint's, but none of its cases took the
    request (and it has no default): its near misses are the cases'."""


@dataclass(frozen=True)
class _Candidate:
    """An endpoint or route a missed request is measured against (its near misses)."""

    label: str
    methods: tuple[str, ...]
    rule: str


_SHORTLIST = MAX_NEAR_MISSES
"""Rules sharing the most of a missed path's three-letter pieces that its similarity is
measured against in each group (a quadratic comparison: a few, never every route)."""


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(max(1, len(text) - 2))}


class _NearIndex:
    """What a miss is measured against, built once per table on its first miss: a router
    of every candidate's rule (which ones a path matches, in one walk), which candidates
    take each method, and which candidates' rules hold each three-letter piece (those
    sharing the most with a path are the likeliest near misses)."""

    def __init__(self, candidates: list[_Candidate]) -> None:
        self.size = len(candidates)
        self.router: Router[int] = Router((c.rule, None, i) for i, c in enumerate(candidates))
        taking: dict[str, set[int]] = {}
        holding: dict[str, list[int]] = {}
        for i, candidate in enumerate(candidates):
            for method in candidate.methods:
                taking.setdefault(method, set()).add(i)
            for piece in _trigrams(candidate.rule):
                holding.setdefault(piece, []).append(i)
        if "GET" in taking:  # HEAD comes with GET
            taking.setdefault("HEAD", set()).update(taking["GET"])
        self.taking = {method: frozenset(members) for method, members in taking.items()}
        # A piece most rules hold (the /api/v1/ they all begin with) tells them apart from
        # none, and would cost a count per rule: dropped.
        common = max(_SHORTLIST, len(candidates) // 2)
        self.holding = {piece: held for piece, held in holding.items() if len(held) <= common}

    def ranked(self, path: str) -> Iterator[int]:
        """Every candidate, those sharing the most pieces with *path* first."""
        shared: Counter[int] = Counter()
        for piece in _trigrams(path[:MAX_PATH]):
            shared.update(self.holding.get(piece, ()))
        for i, _ in shared.most_common():
            yield i
        yield from (i for i in range(self.size) if i not in shared)


class RoutingTable:
    """The compiled routes of one scenario set; read-only once built."""

    def __init__(self, scenarios: ScenarioSet) -> None:
        self.scenarios: dict[str, Scenario] = {s.name: s for s in scenarios.scenarios}
        self.generations: Mapping[str, int] = {}
        """The generation of each sequence key in the store this table plays (set by the
        engine before it serves the table)."""
        self.seed = 0
        """The server's seed, which draws use when a scenario sets none (set with
        :attr:`generations`)."""
        self.takes: dict[str, dict[str, Take]] = {}
        """Per sequence key, per session, its Take (``choosing.take`` fills it on first
        use: it is the same for every request of the session on this table)."""
        self.refusals: dict[tuple[object, ...], Any] = {}
        """Rate limits' refusals, kept (``choosing.refused`` fills it with its ``Refusal``s,
        a type this module cannot name: choosing imports it): per target, address (their
        ids; both kept with them) and the values they state."""
        self.credential_digest: KeyedDigest | None = None
        """How the journal fingerprints credentials (set with :attr:`generations`): a
        limit keyed per credential counts by the same fingerprint."""
        self.credentials = scenarios.credentials
        self.max_tasks = DEFAULT_MAX_TASKS
        """The live tasks the server holds at most (``--max-tasks``; set with
        :attr:`generations`)."""
        self.callback_hosts = LOOPBACK_ONLY
        """Where task callbacks may go besides loopback (``--callback-allow``; set with
        :attr:`generations`)."""
        self.task_ids: KeyedDigest | None = None
        """What signs and reads task ids (:mod:`.task_ids`; set with :attr:`generations`)."""
        self.task_reads: dict[tuple[str, str], tuple[str, int] | None] = {}
        """Task ids read on this table, and what each read (a task's polls repeat its id:
        its mac is checked once; bounded by the poller: ``task_requests``)."""
        self.skills: dict[str, Skill] = {s.id: s for s in scenarios.skills}
        self._describe = {
            sid: Target(
                "describe",
                skill_key(sid, "describe"),
                Context.for_skill(sid, "describe"),
                s.describe,
                s,
            ).with_cases(s.describe_cases)
            for sid, s in self.skills.items()
        }
        self._invoke = {
            sid: Target(
                "invoke", skill_key(sid, "invoke"), Context.for_skill(sid), s.invoke, s
            ).with_cases(s.invoke_cases)
            for sid, s in self.skills.items()
        }
        self._tasks = {
            sid: Target(
                "task",
                skill_key(sid, "tasks"),
                Context(sid, f"{BASE_URL}/skills/{sid}/tasks"),
                None if s.task is None else s.task.polls,
                s,
            )
            for sid, s in self.skills.items()
        }
        """Per skill, its status URLs' target (a skill that is no task skill's answers 404
        ``TASK_NOT_FOUND``): :func:`task_request` reads the id and what it does."""
        self._list = Target("list", "list", Context(None, f"{BASE_URL}/skills"))
        proxied = next((s for s in scenarios.scenarios if s.proxy is not None), None)
        self.fallback: Target | None = None
        """A scenario's ``proxy: URL``: what every request the scenarios do not script
        plays (the first such scenario's; the list of skills too)."""
        if proxied is not None:
            key = f"proxy/{proxied.name}"
            self.fallback = Target("route", key, Context(None, BASE_URL), proxied.proxy)
            self._list = Target("list", f"{key}/list", self._list.context, proxied.proxy)
        self.listing = Reply.json(200, {"skills": [_listed(s) for s in self.skills.values()]})
        self.routes = scenarios.routes
        self._route_targets = [
            Target(
                "route",
                route_key(r),
                Context(None, BASE_URL + r.path),
                r.sequence,
                route=r,
            ).with_cases(r.cases)
            for r in self.routes
        ]
        self._router = Router((r.path, r.methods, i) for i, r in enumerate(self.routes))
        self._passing: dict[str, tuple[Target, int]] = {
            case.key: (endpoint, i)
            for endpoint in (*self._describe.values(), *self._invoke.values(), *self._route_targets)
            for i, case in enumerate(endpoint.cases)
            if case.passes
        }
        """Each case that passes requests on (``end: next``): its endpoint, and its place."""
        # The surface's paths as written (no trailing or doubled slash) by one lookup; every
        # other spelling is split as before. Kept only where the split finds the same target.
        exact: dict[tuple[str, str], Target] = {}
        for method in ("GET", "HEAD"):
            exact[(method, "/skills")] = self._list
            exact.update(((method, f"/skills/{sid}"), t) for sid, t in self._describe.items())
        exact.update((("POST", f"/skills/{sid}/invoke"), t) for sid, t in self._invoke.items())
        self._exact = {key: t for key, t in exact.items() if self._match_surface(*key) is t}
        self._status_urls = {f"/skills/{sid}/tasks/": t for sid, t in self._tasks.items()}
        """A task skill's status URLs by their prefix, up to the task id: a poll is matched
        by one lookup, as an exact path is (:meth:`match`)."""
        self._candidates = [_Candidate(f"{m} {rule}", (m,), rule) for m, rule, _ in _SURFACE] + [
            _Candidate(r.label, r.methods, r.path) for r in self.routes
        ]
        self._near: _NearIndex | None = None

    def match(self, method: str, path: str) -> Target | Miss:
        """The endpoint for *method* and *path*, or why there is none."""
        exact = self._exact.get((method, path))
        if exact is not None:  # a skill-surface path as the descriptors write it
            return exact
        if method in TASK_ACTIONS:  # a status URL as Location writes it: /skills/ID/tasks/TASK
            cut = path.rfind("/") + 1
            if 0 < cut < len(path):  # (an id, not an empty last segment)
                status_url = self._status_urls.get(path[:cut])
                if status_url is not None:
                    return status_url
        if path == "/skills" or path.startswith("/skills/"):
            target = self._match_surface(method, path)
            if target is not None and (self.fallback is None or type(target) is Target):
                return target
        elif self.routes:
            index = self._router.match(path, method)
            if index is not None:
                return self._route_targets[index]
        if self.fallback is not None:  # nothing scripted takes it: forwarded
            return self.fallback
        return Miss(method, path, near_misses=self.near_misses(method, path))

    def case(self, target: Target, request: Incoming) -> Target | Miss:
        """The target of the first of *target*'s cases that *request* meets, else *target*
        itself (its default sequence), else — an endpoint with cases only — a miss
        whose near misses say which condition of which case failed, and why."""
        cases = target.endpoint_cases
        picker = target.picker
        assert picker is not None  # (an endpoint with cases has one)
        picked = picker.pick(request)
        if picked is not None:
            return target.cases[picked.index]
        if target.sequence is not None:
            return target
        return self._missed(target, request, conditions.misses(cases, request))

    def named(self, target: Target, name: str, request: Incoming) -> Target | Miss | None:
        """The target a request whose ``Mockskill-Case`` header says *name* plays: that
        case of *target*'s; for a case of its skill's other endpoint (a client that sends
        the header on every request fetches the descriptor too), its unnamed cases, then
        its default sequence — *target* itself, unchanged, when it names no case (its
        cases are then tried as without the header); None when neither endpoint has a
        case so named."""
        picked = target.named.get(name)
        if picked is not None:
            return picked
        if name not in self.case_names(target):
            return None
        if not target.named:
            return target
        if target.unnamed is not None:
            unnamed = target.unnamed.pick(request)
            if unnamed is not None:
                return target.cases[unnamed.index]
        if target.sequence is not None:
            return target
        return self._missed(target, request, conditions.misses(target.endpoint_cases, request))

    def case_names(self, target: Target) -> list[str]:
        """The names ``Mockskill-Case`` may give on *target*: its skill's (both endpoints),
        or its route's, in the order written."""
        skill = target.skill
        cases = target.endpoint_cases
        if skill is not None:
            cases = skill.describe_cases + skill.invoke_cases
        return [case.name for case in cases if case.name is not None]

    def case_in(self, target: Target, request: Incoming, state: str) -> Target | Miss:
        """:meth:`case` for an endpoint whose cases require scenario states, for a session
        in *state*: a case requiring another state does not take the request (its near
        miss says so first)."""
        by_state = target.by_state
        assert by_state is not None  # (only asked of an endpoint whose cases require states)
        picked = by_state.get(state, target.picker).pick(request)  # type: ignore[union-attr]
        if picked is not None:
            return target.cases[picked.index]
        if target.sequence is not None:
            return target
        cases = target.endpoint_cases
        missed = conditions.misses(cases, request)
        for case, miss in zip(cases, missed, strict=True):
            if case.state is not None and case.state != state:
                shown = shorten(state)
                miss["reasons"].insert(0, f"the session's state is {shown!r}, not {case.state!r}")
        return self._missed(target, request, missed)

    def _missed(self, target: Target, request: Incoming, missed: list[dict[str, Any]]) -> Miss:
        """The miss of a request none of *target*'s cases took (*missed*: why each did not)."""
        route = target.route
        endpoint = route.label if route is not None else f"{request.method} {request.path}"
        near = tuple(
            {"route": f"{endpoint}, {miss['case']}", "reasons": miss["reasons"]}
            for miss in missed[:MAX_NEAR_MISSES]
        )
        return Miss(request.method, request.path, near_misses=near, endpoint=shorten(endpoint))

    def passed_on(self, used: Target, request: Incoming, state: str | None) -> Target | Miss:
        """Where a request goes that *used*, a case whose sequence is over and ends with
        ``next``, passes on: the first case after it that the request meets (in *state*,
        the session's scenario state when a case requires one), else the endpoint's
        default sequence, else a miss whose near misses say why each case did not take
        it (a case whose conditions hold: its sequence is over)."""
        endpoint, place = self._passing[used.key]
        facts = conditions.Facts(request)
        for target in endpoint.cases[place + 1 :]:
            case = target.case
            assert case is not None
            if case.state is not None and case.state != state:
                continue
            if all(conditions.meets(c, facts) for c in case.conditions):
                return target
        if endpoint.sequence is not None:
            return endpoint
        over = "used up: its steps are played (end: next)"
        missed = conditions.misses(endpoint.endpoint_cases, request)
        for case, miss in zip(endpoint.endpoint_cases, missed, strict=True):
            if case.state is not None and case.state != state:
                shown = shorten(state or INITIAL_STATE)
                miss["reasons"].insert(0, f"the session's state is {shown!r}, not {case.state!r}")
        route = endpoint.route
        label = route.label if route is not None else f"{request.method} {request.path}"
        near = tuple(
            {"route": f"{label}, {miss['case']}", "reasons": miss["reasons"] or [over]}
            for miss in missed[:MAX_NEAR_MISSES]
        )
        return Miss(request.method, request.path, near_misses=near, endpoint=shorten(label))

    def _match_surface(self, method: str, path: str) -> Target | Miss | None:
        parts = path[1:].rstrip("/").split("/")
        is_get = method in ("GET", "HEAD")
        if len(parts) == 1:
            return self._list if is_get else None
        skill_id = parts[1]
        if len(parts) == 2 and is_get:
            table = self._describe
        elif len(parts) == 3 and parts[2] == "invoke" and method == "POST":
            table = self._invoke
        elif task_request(method, parts) is not None:
            table = self._tasks
        else:
            return None
        target = table.get(skill_id)
        if target is not None:
            return target
        import difflib  # a miss's suggestions: on the first such miss, not at start-up

        close = difflib.get_close_matches(skill_id, list(self.skills), n=3, cutoff=0.6)
        return Miss(method, path, skill_id=skill_id, suggestions=tuple(close))

    def near_misses(self, method: str, path: str) -> tuple[dict[str, Any], ...]:
        """The closest routes to a request that matched none, with why each missed."""
        import difflib  # (as in _match_surface)

        near = self._near
        if near is None:  # (two threads may both build it: the same index, kept once)
            near = self._near = _NearIndex(self._candidates)
        matched = set(near.router.every(path))
        taking = near.taking.get(method, frozenset())
        # A right path with a wrong method comes first (one reason): all are measured.
        # Then a wrong path with a right method, then both wrong: of each, the few
        # sharing the most with the path, while the near misses are not filled.
        measured = matched - taking
        if len(measured) < MAX_NEAR_MISSES:
            groups: tuple[list[int], list[int]] = ([], [])
            for i in near.ranked(path):
                if i not in matched:
                    group = groups[i not in taking]
                    if len(group) < _SHORTLIST:
                        group.append(i)
                    elif len(groups[0]) == len(groups[1]) == _SHORTLIST:
                        break
            measured.update(groups[0])
            if len(measured) < MAX_NEAR_MISSES:
                measured.update(groups[1])
        scored = []
        # Quoted shortened: each near miss would otherwise copy a hostile path whole.
        shown_path, shown_method = shorten(path), shorten(method)
        for i in measured:
            candidate = self._candidates[i]
            reasons = []
            if i not in matched:
                reasons.append(f"path {shown_path} does not match {candidate.rule}")
            if i not in taking:
                reasons.append(f"method {shown_method} is not {' or '.join(candidate.methods)}")
            # On the path's start only: SequenceMatcher is quadratic, and a path far
            # longer than every rule is far from all of them anyway.
            similarity = difflib.SequenceMatcher(None, path[:MAX_PATH], candidate.rule).ratio()
            # Fewest reasons first; then a right path with a wrong method
            # before a wrong path; then the most similar path.
            path_missed = reasons[0].startswith("path")
            scored.append((len(reasons), path_missed, -similarity, candidate.label, reasons))
        scored.sort()
        return tuple(
            {"route": label, "reasons": reasons} for *_, label, reasons in scored[:MAX_NEAR_MISSES]
        )


def task_request(method: str, parts: list[str]) -> tuple[str, str] | None:
    """The task id a status URL's request names, and what it does to the task (``poll``,
    ``cancel`` or ``input``: :data:`TASK_ACTIONS`), from its path's *parts* (the path
    split on ``/``, its leading and trailing ones stripped); None: not a status URL's."""
    if len(parts) == 4 and parts[2] == "tasks":
        action = TASK_ACTIONS.get(method)
        return None if action is None else (parts[3], action)
    if len(parts) == 5 and parts[2] == "tasks" and parts[4] == "cancel" and method == "POST":
        return parts[3], "cancel"
    return None


def task_path_parts(path: str) -> list[str]:
    """*path* split as :func:`task_request` reads it."""
    return path[1:].rstrip("/").split("/")


def skill_key(skill_id: str, endpoint: str) -> str:
    """The key of a skill endpoint's sequence in :class:`~mockskill.engine.state.State`."""
    return f"skill/{skill_id}/{endpoint}"


def route_key(route: Route) -> str:
    """The key of a free route's sequence in :class:`~mockskill.engine.state.State`."""
    return f"route/{route.scenario}/{route.index}"


def sequence_keys(scenarios: Iterable[Scenario]) -> set[str]:
    """The keys of every sequence of *scenarios* (to restart them)."""
    keys: set[str] = set()
    for scenario in scenarios:
        for skill in scenario.skills:
            for endpoint, cases in (
                ("describe", skill.describe_cases),
                ("invoke", skill.invoke_cases),
            ):
                keys.add(key := skill_key(skill.id, endpoint))
                keys.update(f"{key}/case/{case.index}" for case in cases)
        for route in scenario.routes:
            keys.add(key := route_key(route))
            keys.update(f"{key}/case/{case.index}" for case in route.cases)
    return keys


def _listed(skill: Skill) -> dict[str, Any]:
    return {
        "id": skill.id,
        "name": skill.name,
        "scenario": skill.scenario,
        "descriptor_url": descriptor_url(skill.id),
        "invoke_url": invoke_url(skill.id),
    }
