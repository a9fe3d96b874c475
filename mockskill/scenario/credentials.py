"""A scenario's credentials, read from YAML: its ``auth`` and a skill's ``requires``.

``auth`` lists who may call (bearer tokens, API keys, OAuth2 clients, each
with scopes) and how long issued tokens live; ``requires`` says what a skill
asks for. Both become model values (:class:`~mockskill.scenario.model.Credentials`,
:class:`~mockskill.scenario.model.Requirement`) that ``auth`` checks at request time.
Problems go to the :class:`~mockskill.scenario.reader.Reader`, like the rest of the
loader's.
"""

from __future__ import annotations

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
    """``auth: {tokens, api_keys, clients, token_lifetime}``: who may call, with which scopes."""
    if value is None:
        return Credentials()
    raw = r.mapping(value, path, "{tokens: [...], api_keys: [...], clients: [...]}")
    if raw is None or not r.keys(raw, path, AUTH_KEYS):
        return Credentials()
    tokens = _secrets(r, raw, path, "tokens", ("token", "scopes"))
    keys = _secrets(r, raw, path, "api_keys", ("key", "scopes"))
    clients = {}
    for item, where in _items(r, raw, path, "clients"):
        if r.keys(
            item, where, ("client_id", "client_secret", "scopes"), ("client_id", "client_secret")
        ):
            client_id = r.string(item, "client_id", where)
            secret = r.string(item, "client_secret", where)
            scopes = _scopes(r, item.get("scopes", [DEFAULT_SCOPE]), (*where, "scopes"))
            if client_id is not None and secret is not None and scopes is not None:
                clients[client_id] = Client(client_id, secret, scopes)
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
    return Credentials(tokens, keys, clients, lifetime)


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
    r: Reader, raw: dict[str, Any], path: Path, key: str, keys: tuple[str, str]
) -> dict[str, frozenset[str]]:
    out = {}
    name = keys[0]
    for item, where in _items(r, raw, path, key):
        if r.keys(item, where, keys, required=(name,)):
            secret = r.string(item, name, where)
            scopes = _scopes(r, item.get("scopes", [DEFAULT_SCOPE]), (*where, "scopes"))
            if secret is not None and scopes is not None:
                out[secret] = scopes
    return out


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
