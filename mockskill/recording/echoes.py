"""Recorded answers that repeat their request, written as templates.

A provider that echoes a value of the request (the input text, an id the
consumer chose, its ``X-Request-Id``) answers each new request with that
request's value; a recording that kept the value as it came would answer
every replayed request with the first one's. :func:`templated` writes such a
value as the placeholder that reads it (docs/scenarios.md, "Templates"):
``{{request.body/input/text}}``, ``{{request.query.q}}``,
``{{request.header.X-Request-Id}}``. Everything else is kept literally, its
``{{`` escaped, so that a replay answers exactly what was recorded.

A value is taken for an echo only when it cannot repeat by chance: a string
of :data:`MIN_ECHO` characters or more, found whole as an answer's value, or
inside a longer text when it is :data:`MIN_INSIDE` characters or more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from ..engine.exchange import Exchange
from ..scenario.template_syntax import HEADER_NAME_CHARS
from ..scenario.templates import ESCAPE, OPEN
from .secrets import QUERY_SECRETS, SECRET_FIELDS, is_secret_header

MIN_ECHO = 4
"""The shortest request value an answer's whole value is taken to echo (``"ok"``,
``"en"`` or ``"1.0"`` repeat by chance)."""
MIN_INSIDE = 8
"""The shortest request value looked for inside a longer answer text."""
ECHOED_HEADERS = frozenset(
    {"idempotency-key", "traceparent", "x-request-id", "x-correlation-id", "request-id"}
)
"""Request headers whose values a provider echoes as the request's own (besides any
other ``X-`` header that is not a secret)."""
TEMPLATED_KEYS = ("json", "text", "message", "details")
"""The keys of a step whose strings are templates, besides its ``headers`` (the others
are kept as they are)."""
_BRACES = re.compile(r"(\\*)\{\{")


def escaped(text: str) -> str:
    """*text* as a template that renders to itself: each ``{{`` escaped, and the
    backslashes before it doubled (a template halves them)."""
    if OPEN not in text:
        return text
    return _BRACES.sub(lambda m: m[1] * 2 + ESCAPE + OPEN, text)


def request_values(exchange: Exchange) -> list[tuple[str, str]]:
    """*exchange*'s request values an answer may echo, longest first: (value, the
    placeholder that reads it). Secrets are never among them."""
    found: dict[str, str] = {}
    for name, value in exchange.headers:
        if _echoed_header(name):
            found.setdefault(value, f"request.header.{name}")
    _, _, query = exchange.target.partition("?")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() not in QUERY_SECRETS:
            found.setdefault(value, f"request.query.{key}")
    try:
        body = json.loads(exchange.body) if exchange.body else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        body = None
    for pointer, value in _string_leaves(body):
        found.setdefault(value, f"request.body{pointer}")
    taken = [(value, name) for value, name in found.items() if len(value) >= MIN_ECHO]
    return sorted(taken, key=lambda pair: -len(pair[0]))


def templated(step: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    """*step* with the values it echoes from *exchange*'s request as placeholders, and
    every other ``{{`` in its templated parts escaped."""
    values = request_values(exchange)
    out = dict(step)
    for key in TEMPLATED_KEYS:
        if key in out:
            out[key] = _walked(out[key], values)
    if "headers" in out:
        sent = {name.lower(): value for name, value in exchange.headers}
        out["headers"] = {
            name: _header(name, value, sent, values) for name, value in out["headers"].items()
        }
    return out


def _header(name: str, value: str, sent: dict[str, str], values: list[tuple[str, str]]) -> str:
    """An answer header as a template: one sent back as the consumer sent it (the same
    name, not a secret) reads the request's; the type is never a template (load refuses it)."""
    lower = name.lower()
    if lower == "content-type":
        return escaped(value)
    if (
        len(value) >= MIN_ECHO
        and sent.get(lower) == value
        and not is_secret_header(name)
        and all(c in HEADER_NAME_CHARS for c in name)
    ):
        return "{{request.header." + name + "}}"
    return _text(value, values)


def _walked(value: Any, values: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _text(value, values)
    if isinstance(value, dict):
        # Keys are never templates; an escaped {{ in one reads as a literal {{.
        return {_key(k): _walked(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_walked(item, values) for item in value]
    return value


def _echoed_header(name: str) -> bool:
    lower = name.lower()
    if lower.startswith("x-forwarded-") or lower == "x-api-key" or is_secret_header(name):
        return False
    return lower in ECHOED_HEADERS or lower.startswith("x-")


def _key(key: Any) -> Any:
    return escaped(key) if isinstance(key, str) else key


def _text(text: str, values: list[tuple[str, str]]) -> str:
    for value, name in values:
        if text == value:
            return "{{" + name + "}}"
    pieces: list[str | tuple[str]] = [text]
    for value, name in values:
        if len(value) < MIN_INSIDE:
            break  # longest first: the rest are shorter still
        pieces = [
            part
            for piece in pieces
            for part in (_split(piece, value, name) if isinstance(piece, str) else (piece,))
        ]
    return "".join(
        escaped(piece) if isinstance(piece, str) else "{{" + piece[0] + "}}" for piece in pieces
    )


def _split(text: str, value: str, name: str) -> Iterable[str | tuple[str]]:
    """*text*'s pieces around each *value* in it, each *value* as (its placeholder name,)."""
    parts = text.split(value)
    for n, part in enumerate(parts):
        if n:
            yield (name,)
        if part:
            yield part


def _string_leaves(value: Any, pointer: str = "") -> Iterable[tuple[str, str]]:
    """The JSON Pointer and value of each string in *value*, in document order."""
    if isinstance(value, str):
        if pointer:
            yield pointer, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in SECRET_FIELDS:
                continue  # a secret is never written back, not even as the consumer's own
            token = str(key).replace("~", "~0").replace("/", "~1")
            yield from _string_leaves(item, f"{pointer}/{token}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_leaves(item, f"{pointer}/{index}")
