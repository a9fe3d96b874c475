"""A provider's answer as a scenario step: status, headers and body as they came.

A JSON answer (by its ``Content-Type``) becomes ``json:``, anything else
``text:``; the type goes back as a ``Content-Type`` header where it is not
the step's own. The headers a step cannot hold — framing and hop-by-hop
ones, ``Date``, ``Server`` — are left out (the replay sends its own), and
secret ones (``Set-Cookie``, ...) named in the :class:`~.secrets.Secrets`.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ..engine.exchange import Exchange
from ..scenario.model import JSON_TYPE, TEXT_TYPE
from ..scenario.steps import SERVER_HEADERS
from .rebase import Rebase
from .secrets import Secrets, is_secret_header

DROPPED_ANSWER_HEADERS = frozenset({*SERVER_HEADERS, "date", "server", "content-type"})
"""Answer headers a step does not hold: the framing's (the replay frames its own), the
serving software's, and the type (a step says it with ``json:``/``text:``)."""


def answer_step(
    exchange: Exchange, rewrite: Rebase, secrets: Secrets, notes: dict[str, None]
) -> dict[str, Any]:
    """The result step that answers as *exchange*'s provider did (secrets out, URLs rebased);
    what it could not keep as it came goes into *notes*."""
    step: dict[str, Any] = {}
    if exchange.status != 200:
        step["status"] = exchange.status
    headers: dict[str, str] = {}
    content_type = ""
    for name, value in exchange.response_headers:
        lower = name.lower()
        if lower == "content-type":
            content_type = value
        elif is_secret_header(name):
            secrets.header(name)
        elif lower not in DROPPED_ANSWER_HEADERS:
            value = rewrite.text(value)
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    body = exchange.response_body
    if exchange.truncated:
        notes.setdefault("some answers were longer than the recording keeps: their bodies are cut")
    if body and "json" in content_type.lower():
        with contextlib.suppress(ValueError, UnicodeDecodeError, RecursionError):
            step["json"] = secrets.answer_out(rewrite.value(json.loads(body)))
    if body and "json" not in step:
        try:
            step["text"] = rewrite.text(body.decode("utf-8"))
        except UnicodeDecodeError:
            step["text"] = body.decode("utf-8", "replace")
            notes.setdefault("binary answers are kept as text (bad bytes replaced)")
    default = JSON_TYPE if "json" in step else TEXT_TYPE
    if content_type and content_type != default and (body or content_type):
        headers["Content-Type"] = content_type
    if headers:
        step["headers"] = headers
    return step
