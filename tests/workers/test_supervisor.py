"""``mockskill serve --workers N``: N processes on one port, supervised, sharing a real Redis.

Each test runs the command as a user would (``python -m mockskill serve``
in a process of its own) and talks to its port with real clients. Which
worker served a request is read from the request log, whose lines each
worker begins with ``[worker I pid P]``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from redis_server import RedisServer

from mockskill.workers.supervisor import reuse_port_available

SCENARIO = """\
name: workers-test
skills:
  - id: ok
    invoke: {json: {result: ok}}
  - id: brief
    invoke: {delay: 1000, json: {drained: true}}
  - id: hold
    invoke: {delay: 20000, json: {result: late}}
  - id: flaky
    invoke:
      end: cycle
      steps:
        - error: ENDPOINT_UNREACHABLE
          times: 2
        - json: {result: ok}
"""
LOGGED = re.compile(r"^\[worker (\d+) pid (\d+)\] .*\"GET /skills/ok\?probe=(\S+) HTTP")

linux_only = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="reads the sockets from /proc (Linux)"
)


class Supervised:
    """``mockskill serve --workers ...`` in a process of its own, its output read as it comes."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mockskill", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (self.process.stdout, self.process.stderr)
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 60) -> re.Match[str]:
        """The first line from number *after* on that matches *pattern* (a regex)."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines[after:]:
                    if match := compiled.search(line):
                        return match
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reading()):
                    raise AssertionError(f"no line matches {pattern!r}:\n" + "\n".join(self.lines))
                self._changed.wait(min(left, 0.5))

    def _reading(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def serving(self) -> tuple[str, list[int]]:
        """The URL and the workers' pids, once the start line says all of them serve."""
        match = self.wait_for(r"mockskill: \d+ workers serving at (\S+) \(pids ([\d, ]+);")
        return match.group(1), [int(p) for p in match.group(2).split(", ")]

    def finish(self, timeout: float = 30) -> int:
        """The exit code, once the process and its output are done."""
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "workers.yaml"
    path.write_text(SCENARIO)
    return path


@pytest.fixture
def supervised() -> Iterator[Callable[..., Supervised]]:
    started: list[Supervised] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Supervised:
        run = Supervised(list(args), env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.close()


def probe(url: str, count: int) -> dict[str, int]:
    """*count* requests, each on a connection of its own: which worker pid served each."""
    tag = uuid.uuid4().hex[:8]
    for i in range(count):
        answer = requests.get(f"{url}/skills/ok", params={"probe": f"{tag}-{i}"}, timeout=10)
        assert answer.status_code == 200, answer.text
    return {f"{tag}-{i}": 0 for i in range(count)}


def served_by(run: Supervised, probes: dict[str, int], timeout: float = 20) -> dict[str, int]:
    """The pid that logged each probe (waiting for the log lines to come)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {}
        for line in run.output.splitlines():
            match = LOGGED.search(line)
            if match and match.group(3) in probes:
                found[match.group(3)] = int(match.group(2))
        if len(found) == len(probes) or time.monotonic() > deadline:
            assert set(found) == set(probes), run.output
            return found
        time.sleep(0.1)


def listening_inodes(port: int) -> set[int]:
    """The inodes of the sockets listening on *port* (state 0A in /proc/net/tcp[6])."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(int(fields[9]))
    return inodes


def sockets_of(pid: int) -> set[int]:
    """The socket inodes process *pid* holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


# -- serving -----------------------------------------------------------------------


@linux_only
@pytest.mark.skipif(not reuse_port_available(), reason="this platform has no SO_REUSEPORT")
def test_two_workers_each_listen_on_the_port_and_both_answer(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised("--workers", "2", "--state", redis_url, str(scenario))
    url, pids = run.serving()
    assert len(set(pids)) == 2
    assert "sharing the port by reuseport" in run.output
    port = int(url.rsplit(":", 1)[1])
    # Two listening sockets, one per worker (the parent's keeps the port, not listening).
    listening = listening_inodes(port)
    assert len(listening) == 2
    assert all(len(sockets_of(pid) & listening) == 1 for pid in pids)
    # New connections are spread by the kernel: 40 of them all on one worker is 2**-39.
    served = served_by(run, probe(url, 40))
    assert set(served.values()) == set(pids)
    # One sequence across both: "503 twice, then 200" holds whichever worker answers,
    # and the one journal names both workers.
    session = {"Mockskill-Session": f"workers-{uuid.uuid4().hex[:8]}"}
    statuses = [
        requests.post(f"{url}/skills/flaky/invoke", headers=session, timeout=10).status_code
        for _ in range(30)
    ]
    assert statuses == [503, 503, 200] * 10
    journal = requests.get(
        f"{url}/__admin/journal", params={"session": session["Mockskill-Session"]}, timeout=10
    ).json()["entries"]
    # (each worker sends its entries in batches of its own: in the order they came, not
    # necessarily in the order they were answered)
    assert [e["status"] for e in sorted(journal, key=lambda e: e["started"])] == statuses
    assert {e["replica"] for e in journal} == {f"{socket.gethostname()}:{pid}" for pid in pids}


@linux_only
def test_the_workers_can_share_one_inherited_listening_socket(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised(
        "--workers",
        "2",
        "--state",
        redis_url,
        str(scenario),
        env={"MOCKSKILL_WORKER_SOCKET": "inherit"},
    )
    url, pids = run.serving()
    assert "sharing the port by inherit" in run.output
    port = int(url.rsplit(":", 1)[1])
    (listening,) = listening_inodes(port)  # the parent's one socket ...
    assert all(listening in sockets_of(pid) for pid in pids)  # ... in both workers
    served = served_by(run, probe(url, 20))
    assert set(served.values()) <= set(pids)


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised("--workers", "2", "--state", redis_url, str(scenario))
    url, pids = run.serving()
    mark = len(run.lines)
    os.kill(pids[1], signal.SIGKILL)
    run.wait_for(
        rf"mockskill: worker 2 \(pid {pids[1]}\) exited with signal SIGKILL; restarting it$",
        after=mark,
    )
    new = int(run.wait_for(r"mockskill: worker 2 \(pid (\d+)\) serving at", after=mark).group(1))
    assert new not in pids
    served = served_by(run, probe(url, 30))
    assert pids[1] not in served.values()
    assert set(served.values()) <= {pids[0], new}
    assert run.process.poll() is None


def test_sigterm_lets_a_request_in_flight_finish_then_the_parent_exits_0(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised("--workers", "2", "--state", redis_url, str(scenario))
    url, pids = run.serving()
    answers: list[requests.Response | Exception] = []

    def ask() -> None:
        try:
            answers.append(requests.post(f"{url}/skills/brief/invoke", timeout=15))
        except requests.RequestException as exc:
            answers.append(exc)

    client = threading.Thread(target=ask)
    client.start()
    time.sleep(0.4)  # the request is in (its answer is 1 s away)
    run.process.send_signal(signal.SIGTERM)
    client.join(timeout=15)
    assert [getattr(a, "status_code", a) for a in answers] == [200]
    assert answers[0].json() == {"drained": True}  # type: ignore[union-attr]
    assert run.finish() == 0
    assert "mockskill: stopping 2 workers (requests in flight finish)" in run.output
    assert "mockskill stopped." in run.output
    assert "Traceback" not in run.output
    for pid in pids:  # no worker is left behind
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        )


def test_a_second_signal_stops_the_workers_at_once(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised("--workers", "2", "--grace", "30", "--state", redis_url, str(scenario))
    url, _ = run.serving()
    outcome: list[object] = []
    client = threading.Thread(
        target=lambda: outcome.append(_outcome(f"{url}/skills/hold/invoke")), daemon=True
    )
    client.start()
    time.sleep(0.4)  # the request is in (its answer is 20 s away, the grace 30 s)
    run.process.send_signal(signal.SIGTERM)
    run.wait_for(r"stopping 2 workers")
    started = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    assert run.finish() == 0
    assert time.monotonic() - started < 5, run.output
    client.join(timeout=5)
    assert len(outcome) == 1
    assert isinstance(outcome[0], requests.ConnectionError), outcome


def _outcome(url: str) -> object:
    try:
        return requests.post(url, timeout=30)
    except requests.RequestException as exc:
        return exc


def test_no_worker_outlives_a_supervisor_that_was_killed(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    run = supervised("--workers", "2", "--state", redis_url, str(scenario))
    _, pids = run.serving()
    run.process.kill()  # no chance to stop its workers: they see their pipe to it close
    run.finish()
    deadline = time.monotonic() + 20
    while any(_running(pid) for pid in pids):
        assert time.monotonic() < deadline, f"workers left running: {pids}"
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


# -- the store ---------------------------------------------------------------------


def test_a_store_that_does_not_answer_at_start_stops_the_supervisor_with_its_error(
    supervised: Callable[..., Supervised], scenario: Path
) -> None:
    with socket.socket() as holder:  # a port nothing answers on
        holder.bind(("127.0.0.1", 0))
        nowhere = f"redis://127.0.0.1:{holder.getsockname()[1]}/0"
    run = supervised("--workers", "2", "--state", nowhere, str(scenario))
    assert run.finish() == 1
    assert f"cannot use the state store {nowhere}" in run.output
    assert re.search(
        r"mockskill: worker \d \(pid \d+\) exited with code 1 before serving;", run.output
    )
    assert "restarting" not in run.output
    assert "Traceback" not in run.output


def test_a_worker_that_keeps_dying_at_once_is_restarted_with_back_off(
    supervised: Callable[..., Supervised],
    scenario: Path,
    own_redis: Callable[..., RedisServer],
) -> None:
    redis = own_redis()
    run = supervised("--workers", "2", "--state", redis.url, str(scenario))
    url, pids = run.serving()
    redis.stop()  # the store goes away: a worker restarted now cannot start
    mark = len(run.lines)
    os.kill(pids[0], signal.SIGKILL)
    run.wait_for(r"worker 1 \(pid \d+\) exited with signal SIGKILL; restarting it$", after=mark)
    run.wait_for(
        r"worker 1 \(pid \d+\) exited with code 1; restarting it in 0.5 s"
        r" \(it died before serving 1 times in a row\)",
        after=mark,
    )
    run.wait_for(r"restarting it in 1 s \(it died before serving 2 times in a row\)", after=mark)
    redis.start()  # back: the next restart serves again
    run.wait_for(r"mockskill 0\.\S+ serving .* \(worker 1, pid \d+;", after=mark, timeout=90)
    assert run.process.poll() is None
    assert requests.get(f"{url}/skills", timeout=10).status_code == 200


def test_the_stores_password_is_never_shown(
    supervised: Callable[..., Supervised],
    scenario: Path,
    own_redis: Callable[..., RedisServer],
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    redis = own_redis(password=password)
    state = f"redis://:{password}@127.0.0.1:{redis.port}/0"
    run = supervised("--workers", "2", "--state", state, str(scenario))
    url, pids = run.serving()
    assert f"state: shared, redis://:***@127.0.0.1:{redis.port}/0" in run.output
    requests.post(f"{url}/skills/nothing-here/invoke", timeout=10)
    health = requests.get(f"{url}/__admin/health", timeout=10).text
    for pid in pids:  # nor in the workers' command lines (their settings come by environment)
        assert password not in Path(f"/proc/{pid}/cmdline").read_text()
    run.process.send_signal(signal.SIGTERM)
    assert run.finish() == 0
    assert password not in run.output
    assert password not in health


def test_a_port_another_supervisor_serves_is_refused(
    supervised: Callable[..., Supervised], scenario: Path, redis_url: str
) -> None:
    first = supervised("--workers", "2", "--state", redis_url, str(scenario))
    url, _ = first.serving()
    port = url.rsplit(":", 1)[1]
    command = ["serve", "--workers", "2", "--port", port, "--state", redis_url, str(scenario)]
    second = subprocess.run(
        [sys.executable, "-m", "mockskill", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
    assert f"port {port} is in use" in second.stderr


def test_workers_without_the_redis_client_are_refused_once_before_any_starts(
    scenario: Path,
) -> None:
    """Every worker said that the Redis client is not installed, and then the supervisor
    said a worker died: said once, by the supervisor, before forking. (The client is hidden
    from this child process by a finder that refuses it, as if not installed.)"""
    hidden = (
        "import sys\n"
        "class NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'redis':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from mockskill.cli import cli\n"
        "cli(sys.argv[1:], prog_name='mockskill')\n"
    )
    store = "redis://127.0.0.1:1/0"
    command = ["serve", "--port", "0", "--workers", "2", "--state", store, str(scenario)]
    done = subprocess.run(
        [sys.executable, "-c", hidden, *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"mockskill: cannot use the state store {store}: the Redis client is not installed"
        " (redis): pip install 'mockskill[redis]'\n"
    )
