"""Plans played on the loop: waits, cuts, dribbles, faults, and the client leaving.

Each fault is met by real clients (requests, httpx, curl), which must fail
the way docs/faults.md's table says.
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
    Request,
    Wait,
    WaitKind,
)
from mockskill.transport.faults import random_bytes

OK = Answer(200, JSON, b'{"result": "the whole answer, in good time"}')
FAULTS = [Fault(name) for name in FAULT_NAMES]


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
        return Plan(OK, waits=(Wait(50),), fault=Fault("MALFORMED_RESPONSE_CHUNK"))

    with serving(Recorder(plans), loop=loop) as (server, recorder):

        def hit(_: int) -> None:
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(hit, range(100)))
        outcomes = [o for _, o in recorder.wait_for(100)]
        assert all(o.client_left_at is not None for o in outcomes)
        assert requests.get(f"{server.url}/health", timeout=5).status_code == 200
