"""The floor of bench/burst.py: the same burst against servers with no thread per connection.

bench/burst.py's client (``burst._burst``: 1000 asyncio connections at once,
one POST each, read to EOF; wall = first connect -> last response) is run,
unchanged, against minimal servers that answer ``POST /skills/<id>/invoke``
after ``--delay`` seconds with ``{"ok": true}`` and ``Connection: close``:

- ``asyncio``: ``asyncio.start_server`` (backlog 4096); read the head up to
  ``\\r\\n\\r\\n`` and the Content-Length body, ``await asyncio.sleep``, write,
  close. Also with uvloop if it is installed (it is not installed here).
- ``selectors``: one thread, a non-blocking listening socket (backlog 4096),
  ``selectors.DefaultSelector`` (epoll) and a heap of (deadline, socket):
  each request is parsed as it arrives and parked on the heap; the loop
  answers and closes what is due.
- for reference, the bare Flask app (bench/bare_flask.py, backlog 4096) and
  mockskill (``python -m mockskill serve`` on burst.py's ``delay: 1000``
  scenario), both Werkzeug's threaded server: a thread per connection.

The delay of the minimal servers counts from the moment the request is fully
read, as mockskill's counts from ``Engine.handle``. To time the client (and
the connection handling) alone, the two minimal servers also run with delay
0, answering at once. All servers run at the same time and the bursts go to
them in turn (round 1: each server once, round 2: ...), so that drift in the
machine's load falls on all of them alike. Besides wall time the table shows
the CPU seconds the client process and the server process used during each
burst (getrusage; /proc/<pid>/stat, all threads).

The minimal servers are this same file, run as ``--serve KIND --port N``;
each also answers ``GET /skills/translate`` (what ``_common.wait_ready``
polls). Run::

    python bench/burst_floor.py [--rounds 3 --clients 1000] [--pin] [--skip-reference]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import importlib
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import _common as c
import burst

BACKLOG = 4096
"""As mockskill listens (somaxconn permitting)."""
DESCRIPTOR = json.dumps({"id": "translate", "name": "Translate", "capability_type": "api"})
OK_BODY = b'{"ok": true}\n'
HEAD_LIMIT = 65536


# --------------------------------------------------------------------------- minimal servers


def _response(status: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _route(head: bytes) -> tuple[bool, bytes]:
    """(delayed?, response) for a request head: the delayed invoke, the descriptor, or 404."""
    method, _, rest = head.partition(b" ")
    path = rest.split(b" ", 1)[0]
    if method == b"POST" and path.startswith(b"/skills/") and path.endswith(b"/invoke"):
        return True, _response("200 OK", OK_BODY)
    if method == b"GET" and path == b"/skills/translate":
        return False, _response("200 OK", DESCRIPTOR.encode())
    return False, _response("404 Not Found", b'{"error": "not found"}\n')


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def serve_asyncio(port: int, delay: float, use_uvloop: bool) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(_content_length(head))
            delayed, response = _route(head)
            if delayed and delay > 0:
                await asyncio.sleep(delay)
            writer.write(response)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, c.HOST, port, backlog=BACKLOG)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
        async with server:
            await stopping.wait()

    if use_uvloop:
        uvloop = importlib.import_module("uvloop")
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())


def serve_selectors(port: int, delay: float) -> None:
    """One thread: accept, read and parse as data arrives, park on a timer heap, answer."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((c.HOST, port))
    listener.listen(BACKLOG)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    buffers: dict[socket.socket, bytearray] = {}
    heap: list[tuple[float, int, socket.socket, bytes]] = []
    seq = 0
    running = True

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, on_term)

    def answer(conn: socket.socket, response: bytes) -> None:
        # The answer is ~100 bytes into an empty send buffer: one send() takes it;
        # fall back to a blocking send if it ever does not.
        with contextlib.suppress(OSError):
            sent = conn.send(response)
            if sent < len(response):
                conn.setblocking(True)
                conn.sendall(response[sent:])
        conn.close()

    while running:
        timeout = max(0.0, heap[0][0] - time.monotonic()) if heap else 0.5
        for key, _ in sel.select(timeout):
            if key.data is None:
                while True:
                    try:
                        conn, _ = listener.accept()
                    except BlockingIOError:
                        break
                    conn.setblocking(False)
                    buffers[conn] = bytearray()
                    sel.register(conn, selectors.EVENT_READ, True)
                continue
            conn = key.fileobj  # type: ignore[assignment]
            buf = buffers[conn]
            try:
                chunk = conn.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(conn)
                del buffers[conn]
                conn.close()
                continue
            buf += chunk
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > HEAD_LIMIT:
                    sel.unregister(conn)
                    del buffers[conn]
                    conn.close()
                continue
            head = bytes(buf[: end + 4])
            if len(buf) - (end + 4) < _content_length(head):
                continue
            sel.unregister(conn)
            del buffers[conn]
            delayed, response = _route(head)
            if delayed and delay > 0:
                seq += 1
                heapq.heappush(heap, (time.monotonic() + delay, seq, conn, response))
            else:
                answer(conn, response)
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, conn, response = heapq.heappop(heap)
            answer(conn, response)
    listener.close()


def self_cmd(kind: str, delay: float) -> Callable[[int], list[str]]:
    here = str(Path(__file__).resolve())
    return lambda p: [
        sys.executable,
        here,
        "--serve",
        kind,
        "--port",
        str(p),
        "--delay",
        str(delay),
    ]


# --------------------------------------------------------------------------- harness


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Row:
    wall_s: float
    first_s: float
    ok: int
    failures: str
    peak_threads: int
    client_cpu_s: float
    server_cpu_s: float


def one_burst(server: c.Spawned, clients: int, timeout: float) -> Row:
    pid = server.proc.pid
    client0, server0 = own_cpu(), cpu_of(pid)
    b = asyncio.run(burst._burst(server.port, clients, timeout, pid))
    client1, server1 = own_cpu(), cpu_of(pid)
    fails = sum(b.failures.values())
    return Row(
        b.wall_s,
        b.first_s,
        b.ok,
        f"{fails} {dict(b.failures) or ''}".strip(),
        b.peak_threads,
        client1 - client0,
        server1 - server0,
    )


def verdict(name: str, walls: list[float], failed: int) -> str:
    """Against burst.py's target, on the median wall; none for the no-delay runs."""
    if "no delay" in name:
        return ""
    return "met" if c.median(walls) <= burst.TARGET_S and failed == 0 else "missed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="bursts per server")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument(
        "--pin", action="store_true", help="servers on CPU 0, the client on CPU 1 (taskset)"
    )
    parser.add_argument(
        "--skip-reference", action="store_true", help="leave out bare Flask and mockskill"
    )
    parser.add_argument(
        "--serve", choices=["asyncio", "uvloop", "selectors"], help=argparse.SUPPRESS
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--delay", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve:
        c.raise_nofile()
        if args.serve == "selectors":
            serve_selectors(args.port, args.delay)
        else:
            serve_asyncio(args.port, args.delay, args.serve == "uvloop")
        return

    nofile = c.raise_nofile()
    if nofile < args.clients + 50:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {args.clients} clients")
    try:
        importlib.import_module("uvloop")
        have_uvloop = True
    except ImportError:
        have_uvloop = False
    cpus = None
    if args.pin:
        cpus = "0"
        os.sched_setaffinity(0, {1})

    with c.scenario_file(c.DELAY_SCENARIO) as path, contextlib.ExitStack() as stack:
        healthy = str(c.REPO / "scenarios" / "healthy.yaml")
        commands: dict[str, Callable[[int], list[str]]] = {
            "asyncio, sleep 1 s": self_cmd("asyncio", 1.0),
        }
        if have_uvloop:
            commands["asyncio + uvloop, sleep 1 s"] = self_cmd("uvloop", 1.0)
        commands["selectors + timer heap, 1 s"] = self_cmd("selectors", 1.0)
        if not args.skip_reference:
            commands["bare Flask sleep(1), backlog 4096"] = lambda p: c.bare_cmd(p, BACKLOG)
            commands["mockskill (delay: 1000)"] = lambda p: c.mockskill_cmd(p, [path, healthy])
        commands["asyncio, no delay (client alone)"] = self_cmd("asyncio", 0.0)
        commands["selectors, no delay (client alone)"] = self_cmd("selectors", 0.0)
        servers = {
            name: stack.enter_context(c.serving(cmd, cpus)) for name, cmd in commands.items()
        }

        results: dict[str, list[Row]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, server in servers.items():
                results[name].append(one_burst(server, args.clients, args.timeout))
                time.sleep(1.0)  # let the threaded servers' threads wind down

    pinned = " (servers pinned to CPU 0, client to CPU 1)" if args.pin else ""
    print(
        f"{args.clients} concurrent POSTs (bench/burst.py's client), {args.rounds} bursts "
        f"per server, taken in turn{pinned}"
    )
    print(c.machine())
    if not have_uvloop:
        print("uvloop: not installed, not measured")
    print()
    rows = []
    for name, rs in results.items():
        for r in rs:
            rows.append(
                (
                    name,
                    f"{r.wall_s:.2f}",
                    f"{r.first_s:.2f}",
                    r.ok,
                    r.failures,
                    r.peak_threads,
                    f"{r.client_cpu_s:.2f}",
                    f"{r.server_cpu_s:.2f}",
                )
            )
    headers = (
        "server",
        "wall s",
        "first s",
        "ok",
        "failures",
        "peak threads",
        "client CPU s",
        "server CPU s",
    )
    c.print_table(headers, rows)
    print()
    summary = []
    for name, rs in results.items():
        walls = [r.wall_s for r in rs]
        failed = sum(args.clients - r.ok for r in rs)
        summary.append(
            (
                name,
                f"{c.median(walls):.2f}",
                f"{min(walls):.2f}",
                f"{max(walls):.2f}",
                failed,
                f"{c.median([r.client_cpu_s for r in rs]):.2f}",
                f"{c.median([r.server_cpu_s for r in rs]):.2f}",
                verdict(name, walls, failed),
            )
        )
    c.print_table(
        (
            "server",
            "median wall s",
            "min",
            "max",
            "failures",
            "client CPU s",
            "server CPU s",
            "<= 1.3 s",
        ),
        summary,
    )


if __name__ == "__main__":
    main()
