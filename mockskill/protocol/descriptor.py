"""The Skill Descriptor: a valid default, and how a scenario changes it.

The error chapter implies the fields a descriptor has at least: a protocol
version, an id, a ``capability_type`` (one of ``plugin``, ``api``,
``knowledge``, ``task``), ``endpoint.url`` (a URI) and an auth section. The
rest of the default is our documented choice (docs/scenarios.md, "Descriptors").

A scenario's ``descriptor`` is merged over the default as a JSON Merge Patch
(RFC 7386): mappings merge key by key, anything else replaces, and ``null``
removes a key — so a scenario can break one field of an otherwise valid
descriptor. (A field whose value is null needs ``raw_descriptor``.)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .catalog import BASE_URL, REFUSED_BASE_URL, TOKEN_PATH, tls_base_url

PROTOCOL_VERSION = "1.0.0"
CAPABILITY_TYPES = ("plugin", "api", "knowledge", "task")


def invoke_url(skill_id: str, *, unreachable: bool = False, tls: bool = False) -> str:
    """Where a skill is invoked; for an unreachable one, a port where nothing listens; for
    one with a TLS fault, the port whose handshake fails."""
    base = REFUSED_BASE_URL if unreachable else tls_base_url(skill_id) if tls else BASE_URL
    return f"{base}/skills/{skill_id}/invoke"


def descriptor_url(skill_id: str) -> str:
    return f"{BASE_URL}/skills/{skill_id}"


def default(skill_id: str, *, unreachable: bool = False, tls: bool = False) -> dict[str, Any]:
    """A valid descriptor for *skill_id*, invoked at this server (or where nothing listens)."""
    return {
        "protocol_version": PROTOCOL_VERSION,
        "id": skill_id,
        "name": skill_id.replace("-", " ").replace("_", " ").capitalize(),
        "description": f"Mock skill {skill_id!r} served by mockskill",
        "version": "1.0.0",
        "capability_type": "api",
        "endpoint": {
            "url": invoke_url(skill_id, unreachable=unreachable, tls=tls),
            "method": "POST",
        },
        "auth": {"type": "none"},
    }


def auth_section(kind: str, scopes: tuple[str, ...]) -> dict[str, Any]:
    """The descriptor's ``auth`` for a skill that requires credentials of *kind*."""
    token_url = f"{BASE_URL}{TOKEN_PATH}"
    if kind == "oauth2":  # the client-credentials flow: the token endpoint is where to go
        return {
            "type": "oauth2",
            "authorization_url": token_url,
            "token_url": token_url,
            "scopes": list(scopes),
        }
    if kind == "api_key":
        return {"type": "api_key", "header": "X-API-Key", "scopes": list(scopes)}
    return {"type": "bearer", "scopes": list(scopes)}


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """*override* over *base*: mappings merge, ``None`` removes, the rest replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):  # as JSON Merge Patch (RFC 7386) does
            current = out.get(key)
            out[key] = merge(current if isinstance(current, Mapping) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chapter_invalid(skill_id: str) -> dict[str, Any]:
    """The chapter's own invalid example: a wrong ``capability_type``, no ``endpoint.url``.

    Served when a consumer forces ``VALIDATION_ERROR`` on a descriptor request,
    since that error is raised by the consumer's validator, not sent.
    """
    return merge(default(skill_id), {"capability_type": "unknown_type", "endpoint": {"url": None}})
