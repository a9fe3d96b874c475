"""10 000 hanging connections: does the server still answer, and free them when they go?

Issues 3 and 13. Issue 13's targets: other requests' p99 <= 20 ms while the
connections are held; server RSS <= 150 MB while held and back within 10 MB
of idle after they are released.

mockskill serves a skill whose invoke step is ``{hang: 60000}`` (hold the
connection without a byte for a minute) beside the bundled healthy
scenario. Each round:

1. 200 sequential ``GET /skills/translate`` on the idle server (baseline);
2. ``--clients`` connections (10 000) open at once and each POST to the hang
   step; the script waits until the server has a thread for each
   (``Threads:`` in /proc/PID/status), or, for a server with no thread per
   connection, until every request is sent and the thread count has been
   stable for a second;
3. while they hang, 200 sequential ``GET /skills/translate`` again: the
   server must keep answering (latency connect -> last byte, p50/p99, and
   failures); any hanging connection the server dropped early is counted;
4. the client closes all the hanging connections at once and polls the
   server's thread count and open descriptors (/proc/PID/fd: a one-loop
   server has no thread per connection, but a socket each) every 5 ms until
   both are back to where they were: that is the time to free them. The
   server's journal (read in-process: the server runs ``mockskill.Server``
   in a child interpreter that prints ``server.journal()`` when asked on
   stdin) says when each hang ended, relative to the close, and whether it
   saw the client leave.

The server's VmRSS is read when idle (after step 1), at its highest while
the connections are held (sampled during steps 2-3), and after the release:
once the threads are freed, polled every 50 ms for up to ``--settle``
seconds (5) until it is within 10 MB of idle; the last value is shown.

The server runs on Python's own memory allocator (``pymalloc``), as
``mockskill serve`` and an embedded server in a test suite's process do,
unless ``--allocator`` names another (``malloc``: the C library's, which the
Docker image sets): ``--allocator pymalloc malloc`` runs the rounds on each
in turn, in one run.

The client raises its RLIMIT_NOFILE; all traffic goes to 127.0.0.1; every
wait is bounded and the server is stopped at the end.

Run::

    python bench/hang_flood.py [--clients 10000 --rounds 3 --requests 200 --settle 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import _common as c

HANG_PATH = "/skills/hang/invoke"
TARGET_P99_MS = 20.0
TARGET_RSS_HELD_MB = 150
RSS_BACK_KB = 10 * 1024
BUDGET_S = 30.0
"""Longest a series of sequential requests may take."""
JOURNAL_WAIT_S = 30.0
DEFAULT_ALLOCATOR = "pymalloc"
"""Python's own: what ``mockskill serve`` runs on unless PYTHONMALLOC is set."""


def _log(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
server = Server(sys.argv[2:], port=0, quiet=True, journal_size=int(sys.argv[1])).start()
print(server.port, flush=True)
for line in sys.stdin:
    if line.strip() == "journal":
        entries = [e.as_json() for e in server.journal()]
        print(json.dumps(entries), flush=True)
    elif line.strip() == "mallocstats":
        sys._debugmallocstats()
        print("{}", flush=True)
    elif line.strip() == "tracestart":
        import tracemalloc
        tracemalloc.start(12)
        print("{}", flush=True)
    elif line.strip() == "tracesnap":
        import gc, tracemalloc
        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        stats = snap.statistics("traceback")
        print(f"surviving: {sum(s.count for s in stats)} blocks, "
              f"{sum(s.size for s in stats)} B", file=sys.stderr)
        for stat in stats[:25]:
            print(f"{stat.count} blocks {stat.size} B", file=sys.stderr)
            for line in stat.traceback.format()[-12:]:
                print("   " + line, file=sys.stderr)
        tracemalloc.stop()
        print("{}", flush=True)
    else:
        break
server.stop()
"""


def fds_of(pid: int) -> int:
    """Descriptors the process has open (its sockets among them)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Round:
    threads_before: int = 0
    threads_during: int = 0
    fds_before: int = 0
    fds_during: int = 0
    fds_after: int = 0
    setup_s: float = 0.0
    idle_ms: list[float] = field(default_factory=list)
    busy_ms: list[float] = field(default_factory=list)
    busy_failures: Counter[str] = field(default_factory=Counter)
    dropped_early: int = 0
    not_hanging: Counter[str] = field(default_factory=Counter)
    freed_s: float = float("nan")
    threads_after: int = 0
    close_wall: float = 0.0
    rss_idle_kb: int = 0
    rss_held_kb: int = 0
    rss_after_kb: int = 0
    settled_s: float = float("nan")


async def _sequential(
    port: int, count: int, budget: float = BUDGET_S
) -> tuple[list[float], Counter[str]]:
    """*count* requests one after another, stopping after *budget* seconds (the rest
    count as failures: a server that thrashes must not make the bench run for ever)."""
    request = c.request_bytes("GET", c.DESCRIBE_PATH, port)
    times, failures = [], Counter[str]()
    stop_at = time.perf_counter() + budget
    for n in range(count):
        if time.perf_counter() > stop_at:
            failures[f"not sent (over {budget:.0f} s)"] += count - n
            break
        t = await c.timed_request(port, request, timeout=10.0)
        if t.outcome == "ok":
            times.append((t.done - t.connect) * 1000)
        else:
            failures[t.outcome] += 1
    return times, failures


async def hang_round(port: int, pid: int, clients: int, requests: int, settle: float) -> Round:
    r = Round()
    r.idle_ms, _ = await _sequential(port, requests)
    await asyncio.sleep(0.2)  # the last handler thread exits
    r.threads_before = c.threads_of(pid)
    r.fds_before = fds_of(pid)
    r.rss_idle_kb = c.rss_kb(pid)
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
        except (TimeoutError, OSError) as exc:
            return "closed by us" if closing else type(exc).__name__
        return "closed by us" if closing else f"server closed ({len(data)} bytes)"

    started = time.perf_counter()
    tasks = [asyncio.create_task(hang()) for _ in range(clients)]
    deadline, stable_since = started + 30, started
    while time.perf_counter() < deadline:
        threads = c.threads_of(pid)
        r.rss_held_kb = max(r.rss_held_kb, c.rss_kb(pid))
        if threads != r.threads_during:
            r.threads_during, stable_since = threads, time.perf_counter()
        if threads >= r.threads_before + clients or all(t.done() for t in tasks):
            break
        if sent >= clients and time.perf_counter() - stable_since > 1:
            break  # every request is out and the server has made all the threads it will
        await asyncio.sleep(0.01)
    r.setup_s = time.perf_counter() - started
    await asyncio.sleep(0.2)
    r.rss_held_kb = max(r.rss_held_kb, c.rss_kb(pid))
    r.busy_ms, r.busy_failures = await _sequential(port, requests)
    r.threads_during = max(r.threads_during, c.threads_of(pid))
    r.fds_during = fds_of(pid)
    r.rss_held_kb = max(r.rss_held_kb, c.rss_kb(pid))
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
        r.fds_after = fds_of(pid)
        if r.threads_after <= r.threads_before and r.fds_after <= r.fds_before:
            r.freed_s = time.perf_counter() - closed
            break
        await asyncio.sleep(0.005)
    await asyncio.gather(*tasks, return_exceptions=True)
    released = time.perf_counter()
    while True:
        r.rss_after_kb = c.rss_kb(pid)
        if r.rss_after_kb - r.rss_idle_kb <= RSS_BACK_KB:
            r.settled_s = time.perf_counter() - closed
            break
        if time.perf_counter() - released > settle:
            break
        await asyncio.sleep(0.05)
    return r


def journal(proc: subprocess.Popen[str]) -> list[dict[str, object]] | None:
    """The server's journal, or None if it does not answer within JOURNAL_WAIT_S."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write("journal\n")
    proc.stdin.flush()
    if not select.select([proc.stdout], [], [], JOURNAL_WAIT_S)[0]:
        return None
    return list(json.loads(proc.stdout.readline()))


def malloc_stats(proc: subprocess.Popen[str], command: str = "mallocstats") -> None:
    """Have the server print its allocator's statistics (or run *command*) on (its) stderr."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    if select.select([proc.stdout], [], [], JOURNAL_WAIT_S)[0]:
        proc.stdout.readline()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10_000, help="hanging connections")
    parser.add_argument("--requests", type=int, default=200, help="sequential requests")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait for RSS")
    parser.add_argument(
        "--journal-size", type=int, default=10_000, help="entries the server's journal keeps"
    )
    parser.add_argument(
        "--allocator",
        nargs="+",
        default=[DEFAULT_ALLOCATOR],
        choices=["pymalloc", "malloc"],
        help=f"the server's PYTHONMALLOC, each in turn (default: {DEFAULT_ALLOCATOR})",
    )
    parser.add_argument(
        "--malloc-stats",
        action="store_true",
        help="have the server print sys._debugmallocstats() on stderr before and after each round",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="have the server trace allocations from before each round and print on stderr"
        " those that survive it, grouped by traceback",
    )
    args = parser.parse_args()

    nofile = c.raise_nofile()
    if nofile < args.clients + 50:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {args.clients} clients")

    rows: list[tuple[object, ...]] = []
    frees: list[float] = []
    with c.scenario_file(SCENARIO) as path:
        for allocator in args.allocator:
            its_rows, its_frees = _serve_rounds(args, allocator, path)
            rows += its_rows
            frees += its_frees

    print(
        f"{args.clients} connections held by a hang: 60000 step; {args.requests} sequential"
        f" GET {c.DESCRIBE_PATH} before and during; {args.rounds} rounds;"
        f" journal size {args.journal_size}"
    )
    print(c.machine())
    headers = (
        "allocator",
        "round",
        "hang setup s",
        "threads before/during/after",
        "fds before/during/after",
        "idle p50/p99 ms",
        "during p50/p99 ms",
        "failures",
        "dropped early",
        "freed ms",
        "journal: hangs ended",
        "ended after close p50/max ms",
        "RSS MB idle/held/after",
        "issue 13 targets",
    )
    c.print_table(headers, rows)
    print(
        "median time to free all threads and sockets after the close:"
        f" {c.median(frees) * 1000:.0f} ms"
    )
    print(
        f"targets (issue 13): p99 during <= {TARGET_P99_MS:.0f} ms; RSS held <="
        f" {TARGET_RSS_HELD_MB} MB; RSS after within {RSS_BACK_KB // 1024} MB of idle"
        f" (polled up to --settle {args.settle:.0f} s after the threads are freed)"
    )


def _serve_rounds(
    args: argparse.Namespace, allocator: str, path: str
) -> tuple[list[tuple[object, ...]], list[float]]:
    """Start a server on *allocator* and run the rounds against it: their rows and times."""
    rows: list[tuple[object, ...]] = []
    frees: list[float] = []
    healthy = str(c.REPO / "scenarios" / "healthy.yaml")
    cmd = [sys.executable, "-c", SERVER_CODE, str(args.journal_size), path, healthy]
    env = {**os.environ, "PYTHONMALLOC": allocator}
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=c.BENCH_DIR,
        env=env,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        c.wait_ready(port, time.monotonic() + 20, proc)  # type: ignore[arg-type]
        for n in range(args.rounds):
            if args.malloc_stats:
                malloc_stats(proc)
            if args.tracemalloc:
                malloc_stats(proc, "tracestart")
            _log(f"{allocator}, round {n + 1}: {args.clients} hanging connections")
            r = asyncio.run(hang_round(port, proc.pid, args.clients, args.requests, args.settle))
            if args.malloc_stats:
                malloc_stats(proc)
            if args.tracemalloc:
                malloc_stats(proc, "tracesnap")
            _log(f"{allocator}, round {n + 1}: done; reading the journal")
            entries = journal(proc)
            if entries is None:
                _log(f"the server did not give its journal within {JOURNAL_WAIT_S:.0f} s")
                rows.append((allocator, n + 1, *_cells(r, "no journal", "n/a")))
                break
            ended = [
                e
                for e in entries
                if e["path"] == HANG_PATH and float(str(e["finished"])) >= r.close_wall - 1
            ]
            after_close = [(float(str(e["finished"])) - r.close_wall) * 1000 for e in ended]
            saw_leave = sum(1 for e in ended if e["client_left"] is not None)
            frees.append(r.freed_s)
            journal_cell = f"{len(ended)} ({saw_leave} client_left)"
            after_cell = f"{c.percentile(after_close, 50):.0f} / {max(after_close, default=0):.0f}"
            rows.append((allocator, n + 1, *_cells(r, journal_cell, after_cell)))
            time.sleep(1.0)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the server stops on EOF
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            c.stop(proc)  # type: ignore[arg-type]
    return rows, frees


def _cells(r: Round, journal_cell: str, after_cell: str) -> tuple[str, ...]:
    fails = sum(r.busy_failures.values())
    return (
        f"{r.setup_s:.2f}",
        f"{r.threads_before}/{r.threads_during}/{r.threads_after}",
        f"{r.fds_before}/{r.fds_during}/{r.fds_after}",
        f"{c.percentile(r.idle_ms, 50):.1f} / {c.percentile(r.idle_ms, 99):.1f}",
        f"{c.percentile(r.busy_ms, 50):.1f} / {c.percentile(r.busy_ms, 99):.1f}",
        f"{fails} {dict(r.busy_failures) or ''}".strip(),
        f"{r.dropped_early} {dict(r.not_hanging) or ''}".strip(),
        f"{r.freed_s * 1000:.0f}",
        journal_cell,
        after_cell,
        f"{r.rss_idle_kb / 1024:.0f} / {r.rss_held_kb / 1024:.0f} / {r.rss_after_kb / 1024:.0f}",
        _verdict(r),
    )


def _verdict(r: Round) -> str:
    p99 = c.percentile(r.busy_ms, 99) <= TARGET_P99_MS and not r.busy_failures
    held = r.rss_held_kb <= TARGET_RSS_HELD_MB * 1024
    back = r.rss_after_kb - r.rss_idle_kb <= RSS_BACK_KB
    marks = [("p99", p99), ("RSS held", held), ("RSS back", back)]
    return ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in marks)


if __name__ == "__main__":
    main()
