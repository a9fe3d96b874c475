"""The server: ephemeral ports, quick start and stop, many clients at once."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from mockskill import Server, ServerError, load_text

Serve = Callable[..., Server]

SLOW = """
    skills:
      - id: slow
        invoke: {delay: 800, json: {ok: true}}
"""


def test_port_zero_picks_a_free_port_and_url_says_which() -> None:
    with Server() as server:
        port = server.port
        assert port > 0
        assert server.url == f"http://127.0.0.1:{port}"
        assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
    with pytest.raises(ConnectionError):  # stopped: the port is closed
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_start_and_stop_are_quick() -> None:
    server = Server(load_text("skills: [{id: a}]"))
    started = time.monotonic()
    server.start()
    requests.get(f"{server.url}/skills", timeout=10)
    stopping = time.monotonic()
    server.stop()
    stopped = time.monotonic()
    # Generous bounds (shared, noisy machines): Werkzeug's polling shutdown
    # alone would take up to 0.5 s; ours wakes the accept loop at once.
    assert stopping - started < 2
    assert stopped - stopping < 0.4


def test_a_busy_port_is_a_clear_error_not_an_exit() -> None:
    with Server() as first:
        second = Server(port=first.port)
        with pytest.raises(ServerError, match=rf"port {first.port} is in use.*--port"):
            second.start()


def test_url_helpers_name_a_skill_and_its_invoke_endpoint() -> None:
    with Server() as server:
        assert server.skill_url("flaky") == f"{server.url}/skills/flaky"
        assert server.invoke_url("flaky") == f"{server.url}/skills/flaky/invoke"


def test_the_seed_is_kept_and_reported() -> None:
    server = Server(seed=1234)
    assert server.seed == 1234
    assert isinstance(Server().seed, int)


def test_stop_does_not_wait_for_delayed_requests(serve: Serve) -> None:
    server = serve(SLOW)
    thread = threading.Thread(
        target=lambda: requests.post(server.invoke_url("slow"), timeout=10), daemon=True
    )
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 0.4
    thread.join(timeout=5)


def test_hundreds_of_simultaneous_connections_are_all_served(serve: Serve) -> None:
    # More than Werkzeug's default backlog of 128 connect at once; each waits
    # 0.8 s, so they are all pending together.
    server = serve(SLOW)
    count = 300
    barrier = threading.Barrier(count)

    def client(_: int) -> int:
        barrier.wait(timeout=30)
        request = b"POST /skills/slow/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        return int(data.split(b" ", 2)[1])

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=count) as pool:
        statuses = list(pool.map(client, range(count)))
    elapsed = time.monotonic() - started
    assert statuses == [200] * count
    # Served concurrently, not one after another (that would be 240 s).
    assert elapsed < 20


def test_more_waiting_connections_than_select_can_watch_are_all_answered(serve: Serve) -> None:
    # Descriptors numbered 1024 and above are beyond select(); a wait that
    # used it took them for clients that had left and cut them.
    server = serve("skills: [{id: wait, invoke: {delay: 1500, json: {ok: true}}}]")
    count = 1100
    request = b"POST /skills/wait/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"

    async def one() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request)
        data = await reader.read()
        writer.close()
        await writer.wait_closed()
        return data.split(b"\r\n", 1)[0]  # the status line ("" if cut)

    async def all_of_them() -> list[bytes]:
        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(count))), 60)

    statuses = asyncio.run(all_of_them())
    assert statuses.count(b"HTTP/1.1 200 OK") == count, set(statuses)
    assert not [e for e in server.state.journal() if e.client_left is not None]
