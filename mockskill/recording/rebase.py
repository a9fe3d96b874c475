"""The provider's URLs in a recorded answer, put back to ``{base_url}``.

A provider names itself in what it answers (a descriptor's ``endpoint.url``,
``details.endpoint_url``, ``Location``) as the proxy reached it (the
exchange's ``upstream``), or, if it reads the forwarded host, as the
consumer reached the proxy (its ``Host``). Either becomes ``{base_url}``, so
that a replay names itself wherever it is served.
"""

from __future__ import annotations

import re
from typing import Any

from ..engine.exchange import Exchange
from ..protocol.catalog import BASE_URL


class Rebase:
    """URLs of the provider (and of the proxy the consumer reached) back to ``{base_url}``."""

    def __init__(self, exchange: Exchange) -> None:
        bases = [exchange.upstream.rstrip("/")]
        for name, value in exchange.headers:
            if name.lower() == "host" and value:
                bases.append(f"http://{value}")
        found = [b for b in dict.fromkeys(bases) if b]
        # A base where a URL's authority ends: not http://host:80 inside http://host:8080.
        self._pattern = (
            re.compile(
                "(?:" + "|".join(re.escape(b) for b in found) + r")(?![A-Za-z0-9.:@\[\]_~%-])"
            )
            if found
            else None
        )

    def text(self, value: str) -> str:
        if self._pattern is None or "://" not in value:
            return value
        return self._pattern.sub(BASE_URL, value)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
