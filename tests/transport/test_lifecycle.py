"""Starting and stopping: port 0, quick start and stop, the drain, signals.

Stopping stops accepting at once, lets the exchanges in flight finish (their
answers say ``Connection: close``) for up to the grace period, then cuts
what is left and reports it as stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from transport_helpers import JSON, LOOPS, Recorder, connect, is_closed, serving

from mockskill.transport import Answer, Plan, Request, ThreadedServer, Wait

OK = Answer(200, JSON, b'{"result": "done"}')


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_port_0_binds_an_ephemeral_port(loop: str) -> None:
    with serving(loop=loop) as (first, _), serving(loop=loop) as (second, _):
        assert first.port > 0
        assert second.port > 0
        assert first.port != second.port


def test_a_busy_port_raises_at_start() -> None:
    with serving() as (server, _), pytest.raises(OSError, match="in use"):
        ThreadedServer(Recorder(), port=server.port).start()


def test_start_and_stop_take_at_most_50_ms_each(loop: str) -> None:
    # The median of five cycles: one cycle on a loaded machine may be descheduled.
    starts, stops = [], []
    for attempt in range(6):
        started = time.perf_counter()
        server = ThreadedServer(Recorder(), loop=loop).start()  # type: ignore[arg-type]
        start_s = time.perf_counter() - started
        requests.get(server.url, timeout=5)
        started = time.perf_counter()
        server.stop()
        if attempt:  # the first start also imports the loop
            starts.append(start_s)
            stops.append(time.perf_counter() - started)
    assert statistics.median(starts) <= 0.05, starts
    assert statistics.median(stops) <= 0.05, stops


def test_stop_refuses_new_connections_at_once_while_draining(loop: str) -> None:
    recorder = Recorder(lambda _: Plan(OK, waits=(Wait(500),)))
    with serving(recorder, loop=loop) as (server, _):
        in_flight = connect(server)
        in_flight.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)  # the request is waiting (pacing)
        stopping = threading.Thread(target=server.stop, kwargs={"grace": 5})
        stopping.start()
        time.sleep(0.05)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=1)
        answer = in_flight.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        assert b"Connection: close\r\n" in answer
        stopping.join()
        in_flight.close()


def test_stop_drains_thirty_requests_in_flight(loop: str) -> None:
    planned: list[float] = []

    def slow(_: Request) -> Plan:
        planned.append(time.monotonic())
        return Plan(OK, waits=(Wait(1500),))

    recorder = Recorder(slow)
    server = ThreadedServer(recorder, loop=loop).start()  # type: ignore[arg-type]
    with ThreadPoolExecutor(30) as pool:
        answers = [pool.submit(requests.get, server.url, timeout=10) for _ in range(30)]
        deadline = time.monotonic() + 5
        while len(planned) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)  # until all thirty are waiting (pacing, not a timing claim)
        assert len(planned) == 30
        started = time.monotonic()
        assert server.stop(grace=5) is True
        # Waited for the last of them (planned at most 1.5 s before), not the 5 s grace.
        assert 0.05 <= time.monotonic() - started < 4.0
        assert [a.result().status_code for a in answers] == [200] * 30
    outcomes = [o for _, o in recorder.wait_for(30)]
    assert not any(o.stopped for o in outcomes)
    assert all(o.closed for o in outcomes)


def test_idle_connections_are_closed_at_once_on_stop(loop: str) -> None:
    server = ThreadedServer(Recorder(), loop=loop).start()  # type: ignore[arg-type]
    with requests.Session() as session:
        session.get(server.url, timeout=5)
        with connect(server) as idle:
            deadline = time.monotonic() + 5
            while server.server.open_connections < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # until the loop has taken the connection in (pacing)
            started = time.monotonic()
            assert server.stop(grace=5) is True
            assert time.monotonic() - started < 0.5
            assert is_closed(idle, timeout=1)


def test_what_outlives_the_grace_is_cut_and_reported_stopped(loop: str) -> None:
    recorder = Recorder(lambda _: Plan(OK, waits=(Wait(10_000),)))
    server = ThreadedServer(recorder, loop=loop).start()  # type: ignore[arg-type]
    with connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        started = time.monotonic()
        assert server.stop(grace=0.3) is False
        assert 0.25 <= time.monotonic() - started < 2.0
        assert is_closed(sock, timeout=1)
    ((_, outcome),) = recorder.wait_for(1)
    assert outcome.stopped
    assert outcome.client_left_at is None
    assert outcome.answer is None


SERVE = textwrap.dedent(
    """
    import json, sys
    from mockskill.transport import Answer, LoopServer, Plan, Wait, run

    class Handler:
        def plan(self, request):
            return Plan(Answer(200, (), b"done"), waits=(Wait(float(sys.argv[1])),))
        def refuse(self, refusal):
            return Plan(Answer(refusal.status))
        def played(self, exchange, outcome):
            print(json.dumps({"stopped": outcome.stopped, "answered": outcome.answer is not None}),
                  flush=True)

    def started(server):
        print(server.port, flush=True)

    drained = run(LoopServer(Handler()), grace=float(sys.argv[2]), on_started=started)
    print(json.dumps({"drained": drained}), flush=True)
    """
)


def serve_process(tmp_path: Path, wait_ms: int, grace: float) -> tuple[subprocess.Popen[str], int]:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    process = subprocess.Popen(
        [sys.executable, str(script), str(wait_ms), str(grace)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def fire(port: int, count: int) -> list[socket.socket]:
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    for sock in sockets:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return sockets


def test_sigterm_drains_the_requests_in_flight_and_exits_0(tmp_path: Path) -> None:
    process, port = serve_process(tmp_path, wait_ms=800, grace=5)
    sockets = fire(port, 30)
    time.sleep(0.3)  # all thirty are waiting (pacing)
    process.send_signal(signal.SIGTERM)
    answers = [s.recv(65536) for s in sockets]
    assert all(a.startswith(b"HTTP/1.1 200 OK") for a in answers)
    out, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1] == {"drained": True}
    assert lines[:-1] == [{"stopped": False, "answered": True}] * 30
    for sock in sockets:
        sock.close()


def test_a_second_signal_stops_at_once(tmp_path: Path) -> None:
    process, port = serve_process(tmp_path, wait_ms=30_000, grace=30)
    sockets = fire(port, 5)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert process.poll() is None  # draining: the first signal waits for them
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=10)
    assert time.monotonic() - started < 2.0
    assert process.returncode == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1] == {"drained": False}
    assert lines[:-1] == [{"stopped": True, "answered": False}] * 5
    for sock in sockets:
        assert is_closed(sock, timeout=2)
        sock.close()
