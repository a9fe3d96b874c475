"""Streams against a floor (issue 31): one stream as fast as it goes, 1 000 paced streams
and their lateness, 10 000 slow streams and what they cost, each beside the floor
(bench/sse_floor.py, a bare asyncio SSE server streaming the same bytes, on the same loop:
uvloop where it is installed, as mockskill) in the same run.

Three parts, each server started afresh, the floor and mockskill taken in turn (the
order alternating by round):

- ``fast``: one stream of ``--fast-events`` token events with no delay (the most a
  stream step holds), read by a raw socket reader that counts blank-line-delimited
  events; events per second from the request to the last chunk, the best of
  ``--fast-streams`` streams per round (target: mockskill >= 0.5 x the floor).
- ``paced``: ``--streams`` concurrent streams of 20 events a second for ``--seconds``,
  opened over ``--open-spread`` ms by a reader in a process of its own (asyncio
  protocols on uvloop where it is installed, each arrival on the monotonic clock). An
  event's lateness is its arrival - (its request's sending + id x 50 ms), the script's
  time as the step states it (the head goes at once), so it holds the reader's own lag
  and the connection's setup too (the kernel's listen overflows over the round are
  printed); beside it the same from the head's arrival (the server's pace alone). Every
  id is checked in order (lost, reordered, streams that did not end with their result).
  Target: lateness p99 <= 10 ms, 0 lost or reordered. The servers' CPU seconds over the
  round are printed (a figure the machine's load moves less), and the reader's own lag:
  how late a 5 ms timer of its loop fired, p99 (a lateness no better than it is the
  reader's, not the server's).
- ``slow`` (mockskill only): ``--slow-streams`` concurrent streams of one event a second,
  held for ``--hold`` s once all are open; the server's RSS (idle, then its peak while
  held, sampled every 0.5 s) and, from this process, ``POST /skills/plain/invoke`` on one
  keep-alive connection every 5 ms while they are held (targets: RSS <= 200 MB, p99 <=
  20 ms). Each process raises its descriptor limit to the hard limit.

Printed: a table per part, the 1-minute load average after each round (the machine is
shared: a figure taken under load says so), and the machine. Run::

    python bench/streams.py [--parts fast paced slow --rounds 2 --seconds 30]
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import _common as c

SCENARIO = """\
name: bench-streams
description: Streams for bench/streams.py (the floor streams the same bytes).
skills:
  - id: translate
  - id: plain
  - id: stream
    invoke:
      stream:
        events:
          - {{repeat: {events}, {pace}event: token, data: {{text: tok}}, id_from: 1}}
        end: {{event: result, data: {{done: true}}}}
"""

READER = r"""
import asyncio, json, re, resource, sys, time

port, count, events, every, spread = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                       float(sys.argv[4]) / 1000, float(sys.argv[5]) / 1000)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
REQUEST = (b"POST /skills/stream/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
ID = re.compile(rb"(?:^|\n)id: (\d+)\n")
late, from_head = [], []
stats = {"lost": 0, "reordered": 0, "unfinished": 0, "failed": 0, "events": 0}

class Reader(asyncio.Protocol):
    def __init__(self, done):
        self.done, self.head, self.buf, self.next, self.ended = done, None, b"", 1, False
    def connection_made(self, transport):
        transport.write(REQUEST)
        self.sent_at = time.monotonic()
    def data_received(self, data):
        now = time.monotonic()  # (uvloop's clock counts whole ms)
        buf = self.buf + data
        if self.head is None:
            head, sep, buf = buf.partition(b"\r\n\r\n")
            if not sep:
                self.buf = head
                return
            self.head = now
        *whole, self.buf = buf.split(b"\n\n")
        for event in whole:
            found = ID.search(event)
            if found is None:
                if b"event: result" in event:
                    self.ended = True
                continue
            n = int(found.group(1))
            stats["events"] += 1
            if n > self.next:
                stats["lost"] += n - self.next
            elif n < self.next:
                stats["reordered"] += 1
            self.next = max(self.next, n + 1)
            late.append((now - (self.sent_at + n * every)) * 1000)
            from_head.append((now - (self.head + n * every)) * 1000)
        if self.ended and self.buf.endswith(b"0\r\n\r\n"):
            self.end()
    def end(self):
        if not self.done.done():
            stats["lost"] += events + 1 - self.next
            stats["unfinished"] += not self.ended
            self.done.set_result(None)
    def connection_lost(self, exc):
        self.end()

async def one(at):
    await asyncio.sleep(max(0.0, at - loop.time()))
    done = loop.create_future()
    try:
        transport, _ = await loop.create_connection(lambda: Reader(done), "127.0.0.1", port)
    except OSError:
        stats["failed"] += 1
        return
    await done
    transport.close()

lags = []

def tick(due):
    now = time.monotonic()
    lags.append((now - due) * 1000)
    loop.call_later(0.005, tick, now + 0.005)

async def main():
    global loop
    loop = asyncio.get_running_loop()
    loop.call_soon(tick, time.monotonic())
    start = loop.time() + 0.05
    tasks = [asyncio.ensure_future(one(start + spread * k / count)) for k in range(count)]
    await asyncio.sleep(spread + 0.5)
    print("held", flush=True)
    await asyncio.gather(*tasks)
    late.sort()
    pick = lambda p: round(late[min(len(late) - 1, int(len(late) * p / 100))], 2) if late else None
    lags.sort()
    from_head.sort()
    head_p99 = from_head[int(len(from_head) * 0.99)] if from_head else None
    lag = lags[int(len(lags) * 0.99)] if lags else None
    print(json.dumps({**stats, "p50": pick(50), "p99": pick(99), "max": pick(100),
                      "cpu": round(time.process_time(), 1), "lag_p99": round(lag, 2),
                      "head_p99": round(head_p99, 2)}), flush=True)

try:
    import uvloop  # a cheaper reader where it is installed (as the servers' loop)
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""


def start(kind: str, events: int, every_ms: float) -> tuple[subprocess.Popen[bytes], int, str]:
    """Start the floor or mockskill (``kind``) streaming *events* tokens *every_ms* apart
    (0: no delay); its process, port and scenario file (to remove; "" for the floor)."""
    port = c.free_port()
    if kind == "floor":
        cmd = [sys.executable, str(c.BENCH_DIR / "sse_floor.py"), "--port", str(port),
               "--events", str(events), "--every-ms", str(every_ms)]  # fmt: skip
        path = ""
    else:
        pace = f"rate: {1000 / every_ms:g}/s, " if every_ms else ""
        fd, path = tempfile.mkstemp(suffix=".yaml", prefix="bench-streams-")
        os.write(fd, SCENARIO.format(events=events, pace=pace).encode())
        os.close(fd)
        cmd = c.mockskill_cmd(port, [path])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=str(c.BENCH_DIR))  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection((c.HOST, port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{kind} did not start") from None
            time.sleep(0.01)
    time.sleep(0.3)  # (settled: its start-up's garbage collected, its RSS idle)
    return proc, port, path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


OVERFLOWS = "ListenOverflows"


def overflows_since(before: dict[str, int]) -> int | str:
    """Connections the kernel dropped from a full accept queue since *before* (machine-wide:
    another process's count too); "?" where the counters are not."""
    now = c.tcp_counters(OVERFLOWS)
    return now[OVERFLOWS] - before[OVERFLOWS] if before and now else "?"


def finish(proc: subprocess.Popen[bytes], path: str) -> None:
    c.stop(proc)
    if path:
        Path(path).unlink()


REQUEST = (b"POST /skills/stream/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")  # fmt: skip


def fast_stream(port: int) -> tuple[int, float]:
    """One stream read to its last chunk by a raw socket: events counted (each ends with a
    blank line) and seconds from the request."""
    with socket.create_connection((c.HOST, port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        began = time.perf_counter()
        s.sendall(REQUEST)
        events, last = 0, b""
        while True:
            data = s.recv(1 << 20)
            if not data:
                break
            events += data.count(b"\n\n") + (last == b"\n" and data[:1] == b"\n")
            last = data[-1:]
            if data.endswith(b"\r\n0\r\n\r\n"):
                break
        return events, time.perf_counter() - began


def part_fast(args: argparse.Namespace) -> None:
    rows = []
    for n in range(args.rounds):
        for kind in ("floor", "mockskill")[:: 1 if n % 2 == 0 else -1]:  # in turn
            proc, port, path = start(kind, args.fast_events, 0)
            try:
                runs = [fast_stream(port) for _ in range(args.fast_streams)]
            finally:
                finish(proc, path)
            events, seconds = min(runs, key=lambda run: run[1])
            assert events == args.fast_events + 1, events  # (the tokens and the result)
            rows.append([n + 1, kind, f"{os.getloadavg()[0]:.1f}", events,
                         f"{seconds * 1000:.1f}", f"{events / seconds:,.0f}"])  # fmt: skip
    print(f"one stream of {args.fast_events} events (+ the result), no delay; the best of "
          f"{args.fast_streams} streams a round\n")  # fmt: skip
    c.print_table(["round", "server", "load avg", "events", "ms", "events/s"], rows)
    for n in range(args.rounds):
        rate = {r[1]: float(r[5].replace(",", "")) for r in rows[2 * n : 2 * n + 2]}
        floor, ours = rate["floor"], rate["mockskill"]
        print(f"round {n + 1}: mockskill / floor = {ours / floor:.2f} (target >= 0.5)")
    print()


def read_streams(
    port: int, streams: int, events: int, every_ms: float, spread_ms: float,
    while_held: Callable[[], dict[str, float]] | None = None,
) -> dict[str, float]:  # fmt: skip
    """Open *streams* streams from a reader process, call *while_held* (if any) once all
    are open, and return the reader's figures."""
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(port), str(streams), str(events), str(every_ms),
         str(spread_ms)], stdout=subprocess.PIPE)  # fmt: skip
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == b"held"
    held = while_held() if while_held is not None else {}
    said: dict[str, float] = json.loads(reader.stdout.readline())
    reader.wait(30)
    return {**said, **held}


def part_paced(args: argparse.Namespace) -> None:
    rows = []
    events = int(args.seconds * 20)
    for n in range(args.rounds):
        for kind in ("floor", "mockskill")[:: 1 if n % 2 == 0 else -1]:  # in turn
            proc, port, path = start(kind, events, 50)
            try:
                cpu, dropped = cpu_seconds(proc.pid), c.tcp_counters(OVERFLOWS)
                said = read_streams(port, args.streams, events, 50, args.open_spread)
                cpu = cpu_seconds(proc.pid) - cpu
                dropped = overflows_since(dropped)
            finally:
                finish(proc, path)
            rows.append([n + 1, kind, f"{os.getloadavg()[0]:.1f}", said["events"],
                         said["p50"], said["p99"], said["max"], said["head_p99"], said["lost"],
                         said["reordered"], said["unfinished"], said["failed"], dropped,
                         f"{cpu:.1f}", said["cpu"], said["lag_p99"]])  # fmt: skip
    print(f"{args.streams} streams of {events} events at 20/s ({args.seconds} s), opened over "
          f"{args.open_spread} ms; lateness = arrival - (request sent + id x 50 ms)\n")  # fmt: skip
    c.print_table(["round", "server", "load avg", "events", "late p50 ms", "late p99 ms",
                   "late max ms", "from head p99 ms", "lost", "reordered", "unfinished",
                   "failed", "listen overflows", "server CPU s", "reader CPU s",
                   "reader lag p99 ms"], rows)  # fmt: skip
    print()


JSON = {"Content-Type": "application/json"}


def invoke_plain(connection: http.client.HTTPConnection) -> None:
    connection.request("POST", "/skills/plain/invoke", body=b"{}", headers=JSON)
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200, answer.status


def probe(
    connection: http.client.HTTPConnection, until: threading.Event, latencies: list[float]
) -> None:
    """A plain skill's invoke on *connection* (open already: no connect is timed) every
    5 ms at most, until *until*."""
    while not until.is_set():
        began = time.perf_counter()
        invoke_plain(connection)
        took = time.perf_counter() - began
        latencies.append(took * 1000)
        if took < 0.005:
            time.sleep(0.005 - took)


def measure_held(pid: int, connection: http.client.HTTPConnection, hold: float) -> dict[str, float]:
    """For *hold* seconds: the server's peak RSS (KiB, sampled every 0.5 s) and the
    probe's latencies (ms)."""
    latencies: list[float] = []
    until = threading.Event()
    prober = threading.Thread(target=probe, args=(connection, until, latencies))
    prober.start()
    peak, ends = 0, time.monotonic() + hold
    while time.monotonic() < ends:
        peak = max(peak, c.rss_kb(pid))
        time.sleep(0.5)
    until.set()
    prober.join()
    return {
        "peak": peak,
        "requests": len(latencies),
        "probe_p50": c.percentile(latencies, 50),
        "probe_p99": c.percentile(latencies, 99),
        "probe_max": max(latencies),
    }


def part_slow(args: argparse.Namespace) -> None:
    rows = []
    events = int(args.hold + args.slow_spread / 1000 + 5)
    for n in range(args.rounds):
        proc, port, path = start("mockskill", events, 1000)
        try:
            idle = c.rss_kb(proc.pid)
            # The probe's connection is open before the streams come: a connect behind
            # 10 000 others can wait out a full accept queue (a SYN resent after 1 s).
            connection = http.client.HTTPConnection(c.HOST, port, timeout=10)
            invoke_plain(connection)
            held = functools.partial(measure_held, proc.pid, connection, args.hold)
            dropped = c.tcp_counters(OVERFLOWS)
            said = read_streams(port, args.slow_streams, events, 1000, args.slow_spread, held)
            dropped = overflows_since(dropped)
            connection.close()
        finally:
            finish(proc, path)
        rows.append([n + 1, f"{os.getloadavg()[0]:.1f}", f"{idle / 1024:.1f}",
                     f"{said['peak'] / 1024:.1f}", said["requests"], f"{said['probe_p50']:.2f}",
                     f"{said['probe_p99']:.2f}", f"{said['probe_max']:.2f}", said["events"],
                     said["p99"], said["head_p99"], said["lag_p99"], said["lost"],
                     said["reordered"], said["unfinished"], said["failed"], dropped])  # fmt: skip
    print(
        f"{args.slow_streams} streams of one event a second ({events} events), opened "
        f"over {args.slow_spread} ms, held {args.hold} s with the probe (mockskill only)\n"
    )
    c.print_table(["round", "load avg", "idle RSS MB", "held RSS peak MB", "probe requests",
                   "probe p50 ms", "probe p99 ms", "probe max ms", "events", "late p99 ms",
                   "from head p99 ms", "reader lag p99 ms", "lost", "reordered",
                   "unfinished", "failed", "listen overflows"], rows)  # fmt: skip
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["fast", "paced", "slow"],
                        choices=["fast", "paced", "slow"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fast-events", type=int, default=100_000)
    parser.add_argument("--fast-streams", type=int, default=5)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30, help="each paced stream's length")
    parser.add_argument("--open-spread", type=float, default=1000, help="ms to open them over")
    parser.add_argument("--slow-streams", type=int, default=10_000)
    parser.add_argument("--slow-spread", type=float, default=5000, help="ms to open them over")
    parser.add_argument("--hold", type=float, default=10, help="s held with the probe")
    args = parser.parse_args()
    limit = c.raise_nofile()
    if limit < args.slow_streams + 100:
        print(f"descriptor limit {limit}: below the {args.slow_streams} streams' need")
    for part in args.parts:
        {"fast": part_fast, "paced": part_paced, "slow": part_slow}[part](args)
    print(c.machine())


if __name__ == "__main__":
    main()
