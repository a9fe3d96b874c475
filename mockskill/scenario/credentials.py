"""A scenario's credentials, read from YAML: its ``auth`` and a skill's ``requires``.

``auth`` lists who may call (bearer tokens, API keys, OAuth2 clients, each
with scopes) and how long issued tokens live; ``requires`` says what a skill
asks for. Both become model values (:class:`~mockskill.scenario.model.Credentials`,
:class:`~mockskill.scenario.model.Requirement`) that ``auth`` checks at request time.
Problems go to the :class:`~mockskill.scenario.reader.Reader`, like the rest of the
loader's.
"""

from __future__ import annotations

import re
from typing import Any

from ..protocol.catalog import DEFAULT_SCOPE
from .model import Client, Credentials, Lifetime, Requirement
from .problems import Path, describe
from .reader import Reader

AUTH_KEYS = ("tokens", "api_keys", "clients", "token_lifetime")
REQUIRES_KEYS = ("type", "scopes")
AUTH_TYPES = ("oauth2", "bearer", "api_key")
"""What a skill may require (``requires: {type}``); the engine's auth module checks each."""


def read_credentials(r: Reader, value: Any, path: Path) -> Credentials:
    """``auth: {tokens, api_keys, clients, token_lifetime}``: who may call, with which scopes.

    Each token, key and client secret may be written as itself or as its
    SHA-256 digest (``token_sha256``, ``key_sha256``, ``client_secret_sha256``:
    64 hex digits, as ``sha256sum`` prints them), so that a file can accept a
    consumer's credential without holding it (a recording does).
    """
    if value is None:
        return Credentials()
    raw = r.mapping(value, path, "{tokens: [...], api_keys: [...], clients: [...]}")
    if raw is None or not r.keys(raw, path, AUTH_KEYS):
        return Credentials()
    tokens, token_digests = _secrets(r, raw, path, "tokens", "token")
    keys, key_digests = _secrets(r, raw, path, "api_keys", "key")
    clients = {}
    for item, where in _items(r, raw, path, "clients"):
        allowed = ("client_id", "client_secret", "client_secret_sha256", "scopes")
        if r.keys(item, where, allowed, ("client_id",)):
            client_id = r.string(item, "client_id", where)
            secret, digest = _one_form(r, item, where, "client_secret")
            scopes = _scopes(r, item.get("scopes", [DEFAULT_SCOPE]), (*where, "scopes"))
            if client_id is not None and (secret, digest) != (None, None) and scopes is not None:
                clients[client_id] = Client(client_id, secret or "", scopes, digest)
    lifetime = Lifetime()
    if raw.get("token_lifetime") is not None:
        life = r.mapping(raw["token_lifetime"], (*path, "token_lifetime"), "{seconds: N, uses: N}")
        if life is not None and r.keys(life, (*path, "token_lifetime"), ("seconds", "uses")):
            where = (*path, "token_lifetime")
            seconds = (
                r.integer(life, "seconds", where, default=0, minimum=1)
                if "seconds" in life
                else None
            )
            uses = r.integer(life, "uses", where, default=0, minimum=1) if "uses" in life else None
            lifetime = Lifetime(seconds, uses)
    return Credentials(tokens, keys, clients, lifetime, token_digests, key_digests)


DIGEST = r"[0-9a-fA-F]{64}"  # compiled by re on the first digest read, not at import
DIGEST_TEXT = "a SHA-256 digest: 64 hex digits (printf %s SECRET | sha256sum)"


def _one_form(
    r: Reader, item: dict[str, Any], where: Path, name: str
) -> tuple[str | None, str | None]:
    """*name* or ``{name}_sha256``, exactly one of them: (the secret, None) or (None, its
    digest, in lower case); (None, None) after a problem."""
    digest_key = f"{name}_sha256"
    if (name in item) == (digest_key in item):
        found = "both" if name in item else "neither"
        r.bad(where, f"{name} or {digest_key} (one of them)", found)
        return None, None
    if name in item:
        return r.string(item, name, where), None
    digest = r.string(item, digest_key, where)
    if digest is None:
        return None, None
    if not re.fullmatch(DIGEST, digest):
        r.bad((*where, digest_key), DIGEST_TEXT, describe(digest))
        return None, None
    return None, digest.lower()


def _items(
    r: Reader, raw: dict[str, Any], path: Path, key: str
) -> list[tuple[dict[str, Any], Path]]:
    items = raw.get(key, [])
    if not isinstance(items, list):
        r.bad((*path, key), f"a list of {key}", describe(items))
        return []
    out = []
    for i, item in enumerate(items):
        where = (*path, key, i)
        mapping = r.mapping(item, where, f"one of the {key} (a mapping)")
        if mapping is not None:
            out.append((mapping, where))
    return out


def _secrets(
    r: Reader, raw: dict[str, Any], path: Path, key: str, name: str
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """The secrets listed under *key* and the scopes each grants: (as written, by digest)."""
    plain: dict[str, frozenset[str]] = {}
    digests: dict[str, frozenset[str]] = {}
    for item, where in _items(r, raw, path, key):
        if r.keys(item, where, (name, f"{name}_sha256", "scopes")):
            secret, digest = _one_form(r, item, where, name)
            scopes = _scopes(r, item.get("scopes", [DEFAULT_SCOPE]), (*where, "scopes"))
            if scopes is not None and secret is not None:
                plain[secret] = scopes
            elif scopes is not None and digest is not None:
                digests[digest] = scopes
    return plain, digests


def _scopes(r: Reader, value: Any, path: Path) -> frozenset[str] | None:
    if isinstance(value, list) and all(isinstance(s, str) and s and " " not in s for s in value):
        return frozenset(value)
    r.bad(path, "a list of scopes (strings without spaces)", describe(value))
    return None


def read_requirement(r: Reader, value: Any, path: Path) -> Requirement | None:
    """``requires: true`` or ``{type: oauth2|bearer|api_key, scopes: [...]}``."""
    if value is None or value is False:
        return None
    if value is True:
        return Requirement("oauth2", (DEFAULT_SCOPE,))
    raw = r.mapping(value, path, "true, or {type: oauth2|bearer|api_key, scopes: [...]}")
    if raw is None or not r.keys(raw, path, REQUIRES_KEYS):
        return None
    kind = raw.get("type", "oauth2")
    if not r.among(kind, (*path, "type"), AUTH_TYPES):
        return None
    listed = raw.get("scopes", [DEFAULT_SCOPE])
    scopes = _scopes(r, listed, (*path, "scopes"))
    return None if scopes is None else Requirement(kind, tuple(listed))
