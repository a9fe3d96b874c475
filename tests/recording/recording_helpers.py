"""Exchanges as a proxy hands them to a recording, built for the recording tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from mockskill import Server
from mockskill.engine.exchange import Exchange

UP = "http://127.0.0.1:9"
JSON = (("Content-Type", "application/json"),)


def exchange(
    method: str,
    target: str,
    answer: Any = None,
    *,
    status: int = 200,
    body: Any = b"",
    headers: tuple[tuple[str, str], ...] = (),
    response_headers: tuple[tuple[str, str], ...] = JSON,
    text: bytes | None = None,
    ms: float = 3.0,
    session: str = "default",
) -> Exchange:
    """One proxied exchange: a JSON *answer* (or raw *text*), a JSON or raw request *body*."""
    sent = body if isinstance(body, bytes) else json.dumps(body).encode()
    answered = text if text is not None else b"" if answer is None else json.dumps(answer).encode()
    return Exchange(
        at=1_700_000_000.0,
        session=session,
        method=method,
        target=target,
        headers=(("Host", "127.0.0.1:8080"), ("User-Agent", "test"), *headers),
        body=sent,
        upstream=UP,
        status=status,
        response_headers=response_headers,
        response_body=answered,
        truncated=False,
        upstream_ms=ms,
    )


def descriptor(skill: str) -> dict[str, Any]:
    return {
        "protocol_version": "1.0.0",
        "id": skill,
        "name": skill.title(),
        "version": "1.0.0",
        "capability_type": "api",
        "endpoint": {"url": f"{UP}/skills/{skill}/invoke", "method": "POST"},
        "auth": {"type": "none"},
    }


UNREACHABLE = {
    "error": {
        "code": "ENDPOINT_UNREACHABLE",
        "message": "Failed to connect to skill endpoint",
        "details": {"endpoint_url": f"{UP}/skills/flaky/invoke", "reason": "Connection refused"},
        "retry": {"suggested_delay_ms": 2000, "max_attempts": 5},
    }
}


@pytest.fixture
def replay() -> Iterator[Any]:
    """``replay(text)``: a started Server on a written file (stopped after the test)."""
    servers: list[Server] = []

    def start(text: str) -> Server:
        server = Server(text).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
