"""``--watch`` and Server.reload: edits are served, bad edits are not, positions are kept."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
from mockskill.control.watch import Watcher, snapshot

FAST = 0.05
"""Poll interval of the watchers in these tests (seconds)."""

DEADLINE = 10.0
"""How long a test waits for a reload to show; generous, for a loaded machine."""


def scenario(name: str, *answers: Any, delay: int | None = None) -> str:
    """A scenario file: skill *name* answers ``{"n": answer}`` for each answer, in turn."""
    steps = "\n".join(
        f"      - json: {{n: {a!r}}}" + (f"\n        delay: {delay}" if delay else "")
        for a in answers
    )
    return f"name: {name}\nskills:\n  - id: {name}\n    invoke:\n{steps}\n"


_bumps = iter(range(1, 1_000_000))


def write(path: Path, text: str) -> None:
    """Write *text* and move the mtime on, so that no edit looks like the last one."""
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    stamp = time.time() + next(_bumps)
    os.utime(path, (stamp, stamp))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answer(server: Server, skill: str, session: str = "default") -> Any:
    response = requests.post(
        server.invoke_url(skill), headers={"Mockskill-Session": session}, timeout=10
    )
    return response.json()


def eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, "the change did not show in time"
        time.sleep(0.02)


def health(server: Server) -> dict[str, Any]:
    body: dict[str, Any] = requests.get(f"{server.url}/__admin/health", timeout=10).json()
    return body


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``watched(*files)``: a started server on those files, watching them; stopped after."""
    servers: list[Server] = []

    def start(*files: Path) -> Server:
        server = Server(list(files)).start()
        servers.append(server)
        server.watch(files, interval=FAST)
        return server

    yield start
    for server in servers:
        server.stop()


def test_an_edit_is_served_within_moments(tmp_path: Path, watched: Callable[..., Server]) -> None:
    file = tmp_path / "a.yaml"
    write(file, scenario("a", "old"))
    server = watched(file)
    assert answer(server, "a") == {"n": "old"}
    assert health(server)["reload"]["status"] == "none"
    write(file, scenario("a", "new"))
    eventually(lambda: answer(server, "a", "fresh") == {"n": "new"})
    reload = health(server)["reload"]
    assert reload["status"] == "ok"
    assert reload["changed"] == ["a"]
    assert reload["problems"] == []
    assert abs(reload["at"] - time.time()) < 60


def test_scenarios_loaded_over_http_outlive_an_edit_of_the_files(
    tmp_path: Path, watched: Callable[..., Server]
) -> None:
    # A suite loads its own scenario into a watching server (a container with
    # MOCKSKILL_WATCH=1, say): editing the mounted files must not wipe it.
    file = tmp_path / "a.yaml"
    write(file, scenario("a", "old"))
    server = watched(file)
    loaded = requests.post(
        f"{server.url}/__admin/scenarios",
        data=scenario("mine", 1, 2, 3),
        headers={"Content-Type": "application/yaml"},
        timeout=10,
    )
    assert loaded.status_code == 201
    assert answer(server, "mine") == {"n": 1}
    write(file, scenario("a", "new"))
    eventually(lambda: answer(server, "a", "fresh") == {"n": "new"})
    assert answer(server, "mine") == {"n": 2}  # still served, its position kept
    assert health(server)["scenarios"] == ["a", "mine"]


def test_an_invalid_edit_keeps_the_last_good_scenarios_and_health_shows_why(
    tmp_path: Path, watched: Callable[..., Server]
) -> None:
    file = tmp_path / "a.yaml"
    write(file, scenario("a", "good"))
    server = watched(file)
    write(file, "name: a\nskills:\n  - id: a\n    invoke: {json: 1, status: nine}\n")
    eventually(lambda: health(server)["reload"]["status"] == "failed")
    body = health(server)
    assert body["status"] == "ok"  # still serving
    assert body["scenarios"] == ["a"]
    problems = body["reload"]["problems"]
    assert problems
    assert problems[0]["file"] == str(file)
    assert problems[0]["line"] == 4
    assert problems[0]["text"].startswith(f"{file}:4:")
    assert answer(server, "a") == {"n": "good"}
    assert server.last_reload is not None
    assert not server.last_reload.ok

    write(file, scenario("a", "fixed"))
    eventually(lambda: answer(server, "a", "fresh") == {"n": "fixed"})
    assert health(server)["reload"]["status"] == "ok"
    assert health(server)["reload"]["problems"] == []


def test_only_the_edited_scenarios_positions_restart(
    tmp_path: Path, watched: Callable[..., Server]
) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write(a, scenario("a", 1, 2, 3))
    write(b, scenario("b", 1, 2, 3))
    server = watched(a, b)
    for skill in ("a", "b"):
        assert [answer(server, skill)["n"] for _ in range(2)] == [1, 2]
    write(a, scenario("a", 10, 20, 30))
    eventually(lambda: server.last_reload is not None and server.last_reload.ok)
    assert server.last_reload is not None
    assert server.last_reload.changed == ("a",)
    assert answer(server, "a") == {"n": 10}  # restarted, on the new steps
    assert answer(server, "b") == {"n": 3}  # kept its place


def test_reload_without_a_change_keeps_every_position(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    write(file, scenario("a", 1, 2))
    with Server(file) as server:
        assert answer(server, "a") == {"n": 1}
        result = server.reload([file])
        assert result.ok
        assert result.changed == ()
        assert result.scenarios == ("a",)
        assert answer(server, "a") == {"n": 2}


def test_a_removed_scenario_is_no_longer_served(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write(a, scenario("a", 1))
    write(b, scenario("b", 1))
    with Server([a, b]) as server:
        result = server.reload([a])
        assert result.ok
        assert result.removed == ("b",)
        assert server.scenario_names == ["a"]
        response = requests.post(server.invoke_url("b"), timeout=10)
        assert response.status_code == 404


def test_a_request_in_flight_finishes_on_the_old_scenarios(
    tmp_path: Path, watched: Callable[..., Server]
) -> None:
    file = tmp_path / "slow.yaml"
    write(file, scenario("slow", "old", delay=800))
    server = watched(file)
    answers: queue.Queue[Any] = queue.Queue()
    thread = threading.Thread(target=lambda: answers.put(answer(server, "slow", "early")))
    thread.start()
    time.sleep(0.2)  # the request has started its delay
    write(file, scenario("slow", "new"))
    eventually(lambda: answer(server, "slow", "late") == {"n": "new"})
    thread.join(timeout=DEADLINE)
    assert answers.get(timeout=1) == {"n": "old"}


def test_stop_ends_the_watcher_promptly(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    write(file, scenario("a", 1))
    server = Server(file).start()
    watcher = server.watch([file], interval=30)
    assert watcher.running
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    assert not watcher.running


def test_the_watcher_notices_new_and_deleted_files(tmp_path: Path) -> None:
    first = tmp_path / "a.yaml"
    write(first, scenario("a", 1))
    calls: list[int] = []
    watcher = Watcher([tmp_path], lambda: calls.append(1), interval=30).start()
    try:
        assert not watcher.poll()
        second = tmp_path / "b.yml"
        write(second, scenario("b", 1))
        assert watcher.poll()
        second.unlink()
        assert watcher.poll()
        assert len(calls) == 2
    finally:
        watcher.stop()
    assert (str(tmp_path / "gone.yaml"), -1, -1) in snapshot([tmp_path / "gone.yaml"])


def test_watch_needs_paths() -> None:
    result = CliRunner().invoke(cli, ["serve", "--watch", "--port", "0"])
    assert result.exit_code == 2
    assert "--watch" in result.output
    assert "PATH" in result.output


def test_serve_watch_prints_each_reload(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    write(file, scenario("a", "old"))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", str(file), "--watch", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    stderr = process.stderr
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True)
    reader.start()

    def wait_for(text: str) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.1))
            except queue.Empty:
                continue
            if text in seen[-1]:
                return seen
        raise AssertionError(f"{text!r} not printed; got {seen}")

    try:
        url = f"http://127.0.0.1:{port}/skills/a/invoke"
        eventually(lambda: _up(url))
        write(file, scenario("a", "new"))
        assert "mockskill: reloaded 1 scenario (changed: a)\n" in wait_for("reloaded")
        write(file, "name: a\nskills: nope\n")
        seen = wait_for("reload failed")
        assert seen[-1] == "mockskill: reload failed; still serving the last good scenarios\n"
        assert any(line.startswith(f"{file}:2:") for line in seen)
        assert requests.post(url, timeout=10).json() == {"n": "new"}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        reader.join(timeout=10)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert process.returncode == 0


def test_a_reload_names_the_scenarios_it_added(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", scenario("a", 1))
    with Server([tmp_path / "a.yaml"]) as server:
        write(tmp_path / "b.yaml", scenario("b", 1))
        result = server.reload([tmp_path])
        assert result.ok
        assert result.added == ("b",)
        assert result.changed == ("b",)
        health = requests.get(f"{server.url}/__admin/health", timeout=10).json()
        assert health["reload"]["added"] == ["b"]


def test_serve_watch_says_added_and_prints_the_new_skills_urls(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", scenario("a", "old"))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", str(tmp_path), "--watch", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    stderr = process.stderr
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True)
    reader.start()
    try:
        eventually(lambda: _up(f"http://127.0.0.1:{port}/skills/a/invoke"))
        write(tmp_path / "orders.yaml", scenario("orders", 1))
        seen: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while not any("/skills/orders/invoke" in line for line in seen):
            assert time.monotonic() < deadline, seen
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.1))
        url = f"http://127.0.0.1:{port}/skills/orders"
        assert seen[-4:] == [
            "mockskill: reloaded 2 scenarios (added: orders)\n",
            f"orders  ({tmp_path / 'orders.yaml'})\n",
            f"  orders  GET  {url}\n",
            f"          POST {url}/invoke\n",
        ]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        reader.join(timeout=10)
        stderr.close()
    assert process.returncode == 0


def _up(url: str) -> bool:
    try:
        requests.post(url, timeout=1)
    except requests.ConnectionError:
        return False
    return True


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_in_a_watched_folder_fails_the_reload_and_the_server_still_stops(
    tmp_path: Path, watched: Callable[..., Server]
) -> None:
    write(tmp_path / "a.yaml", scenario("a", "good"))
    server = watched(tmp_path)
    os.mkfifo(tmp_path / "pipe.yaml")  # read, it would block the reload (and stop()) for good
    eventually(lambda: health(server)["reload"]["status"] == "failed")
    [problem] = health(server)["reload"]["problems"]
    assert problem["file"] == str(tmp_path / "pipe.yaml")
    assert problem["found"] == "a FIFO (named pipe) there"
    assert answer(server, "a") == {"n": "good"}
    (tmp_path / "pipe.yaml").unlink()
    write(tmp_path / "a.yaml", scenario("a", "fixed"))  # the watcher still reloads
    eventually(lambda: health(server)["reload"]["status"] == "ok")
    assert answer(server, "a", "fresh") == {"n": "fixed"}
    server.stop()
