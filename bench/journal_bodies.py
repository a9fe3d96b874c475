"""Requests per second with the journal keeping what was sent, beside digest-only (issue 28).

Two ``python -m mockskill serve`` processes on one scenario (a plain invoke step
answering ``{"ok": 1}``): one with the default ``--journal-bodies on``, one with
``--journal-bodies off`` (the entries of before issue 28: the body's digest
alone). Each gets ``wrk -t2 -c32`` keep-alive POSTs of a 1 KiB JSON body with a
consumer's headers (``Content-Type``, ``Authorization``, ``Mockskill-Session``)
for ``--duration`` seconds, in turn, ``--rounds`` times; medians and the ratio
on / off (target >= 0.90). Then each server's RSS with its journal full (the
default 10 000 entries after the runs) and the time of one ``GET /__admin/journal``
of it, first (the entries shown: decoded and masked) and second (as kept).
The client shares the 2 cores: the ratio counts, not the absolute figures.
``--cpu N``: the engine's side alone, in process (as ``engine_hotpath.py``: a
``LoopDispatcher``'s plan + played, the journal at capacity), CPU microseconds
per request with bodies on and off, best of three rounds of N, alternated. Run::

    python bench/journal_bodies.py [--rounds 5 --duration 5] [--cpu 20000]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import _common as c
from engine_hotpath import request as transport_request
from engine_hotpath import run as plan_and_play

from mockskill.scenario.loader import load_text
from mockskill.server import Server
from mockskill.server.dispatch import LoopDispatcher

SCENARIO = (
    "name: journal-bench\nskills:\n  - id: translate\n"  # what the readiness poll asks for
    "  - id: echo\n    invoke:\n      json: {ok: 1}\n"
)
MODES = ("on", "off")


def body() -> str:
    """A 1 KiB JSON body, as a consumer of a skill sends one."""
    text = "x" * 1024
    document = {"input": {"text": text}, "options": {"lang": "en"}}
    overhead = len(json.dumps(document)) - 1024
    document["input"]["text"] = text[: 1024 - overhead]
    encoded = json.dumps(document)
    assert len(encoded) == 1024, len(encoded)
    return encoded


def wrk(port: int, seconds: int, lua: Path) -> float:
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", str(lua),
         f"http://{c.HOST}:{port}/skills/echo/invoke"],
        check=True, capture_output=True, text=True, timeout=seconds + 30,
    ).stdout  # fmt: skip
    if "Non-2xx" in out:
        raise RuntimeError(f"not every answer was a 200:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def journal_ms(port: int) -> tuple[float, int]:
    """(milliseconds of one ``GET /__admin/journal``, its entries)."""
    start = time.perf_counter()
    with urllib.request.urlopen(f"http://{c.HOST}:{port}/__admin/journal", timeout=60) as answer:
        size = len(json.load(answer)["entries"])
    return (time.perf_counter() - start) * 1000, size


def cpu(iterations: int) -> None:
    """The engine's CPU per request, bodies on and off, in process (see the docstring)."""
    surfaces = {}
    for mode in MODES:
        server = Server(load_text(SCENARIO, "bench.yaml"), journal_bodies=mode == "on")
        server.engine.open()
        surfaces[mode] = (server, LoopDispatcher(server.engine, server._admin_wsgi))
    req = transport_request("POST", "/skills/echo/invoke", body().encode(), 8080)
    best: dict[str, float] = {}
    try:
        for server, surface in surfaces.values():  # warm: the journal at its capacity
            plan_and_play(surface, req, server.state.capacity + 1000)
        for _ in range(3):
            for mode, (_, surface) in surfaces.items():
                took = plan_and_play(surface, req, iterations)
                best[mode] = min(best.get(mode, took), took)
    finally:
        for server, surface in surfaces.values():
            surface.close()
            server.engine.close()
    print(f"in process, plan + played, 1 KiB JSON body, best of 3 x {iterations}")
    c.print_table(
        ["--journal-bodies", "us/request"], [[mode, f"{best[mode]:.1f}"] for mode in MODES]
    )
    print(f"off / on CPU: {best['off'] / best['on']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--cpu", type=int, metavar="N", help="in process instead (see above)")
    args = parser.parse_args()
    if args.cpu:
        cpu(args.cpu)
        return
    runs: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp, c.scenario_file(SCENARIO) as path:
        lua = Path(tmp) / "post.lua"
        lua.write_text(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(body())}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
            'wrk.headers["Authorization"] = "Bearer bench-token-0123456789"\n'
            'wrk.headers["Mockskill-Session"] = "bench"\n'
        )
        with (
            c.serving(lambda port: [*c.mockskill_cmd(port, [path]), "--journal-bodies", "on"])
            as on,
            c.serving(lambda port: [*c.mockskill_cmd(port, [path]), "--journal-bodies", "off"])
            as off,
        ):  # fmt: skip
            servers = {"on": on, "off": off}
            for server in servers.values():  # a short warm-up each
                wrk(server.port, 1, lua)
            for _ in range(args.rounds):
                for mode, server in servers.items():
                    runs[mode].append(wrk(server.port, args.duration, lua))
            after = {}
            for mode, server in servers.items():
                first, size = journal_ms(server.port)
                second, _ = journal_ms(server.port)
                after[mode] = (c.rss_kb(server.proc.pid), first, second, size)
    print(
        f"keep-alive POST /skills/echo/invoke (1 KiB JSON), wrk -t2 -c32,"
        f" {args.rounds} x {args.duration} s, servers in turn"
    )
    print(c.machine())
    medians = {mode: c.median(values) for mode, values in runs.items()}
    c.print_table(
        ["--journal-bodies", "median req/s", "runs req/s", "RSS, journal full",
         "GET /__admin/journal first / second", "entries"],
        [[mode, f"{medians[mode]:.0f}", " ".join(f"{v:.0f}" for v in runs[mode]),
          f"{after[mode][0] / 1024:.1f} MB", f"{after[mode][1]:.0f} / {after[mode][2]:.0f} ms",
          str(after[mode][3])]
         for mode in MODES],
    )  # fmt: skip
    ratio = medians["on"] / medians["off"]
    print(f"on / off: {ratio:.3f} (target >= 0.90: {'met' if ratio >= 0.9 else 'MISSED'})")


if __name__ == "__main__":
    main()
