"""The admin app's JSON provider: Flask's JSON in mockskill's one style.

Apart from :mod:`~mockskill.protocol.jsonstyle` because it subclasses
Flask's provider: the style itself is needed by the skill surface and the
CLI, which must not import Flask (the admin app is built on the first
``/__admin`` request).
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app
from flask.json.provider import DefaultJSONProvider

from ..protocol import jsonstyle


class Provider(DefaultJSONProvider):
    """Flask's JSON for the admin API's answers, in the same style as every other body.

    (Flask's own sorts the keys, drops the spaces outside debug mode, and
    ends a body with a newline: answers read differently from the skill
    surface's, and from the documents the docs show.)
    """

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        kwargs.setdefault("parse_constant", jsonstyle.not_json)
        return super().loads(s, **kwargs)

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        # In pieces: a report or a journal listing (megabytes) encoded in one C call would
        # hold the GIL, and the skill surface's loop would wait all that time.
        return jsonstyle.encode(obj, default=self.default)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        # What jsonify takes: one value, several (a list), or keyword arguments (an object).
        if args and kwargs:
            raise TypeError("jsonify() takes positional or keyword arguments, not both")
        obj = args[0] if len(args) == 1 else (args or kwargs or None)
        return current_app.response_class(self.dumps(obj), mimetype=self.mimetype)
