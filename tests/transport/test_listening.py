"""Accepting: the kernel's listen queue is emptied while the loop is busy (issue 13's burst).

The kernel holds at most ``somaxconn`` (4096) connections that the server
has not accepted yet, and drops the SYNs beyond them: their clients' kernels
resend them a second later. These tests read that queue's length
(``TCP_INFO`` of the listening socket: ``tcpi_unacked`` is the queue while it
listens) to show when the server takes what it holds — at each readiness,
everything (uvloop's own server took one per pass of the loop), and again
from the callbacks of a busy pass, not only when the loop polls again.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from transport_helpers import LOOPS, Recorder, echo, parse, read_until_closed

from mockskill import Server
from mockskill.transport import Plan, Request, ThreadedServer
from mockskill.transport.connection import Connection

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="TCP_INFO of a listening socket: Linux"
)


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def queued(listening: socket.socket) -> int:
    """Connections the kernel holds for *listening*, not accepted yet."""
    info = listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    # struct tcp_info: eight u8 fields, then u32 rto, ato, snd_mss, rcv_mss, unacked...
    return int(struct.unpack_from("I", info, 8 + 4 * 4)[0])


def wait_until_queued(listening: socket.socket, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while queued(listening) < count:
        assert time.monotonic() < deadline, f"{queued(listening)} queued, {count} expected"
        time.sleep(0.001)


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


def clients(port: int, count: int) -> list[socket.socket]:
    """*count* connections, each with a request sent: complete in the kernel, not accepted."""
    made = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        made.append(sock)
    return made


def answered(sock: socket.socket) -> int:
    with sock:
        (response,) = parse(read_until_closed(sock, timeout=10))
    return response.status


def test_what_the_kernel_holds_is_accepted_at_once_not_one_per_loop_pass(
    loop: str, listening: socket.socket
) -> None:
    server = ThreadedServer(Recorder(), loop=loop, sock=listening).start()  # type: ignore[arg-type]
    try:
        release = threading.Event()
        passes: list[int] = []
        done = threading.Event()

        def probe() -> None:
            passes.append(queued(listening))
            if len(passes) < 3:
                server.loop.call_soon(probe)
            else:
                done.set()

        def busy() -> None:  # the loop does something else while the clients connect
            blocked.set()
            release.wait(10)
            server.loop.call_soon(probe)

        blocked = threading.Event()
        server.call(busy)
        assert blocked.wait(10)
        waiting = clients(server.port, 300)
        wait_until_queued(listening, 300)
        release.set()
        assert done.wait(10)
        # Three passes of the loop after it is free again, the queue is empty: at one
        # connection a pass (uvloop's own server), 297 would still be waiting.
        assert passes[-1] == 0, passes
        assert [answered(sock) for sock in waiting] == [200] * 300
    finally:
        server.stop(grace=0)


def test_a_busy_pass_of_the_loop_takes_the_connections_that_arrive_meanwhile(
    loop: str, listening: socket.socket
) -> None:
    # The first wave's requests are planned in one pass of the loop, 2 ms each; while
    # the first of them is planned, a second wave connects. It is taken during that
    # pass, from the callbacks, not once the loop polls the listening socket again.
    planning, second_wave_queued = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow(request: Request) -> Plan:
        if not seen:
            planning.set()
            assert second_wave_queued.wait(10)
        seen.append(queued(listening))
        time.sleep(0.002)
        return echo(request)

    server = ThreadedServer(Recorder(slow), loop=loop, sock=listening).start()  # type: ignore[arg-type]
    try:
        blocked, release = threading.Event(), threading.Event()
        server.call(lambda: (blocked.set(), release.wait(10)))
        assert blocked.wait(10)
        first = clients(server.port, 100)
        wait_until_queued(listening, 100)
        release.set()
        assert planning.wait(10)
        second = clients(server.port, 100)
        wait_until_queued(listening, 100)
        second_wave_queued.set()
        statuses = [answered(sock) for sock in first + second]
        assert statuses == [200] * 200
        # seen[i]: how many of the second wave were still queued when the first
        # wave's i-th request was planned: all of them at first, none a few
        # milliseconds into the pass (at the end of it, without the look from the
        # callbacks: 200 ms on).
        assert seen[0] == 100, seen[:5]
        assert 0 in seen[:10], seen[:100]
        assert seen[99] == 0, seen[:100]
    finally:
        server.stop(grace=0)


def test_the_servers_accepted_sockets_do_not_delay_small_writes_without_uvloop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A plain install has no uvloop: asyncio's loop sets TCP_NODELAY only on sockets whose
    # proto says TCP, and accepted sockets say what the listening socket says.
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop fails: asyncio's loop
    with Server() as server:  # the bundled scenarios
        assert isinstance(server._threaded.loop, asyncio.BaseEventLoop)  # type: ignore[union-attr]
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"GET /skills HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")

            def nodelay() -> None:
                (connection,) = (
                    o
                    for o in gc.get_objects()
                    if type(o) is Connection and o._local[1] == server.port and not o._closed
                )
                raw = connection._transport.get_extra_info("socket")  # type: ignore[union-attr]
                found.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                got.set()

            found: list[int] = []
            got = threading.Event()
            server._threaded.call(nodelay)  # type: ignore[union-attr]
            assert got.wait(5)
            assert found == [1]


def test_the_connections_taken_from_the_kernels_queue_make_no_task_each(
    loop: str, listening: socket.socket
) -> None:
    # The Listener steps the loop's connect_accepted_socket itself: a task each (made,
    # stepped, its callback run, freed) cost about as much as the rest of the adoption.
    server = ThreadedServer(Recorder(), loop=loop, sock=listening).start()  # type: ignore[arg-type]
    try:
        made: list[object] = []

        def counting(
            event_loop: asyncio.AbstractEventLoop, coroutine: object, **kwargs: object
        ) -> asyncio.Task[object]:
            if "connect_accepted_socket" in str(getattr(coroutine, "__qualname__", "")):
                made.append(coroutine)  # not the loop's own server's (asyncio: a task each)
            return asyncio.Task(coroutine, loop=event_loop, **kwargs)  # type: ignore[arg-type]

        blocked, release = threading.Event(), threading.Event()

        def busy() -> None:
            server.loop.set_task_factory(counting)  # type: ignore[arg-type]
            blocked.set()
            release.wait(10)

        server.call(busy)
        assert blocked.wait(10)
        waiting = clients(server.port, 200)
        wait_until_queued(listening, 200)
        release.set()
        assert [answered(sock) for sock in waiting] == [200] * 200
        assert server.server.accepted == 200
        assert made == []
    finally:
        server.stop(grace=0)


def test_the_connections_taken_from_the_kernels_queue_know_both_their_addresses(
    loop: str, listening: socket.socket
) -> None:
    # The Listener hands each protocol the client's address as accept() gave it, and the
    # listening socket's own (bound to one address) stands for every connection's local
    # one: neither is asked of the transport again. The request still says both right.
    recorder = Recorder()
    server = ThreadedServer(recorder, loop=loop, sock=listening).start()  # type: ignore[arg-type]
    try:
        blocked, release = threading.Event(), threading.Event()
        server.call(lambda: (blocked.set(), release.wait(10)))
        assert blocked.wait(10)
        waiting = clients(server.port, 200)
        wait_until_queued(listening, 200)
        ends = {sock.getsockname(): sock.getpeername() for sock in waiting}
        release.set()
        assert [answered(sock) for sock in waiting] == [200] * 200
        requests = [e for e, _ in recorder.wait_for(200) if isinstance(e, Request)]
        assert {r.peer: r.local for r in requests} == ends
    finally:
        server.stop(grace=0)


def test_a_server_listening_on_every_address_says_the_one_each_client_reached(
    loop: str,
) -> None:
    # Bound to the wildcard, a connection's local address is the one its client used
    # (127.0.0.1 here), not 0.0.0.0: asked of each connection's transport.
    recorder = Recorder()
    server = ThreadedServer(recorder, "0.0.0.0", loop=loop).start()  # type: ignore[arg-type]
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            (response,) = parse(read_until_closed(sock, timeout=10))
            assert response.status == 200
            ((request, _),) = recorder.wait_for(1)
            assert isinstance(request, Request)
            assert request.local == sock.getpeername() == ("127.0.0.1", server.port)
            assert request.peer == sock.getsockname()
    finally:
        server.stop(grace=0)


def test_the_connections_taken_from_the_kernels_queue_do_not_delay_small_writes(
    loop: str,
) -> None:
    # asyncio's loop is told TCP_NODELAY by the Listener; uvloop (libuv) sets it itself on
    # every TCP transport it opens, so the Listener does not ask it again there. (A socket
    # that says TCP, as the server binds: asyncio's own server sets it only on those.)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.bind(("127.0.0.1", 0))
    server = ThreadedServer(Recorder(), loop=loop, sock=listening).start()  # type: ignore[arg-type]
    try:
        found: list[int] = []
        got = threading.Event()

        def nodelay() -> None:
            taken = [
                o
                for o in gc.get_objects()
                if type(o) is Connection and o._local[1] == server.port and not o._closed
            ]
            for connection in taken:
                raw = connection._transport.get_extra_info("socket")  # type: ignore[union-attr]
                found.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            got.set()

        blocked, release = threading.Event(), threading.Event()
        server.call(lambda: (blocked.set(), release.wait(10)))
        assert blocked.wait(10)
        held = [
            socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(100)
        ]
        wait_until_queued(listening, 100)
        release.set()
        deadline = time.monotonic() + 10
        while server.server.accepted < 100:
            assert time.monotonic() < deadline, server.server.accepted
            time.sleep(0.01)
        server.call(nodelay)
        assert got.wait(10)
        assert found == [1] * 100
        for sock in held:
            sock.close()
    finally:
        server.stop(grace=0)
        listening.close()
