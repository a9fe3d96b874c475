"""Requests per second with the state on Redis against in memory, one worker each (issue 14).

``wrk -t2 -c32`` keep-alive on ``POST /skills/endpoint-unreachable/invoke``
(the bundled 503 error step: one sequence step, one journal entry per
request) against two mockskill servers started alike (``mockskill.Server``
in a child interpreter, the bundled scenarios): one with the default
in-memory state, one with ``state="redis://..."`` on a redis-server this
script starts (no persistence, on a free port). The loads go to each in
turn, ``--rounds`` times for ``--duration`` seconds; medians and the ratio
Redis / memory (target >= 50 %) are printed.

What Redis did per request comes from ``INFO commandstats`` before and after
each Redis run: the ``EVALSHA`` calls (the round-trip commands: one per
sequence step, plus one per journal batch) and every command the scripts ran
inside them; the server itself reports (at exit) how many pipelines its
loop sent and how many journal batches it sent (and how many of them in the
loop's own writes), so the needs per pipeline and entries per journal batch
are printed too.

Client, servers and Redis share the machine's cores (2 here): the ratio
counts more than the absolute figures, and a loaded machine hurts the Redis
server more (each request waits for two more wake-ups: Redis's, then the
loop's). ``--cpu N`` measures instead, in this process, the CPU of N error
steps planned and played through :class:`~mockskill.server.dispatch.LoopDispatcher` (no
socket but Redis's: 32 requests in flight at a time on one loop), with the
journal and without (``record`` replaced by nothing), for memory and Redis:
figures that do not move with the machine's load. Run::

    python bench/redis_state.py [--rounds 3 --duration 5] [--cpu 32000] [--workers]

``--workers`` compares ``mockskill serve --state redis://... --workers 1``
with ``--workers 2`` instead (the same error step, in turn).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import _common as c
import _peers as p
from keepalive import WRK_LUA, run_wrk

SERVE = """
import json, signal, sys, threading
from mockskill import Server

port, state, report = int(sys.argv[1]), sys.argv[2], sys.argv[3]
server = Server(port=port, state=None if state == "memory" else state, replica="bench")
server.start()
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
done.wait()
store = server.state
counts = {}
if state != "memory":
    counts = {
        "pipelines": sum(b.batches for b in store._batchers.values()),
        "journal_batches": store.journal_store.batches,
        "journal_loop_batches": sum(q.batches for q in store.journal_store.loops),
        "journal_sent": store.journal_store.sent,
        "journal_lost": store.journal_store.lost,
    }
server.stop()
with open(report, "w") as out:
    json.dump(counts, out)
"""


def redis_cli(port: int, *command: str) -> bytes:
    """One command's reply over a socket (no client library: the bench measures Redis)."""
    request = f"*{len(command)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in command)
    with socket.create_connection((c.HOST, port), timeout=5) as sock:
        sock.sendall(request.encode())
        data = sock.recv(65536)
        if not data.startswith(b"$"):
            return data
        head, _, rest = data.partition(b"\r\n")
        size = int(head[1:]) + 2
        while len(rest) < size:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return rest[: size - 2]


def commandstats(port: int) -> dict[str, int]:
    """Calls per command so far (``INFO commandstats``)."""
    raw = redis_cli(port, "INFO", "commandstats").decode()
    calls: dict[str, int] = {}
    for line in raw.splitlines():
        if line.startswith("cmdstat_"):
            name, _, fields = line.partition(":")
            calls[name.removeprefix("cmdstat_")] = int(fields.split(",")[0].split("=")[1])
    return calls


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (field 3 first)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds process *pid* used so far, every thread (``/proc/PID/stat``);
    *children*: and its living children's (a supervisor's workers), recursively."""
    try:
        fields = _stat(pid)
    except OSError:
        return 0.0
    used = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)
    if children:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    if int(_stat(int(entry.name))[1]) == pid:  # its parent (field 4)
                        used += cpu_seconds(int(entry.name), children=True)
    return used


def children_cpu() -> float:
    """CPU seconds of this process's children waited for so far (wrk's, after each run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Cpu:
    """CPU microseconds per request of each process over the runs measured, by name."""

    def __init__(self) -> None:
        self.used: dict[str, dict[str, float]] = {}
        self.requests: dict[str, int] = {}

    @contextlib.contextmanager
    def run(self, name: str, pids: Mapping[str, tuple[int, bool]]) -> Iterator[list[int]]:
        """Measure *pids* (process name: pid, with its children) and wrk over one run;
        the caller appends the run's request count to the list yielded."""
        before = {k: cpu_seconds(pid, kids) for k, (pid, kids) in pids.items()}
        wrk_before = children_cpu()
        count: list[int] = []
        yield count
        used = self.used.setdefault(name, {})
        for k, (pid, kids) in pids.items():
            used[k] = used.get(k, 0.0) + cpu_seconds(pid, kids) - before[k]
        used["wrk"] = used.get("wrk", 0.0) + children_cpu() - wrk_before
        self.requests[name] = self.requests.get(name, 0) + sum(count)

    def print(self) -> None:
        columns = sorted({k for used in self.used.values() for k in used}, key=_CPU_ORDER.index)
        print("\nCPU per request (us, /proc/PID/stat and wrk's rusage over every run):")
        rows = []
        for name, used in self.used.items():
            n = max(self.requests[name], 1)
            total = sum(used.values())
            rows.append(
                (name, *(f"{used[k] / n * 1e6:.1f}" if k in used else "" for k in columns),
                 f"{total / n * 1e6:.1f}")
            )  # fmt: skip
        c.print_table(["run", *columns, "all"], rows)


_CPU_ORDER = ["mockskill", "redis-server", "wrk"]


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[int, int]]:
    program = shutil.which("redis-server")
    if program is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = c.free_port()
    with tempfile.TemporaryDirectory(prefix="mockskill-bench-redis-") as tmp:
        proc = subprocess.Popen(
            [program, "--port", str(port), "--bind", c.HOST, "--save", "", "--appendonly", "no",
             "--dir", tmp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(OSError):
                    if redis_cli(port, "PING").startswith(b"+PONG"):
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not answer within 10 s")
                time.sleep(0.02)
            yield port, proc.pid
        finally:
            c.stop(proc)  # type: ignore[arg-type]


@contextlib.contextmanager
def mockskill(port: int, state: str, report: Path) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [sys.executable, "-c", SERVE, str(port), state, str(report)]
    with p.running(cmd, p.answers_status(port, 503)) as (proc, _):
        yield proc


def cpu_per_request(url: str, count: int, journal: bool) -> float:
    """CPU microseconds (this process, every thread) per error step planned and played."""
    from engine_hotpath import CASES, request

    from mockskill.engine.plan import Outcome
    from mockskill.server import Server
    from mockskill.server.dispatch import LoopDispatcher

    server = Server(quiet=True, state=url, replica="bench")
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)
    if not journal:
        server.state.record = lambda entry: None  # type: ignore[method-assign]
    req = request(*CASES["error-step"], 8080)

    async def one() -> None:
        plan = surface.plan(req)
        if not hasattr(plan, "answer"):
            plan = await plan  # type: ignore[misc]
        now = time.time()
        surface.played(req, Outcome(plan.answer, now, now, now))  # type: ignore[union-attr]

    async def requests(n: int) -> None:
        for _ in range(n // 32):
            await asyncio.gather(*(one() for _ in range(32)))

    async def measure() -> float:
        await requests(3200)  # warm: caches filled, connections made
        started = time.process_time()
        await requests(count)
        return (time.process_time() - started) / count * 1e6

    try:
        return asyncio.run(measure())
    finally:
        server.state.close()
        server.engine.close()


def print_runs(what: str, runs: Mapping[object, list[float]]) -> None:
    """The machine, then one row per server: its median req/s and every run's."""
    print(c.machine())
    c.print_table(
        [what, "req/s (median)", "runs"],
        [(k, f"{c.median(r):.0f}", " ".join(f"{x:.0f}" for x in r)) for k, r in runs.items()],
    )


def compare_workers(rounds: int, duration: int) -> None:
    """``mockskill serve --workers 1`` against ``--workers 2``, both on one Redis, in turn."""
    c.raise_nofile()
    runs: dict[int, list[float]] = {1: [], 2: []}
    cpu = Cpu()
    with tempfile.TemporaryDirectory() as tmp, redis_server() as (redis_port, redis_pid):
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        url = f"redis://{c.HOST}:{redis_port}/0"
        for _ in range(rounds):
            for workers in runs:
                port = c.free_port()
                cmd = [*c.mockskill_cmd(port), "--state", url, "--workers", str(workers)]
                with p.running(cmd, p.answers_status(port, 503)) as (proc, _):
                    pids = {"mockskill": (proc.pid, True), "redis-server": (redis_pid, False)}
                    with cpu.run(f"--workers {workers}", pids) as count:
                        run = run_wrk(port, duration, "keep-alive", lua, 503)
                        count.append(run.requests)
                    runs[workers].append(run.rps)
    print(
        f"POST {c.ERROR_PATH} -> 503; wrk -t2 -c32 keep-alive, {rounds} x {duration} s each;"
        " mockskill serve --state redis://... --workers 1, then 2 (wrk and Redis share the cores)"
    )
    print_runs("workers", runs)
    print(f"\n--workers 2 / --workers 1: {c.median(runs[2]) / c.median(runs[1]):.2f}")
    cpu.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--cpu", type=int, help="in-process CPU per request instead, N requests")
    parser.add_argument(
        "--workers", action="store_true", help="--workers 1 against 2, both on Redis"
    )
    args = parser.parse_args()
    if args.workers:
        compare_workers(args.rounds, args.duration)
        return
    if args.cpu:
        with redis_server() as (redis_port, _):
            url = f"redis://{c.HOST}:{redis_port}/0"
            rows = []
            for journal in (True, False):
                memory = min(cpu_per_request("memory", args.cpu, journal) for _ in range(3))
                redis = min(cpu_per_request(url, args.cpu, journal) for _ in range(3))
                rows.append(("with" if journal else "without", f"{memory:.1f}", f"{redis:.1f}"))
        print(f"CPU us per error step (best of 3 x {args.cpu}, 32 in flight; this process)")
        print(c.machine())
        c.print_table(["journal", "memory", "redis"], rows)
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    runs: dict[str, list[float]] = {"memory": [], "redis": []}
    requests = 0
    calls: dict[str, int] = {}
    cpu = Cpu()
    with tempfile.TemporaryDirectory() as tmp, redis_server() as (redis_port, redis_pid):
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        report = Path(tmp) / "counts.json"
        url = f"redis://{c.HOST}:{redis_port}/0"
        ports = {"memory": c.free_port(), "redis": c.free_port()}
        with (
            mockskill(ports["memory"], "memory", Path(tmp) / "memory.json") as memory_proc,
            mockskill(ports["redis"], url, report) as redis_proc,
        ):
            procs = {"memory": memory_proc, "redis": redis_proc}
            for _ in range(args.rounds):
                for name, port in ports.items():
                    before = commandstats(redis_port)
                    pids = {
                        "mockskill": (procs[name].pid, False),
                        "redis-server": (redis_pid, False),
                    }
                    with cpu.run(name, pids) as count:
                        run = run_wrk(port, args.duration, "keep-alive", lua, 503)
                        count.append(run.requests)
                    runs[name].append(run.rps)
                    if name == "redis":
                        after = commandstats(redis_port)
                        requests += run.requests
                        for command, n in after.items():
                            calls[command] = calls.get(command, 0) + n - before.get(command, 0)
            redis_proc.send_signal(signal.SIGTERM)
            redis_proc.wait(timeout=30)
        counts = json.loads(report.read_text()) if report.exists() else {}

    memory, redis = c.median(runs["memory"]), c.median(runs["redis"])
    print(
        f"POST {c.ERROR_PATH} -> 503; wrk -t2 -c32 keep-alive, {args.rounds} x {args.duration} s"
        " each, servers in turn; one worker each (mockskill.Server in a child interpreter)"
    )
    print_runs("state", runs)
    print(f"\nRedis / memory: {redis / memory:.0%} (target >= 50 %)")
    evalsha = calls.pop("evalsha", 0)
    inner = {k: v for k, v in calls.items() if k not in ("info", "ping") and v}
    print(
        f"Redis per request (commandstats over {requests} requests of the Redis runs):"
        f" EVALSHA {evalsha / requests:.3f};"
        f" inside the scripts {sum(inner.values()) / requests:.2f}"
        f" ({', '.join(f'{k} {v / requests:.2f}' for k, v in sorted(inner.items()))})"
    )
    if counts:
        pipelines = counts["pipelines"]
        batches = counts["journal_batches"]
        print(
            f"The Redis server's loop sent {pipelines} pipelines"
            f" ({requests / max(pipelines, 1):.1f} needs each, over the whole run);"
            f" its journal {batches} batches"
            f" ({counts['journal_sent'] / max(batches, 1):.1f} entries each,"
            f" {counts.get('journal_loop_batches', 0)} of them in the loop's writes),"
            f" {counts['journal_lost']} entries lost"
        )
    cpu.print()


if __name__ == "__main__":
    main()
