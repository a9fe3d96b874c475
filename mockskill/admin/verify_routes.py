"""``/__admin/verify`` and ``/__admin/requests``: what the consumer sent, checked and listed.

``POST /__admin/verify`` takes a verification as a JSON body (read by
:func:`mockskill.scenario.verification.read_verification`: its conditions by
the reader of a case's ``when:``) and counts the journal's entries against it
(:func:`mockskill.engine.verifying.verify`): 200 when the count is the one
wanted, 409 ``MOCKSKILL_VERIFICATION_FAILED`` when it is not, with the
matching entries and the closest others; a verification that cannot be read
is a 422 ``MOCKSKILL_INVALID_VERIFICATION`` with each problem positioned in
the body, as a bad ``when:`` is when a scenario is loaded. ``GET
/__admin/requests`` lists the journal's entries with the journal's filters
(:mod:`.journal_query`). docs/admin.md documents both.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from ..engine.engine import Engine
from ..engine.verifying import verify
from ..protocol.catalog import unified_body
from ..scenario.problems import Problem
from ..scenario.verification import BadVerification, read_verification
from .journal_query import REQUESTS_FILTERS, BadFilter, select
from .scenario_routes import JSON_TYPES, UnusableRequest

BODY_LABEL = "<verify request>"
"""What a problem of a verification's body names as its file."""
NOT_HELD = 409
"""The status of a verification that did not hold (the journal disagrees with it)."""


def register(bp: Blueprint, engine: Engine) -> None:
    """Add ``/verify`` and ``/requests`` to *bp*."""

    @bp.post("/verify")
    def verify_requests() -> tuple[dict[str, Any], int]:
        """Count the journal's requests a verification names (docs/admin.md)."""
        if request.args:
            name = next(iter(request.args))
            message = f"{name!r} is not a parameter of POST /__admin/verify; it reads a JSON body"
            raise BadFilter(name, message, "no parameters")
        verification = read_verification(_body_text(), BODY_LABEL)
        entries = engine.state.journal(verification.session)
        verified = verify(verification, entries)
        if verified.held:
            return verified.as_json(), 200
        body = unified_body("MOCKSKILL_VERIFICATION_FAILED", verified.message, verified.as_json())
        return body, NOT_HELD

    @bp.get("/requests")
    def requests() -> tuple[dict[str, Any], int]:
        """The journal's requests, oldest first, with the journal's filters."""
        entries = engine.state.journal()
        selected = select(entries, request.args, REQUESTS_FILTERS)
        return {
            "requests": [e.as_json() for e in selected],
            "size": len(entries),
            "capacity": engine.state.capacity,
        }, 200

    @bp.errorhandler(BadVerification)
    def invalid(exc: BadVerification) -> tuple[dict[str, Any], int]:
        # The shape of a bad scenario's refusal (scenario_routes): each problem in details.
        details = {"problems": [p.as_json() for p in exc.problems]}
        return unified_body("MOCKSKILL_INVALID_VERIFICATION", str(exc), details), 422


def _body_text() -> str:
    """The body as text; a body of another type than JSON is an UnusableRequest (415), one
    that is not UTF-8 a positioned problem (one not JSON is :func:`read_verification`'s)."""
    mimetype = request.mimetype
    if mimetype and mimetype not in JSON_TYPES:
        raise UnusableRequest(
            415,
            "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE",
            f"POST /__admin/verify reads a JSON object, not {mimetype}: send Content-Type:"
            " application/json (curl: -H 'Content-Type: application/json' -d '{...}')",
            {"content_type": request.content_type, "expected": list(JSON_TYPES)},
        )
    raw = request.get_data()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        found = f"byte {exc.start} that is not UTF-8"
        raise BadVerification([Problem(BODY_LABEL, 1, 1, "(body)", "UTF-8 text", found)]) from None
    return text
