"""The answers mockskill gives a request of its own, before (or instead of) its scenario.

The mock OAuth2 endpoints (the token endpoint, the authorization endpoint
that default ``AUTH_REQUIRED`` details point to), the 400 for a session name
too long to keep, a Host longer than any host's, or a ``Mockskill-Case`` that names no
case, and the 503 for a shared
store that could not answer: each answered and journalled here, for :class:`~.engine.Engine` (its
``decide`` comes here first). The OAuth2 endpoints read the form with
Werkzeug, imported when the first such request comes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..protocol import catalog
from ..scenario.model import Credentials, Reply
from . import auth
from . import request_facts as facts
from .addresses import MAX_HOST
from .incoming import Incoming
from .journalling import Journalling
from .pending import Later, Pending
from .plan import Answer
from .state import DEFAULT_SESSION, MAX_SESSION_NAME
from .store import StoreUnavailable

if TYPE_CHECKING:
    from werkzeug.wrappers import Response

    from .matching import RoutingTable, Target

SESSION_HEADER = "Mockskill-Session"
CASE_HEADER = "Mockskill-Case"
"""Names the case of the endpoint's skill (or route) a request plays (docs/generate.md)."""
STATE_UNAVAILABLE = "MOCKSKILL_STATE_UNAVAILABLE"
"""The code of the 503 answered when the shared store could not answer a need."""


def unavailable(journal: Journalling, request: Incoming, exc: StoreUnavailable) -> Reply:
    """503 ``MOCKSKILL_STATE_UNAVAILABLE``: the store could not answer, nothing was played.

    Journalled like a refusal (a shared store that cannot be reached may
    lose the entry too: it counts those, :meth:`Store.health`)."""
    started = request.arrived or time.time()
    session = (request.header(SESSION_HEADER) or DEFAULT_SESSION)[:MAX_SESSION_NAME]
    message = (
        "the shared state store could not be reached, so this request was not played"
        f" (no sequence moved for it): {exc}; retry once the store is back"
        " (GET /__admin/health says how it is)"
    )
    reply = Reply.error(catalog.tool_error(503, STATE_UNAVAILABLE, message, {}))
    code = reply.error_code
    journal.own(request, session, started, reply.status, "refused", error_code=code)
    return reply


def session_too_long(
    journal: Journalling, request: Incoming, session: str, started: float
) -> Reply:
    """400 for a session name over :data:`MAX_SESSION_NAME`: the session table keys on it."""
    message = (
        f"the {SESSION_HEADER} header is {len(session)} characters long; a session name"
        f" has at most {MAX_SESSION_NAME}: send a shorter one"
    )
    details = {"header": SESSION_HEADER, "length": len(session), "limit": MAX_SESSION_NAME}
    reply = Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))
    # Kept cut to the limit, so the journal shows what was refused.
    code = reply.error_code
    journal.own(request, session, started, reply.status, "refused", error_code=code)
    return reply  # answered as it is (journalled here)


def unknown_case(
    journal: Journalling,
    request: Incoming,
    session: str,
    started: float,
    name: str,
    table: RoutingTable,
    target: Target,
) -> Reply:
    """400 ``MOCKSKILL_BAD_REQUEST`` (as for an unknown ``Mockskill-Error``) for a
    ``Mockskill-Case`` naming no case of the skill or route: never its default answer,
    which would pass a test that asked for a failure it did not get. The details name
    the valid cases."""
    valid = table.case_names(target)
    owner = f"skill {target.skill_id!r}" if target.skill_id is not None else "this route"
    shown = name[:MAX_SESSION_NAME]
    if valid:
        import difflib  # on the first miss: a start-up imports no suggestion machinery

        close = difflib.get_close_matches(shown, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        message = (
            f"{owner} has no case named {shown!r}{hint}; the {CASE_HEADER} header names one"
            f" of: {', '.join(valid)}"
        )
    else:
        message = (
            f"{owner} has no named cases, so the {CASE_HEADER} header cannot choose one:"
            " leave it out, or name cases with name: in the scenario (docs/generate.md)"
        )
    details = {"header": CASE_HEADER, "case": shown, "valid_cases": valid}
    reply = Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))
    code = reply.error_code
    journal.own(
        request, session, started, reply.status, "refused", error_code=code, skill=target.skill_id
    )
    return reply  # answered as it is (journalled here)


def host_too_long(journal: Journalling, request: Incoming, host: str, started: float) -> Reply:
    """400 for a Host over :data:`~.addresses.MAX_HOST`: no host is that long, and the
    answers echo the Host in their URLs (the listing, in every one of them)."""
    message = (
        f"the Host header is {len(host)} characters long; a host and its port have at"
        f" most {MAX_HOST}: send the host this server is reached by"
    )
    details = {"header": "Host", "length": len(host), "limit": MAX_HOST}
    reply = Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))
    session = (request.header(SESSION_HEADER) or DEFAULT_SESSION)[:MAX_SESSION_NAME]
    code = reply.error_code
    journal.own(request, session, started, reply.status, "refused", error_code=code)
    return reply  # answered as it is (journalled here)


def token(
    journal: Journalling,
    request: Incoming,
    session: str,
    started: float,
    credentials: Credentials,
) -> Later[Response]:
    """The mock OAuth2 token endpoint; recorded like any request (never its secrets)."""
    form_request = request.werkzeug()  # the form's parsing is Werkzeug's

    def recorded(response: Response) -> Response:
        status, credential = response.status_code, facts.client(form_request)
        journal.own(request, session, started, status, "token", credential=credential)
        return response

    response = auth.token_endpoint(form_request, credentials)
    return response.then(recorded) if isinstance(response, Pending) else recorded(response)


def authorize(journal: Journalling, request: Incoming, session: str, started: float) -> Response:
    """The mock OAuth2 authorization endpoint; recorded like any request."""
    base = facts.base_url(request)
    response = auth.authorization_endpoint(request.werkzeug(), base)
    journal.own(request, session, started, response.status_code, "authorize")
    return response


DEFAULT_MAX_BODY = 1024 * 1024
"""Request bodies longer than this (bytes) are refused with 413 unless told otherwise."""


def error_answer(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> Answer:
    """mockskill's own error, in the unified body (as a Werkzeug response would carry it)."""
    rendered = catalog.tool_error(status, code, message, details or {})
    return Answer(status, (("Content-Type", "application/json"),), rendered.body.encode())


def too_large(limit: int) -> Answer:
    """413 ``MOCKSKILL_BODY_TOO_LARGE``: the body is over *limit* bytes."""
    message = (
        f"the request body is over this server's limit of {limit} bytes"
        " (mockskill serve --max-body BYTES, or Server(max_body_bytes=...), raises it)"
    )
    return error_answer(413, "MOCKSKILL_BODY_TOO_LARGE", message, {"max_body_bytes": limit})
