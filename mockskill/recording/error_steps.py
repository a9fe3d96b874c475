"""A recorded error answer as an ``error:`` step, when it is one of the protocol's.

A provider that answers in the unified error body (``{"error": {"code",
"message", "details", "retry"}}``) with one of the protocol's codes is
written back as an ``error: CODE`` step with its overrides, not as a plain
result: a replay then journals the category, and the retry audit grades a
consumer against it as it did against the provider. The step is kept only
if mockskill renders it to the very answer recorded (status, body, headers),
checked by loading it; anything else stays a result step, answered as
recorded.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol import catalog
from ..scenario.loader import load_text
from ..scenario.model import Reply
from ..scenario.problems import ScenarioError

_CACHE_LIMIT = 256


class Errors:
    """Turns result steps into error steps where they render the same (kept per answer)."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, Any] | None] = {}

    def step(self, step: dict[str, Any], where: dict[str, Any]) -> dict[str, Any]:
        """*step* (a result step's keys) as an error step, or itself.

        *where* is the endpoint as a scenario writes it, without its steps:
        ``{"skill": ID, "endpoint": "invoke"}`` or ``{"path": P, "method": M}``.
        """
        body = step.get("json")
        error = body.get("error") if isinstance(body, dict) and len(body) == 1 else None
        if not isinstance(error, dict) or error.get("code") not in catalog.SERVED_CODES:
            return step
        key = json.dumps([step, where], sort_keys=True)
        if key not in self._seen:
            if len(self._seen) >= _CACHE_LIMIT:
                self._seen.clear()
            self._seen[key] = _as_error(step, error, where)
        found = self._seen[key]
        return step if found is None else found


def _as_error(
    step: dict[str, Any], error: dict[str, Any], where: dict[str, Any]
) -> dict[str, Any] | None:
    code = error["code"]
    category = catalog.CATEGORIES[code]
    if set(error) - {"code", "message", "details", "retry"}:
        return None
    status = step.get("status", 200)
    if status not in category.statuses:
        return None
    candidate: dict[str, Any] = {"error": code}
    if status != category.status:
        candidate["status"] = status
    if "details" in error:
        if not isinstance(error["details"], dict):
            return None
        candidate["details"] = error["details"]
    retry = error.get("retry")
    if retry is None and category.retry is not None:
        candidate["retry"] = None
    elif retry is not None:
        candidate["retry"] = retry
    headers = {k: v for k, v in step.get("headers", {}).items() if k.lower() != "retry-after"}
    if any(k.lower() == "content-type" for k in headers):
        return None
    if headers:
        candidate["headers"] = headers
    recorded = (status, step.get("json"), _headers(step.get("headers", {})))
    for tried in (candidate, {**candidate, "message": error.get("message")}):
        reply = _rendered(tried, where)
        if reply is not None and (reply.status, _json(reply.body), _headers(reply.headers)) == (
            recorded
        ):
            return tried
    return None


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _headers(headers: Any) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, dict) else headers
    return {k.lower(): v for k, v in pairs if k.lower() != "content-type"}


def _rendered(step: dict[str, Any], where: dict[str, Any]) -> Reply | None:
    """The reply mockskill serves for *step* at *where* ({base_url} unfilled); None if the
    loader refuses it."""
    if "skill" in where:
        skill = {"id": where["skill"], where["endpoint"]: [step]}
        data: dict[str, Any] = {"name": "error-check", "skills": [skill]}
    else:
        route = {"path": where["path"], "method": where["method"], "steps": [step]}
        data = {"name": "error-check", "routes": [route]}
    try:
        (scenario,) = load_text(json.dumps(data), "<error check>").scenarios
    except ScenarioError:
        return None
    if scenario.skills:
        found = scenario.skills[0]
        sequence = found.invoke if where["endpoint"] == "invoke" else found.describe
    else:
        sequence = scenario.routes[0].sequence
    return None if sequence is None else sequence.steps[0].reply
