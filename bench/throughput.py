"""Requests per second on an error step, against the bare Flask app (target: >= 90 %).

mockskill serves the bundled scenarios and is sent
``POST /skills/endpoint-unreachable/invoke`` (a 503 error step); the bare
Flask app (bench/bare_flask.py, same Werkzeug threaded server, same backlog
4096 unless ``--bare-backlog``) is sent the same request to its 503 route.
Werkzeug closes the connection after each response, so every request is a
new TCP connection. The load generator is ``wrk`` if it is on PATH (one
thread, ``--connections`` connections), else a Python raw-socket client with
that many threads (slower: it competes harder for the CPUs). Each server is
started once, then the two are loaded alternately ``--rounds`` times for
``--duration`` seconds each; the medians and their ratio are printed.

Client and server share this machine's cores: on 2 CPUs the client takes
a good part of one, so absolute figures are lower than with a separate
client machine; the ratio is what counts. ``--pin`` puts the servers on
CPU 0 and wrk on CPU 1 (a cleaner split, not the default).

Run::

    python bench/throughput.py [--rounds 5 --duration 5 --connections 8]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import _common as c

TARGET_RATIO = 0.90
WRK_LUA = """\
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
"""


def run_wrk(port: int, seconds: int, connections: int, lua: str, cpus: str | None) -> float:
    cmd = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "-s",
        lua,
        f"http://{c.HOST}:{port}{c.ERROR_PATH}",
    ]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx is None or int(non2xx.group(1)) != total:
        raise RuntimeError(f"expected every answer to be a 503:\n{out}")
    for line in out.splitlines():
        if "Socket errors" in line:
            print(f"  (wrk, port {port}: {line.strip()})")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def run_python(port: int, seconds: float, connections: int) -> float:
    request = c.request_bytes("POST", c.ERROR_PATH, port, b"{}")
    # Bounded by count: size the batch from a short probe so it lasts ~seconds.
    probe = c.load(port, request, 200, connections)
    result = c.load(port, request, max(200, int(probe.rps * seconds)), connections)
    if set(result.statuses) != {503} or result.errors:
        raise RuntimeError(f"unexpected answers: {result.statuses} {result.errors}")
    return result.rps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--bare-backlog", type=int, default=4096)
    parser.add_argument("--python-client", action="store_true", help="do not use wrk")
    parser.add_argument("--pin", action="store_true", help="servers on CPU 0, wrk on CPU 1")
    args = parser.parse_args()

    use_wrk = shutil.which("wrk") is not None and not args.python_client
    server_cpus = "0" if args.pin else None
    client_cpus = "1" if args.pin else None
    servers: dict[str, Callable[[int], list[str]]] = {
        "mockskill (error step)": lambda p: c.mockskill_cmd(p),
        f"bare Flask (backlog {args.bare_backlog})": lambda p: c.bare_cmd(p, args.bare_backlog),
    }
    results: dict[str, list[float]] = {name: [] for name in servers}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        lua = Path(tmp) / "post.lua"
        lua.write_text(WRK_LUA)
        ports = {
            name: stack.enter_context(c.serving(cmd, cpus=server_cpus)).port
            for name, cmd in servers.items()
        }
        for _ in range(args.rounds):
            for name, port in ports.items():
                if use_wrk:
                    rps = run_wrk(port, args.duration, args.connections, str(lua), client_cpus)
                else:
                    rps = run_python(port, args.duration, args.connections)
                results[name].append(rps)

    client = f"wrk -t1 -c{args.connections}" if use_wrk else f"Python, {args.connections} threads"
    pin = ", servers pinned to CPU 0, client to CPU 1" if args.pin else ", unpinned"
    print(
        f"POST {c.ERROR_PATH} -> 503, new connection per request; client: {client}{pin};"
        f" {args.rounds} x {args.duration} s each"
    )
    print(c.machine())
    rows = []
    for name, values in results.items():
        runs = " ".join(f"{v:.0f}" for v in values)
        rows.append((name, f"{c.median(values):.0f}", runs))
    c.print_table(("server", "median req/s", "runs (req/s)"), rows)
    mock, bare = (c.median(v) for v in results.values())
    ratio = mock / bare
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    print(f"ratio mockskill / bare = {ratio:.1%} (target >= {TARGET_RATIO:.0%}: {verdict})")


if __name__ == "__main__":
    main()
