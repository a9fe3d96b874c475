"""How mockskill writes JSON: one style for every answer and every ``--json`` output.

Every JSON document mockskill writes itself — error bodies, descriptors, a
step's ``json:``, the token endpoint, the admin API, ``mockskill report
--json``, ``mockskill check-descriptor`` — is one line in Python's
``json.dumps`` style: ``{"key": "value", "list": [1, 2]}``, keys in the order
mockskill builds them, non-ASCII escaped, no newline at the end of a body.
The README ("JSON answers") documents it; tests/test_jsonstyle.py holds
every answer to it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from flask import Response
from flask.json.provider import DefaultJSONProvider


def dumps(value: Any) -> str:
    """*value* as mockskill writes JSON."""
    return json.dumps(value)


class Provider(DefaultJSONProvider):
    """Flask's JSON for the admin API's answers, in the same style as every other body.

    (Flask's own sorts the keys, drops the spaces outside debug mode, and
    ends a body with a newline: answers read differently from the skill
    surface's, and from the documents the docs show.)
    """

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return json.dumps(obj, default=self.default)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        answer = self._app.response_class(self.dumps(obj), mimetype=self.mimetype)
        return cast(Response, answer)
