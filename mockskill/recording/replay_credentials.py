"""What a replay must accept: the credentials a consumer presented while recording.

A protected skill's successful invocations carried a bearer token or an API
key; the replay's skill ``requires:`` one, and the scenario's ``auth:``
accepts the consumer's by its SHA-256 digest (``token_sha256``,
``key_sha256``). An OAuth2 client that got its tokens from ``POST
/oauth/token`` is an ``auth.clients`` entry with ``client_secret_sha256``:
on replay mockskill's own token endpoint issues the tokens. A token a
recorded answer handed out (another token route) is replaced by its
stand-in (:class:`~.secrets.Secrets`), which the replay accepts as itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from ..engine.exchange import Exchange
from ..protocol.catalog import DEFAULT_SCOPE
from .secrets import Secrets, basic, sha256


class Access:
    """The credentials, clients and issued tokens of one recording."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets
        self.clients: dict[str, tuple[str, set[str]]] = {}
        """A client id -> its secret's digest, and the scopes its tokens were granted."""
        self.issued: set[str] = set()
        """Access tokens mockskill's own token endpoint stands in for on replay."""
        self.scopes_for: dict[tuple[str, str], set[str]] = {}
        """A credential presented on a protected skill -> the scopes a replay grants it."""

    def token_request(self, exchange: Exchange) -> None:
        """``POST /oauth/token``: on replay, mockskill's own token endpoint answers it, for
        the client recorded here (its secret as a digest)."""
        form = dict(parse_qsl(exchange.body.decode("utf-8", "replace")))
        client_id, secret = form.get("client_id"), form.get("client_secret")
        for name, value in exchange.headers:
            if name.lower() == "authorization":
                self.secrets.header(name)
                pair = basic(value)
                if pair is not None:
                    client_id, secret = pair
        if "client_secret" in form:
            self.secrets.field("client_secret")
        scopes: set[str] = set()
        try:
            answer = json.loads(exchange.response_body)
        except (ValueError, UnicodeDecodeError):
            answer = None
        if isinstance(answer, dict):
            if isinstance(answer.get("access_token"), str):
                self.secrets.field("access_token")
                self.issued.add(answer["access_token"])
            if isinstance(answer.get("scope"), str):
                scopes.update(answer["scope"].split())
        if client_id and secret is not None and 200 <= exchange.status < 300:
            _, known = self.clients.setdefault(client_id, (sha256(secret), set()))
            known.update(scopes)

    def requirement(
        self, presented: Iterable[tuple[str, str]], descriptor: Any
    ) -> dict[str, Any] | None:
        """A skill's ``requires:``, from the credentials its successful invocations
        presented (none: nothing required) and its descriptor's ``auth``."""
        credentials = list(presented)
        if not credentials:
            return None
        kinds = {kind for kind, _ in credentials}
        auth = descriptor.get("auth") if isinstance(descriptor, dict) else None
        declared = auth.get("type") if isinstance(auth, dict) else None
        scopes = auth.get("scopes") if isinstance(auth, dict) else None
        if not (isinstance(scopes, list) and scopes and all(_is_scope(s) for s in scopes)):
            scopes = [DEFAULT_SCOPE]
        if kinds == {"api_key"}:
            kind = "api_key"
        elif declared in ("oauth2", "bearer"):
            kind = declared
        else:
            kind = "oauth2" if self.issued & {s for _, s in credentials} else "bearer"
        for credential in credentials:
            self.scopes_for.setdefault(credential, set()).update(scopes)
        return {"type": kind, "scopes": list(scopes)}

    def auth(self) -> dict[str, Any]:
        """The credentials the skills need (after each one's :meth:`requirement`)."""
        tokens: list[dict[str, Any]] = []
        keys: list[dict[str, Any]] = []
        for (kind, secret), scopes in self.scopes_for.items():
            granted = sorted(scopes)
            if kind == "api_key":
                self.secrets.header("X-API-Key")
                keys.append({"key_sha256": sha256(secret), "scopes": granted})
            elif secret in self.secrets.stand_ins:
                stand_in = self.secrets.stand_ins[secret]
                tokens.append({"token": stand_in, "scopes": granted})
            elif secret not in self.issued:  # those, mockskill's token endpoint issues anew
                tokens.append({"token_sha256": sha256(secret), "scopes": granted})
        auth: dict[str, Any] = {}
        if tokens:
            auth["tokens"] = tokens
        if keys:
            auth["api_keys"] = keys
        if self.clients:
            needed = sorted({s for scopes in self.scopes_for.values() for s in scopes})
            auth["clients"] = [
                {
                    "client_id": client_id,
                    "client_secret_sha256": digest,
                    "scopes": sorted(scopes | set(needed)) or [DEFAULT_SCOPE],
                }
                for client_id, (digest, scopes) in self.clients.items()
            ]
        return auth


def _is_scope(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and " " not in value
