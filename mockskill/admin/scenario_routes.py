"""``/__admin/scenarios``: the loaded scenarios over HTTP.

List, load (a YAML or JSON body, checked whole and refused with the same
problem list as ``mockskill validate``), replace, activate, deactivate and
remove, each through the :class:`~mockskill.control.registry.Registry`, which owns
the scenarios and applies every change at once (docs/admin.md).
"""

from __future__ import annotations

import difflib
import itertools
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, request, url_for
from werkzeug.datastructures import MultiDict

from ..control.registry import Conflict, LoadedScenario, Registry, UnknownScenario
from ..engine.store import StoreUnavailable
from ..protocol.catalog import unified_body
from ..scenario.loader import NAME_TEXT, SCENARIO_NAME, load_text
from ..scenario.model import ScenarioSet
from ..scenario.problems import Problem, ScenarioError, describe
from ..scenario.source import json_problem, read_text
from .journal_query import BadFilter

MAX_LABEL = 200
"""The longest ``?file=`` label (characters)."""
LABEL_TEXT = (
    f"a file name of at most {MAX_LABEL} characters, without control characters,"
    " line breaks or ':' before a digit (a problem's position is FILE:LINE:COLUMN)"
)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
JSON_TYPES = ("application/json",)
BODY_TYPES = (*YAML_TYPES, *JSON_TYPES)


class UnusableRequest(Exception):
    """A request the admin API cannot use: answered with *status* and the unified body."""

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def body(self) -> dict[str, Any]:
        return unified_body(self.code, self.message, self.details)


def register(bp: Blueprint, registry: Registry) -> None:
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
                    # where it is written in its scenario's text (origin: the file), for
                    # reports that point at it (SARIF's region); null: not from a text
                    "line": skill.where.line or None,
                    "column": skill.where.column or None,
                }
                for skill in scenario.skills
            ],
            "routes": [{"methods": list(r.methods), "path": r.path} for r in scenario.routes],
            "url": url_for("admin.scenario", name=entry.name, _external=True),
        }

    def body_text(file: str) -> str:
        """The request body as text, or ScenarioError as a file would give it.

        A type the API cannot read is an :class:`UnusableRequest`."""
        mimetype = request.mimetype
        if mimetype and mimetype not in BODY_TYPES:
            raise UnusableRequest(
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
            problem = json_problem(text, file)
            if problem is not None:
                raise ScenarioError([problem])
        return text

    def label(options: Mapping[str, str | bool]) -> str:
        """The ``?file=`` label problems will name (BadFilter: one that could forge them)."""
        given = str(options.get("file") or "")
        if not given:
            return f"<request body {next(bodies)}>"
        if (
            len(given) > MAX_LABEL
            or _FORGES_POSITION.search(given)
            or any(unicodedata.category(c) in _UNPRINTABLE for c in given)
        ):
            shown = given if len(given) <= MAX_LABEL else given[:MAX_LABEL] + "..."
            message = f"file={shown!r} is not a label problems can name: expected {LABEL_TEXT}"
            raise BadFilter("file", message, LABEL_TEXT)
        return given

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
        file = label(options)
        active, replace = bool(options.get("active", True)), bool(options.get("replace"))
        try:
            loaded = load_text(body_text(file), file, max_delay_ms=registry.max_delay_ms)
        except ScenarioError as exc:  # with the clashes it would have too: all at once
            raise registry.refused(exc, active=active, replace=replace) from None
        entries = registry.add(loaded, active=active, replace=replace)
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
            raise UnusableRequest(400, "MOCKSKILL_BAD_REQUEST", message, details)
        file = label(options)
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
            scenario = scenario.renamed(name)
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

    @bp.errorhandler(UnusableRequest)
    def refused(exc: UnusableRequest) -> tuple[dict[str, Any], int]:
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

    @bp.errorhandler(StoreUnavailable)
    def unavailable(exc: StoreUnavailable) -> tuple[dict[str, Any], int]:
        # The shared scenario set (docs/admin.md) could not be reached; the message says
        # what that left undone.
        return unified_body("MOCKSKILL_STATE_UNAVAILABLE", str(exc)), 503

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


_FORGES_POSITION = re.compile(r":\d")
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Unicode categories a label must not hold: controls and line breaks (a forged
line in a report), format characters (text that reads other than it is)."""
