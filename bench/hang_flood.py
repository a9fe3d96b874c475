"""1000 hanging connections: does the server still answer, and free them when they go? (issue 3)

mockskill serves a skill whose invoke step is ``{hang: 60000}`` (hold the
connection without a byte for a minute) beside the bundled healthy
scenario. Each round:

1. 200 sequential ``GET /skills/translate`` on the idle server (baseline);
2. ``--clients`` connections (1000) open at once and each POST to the hang
   step; the script waits until the server has a thread for each
   (``Threads:`` in /proc/PID/status);
3. while they hang, 200 sequential ``GET /skills/translate`` again: the
   server must keep answering (latency connect -> last byte, p50/p99, and
   failures); any hanging connection the server dropped early is counted;
4. the client closes all the hanging connections at once and polls the
   server's thread count every 5 ms until it is back to where it was: that
   is the time to free them. The server's journal (read in-process: the
   server runs ``mockskill.Server`` in a child interpreter that prints
   ``server.journal()`` when asked on stdin) says when each hang ended,
   relative to the close, and whether it saw the client leave.

The client raises its RLIMIT_NOFILE; all traffic goes to 127.0.0.1; every
wait is bounded and the server is stopped at the end.

Run::

    python bench/hang_flood.py [--clients 1000 --rounds 3 --requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import _common as c

HANG_PATH = "/skills/hang/invoke"
SCENARIO = """\
name: bench-hang
description: A step that holds the connection for a minute (bench/hang_flood.py).
skills:
  - id: hang
    invoke: {hang: 60000}
"""
SERVER_CODE = """\
import json, sys
from mockskill import Server
server = Server(sys.argv[1:], port=0, quiet=True).start()
print(server.port, flush=True)
for line in sys.stdin:
    if line.strip() == "journal":
        entries = [e.as_json() for e in server.journal()]
        print(json.dumps(entries), flush=True)
    else:
        break
server.stop()
"""


@dataclass
class Round:
    threads_before: int = 0
    threads_during: int = 0
    setup_s: float = 0.0
    idle_ms: list[float] = field(default_factory=list)
    busy_ms: list[float] = field(default_factory=list)
    busy_failures: Counter[str] = field(default_factory=Counter)
    dropped_early: int = 0
    not_hanging: Counter[str] = field(default_factory=Counter)
    freed_s: float = float("nan")
    threads_after: int = 0
    close_wall: float = 0.0


async def _sequential(port: int, count: int) -> tuple[list[float], Counter[str]]:
    request = c.request_bytes("GET", c.DESCRIBE_PATH, port)
    times, failures = [], Counter[str]()
    for _ in range(count):
        t = await c.timed_request(port, request, timeout=10.0)
        if t.outcome == "ok":
            times.append((t.done - t.connect) * 1000)
        else:
            failures[t.outcome] += 1
    return times, failures


async def _round(port: int, pid: int, clients: int, requests: int) -> Round:
    r = Round()
    r.idle_ms, _ = await _sequential(port, requests)
    await asyncio.sleep(0.2)  # the last handler thread exits
    r.threads_before = c.threads_of(pid)
    request = c.request_bytes("POST", HANG_PATH, port, b"{}")
    writers: list[asyncio.StreamWriter] = []
    sent = 0
    closing = False

    async def hang() -> str:
        nonlocal sent
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(c.HOST, port), 30)
            writers.append(writer)
            writer.write(request)
            await writer.drain()
            sent += 1
            data = await reader.read()
        except (OSError, asyncio.TimeoutError) as exc:
            return "closed by us" if closing else type(exc).__name__
        return "closed by us" if closing else f"server closed ({len(data)} bytes)"

    started = time.perf_counter()
    tasks = [asyncio.create_task(hang()) for _ in range(clients)]
    deadline, stable_since = started + 30, started
    while time.perf_counter() < deadline:
        threads = c.threads_of(pid)
        if threads != r.threads_during:
            r.threads_during, stable_since = threads, time.perf_counter()
        if threads >= r.threads_before + clients or all(t.done() for t in tasks):
            break
        if sent >= clients and time.perf_counter() - stable_since > 1:
            break  # every request is out and the server has made all the threads it will
        await asyncio.sleep(0.01)
    r.setup_s = time.perf_counter() - started
    await asyncio.sleep(0.2)
    r.busy_ms, r.busy_failures = await _sequential(port, requests)
    r.threads_during = max(r.threads_during, c.threads_of(pid))
    r.not_hanging = Counter(t.result() for t in tasks if t.done())
    r.dropped_early = sum(r.not_hanging.values())

    closing = True
    r.close_wall = time.time()
    closed = time.perf_counter()
    for writer in writers:
        writer.close()
    deadline = closed + 15
    while time.perf_counter() < deadline:
        r.threads_after = c.threads_of(pid)
        if r.threads_after <= r.threads_before:
            r.freed_s = time.perf_counter() - closed
            break
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks, return_exceptions=True)
    return r


def journal(proc: subprocess.Popen[str]) -> list[dict[str, object]]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write("journal\n")
    proc.stdin.flush()
    return list(json.loads(proc.stdout.readline()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000, help="hanging connections")
    parser.add_argument("--requests", type=int, default=200, help="sequential requests")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    nofile = c.raise_nofile()
    if nofile < args.clients + 50:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {args.clients} clients")

    rows, frees = [], []
    with c.scenario_file(SCENARIO) as path:
        healthy = str(c.REPO / "scenarios" / "healthy.yaml")
        cmd = [sys.executable, "-c", SERVER_CODE, path, healthy]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=c.BENCH_DIR
        )
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            c.wait_ready(port, time.monotonic() + 20, proc)  # type: ignore[arg-type]
            for n in range(args.rounds):
                r = asyncio.run(_round(port, proc.pid, args.clients, args.requests))
                ended = [
                    e
                    for e in journal(proc)
                    if e["path"] == HANG_PATH and float(e["finished"]) >= r.close_wall - 1
                ]
                after_close = [(float(e["finished"]) - r.close_wall) * 1000 for e in ended]
                saw_leave = sum(1 for e in ended if e["client_left"] is not None)
                frees.append(r.freed_s)
                fails = sum(r.busy_failures.values())
                rows.append(
                    (
                        n + 1,
                        f"{r.setup_s:.2f}",
                        f"{r.threads_before}/{r.threads_during}/{r.threads_after}",
                        f"{c.percentile(r.idle_ms, 50):.1f} / {c.percentile(r.idle_ms, 99):.1f}",
                        f"{c.percentile(r.busy_ms, 50):.1f} / {c.percentile(r.busy_ms, 99):.1f}",
                        f"{fails} {dict(r.busy_failures) or ''}".strip(),
                        f"{r.dropped_early} {dict(r.not_hanging) or ''}".strip(),
                        f"{r.freed_s * 1000:.0f}",
                        f"{len(ended)} ({saw_leave} client_left)",
                        f"{c.percentile(after_close, 50):.0f} / {max(after_close, default=0):.0f}",
                    )
                )
                time.sleep(1.0)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()  # the server stops on EOF
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                c.stop(proc)  # type: ignore[arg-type]

    print(
        f"{args.clients} connections held by a hang: 60000 step; {args.requests} sequential"
        f" GET {c.DESCRIBE_PATH} before and during; {args.rounds} rounds"
    )
    print(c.machine())
    headers = (
        "round",
        "hang setup s",
        "threads before/during/after",
        "idle p50/p99 ms",
        "during p50/p99 ms",
        "failures",
        "dropped early",
        "freed ms",
        "journal: hangs ended",
        "ended after close p50/max ms",
    )
    c.print_table(headers, rows)
    print(f"median time to free all threads after the close: {c.median(frees) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
