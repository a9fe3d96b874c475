"""Proxy overhead (issue 15): latency and req/s through a ``proxy`` step vs straight upstream.

The upstream answers at once: bench/floor_server.py (asyncio + httptools, one
constant 503 answer). ``wrk --latency`` keep-alive on the benches' ``POST
/skills/endpoint-unreachable/invoke``, against the floor directly and through
``mockskill serve`` whose ``endpoint-unreachable`` skill is ``proxy: <the
floor>`` (mockskill's pooled upstream client, kept alive); also mockskill
answering its own scripted 503 (the bundled step), for scale. Each load is
taken against each server in turn, ``--rounds`` times for ``--duration``
seconds; medians of p50, p99, req/s and the serving mockskill's CPU per
request (``/proc/PID/stat``). The added latency is through-the-proxy minus
straight, in the same run.

Two kinds of load:

* **paced** (open loop, the measure of the added latency): 32 connections
  that together send ``--rates`` requests per second (default 1000 and 2000,
  below what the proxy can take): each connection waits a random pause
  between its answer and its next request (wrk's Lua ``delay()``, uniform on
  0 .. 2 x 32 / rate s, so that the connections do not fire in step), so the
  server is not saturated and the latency is the request's own plus what
  the chance coincidences of arrivals queue, as a real consumer sees it.
  The req/s column says the rate achieved (a little under the asked one: the
  pause comes after each answer).
* **saturated** (closed loop, the measure of req/s): ``-c32`` and ``-c1`` as
  fast as wrk can; at ``-c32`` the latency there is mostly the queue
  (Little's law: 32 / req/s), not the proxy's.

Target: <= 1 ms p50 added at 32 connections. Run::

    python bench/proxy.py [--rounds 3 --duration 5 --rates 1000 2000 --connections 32 1]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import _common as c
import _peers as p
from keepalive import WRK_LUA

PROXY_SCENARIO = """\
name: bench-proxy
skills:
  - id: translate
  - id: endpoint-unreachable
    proxy: http://127.0.0.1:{port}
"""


@dataclass
class Run:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: str
    cpu_us: float | None = None
    """CPU of the serving mockskill process per request (None: not a mockskill)."""


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process *pid* used so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


PACED_LUA = (
    WRK_LUA
    + """\
local pause = PAUSE_MS
function delay()
  return math.random() * 2 * pause
end
"""
)
"""The paced load's script: a random pause before each request, PAUSE_MS on average."""


@dataclass(frozen=True)
class Load:
    label: str
    connections: int
    lua: str


def run_wrk(
    port: int, seconds: int, lua: str, pid: int | None = None, connections: int = 32
) -> Run:
    threads = min(2, connections)
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", lua]
    before = cpu_seconds(pid) if pid is not None else 0.0
    out = subprocess.run(
        [*cmd, f"http://{c.HOST}:{port}{c.ERROR_PATH}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx is None or int(non2xx.group(1)) != total:
        raise RuntimeError(f"expected every answer to be the upstream's 503:\n{out}")
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE).group(1)  # type: ignore[union-attr]
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE).group(1)  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = next((ln.strip() for ln in out.splitlines() if "Socket errors" in ln), "")
    cpu = None if pid is None else (cpu_seconds(pid) - before) / total * 1e6
    return Run(rps, _ms(p50), _ms(p99), errors.removeprefix("Socket errors: "), cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument(
        "--rates",
        type=int,
        nargs="*",
        default=[1000, 2000],
        help="paced loads: requests per second of 32 connections together",
    )
    parser.add_argument(
        "--connections",
        type=int,
        nargs="*",
        default=[32, 1],
        help="saturated loads: wrk's -c, each in turn (32, the target's, and 1: no queueing)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    results: dict[tuple[str, str], list[Run]] = {}
    started = time.monotonic()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        loads: list[Load] = []
        for rate in args.rates:
            paced = Path(tmp) / f"paced-{rate}.lua"
            paced.write_text(PACED_LUA.replace("PAUSE_MS", f"{32_000 / rate:g}"))
            loads.append(Load(f"paced {rate}/s, -c32", 32, str(paced)))
        loads += [Load(f"saturated, -c{n}", n, lua) for n in args.connections]
        floor_port, proxy_port, scripted_port = c.free_port(), c.free_port(), c.free_port()
        scripted = stack.enter_context(p.mockskill(scripted_port))
        answer = p.fetch(scripted_port, p.error_request(scripted_port))
        stack.enter_context(p.floor(floor_port, answer.body))
        scenario = Path(tmp) / "proxy.yaml"
        scenario.write_text(PROXY_SCENARIO.format(port=floor_port))
        proxied = c.spawn(c.mockskill_cmd(proxy_port, [str(scenario)]), proxy_port)
        stack.callback(c.stop, proxied.proc)
        servers: dict[str, tuple[int, int | None]] = {
            "straight to the upstream (floor)": (floor_port, None),
            "through mockskill's proxy": (proxy_port, proxied.proc.pid),
            "mockskill, scripted 503 (for scale)": (scripted_port, scripted.pid),
        }
        for port, _ in servers.values():  # warm: pools filled, code paths taken
            run_wrk(port, 1, lua)
        for _ in range(args.rounds):
            for load in loads:
                for name, (port, pid) in servers.items():
                    run = run_wrk(port, args.duration, load.lua, pid, load.connections)
                    results.setdefault((load.label, name), []).append(run)
    print(
        f"wrk keep-alive, {args.rounds} x {args.duration} s each, in turn"
        f" ({time.monotonic() - started:.0f} s); {c.machine()}"
    )
    rows = []
    for (label, name), runs in results.items():
        rows.append(
            (
                label,
                name,
                f"{c.median([r.rps for r in runs]):,.0f}",
                f"{c.median([r.p50_ms for r in runs]):.3f}",
                f"{c.median([r.p99_ms for r in runs]):.3f}",
                "-" if runs[0].cpu_us is None else f"{c.median([r.cpu_us or 0 for r in runs]):.0f}",
                "; ".join(r.errors for r in runs if r.errors) or "none",
            )
        )
    headers = ("load", "server", "req/s", "p50 ms", "p99 ms", "CPU us/req", "socket errors")
    c.print_table(headers, rows)
    for load in loads:
        straight = results[(load.label, "straight to the upstream (floor)")]
        through = results[(load.label, "through mockskill's proxy")]
        added_p50 = c.median([r.p50_ms for r in through]) - c.median([r.p50_ms for r in straight])
        added_p99 = c.median([r.p99_ms for r in through]) - c.median([r.p99_ms for r in straight])
        ratio = c.median([r.rps for r in through]) / c.median([r.rps for r in straight])
        verdict = "meets" if added_p50 <= 1.0 else "misses"
        print(
            f"{load.label}: added by the proxy: p50 {added_p50:+.3f} ms, p99 {added_p99:+.3f} ms;"
            f" req/s through it = {ratio:.0%} of straight ({verdict} <= 1 ms p50 added)"
        )


if __name__ == "__main__":
    main()
