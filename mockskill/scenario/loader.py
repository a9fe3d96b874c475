"""Scenario files → a checked :class:`~mockskill.scenario.model.ScenarioSet`, or every problem.

A file holds one scenario, or several as YAML documents separated by
``---``. Paths may be files or folders (``*.yaml`` and ``*.yml`` below them,
in sorted order). Everything is checked before anything is returned: a
problem anywhere raises one :class:`~mockskill.scenario.problems.ScenarioError` that
lists them all, so a server never serves half a configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path as FsPath
from typing import Any

from ..protocol.catalog import TOKEN_PATH, Context
from . import path_access, proxy_config, rate_limits, states
from .cases import named_twice, read_endpoint
from .credentials import read_credentials
from .model import Outage, Route, Scenario, ScenarioSet, Sequence
from .problems import Path, Problem, ScenarioError, describe, format_path
from .reader import MAX_DELAY_MS, Reader
from .routes import RuleError
from .routes import parse as parse_rule
from .routes import variables as route_variables
from .skills import NAME_TEXT, SCENARIO_NAME, SKILL_KEYS, read_skill
from .source import Document, Position, read_file, read_text
from .steps import StepContext, read_step, single_step
from .template_syntax import Scope
from .uniqueness import Claim, clashes

__all__ = [
    "HTTP_METHODS",
    "NAME_TEXT",
    "OUTAGE_KEYS",
    "RESERVED_PREFIXES",
    "ROUTE_KEYS",
    "SCENARIO_KEYS",
    "SCENARIO_NAME",
    "SKILL_KEYS",
    "InvalidScenarios",
    "Scenarios",
    "Source",
    "bundled_path",
    "combine",
    "load_any",
    "load_data",
    "load_paths",
    "load_text",
    "scenario_files",
]
"""What callers name from here; a skill's reading (and the name rule) is :mod:`.skills`'."""

SCENARIO_KEYS = ("name", "description", "seed", "outage", "auth", "skills", "routes", "proxy")
OUTAGE_KEYS = ("start", "duration", "step")
ROUTE_KEYS = ("path", "method", "steps", "end", "cases", "proxy", "rate_limit")
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
RESERVED_PREFIXES = ("/skills", "/__admin", TOKEN_PATH)


class InvalidScenarios(ScenarioError):
    """Scenarios with problems, and what each of them claims (:class:`Claim`).

    Whoever loads them beside others (the registry) checks the claims for
    clashes too, so that those are reported with the problems, not after.
    """

    def __init__(self, problems: Iterable[Problem], claims: Iterable[Claim]) -> None:
        super().__init__(list(problems))
        self.claims = tuple(claims)


def bundled_path() -> FsPath:
    """The scenarios that ship with mockskill (inside the wheel, or beside the source)."""
    here = FsPath(__file__).resolve().parent.parent  # the package: mockskill/scenario/..
    installed = here / "scenarios"
    return installed if installed.is_dir() else here.parent / "scenarios"


def scenario_files(paths: Iterable[str | FsPath]) -> tuple[list[FsPath], list[Problem]]:
    """The files that *paths* name: files as given, folders searched for YAML."""
    files: list[FsPath] = []
    problems: list[Problem] = []
    for item in paths:
        path = FsPath(item)
        refused = path_access.unreadable(path)
        if refused is not None:  # said so, rather than read as empty (or a traceback)
            problems.append(refused)
        elif path.is_dir():
            found, unreadable = path_access.scenario_files(path)
            if not found and not unreadable:
                problems.append(Problem(str(path), 1, 1, "(folder)", "*.yaml files", "none"))
            files.extend(found)
            problems.extend(unreadable)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(
                Problem(str(path), 1, 1, "(file)", "a scenario file or folder", NOTHING_THERE)
            )
    return files, problems


NOTHING_THERE = "nothing there"


def cannot_read(problem: Problem) -> bool:
    """Whether *problem* says a path given could not be read at all (not there, or closed to
    this process): what was to be checked is missing, rather than wrong (a command's exit
    code 3, not 1). A folder without scenario files was read: it is wrong."""
    if problem.path not in ("(file)", "(folder)"):
        return False
    return problem.found == NOTHING_THERE or problem.expected.endswith(" can read")


def load_paths(
    paths: Iterable[str | FsPath],
    *,
    max_delay_ms: int = MAX_DELAY_MS,
    warnings: list[Problem] | None = None,
) -> ScenarioSet:
    """Load scenario files and folders; raise ScenarioError listing every problem.

    Waits longer than *max_delay_ms* (delays, hangs, execution times) are refused.
    *warnings*, if given, receives what loads but is likely a mistake (a skill's
    scripted JSON error answer that is not in the unified body).
    """
    documents: list[Document] = []
    problems: list[Problem] = []
    _read_paths(paths, documents, problems)
    return _finish(documents, problems, max_delay_ms, warnings=warnings)


def load_text(
    text: str,
    name: str = "<text>",
    *,
    max_delay_ms: int = MAX_DELAY_MS,
    warnings: list[Problem] | None = None,
) -> ScenarioSet:
    """Load scenarios from YAML text; *name* stands for the file in problems."""
    documents: list[Document] = []
    problems: list[Problem] = []
    _read_text(text, name, documents, problems)
    return _finish(documents, problems, max_delay_ms, warnings=warnings)


def load_data(
    data: Mapping[str, Any], name: str = "<data>", *, max_delay_ms: int = MAX_DELAY_MS
) -> ScenarioSet:
    """Load one scenario given as Python data (as if it were a YAML document).

    Its problems are placed by their path in the data (``<data>: skills[0].id: ...``),
    with line and column 0: the YAML it is read as is never seen by its author.
    """
    documents: list[Document] = []
    problems: list[Problem] = []
    _read_data(data, name, documents, problems)
    return _finish(documents, problems, max_delay_ms, by_path={name})


_PLAIN = (str, int, float, bool, type(None))


def _read_data(
    data: Mapping[str, Any], name: str, documents: list[Document], problems: list[Problem]
) -> None:
    """Python data read as the YAML it stands for; a value YAML has no word for (a set,
    bytes, an object) is a problem at its path in the data, not a TypeError."""
    odd = _not_plain(data, ())
    if odd is not None:
        path, value = odd
        expected = "plain data: dicts, lists, strings, numbers, booleans, None"
        found = f"{type(value).__name__} {value!r}"[:80]
        problems.append(Problem(name, 0, 0, format_path(path), expected, found))
        return
    _read_text(json.dumps(data, indent=1), name, documents, problems)


def _not_plain(value: Any, path: Path) -> tuple[Path, Any] | None:
    """The first value under *value* that is not plain data, and its path (None: all are)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, _PLAIN):  # json.dumps writes these as strings
                return path, key
            found = _not_plain(item, (*path, str(key)))
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _not_plain(item, (*path, i))
            if found is not None:
                return found
        return None
    return None if isinstance(value, _PLAIN) else (path, value)


def _read_paths(
    paths: Iterable[str | FsPath], documents: list[Document], problems: list[Problem]
) -> None:
    files, found = scenario_files(paths)
    problems.extend(found)
    for file in files:
        docs, found = read_file(file)
        documents.extend(docs)
        problems.extend(found)
        if not docs and not found:
            problems.append(Problem(str(file), 1, 1, "(file)", "at least one scenario", "nothing"))


def _read_text(text: str, name: str, documents: list[Document], problems: list[Problem]) -> None:
    docs, found = read_text(text, name)
    documents.extend(docs)
    problems.extend(found)
    if not docs and not found:
        problems.append(Problem(name, 1, 1, "(file)", "at least one scenario", "nothing"))


Source = ScenarioSet | str | FsPath | Mapping[str, Any]
"""One source of scenarios: a set, YAML text (it has a newline), a path, or one scenario as data."""
Scenarios = Source | Iterable[Source] | None


def load_any(
    source: Scenarios, *, max_delay_ms: int = MAX_DELAY_MS, name: str = "<text>"
) -> ScenarioSet:
    """One set from any source: None (the bundled scenarios), one source, or a list of them.

    A list is checked as one set — every problem of every item at once, and
    no clash between them (reported with the other problems). Texts and data
    in a list are named ``NAME[i]`` in problems (and in default scenario names).
    """
    if source is None:
        return load_paths([bundled_path()], max_delay_ms=max_delay_ms)
    if isinstance(source, ScenarioSet):
        return source
    single = isinstance(source, (str, FsPath, Mapping))
    items: list[Source] = [source] if isinstance(source, (str, FsPath, Mapping)) else list(source)
    documents: list[Document] = []
    problems: list[Problem] = []
    given: list[Scenario] = []
    data: set[str] = set()
    for i, item in enumerate(items):
        label = name if single else f"{name}[{i}]"
        if isinstance(item, ScenarioSet):
            given.extend(item.scenarios)
        elif isinstance(item, Mapping):
            data.add(label.replace("text", "data", 1))
            _read_data(item, label.replace("text", "data", 1), documents, problems)
        elif _is_text(item):
            assert isinstance(item, str)
            _read_text(item, label, documents, problems)
        else:
            _read_paths([item], documents, problems)
    return _finish(documents, problems, max_delay_ms, given, by_path=data)


def _is_text(source: object) -> bool:
    return isinstance(source, str) and "\n" in source


def combine(sets: Iterable[ScenarioSet]) -> ScenarioSet:
    """Several scenario sets served together.

    Raises ScenarioError if scenario names, skill ids or routes clash.
    """
    scenarios = [scenario for each in sets for scenario in each.scenarios]
    problems = clashes(Claim.of(scenario) for scenario in scenarios)
    if problems:
        raise ScenarioError(problems)
    return ScenarioSet(tuple(scenarios))


def _finish(
    documents: list[Document],
    problems: list[Problem],
    max_delay_ms: int,
    given: Iterable[Scenario] = (),
    *,
    warnings: list[Problem] | None = None,
    by_path: set[str] | frozenset[str] = frozenset(),
) -> ScenarioSet:
    """Read every document, then check the whole set (with *given*, loaded already) for clashes.

    Clashes are checked over what every scenario claims, broken ones too, so
    that one run reports both kinds of problem. The problems of the files named
    in *by_path* (Python data, read as YAML its author never saw) are placed by
    their path alone (:meth:`Problem.by_path`).
    """
    per_file: dict[str, int] = {}
    for doc in documents:
        per_file[doc.file] = per_file.get(doc.file, 0) + 1
    scenarios = list(given)
    claims = [Claim.of(scenario) for scenario in scenarios]
    for doc in documents:
        reader = Reader(doc, problems, max_delay_ms=max_delay_ms, warnings=warnings)
        scenario, claim = _read_scenario(reader, single=per_file[doc.file] == 1)
        if scenario is not None:
            scenarios.append(scenario)
        if claim is not None:
            claims.append(claim)
    problems.extend(clashes(claims))
    if by_path:
        problems[:] = [p.by_path(by_path) for p in problems]
        if warnings is not None:
            warnings[:] = [p.by_path(by_path) for p in warnings]
    if problems:
        raise InvalidScenarios(problems, claims)
    return ScenarioSet(tuple(scenarios))


def _read_scenario(r: Reader, *, single: bool) -> tuple[Scenario | None, Claim | None]:
    """The scenario (None after a problem) and what it claims (None if nothing can be read)."""
    raw = r.mapping(r.doc.data, (), "a scenario (a mapping with name, skills, routes)")
    if raw is None:
        return None, None
    before = len(r.problems)
    r.keys(raw, (), SCENARIO_KEYS, required=() if single else ("name",))
    stem = re.sub(r"[^A-Za-z0-9._~-]+", "-", FsPath(r.doc.file).stem).strip("-._~") or "scenario"
    name = r.string(raw, "name", (), default=stem if single else None)
    claimed_name = name
    if name is not None and not SCENARIO_NAME.fullmatch(name):
        r.bad(("name",), NAME_TEXT, describe(name))
        claimed_name = None
    description = r.string(raw, "description", (), default="") or ""
    if "skills" not in raw and "routes" not in raw and "proxy" not in raw:
        r.bad((), "at least one of skills, routes or proxy", describe(raw))
    fallback = proxy_config.shorthand(r, raw, ())
    skill_claims: list[tuple[int, str, Position]] = []
    route_claims: list[tuple[int, tuple[str, ...], str, Position]] = []
    skills = _read_list(
        r, raw, "skills", lambda v, p: read_skill(r, v, p, name or stem, skill_claims)
    )
    routes = _read_list(
        r, raw, "routes", lambda v, p: _read_route(r, v, p, name or stem, int(p[-1]), route_claims)
    )
    seed = None if raw.get("seed") is None else r.integer(raw, "seed", (), default=0, minimum=0)
    outage = _read_outage(r, raw.get("outage"), ("outage",))
    credentials = read_credentials(r, raw.get("auth"), ("auth",))
    states.check(r)  # once every step is read: a state required is one some step sets
    claim = Claim(claimed_name, r.position(()), tuple(skill_claims), tuple(route_claims))
    if len(r.problems) > before or name is None:
        return None, claim
    scenario = Scenario(
        name,
        description,
        r.doc.file,
        tuple(skills),
        tuple(routes),
        r.position(()),
        seed=seed,
        outage=outage,
        credentials=credentials,
        text=r.doc.text,
        proxy=fallback if isinstance(fallback, Sequence) else None,
    )
    return scenario, claim


def _read_outage(r: Reader, value: Any, path: Path) -> Outage | None:
    """``outage: {start: MS, duration: MS, step: STEP}``: a window in which STEP answers all."""
    if value is None:
        return None
    raw = r.mapping(value, path, "{start: MS, duration: MS, step: STEP}")
    if raw is None or not r.keys(raw, path, OUTAGE_KEYS, required=("duration",)):
        return None
    start = r.integer(raw, "start", path, default=0, minimum=0, unit="ms")
    duration = r.integer(raw, "duration", path, default=0, minimum=1, unit="ms")
    step_raw = raw.get("step", {"error": "ENDPOINT_UNREACHABLE"})
    if not single_step(r, step_raw, (*path, "step"), "an outage's step"):
        return None
    step = read_step(r, step_raw, (*path, "step"), StepContext(Context()))
    if start is None or duration is None or step is None:
        return None
    return Outage(start, duration, step)


def _read_list(r: Reader, raw: dict[str, Any], key: str, read: Any) -> list[Any]:
    items = raw.get(key, [])
    if not isinstance(items, list):
        r.bad((key,), f"a list of {key}", describe(items))
        return []
    out = []
    for i, item in enumerate(items):
        value = read(item, (key, i))
        if value is not None:
            out.append(value)
    return out


def _read_route(
    r: Reader,
    value: Any,
    path: Path,
    scenario: str,
    index: int,
    claims: list[tuple[int, tuple[str, ...], str, Position]],
) -> Route | None:
    """One route; its methods and path go into *claims* when they are right on their own."""
    raw = r.mapping(value, path, "a route (a mapping with path, method, steps)")
    if raw is None:
        return None
    before = len(r.problems)
    one_of = "cases" in raw or "proxy" in raw
    r.keys(raw, path, ROUTE_KEYS, required=("path",) if one_of else ("path", "steps"))
    route_path = r.string(raw, "path", path)
    path_ok = route_path is not None and _check_route_path(r, route_path, (*path, "path"))
    methods = _methods(r, raw.get("method", "GET"), (*path, "method"))
    if path_ok and methods is not None and route_path is not None:
        claims.append((index, methods, route_path, r.position(path)))
    known = route_variables(route_path) if path_ok and route_path is not None else None
    scope = Scope(skill=False, variables=known)
    context = StepContext(Context(None, f"{{base_url}}{route_path or ''}"), scope=scope)
    endpoint_raw = {k: raw[k] for k in ("steps", "end", "cases") if k in raw}
    read = None
    if "steps" in raw or "cases" in raw:
        read = read_endpoint(r, endpoint_raw, path, context, None, methods=methods or ("GET",))
        if read is not None:
            named_twice(r, [(path, read[1])])
    proxied = proxy_config.shorthand(r, raw, path, ("steps",))  # proxy: URL: forwards to it
    if isinstance(proxied, Sequence) and "steps" not in raw:
        read = (proxied, read[1] if read is not None else ())
    rate_limit = rate_limits.read_rate_limit(r, raw, path)
    if read is None or route_path is None or methods is None or len(r.problems) > before:
        return None
    sequence, cases = read
    where = r.position(path)
    return Route(route_path, methods, sequence, scenario, index, where, cases, rate_limit)


def _check_route_path(r: Reader, route_path: str, path: Path) -> bool:
    """Whether *route_path* is a route's path; a problem when it is not."""
    expected = "a path starting with / (Werkzeug rule syntax, e.g. /orders/<int:id>)"
    if not route_path.startswith("/"):
        r.bad(path, expected, describe(route_path))
        return False
    for prefix in RESERVED_PREFIXES:
        if route_path == prefix or route_path.startswith(prefix + "/"):
            r.bad(
                path,
                f"a path outside {prefix}",
                describe(route_path),
                f"{prefix} belongs to mockskill; script skills under skills:",
            )
            return False
    try:
        parse_rule(route_path)
    except RuleError as exc:
        r.bad(path, expected, describe(route_path), str(exc))
        return False
    return True


def _methods(r: Reader, value: Any, path: Path) -> tuple[str, ...] | None:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and v.upper() in HTTP_METHODS for v in values):
        r.bad(
            path,
            "an HTTP method or a list of them (" + ", ".join(HTTP_METHODS) + ")",
            describe(value),
        )
        return None
    return tuple(dict.fromkeys(v.upper() for v in values))
