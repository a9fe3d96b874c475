"""The loop's own answers are the ones the WSGI app's Werkzeug responses carried.

mockskill.surface makes mockskill's refusals (413, framing errors, 500) and
the CORS preflight as plan answers, without Werkzeug; they were Werkzeug
responses read whole, and must go on the wire byte for byte as those did.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from mockskill.engine.actions import answer_of
from mockskill.protocol.catalog import tool_error
from mockskill.surface import (
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    error_answer,
    preflight,
    too_large,
)


def test_an_error_goes_out_as_its_werkzeug_response_did() -> None:
    rendered = tool_error(400, "MOCKSKILL_HTTP_400", "bad request: no", {"a": 1})
    response = Response(rendered.body, status=400, content_type="application/json")
    answer = error_answer(400, "MOCKSKILL_HTTP_400", "bad request: no", {"a": 1})
    assert answer.wires == answer_of(response).wires


def test_the_body_limit_names_the_limit() -> None:
    answer = too_large(1024)
    assert answer.status == 413
    assert b'"max_body_bytes": 1024' in answer.body
    assert b"MOCKSKILL_BODY_TOO_LARGE" in answer.body


def test_the_preflight_goes_out_as_its_werkzeug_response_did() -> None:
    response = Response(status=204)
    response.headers["Access-Control-Allow-Origin"] = "*"
    response.headers["Access-Control-Allow-Methods"] = CORS_ALLOW_METHODS
    response.headers["Access-Control-Allow-Headers"] = CORS_ALLOW_HEADERS
    response.headers["Access-Control-Max-Age"] = "600"
    assert preflight().wires == answer_of(response).wires
