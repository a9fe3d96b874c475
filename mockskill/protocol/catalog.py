"""The protocol's error chapter: seven categories and one unified error body.

This module is the only place that knows the chapter's rules — each
category's code, the HTTP statuses it may use, whether a consumer may retry
it, its default message, details and retry advice — and the only place that
renders the unified body ``{"error": {code, message, details, retry}}`` and
the ``Retry-After`` header that goes with retry advice. The loader asks it
whether an override breaks the protocol; the engine asks it for bodies.

Strings in default details may hold ``{base_url}``; the engine replaces it
per request (see :mod:`mockskill.reply`), so that URLs are right behind port
mappings and proxies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

BASE_URL = "{base_url}"
"""Placeholder for the server's base URL, filled in per request."""
REFUSED_BASE_URL = "{refused_base_url}"
"""Placeholder for a base URL on this host where nothing listens (connections are refused)."""
TLS_BASE_URL = "{tls_base_url:"
"""The start of a skill's TLS fault placeholder, ``{tls_base_url:ID}``: the HTTPS base URL
of the port whose handshake fails as the skill's ``tls:`` says."""


def tls_base_url(skill_id: str) -> str:
    """The placeholder of skill *skill_id*'s TLS fault port (see :data:`TLS_BASE_URL`)."""
    return f"{TLS_BASE_URL}{skill_id}}}"


TOKEN_PATH = "/oauth/token"
"""Where this provider's OAuth2 clients get tokens: a descriptor's ``token_url``, and the
``authorization_url`` of every ``AUTH_REQUIRED`` (a ``requires:`` skill's, a forced or
scripted one's), the client-credentials grant having no other place to go."""
AUTHORIZE_PATH = "/oauth/authorize"
"""The server's OAuth2 metadata (RFC 8414's names): where a person finds how to get a
token; no interactive authorization happens there."""

DEFAULT_SCOPE = "skill:invoke"
UPGRADE_URL = "https://skill-sharing.org/upgrade-guide"


@dataclass(frozen=True)
class Retry:
    """Retry advice, as carried in ``error.retry``."""

    suggested_delay_ms: int
    max_attempts: int

    def as_json(self) -> dict[str, int]:
        return {"suggested_delay_ms": self.suggested_delay_ms, "max_attempts": self.max_attempts}


@dataclass(frozen=True)
class Context:
    """What a default body may mention: the skill asked for and its URLs."""

    skill_id: str | None = None
    url: str | None = None
    """The URL that was asked for (descriptor or invoke), with ``{base_url}``."""
    endpoint_base: str = BASE_URL
    """Where the skill's descriptor says it is invoked (``{refused_base_url}`` if nowhere)."""

    @classmethod
    def for_skill(
        cls,
        skill_id: str,
        endpoint: str = "invoke",
        *,
        unreachable: bool = False,
        tls: bool = False,
    ) -> Context:
        suffix = "/invoke" if endpoint == "invoke" else ""
        base = REFUSED_BASE_URL if unreachable else tls_base_url(skill_id) if tls else BASE_URL
        return cls(skill_id, f"{BASE_URL}/skills/{skill_id}{suffix}", base)

    @property
    def invoke_url(self) -> str | None:
        if self.skill_id is None:
            return self.url
        return f"{self.endpoint_base}/skills/{self.skill_id}/invoke"


@dataclass(frozen=True)
class Category:
    """One row of the chapter's table, with its defaults."""

    code: str
    statuses: tuple[int, ...]
    """Allowed HTTP statuses, default first; empty when never sent by a provider."""
    retryable: bool
    message: str
    """Default message; ``{name}`` is filled from the final details."""
    when: str
    """When the protocol raises it (the chapter's words)."""
    fix: str
    """What must change before a retry can succeed (or how to retry)."""
    default_details: Callable[[Context], dict[str, Any]]
    retry: Retry | None = None
    default_headers: Callable[[dict[str, Any]], dict[str, str]] | None = None

    @property
    def status(self) -> int:
        return self.statuses[0]

    @property
    def sent_by_provider(self) -> bool:
        return bool(self.statuses)


def _validation_details(ctx: Context) -> dict[str, Any]:
    return {"violations": []}


def _auth_details(ctx: Context) -> dict[str, Any]:
    return {
        "required_auth_type": "oauth2",
        # The same URL as a requires: skill's 401: a consumer that completes the flow
        # from the details does the same whatever answered the 401.
        "authorization_url": f"{BASE_URL}{TOKEN_PATH}",
        "scopes": [DEFAULT_SCOPE],
    }


def _auth_headers(details: dict[str, Any]) -> dict[str, str]:
    # RFC 6750 §3: a 401 names the scheme; the scope helps a consumer ask for
    # the right token without reading the body.
    scopes = details.get("scopes")
    scope = " ".join(str(s) for s in scopes) if isinstance(scopes, list) else DEFAULT_SCOPE
    return {"WWW-Authenticate": f'Bearer realm="mockskill", scope="{scope}"'}


def _permission_details(ctx: Context) -> dict[str, Any]:
    return {"skill_id": ctx.skill_id, "missing_scopes": [DEFAULT_SCOPE]}


def _not_found_details(ctx: Context) -> dict[str, Any]:
    details: dict[str, Any] = {"skill_id": ctx.skill_id}
    if ctx.url is not None:
        details["url"] = ctx.url
    return details


def _timeout_details(ctx: Context) -> dict[str, Any]:
    return {"timeout_ms": 30000, "elapsed_ms": 30001}


def _unreachable_details(ctx: Context) -> dict[str, Any]:
    return {"endpoint_url": ctx.invoke_url, "reason": "Connection refused"}


def _version_details(ctx: Context) -> dict[str, Any]:
    return {
        "descriptor_version": "2.0.0",
        "consumer_supported_range": "1.x.x",
        "upgrade_url": UPGRADE_URL,
    }


CATEGORIES: Mapping[str, Category] = {
    c.code: c
    for c in (
        Category(
            code="VALIDATION_ERROR",
            statuses=(),
            retryable=False,
            message="Skill descriptor validation failed",
            when="the consumer's Schema Validator finds an invalid Skill Descriptor",
            fix="the descriptor must be fixed (the consumer raises it; no provider sends it)",
            default_details=_validation_details,
        ),
        Category(
            code="AUTH_REQUIRED",
            statuses=(401,),
            retryable=False,
            message="Authentication is required to invoke this skill",
            when="no valid credentials when invoking a protected skill",
            fix="credentials must be supplied (details.authorization_url, details.scopes)",
            default_details=_auth_details,
            default_headers=_auth_headers,
        ),
        Category(
            code="PERMISSION_DENIED",
            statuses=(403,),
            retryable=False,
            message="The credentials presented do not grant access to this skill",
            when="valid credentials, but no access to this skill",
            fix="permissions must be obtained (details.missing_scopes)",
            default_details=_permission_details,
        ),
        Category(
            code="SKILL_NOT_FOUND",
            statuses=(404,),
            retryable=False,
            message="Skill not found",
            when="the requested skill ID or descriptor URL does not exist",
            fix="the skill ID or descriptor URL must be corrected",
            default_details=_not_found_details,
        ),
        Category(
            code="EXECUTION_TIMEOUT",
            statuses=(504, 408),
            retryable=True,
            message="Skill execution exceeded the configured timeout of {timeout_ms}ms",
            when="execution exceeded the configured timeout",
            fix="retry with exponential backoff",
            default_details=_timeout_details,
            retry=Retry(suggested_delay_ms=5000, max_attempts=3),
        ),
        Category(
            code="ENDPOINT_UNREACHABLE",
            statuses=(503, 502),
            retryable=True,
            message="Failed to connect to skill endpoint",
            when="the invocation endpoint cannot be reached",
            fix="retry with exponential backoff",
            default_details=_unreachable_details,
            retry=Retry(suggested_delay_ms=2000, max_attempts=5),
        ),
        Category(
            code="VERSION_INCOMPATIBLE",
            statuses=(422,),
            retryable=False,
            message=(
                "Protocol version {descriptor_version} is not compatible with consumer"
                " version {consumer_version}"
            ),
            when="the descriptor's protocol version is incompatible with the consumer",
            fix="the consumer must be upgraded (details.upgrade_url)",
            default_details=_version_details,
        ),
    )
}

CODES: tuple[str, ...] = tuple(CATEGORIES)

RATE_LIMITED = Category(
    code="RATE_LIMITED",
    statuses=(429,),
    retryable=True,
    message="Rate limit exceeded: {limit} requests, {refill_per_second} more a second",
    when="the consumer sent more requests than the provider's rate limit admits",
    fix="wait as Retry-After says (or the advice), with jitter; pace requests to the limit",
    default_details=lambda ctx: {"limit": 1, "refill_per_second": 1},
    retry=Retry(suggested_delay_ms=1000, max_attempts=5),
)
"""A rate limit's refusal: 429 in the unified body. **Not one of the chapter's seven**
(so not in :data:`CATEGORIES`): a provider answering in-protocol sends
``ENDPOINT_UNREACHABLE`` (503) with retry advice instead (docs/rate-limits.md). The audit
treats it as retryable, with the advice the answer gave."""


def _task_details(ctx: Context) -> dict[str, Any]:
    return {"task_id": None}


TASK_NOT_FOUND = Category(
    code="TASK_NOT_FOUND",
    statuses=(404,),
    retryable=False,
    message="Task {task_id} not found",
    when=(
        "a status URL names a task this server never handed out: an unknown, malformed or"
        " another server's id, or a skill that does not run as a task"
    ),
    fix="follow the Location of the invoke's 202 (or task.status_url) instead of building URLs",
    default_details=_task_details,
)
TASK_EXPIRED = Category(
    code="TASK_EXPIRED",
    statuses=(404,),
    retryable=False,
    message="Task {task_id} has expired",
    when="the task ended longer ago than its time-to-live (task.ttl_ms): its state is gone",
    fix="read a task's outcome within ttl_ms of its end; invoke the skill again for a new one",
    default_details=_task_details,
)
TASK_FINISHED = Category(
    code="TASK_FINISHED",
    statuses=(409,),
    retryable=False,
    message="Task {task_id} has finished ({status}): it cannot be cancelled",
    when="a cancel of a task already completed, failed or cancelled",
    fix="read the task's outcome (GET its status URL); there is nothing left to cancel",
    default_details=_task_details,
)
TASK_NOT_CANCELLABLE = Category(
    code="TASK_NOT_CANCELLABLE",
    statuses=(409,),
    retryable=False,
    message="Task {task_id} cannot be cancelled while it is {status}",
    when="a cancel of a live task in a status its skill does not allow cancelling in",
    fix="cancel only in the statuses details.cancellable lists, or wait for the task's end",
    default_details=_task_details,
)
TASK_NOT_AWAITING_INPUT = Category(
    code="TASK_NOT_AWAITING_INPUT",
    statuses=(409,),
    retryable=False,
    message="Task {task_id} is not awaiting input (it is {status})",
    when="an input posted to a task whose status is not input_required",
    fix="poll the status URL and post input only while task.status is input_required",
    default_details=_task_details,
)
TASK_INPUT_INVALID = Category(
    code="TASK_INPUT_INVALID",
    statuses=(422,),
    retryable=False,
    message="The input does not meet what task {task_id} expects",
    when="an input that is not a JSON object, or does not meet the task's expects:",
    fix="post a JSON object meeting the conditions details.failed names",
    default_details=_task_details,
)
TASK_CALLBACK_REFUSED = Category(
    code="TASK_CALLBACK_REFUSED",
    statuses=(422,),
    retryable=False,
    message="The callback URL {url} is refused: {reason}",
    when=(
        "an invoke of a task skill with callback: names a receiver mockskill may not call"
        " (another host than loopback and --callback-allow's, not http/https, no host, over"
        " 2 KiB): no task is started"
    ),
    fix=(
        "give a loopback receiver URL (127.0.0.1, ::1, localhost), or start the server with"
        " --callback-allow HOST for that host"
    ),
    default_details=lambda ctx: {"url": None, "reason": None},
)
TASK_CODES: tuple[str, ...] = (
    TASK_NOT_FOUND.code,
    TASK_EXPIRED.code,
    TASK_FINISHED.code,
    TASK_NOT_CANCELLABLE.code,
    TASK_NOT_AWAITING_INPUT.code,
    TASK_INPUT_INVALID.code,
)
"""A long-running task's refusals (docs/tasks.md): outside the chapter, none retryable."""

OUTSIDE_CHAPTER: Mapping[str, Category] = {
    c.code: c
    for c in (
        RATE_LIMITED,
        TASK_NOT_FOUND,
        TASK_EXPIRED,
        TASK_FINISHED,
        TASK_NOT_CANCELLABLE,
        TASK_NOT_AWAITING_INPUT,
        TASK_INPUT_INVALID,
        TASK_CALLBACK_REFUSED,
    )
}
"""Codes mockskill sends that the chapter does not define, marked so in docs/catalog.md."""
SERVED_CODES: tuple[str, ...] = tuple(c.code for c in CATEGORIES.values() if c.sent_by_provider)


@dataclass(frozen=True)
class Rendered:
    """An error ready to send: status, headers and the JSON body (as text)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: str
    code: str
    retry: Retry | None


def retry_after_seconds(delay_ms: int) -> int:
    """``Retry-After`` for a suggested delay: whole seconds, rounded up.

    In integers: a float quotient loses digits above 2**53 ms."""
    return -(-delay_ms // 1000)


def unified_body(
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    retry: Retry | None = None,
) -> dict[str, Any]:
    """The unified error body of the chapter, with the optional parts left out when unset."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = dict(details)
    if retry is not None:
        error["retry"] = retry.as_json()
    return {"error": error}


def error_body_problem(body: Any) -> str | None:
    """Why *body* (parsed JSON) is not the chapter's unified error body ("its ..."), or None.

    ``error.code`` and ``error.message`` are strings; ``details``, when there,
    an object; ``retry``, when there, an object whose ``suggested_delay_ms``
    and ``max_attempts`` (each optional) are non-negative numbers. Other keys
    are let through: the chapter lists what must be there, not all that may.
    """
    if not isinstance(body, dict) or "error" not in body:
        return "it has no error object"
    error = body["error"]
    if not isinstance(error, dict):
        return "its error is not an object"
    for key in ("code", "message"):
        if not isinstance(error.get(key), str):
            return f"its error.{key} is missing or not a string"
    if "details" in error and not isinstance(error["details"], dict):
        return "its error.details is not an object"
    if "retry" not in error:
        return None
    retry = error["retry"]
    if not isinstance(retry, dict):
        return "its error.retry is not an object"
    for key in ("suggested_delay_ms", "max_attempts"):
        value = retry.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"its error.retry.{key} is not a non-negative number"
    return None


class _KeepMissing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def consumer_version(supported_range: object) -> object:
    """The chapter's way to name a consumer in a message: ``1.x`` for the range ``1.x.x``.

    (The chapter's example message says "consumer version 1.x" while its
    details say ``consumer_supported_range: 1.x.x``.) Other values are kept.
    """
    if isinstance(supported_range, str) and supported_range.endswith(".x.x"):
        return supported_range[: -len(".x")]
    return supported_range


def _message_fields(details: Mapping[str, Any]) -> _KeepMissing:
    """What a default message may name: the details, and the consumer_version derived from them."""
    fields = _KeepMissing(details)
    if "consumer_supported_range" in details:
        fields.setdefault("consumer_version", consumer_version(details["consumer_supported_range"]))
    return fields


KEEP: Any = object()
"""``retry=KEEP``: keep the category's default advice."""


def render(
    code: str,
    context: Context = Context(),
    *,
    status: int | None = None,
    message: str | None = None,
    details: Mapping[str, Any] | None = None,
    retry: Retry | object | None = KEEP,
    headers: Mapping[str, str] | None = None,
) -> Rendered:
    """Render category *code* from its defaults, with overrides.

    *details* are merged over the defaults key by key; *retry* replaces the
    advice (``None`` removes it). Overrides are assumed checked (see
    :func:`status_problem` and :func:`retry_problem`).
    """
    category = CATEGORIES.get(code) or OUTSIDE_CHAPTER[code]  # (RATE_LIMITED, TASK_*)
    final_details = category.default_details(context)
    if details:
        final_details.update(details)
    if message is None:
        message = category.message.format_map(_message_fields(final_details))
    advice = category.retry if retry is KEEP else retry
    assert advice is None or isinstance(advice, Retry)
    out_headers = dict(category.default_headers(final_details)) if category.default_headers else {}
    if headers:
        out_headers.update(headers)
    if advice is not None:
        out_headers["Retry-After"] = str(retry_after_seconds(advice.suggested_delay_ms))
    body = json.dumps(unified_body(code, message, final_details, advice))
    return Rendered(
        status=status if status is not None else (category.status if category.statuses else 400),
        headers=tuple(out_headers.items()),
        body=body,
        code=code,
        retry=advice,
    )


def tool_error(status: int, code: str, message: str, details: Mapping[str, Any]) -> Rendered:
    """An error of mockskill itself (not a protocol category), in the unified shape.

    Codes start with ``MOCKSKILL_`` so that no consumer mistakes them for the
    protocol's.
    """
    return Rendered(status, (), json.dumps(unified_body(code, message, details)), code, None)


# -- checks the loader uses: one sentence each, for a problem report ---------


def status_problem(code: str, status: int) -> str | None:
    """Why *status* is not allowed for *code*, or None when it is."""
    category = CATEGORIES[code]
    if status in category.statuses:
        return None
    if not category.sent_by_provider:
        return (
            f"{code} is raised by the consumer, never sent by a provider (protocol error chapter)"
        )
    allowed = " or ".join(str(s) for s in category.statuses)
    return f"{code} is sent with HTTP {allowed} (protocol error chapter)"


def retry_problem(code: str) -> str | None:
    """Why *code* may not carry retry advice, or None when it may."""
    category = CATEGORIES[code]
    if category.retryable:
        return None
    return f"{code} is not retryable ({category.fix}), so it carries no retry advice"
