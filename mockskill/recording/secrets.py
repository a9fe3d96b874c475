"""What of an exchange is a secret, kept out of the file a recording becomes.

A consumer authenticates with headers (``Authorization``, an API key,
cookies) and, at a token endpoint, with form or JSON fields (an OAuth2
client's secret); a provider answers with tokens (``access_token``) and
cookies. None of these reaches a recorded file: headers are left out, body
fields are left out of what a case may test, and an access token in an
answer is replaced by a stand-in the file may hold (a replay hands the
stand-in out, and accepts it back). :class:`Secrets` keeps what it removed,
by name only, for the file's header comment, and what the consumer
presented, as digests, for the skill's ``requires:``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

SECRET_HEADER = re.compile(
    r"authorization|cookie|api[-_]?key|token|secret|password|passwd|credential|session-?id",
    re.IGNORECASE,
)
"""Header names that carry a secret (``Authorization``, ``Proxy-Authorization``,
``X-API-Key``, ``Cookie``, ``Set-Cookie``, ``X-Auth-Token``, ...)."""
NOT_SECRET_HEADERS = frozenset({"www-authenticate", "mockskill-session"})
"""Names that look like secrets' but say how to authenticate (or which session), no more."""
SECRET_FIELDS = frozenset(
    {
        "client_secret",
        "password",
        "access_token",
        "refresh_token",
        "id_token",
        "client_assertion",
        "assertion",
        "code_verifier",
        "api_key",
        "apikey",
        "secret",
        "token",
    }
)
"""Body fields (form fields, JSON object keys at any depth) that carry a secret."""
TOKEN_FIELD = "access_token"
STAND_IN = "recorded-token-{n}"
"""An access token of a recorded answer, as the file holds it (numbered in order seen)."""
REDACTED = "(redacted)"
"""What a secret body field of an answer becomes when nothing can stand in for it."""


def is_secret_header(name: str) -> bool:
    lower = name.lower()
    return lower not in NOT_SECRET_HEADERS and SECRET_HEADER.search(lower) is not None


def sha256(secret: str) -> str:
    """The digest a replay compares a presented credential with (hex, as ``sha256sum``)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Secrets:
    """What one recording left out: names for the header, digests and stand-ins for replay."""

    names: dict[str, None] = field(default_factory=dict)
    """What was redacted, in order (``header Authorization``, ``body field client_secret``)."""
    stand_ins: dict[str, str] = field(default_factory=dict)
    """An access token an answer carried -> the stand-in the file holds instead."""
    stand_in_scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """A stand-in -> the scopes its answer granted (``scope``)."""

    def header(self, name: str) -> None:
        self.names.setdefault(f"header {name}")

    def field(self, name: str) -> None:
        self.names.setdefault(f"body field {name}")

    def fields_out(self, value: Any) -> Any:
        """A JSON request body without its secret fields (at any depth), for what cases test."""
        if isinstance(value, dict):
            kept = {}
            for key, item in value.items():
                if key.lower() in SECRET_FIELDS:
                    self.field(key)
                else:
                    kept[key] = self.fields_out(item)
            return kept
        if isinstance(value, list):
            return [self.fields_out(item) for item in value]
        return value

    def answer_out(self, value: Any) -> Any:
        """A JSON answer with its tokens replaced: an access token by its stand-in."""
        if isinstance(value, dict):
            kept: dict[str, Any] = {}
            for key, item in value.items():
                if key.lower() == TOKEN_FIELD and isinstance(item, str):
                    self.field(key)
                    kept[key] = self.stand_in(item, value.get("scope"))
                elif key.lower() in SECRET_FIELDS and isinstance(item, str):
                    self.field(key)
                    kept[key] = REDACTED
                else:
                    kept[key] = self.answer_out(item)
            return kept
        if isinstance(value, list):
            return [self.answer_out(item) for item in value]
        return value

    def stand_in(self, token: str, scope: Any = None) -> str:
        """The stand-in of *token* (the same one each time it is seen)."""
        if token not in self.stand_ins:
            name = STAND_IN.format(n=len(self.stand_ins) + 1)
            self.stand_ins[token] = name
            scopes = tuple(scope.split()) if isinstance(scope, str) else ()
            self.stand_in_scopes[name] = scopes
        return self.stand_ins[token]


def presented(headers: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The credential a request carries, as a replay reads it: ("bearer", token) or
    ("api_key", key) (the scenario format's ``X-API-Key``), if any."""
    for name, value in headers:
        if name.lower() == "authorization" and value[:7].lower() == "bearer ":
            return "bearer", value[7:].strip()
    for name, value in headers:
        if name.lower() == "x-api-key" and value.strip():
            return "api_key", value.strip()
    return None


QUERY_SECRETS = frozenset({"access_token", "api_key", "apikey", "client_secret", "token"})
"""Query parameters that carry a secret."""


def form_secrets(text: str, secrets: Secrets) -> bool:
    """Whether a form-encoded body holds a secret field (each one named in *secrets*)."""
    found = False
    if "=" in text:
        for key, _ in parse_qsl(text, keep_blank_values=True):
            if key.lower() in SECRET_FIELDS:
                secrets.field(key)
                found = True
    return found


def basic(value: str) -> tuple[str, str] | None:
    if value[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, _, secret = decoded.partition(":")
    return unquote(client_id), unquote(secret)
