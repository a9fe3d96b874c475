"""A relay on a pooled upstream connection (most proxied requests), and all the ways it ends.

Each request here comes after one that left an idle kept-alive connection
to the upstream in the pool: the upstream too slow, the consumer leaving,
the server stopping, a pooled connection gone stale (replaced, the request
sent again), and an answer whose body is still coming (streamed).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import requests
from upstreams import Misbehaving

import mockskill


def scenario(upstream: Misbehaving) -> str:
    return f"""
name: pooled
routes:
  - {{path: /ok, proxy: {upstream.url}}}
  - {{path: /drop, proxy: {upstream.url}}}
  - {{path: /half, proxy: {upstream.url}}}
  - {{path: /hold, proxy: {{url: {upstream.url}, timeout_ms: 300}}}}
  - {{path: /hold-long, proxy: {{url: {upstream.url}, timeout_ms: 20000}}}}
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[Misbehaving]:
    made = Misbehaving("keep_alive")
    yield made
    made.release.set()
    made.stop()


@pytest.fixture(scope="module")
def front(upstream: Misbehaving) -> Iterator[mockskill.Server]:
    with mockskill.Server(scenario(upstream)) as server:
        yield server


@pytest.fixture
def pooled(front: mockskill.Server, upstream: Misbehaving) -> Iterator[mockskill.Server]:
    """*front* with an idle connection to the upstream in its pool."""
    upstream.release.clear()
    response = requests.get(f"{front.url}/ok", timeout=10)
    assert (response.status_code, response.content) == (200, b"ok")
    yield front
    upstream.release.set()


def entries(server: mockskill.Server, path: str) -> list[mockskill.Entry]:
    return [e for e in server.journal() if e.path == path]


def wait_for_entry(server: mockskill.Server, path: str, before: int) -> mockskill.Entry:
    deadline = time.monotonic() + 5
    while len(entries(server, path)) == before:
        assert time.monotonic() < deadline, f"no journal entry for {path}"
        time.sleep(0.01)
    return entries(server, path)[-1]


def test_a_pooled_exchange_is_relayed_and_the_connection_reused(
    pooled: mockskill.Server, upstream: Misbehaving
) -> None:
    before = upstream.connections
    with requests.Session() as session:
        for _ in range(3):
            response = session.get(f"{pooled.url}/ok", timeout=10)
            assert (response.status_code, response.content) == (200, b"ok")
    assert upstream.connections == before
    entry = entries(pooled, "/ok")[-1]
    assert entry.status == 200
    assert entry.upstream is not None
    assert (entry.upstream["reached"], entry.upstream["status"]) == (True, 200)


def test_a_pooled_exchange_too_slow_is_execution_timeout_504(pooled: mockskill.Server) -> None:
    started = time.monotonic()
    response = requests.get(f"{pooled.url}/hold", timeout=10)
    elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "EXECUTION_TIMEOUT"
    assert 0.25 < elapsed < 5
    entry = entries(pooled, "/hold")[-1]
    assert entry.upstream is not None
    assert (entry.upstream["reached"], entry.upstream["status"]) == (True, None)
    assert "300 ms" in str(entry.upstream["error"])


def test_the_consumer_leaving_a_pooled_exchange_is_journalled_at_once(
    pooled: mockskill.Server,
) -> None:
    before = len(entries(pooled, "/hold-long"))
    port = int(pooled.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /hold-long HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.05)
    started = time.monotonic()
    entry = wait_for_entry(pooled, "/hold-long", before)
    assert time.monotonic() - started < 5  # not the upstream's 20 s timeout
    assert entry.client_left is not None
    assert entry.status is None
    assert entry.upstream is not None
    assert entry.upstream["reached"] is True


def test_a_pooled_connection_the_upstream_dropped_is_replaced_and_the_request_sent_again(
    pooled: mockskill.Server, upstream: Misbehaving
) -> None:
    before = upstream.connections
    response = requests.get(f"{pooled.url}/drop", timeout=10)
    assert (response.status_code, response.content) == (200, b"fresh")
    assert upstream.connections == before + 1


def test_a_body_still_coming_on_a_pooled_connection_is_streamed(
    pooled: mockskill.Server, upstream: Misbehaving
) -> None:
    with requests.get(f"{pooled.url}/half", timeout=5, stream=True) as response:
        # The head came before the upstream's whole body (it waits for the release).
        assert response.status_code == 200
        assert response.headers["Content-Length"] == "10"
        upstream.release.set()
        assert response.content == b"0123456789"


def test_the_server_stopping_ends_a_pooled_exchange_and_journals_it(
    upstream: Misbehaving,
) -> None:
    upstream.release.clear()
    server = mockskill.Server(scenario(upstream)).start()
    failures: list[Exception] = []
    try:
        assert requests.get(f"{server.url}/ok", timeout=10).status_code == 200
        seen = upstream.requests

        def call() -> None:
            try:
                requests.get(f"{server.url}/hold-long", timeout=10)
            except requests.ConnectionError as exc:  # cut: the answer never came
                failures.append(exc)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        deadline = time.monotonic() + 5
        while upstream.requests == seen:  # until the request is at the upstream, held
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        server.stop(grace=0)
        assert time.monotonic() - started < 2
        thread.join(timeout=5)
    finally:
        upstream.release.set()
        server.stop()
    assert len(failures) == 1
    entry = [e for e in server.journal() if e.path == "/hold-long"][-1]
    assert (entry.status, entry.stopped, entry.client_left) == (None, True, None)
    assert entry.upstream is not None
    assert entry.upstream["reached"] is True
