"""The ``/__admin`` blueprint: mockskill's own control surface.

Health, reset (all state, or one session's), the request journal
(``/journal``) and the requests nothing matched (``/unmatched``), the
reference descriptor validator, the corpus of invalid descriptors
(``/corpus``), the loaded scenarios (``/scenarios``: list, load, activate,
deactivate, remove, through :class:`~mockskill.registry.Registry`) and the
OpenAPI document describing all of it (``/openapi.json``, kept true by
tests/test_openapi.py). Its answers are JSON; its errors use the unified
shape (docs/admin.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import json
import math
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from flask import Blueprint, Response, request, url_for
from werkzeug.datastructures import MultiDict

from . import __version__, dashboard, report
from .catalog import render, unified_body
from .loader import NAME_TEXT, SCENARIO_NAME, load_text
from .model import Scenario, ScenarioSet
from .problems import Problem, ScenarioError, describe
from .registry import Conflict, LoadedScenario, Registry, UnknownScenario
from .source import read_text
from .state import Entry
from .validator import validate as validate_descriptor
from .validator import validation_error


def blueprint(registry: Registry) -> Blueprint:
    bp = Blueprint("admin", __name__)
    engine = registry.engine

    @bp.get("/health")
    def health() -> dict[str, Any]:
        """What is served; with ``reload`` (docs/reload.md) once the server watches or reloads.

        ``status`` is about serving, so it stays ``ok`` when a reload failed:
        the last good scenarios are still served. ``reload.status`` says
        ``failed`` and ``reload.problems`` lists what is wrong.
        """
        scenarios = engine.scenarios
        body: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "seed": engine.state.seed,
            "scenarios": [s.name for s in scenarios.scenarios],
            "skills": len(scenarios.skills),
        }
        reload = registry.last_reload
        if reload is not None:
            body["reload"] = reload.as_json()
        return body

    @bp.post("/reset")
    def reset() -> dict[str, Any]:
        """Forget sequence positions, journal and random draws; ``?session=NAME``: one session's."""
        session = request.args.get("session")
        engine.state.reset(session)
        return {"reset": "session" if session else "all", "session": session}

    @bp.get("/journal")
    def journal() -> tuple[dict[str, Any], int]:
        """Recorded requests, oldest first, filtered by the query (docs/admin.md)."""
        entries = engine.state.journal()
        size = len(entries)
        try:
            selected = select(entries, request.args, JOURNAL_FILTERS)
        except BadFilter as exc:
            return exc.body(), 400
        return {
            "entries": [e.as_json() for e in selected],
            "size": size,
            "capacity": engine.state.capacity,
        }, 200

    @bp.get("/unmatched")
    def unmatched() -> tuple[dict[str, Any], int]:
        """The requests nothing served, oldest first, each with its near misses."""
        entries = [e for e in engine.state.journal() if e.endpoint == "unmatched"]
        try:
            selected = select(entries, request.args, UNMATCHED_FILTERS)
        except BadFilter as exc:
            return exc.body(), 400
        return {"requests": [e.as_json() for e in selected]}, 200

    @bp.post("/validate")
    def validate() -> tuple[dict[str, Any], int]:
        """The reference validator over HTTP: a descriptor in, every violation out."""
        document = request.get_json(silent=True)
        if document is None and request.get_data().strip() != b"null":
            body = unified_body(
                "MOCKSKILL_BAD_REQUEST",
                "POST /__admin/validate takes a Skill Descriptor as a JSON body",
                {"content_type": request.content_type},
            )
            return body, 400
        violations = validate_descriptor(document)
        if violations:
            return validation_error(violations), 422
        return {"valid": True}, 200

    # -- the corpus of invalid descriptors (mockskill/corpus.py, docs/corpus.md) ----------

    def corpus_urls(name: str) -> tuple[str, str]:
        return (
            url_for("admin.corpus_descriptor", name=name, _external=True),
            url_for("admin.corpus_violations", name=name, _external=True),
        )

    def json_response(document: Any, status: int = 200) -> Response:
        # Any JSON value (null, an array, a string ...), exactly as the case holds it.
        return Response(json.dumps(document), status=status, mimetype="application/json")

    def corpus_miss(name: str) -> Response:
        """SKILL_NOT_FOUND: the descriptor URL asked for does not exist."""
        from . import corpus  # built on first use: not every start-up should pay for it

        rendered = render(
            "SKILL_NOT_FOUND",
            message=f"No corpus case {name!r}",
            details={
                "url": request.url,
                "did_you_mean": difflib.get_close_matches(name, corpus.NAMES, n=3, cutoff=0.6),
            },
        )
        return Response(
            rendered.body,
            status=rendered.status,
            headers=list(rendered.headers),
            mimetype="application/json",
        )

    @bp.get("/corpus")
    def corpus_listing() -> dict[str, Any]:
        """Every case of the corpus, with the absolute URLs of its descriptor and violations."""
        from . import corpus

        cases = []
        for case in corpus.CASES:
            descriptor_url, violations_url = corpus_urls(case.name)
            cases.append(
                {
                    "name": case.name,
                    "description": case.description,
                    "descriptor_url": descriptor_url,
                    "violations_url": violations_url,
                    "valid": case.valid,
                }
            )
        return {"cases": cases}

    @bp.get("/corpus/<name>")
    def corpus_descriptor(name: str) -> Response:
        """The case's descriptor, exactly (any JSON value)."""
        from . import corpus

        case = corpus.get(name)
        return corpus_miss(name) if case is None else json_response(case.descriptor)

    @bp.get("/corpus/<name>/violations")
    def corpus_violations(name: str) -> Response:
        """``{"violations": [...]}``: what a correct validator reports (empty when valid)."""
        from . import corpus

        case = corpus.get(name)
        if case is None:
            return corpus_miss(name)
        return json_response({"violations": list(case.violations)})

    scenario_routes(bp, registry)  # /__admin/scenarios, below
    openapi_route(bp)
    dashboard.register(bp)  # the page at /__admin/ (mockskill/dashboard.py)
    report.register(bp, engine)  # GET /__admin/report: the retry audit (mockskill/report.py)
    return bp


# -- journal filters -----------------------------------------------------------------------


class BadFilter(Exception):
    """A query parameter the journal does not take, or a value it cannot use."""

    def __init__(self, parameter: str, message: str, expected: Any) -> None:
        super().__init__(message)
        self.parameter, self.message, self.expected = parameter, message, expected

    def body(self) -> dict[str, Any]:
        details = {"parameter": self.parameter, "expected": self.expected}
        return unified_body("MOCKSKILL_BAD_REQUEST", self.message, details)


def _integer(name: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise BadFilter(name, f"{name}={text!r} is not an integer of at least {minimum}", "integer")
    return value


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadFilter(name, f"{name}={text!r} is not a time in seconds since the epoch", "number")
    return value


Test = Callable[[Entry], bool]


def _equal(field: str) -> Callable[[str, str], Test]:
    return lambda name, text: lambda e: getattr(e, field) == text


ENDPOINT_KINDS = ("list", "describe", "invoke", "route", "token", "unmatched", "refused")
"""What an entry's ``endpoint`` may be (:attr:`mockskill.state.Entry.endpoint`)."""


def _endpoint(name: str, text: str) -> Test:
    # Refused rather than matching nothing: a misspelt kind would look like an empty journal.
    if text not in ENDPOINT_KINDS:
        hint = difflib.get_close_matches(text, ENDPOINT_KINDS, n=1)
        message = (
            f"{name}={text!r} is not an endpoint kind; it is one of {', '.join(ENDPOINT_KINDS)}"
        )
        if hint:
            message += f" (did you mean {hint[0]!r}?)"
        raise BadFilter(name, message, list(ENDPOINT_KINDS))
    return lambda e: e.endpoint == text


def _status(name: str, text: str) -> Test:
    wanted = _integer(name, text, 100)
    return lambda e: e.status == wanted


def _since(name: str, text: str) -> Test:
    start = _seconds(name, text)
    return lambda e: e.started >= start


def _until(name: str, text: str) -> Test:
    end = _seconds(name, text)
    return lambda e: e.started <= end


JOURNAL_FILTERS: dict[str, Callable[[str, str], Test]] = {
    "session": _equal("session"),
    "skill": _equal("skill"),
    "endpoint": _endpoint,
    "status": _status,
    "error_code": _equal("error_code"),
    "since": _since,
    "until": _until,
}
UNMATCHED_FILTERS = {k: JOURNAL_FILTERS[k] for k in ("session", "since", "until")}


def select(
    entries: list[Entry],
    args: MultiDict[str, str],
    filters: Mapping[str, Callable[[str, str], Test]],
) -> list[Entry]:
    """*entries* that pass every filter in *args*; ``limit=N``: the newest N of them."""
    tests: list[Test] = []
    limit = None
    for name in args:
        text = args[name]
        if len(args.getlist(name)) > 1:  # not silently the first of them
            message = f"{name!r} is given {len(args.getlist(name))} times; give it once"
            raise BadFilter(name, message, "one value")
        if name == "limit":
            limit = _integer(name, text, 0)
        elif name in filters:
            tests.append(filters[name](name, text))
        else:
            allowed = [*filters, "limit"]
            hint = difflib.get_close_matches(name, allowed, n=1)
            message = f"{name!r} is not a filter of this listing; it takes {', '.join(allowed)}"
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise BadFilter(name, message, allowed)
    selected = [e for e in entries if all(test(e) for test in tests)]
    if limit is not None:
        selected = selected[len(selected) - limit :] if limit else []
    return selected


# -- the loaded scenarios: /__admin/scenarios (mockskill/registry.py, docs/admin.md) -------

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")
JSON_TYPES = ("application/json",)
BODY_TYPES = (*YAML_TYPES, *JSON_TYPES)


class Refused(Exception):
    """A request the admin API cannot use: answered with *status* and the unified body."""

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def body(self) -> dict[str, Any]:
        return unified_body(self.code, self.message, self.details)


def scenario_routes(bp: Blueprint, registry: Registry) -> None:
    """Add ``/scenarios`` to *bp*: list, load, replace, activate, deactivate, remove."""
    bodies = itertools.count(1)  # names the bodies that give none (?file=): <request body N>

    def view(entry: LoadedScenario) -> dict[str, Any]:
        base = request.host_url.rstrip("/")
        scenario = entry.scenario
        return {
            "name": entry.name,
            "description": scenario.description,
            "active": entry.active,
            "origin": entry.origin,
            "loaded": entry.loaded,
            "activated": entry.activated,
            "skills": [
                {
                    "id": skill.id,
                    "name": skill.name,
                    "descriptor_url": f"{base}/skills/{skill.id}",
                    "invoke_url": f"{base}/skills/{skill.id}/invoke",
                }
                for skill in scenario.skills
            ],
            "routes": [{"methods": list(r.methods), "path": r.path} for r in scenario.routes],
            "url": url_for("admin.scenario", name=entry.name, _external=True),
        }

    def body_text(file: str) -> str:
        """The request body as text, or ScenarioError as a file would give (Refused: bad type)."""
        mimetype = request.mimetype
        if mimetype and mimetype not in BODY_TYPES:
            raise Refused(
                415,
                "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE",
                f"{request.method} {request.path} takes scenarios as YAML or JSON, not"
                f" {mimetype}: send Content-Type: application/yaml or application/json"
                " (curl: -H 'Content-Type: application/yaml' --data-binary @FILE)",
                {"content_type": request.content_type, "expected": list(BODY_TYPES)},
            )
        raw = request.get_data()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:  # as the loader says it of a file
            found = f"byte {exc.start} that is not UTF-8"
            raise ScenarioError([Problem(file, 1, 1, "(file)", "UTF-8 text", found)]) from None
        if mimetype in JSON_TYPES:
            # Read by the same YAML loader as files below (JSON is YAML), for the same
            # problems with the same positions; but said to be JSON, it must be JSON.
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                where = (exc.lineno, exc.colno)
                problem = Problem(file, *where, "(JSON syntax)", "valid JSON", exc.msg)
                raise ScenarioError([problem]) from None
            except RecursionError:
                problem = Problem(file, 1, 1, "(JSON nesting)", "valid JSON", "nesting too deep")
                raise ScenarioError([problem]) from None
        return text

    def created(entries: tuple[LoadedScenario, ...], body: Any) -> tuple[Any, int, dict[str, str]]:
        location = url_for("admin.scenario", name=entries[0].name, _external=True)
        return body, 201, {"Location": location}

    @bp.get("/scenarios")
    def scenarios() -> dict[str, Any]:
        """Every loaded scenario, active or not, in order."""
        return {"scenarios": [view(e) for e in registry.scenarios]}

    @bp.post("/scenarios")
    def load_scenarios() -> tuple[Any, int, dict[str, str]]:
        """Load the scenarios of a YAML or JSON body, checked whole (docs/admin.md)."""
        allowed = {"file": "text", "active": "boolean", "replace": "boolean"}
        options = _options(request.args, allowed)
        file = str(options.get("file") or f"<request body {next(bodies)}>")
        loaded = load_text(body_text(file), file, max_delay_ms=registry.max_delay_ms)
        entries = registry.add(
            loaded, active=bool(options.get("active", True)), replace=bool(options.get("replace"))
        )
        return created(entries, {"scenarios": [view(e) for e in entries]})

    @bp.get("/scenarios/<name>")
    def scenario(name: str) -> dict[str, Any]:
        return view(registry.get(name))

    @bp.put("/scenarios/<name>")
    def put_scenario(name: str) -> tuple[Any, int, dict[str, str]]:
        """Load or replace scenario *name* from a body holding that one scenario."""
        options = _options(request.args, {"file": "text", "active": "boolean"})
        if not SCENARIO_NAME.fullmatch(name):
            message = f"{name!r} is not a scenario name: expected {NAME_TEXT}"
            details = {"parameter": "name", "expected": NAME_TEXT}
            raise Refused(400, "MOCKSKILL_BAD_REQUEST", message, details)
        file = str(options.get("file") or f"<request body {next(bodies)}>")
        text = body_text(file)
        loaded = load_text(text, file, max_delay_ms=registry.max_delay_ms)
        if len(loaded.scenarios) != 1:
            expected = "one scenario (PUT loads one; POST /__admin/scenarios loads several)"
            found = f"{len(loaded.scenarios)} scenarios"
            raise ScenarioError([Problem(file, 1, 1, "(file)", expected, found)])
        scenario = loaded.scenarios[0]
        if scenario.name != name:
            document = read_text(text, file)[0][0]
            given = document.data.get("name") if isinstance(document.data, dict) else None
            if given is not None:
                expected = f"the name in the URL, {name!r} (or no name)"
                hint = "PUT names the scenario in its URL: leave name out, or make them agree"
                raise ScenarioError([document.problem(("name",), expected, describe(given), hint)])
            scenario = _named(scenario, name)
        existed = any(e.name == name for e in registry.scenarios)
        entries = registry.add(
            ScenarioSet((scenario,)), active=bool(options.get("active", True)), replace=True
        )
        if existed:
            return view(entries[0]), 200, {}
        return created(entries, view(entries[0]))

    @bp.delete("/scenarios/<name>")
    def remove_scenario(name: str) -> dict[str, Any]:
        """Unload scenario *name*; answers it as it was."""
        return view(registry.remove(name))

    @bp.post("/scenarios/<name>/activate")
    def activate_scenario(name: str) -> dict[str, Any]:
        return view(registry.activate(name))

    @bp.post("/scenarios/<name>/deactivate")
    def deactivate_scenario(name: str) -> dict[str, Any]:
        return view(registry.deactivate(name))

    @bp.errorhandler(Refused)
    def refused(exc: Refused) -> tuple[dict[str, Any], int]:
        return exc.body(), exc.status

    @bp.errorhandler(BadFilter)
    def bad_parameter(exc: BadFilter) -> tuple[dict[str, Any], int]:
        return exc.body(), 400

    @bp.errorhandler(UnknownScenario)
    def unknown(exc: UnknownScenario) -> tuple[dict[str, Any], int]:
        details = {"name": exc.name, "did_you_mean": exc.suggestions, "loaded": exc.loaded}
        return unified_body("MOCKSKILL_SCENARIO_NOT_FOUND", exc.message, details), 404

    @bp.errorhandler(Conflict)
    def conflict(exc: Conflict) -> tuple[dict[str, Any], int]:
        message = "; ".join(exc.reasons) + "; nothing was changed"
        details = {"problems": [p.as_json() for p in exc.problems]}
        return unified_body("MOCKSKILL_SCENARIO_CONFLICT", message, details), 409

    @bp.errorhandler(ScenarioError)
    def invalid(exc: ScenarioError) -> tuple[dict[str, Any], int]:
        # The message is the report `mockskill validate` prints; each problem is in details.
        details = {"problems": [p.as_json() for p in exc.problems]}
        return unified_body("MOCKSKILL_INVALID_SCENARIO", str(exc), details), 422


def _options(args: MultiDict[str, str], allowed: Mapping[str, str]) -> dict[str, str | bool]:
    """The query parameters *allowed* takes (name → ``text`` or ``boolean``); BadFilter else."""
    options: dict[str, str | bool] = {}
    for name in args:
        text = args[name]
        kind = allowed.get(name)
        if len(args.getlist(name)) > 1:
            message = f"{name!r} is given {len(args.getlist(name))} times; give it once"
            raise BadFilter(name, message, "one value")
        if kind is None:
            hint = difflib.get_close_matches(name, list(allowed), n=1)
            message = (
                f"{name!r} is not a parameter of {request.method} {request.path};"
                f" it takes {', '.join(allowed)}"
            )
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise BadFilter(name, message, list(allowed))
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise BadFilter(name, f"{name}={text!r} is neither true nor false", "boolean")
            options[name] = text.lower() == "true"
        else:
            options[name] = text
    return options


def _named(scenario: Scenario, name: str) -> Scenario:
    """*scenario* under another name (its skills and routes say whose they are too)."""
    return dataclasses.replace(
        scenario,
        name=name,
        skills=tuple(dataclasses.replace(s, scenario=name) for s in scenario.skills),
        routes=tuple(dataclasses.replace(r, scenario=name) for r in scenario.routes),
    )


# -- the OpenAPI document (mockskill/openapi.json) --------------------------------------------


@functools.cache
def _openapi() -> bytes:
    return resources.files("mockskill").joinpath("openapi.json").read_bytes()


def openapi_route(bp: Blueprint) -> None:
    """Add ``/openapi.json`` to *bp*: the document describing every ``/__admin`` operation."""

    @bp.get("/openapi.json")
    def openapi() -> Response:
        return Response(_openapi(), mimetype="application/json")
