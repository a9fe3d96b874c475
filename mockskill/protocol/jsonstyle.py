"""How mockskill writes JSON: one style for every answer and every ``--json`` output.

Every JSON document mockskill writes itself — error bodies, descriptors, a
step's ``json:``, the token endpoint, the admin API, ``mockskill report
--json``, ``mockskill check-descriptor`` — is one line in Python's
``json.dumps`` style: ``{"key": "value", "list": [1, 2]}``, keys in the order
mockskill builds them, non-ASCII escaped, no newline at the end of a body.
The README ("JSON answers") documents it; tests/protocol/test_jsonstyle.py holds
every answer to it. JSON mockskill reads is read strictly: ``NaN`` and
``Infinity`` are JavaScript, not JSON. (Flask's side of it, the admin app's
JSON provider, is :mod:`mockskill.admin.json_provider`: this module imports
no Flask, so that the skill surface and the CLI do not load it.)
"""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """*value* as mockskill writes JSON."""
    return json.dumps(value)


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
