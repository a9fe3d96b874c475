"""One connection: HTTP/1.1 as clients use it, and plans played on the loop.

Persistent connections, pipelining, close, 100-continue: keep-alive is proven
by counting the connections the server accepted. Waits, cuts, dribbles,
faults and the client leaving: each fault is met by real clients (requests,
httpx, curl), which must fail the way docs/faults.md's table says.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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

from mockskill.scenario.kinds import FAULT_NAMES
from mockskill.transport import (
    Answer,
    Cut,
    Dribble,
    Fault,
    Plan,
    Refusal,
    Request,
    ThreadedServer,
    Wait,
    WaitKind,
)
from mockskill.transport.faults import random_bytes


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


LOOP_TICK = 0.002
"""How early a loop's timer may fire by the monotonic clock: uvloop (libuv) counts its
timers in whole milliseconds of a time it caches per iteration."""


@pytest.mark.parametrize("close", [b"", b"Connection: close\r\n"])
def test_a_client_that_stops_reading_is_cut_after_the_write_timeout(
    loop: str, close: bytes
) -> None:
    big = Answer(200, (), b"x" * 20_000_000)
    with serving(Recorder(lambda _: Plan(big)), loop=loop, write_timeout=0.5) as (
        server,
        recorder,
    ):
        # From before the request is sent: the server's write may stall (and its timer
        # start) before the client's call returns.
        begun = time.monotonic()
        sock = reading_nothing(server, b"GET /big HTTP/1.1\r\nHost: x\r\n" + close + b"\r\n")
        with sock:
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
            assert 0.5 - LOOP_TICK <= waited < 3
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


# -- plans played on the loop: waits, cuts, dribbles, faults, the client leaving --

OK = Answer(200, JSON, b'{"result": "the whole answer, in good time"}')
FAULTS = [Fault(name) for name in FAULT_NAMES]


def constant(plan: Plan) -> Recorder:
    return Recorder(lambda _: plan)


def test_a_wait_delays_the_answer(loop: str) -> None:
    with serving(constant(Plan(OK, waits=(Wait(300),))), loop=loop) as (server, recorder):
        started = time.monotonic()
        assert requests.get(server.url, timeout=10).status_code == 200
        assert 0.29 <= time.monotonic() - started < 2.0
        ((_, outcome),) = recorder.wait_for(1)
        assert outcome.waited_ms >= 290
        assert outcome.answer == OK


def test_waits_add_up(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(100), Wait(100, WaitKind.HANG), Wait(100, WaitKind.EXECUTION)))
    with serving(constant(plan), loop=loop) as (server, _):
        started = time.monotonic()
        requests.get(server.url, timeout=10)
        assert time.monotonic() - started >= 0.29


def test_a_cut_answers_early_with_its_own_answer(loop: str) -> None:
    timeout = Answer(504, JSON, b'{"error": "EXECUTION_TIMEOUT"}')
    plan = Plan(OK, waits=(Wait(5000, WaitKind.EXECUTION, Cut(200, timeout)),))
    with serving(constant(plan), loop=loop) as (server, recorder):
        started = time.monotonic()
        answer = requests.get(server.url, timeout=10)
        assert (answer.status_code, answer.json()) == (504, {"error": "EXECUTION_TIMEOUT"})
        assert 0.19 <= time.monotonic() - started < 2.0
        ((_, outcome),) = recorder.wait_for(1)
        assert outcome.cut
        assert outcome.answer == timeout


@dataclasses.dataclass(frozen=True)
class Elapsed:
    """A cut's answer made from the time measured (a ``Measured``): a value, not a closure."""

    status: int

    def answer(self, elapsed_ms: float) -> Answer:
        return Answer(self.status, JSON, json.dumps({"elapsed_ms": elapsed_ms}).encode())


def test_a_cut_answer_can_report_the_elapsed_time_measured(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(5000, WaitKind.EXECUTION, Cut(150, Elapsed(504))),))
    with serving(constant(plan), loop=loop) as (server, recorder):
        elapsed = requests.get(server.url, timeout=10).json()["elapsed_ms"]
        assert 149 <= elapsed < 1500
        ((_, outcome),) = recorder.wait_for(1)
        assert outcome.cut
        assert outcome.cut_ms == elapsed  # what the answer was made from, for the journal


def test_a_cut_longer_than_the_wait_does_not_happen(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(100, WaitKind.EXECUTION, Cut(5000, Answer(504))),))
    with serving(constant(plan), loop=loop) as (server, recorder):
        assert requests.get(server.url, timeout=10).status_code == 200
        assert not recorder.wait_for(1)[0][1].cut


def test_the_client_leaving_during_a_wait_is_seen_at_once(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(10_000, WaitKind.HANG),))
    with serving(constant(plan), loop=loop) as (server, recorder):
        started = time.time()
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.get(server.url, timeout=0.3)
        ((_, outcome),) = recorder.wait_for(1, timeout=3)
        assert outcome.client_left_at is not None
        assert 0.25 <= outcome.client_left_at - started < 2.0
        assert outcome.answer is None
        assert outcome.closed


def test_a_pipelined_request_during_a_wait_is_not_a_departure(loop: str) -> None:
    def plans(request: Request) -> Plan:
        return Plan(OK, waits=(Wait(300),)) if request.target == "/wait" else Plan(OK)

    with serving(Recorder(plans), loop=loop) as (server, recorder):
        answers = exchange(
            server,
            b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /then HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert [a.status for a in answers] == [200, 200]
        assert all(o.client_left_at is None for _, o in recorder.wait_for(2))


def test_a_thousand_waiting_requests_hold_no_thread(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(1000),))
    with serving(constant(plan), loop=loop) as (server, recorder):
        sockets = [connect(server, timeout=20) for _ in range(1000)]
        threads_before = threading.active_count()
        started = time.monotonic()
        for sock in sockets:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)  # all are waiting now (pacing the check, not the server)
        assert threading.active_count() == threads_before
        answers = [parse(read_until_closed(sock, timeout=20)) for sock in sockets]
        assert [a[0].status for a in answers] == [200] * 1000
        # One second each, all at once: in turn they would take 1000 s (the margin is for
        # a loaded machine reading a thousand answers one socket after another).
        assert time.monotonic() - started < 20.0
        for sock in sockets:
            sock.close()
        assert len(recorder.wait_for(1000)) == 1000


def test_a_dribble_sends_the_head_at_once_and_the_body_over_time(loop: str) -> None:
    body = b"0123456789" * 10
    plan = Plan(Answer(200, JSON, body), dribble=Dribble(chunks=5, over_ms=500))
    with serving(constant(plan), loop=loop) as (server, recorder), connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 OK")
        assert time.monotonic() - started < 0.2  # a slow body, not a slow start
        rest = read_until_closed(sock)
        assert 0.45 <= time.monotonic() - started < 3.0
        assert parse(first + rest)[0].body == body
        ((_, outcome),) = recorder.wait_for(1)
        assert outcome.headers_at is not None
        assert outcome.last_byte_at is not None
        assert outcome.last_byte_at - outcome.headers_at >= 0.45


def test_the_client_leaving_during_a_dribble_is_seen(loop: str) -> None:
    plan = Plan(Answer(200, JSON, b"x" * 100), dribble=Dribble(chunks=10, over_ms=5000))
    with serving(constant(plan), loop=loop) as (server, recorder):
        with connect(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(65536)
        ((_, outcome),) = recorder.wait_for(1, timeout=3)
        assert outcome.client_left_at is not None
        assert outcome.headers_at is not None
        assert outcome.last_byte_at is None


REQUESTS_RAISES = {
    Fault("CONNECTION_RESET_BY_PEER"): requests.ConnectionError,
    Fault("EMPTY_RESPONSE"): requests.ConnectionError,
    Fault("MALFORMED_RESPONSE_CHUNK"): requests.exceptions.ChunkedEncodingError,
    Fault("RANDOM_DATA_THEN_CLOSE"): requests.ConnectionError,
    Fault("TRUNCATED_BODY"): requests.exceptions.ChunkedEncodingError,
}
HTTPX_RAISES = {
    Fault("CONNECTION_RESET_BY_PEER"): httpx.ReadError,
    Fault("EMPTY_RESPONSE"): httpx.RemoteProtocolError,
    Fault("MALFORMED_RESPONSE_CHUNK"): httpx.RemoteProtocolError,
    Fault("RANDOM_DATA_THEN_CLOSE"): httpx.RemoteProtocolError,
    Fault("TRUNCATED_BODY"): httpx.RemoteProtocolError,
}
CURL_EXITS = {
    Fault("CONNECTION_RESET_BY_PEER"): 56,
    Fault("EMPTY_RESPONSE"): 52,
    Fault("MALFORMED_RESPONSE_CHUNK"): 56,
    Fault("RANDOM_DATA_THEN_CLOSE"): 1,
    Fault("TRUNCATED_BODY"): 18,
}


@pytest.mark.parametrize("fault", FAULTS, ids=FAULT_NAMES)
def test_requests_meets_each_fault_as_documented(loop: str, fault: Fault) -> None:
    with serving(constant(Plan(OK, fault=fault)), loop=loop) as (server, recorder):
        with pytest.raises(REQUESTS_RAISES[fault]):
            requests.get(server.url, timeout=5)
        ((_, outcome),) = recorder.wait_for(1)
        assert outcome.fault is fault
        assert outcome.closed


def test_requests_sees_the_reset_as_a_reset(loop: str) -> None:
    plan = Plan(OK, fault=Fault("CONNECTION_RESET_BY_PEER"))
    with serving(constant(plan), loop=loop) as (server, _):
        with pytest.raises(requests.ConnectionError) as raised:
            requests.get(server.url, timeout=5)
        assert "Connection reset by peer" in str(raised.value)


@pytest.mark.parametrize("fault", FAULTS, ids=FAULT_NAMES)
def test_httpx_meets_each_fault_as_documented(loop: str, fault: Fault) -> None:
    with (
        serving(constant(Plan(OK, fault=fault)), loop=loop) as (server, _),
        pytest.raises(HTTPX_RAISES[fault]),
    ):
        httpx.get(server.url, timeout=5)


@pytest.mark.parametrize("fault", FAULTS, ids=FAULT_NAMES)
def test_curl_meets_each_fault_as_documented(loop: str, fault: Fault) -> None:
    with serving(constant(Plan(OK, fault=fault)), loop=loop) as (server, _):
        result = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", server.url], capture_output=True, timeout=30
        )
        assert result.returncode == CURL_EXITS[fault]


def test_a_reset_is_a_tcp_reset_on_a_raw_socket(loop: str) -> None:
    plan = Plan(OK, fault=Fault("CONNECTION_RESET_BY_PEER"))
    with serving(constant(plan), loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        with pytest.raises(ConnectionResetError):
            sock.recv(100)


def test_random_data_is_seeded(loop: str) -> None:
    plan = Plan(OK, fault=Fault("RANDOM_DATA_THEN_CLOSE"), fault_seed=42)
    with serving(constant(plan), loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_until_closed(sock) == random_bytes(42)
        assert random_bytes(42) != random_bytes(43)


def test_a_truncated_body_promises_twice_what_it_sends(loop: str) -> None:
    plan = Plan(OK, fault=Fault("TRUNCATED_BODY"))
    with serving(constant(plan), loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = read_until_closed(sock).partition(b"\r\n\r\n")
        assert f"Content-Length: {2 * len(OK.body)}".encode() in head
        assert body == OK.body


def test_a_fault_after_a_wait_waits_first(loop: str) -> None:
    plan = Plan(OK, waits=(Wait(300),), fault=Fault("EMPTY_RESPONSE"))
    with serving(constant(plan), loop=loop) as (server, _), connect(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_until_closed(sock) == b""
        assert time.monotonic() - started >= 0.29


def test_a_cut_is_answered_instead_of_the_fault(loop: str) -> None:
    cut = Cut(100, Answer(504, JSON, b"{}"))
    plan = Plan(OK, waits=(Wait(1000, WaitKind.EXECUTION, cut),), fault=Fault("EMPTY_RESPONSE"))
    with serving(constant(plan), loop=loop) as (server, _):
        assert requests.get(server.url, timeout=5).status_code == 504


def test_fifty_faults_in_a_row_leave_the_server_healthy(loop: str) -> None:
    faults = FAULTS

    def plans(request: Request) -> Plan:
        if request.target == "/health":
            return Plan(OK)
        return Plan(OK, fault=faults[request.connection % len(faults)])

    with serving(Recorder(plans), loop=loop) as (server, recorder):
        for _ in range(50):
            with pytest.raises(requests.RequestException):
                requests.get(f"{server.url}/fault", timeout=5)
        assert requests.get(f"{server.url}/health", timeout=5).status_code == 200
        assert [o.fault for _, o in recorder.wait_for(50)].count(None) == 0


def test_clients_leaving_at_once_during_faults_and_waits(loop: str) -> None:
    def plans(request: Request) -> Plan:
        if request.target == "/health":
            return Plan(OK)
        # A wait long enough that every client has closed before it ends, even when a busy
        # machine holds a client's thread between its send and its close (50 ms was not).
        return Plan(OK, waits=(Wait(1000),), fault=Fault("MALFORMED_RESPONSE_CHUNK"))

    with serving(Recorder(plans), loop=loop) as (server, recorder):

        def hit(_: int) -> None:
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(hit, range(100)))
        outcomes = [o for _, o in recorder.wait_for(100)]
        assert all(o.client_left_at is not None for o in outcomes)
        assert requests.get(f"{server.url}/health", timeout=5).status_code == 200
