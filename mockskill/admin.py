"""The ``/__admin`` blueprint: mockskill's own control surface.

For now: health, reset (all state, or one session's), the request journal
(``/journal``) and the requests nothing matched (``/unmatched``), the
reference descriptor validator and the corpus of invalid descriptors
(``/corpus``). Its answers are JSON; its errors use the unified shape
(docs/admin.md).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, Response, current_app, request, url_for

from . import __version__
from .catalog import render, unified_body
from .engine import Engine
from .state import Entry
from .validator import validate as validate_descriptor
from .validator import validation_error
from .watch import HEALTH_KEY, ReloadResult


def blueprint(engine: Engine) -> Blueprint:
    bp = Blueprint("admin", __name__)

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
        reload = current_app.extensions.get(HEALTH_KEY)
        if isinstance(reload, ReloadResult):
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
    "endpoint": _equal("endpoint"),
    "status": _status,
    "error_code": _equal("error_code"),
    "since": _since,
    "until": _until,
}
UNMATCHED_FILTERS = {k: JOURNAL_FILTERS[k] for k in ("session", "since", "until")}


def select(
    entries: list[Entry], args: Mapping[str, str], filters: Mapping[str, Callable[[str, str], Test]]
) -> list[Entry]:
    """*entries* that pass every filter in *args*; ``limit=N``: the newest N of them."""
    tests: list[Test] = []
    limit = None
    for name in args:
        text = args[name]
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
