"""How mockskill writes JSON: one style for every answer and every ``--json`` output.

Every JSON document mockskill writes itself — error bodies, descriptors, a
step's ``json:``, the token endpoint, the admin API, ``mockskill report
--json``, ``mockskill check-descriptor`` — is one line in Python's
``json.dumps`` style: ``{"key": "value", "list": [1, 2]}``, keys in the order
mockskill builds them, non-ASCII escaped, no newline at the end of a body.
The README ("The skill surface") documents it; tests/protocol/test_jsonstyle.py holds
every answer to it. JSON mockskill reads is read strictly: ``NaN`` and
``Infinity`` are JavaScript, not JSON. (Flask's side of it, the admin app's
JSON provider, is :mod:`mockskill.admin.json_provider`: this module imports
no Flask, so that the skill surface and the CLI do not load it.)

:func:`encode` writes the same text in bounded pieces, for the admin API's
big answers (a report, the journal: megabytes), which are encoded on a worker
thread while the loop's thread serves skills: json's C encoder holds the GIL
for the whole of one call, so one call per document would stall every skill
request for as long.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

PIECE_ITEMS = 512
"""The most keys and elements (at all levels) a list or dict :func:`encode` hands to
json's C encoder in one call, short enough not to hold the loop up. A bigger one is
walked here."""

PIECE_DEPTH = 8
"""How many levels :func:`encode` walks at most (a report's attempts sit at depth 6:
report, sessions, session, chains, chain, attempts), then the C encoder takes the rest."""

_CONTAINERS = (dict, list, tuple)

_INF = float("inf")
_ENCODER = json.JSONEncoder()
"""``json.dumps``'s own settings: the pieces are its text exactly."""


def dumps(value: Any) -> str:
    """*value* as mockskill writes JSON."""
    return json.dumps(value)


def encode(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(value, default=default)``, the same text, encoded in bounded pieces.

    Lists and dicts down to :data:`PIECE_DEPTH` levels are walked here and
    each value below them is handed to json's C encoder on its own, so that
    no single call (which holds the GIL throughout) grows with the document:
    between two pieces another thread (the loop's) can take the GIL.
    """
    encoder = _ENCODER if default is None else json.JSONEncoder(default=default)
    out: list[str] = []
    _walk(value, PIECE_DEPTH, encoder.encode, out)
    return "".join(out)


def _walk(value: Any, depth: int, whole: Callable[[Any], str], out: list[str]) -> None:
    """Append *value*'s text to *out*: walked while *depth* lasts, else in one call.

    Only the exact types json writes the same way whoever iterates are walked
    (``dict`` with ``str`` keys, ``list``, ``tuple``); anything else, subclasses
    and other keys among them, goes to the C encoder whole, which writes it as
    ``json.dumps`` does by definition. A cycle is found there too: the walk
    ends at *depth* and the C encoder sees the cycle below it.
    """
    kind = type(value)
    if kind is str:
        out.append(encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float and -_INF < value < _INF:
        out.append(float.__repr__(value))
    elif kind not in _CONTAINERS or not depth or _within(value, PIECE_ITEMS):
        out.append(whole(value))  # NaN, the infinities, other objects, a small container
    elif kind is dict and all(type(key) is str for key in value):
        separator = "{"
        for key, item in value.items():
            out.append(separator)
            out.append(encode_basestring_ascii(key))
            out.append(": ")
            _walk(item, depth - 1, whole, out)
            separator = ", "
        out.append("}")
    elif kind is not dict:
        separator = "["
        for item in value:
            out.append(separator)
            _walk(item, depth - 1, whole, out)
            separator = ", "
        out.append("]")
    else:  # a key json writes its own way (a number, None)
        out.append(whole(value))


def _within(value: list[Any] | tuple[Any, ...] | dict[Any, Any], items: int) -> bool:
    """Whether *value* holds at most *items* keys and elements, at every level in all.

    Stops counting once over: a check costs at most *items* steps, whatever
    the size of *value*.
    """
    todo: list[Any] = [value]
    for container in todo:  # grows as it goes: a breadth-first walk
        items -= len(container)
        if items < 0:
            return False
        values = container.values() if type(container) is dict else container
        todo.extend(v for v in values if type(v) in _CONTAINERS)
    return True


class NotJSON(ValueError):
    """A JSON text used a word JSON does not have (``NaN``, ``Infinity``)."""

    def __init__(self, word: str) -> None:
        super().__init__(f"{word} is not JSON")
        self.word = word


def not_json(word: str) -> Any:
    """``parse_constant`` for :func:`json.loads`: refuse ``NaN`` and ``Infinity``."""
    raise NotJSON(word)


def loads(text: str | bytes) -> Any:
    """*text* read strictly as JSON: :class:`NotJSON` for ``NaN`` and ``Infinity``.

    (Python's reader takes them by default, so a body holding them would be
    read as a number no JSON client could have sent.)
    """
    return json.loads(text, parse_constant=not_json)
