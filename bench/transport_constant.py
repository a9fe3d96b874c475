"""The transport's own cost: mockskill.transport answering a constant, beside the floor (issue 13).

The handler returns one fixed :class:`~mockskill.engine.plan.Plan` (the
floor's 503 bytes, the same ``Answer`` object every time) and records
nothing: what is left is the transport's parsing, framing checks, queueing,
outcome and write — the part of a request that is not the engine's. Two
measures:

- **wrk**: ``wrk -t2 -c32`` keep-alive, the same POST as bench/keepalive.py,
  against this transport and bench/floor_server.py in turn, ``--rounds``
  times for ``--duration`` seconds; medians and the ratio transport / floor;
- **CPU** (``--cpu N``, in-process, no socket): N requests fed to one
  connection on a fake transport, timed with ``time.process_time``, for
  the transport alone and for a floor-like protocol; microseconds per
  request (best of three) and gen-0 collections per 1000 requests. Less noisy than wrk on a
  shared machine.

Run::

    python bench/transport_constant.py [--rounds 2 --duration 5] [--cpu 200000]
    python bench/transport_constant.py --serve PORT      # just the server
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import _common as c
import _peers as p
import httptools
from keepalive import WRK_LUA, run_wrk

from mockskill.engine.plan import Answer, Outcome, Plan
from mockskill.transport import Limits, LoopServer, Refusal, Request, run
from mockskill.transport.connection import Connection
from mockskill.transport.loop_server import new_loop
from mockskill.transport.shared import Shared

BODY = b'{"error": {"code": "ENDPOINT_UNREACHABLE", "message": "Failed to connect"}}'
ANSWER = Answer(503, (("Retry-After", "2"), ("Content-Type", "application/json")), BODY)
PLAN = Plan(ANSWER)
REQUEST = (
    b"POST /skills/endpoint-unreachable/invoke HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
    b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
)


class Constant:
    """A handler answering every request with :data:`PLAN`."""

    def plan(self, request: Request) -> Plan:
        return PLAN

    def refuse(self, refusal: Refusal) -> Plan:
        return Plan(ANSWER, close=True)

    def played(self, exchange: Request | Refusal, outcome: Outcome) -> None:
        pass


def serve(port: int) -> None:
    run(LoopServer(Constant(), "127.0.0.1", port, backlog=4096))


class _FakeTransport:
    """Enough of an asyncio transport for a connection fed in-process."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def writelines(self, data: Any) -> None:
        for piece in data:
            self.written += len(piece)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool:
        return False


class _Floor(asyncio.Protocol):
    """The floor's protocol (bench/floor_server.py), for the in-process comparison."""

    def __init__(self, transport: _FakeTransport, answer: bytes) -> None:
        self.transport, self.answer = transport, answer
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.transport.write(self.answer)


def cpu(n: int) -> None:
    """Microseconds of CPU per request, in-process, for the transport and the floor."""
    loop = new_loop()  # uvloop's when installed, as the server's
    fake = _FakeTransport()
    connection = Connection(Shared(Constant(), Limits(), loop))
    connection.connection_made(fake)  # type: ignore[arg-type]
    floor = _Floor(_FakeTransport(), ANSWER.head(close=False) + BODY)
    rows = []
    for name, feed in (("transport", connection.data_received), ("floor", floor.data_received)):
        for _ in range(2000):  # warm
            feed(REQUEST)
        gen0 = gc.get_stats()[0]["collections"]
        spent = []
        for _ in range(3):  # the best of three: the least disturbed by the other processes
            began = time.process_time()
            for _ in range(n):
                feed(REQUEST)
            spent.append(time.process_time() - began)
        collections = gc.get_stats()[0]["collections"] - gen0
        rows.append((name, f"{min(spent) / n * 1e6:.2f}", f"{collections / n / 3 * 1000:.2f}"))
    loop.close()
    print(f"in-process, {n} keep-alive requests on one connection, {c.machine()}")
    c.print_table(("server", "CPU us/request", "gen-0 collections / 1000 req"), rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--cpu", type=int, metavar="N", help="in-process CPU timing only")
    parser.add_argument("--serve", type=int, metavar="PORT", help="only serve the constant")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    if args.cpu:
        cpu(args.cpu)
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    results: dict[str, list[float]] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        ports = {"transport (constant)": c.free_port(), "floor (httptools)": c.free_port()}
        cmd = [sys.executable, __file__, "--serve", str(ports["transport (constant)"])]
        stack.enter_context(p.running(cmd, p.answers_status(ports["transport (constant)"], 503)))
        stack.enter_context(p.floor(ports["floor (httptools)"], BODY))
        for _ in range(args.rounds):
            for name, port in ports.items():
                rps = run_wrk(port, args.duration, "keep-alive", lua, 503).rps
                results.setdefault(name, []).append(rps)
    print(
        f"wrk -t2 -c32 keep-alive, {args.rounds} x {args.duration} s each, in turn; {c.machine()}"
    )
    rows = [
        (name, f"{c.median(runs):.0f}", " ".join(f"{r:.0f}" for r in runs))
        for name, runs in results.items()
    ]
    c.print_table(("server", "median req/s", "runs req/s"), rows)
    ratio = c.median(results["transport (constant)"]) / c.median(results["floor (httptools)"])
    print(f"\ntransport / floor: {ratio:.3f}")


if __name__ == "__main__":
    main()
