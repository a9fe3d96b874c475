"""How late a fixed delay answers, alone and under load (issue 3).

Targets: p99 overshoot <= 50 ms at 100 concurrent clients; at 1000
concurrent clients, a 1 s delay all answered within 1.3 s wall.

mockskill serves two skills, ``{delay: 100, json: {ok: true}}`` and
``{delay: 1000, json: {ok: true}}``. For each delay, an asyncio client sends
POSTs at 1 client (``--sequential`` requests one after another), and at
100 and 1000 clients (all connections opened at once, ``--rounds`` bursts).
Each request is timed client-side from the moment it is fully sent
(``drain()`` returned) to the last byte of the body (per Content-Length,
not EOF, which would add Werkzeug's 10 ms wait for the client to close);
the overshoot is that time minus the delay. p50 and p99 are over all the
requests of all rounds; wall is from the first connect to the last byte,
median of the rounds. The bare Flask app's ``time.sleep`` routes (same
paths, backlog 4096) get the same load in the same run, as the baseline.

The client runs on the same 2 cores; at 1000 clients its own event loop
adds to the figures (measure with ``--skip-bare`` to halve the run time).

Run::

    python bench/delay_accuracy.py [--rounds 3 --sequential 20]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from collections.abc import Callable

import _common as c

TARGET_P99_MS_AT_100 = 50.0
TARGET_WALL_S_AT_1000 = 1.3
DELAYS = {100: "/skills/delay-100/invoke", 1000: "/skills/delay/invoke"}
SCENARIO = """\
name: bench-delay-accuracy
description: Fixed delays of 100 ms and 1 s (bench/delay_accuracy.py).
skills:
  - id: delay-100
    invoke: {delay: 100, json: {ok: true}}
  - id: delay
    invoke: {delay: 1000, json: {ok: true}}
"""


async def _sequential(port: int, request: bytes, count: int, timeout: float) -> list[c.Timed]:
    return [await c.timed_request(port, request, timeout) for _ in range(count)]


async def _burst(port: int, request: bytes, clients: int, timeout: float) -> list[c.Timed]:
    return list(
        await asyncio.gather(*(c.timed_request(port, request, timeout) for _ in range(clients)))
    )


def measure(
    port: int, delay_ms: int, clients: int, rounds: int, sequential: int, timeout: float
) -> tuple[list[float], list[float], Counter[str]]:
    """Overshoots (ms) of the successful requests, wall times (s) per round, failures."""
    request = c.request_bytes("POST", DELAYS[delay_ms], port, b"{}")
    overshoots: list[float] = []
    walls: list[float] = []
    failures: Counter[str] = Counter()
    for _ in range(1 if clients == 1 else rounds):
        if clients == 1:
            timed = asyncio.run(_sequential(port, request, sequential, timeout))
        else:
            timed = asyncio.run(_burst(port, request, clients, timeout))
        for t in timed:
            if t.outcome == "ok":
                overshoots.append((t.done - t.sent) * 1000 - delay_ms)
            else:
                failures[t.outcome] += 1
        if clients > 1:
            walls.append(max(t.done for t in timed) - min(t.connect for t in timed))
            time.sleep(max(1.0, delay_ms / 1000))  # let the server's threads wind down
    return overshoots, walls, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="bursts at 100 and 1000 clients")
    parser.add_argument("--sequential", type=int, default=20, help="requests at 1 client")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--skip-bare", action="store_true")
    args = parser.parse_args()

    nofile = c.raise_nofile()
    if nofile < max(args.clients) + 50:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {max(args.clients)} clients")

    rows = []
    with c.scenario_file(SCENARIO) as path:
        healthy = str(c.REPO / "scenarios" / "healthy.yaml")  # what wait_ready polls
        servers: dict[str, Callable[[int], list[str]]] = {
            "mockskill": lambda p: c.mockskill_cmd(p, [path, healthy]),
        }
        if not args.skip_bare:
            servers["bare Flask sleep()"] = lambda p: c.bare_cmd(p, 4096)
        for name, cmd in servers.items():
            with c.serving(cmd) as server:
                for delay_ms in DELAYS:
                    for clients in args.clients:
                        over, walls, fails = measure(
                            server.port,
                            delay_ms,
                            clients,
                            args.rounds,
                            args.sequential,
                            args.timeout,
                        )
                        verdict = ""
                        if name == "mockskill" and clients == 100:
                            p99 = c.percentile(over, 99)
                            verdict = "met" if p99 <= TARGET_P99_MS_AT_100 else "MISSED"
                        if name == "mockskill" and clients == 1000 and delay_ms == 1000:
                            wall = c.median(walls)
                            ok = wall <= TARGET_WALL_S_AT_1000 and not fails
                            verdict = "met" if ok else "MISSED"
                        rows.append(
                            (
                                name,
                                f"{delay_ms} ms",
                                clients,
                                len(over),
                                f"{c.percentile(over, 50):.1f}",
                                f"{c.percentile(over, 99):.1f}",
                                f"{max(over):.1f}" if over else "nan",
                                f"{c.median(walls):.2f}" if walls else "",
                                f"{sum(fails.values())} {dict(fails) or ''}".strip(),
                                verdict,
                            )
                        )

    print(
        f"fixed delays, overshoot = (last byte - request sent) - delay; bursts of"
        f" {'/'.join(str(n) for n in args.clients if n > 1)} clients x {args.rounds} rounds,"
        f" {args.sequential} sequential requests at 1 client"
    )
    print(c.machine())
    headers = (
        "server",
        "delay",
        "clients",
        "n",
        "p50 over ms",
        "p99 over ms",
        "max over ms",
        "wall s (median)",
        "failures",
        "target",
    )
    c.print_table(headers, rows)
    print(
        f"targets: p99 overshoot <= {TARGET_P99_MS_AT_100:.0f} ms at 100 clients;"
        f" 1000 x 1 s within {TARGET_WALL_S_AT_1000} s wall"
    )


if __name__ == "__main__":
    main()
