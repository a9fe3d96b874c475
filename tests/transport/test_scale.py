"""Many connections at once: what each one costs the server, and what it gives back.

Issue 13's bursts and floods (bench/burst_peers.py, bench/hang_flood.py) in
the small: a waiting request holds a timer, not a task; a connection is
freed when it closes, without waiting for the cyclic garbage collector; the
memory a flood of connections took is handed back once they are gone; a
server that owns its process keeps its start-up objects out of the GC's passes.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import Iterator

import pytest
from transport_helpers import JSON, LOOPS, Recorder, connect, parse, read_until_closed, serving

from mockskill.transport import Answer, Plan, Request, ThreadedServer, Wait, shared
from mockskill.transport.connection import Connection
from mockskill.transport.reading import RequestReader
from mockskill.transport.waiting import Waiting

OK = Answer(200, JSON, b'{"result": "done"}')


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic GC off for the test: what is freed is freed by reference counting. (Garbage
    of earlier tests stays as it is, counted before and after alike: collecting it first
    would cost a pass over the suite's heap.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def on_loop(server: ThreadedServer, what: object) -> object:
    """Evaluate *what* (a callable) on the server's loop, from the test's thread."""

    async def call() -> object:
        assert callable(what)
        return what()

    return asyncio.run_coroutine_threadsafe(call(), server.loop).result(5)


def connections_alive() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Connection)


def wait_until(condition: object, timeout: float = 10.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.01)


def test_waiting_requests_hold_timers_not_tasks(loop: str) -> None:
    plan, planned = Plan(OK, waits=(Wait(1000),)), []

    def waiting(request: Request) -> Plan:
        planned.append(request)
        return plan

    with serving(Recorder(waiting), loop=loop) as (server, recorder):
        sockets = [connect(server, timeout=20) for _ in range(200)]
        for sock in sockets:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        wait_until(lambda: len(planned) == 200)  # all are waiting now
        tasks = on_loop(server, lambda: len(asyncio.all_tasks()))
        assert isinstance(tasks, int)
        assert tasks < 10  # the loop's own few, none per request
        answers = [parse(read_until_closed(sock, timeout=20)) for sock in sockets]
        assert [a[0].status for a in answers] == [200] * 200
        for sock in sockets:
            sock.close()
        outcomes = [o for _, o in recorder.wait_for(200)]
        assert all(o.waited_ms >= 990 for o in outcomes)


def test_a_closed_connection_is_freed_without_the_cyclic_gc(loop: str, no_cyclic_gc: None) -> None:
    plans = {"/wait": Plan(OK, waits=(Wait(50),)), "/now": Plan(OK)}
    recorder = Recorder(lambda request: plans[request.target])
    with serving(recorder, loop=loop) as (server, _):
        before = connections_alive()
        for target in ("/wait", "/now") * 10:
            with connect(server) as sock:
                sock.sendall(
                    f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
                )
                assert parse(read_until_closed(sock))[0].status == 200
        with connect(server) as sock:  # the client leaves in the middle of a wait
            sock.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        recorder.wait_for(21)
        wait_until(lambda: server.server.open_connections == 0)
        time.sleep(0.1)  # the loop lets go of the transports in a callback of its own
        assert connections_alive() == before


def test_a_connection_has_no_instance_dict(loop: str) -> None:
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(65536)
        # Slots: less memory per connection held, the collaborators it owns included.
        for kind in (Connection, RequestReader, Waiting):
            held = next(o for o in gc.get_objects() if type(o) is kind)
            assert not hasattr(held, "__dict__"), kind


def test_accepted_sockets_do_not_delay_small_writes(loop: str) -> None:
    # The loop sets TCP_NODELAY on what it accepts (either loop, the socket bound as TCP):
    # an answer's last segment is not held back by Nagle waiting for the client's ACK.
    with serving(loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(65536)

        def nodelay() -> int:
            (connection,) = (
                o
                for o in gc.get_objects()
                if type(o) is Connection
                and not o.closed
                and o.transport is not None
                and o.transport.get_extra_info("sockname")[1] == server.port
            )
            assert connection.transport is not None
            raw = connection.transport.get_extra_info("socket")
            return int(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        assert on_loop(server, nodelay) == 1


@pytest.mark.skipif(shared._malloc_trim() is None, reason="no malloc_trim (not glibc)")
def test_the_memory_of_a_flood_is_handed_back_once_it_has_gone(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared, "TRIM_AFTER", 100)
    monkeypatch.setattr(shared, "TRIM_DELAY", 0.05)
    with serving(loop=loop) as (server, _):
        small = [connect(server) for _ in range(99)]  # below the flood size: kept as it is
        wait_until(lambda: server.server.open_connections == 99)
        for sock in small:
            sock.close()
        wait_until(lambda: server.server.open_connections == 0)
        time.sleep(0.3)
        assert server.server.heap_trims == 0
        flood = [connect(server) for _ in range(200)]
        wait_until(lambda: server.server.open_connections == 200)
        for sock in flood[:100]:
            sock.close()
        time.sleep(0.3)
        assert server.server.heap_trims == 0  # half of it is still there
        for sock in flood[100:]:
            sock.close()
        wait_until(lambda: server.server.heap_trims == 1, timeout=5)
