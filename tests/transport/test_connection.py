"""HTTP/1.1 as clients use it: persistent connections, pipelining, close, 100-continue.

Keep-alive is proven by counting the connections the server accepted.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time

import httpx
import pytest
import requests
from transport_helpers import (
    JSON,
    LOOPS,
    Recorder,
    connect,
    exchange,
    parse,
    read_until_closed,
    serving,
)

from mockskill.transport import Answer, Dribble, Plan, Refusal, Request, ThreadedServer, Wait


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_requests_session_makes_100_calls_on_one_connection(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), requests.Session() as session:
        for i in range(100):
            assert session.get(f"{server.url}/call/{i}").json()["target"] == f"/call/{i}"
        assert server.server.accepted == 1
        indexes = [e.index for e, _ in recorder.wait_for(100) if isinstance(e, Request)]
        assert indexes == list(range(1, 101))


def test_an_httpx_client_makes_100_calls_on_one_connection(loop: str) -> None:
    with serving(loop=loop) as (server, _), httpx.Client() as client:
        for _ in range(100):
            assert client.post(f"{server.url}/x", content=b"body").json()["body"] == "body"
        assert server.server.accepted == 1


def test_curl_reuses_the_connection_for_two_urls(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        out = subprocess.run(
            ["curl", "-s", f"{server.url}/a", f"{server.url}/b"],
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
        assert out.count(b'"method"') == 2
        assert server.server.accepted == 1


def test_pipelined_requests_are_answered_in_order(loop: str) -> None:
    def plans(request: Request) -> Plan:
        # The first is slow: the second must still be answered after it.
        waits = (Wait(200),) if request.target == "/slow" else ()
        return Plan(Answer(200, JSON, json.dumps({"target": request.target}).encode()), waits)

    with serving(Recorder(plans), loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /third HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
            b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert [a.json()["target"] for a in answers] == ["/slow", "/fast", "/third", "/last"]
        assert [a.header("Connection") for a in answers] == [None, None, None, "close"]


def test_many_pipelined_requests_are_all_answered(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        data = b"".join(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(500))
        answers = exchange(
            server, data + b"GET /end HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert [a.json()["target"] for a in answers] == [f"/{i}" for i in range(500)] + ["/end"]


def test_connection_close_is_honoured_and_said(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answers = parse(read_until_closed(sock))
        assert [a.header("Connection") for a in answers] == ["close"]
        assert recorder.wait_for(1)[0][1].closed


def test_http_1_0_gets_one_answer_then_the_close(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        answers = exchange(server, b"GET / HTTP/1.0\r\n\r\nGET /ignored HTTP/1.0\r\n\r\n")
        assert [a.status for a in answers] == [200]
        assert answers[0].header("Connection") == "close"


def test_expect_100_continue_gets_100_before_the_body(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
            b"Connection: close\r\n\r\n"
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        answers = parse(read_until_closed(sock))
        assert [a.json()["body"] for a in answers] == ["hello"]


def test_expect_100_continue_over_the_limit_gets_413_and_no_100(loop: str) -> None:
    with serving(loop=loop, max_body=10) as (server, _), connect(server) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"
        )
        data = read_until_closed(sock)
        assert data.startswith(b"HTTP/1.1 413 ")


def test_expect_100_continue_with_curl(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        result = subprocess.run(
            [
                "curl",
                "-s",
                "-v",
                "-H",
                "Expect: 100-continue",
                "--data-binary",
                "x" * 5000,
                f"{server.url}/up",
            ],
            capture_output=True,
            timeout=30,
            check=True,
        )
        assert b"HTTP/1.1 100 Continue" in result.stderr
        assert len(json.loads(result.stdout)["body"]) == 5000


def test_a_chunked_request_body_is_read_whole(loop: str) -> None:
    def chunks() -> object:
        yield b"hello "
        yield b"chunked "
        yield b"world"

    with serving(loop=loop) as (server, _):
        answer = requests.post(f"{server.url}/c", data=chunks(), timeout=10)  # type: ignore[arg-type]
        assert answer.json()["body"] == "hello chunked world"


def test_a_head_request_gets_the_length_and_no_body(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(
            b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /g HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        data = read_until_closed(sock)
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert b"Content-Length: " in head
        # The very next bytes are the second answer: the HEAD answer had no body.
        assert parse(rest)[0].json()["target"] == "/g"


def test_an_upgrade_request_is_answered_as_http_1_1(loop: str) -> None:
    """curl --http2 on http:// asks for h2c; the answer is plain HTTP/1.1, and the
    connection goes on serving."""
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET /u HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
            b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
            b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert [a.json()["target"] for a in answers] == ["/u", "/next"]


def test_the_answer_framing_is_the_transports(loop: str) -> None:
    """A plan's own Content-Length / Connection / Transfer-Encoding are not sent."""
    bad = Answer(
        200,
        (
            ("Content-Length", "999"),
            ("Transfer-Encoding", "chunked"),
            ("Connection", "x"),
            ("X-Kept", "yes"),
        ),
        b"four",
    )
    with serving(Recorder(lambda _: Plan(bad)), loop=loop) as (server, _):
        answer = requests.get(server.url, timeout=10)
        assert answer.content == b"four"
        assert answer.headers["Content-Length"] == "4"
        assert answer.headers["X-Kept"] == "yes"
        assert "Transfer-Encoding" not in answer.headers


def test_a_204_has_no_content_length_nor_body(loop: str) -> None:
    with serving(Recorder(lambda _: Plan(Answer(204, (), b"ignored"))), loop=loop) as (
        server,
        _,
    ):
        answers = exchange(
            server,
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert [a.status for a in answers] == [204, 204]
        assert answers[0].header("Content-Length") is None


def test_a_client_that_does_not_read_is_not_buffered_for_without_bound(loop: str) -> None:
    big = Answer(200, (), b"x" * 1_000_000)
    with (
        serving(Recorder(lambda _: Plan(big)), loop=loop) as (server, recorder),
        connect(server) as sock,
    ):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 200)  # 200 MB of answers asked for
        time.sleep(0.5)  # the server writes until the client's window is full (pacing)
        # Writing paused: the queue is not answered into memory.
        assert len(recorder.exchanges) < 200
        sock.close()


def reading_nothing(server: ThreadedServer, request: bytes) -> socket.socket:
    """A client that asks for *request* and then reads nothing (a small receive window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(request)
    return sock


def received(sock: socket.socket, timeout: float = 5.0) -> int:
    """Bytes read until the server's end is gone (closed or reset)."""
    sock.settimeout(timeout)
    count = 0
    try:
        while chunk := sock.recv(1 << 20):
            count += len(chunk)
    except ConnectionResetError:
        pass
    return count


@pytest.mark.parametrize("close", [b"", b"Connection: close\r\n"])
def test_a_client_that_stops_reading_is_cut_after_the_write_timeout(
    loop: str, close: bytes
) -> None:
    big = Answer(200, (), b"x" * 20_000_000)
    with serving(Recorder(lambda _: Plan(big)), loop=loop, write_timeout=0.5) as (
        server,
        recorder,
    ):
        sock = reading_nothing(server, b"GET /big HTTP/1.1\r\nHost: x\r\n" + close + b"\r\n")
        with sock:
            begun = time.monotonic()
            (sent, _), (cut, outcome) = recorder.wait_for(2)
            waited = time.monotonic() - begun
            assert isinstance(sent, Request)
            assert isinstance(cut, Refusal)  # its answer was journalled: the cut is, apart
            assert (cut.status, cut.reason, cut.target) == (
                408,
                "the client read nothing of its answer for 0.5 s",
                "/big",
            )
            assert outcome.client_left_at is not None
            assert outcome.answer is None
            assert 0.5 <= waited < 3
            # Cut: what the kernel had taken still comes, the rest of the answer never.
            assert received(sock) < len(big.body) / 2
            assert server.server.open_connections == 0


def test_a_client_that_stops_reading_a_dribble_is_journalled_as_having_left(loop: str) -> None:
    big = Answer(200, (), b"x" * 20_000_000)
    plan = Plan(big, dribble=Dribble(chunks=4, over_ms=100))
    with (
        serving(Recorder(lambda _: plan), loop=loop, write_timeout=0.5) as (server, recorder),
        reading_nothing(server, b"GET /dribble HTTP/1.1\r\nHost: x\r\n\r\n") as sock,
    ):
        ((request, outcome),) = recorder.wait_for(1)
        assert isinstance(request, Request)
        assert outcome.client_left_at is not None
        assert outcome.last_byte_at is None
        assert received(sock) < len(big.body) / 2


def test_a_client_reading_slowly_is_not_cut(loop: str) -> None:
    body = b"x" * 1_000_000
    with serving(Recorder(lambda _: Plan(Answer(200, (), body))), loop=loop, write_timeout=0.5) as (
        server,
        recorder,
    ):
        sock = reading_nothing(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        with sock:
            got = b""
            while chunk := sock.recv(65536):  # slower than the server writes, never stopped
                got += chunk
                time.sleep(0.01)
            assert got.endswith(body)
        assert not recorder.refusals()


def test_a_stop_does_not_wait_for_a_client_that_does_not_read(loop: str) -> None:
    big = Answer(200, (), b"x" * 20_000_000)
    with (
        serving(Recorder(lambda _: Plan(big)), loop=loop) as (server, recorder),
        reading_nothing(server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ):
        recorder.wait_for(1)
        begun = time.monotonic()
        assert server.stop(grace=5.0)  # nothing in flight: idle, with unread bytes
        assert time.monotonic() - begun < 0.5


def test_the_handler_failing_is_a_500_and_the_server_lives(loop: str) -> None:
    def plans(request: Request) -> Plan:
        if request.target == "/boom":
            raise RuntimeError("a bug")
        return Plan(Answer(200, (), b"ok"))

    with serving(Recorder(plans), loop=loop) as (server, _):
        assert requests.get(f"{server.url}/boom", timeout=10).status_code == 500
        assert requests.get(f"{server.url}/fine", timeout=10).text == "ok"


def test_a_keep_alive_connection_closes_when_idle_and_a_session_reconnects(loop: str) -> None:
    with serving(loop=loop, keep_alive=0.3) as (server, _), requests.Session() as session:
        session.get(server.url, timeout=10)
        # Well past the keep-alive: closed long before the next request (one sent as the
        # close happens meets the stale-connection race, which is a fault of its own).
        time.sleep(1.0)
        session.get(server.url, timeout=10)  # the pool sees the close, reconnects silently
        assert server.server.accepted == 2


def test_a_bad_request_behind_a_waiting_one_is_refused_after_it(loop: str) -> None:
    def plans(request: Request) -> Plan:
        return Plan(Answer(200, JSON, b"{}"), waits=(Wait(200),))

    with serving(Recorder(plans), loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n",
        )
        assert [a.status for a in answers] == [200, 400]


def test_a_100_continue_behind_a_waiting_request_comes_after_its_answer(loop: str) -> None:
    def plans(request: Request) -> Plan:
        waits = (Wait(200),) if request.target == "/wait" else ()
        return Plan(Answer(200, JSON, json.dumps({"t": request.target}).encode()), waits)

    with serving(Recorder(plans), loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(
            b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
            b"Connection: close\r\n\r\n"
        )
        first = b""
        while b"100 Continue" not in first:
            chunk = sock.recv(65536)
            assert chunk, "closed before the 100"
            first += chunk
        # The first answer, whole, then the 100: never a 100 inside another answer.
        assert first.index(b'{"t": "/wait"}') < first.index(b"HTTP/1.1 100 Continue")
        sock.sendall(b"hi")
        rest = first[first.index(b"HTTP/1.1 100 Continue") + 25 :] + read_until_closed(sock)
        assert parse(rest)[0].json() == {"t": "/up"}


def test_a_client_that_half_closes_after_its_request_still_gets_the_answer(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET /half HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)  # as `printf ... | nc -N` does
        assert [a.json()["target"] for a in parse(read_until_closed(sock))] == ["/half"]


def test_an_absolute_form_target_is_passed_as_sent(loop: str) -> None:
    with serving(loop=loop) as (server, _):
        answers = exchange(
            server,
            b"GET http://example.test/skills?x=1 HTTP/1.1\r\nHost: example.test\r\n"
            b"Connection: close\r\n\r\n",
        )
        assert answers[0].json()["target"] == "http://example.test/skills?x=1"


def test_a_request_knows_its_headers_by_any_case(loop: str) -> None:
    seen: list[str | None] = []

    def plans(request: Request) -> Plan:
        seen.append(request.header("x-session"))
        seen.append(request.header("X-Missing"))
        return Plan(Answer(200))

    with serving(Recorder(plans), loop=loop) as (server, _):
        requests.get(server.url, headers={"X-Session": "s1"}, timeout=5)
        assert seen == ["s1", None]


def test_headers_reach_the_handler_as_sent_decoded_as_latin_1(loop: str) -> None:
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(
            b"GET /h HTTP/1.1\r\nHost: x\r\nX-Name: caf\xe9\r\nx-name: two\r\n"
            b"Connection: close\r\n\r\n"
        )
        assert [a.status for a in parse(read_until_closed(sock))] == [200]
        ((request, _),) = recorder.wait_for(1)
        assert isinstance(request, Request)
        assert request.headers == (
            ("Host", "x"),
            ("X-Name", "caf\xe9"),
            ("x-name", "two"),
            ("Connection", "close"),
        )
        assert request.raw_headers[1] == (b"X-Name", b"caf\xe9")
        assert request.header("X-NAME") == "caf\xe9"  # the first, in any case
        assert request.header("missing") is None


def test_an_instant_answer_to_a_lone_request_is_timed_by_one_clock_reading(loop: str) -> None:
    """Read, planned and written in the same callback: one moment, measured once."""
    with serving(loop=loop) as (server, recorder), connect(server) as sock:
        sock.sendall(b"GET /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert [a.status for a in parse(read_until_closed(sock))] == [200]
        ((request, outcome),) = recorder.wait_for(1)
        assert isinstance(request, Request)
        assert request.time == outcome.started == outcome.headers_at == outcome.last_byte_at
        assert outcome.closed


def test_a_journalled_plan_sent_at_once_is_not_reported_and_every_other_exchange_is(
    loop: str,
) -> None:
    """Plan.journalled: the handler recorded it as it planned it; the rest are reported."""

    def plans(request: Request) -> Plan:
        journalled = request.target.startswith("/journalled")
        return Plan(Answer(200, JSON, request.target.encode()), journalled=journalled)

    with serving(Recorder(plans), loop=loop) as (server, recorder), connect(server) as sock:
        # Pipelined: the second and third are planned once the first is answered.
        sock.sendall(
            b"GET /journalled/1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /reported HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /journalled/2 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /journalled/3 HTTP/1.1\r\nHost: x\r\n"
            b"Connection: close\r\n\r\n"
        )
        answers = parse(read_until_closed(sock))
        assert [a.body for a in answers] == [
            b"/journalled/1",
            b"/reported",
            b"/journalled/2",
            b"/journalled/3",
        ]
        ((request, outcome),) = recorder.wait_for(1)
        time.sleep(0.05)  # nothing else comes: the connection closed after the last answer
        assert len(recorder.exchanges) == 1
        assert isinstance(request, Request)
        assert request.target == "/reported"
        assert outcome.answer is not None
        assert outcome.answer.status == 200
