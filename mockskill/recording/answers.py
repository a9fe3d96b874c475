"""A provider's answer as a scenario step: status, headers and body as they came.

A JSON answer (by its ``Content-Type``) becomes ``json:``, another text one
``text:``; an answer that is not text, or that came encoded
(``Content-Encoding: gzip``, ``br`` ...), becomes ``body_base64:``, its exact
bytes, and keeps its ``Content-Encoding``, so a replay sends what the
provider sent. The type goes back as a ``Content-Type`` header where it is
not the step's own. The headers a step cannot hold — framing and hop-by-hop
ones, ``Date``, ``Server`` — are left out (the replay sends its own), and
secret ones (``Set-Cookie``, ...) named in the :class:`~.secrets.Secrets`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from typing import Any

from ..engine.exchange import Exchange
from ..scenario.bodies import BYTES_TYPE
from ..scenario.model import JSON_TYPE, TEXT_TYPE
from ..scenario.steps import SERVER_HEADERS
from .rebase import Rebase
from .secrets import Secrets, is_secret_header

DROPPED_ANSWER_HEADERS = frozenset({*SERVER_HEADERS, "date", "server", "content-type"})
"""Answer headers a step does not hold: the framing's (the replay frames its own), the
serving software's, and the type (a step says it with ``json:``/``text:``)."""
TEXT_TYPES = re.compile(
    r"^\s*(text/|[\w.-]+/([\w.+-]*\+)?(json|xml|javascript|ecmascript|yaml|graphql"
    r"|x-www-form-urlencoded)\b)|;\s*charset=",
    re.IGNORECASE,
)
"""Types whose bodies are text (kept as ``text:`` when they are UTF-8)."""


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
    encoded = any(
        name.lower() == "content-encoding" and value.strip().lower() not in ("", "identity")
        for name, value in exchange.response_headers
    )
    if body and not encoded and "json" in content_type.lower():
        with contextlib.suppress(ValueError, UnicodeDecodeError, RecursionError):
            step["json"] = secrets.answer_out(rewrite.value(json.loads(body)))
    if body and "json" not in step:
        text = _text(body) if not encoded and _is_text_type(content_type) else None
        if text is not None:
            step["text"] = rewrite.text(text)
        else:  # its bytes as they came: a replay sends them exactly
            step["body_base64"] = base64.b64encode(body).decode("ascii")
    default = JSON_TYPE if "json" in step else BYTES_TYPE if "body_base64" in step else TEXT_TYPE
    if content_type and content_type != default:
        headers["Content-Type"] = content_type
    if headers:
        step["headers"] = headers
    return step


def _is_text_type(content_type: str) -> bool:
    return not content_type.strip() or TEXT_TYPES.search(content_type) is not None


def _text(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None
