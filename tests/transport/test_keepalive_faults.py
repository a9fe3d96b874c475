"""Faults that only keep-alive makes possible: stale connections, silent closes, limits.

None of them says ``Connection: close``: the client's pool believes the
connection stays open. Proven on raw sockets, then met by real pools.
"""

from __future__ import annotations

import time

import httpx
import pytest
import requests
from transport_helpers import JSON, LOOPS, Recorder, connect, is_closed, parse, serving

from mockskill.transport import Answer, KeepAlive, Plan, Request, Stale

OK = Answer(200, JSON, b'{"result": "fine"}')
HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def keeping(keep: KeepAlive) -> Recorder:
    return Recorder(lambda _: Plan(OK, keep_alive=keep))


def answer_on(sock: object, timeout: float = 5.0) -> bytes:
    """One answer's bytes (small answers arrive whole on loopback)."""
    sock.settimeout(timeout)  # type: ignore[attr-defined]
    data: bytes = sock.recv(65536)  # type: ignore[attr-defined]
    return data


def test_close_after_closes_without_saying_so(loop: str) -> None:
    with (
        serving(keeping(KeepAlive(close_after=True)), loop=loop) as (server, recorder),
        connect(server) as sock,
    ):
        sock.sendall(HEAD)
        answers = parse(answer_on(sock))
        assert [a.status for a in answers] == [200]
        assert answers[0].header("Connection") is None
        assert is_closed(sock, timeout=2.0)
        assert recorder.wait_for(1)[0][1].closed


def test_max_requests_closes_after_the_last_without_saying_so(loop: str) -> None:
    with (
        serving(keeping(KeepAlive(max_requests=3)), loop=loop) as (server, _),
        connect(server) as sock,
    ):
        for _ in range(2):
            sock.sendall(HEAD)
            assert parse(answer_on(sock))[0].status == 200
            assert not is_closed(sock, timeout=0.1)
        sock.sendall(HEAD)
        third = parse(answer_on(sock))[0]
        assert third.header("Connection") is None
        assert is_closed(sock, timeout=2.0)


def test_a_stale_connection_is_closed_after_its_idle_time(loop: str) -> None:
    keep = KeepAlive(stale_after_ms=300)
    with serving(keeping(keep), loop=loop) as (server, _), connect(server) as sock:
        # Read before the request goes: the answer, and the idle time after it, cannot
        # begin earlier (read after, a test thread descheduled past sendall is late).
        started = time.monotonic()
        sock.sendall(HEAD)
        answer = parse(answer_on(sock))[0]
        assert answer.header("Connection") is None
        assert not is_closed(sock, timeout=0.15)  # open, as if kept alive ...
        assert is_closed(sock, timeout=3.0)  # ... then closed, unannounced
        assert 0.29 <= time.monotonic() - started < 3.0


def test_a_request_before_the_stale_time_keeps_the_connection(loop: str) -> None:
    keep = KeepAlive(stale_after_ms=300)
    with serving(keeping(keep), loop=loop) as (server, _), connect(server) as sock:
        for _ in range(4):  # each answer restarts the idle time
            sock.sendall(HEAD)
            assert parse(answer_on(sock))[0].status == 200
            time.sleep(0.15)
        assert not is_closed(sock, timeout=0.05)


def test_a_stale_connection_can_drop_the_next_request_unanswered(loop: str) -> None:
    keep = KeepAlive(stale_after_ms=200, stale=Stale.DROP_NEXT)
    with serving(keeping(keep), loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(HEAD)
        assert parse(answer_on(sock))[0].status == 200
        assert not is_closed(sock, timeout=0.4)  # stale now, and still open
        sock.sendall(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        assert is_closed(sock, timeout=3.0)  # read, and not a byte answered
        (_, first), (dropped, second) = recorder.wait_for(2)
        assert isinstance(dropped, Request)
        assert dropped.target == "/next"
        assert second.dropped
        assert second.answer is None
        assert not first.dropped


# -- what real pools make of them -------------------------------------------------


def test_requests_reconnects_silently_after_a_silent_close(loop: str) -> None:
    with (
        serving(keeping(KeepAlive(close_after=True)), loop=loop) as (server, _),
        requests.Session() as session,
    ):
        for _ in range(3):
            assert session.get(server.url, timeout=5).status_code == 200
            time.sleep(0.05)  # the FIN reaches the pool before its next request
        assert server.server.accepted == 3


def test_httpx_reconnects_silently_after_a_silent_close(loop: str) -> None:
    with (
        serving(keeping(KeepAlive(close_after=True)), loop=loop) as (server, _),
        httpx.Client() as client,
    ):
        for _ in range(3):
            assert client.get(server.url, timeout=5).status_code == 200
            time.sleep(0.05)
        assert server.server.accepted == 3


def test_requests_fails_on_a_dropped_pooled_request(loop: str) -> None:
    keep = KeepAlive(stale_after_ms=100, stale=Stale.DROP_NEXT)
    with serving(keeping(keep), loop=loop) as (server, _), requests.Session() as session:
        session.get(server.url, timeout=5)
        time.sleep(0.3)
        with pytest.raises(requests.ConnectionError):
            session.get(server.url, timeout=5)


def test_httpx_fails_on_a_dropped_pooled_request(loop: str) -> None:
    keep = KeepAlive(stale_after_ms=100, stale=Stale.DROP_NEXT)
    with serving(keeping(keep), loop=loop) as (server, _), httpx.Client() as client:
        client.get(server.url, timeout=5)
        time.sleep(0.3)
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(server.url, timeout=5)
