"""How mockskill writes JSON: one style for every answer and every ``--json`` output.

Every JSON document mockskill writes itself — error bodies, descriptors, a
step's ``json:``, the token endpoint, the admin API, ``mockskill report
--json``, ``mockskill check-descriptor`` — is one line in Python's
``json.dumps`` style: ``{"key": "value", "list": [1, 2]}``, keys in the order
mockskill builds them, non-ASCII escaped, no newline at the end of a body.
The README ("JSON answers") documents it; tests/protocol/test_jsonstyle.py holds
every answer to it. JSON mockskill reads is read strictly: ``NaN`` and
``Infinity`` are JavaScript, not JSON.
"""

from __future__ import annotations

import json
from typing import Any, cast

from flask import Response
from flask.json.provider import DefaultJSONProvider


def dumps(value: Any) -> str:
    """*value* as mockskill writes JSON."""
    return json.dumps(value)


class NotJSON(ValueError):
    """A JSON text used a word JSON does not have (``NaN``, ``Infinity``)."""

    def __init__(self, word: str) -> None:
        super().__init__(f"{word} is not JSON")
        self.word = word


def _not_json(word: str) -> Any:
    raise NotJSON(word)


def loads(text: str | bytes) -> Any:
    """*text* read strictly as JSON: :class:`NotJSON` for ``NaN`` and ``Infinity``.

    (Python's reader takes them by default, so a body holding them would be
    read as a number no JSON client could have sent.)
    """
    return json.loads(text, parse_constant=_not_json)


class Provider(DefaultJSONProvider):
    """Flask's JSON for the admin API's answers, in the same style as every other body.

    (Flask's own sorts the keys, drops the spaces outside debug mode, and
    ends a body with a newline: answers read differently from the skill
    surface's, and from the documents the docs show.)
    """

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        kwargs.setdefault("parse_constant", _not_json)
        return super().loads(s, **kwargs)

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return json.dumps(obj, default=self.default)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        answer = self._app.response_class(self.dumps(obj), mimetype=self.mimetype)
        return cast(Response, answer)
