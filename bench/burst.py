"""1000 concurrent requests to a 1-second delay step (target: all done in <= 1.3 s).

mockskill serves one skill whose invoke step is
``{delay: 1000, json: {ok: true}}``; an asyncio client opens ``--clients``
connections at once, sends one HTTP/1.1 POST on each and reads each to EOF.
The wall time is from the first connect to the last complete response;
a failure is any connection error, timeout, or status other than 200.

For comparison the same burst goes to the bare Flask app's 1 s sleep route
(bench/bare_flask.py) with Werkzeug's default backlog of 128, where the
kernel drops the SYNs that overflow the accept queue and the client
retransmits them 1 s, 3 s, ... later, and with backlog 4096 as mockskill
uses. The client raises its own RLIMIT_NOFILE (1000 sockets).

Run::

    python bench/burst.py [--clients 1000 --rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import _common as c

TARGET_S = 1.3
PATH = "/skills/delay/invoke"


@dataclass
class Burst:
    wall_s: float
    ok: int
    failures: Counter[str]
    first_s: float
    """When the first response completed, from the first connect."""
    peak_threads: int


async def _one(port: int, request: bytes, timeout: float) -> tuple[float, str]:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(c.HOST, port), timeout)
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
    except (TimeoutError, OSError) as exc:
        return time.perf_counter(), type(exc).__name__
    status, _ = c.parse_response(raw)
    return time.perf_counter(), "ok" if status == 200 else f"HTTP {status}"


async def _burst(port: int, clients: int, timeout: float, pid: int) -> Burst:
    request = c.request_bytes("POST", PATH, port, b"{}")
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, c.threads_of(pid))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    started = time.perf_counter()
    results = await asyncio.gather(*(_one(port, request, timeout) for _ in range(clients)))
    watcher.cancel()
    ends = [t for t, _ in results]
    outcomes = Counter(o for _, o in results)
    ok = outcomes.pop("ok", 0)
    return Burst(max(ends) - started, ok, outcomes, min(ends) - started, peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="bursts per server")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--skip-bare", action="store_true")
    args = parser.parse_args()

    nofile = c.raise_nofile()
    if nofile < args.clients + 50:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {args.clients} clients")

    with c.scenario_file(c.DELAY_SCENARIO) as path:
        # The delay scenario has no /skills/translate: add the bundled healthy
        # scenario, which wait_ready polls.
        healthy = str(c.REPO / "scenarios" / "healthy.yaml")
        servers: dict[str, Callable[[int], list[str]]] = {
            "mockskill (delay: 1000, backlog 4096)": lambda p: c.mockskill_cmd(p, [path, healthy]),
        }
        if not args.skip_bare:
            servers["bare Flask sleep(1), backlog 128 (default)"] = lambda p: c.bare_cmd(p, 128)
            servers["bare Flask sleep(1), backlog 4096"] = lambda p: c.bare_cmd(p, 4096)
        rows = []
        for name, cmd in servers.items():
            with c.serving(cmd) as server:
                for _ in range(args.rounds):
                    burst = _burst(server.port, args.clients, args.timeout, server.proc.pid)
                    b = asyncio.run(burst)
                    fails = sum(b.failures.values())
                    verdict = "met" if b.wall_s <= TARGET_S and fails == 0 else "missed"
                    rows.append(
                        (
                            name,
                            f"{b.wall_s:.2f}",
                            f"{b.first_s:.2f}",
                            b.ok,
                            f"{fails} {dict(b.failures) or ''}".strip(),
                            b.peak_threads,
                            verdict if name.startswith("mockskill") else "",
                        )
                    )
                    time.sleep(1.0)  # let the server's threads wind down

    print(f"{args.clients} concurrent POSTs to a 1 s delay step; {args.rounds} bursts each")
    print(c.machine())
    headers = ("server", "wall s", "first s", "ok", "failures", "peak threads", "<= 1.3 s")
    c.print_table(headers, rows)


if __name__ == "__main__":
    main()
