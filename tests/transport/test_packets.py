"""Requests as the packets bring them: split anywhere, or several in one.

The reader does the most per request when a request arrives whole, and the
rest (limits, deadlines) only when a packet ends inside one: these tests
pin what that split must not change — a head or a body in many packets is
read whole, several requests with bodies in one packet are each read apart,
a limit is enforced while a head is still coming, and the HTTP version
(read cheaply when no ``Connection`` header colours it) decides keep-alive.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from transport_helpers import LOOPS, connect, exchange, is_closed, parse, read_until_closed, serving

from mockskill.transport import Request


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def send_in_pieces(sock: socket.socket, data: bytes, size: int = 1, pause: float = 0.002) -> None:
    """*data* in pieces of *size* bytes, each its own packet (no Nagle, a pause between)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(0, len(data), size):
        sock.sendall(data[i : i + size])
        time.sleep(pause)


def requests_of(recorder_exchanges: list[tuple[object, object]]) -> list[Request]:
    return [e for e, _ in recorder_exchanges if isinstance(e, Request)]


HEAD = (
    b"POST /skills/a%20b/invoke?x=1 HTTP/1.1\r\nHost: example.test\r\n"
    b"X-Long-Header-Name: a value, with commas; and more\r\n"
    b"Content-Type: application/json\r\nContent-Length: 13\r\n\r\n"
)


def test_a_request_sent_byte_by_byte_is_read_whole(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        send_in_pieces(sock, HEAD + b'{"a": "bcde"}')
        sock.shutdown(socket.SHUT_WR)
        answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [200]
        (request,) = requests_of(recorder.wait_for(1))
        assert request.method == "POST"
        assert request.target == "/skills/a%20b/invoke?x=1"
        assert request.version == "1.1"
        assert request.raw_headers == (
            (b"Host", b"example.test"),
            (b"X-Long-Header-Name", b"a value, with commas; and more"),
            (b"Content-Type", b"application/json"),
            (b"Content-Length", b"13"),
        )
        assert request.body == b'{"a": "bcde"}'


UPGRADE_THEN_NEXT = (
    b"POST /up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    b"1a\r\nGET /smuggled HTTP/1.1\r\n\r\n\r\n0\r\nX-Trailer: split\r\n\r\n"
    b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
)


@pytest.mark.parametrize("size", [1, 7, 64])
def test_an_upgrade_request_in_pieces_is_read_whole_with_its_body_and_trailer(
    loop: str, size: int
) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        send_in_pieces(sock, UPGRADE_THEN_NEXT, size=size)
        answers = parse(read_until_closed(sock))
        assert [a.json()["target"] for a in answers] == ["/up", "/next"]
        first, _ = requests_of(recorder.wait_for(2))
        assert first.body == b"GET /smuggled HTTP/1.1\r\n\r\n"
        assert [name for name, _ in first.raw_headers] == [
            b"Host",
            b"Connection",
            b"Upgrade",
            b"Transfer-Encoding",
        ]


def test_pipelined_requests_with_bodies_in_one_packet_are_each_read_apart(loop: str) -> None:
    data = (
        b"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"POST /two HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nde\r\n1\r\nf\r\n0\r\n\r\n"
        b"POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        b"GET /four HTTP/1.1\r\nHost: x\r\n\r\n"
        b"PUT /five HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nghij"
    )
    with serving(loop=loop) as (server, recorder):
        answers = exchange(server, data)
        assert [a.json()["body"] for a in answers] == ["abc", "def", "", "", "ghij"]
        requests = requests_of(recorder.wait_for(5))
        assert [r.target for r in requests] == ["/one", "/two", "/three", "/four", "/five"]
        assert [r.body for r in requests] == [b"abc", b"def", b"", b"", b"ghij"]
        assert all(type(r.body) is bytes for r in requests)
        assert [r.index for r in requests] == [1, 2, 3, 4, 5]


def test_a_pipelined_request_split_across_packets_is_read_whole(loop: str) -> None:
    first = b"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    second = (
        b"POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nConnection: close\r\n\r\n"
        b"hello world"
    )
    cut = len(first) + len(second) - 8  # the second's head and part of its body first
    data = first + second
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(data[:cut])
        time.sleep(0.05)
        sock.sendall(data[cut:])
        answers = parse(read_until_closed(sock))
        assert [a.json()["body"] for a in answers] == ["hello", "hello world"]
        assert [r.body for r in requests_of(recorder.wait_for(2))] == [b"hello", b"hello world"]


def test_too_many_headers_are_431_while_the_head_is_still_coming(loop: str) -> None:
    # The head never ends: only a check made as its packets come can refuse it
    # (the head's timeout, far off, would answer 408).
    with serving(loop=loop, max_headers=10, header_timeout=60) as (server, recorder):
        with connect(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            for i in range(30):
                try:
                    send_in_pieces(sock, b"X-%d: v\r\n" % i, size=64)
                except (BrokenPipeError, ConnectionResetError):
                    break
            answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [431]
        assert answers[0].json()["reason"] == "the request has more than 10 headers"
        ((refusal, _),) = recorder.wait_for(1)
        assert len(refusal.headers) <= 12  # refused a packet after the limit, not at the end


def test_over_large_headers_are_431_while_the_head_is_still_coming(loop: str) -> None:
    with serving(loop=loop, max_head=1000, header_timeout=60) as (server, _):
        with connect(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            for i in range(60):
                try:
                    send_in_pieces(sock, b"X-Header-%02d: %s\r\n" % (i, b"v" * 40), size=64)
                except (BrokenPipeError, ConnectionResetError):
                    break
            answers = parse(read_until_closed(sock))
        assert [a.status for a in answers] == [431]
        assert answers[0].json()["reason"] == "the request headers exceed 1000 bytes"


LIMITS = {
    # (max_headers, max_head less) -> the reason, or None: served
    "at-both-limits": (10, 0, None),
    "a-byte-over-the-size": (10, 1, "the request headers exceed {size} bytes"),
    "a-header-over-the-count": (9, 0, "the request has more than 9 headers"),
}


@pytest.mark.parametrize("case", LIMITS.values(), ids=LIMITS.keys())
def test_the_header_limits_are_exact_for_a_head_in_one_packet(
    loop: str, case: tuple[int, int, str | None]
) -> None:
    max_headers, less, reason = case
    headers = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 90) for i in range(8))
    headers += b"Host: x\r\nConnection: close\r\n"
    size = len(headers) - less  # name, ": ", value and CRLF each: as counted
    with serving(loop=loop, max_headers=max_headers, max_head=size) as (server, _):
        answers = exchange(server, b"GET / HTTP/1.1\r\n" + headers + b"\r\n")
        if reason is None:
            assert [a.status for a in answers] == [200]
        else:
            assert [a.status for a in answers] == [431]
            assert answers[0].json()["reason"] == reason.format(size=size)


VERSIONS = {
    # (request line's version, Connection header) -> (version read, connection kept)
    "1.1": (b"HTTP/1.1", b"", "1.1", True),
    "1.1-keep-alive": (b"HTTP/1.1", b"Connection: keep-alive\r\n", "1.1", True),
    "1.1-close-listed": (b"HTTP/1.1", b"Connection: Keep-Alive, Close\r\n", "1.1", False),
    "1.0": (b"HTTP/1.0", b"", "1.0", False),
    "1.0-keep-alive": (b"HTTP/1.0", b"Connection: keep-alive\r\n", "1.0", False),
}


@pytest.mark.parametrize("case", VERSIONS.values(), ids=VERSIONS.keys())
def test_the_version_read_decides_keep_alive(
    loop: str, case: tuple[bytes, bytes, str, bool]
) -> None:
    version, connection, read, kept = case
    request = b"GET /v " + version + b"\r\nHost: x\r\n" + connection + b"\r\n"
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(request)
        time.sleep(0.05)
        sock.sendall(b"GET /second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answers = parse(read_until_closed(sock))
        assert [a.json()["target"] for a in answers] == (["/v", "/second"] if kept else ["/v"])
        assert answers[0].header("Connection") == (None if kept else "close")
        first = requests_of(recorder.wait_for(len(answers)))[0]
        assert first.version == read


def test_a_connection_idle_after_a_split_request_closes_at_its_keep_alive(loop: str) -> None:
    # The head's deadline, set while it came in pieces, is the idle one again after.
    with serving(loop=loop, keep_alive=0.5) as (server, _), connect(server) as sock:
        send_in_pieces(sock, b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n", size=7)
        answer = json.loads(sock.recv(65536).split(b"\r\n\r\n", 1)[1])
        assert answer["target"] == "/one"
        assert is_closed(sock, timeout=5.0)  # closed when idle 0.5 s, not left open
