"""A consumer of the skill protocol, in Python's standard library only.

The client of examples/docker-compose.yml: it plays what a team's own
service does against a skill provider (mockskill stands in for the
provider, and the consumer does not know it). For each skill the provider
lists (``GET /skills``), or each id given on the command line, it

1. fetches the Skill Descriptor and checks it itself: an invalid one is a
   ``VALIDATION_ERROR`` raised here, and the skill is not invoked;
2. invokes the skill at the descriptor's ``endpoint.url``, stating its
   protocol version (``Skill-Protocol-Version``);
3. handles every answer the protocol's error chapter defines: the unified
   error body; the retryable categories (``EXECUTION_TIMEOUT``,
   ``ENDPOINT_UNREACHABLE``) and transport failures are retried with
   exponential backoff, ``delay = initial x 2^(attempt - 1)``, where
   ``initial`` is the answer's ``retry.suggested_delay_ms`` (1000 ms
   without advice), for at most ``retry.max_attempts`` attempts (3 without
   advice); the other categories are never retried.

    PROVIDER_URL=http://localhost:8080 python consumer.py [SKILL_ID ...]

``CONSUMER_SESSION``, when set, is sent as ``Mockskill-Session`` so that
runs sharing one mockskill do not disturb each other. One line per skill;
the exit code is 0 when every answer was one the protocol defines, 1 when
one was not (a body that is not the unified error, an unknown code).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from typing import Any

PROTOCOL_VERSION = "1.0.0"
RETRYABLE = {"EXECUTION_TIMEOUT", "ENDPOINT_UNREACHABLE"}
CODES = RETRYABLE | {
    "VALIDATION_ERROR",
    "AUTH_REQUIRED",
    "PERMISSION_DENIED",
    "SKILL_NOT_FOUND",
    "VERSION_INCOMPATIBLE",
}
INITIAL_DELAY_MS = 1000
MAX_ATTEMPTS = 3
CAPABILITY_TYPES = ("plugin", "api", "knowledge", "task")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


class Unexpected(Exception):
    """An answer the protocol does not define."""


class ProtocolError(Exception):
    """An error in the unified body, or VALIDATION_ERROR raised here."""

    def __init__(self, code: str, message: str, details: dict[str, Any], retry: dict[str, Any]):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.details, self.retry = code, message, details, retry


class TransportError(Exception):
    """No HTTP answer: refused, reset, cut short, not HTTP."""


class GaveUp(Exception):
    """A retryable failure that went on for every attempt allowed."""

    def __init__(self, attempts: int, waits: list[int], last: Exception):
        super().__init__(f"gave up after {attempts} attempts (waited {ms(waits)}): {last}")


def request(method: str, url: str) -> Any:
    """The JSON of a 2xx answer; ProtocolError, TransportError or Unexpected otherwise."""
    headers = {"Skill-Protocol-Version": PROTOCOL_VERSION, "Accept": "application/json"}
    session = os.environ.get("CONSUMER_SESSION")
    if session:
        headers["Mockskill-Session"] = session
    data = b"{}" if method == "POST" else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            body = response.read()
    except urllib.error.HTTPError as answer:
        raise error_from(answer.code, answer.read()) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise TransportError(f"{type(exc).__name__}: {exc}") from None
    return json.loads(body) if body else None


def error_from(status: int, body: bytes) -> ProtocolError | Unexpected:
    try:
        error = json.loads(body)["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError):
        return Unexpected(f"HTTP {status} without the unified error body: {body[:200]!r}")
    if code not in CODES:
        return Unexpected(f"HTTP {status} with a code the protocol does not define: {code}")
    return ProtocolError(code, message, error.get("details") or {}, error.get("retry") or {})


def check_descriptor(descriptor: Any) -> None:
    """Raise VALIDATION_ERROR with every violation, as the protocol's Schema Validator does."""
    violations = []

    def violation(field: str, expected: str, actual: Any, message: str) -> None:
        violations.append(
            {"field": field, "expected": expected, "actual": actual, "message": message}
        )

    if not isinstance(descriptor, dict):
        violation("", "object", descriptor, "Descriptor is not an object")
    else:
        for key in ("protocol_version", "id", "name"):
            if not isinstance(descriptor.get(key), str):
                violation(f"/{key}", "string", descriptor.get(key), "Required field is missing")
        version = descriptor.get("protocol_version")
        if isinstance(version, str) and not SEMVER.match(version):
            violation("/protocol_version", "semantic version", version, "Invalid version")
        kind = descriptor.get("capability_type")
        if kind not in CAPABILITY_TYPES:
            expected = "one of: " + ", ".join(CAPABILITY_TYPES)
            message = "Required field is missing" if kind is None else "Invalid enum value"
            violation("/capability_type", expected, kind, message)
        endpoint = descriptor.get("endpoint")
        url = endpoint.get("url") if isinstance(endpoint, dict) else None
        if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            message = "Required field is missing" if url is None else "Invalid URI"
            violation("/endpoint/url", "string (URI format)", url, message)
    if violations:
        message = "Skill descriptor validation failed"
        raise ProtocolError("VALIDATION_ERROR", message, {"violations": violations}, {})


def invoke_with_retries(url: str) -> tuple[Any, int, list[int]]:
    """Invoke *url*, retrying what may be retried; ``(result, attempts, waits in ms)``."""
    waits: list[int] = []
    attempt = 1
    while True:
        try:
            return request("POST", url), attempt, waits
        except ProtocolError as exc:
            if exc.code not in RETRYABLE:
                raise
            initial = exc.retry.get("suggested_delay_ms", INITIAL_DELAY_MS)
            limit = exc.retry.get("max_attempts", MAX_ATTEMPTS)
            failure: Exception = exc
        except TransportError as exc:
            initial, limit, failure = INITIAL_DELAY_MS, MAX_ATTEMPTS, exc
        if attempt >= limit:
            raise GaveUp(attempt, waits, failure)
        delay_ms = int(initial * 2 ** (attempt - 1))
        time.sleep(delay_ms / 1000)
        waits.append(delay_ms)
        attempt += 1


def ms(waits: list[int]) -> str:
    return ", ".join(str(w) for w in waits) + " ms" if waits else "no wait"


def advice(error: ProtocolError) -> str:
    """What a consumer tells its user (or does) for a category it must not retry."""
    d = error.details
    if error.code == "VALIDATION_ERROR":
        return "; ".join(
            f"{v['field']}: {v['message']} ({json.dumps(v['actual'])})" for v in d["violations"]
        )
    if error.code == "AUTH_REQUIRED":
        scopes = " ".join(d.get("scopes") or [])
        return (
            f"authenticate with {d.get('required_auth_type')} at"
            f" {d.get('authorization_url')} (scopes {scopes})"
        )
    if error.code == "PERMISSION_DENIED":
        return f"missing scopes {' '.join(d.get('missing_scopes') or []) or '?'}"
    if error.code == "VERSION_INCOMPATIBLE":
        return (
            f"the skill speaks {d.get('descriptor_version')}, this consumer"
            f" {d.get('consumer_supported_range')}: upgrade at {d.get('upgrade_url')}"
        )
    return error.message


def use_skill(base: str, skill_id: str) -> str:
    """One line saying what happened; Unexpected propagates."""
    try:
        descriptor = request("GET", f"{base}/skills/{skill_id}")
        check_descriptor(descriptor)
    except ProtocolError as exc:
        stage = "not invoked" if exc.code == "VALIDATION_ERROR" else "not retried"
        return f"{skill_id}: {exc.code}, {stage}: {advice(exc)}"
    except TransportError as exc:
        return f"{skill_id}: no descriptor: {exc}"
    try:
        result, attempts, waits = invoke_with_retries(descriptor["endpoint"]["url"])
    except ProtocolError as exc:
        return f"{skill_id}: {exc.code}, not retried: {advice(exc)}"
    except GaveUp as exc:
        return f"{skill_id}: {exc}"
    noun = "attempt" if attempts == 1 else "attempts"
    waited = f" (waited {ms(waits)})" if waits else ""
    return f"{skill_id}: ok after {attempts} {noun}{waited}: {json.dumps(result)}"


def main(argv: list[str]) -> int:
    base = os.environ.get("PROVIDER_URL", "http://localhost:8080").rstrip("/")
    try:
        skills = argv or [s["id"] for s in request("GET", f"{base}/skills")["skills"]]
        for skill_id in skills:
            print(use_skill(base, skill_id), flush=True)
    except Unexpected as exc:
        print(f"unexpected answer: {exc}", file=sys.stderr)
        return 1
    except (ProtocolError, TransportError) as exc:
        print(f"cannot list the skills at {base}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
