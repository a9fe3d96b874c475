"""Helpers shared by the benchmark scripts (not a benchmark itself).

Everything here talks to 127.0.0.1 only: spawning a server as a subprocess,
waiting for its first correct answer, raw-socket HTTP requests (no client
library, so the client costs as little as possible), a bounded threaded
load generator, RSS from /proc, and printing a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BARE_FLASK = BENCH_DIR / "bare_flask.py"

ERROR_PATH = "/skills/endpoint-unreachable/invoke"
"""A bundled 503 error step (catalog.yaml); bare_flask.py serves the same path."""
DESCRIBE_PATH = "/skills/translate"
"""A bundled descriptor (healthy.yaml); bare_flask.py serves the same path."""

DELAY_SCENARIO = """\
name: bench-delay
description: One skill that answers after one second (bench/burst.py).
skills:
  - id: delay
    invoke:
      delay: 1000
      json: {ok: true}
"""


def raise_nofile() -> int:
    """Raise this process's descriptor limit to the hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def request_bytes(method: str, path: str, port: int, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUser-Agent: mockskill-bench\r\n"
        f"Connection: close\r\n"
    )
    if method in ("POST", "PUT", "PATCH"):
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def parse_response(raw: bytes) -> tuple[int, bytes]:
    """Status code and body of a whole HTTP/1.x response read to EOF (0 if unparseable)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        return int(head.split(b" ", 2)[1]), body
    except (IndexError, ValueError):
        return 0, body


def http_once(port: int, request: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send one request on a new connection and read the response to EOF."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return parse_response(b"".join(chunks))


def descriptor_ok(status: int, body: bytes) -> bool:
    """Whether GET /skills/translate answered with the right descriptor."""
    if status != 200:
        return False
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("id") == "translate"


# --------------------------------------------------------------------------- servers


def from_history(rev: str, paths: Sequence[str], into: str) -> str | None:
    """*paths* (the package, the bundled scenarios) as commit *rev* had them, under *into*,
    for a same-run reference started with ``PYTHONPATH`` at it (:func:`with_pythonpath`);
    None, and why printed, without git or that commit (a shallow clone)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev, *paths], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", into], input=archive, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if hasattr(exc, "stderr") else exc
        print(f"no reference: commit {rev} could not be taken from git ({detail})")
        return None
    return into


def with_pythonpath(cmd: list[str], folder: str) -> list[str]:
    """*cmd* importing mockskill from *folder* first (``env`` execs: the pid is Python's)."""
    return ["env", f"PYTHONPATH={folder}", *cmd]


def mockskill_cmd(
    port: int, paths: Sequence[str] = (), *, console_script: bool = False
) -> list[str]:
    if console_script:
        # The script pip installed beside this interpreter (not a pyenv shim, which
        # would add its own start-up time).
        beside = Path(sys.executable).with_name("mockskill")
        exe = str(beside) if beside.exists() else shutil.which("mockskill") or "mockskill"
        return [exe, "serve", *paths, "--port", str(port), "--quiet"]
    return [sys.executable, "-m", "mockskill", "serve", *paths, "--port", str(port), "--quiet"]


def valgrind_env() -> dict[str, str]:
    """The environment of ``mockskill serve`` run under valgrind: the hash seed fixed, so
    that two runs hash (and so allocate) alike."""
    return {**os.environ, "PYTHONHASHSEED": "0"}


def bare_cmd(port: int, backlog: int = 4096) -> list[str]:
    return [sys.executable, str(BARE_FLASK), "--port", str(port), "--backlog", str(backlog)]


@dataclass
class Spawned:
    proc: subprocess.Popen[bytes]
    port: int
    ready_s: float
    """Seconds from just before Popen to the first correct GET /skills/translate."""


def wait_ready(port: int, deadline: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll-connect every millisecond until GET /skills/translate answers correctly."""
    req = request_bytes("GET", DESCRIBE_PATH, port)
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering")
        try:
            status, body = http_once(port, req, timeout=2.0)
        except OSError:
            status, body = 0, b""
        if descriptor_ok(status, body):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no correct answer on port {port} (last status {status})")
        time.sleep(0.001)


def spawn(cmd: list[str], port: int, *, timeout: float = 20.0, cpus: str | None = None) -> Spawned:
    """Start a server and wait for its first correct answer; its output is discarded.

    The working directory is bench/, so ``python -m mockskill`` imports the
    mockskill that ``sys.path`` finds (set PYTHONPATH to measure another
    checkout), not ./mockskill.
    """
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(BENCH_DIR)
    )
    try:
        wait_ready(port, time.monotonic() + timeout, proc)
    except BaseException:
        stop(proc)
        raise
    return Spawned(proc, port, time.perf_counter() - started)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s; only this process, by its pid."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def serving(cmd_for_port: Callable[[int], list[str]], cpus: str | None = None) -> Iterator[Spawned]:
    port = free_port()
    spawned = spawn(cmd_for_port(port), port, cpus=cpus)
    try:
        yield spawned
    finally:
        stop(spawned.proc)


@contextlib.contextmanager
def scenario_file(text: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="mockskill-bench-") as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(text)
        yield str(path)


def rss_kb(pid: int) -> int:
    """VmRSS of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


# --------------------------------------------------------------------------- load


@dataclass
class LoadResult:
    requests: int
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def load(
    port: int, request: bytes | Callable[[int], bytes], count: int, concurrency: int = 8
) -> LoadResult:
    """Send *count* requests, each on a new connection, from *concurrency* threads.

    *request* is the raw request, or a function of the request's number that
    makes it. Bounded by count; a connection error is counted, never retried.
    """
    make = request if callable(request) else (lambda _i: request)
    lock = threading.Lock()
    remaining = [count]
    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()

    def worker() -> None:
        local_status: Counter[int] = Counter()
        local_err: Counter[str] = Counter()
        while True:
            with lock:
                if remaining[0] <= 0:
                    break
                remaining[0] -= 1
                number = remaining[0]
            try:
                status, _ = http_once(port, make(number))
                local_status[status] += 1
            except OSError as exc:
                local_err[type(exc).__name__] += 1
        with lock:
            statuses.update(local_status)
            errors.update(local_err)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return LoadResult(count, time.perf_counter() - started, statuses, errors)


@dataclass
class Timed:
    """One request timed by :func:`timed_request` (``time.perf_counter`` seconds)."""

    connect: float
    """Just before connecting."""
    sent: float
    """Once the whole request was handed to the kernel."""
    done: float
    """When the last byte of the body (per Content-Length) arrived, or the failure."""
    outcome: str
    """``ok`` (the expected status), ``HTTP nnn``, or the exception's name."""


async def timed_request(
    port: int,
    request: bytes,
    timeout: float,
    expect: int = 200,
    connect_gate: asyncio.Semaphore | None = None,
) -> Timed:
    """One request on a new connection, read to the last byte of the body.

    Stops at Content-Length rather than EOF, so the time does not include
    Werkzeug's wait for the client to close after the response. With
    *connect_gate*, only the connect is done holding it (a bound on connects
    in progress, so that a large burst does not overflow the listen queue).
    """
    connect = sent = time.perf_counter()
    writer = None
    try:
        opening = asyncio.open_connection(HOST, port)
        if connect_gate is None:
            reader, writer = await asyncio.wait_for(opening, timeout)
        else:
            async with connect_gate:
                connect = time.perf_counter()
                reader, connected = await asyncio.wait_for(opening, timeout)
            writer = connected
        writer.write(request)
        await writer.drain()
        sent = time.perf_counter()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            await asyncio.wait_for(reader.read(), timeout)
        else:
            await asyncio.wait_for(reader.readexactly(length), timeout)
        done = time.perf_counter()
        status, _ = parse_response(head)
        outcome = "ok" if status == expect else f"HTTP {status}"
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
        done, outcome = time.perf_counter(), type(exc).__name__
    finally:
        if writer is not None:
            writer.close()
    return Timed(connect, sent, done, outcome)


# --------------------------------------------------------------------------- reporting


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print(line(row))


def tcp_counters(*names: str) -> dict[str, int]:
    """The kernel's TCP extension counters (``nstat``'s ``TcpExt*``, this network namespace).

    ``ListenOverflows``: connections dropped because a listen queue was full (the
    client's kernel resends the SYN after 1 s); ``TCPSynRetrans``: SYNs resent.
    Machine-wide: a delta is the burst's only when nothing else runs. Empty
    where /proc/net/netstat is not (not Linux).
    """
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return {}
    rows = [line.split() for line in lines if line.startswith("TcpExt:")]
    if len(rows) < 2:
        return {}
    values = dict(zip(rows[0][1:], (int(v) for v in rows[1][1:]), strict=True))
    return {name: values[name] for name in names if name in values}


def machine() -> str:
    from importlib.metadata import version
    from importlib.util import find_spec

    spec = find_spec("mockskill")
    where = Path(spec.origin).parent if spec and spec.origin else "?"
    return (
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f", Flask {version('flask')}, Werkzeug {version('werkzeug')}"
        f" ({platform.system()} {platform.release()}); mockskill from {where}"
    )


# --------------------------------------------------------------------------- callgrind

_CALLGRIND_ROW = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$")


def callgrind_functions(out: Path) -> dict[str, int]:
    """Inclusive instructions by C function of a callgrind file, as callgrind_annotate
    prints them (for differencing two runs: bench/callgrind_request.py, _connection.py)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    costs: dict[str, int] = {}
    for line in text.splitlines():
        match = _CALLGRIND_ROW.match(line)
        if match:
            name = match.group(2).split(" [", 1)[0].strip()
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    return costs
