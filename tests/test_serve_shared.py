"""``mockskill serve --state redis://...`` without PATHS: a replica joins its fleet's set.

Real processes on ephemeral ports and a real Redis: a replica started with
files publishes them; one started without any serves the set stored there
(not the bundled scenarios over it), and publishes the bundled scenarios
only when Redis holds no set yet. Without a shared state, ``serve`` with no
PATHS serves the bundled scenarios as it always did (tests/cli/test_main.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

Serve = Callable[..., str]

ONLY_HERE = """\
name: only-here
skills:
  - id: only-here
    invoke: {json: {from: files}}
"""


def free_port() -> int:
    with socket.socket() as sock:  # bound, then let go: free for the process to take
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(*args)``: ``mockskill serve --port P *args`` in a process, serving; its base URL."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "mockskill", "serve", "--port", str(port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        processes.append(process)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            try:
                requests.get(f"{base}/skills", timeout=1)
                return base
            except requests.ConnectionError:
                time.sleep(0.05)
        pytest.fail(f"mockskill serve {' '.join(args)} did not listen on port {port}")

    yield start
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def skills(base: str) -> set[str]:
    listed = requests.get(f"{base}/skills", timeout=10).json()
    return {skill["id"] for skill in listed["skills"]}


def test_a_replica_started_without_paths_serves_the_set_its_fleet_stored(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    files = tmp_path / "only-here.yaml"
    files.write_text(ONLY_HERE, encoding="utf-8")
    a = serve("--state", redis_url, str(files))

    b = serve("--state", redis_url)  # no PATHS: joins what A published

    assert skills(b) == {"only-here"}
    answer = requests.post(f"{b}/skills/only-here/invoke", json={"input": {}}, timeout=10)
    assert answer.json() == {"from": "files"}
    # Nothing published over A's set (B would have, at its start): still version 1.
    assert requests.get(f"{b}/__admin/health", timeout=10).json()["scenario_set"] == {"version": 1}
    assert skills(a) == {"only-here"}


def test_a_replica_started_without_paths_on_an_empty_redis_publishes_the_bundled_set(
    serve: Serve, redis_url: str
) -> None:
    alone = serve()  # no shared state: the bundled scenarios, as always
    b = serve("--state", redis_url)

    assert skills(b) == skills(alone)
    assert "translate" in skills(b)
    assert requests.get(f"{b}/__admin/health", timeout=10).json()["scenario_set"] == {"version": 1}
