"""The answers the engine gives of its own, not scripted by a scenario.

A request that matches no skill or route, an error forced with
``Mockskill-Error``, a consumer whose ``Skill-Protocol-Version`` the skill
does not serve, a bad header, a sequence that has played out with ``fail``:
each is a :class:`~mockskill.scenario.model.Reply` in the unified body,
with ``{base_url}`` placeholders the engine fills per request.
"""

from __future__ import annotations

from typing import Any

from ..protocol import catalog, descriptor
from ..protocol.versions import parse_version
from ..scenario.model import Reply
from ..scenario.problems import did_you_mean
from .matching import Miss, Target

ERROR_HEADER = "Mockskill-Error"
VERSION_HEADER = "Skill-Protocol-Version"


def miss_reply(miss: Miss) -> Reply:
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
        message = (
            f"No case of {miss.endpoint} matches the request"
            if miss.endpoint is not None
            else f"No skill or route matches {miss.method} {miss.path}"
        )
    return Reply.error(catalog.render("SKILL_NOT_FOUND", message=message, details=details))


def forced_reply(target: Target, code: str) -> Reply:
    """The answer ``Mockskill-Error: CODE`` asks for, with the category's defaults."""
    code = code.strip().upper()
    category = catalog.CATEGORIES.get(code)
    if category is None:
        hint = did_you_mean(code, catalog.CODES)
        return bad_header(
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
    return bad_header(
        f"{code} is raised by the consumer's validator, so it can only be forced"
        " on a descriptor request (GET /skills/{id})",
        code,
    )


def version_reply(target: Target, header: str | None) -> Reply | None:
    """``VERSION_INCOMPATIBLE`` when the consumer's stated version is not served; else None.

    Only invocations are refused, and only when the consumer states its
    version: a request without the header is served as compatible.
    """
    skill = target.skill
    if header is None or skill is None or target.kind != "invoke":
        return None
    consumer = parse_version(header)
    if consumer is None:
        message = f"{VERSION_HEADER}: {header!r} is not a semantic version (MAJOR.MINOR.PATCH)"
        details = {"header": VERSION_HEADER, "value": header, "expected": "MAJOR.MINOR.PATCH"}
        return Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))
    accepted = skill.accepted
    if accepted is None or consumer in accepted:
        return None
    descriptor_version = skill.protocol_version or "unknown"
    details = {
        "descriptor_version": descriptor_version,
        "consumer_supported_range": f"{consumer[0]}.x.x",
        "upgrade_url": skill.upgrade_url,
        "accepted_consumer_versions": accepted.text,
    }
    return Reply.error(
        # The catalog's message, as the chapter words it: "... with consumer version 1.x".
        catalog.render("VERSION_INCOMPATIBLE", target.context, details=details)
    )


def bad_header(message: str, value: str) -> Reply:
    details = {"header": ERROR_HEADER, "value": value, "expected": list(catalog.CODES)}
    return Reply.error(catalog.tool_error(400, "MOCKSKILL_BAD_REQUEST", message, details))


def exhausted_reply(target: Target, session: str, position: int) -> Reply:
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
