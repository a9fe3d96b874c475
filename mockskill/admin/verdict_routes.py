"""``GET /__admin/verdict``: one session's pass or fail, as a status any test can assert.

200 (``application/json``) when the session is clean and covered as asked
(``require=``, the names ``mockskill report --require`` takes); 409 with an
RFC 9457 problem (``application/problem+json``) listing the findings and the
names not covered when it is not; 404, a problem with a did-you-mean, for a
session the journal has no request of (a mistyped name must never pass);
400, a problem naming the valid choices, for a query it cannot use. What
"clean" means is the audit's (:func:`mockskill.audit.session_verdict`, the
report's rules); this module reads the query and shapes the answer.
docs/admin.md documents it; the blueprint imports it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Response, current_app, request

from .. import audit
from .journal_query import BadFilter
from .report_routes import POLICY_PARAMETERS, check_names, policy

if TYPE_CHECKING:
    from ..engine.engine import Engine

PROBLEMS = "https://mockskill.dev/problems/"
"""Where the problem types' URIs start (docs/admin.md, "GET /__admin/verdict", names each)."""
NOT_CLEAN = PROBLEMS + "not-clean"
UNKNOWN_SESSION = PROBLEMS + "unknown-session"
BAD_QUERY = PROBLEMS + "bad-query"

PARAMETERS = ("session", "require", *POLICY_PARAMETERS)
PROBLEM_TYPE = "application/problem+json"


def answer(engine: Engine) -> Response:
    """``GET /__admin/verdict`` for the request being served."""
    try:
        session, required, tolerances = _query(request.args)
    except BadFilter as exc:
        extra = {"parameter": exc.parameter, "expected": exc.expected}
        return _problem(400, BAD_QUERY, "The verdict's query cannot be used", exc.message, extra)
    entries = engine.state.journal(session)
    if not entries:
        detail, close = audit.unknown_session(session, engine.state.journal())
        extra = {"session": session, "did_you_mean": close}
        return _problem(404, UNKNOWN_SESSION, "No such session in the journal", detail, extra)
    named = audit.named_cases(engine.scenarios.skills)
    verdict = audit.session_verdict(session, entries, required, tolerances, named=named)
    if verdict["clean"]:
        return _json(200, verdict, "application/json")
    detail = verdict.pop("detail")  # (a problem's own member, first)
    return _problem(409, NOT_CLEAN, "The session is not clean", detail, verdict)


def _query(args: Any) -> tuple[str, list[str], audit.Policy]:
    check_names(args, PARAMETERS, "the verdict")
    sessions = args.getlist("session")
    if len(sessions) != 1 or not sessions[0].strip():
        found = "none" if not sessions else repr(sessions[0]) if len(sessions) == 1 else "several"
        raise BadFilter(
            "session",
            f"give one session=NAME (found {found}): the session whose verdict to give, as its"
            " requests' Mockskill-Session header names it ('default' without the header)",
            "one non-empty session name",
        )
    try:
        required = audit.required_names(args.getlist("require"))
    except ValueError as exc:
        raise BadFilter("require", f"require: {exc}", list(audit.GATE_NAMES)) from None
    return sessions[0], required, policy(args)


def _problem(status: int, kind: str, title: str, detail: str, extra: dict[str, Any]) -> Response:
    # RFC 9457's members first, then the verdict's own (its extension members).
    body = {
        "type": kind,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.full_path.rstrip("?"),
        **extra,
    }
    return _json(status, body, PROBLEM_TYPE)


def _json(status: int, body: dict[str, Any], mimetype: str) -> Response:
    return Response(current_app.json.dumps(body), status=status, mimetype=mimetype)
