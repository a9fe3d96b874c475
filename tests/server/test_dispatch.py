"""The loop's own answers are the ones the WSGI app's Werkzeug responses carried.

mockskill.server.dispatch makes mockskill's refusals (413, framing errors, 500) and
the CORS preflight as plan answers, without Werkzeug; they were Werkzeug
responses read whole, and must go on the wire byte for byte as those did.
Over the wire, a real server answers each refusal in the unified body and
journals it (the transport's rules themselves: tests/transport/test_framing.py).
"""

from __future__ import annotations

import json
import socket

import pytest
from werkzeug.wrappers import Response

from mockskill import Server
from mockskill.admin.browsers import CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, preflight
from mockskill.engine.actions import answer_of
from mockskill.engine.builtin_answers import error_answer, too_large
from mockskill.protocol.catalog import tool_error


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


# -- over the wire: a real server's refusals, in the unified body and the journal ------

SCENARIO = "name: s\nskills:\n  - id: echo\n"
"""One skill (a multi-line text: Server reads a one-line string as a path)."""

HEAD = b"POST /skills/echo/invoke HTTP/1.1\r\nHost: x\r\n"
REFUSED = {
    "negative-content-length": (HEAD + b"Content-Length: -1\r\n\r\n", 400),
    "exponent-content-length": (HEAD + b"Content-Length: 1e3\r\n\r\n", 400),
    "signed-content-length": (HEAD + b"Content-Length: +5\r\n\r\nhello", 400),
    "duplicate-content-length": (
        HEAD + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        400,
    ),
    "conflicting-content-length": (
        HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        400,
    ),
    "content-length-with-chunked": (
        HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    "bad-chunk-size": (HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
    "chunked-over-the-limit": (
        HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"400\r\n" + b"x" * 1024 + b"\r\n",
        413,
    ),
    "too-many-headers": (HEAD + b"X-A: b\r\n" * 200 + b"\r\n", 431),
    "too-many-trailer-fields": (
        HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n" + b"X-A: b\r\n" * 200,
        431,
    ),
    "no-host": (b"POST /skills/echo/invoke HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 400),
    "invalid-host": (
        b"POST /skills/echo/invoke HTTP/1.1\r\nHost: user@x\r\nContent-Length: 0\r\n\r\n",
        400,
    ),
    "http-2.0": (b"POST /skills/echo/invoke HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    "http-3.0": (b"POST /skills/echo/invoke HTTP/3.0\r\nHost: x\r\n\r\n", 505),
}


def refused_by(server: Server, data: bytes, *, half_close: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received  # the server closed the connection after it


def unified(received: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"\r\nConnection: close\r\n" in head + b"\r\n"
    error = json.loads(body)["error"]
    assert isinstance(error, dict)
    return int(head.split()[1]), error


@pytest.mark.parametrize(("data", "status"), REFUSED.values(), ids=REFUSED.keys())
def test_a_request_that_breaks_framing_or_limits_is_refused_in_the_unified_body_and_journalled(
    data: bytes, status: int
) -> None:
    with Server(SCENARIO, max_body_bytes=1000) as server:
        answered, error = unified(refused_by(server, data))
        assert answered == status
        assert error["code"] in (f"MOCKSKILL_HTTP_{status}", "MOCKSKILL_BODY_TOO_LARGE")
        (entry,) = server.journal()
        assert (entry.method, entry.path) == ("POST", "/skills/echo/invoke")
        assert (entry.status, entry.endpoint, entry.error_code) == (
            status,
            "refused",
            error["code"],
        )


def test_an_over_long_target_is_refused_414_and_journalled_with_its_method() -> None:
    with Server(SCENARIO) as server:
        answered, error = unified(
            refused_by(server, b"PUT /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        )
        assert (answered, error["code"]) == (414, "MOCKSKILL_HTTP_414")
        (entry,) = server.journal()
        assert (entry.method, entry.status, entry.endpoint) == ("PUT", 414, "refused")


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (HEAD + b"Content-Length: 10\r\n\r\nhello", "body"),
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel", "body"),
        (HEAD + b"X-Trace: 7\r\n", "head"),
    ],
    ids=["body-by-its-length", "chunked-body", "head"],
)
def test_a_request_cut_short_is_refused_400_and_journalled(data: bytes, what: str) -> None:
    with Server(SCENARIO) as server:
        answered, error = unified(refused_by(server, data, half_close=True))
        assert answered == 400
        assert error["message"] == f"bad request: the request {what} was cut short"
        (entry,) = server.journal()
        assert (entry.method, entry.path, entry.status) == ("POST", "/skills/echo/invoke", 400)


LOCKED = (
    "name: s\nauth: {tokens: [{token: good, scopes: [run]}]}\n"
    "skills:\n  - id: locked\n    requires: {scopes: [run]}\n"
)
CHUNKED = (
    b"POST /skills/locked/invoke HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Connection: close\r\n"
)


def test_a_trailer_field_never_acts_as_a_request_header() -> None:
    # RFC 9110 6.5.1: a trailer is not merged into the header section.
    credentials = b"Authorization: Bearer good\r\nMockskill-Session: other\r\n"
    with Server(LOCKED) as server:
        in_the_head = refused_by(server, CHUNKED + credentials + b"\r\n2\r\n{}\r\n0\r\n\r\n")
        assert in_the_head.startswith(b"HTTP/1.1 200 ")
        as_trailers = refused_by(server, CHUNKED + b"\r\n2\r\n{}\r\n0\r\n" + credentials + b"\r\n")
        assert as_trailers.startswith(b"HTTP/1.1 401 ")
        assert [e.status for e in server.journal(session="other")] == [200]
        assert [e.status for e in server.journal(session="default")] == [401]


def test_an_upgrade_requests_body_is_its_body_never_a_second_request() -> None:
    # mockskill upgrades to nothing: the request is processed as usual (RFC 9110 7.8).
    smuggled = b"GET /skills/locked HTTP/1.1\r\nHost: x\r\n\r\n"
    with Server(SCENARIO) as server:
        received = refused_by(
            server,
            HEAD
            + b"Connection: Upgrade\r\nUpgrade: h2c\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(smuggled)
            + smuggled
            + b"GET /skills HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert received.count(b"HTTP/1.1 ") == 2
        journalled = [(e.method, e.path) for e in server.journal()]
        assert journalled == [("POST", "/skills/echo/invoke"), ("GET", "/skills")]


def test_a_slow_head_is_refused_408_and_journalled() -> None:
    with Server(SCENARIO, header_timeout=0.3) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(HEAD)  # and nothing more: a slowloris
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        answered, error = unified(received)
        assert (answered, error["code"]) == (408, "MOCKSKILL_HTTP_408")
        (entry,) = server.journal()
        assert (entry.method, entry.path, entry.status) == ("POST", "/skills/echo/invoke", 408)
