"""One request through the scenarios: match → next step → act → record.

The engine takes a Werkzeug request and returns a Werkzeug response; it
uses no Flask globals, so it can be driven without a server. It reads the
scenario set through one reference, swapped whole on reload, so a request
finishes on the configuration it started with.
"""

from __future__ import annotations

import re
import time
from typing import Any

from werkzeug.wrappers import Request, Response

from . import catalog, descriptor
from .matching import Miss, RoutingTable, Target
from .model import Reply, ScenarioSet
from .problems import did_you_mean
from .state import DEFAULT_SESSION, Entry, State

SESSION_HEADER = "Mockskill-Session"
ERROR_HEADER = "Mockskill-Error"
_MARKER = catalog.BASE_URL.encode()
_SAFE_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d+)?$|^\[[0-9A-Fa-f:.]+\](:\d+)?$")


class Engine:
    """Answers skill-surface and free-route requests from a scenario set."""

    def __init__(self, scenarios: ScenarioSet, state: State) -> None:
        self.state = state
        self.scenarios = scenarios
        self.table = RoutingTable(scenarios)

    def load(self, scenarios: ScenarioSet) -> None:
        """Serve *scenarios* from the next request on (requests in flight keep theirs)."""
        table = RoutingTable(scenarios)
        self.scenarios, self.table = scenarios, table

    def handle(self, request: Request) -> Response:
        started = time.time()
        table = self.table
        method, path = request.method, request.path
        session = request.headers.get(SESSION_HEADER) or DEFAULT_SESSION
        target = table.match(method, path)
        step_index = position = None
        forced = False
        if isinstance(target, Miss):
            reply = _miss_reply(target)
        elif ERROR_HEADER in request.headers:
            forced = True
            reply = _forced_reply(target, request.headers[ERROR_HEADER])
        elif target.sequence is None:
            reply = table.listing
        else:
            position = self.state.advance(session, target.key)
            step_index = target.sequence.step_at(position)
            if step_index is None:
                reply = _exhausted_reply(target, session, position)
            else:
                step = target.sequence.steps[step_index]
                if step.delay_ms:
                    time.sleep(step.delay_ms / 1000)
                reply = step.reply
        response = _respond(reply, _base_url(request))
        self.state.record(
            Entry(
                id=self.state.next_id(),
                started=started,
                finished=time.time(),
                session=session,
                method=method,
                path=path,
                status=reply.status,
                endpoint="unmatched" if isinstance(target, Miss) else target.kind,
                skill=_skill_id(target),
                scenario=None if isinstance(target, Miss) else target.scenario,
                step=step_index,
                position=position,
                error_code=reply.error_code,
                retry=reply.retry,
                forced=forced,
                near_misses=target.near_misses if isinstance(target, Miss) else (),
            )
        )
        return response


def _skill_id(target: Target | Miss) -> str | None:
    if isinstance(target, Miss):
        return target.skill_id
    return target.skill.id if target.skill else None


def _base_url(request: Request) -> str:
    """This server as the client reached it; the socket's address if Host looks forged."""
    host = request.host
    if not _SAFE_HOST.match(host):
        server = request.environ.get("SERVER_NAME", "localhost")
        host = f"{server}:{request.environ.get('SERVER_PORT', '80')}"
    return f"{request.scheme}://{host}"


def _respond(reply: Reply, base_url: str) -> Response:
    body, headers = reply.body, reply.headers
    if reply.templated:
        body = body.replace(_MARKER, base_url.encode())
        headers = tuple((k, v.replace(catalog.BASE_URL, base_url)) for k, v in headers)
    return Response(body, status=reply.status, headers=headers, content_type=reply.content_type)


def _miss_reply(miss: Miss) -> Reply:
    if miss.skill_id is not None:
        details: dict[str, Any] = {"skill_id": miss.skill_id, "url": catalog.BASE_URL + miss.path}
        if miss.suggestions:
            details["did_you_mean"] = list(miss.suggestions)
        message = f"Skill {miss.skill_id!r} not found"
    else:
        details = {
            "skill_id": None,
            "url": catalog.BASE_URL + miss.path,
            "method": miss.method,
            "near_misses": list(miss.near_misses),
        }
        message = f"No skill or route matches {miss.method} {miss.path}"
    return Reply.error(catalog.render("SKILL_NOT_FOUND", message=message, details=details))


def _forced_reply(target: Target, code: str) -> Reply:
    """The answer ``Mockskill-Error: CODE`` asks for, with the category's defaults."""
    code = code.strip().upper()
    category = catalog.CATEGORIES.get(code)
    if category is None:
        hint = did_you_mean(code, catalog.CODES)
        return _bad_header(
            f"{ERROR_HEADER}: {code!r} names no error category" + (f"; {hint}" if hint else ""),
            code,
        )
    if category.sent_by_provider:
        return Reply.error(catalog.render(code, target.context))
    if target.skill is not None and target.kind == "describe":
        # The consumer's validator raises VALIDATION_ERROR; the provider's part
        # is to serve the descriptor that makes it do so (the chapter's example).
        invalid = descriptor.chapter_invalid(target.skill.id)
        return Reply.json(200, invalid)
    return _bad_header(
        f"{code} is raised by the consumer's validator, so it can only be forced"
        " on a descriptor request (GET /skills/{id})",
        code,
    )


def _bad_header(message: str, value: str) -> Reply:
    details = {"header": ERROR_HEADER, "value": value, "expected": list(catalog.CODES)}
    return Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))


def _exhausted_reply(target: Target, session: str, position: int) -> Reply:
    assert target.sequence is not None
    length = target.sequence.length
    message = (
        f"{target.label} has played all {length} of its requests and ends with 'fail'"
        f" (request {position + 1} in session {session!r})"
    )
    details = {
        "scenario": target.scenario,
        "sequence": target.key,
        "session": session,
        "requests": position + 1,
        "length": length,
        "fix": "reset the session (POST /__admin/reset), or end the sequence with last or cycle",
    }
    rendered = catalog.tool_error(500, "MOCKSKILL_SEQUENCE_EXHAUSTED", message, details)
    return Reply.error(rendered)
