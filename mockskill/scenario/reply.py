"""A scripted answer, rendered once at load time: status, headers, body bytes.

:class:`Reply` is what a step answers with, and what the engine's own answers
(:mod:`mockskill.engine.replies`) are too. It stands apart from the rest of
the model because it is the one value everybody builds: the step reader, the
engine, the recording, the proxy's failure answers; and because it knows the
``{base_url}`` placeholders a reply may hold, filled in per request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol.catalog import (
    BASE_URL,
    REFUSED_BASE_URL,
    TLS_BASE_URL,
    Rendered,
    Retry,
)
from .templates import NotRendered, Reading, ReplyTemplate

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """A response, rendered at load time except for ``{base_url}``."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    content_type: str
    error_code: str | None = None
    """The protocol category (or ``MOCKSKILL_*`` code) when this is an error."""
    retry: Retry | None = None
    templated: bool = False
    """Whether body or headers hold ``{base_url}`` to fill in per request."""
    verbatim: bool = False
    """Whether the body is bytes sent as they are (``body_base64``, ``body_file``): no
    placeholder in it is filled in."""
    template: ReplyTemplate | None = None
    """What of it is made per request from ``{{...}}`` placeholders (:meth:`rendered`);
    None for most replies, which are sent as they are."""

    def rendered(self, reading: Reading) -> Reply | NotRendered:
        """This reply made for one request (its :attr:`template` rendered from *reading*),
        or why it cannot be."""
        template = self.template
        assert template is not None
        body = template.body_of(reading)
        if isinstance(body, NotRendered):
            return body
        headers = list(self.headers)
        for index, header in enumerate(template.headers):
            if header is not None:
                value = header.header(reading)
                if isinstance(value, NotRendered):
                    return value
                headers[index] = (headers[index][0], value)
        return Reply(
            self.status,
            tuple(headers),
            self.body if body is None else body,
            self.content_type,
            self.error_code,
            self.retry,
        )

    @classmethod
    def make(
        cls,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | tuple[tuple[str, str], ...] = (),
        *,
        error_code: str | None = None,
        retry: Retry | None = None,
        verbatim: bool = False,
    ) -> Reply:
        pairs = tuple(headers.items()) if isinstance(headers, Mapping) else tuple(headers)
        markers = (BASE_URL, REFUSED_BASE_URL, TLS_BASE_URL)
        templated = any(
            (not verbatim and m.encode() in body) or any(m in v for _, v in pairs) for m in markers
        )
        return cls(status, pairs, body, content_type, error_code, retry, templated, verbatim)

    @classmethod
    def json(cls, status: int, value: Any, headers: Mapping[str, str] | None = None) -> Reply:
        return cls.make(status, json.dumps(value).encode(), JSON_TYPE, headers or {})

    @classmethod
    def error(cls, rendered: Rendered) -> Reply:
        return cls.make(
            rendered.status,
            rendered.body.encode(),
            JSON_TYPE,
            rendered.headers,
            error_code=rendered.code,
            retry=rendered.retry,
        )
