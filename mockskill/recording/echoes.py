"""A recorded answer's echoes of its request, written as placeholders (issue 28, item 7).

A provider that answers with a value of its request — the input text, an id
the consumer sent — answers each new request with that request's value; a
replay that sent the recorded value back would answer every request with the
first one's. So a string of a recorded ``json:`` answer equal to a string of
the request's JSON body (one long enough not to match by chance) is written
``{{request.body/POINTER}}`` (a whole placeholder: it stays a string), and a
header the provider sent back as the consumer sent it is written
``{{request.header.NAME}}``. Every other ``{{`` the provider sent is escaped
(``\\{{``), so a recorded answer never reads as a template it was not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

MIN_ECHO = 4
"""The shortest string taken for an echo: shorter ones (``"en"``, ``"ok"``) match by chance."""
_BRACES = re.compile(r"(\\*)\{\{")


def escaped(text: str) -> str:
    """*text* written so that a template reads it back as it is: each ``{{`` escaped (the
    backslashes before it doubled, as a template halves them)."""
    if "{{" not in text:
        return text
    return _BRACES.sub(lambda m: m.group(1) * 2 + "\\{{", text)


def json_answer(value: Any, request_body: bytes) -> Any:
    """A recorded ``json:`` answer with its echoes of *request_body* as placeholders and
    every other ``{{`` escaped."""
    echoes = _strings(request_body)
    return _written(value, echoes)


def headers(answer: dict[str, str], request: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Recorded answer headers: one sent back as the consumer sent it (the same name and
    value, long enough) is a placeholder; every other ``{{`` escaped."""
    sent = {name.lower(): value for name, value in request}
    out = {}
    for name, value in answer.items():
        if len(value) >= MIN_ECHO and sent.get(name.lower()) == value and _token(name):
            out[name] = f"{{{{request.header.{name}}}}}"
        else:
            out[name] = escaped(value)
    return out


def _token(name: str) -> bool:
    return re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name) is not None


def _strings(body: bytes) -> dict[str, str]:
    """Each string of the request's JSON body (long enough) and the pointer to its first
    place; none when the body is not JSON."""
    try:
        value = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    found: dict[str, str] = {}
    for pointer, item in _leaves(value, ""):
        if isinstance(item, str) and len(item) >= MIN_ECHO:
            found.setdefault(item, pointer)
    return found


def _leaves(value: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            token = str(key).replace("~", "~0").replace("/", "~1")
            yield from _leaves(item, f"{pointer}/{token}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{pointer}/{index}")
    else:
        yield pointer, value


def _written(value: Any, echoes: dict[str, str]) -> Any:
    if isinstance(value, str):
        pointer = echoes.get(value)
        return escaped(value) if pointer is None else f"{{{{request.body{pointer}}}}}"
    if isinstance(value, list):
        return [_written(item, echoes) for item in value]
    if isinstance(value, dict):
        return {
            escaped(k) if isinstance(k, str) else k: _written(v, echoes) for k, v in value.items()
        }
    return value
