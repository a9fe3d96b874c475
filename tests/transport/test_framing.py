"""Strict framing, limits and timeouts, each proven on a raw socket.

A request the transport cannot read is refused through the handler (its
body here: ``{"status", "reason"}``), the connection closed after the
answer, and the refusal reported once for the journal.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from transport_helpers import (
    LOOPS,
    Recorder,
    connect,
    elapsed,
    exchange,
    is_closed,
    parse,
    read_until_closed,
    send_until_refused,
    serving,
)

from mockskill.transport import Refusal, Request


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


BAD_FRAMING = {
    "negative-content-length": b"Content-Length: -1\r\n\r\n",
    "exponent-content-length": b"Content-Length: 1e3\r\n\r\n",
    "signed-content-length": b"Content-Length: +5\r\n\r\nhello",
    "listed-content-length": b"Content-Length: 5, 5\r\n\r\nhello",
    "duplicate-content-length": b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "conflicting-content-length": b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "content-length-with-chunked": (
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    ),
    "bad-chunk-size": b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "unknown-transfer-encoding": b"Transfer-Encoding: gzip\r\n\r\nhello",
    "two-hosts": b"Host: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("tail", BAD_FRAMING.values(), ids=BAD_FRAMING.keys())
def test_bad_framing_is_refused_with_400_then_closed(loop: str, tail: bytes) -> None:
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, b"POST /invoke HTTP/1.1\r\nHost: x\r\n" + tail)
        assert [a.status for a in answers] == [400]
        assert answers[0].header("Connection") == "close"
        assert answers[0].json()["status"] == 400
        ((refusal, outcome),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.status == 400
        assert refusal.reason == answers[0].json()["reason"]
        assert outcome.closed
        assert not [e for e, _ in recorder.exchanges if isinstance(e, Request)]


CODED_BEFORE_CHUNKED = {
    "gzip-then-chunked": b"Transfer-Encoding: gzip, chunked\r\n",
    "unknown-then-chunked": b"Transfer-Encoding: x-foo,chunked\r\n",
    "coding-on-a-line-of-its-own": b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
}


@pytest.mark.parametrize("te", CODED_BEFORE_CHUNKED.values(), ids=CODED_BEFORE_CHUNKED.keys())
def test_a_transfer_coding_before_chunked_is_501_not_passed_on_still_coded(
    loop: str, te: bytes
) -> None:
    # RFC 9112 6.1: a server that receives a transfer coding it does not understand
    # SHOULD answer 501. llhttp frames the chunks, but nothing would undo the gzip.
    with serving(loop=loop) as (server, recorder):
        answers = exchange(
            server, b"POST /invoke HTTP/1.1\r\nHost: x\r\n" + te + b"\r\n2\r\n{}\r\n0\r\n\r\n"
        )
        assert [a.status for a in answers] == [501]
        assert answers[0].header("Connection") == "close"
        assert "is not supported (chunked is)" in answers[0].json()["reason"]
        ((refusal, outcome),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert (refusal.status, refusal.method) == (501, "POST")
        assert outcome.closed


@pytest.mark.parametrize("te", [b"chunked", b"Chunked", b"CHUNKED"])
def test_chunked_alone_in_any_case_is_read(loop: str, te: bytes) -> None:
    with serving(loop=loop) as (server, _):
        body = b"2\r\n{}\r\n0\r\n\r\n"
        answers = exchange(
            server,
            b"POST /invoke HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
            + te
            + b"\r\n\r\n"
            + body
            + b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert [a.status for a in answers] == [200, 200]


def test_a_refusal_names_what_was_wrong(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server, b"POST / HTTP/1.1\r\nHost: x\r\n" + BAD_FRAMING["duplicate-content-length"]
        )
        assert answers[0].json()["reason"] == "Duplicate Content-Length"


def test_a_refusal_keeps_what_was_parsed_for_the_journal(loop: str) -> None:
    with serving(loop=loop) as (server, recorder):
        exchange(
            server,
            b"POST /skills/a/invoke HTTP/1.1\r\nHost: x\r\nX-Trace: 7\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        )
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert (refusal.method, refusal.target) == ("POST", "/skills/a/invoke")
        assert ("X-Trace", "7") in refusal.headers


@pytest.mark.parametrize("tail", BAD_FRAMING.values(), ids=BAD_FRAMING.keys())
def test_a_refusal_keeps_the_method_and_target_however_early_it_came(
    loop: str, tail: bytes
) -> None:
    # Most of these are refused by the parser inside the head, before it is complete:
    # the method was read all the same, and the journal says POST, not a default.
    with serving(loop=loop) as (server, recorder):
        exchange(server, b"POST /skills/a/invoke HTTP/1.1\r\nHost: x\r\n" + tail)
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert (refusal.method, refusal.target) == ("POST", "/skills/a/invoke")


def test_a_head_cut_short_keeps_its_method_and_target(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(b"PUT /skills/a/invoke HTTP/1.1\r\nHost: x\r\nX-Trace: 7\r\n")
        sock.shutdown(socket.SHUT_WR)
        read_until_closed(sock)
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.reason == "the request head was cut short"
        assert (refusal.method, refusal.target) == ("PUT", "/skills/a/invoke")


def test_requests_before_a_bad_one_are_answered_first_in_order(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        )
        assert [a.status for a in answers] == [200, 200, 400]
        assert [a.json().get("target") for a in answers[:2]] == ["/one", "/two"]


def test_a_body_cut_short_by_a_half_close_is_answered_400(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
        sock.shutdown(socket.SHUT_WR)
        answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [400]
        assert answers[0].json()["reason"] == "the request body was cut short"
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)


def test_a_body_cut_short_by_a_reset_is_still_reported(loop: str) -> None:
    with serving(loop=loop) as (server, recorder):
        with connect(server) as sock:
            sock.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
            time.sleep(0.1)  # the server has read the head (test pacing, not product code)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        ((refusal, outcome),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.reason == "the request body was cut short"
        assert refusal.target == "/x"
        assert outcome.answer is None
        assert outcome.client_left_at is not None


def test_a_chunked_body_cut_short_is_answered_400(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
        sock.shutdown(socket.SHUT_WR)
        assert [a.status for a in parse(read_until_closed(sock))] == [400]


def test_an_over_long_target_is_414(loop: str) -> None:
    with serving(loop=loop, max_target=100) as (server, recorder):
        answers = exchange(server, b"PUT /" + b"a" * 200 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert [a.status for a in answers] == [414]
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.status == 414
        assert refusal.method == "PUT"  # the target is not kept; its method is


def test_a_target_at_the_limit_is_served(loop: str) -> None:
    with serving(loop=loop, max_target=100) as (server, _):
        answers = exchange(
            server, b"GET /" + b"a" * 99 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert [a.status for a in answers] == [200]


def test_an_endless_target_is_414_without_being_buffered(loop: str) -> None:
    with serving(loop=loop, max_target=1000) as (server, _), connect(server) as sock:
        sock.sendall(b"GET /")
        # The server answers, closes, and stops reading long before 10 MB went.
        assert send_until_refused(sock, (b"a" * 1000 for _ in range(10_000))) < 10_000_000
        assert [a.status for a in parse(read_until_closed(sock))] == [414]


def test_over_large_headers_are_431(loop: str) -> None:
    with serving(loop=loop, max_head=1000) as (server, _):
        answers = exchange(
            server, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 2000 + b"\r\n\r\n"
        )
        assert [a.status for a in answers] == [431]


def test_too_many_headers_are_431(loop: str) -> None:
    with serving(loop=loop, max_headers=10) as (server, _):
        headers = b"".join(b"X-%d: v\r\n" % i for i in range(11))
        answers = exchange(server, b"GET / HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        assert [a.status for a in answers] == [431]
        assert answers[0].json()["reason"] == "the request has more than 10 headers"


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(loop: str) -> None:
    with serving(loop=loop, max_body=1000) as (server, recorder), connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n")
        # Answered without a byte of the body sent: it was never waited for.
        assert [a.status for a in parse(read_until_closed(sock))] == [413]
        assert not [e for e, _ in recorder.exchanges if isinstance(e, Request)]


def test_a_chunked_body_is_counted_while_read_413(loop: str) -> None:
    """The limit holds whatever the framing: a chunked body is refused once past it."""
    with serving(loop=loop, max_body=10_000) as (server, recorder), connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunks = (b"3e8\r\n" + b"x" * 1000 + b"\r\n" for _ in range(50_000))
        assert send_until_refused(sock, chunks) < 10_000_000  # refused long before 50 MB
        assert [a.status for a in parse(read_until_closed(sock))] == [413]
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.status == 413


def test_a_small_content_length_cannot_smuggle_a_large_chunked_body(loop: str) -> None:
    with serving(loop=loop, max_body=1000) as (server, _):
        answers = exchange(
            server,
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"7d0\r\n"
            + b"x" * 2000
            + b"\r\n0\r\n\r\n",
        )
        assert [a.status for a in answers] == [400]


def test_a_body_at_the_limit_is_served(loop: str) -> None:
    with serving(loop=loop, max_body=1000) as (server, _):
        answers = exchange(
            server,
            b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1000\r\n\r\n"
            + b"x" * 1000,
        )
        assert [a.status for a in answers] == [200]
        assert len(answers[0].json()["body"]) == 1000  # type: ignore[arg-type]


def test_a_slow_head_is_408_then_closed(loop: str) -> None:
    """Slowloris: a head not complete within the header timeout."""
    with serving(loop=loop, header_timeout=0.5) as (server, recorder), connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [408]
        assert 0.4 <= elapsed(started) < 3.0
        ((refusal, _),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert refusal.status == 408


def test_a_head_trickled_byte_by_byte_still_times_out(loop: str) -> None:
    # A send fails once the lingering close after the 408 is over: a short linger, so that
    # the trickle ends well before its last byte (6 s of them) but soon after the refusal.
    limits = {"header_timeout": 0.5, "linger": 0.5}
    with serving(loop=loop, **limits) as (server, _), connect(server) as sock:
        started = time.monotonic()
        trickle = (bytes([b]) for b in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 100)
        send_until_refused(sock, trickle, pause=0.05)
        assert elapsed(started) < 3.0
        assert [a.status for a in parse(read_until_closed(sock))] == [408]


def test_a_paused_body_is_408(loop: str) -> None:
    with serving(loop=loop, header_timeout=0.5) as (server, _), connect(server) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhel")
        assert [a.status for a in parse(read_until_closed(sock))] == [408]


def test_a_body_trickled_steadily_is_408_at_the_whole_body_deadline(loop: str) -> None:
    """Each pause is under the header timeout; the body as a whole is too slow."""
    limits = {"header_timeout": 0.5, "body_timeout": 1.0}
    with serving(loop=loop, **limits) as (server, recorder), connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        sock.settimeout(0.1)  # the pause between bytes, and the look for an answer
        got = b""
        for _ in range(100):  # 10 s of trickle at most
            try:
                sock.sendall(b"x")
                got = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            break
        assert 0.9 <= elapsed(started) < 4.0
        answers = parse(got + read_until_closed(sock))
        assert [a.status for a in answers] == [408]
        ((refusal, outcome),) = recorder.wait_for(1)
        assert isinstance(refusal, Refusal)
        assert (refusal.status, refusal.reason) == (408, "the request body took more than 1 s")
        assert outcome.closed


def test_an_idle_kept_alive_connection_is_closed_quietly(loop: str) -> None:
    with serving(loop=loop, keep_alive=0.5) as (server, recorder), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [200]
        assert answers[0].header("Connection") is None  # kept alive, then closed idle
        assert 0.4 <= elapsed(started) < 3.0
        assert len(recorder.wait_for(1)) == 1  # no refusal: idle is not an error


def test_a_connection_that_never_speaks_is_closed_after_the_keep_alive(loop: str) -> None:
    with serving(loop=loop, keep_alive=0.5) as (server, recorder), connect(server) as sock:
        assert is_closed(sock, timeout=3.0)
        assert recorder.exchanges == []


def test_framing_headers_are_read_in_any_case_however_many_names_came_before(
    loop: str,
) -> None:
    from mockskill.transport import rules

    spellings = (b"Content-Length", b"CONTENT-LENGTH", b"content-length", b"cOnTeNt-LeNgTh")
    with serving(loop=loop) as (server, _):
        for n in range(rules.MAX_KINDS + 8):  # invented names: the names' table starts afresh
            spelling = spellings[n % len(spellings)]
            head = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Invented-%d: v\r\n" % n
            answers = exchange(server, head + spelling + b": 5\r\n\r\nhello")
            assert [a.status for a in answers] == [200]
            assert answers[0].json()["body"] == "hello"
            assert len(rules.KINDS) <= rules.MAX_KINDS
        doubled = b"Content-Length: 5\r\nCONTENT-LENGTH: 5\r\n\r\nhello"
        assert [
            a.status for a in exchange(server, b"POST / HTTP/1.1\r\nHost: x\r\n" + doubled)
        ] == [400]


def _requests(recorder: Recorder, count: int) -> list[Request]:
    return [e for e, _ in recorder.wait_for(count) if isinstance(e, Request)]


def _refusal(recorder: Recorder) -> Refusal:
    ((refusal, outcome),) = recorder.wait_for(1)
    assert isinstance(refusal, Refusal)
    assert outcome.closed
    return refusal


# -- trailer fields (RFC 9110 6.5.1): bounded like the head, never headers -----------------

CHUNKED = b"POST /invoke HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
"""A chunked request up to its trailer section."""
NEXT = b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def test_trailer_fields_are_read_past_and_never_become_request_headers(loop: str) -> None:
    trailers = b"Authorization: Bearer t\r\nMockskill-Session: s\r\nMockskill-Error: 503\r\n"
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, CHUNKED + trailers + b"\r\n" + NEXT)
        assert [a.status for a in answers] == [200, 200]
        assert answers[0].json()["body"] == "{}"
        first, _ = _requests(recorder, 2)
        assert first.headers == (("Host", "x"), ("Transfer-Encoding", "chunked"))
        assert first.header("Authorization") is None


@pytest.mark.parametrize(("trailers", "status"), [(8, 200), (9, 431)], ids=["at", "over"])
def test_trailer_fields_count_with_the_heads_against_the_field_limit(
    loop: str, trailers: int, status: int
) -> None:
    fields = b"".join(b"X-T%d: v\r\n" % i for i in range(trailers))  # and 2 in the head
    with serving(loop=loop, max_headers=10) as (server, recorder):
        answers = exchange(server, CHUNKED + fields + b"\r\n" + NEXT)
        assert [a.status for a in answers] == ([200, 200] if status == 200 else [431])
        if status == 431:
            assert answers[0].header("Connection") == "close"
            reason = "the request has more than 10 header and trailer fields"
            assert answers[0].json()["reason"] == reason
            refusal = _refusal(recorder)
            assert (refusal.status, refusal.method, refusal.target) == (431, "POST", "/invoke")


def test_trailer_fields_count_with_the_heads_against_the_byte_limit(loop: str) -> None:
    with serving(loop=loop, max_head=1000) as (server, recorder):
        answers = exchange(server, CHUNKED + b"X-Big: " + b"b" * 1000 + b"\r\n\r\n")
        assert [a.status for a in answers] == [431]
        reason = "the request's header and trailer fields exceed 1000 bytes"
        assert answers[0].json()["reason"] == reason
        assert _refusal(recorder).status == 431


def test_an_endless_trailer_field_is_431_without_being_buffered(loop: str) -> None:
    with serving(loop=loop, max_head=1000) as (server, _), connect(server) as sock:
        sock.sendall(CHUNKED + b"X-Endless: ")
        # The server answers, closes, and stops reading long before 10 MB went.
        assert send_until_refused(sock, (b"v" * 1000 for _ in range(10_000))) < 10_000_000
        assert [a.status for a in parse(read_until_closed(sock))] == [431]


def test_endless_trailer_fields_are_431_without_being_kept(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(CHUNKED)
        fields = (b"".join(b"X-%d: v\r\n" % i for i in range(100)) for _ in range(10_000))
        assert send_until_refused(sock, fields) < 10_000_000
        assert [a.status for a in parse(read_until_closed(sock))] == [431]


# -- Upgrade (RFC 9110 7.8): nothing is upgraded to; the request is one request ----------

UPGRADE = b"POST /invoke HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
UPGRADE_BODIES = {
    "by-its-length": b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED,
    "chunked": (
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(SMUGGLED)
        + SMUGGLED
        + b"\r\n0\r\nX-Trailer: t\r\n\r\n"
    ),
}


@pytest.mark.parametrize("body", UPGRADE_BODIES.values(), ids=UPGRADE_BODIES.keys())
def test_an_upgrade_request_is_read_whole_its_body_never_a_request(loop: str, body: bytes) -> None:
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, UPGRADE + body + NEXT)
        assert [a.json()["target"] for a in answers] == ["/invoke", "/next"]
        assert answers[0].json()["body"] == SMUGGLED.decode()
        first, second = _requests(recorder, 2)
        assert first.body == SMUGGLED
        assert first.header("X-Trailer") is None
        assert second.target == "/next"


def test_an_upgrade_requests_body_is_held_to_the_body_limit(loop: str) -> None:
    with serving(loop=loop, max_body=100) as (server, recorder):
        chunk = b"c8\r\n" + b"x" * 200 + b"\r\n0\r\n\r\n"
        answers = exchange(server, UPGRADE + b"Transfer-Encoding: chunked\r\n\r\n" + chunk + NEXT)
        assert [a.status for a in answers] == [413]
        assert _refusal(recorder).target == "/invoke"


# -- RFC 9112: Host, versions, Content-Length ----------------------------------------------


def test_an_http_1_1_request_without_host_is_400(loop: str) -> None:
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, b"GET /h HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert [a.status for a in answers] == [400]
        assert answers[0].header("Connection") == "close"
        assert answers[0].json()["reason"] == "an HTTP/1.1 request must have a Host header"
        refusal = _refusal(recorder)
        assert (refusal.status, refusal.method, refusal.target) == (400, "GET", "/h")


def test_an_http_1_0_request_without_host_is_served(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        assert [a.status for a in exchange(server, b"GET / HTTP/1.0\r\n\r\n")] == [200]


INVALID_HOSTS = {
    "whitespace": b"mock internal",
    "tab": b"mock\tinternal",
    "userinfo": b"user:secret@mock.internal",
    "path": b"mock.internal/skills",
    "query": b"mock.internal?x=1",
    "fragment": b"mock.internal#x",
    "a-list": b"a.test, b.test",
    "not-ascii": "hôte.test".encode(),
    "backslash": b"mock\\internal",
    "port-not-a-number": b"mock.internal:80a",
    "two-ports": b"mock.internal:80:81",
    "ipv6-not-closed": b"[::1",
    "ipv6-not-an-address": b"[1:2:3]:8080",
    "ipv6-without-brackets-and-port": b"::1:8080",
    "percent-not-hex": b"mock%zzinternal",
}


@pytest.mark.parametrize("host", INVALID_HOSTS.values(), ids=INVALID_HOSTS.keys())
def test_an_invalid_host_is_400(loop: str, host: bytes) -> None:
    # RFC 9112 3.2: Host = uri-host [ ":" port ], RFC 3986's authority without userinfo.
    with serving(loop=loop) as (server, recorder):
        for version in (b"1.1", b"1.0"):
            request = b"GET /h HTTP/" + version + b"\r\nHost: " + host + b"\r\n\r\n"
            answers = exchange(server, request)
            assert [a.status for a in answers] == [400]
            reason = f"Host {host.decode('latin-1')!r} is not a host, or a host and a port"
            assert answers[0].json()["reason"] == reason
        assert [r.status for r, _ in recorder.refusals()] == [400, 400]


VALID_HOSTS = {
    "name-and-port": b"localhost:8080",
    "ipv4-and-port": b"127.0.0.1:54321",
    "ipv6-and-port": b"[::1]:8080",
    "ipv6-long": b"[2001:db8::ff00:42:8329]",
    "ipvfuture": b"[v1.fe80::a+en1]",
    "internal-name": b"mock.internal",
    "upper-case": b"MOCK.Internal",
    "underscore-and-percent": b"my_mock%2Dhost",
    "trailing-whitespace": b"mock.internal \t",
    "empty-port": b"mock.internal:",
    "empty": b"",  # RFC 9112 3.2: a target without an authority
}


@pytest.mark.parametrize("host", VALID_HOSTS.values(), ids=VALID_HOSTS.keys())
def test_a_valid_host_is_served(loop: str, host: bytes) -> None:
    with serving(loop=loop) as (server, _):
        request = b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
        assert [a.status for a in exchange(server, request)] == [200]


@pytest.mark.parametrize("version", ["2.0", "3.0", "0.9", "9.9"])
def test_a_version_it_does_not_speak_is_505(loop: str, version: str) -> None:
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, b"GET /v HTTP/%s\r\nHost: x\r\n\r\n" % version.encode())
        assert [a.status for a in answers] == [505]
        assert answers[0].header("Connection") == "close"
        reason = f"mockskill speaks HTTP/1.1 and HTTP/1.0, not HTTP/{version}"
        assert answers[0].json()["reason"] == reason
        refusal = _refusal(recorder)
        assert (refusal.status, refusal.method, refusal.target) == (505, "GET", "/v")


def test_a_version_refused_after_requests_to_the_same_target_is_505(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET /v HTTP/1.1\r\nHost: x\r\n\r\n" * 2 + b"GET /v HTTP/3.0\r\nHost: x\r\n\r\n",
        )
        assert [a.status for a in answers] == [200, 200, 505]


@pytest.mark.parametrize("space", [b" ", b"\t", b" \t "])
def test_a_content_length_followed_by_whitespace_is_its_number(loop: str, space: bytes) -> None:
    # RFC 9110 5.5: the whitespace around a field value is not part of it.
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server,
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5" + space + b"\r\n\r\nhello" + NEXT,
        )
        assert [a.status for a in answers] == [200, 200]
        assert answers[0].json()["body"] == "hello"
