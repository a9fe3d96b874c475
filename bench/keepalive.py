"""Requests per second on the error step, side by side with WireMock and the floor (issue 13).

One run, four servers, ``wrk -t2 -c32`` (2 threads, 32 connections), each
load once with keep-alive (wrk's default: it reuses a connection until the
server closes it) and once with ``Connection: close`` on every request:

- **mockskill**: ``python -m mockskill serve`` on the bundled scenarios
  (whatever transport that starts), ``POST /skills/endpoint-unreachable/invoke``
  (the 503 error step of catalog.yaml);
- **the floor**: bench/floor_server.py (asyncio + httptools) answering the
  very bytes of mockskill's answer as a constant;
- **WireMock cold**: a fresh JVM, measured for the ``--cold`` seconds (10)
  right after its first answer: what an integration test meets. One JVM for
  keep-alive, another for ``Connection: close``;
- **WireMock warm**: a fresh JVM, warmed by ``--warmup`` seconds (120) of
  keep-alive load, then measured.

WireMock (the npm package's standalone jar, see bench/_peers.py) runs with
``--no-request-journal --disable-request-logging`` and one stub copied from
mockskill's answer, read off the wire at the start of the run: same path,
status, body and headers (Date, Server, Content-Length and Connection are
each server's own). Each wrk run must get 503 on every answer.

After the cold runs and the warm-up, the warm loads go to mockskill, the
floor and WireMock in turn, ``--rounds`` times for ``--duration`` seconds
(so drift in the machine's load falls on all alike); medians are printed
with the issue's ratios: mockskill / WireMock warm (target >= 1),
mockskill / (2 x WireMock cold) (>= 1), mockskill / floor (>= 25 %), and
with ``--before-close RPS`` (today's ``Connection: close`` figure) mockskill
close / that (>= 2).

Client and servers share the machine's cores (2 here): ratios count more than
absolute figures. ~4 minutes with the defaults. Run::

    python bench/keepalive.py [--rounds 3 --duration 5 --cold 10 --warmup 120]
                              [--before-close RPS] [--skip-wiremock]
"""

from __future__ import annotations

import argparse
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

WRK_LUA = """\
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
"""
MODES = {"keep-alive": [], "Connection: close": ["-H", "Connection: close"]}


@dataclass
class Wrk:
    rps: float
    requests: int
    errors: str
    """wrk's "Socket errors" line, or empty."""


def run_wrk(port: int, seconds: int, mode: str, lua: str, expect: int) -> Wrk:
    cmd = ["wrk", "-t2", "-c32", f"-d{seconds}s", *MODES[mode], "-s", lua]
    out = subprocess.run(
        [*cmd, f"http://{c.HOST}:{port}{c.ERROR_PATH}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if expect >= 300 and (non2xx is None or int(non2xx.group(1)) != total):
        raise RuntimeError(f"expected every answer to be a {expect}:\n{out}")
    errors = next((ln.strip() for ln in out.splitlines() if "Socket errors" in ln), "")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Wrk(rps, total, errors.removeprefix("Socket errors: "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per warm run")
    parser.add_argument("--cold", type=int, default=10, help="seconds of WireMock cold")
    parser.add_argument("--warmup", type=int, default=120, help="seconds of WireMock warm-up")
    parser.add_argument("--before-close", type=float, help="today's Connection: close req/s")
    parser.add_argument("--skip-wiremock", action="store_true")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()

    results: dict[tuple[str, str], list[Wrk]] = {}
    cold_ready: list[float] = []
    started = time.monotonic()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        ports = {"mockskill": c.free_port(), "floor (httptools)": c.free_port()}
        stack.enter_context(p.mockskill(ports["mockskill"]))
        answer = p.fetch(ports["mockskill"], p.error_request(ports["mockskill"]))
        stack.enter_context(p.floor(ports["floor (httptools)"], answer.body))

        if not args.skip_wiremock:
            for mode in MODES:  # a fresh JVM each: both are "its first seconds"
                port = c.free_port()
                with p.wiremock(port, answer) as (_, ready_s):
                    cold_ready.append(ready_s)
                    results[("WireMock cold", mode)] = [
                        run_wrk(port, args.cold, mode, lua, answer.status)
                    ]
            ports["WireMock warm"] = c.free_port()
            stack.enter_context(p.wiremock(ports["WireMock warm"], answer))
            warm = run_wrk(ports["WireMock warm"], args.warmup, "keep-alive", lua, answer.status)
            print(f"(WireMock warm-up: {args.warmup} s at {warm.rps:.0f} req/s)")

        for _ in range(args.rounds):
            for mode in MODES:
                for name, port in ports.items():
                    run = run_wrk(port, args.duration, mode, lua, answer.status)
                    results.setdefault((name, mode), []).append(run)
    elapsed = time.monotonic() - started

    print(
        f"POST {c.ERROR_PATH} -> {answer.status} ({len(answer.body)} B body); wrk -t2 -c32;"
        f" warm: {args.rounds} x {args.duration} s each, servers in turn; WireMock cold:"
        f" {args.cold} s from its first answer (fresh JVM each, first answer after"
        f" {'/'.join(f'{s:.1f}' for s in cold_ready) or '-'} s), warm after {args.warmup} s"
        f" of load; run took {elapsed:.0f} s"
    )
    print(f"{c.machine()}; WireMock {p.wiremock_version()}")
    rows = []
    for (name, mode), runs in results.items():
        errors = "; ".join(sorted({r.errors for r in runs if r.errors}))
        rows.append(
            (
                name,
                mode,
                f"{c.median([r.rps for r in runs]):.0f}",
                " ".join(f"{r.rps:.0f}" for r in runs),
                errors or "none",
            )
        )
    rows.sort(key=lambda r: (r[1] != "keep-alive", r[0]))
    c.print_table(("server", "client", "median req/s", "runs req/s", "wrk socket errors"), rows)

    def med(name: str, mode: str) -> float | None:
        runs = results.get((name, mode))
        return c.median([r.rps for r in runs]) if runs else None

    print()
    ratio_rows = []
    for mode in MODES:
        mock = med("mockskill", mode)
        assert mock is not None
        refs: list[tuple[str, float | None, float | None]] = [
            ("WireMock warm", med("WireMock warm", mode), 1.0 if mode == "keep-alive" else None),
            ("2 x WireMock cold", _twice(med("WireMock cold", mode)), None),
            ("floor", med("floor (httptools)", mode), 0.25 if mode == "keep-alive" else None),
        ]
        if mode == "keep-alive":
            refs[1] = (refs[1][0], refs[1][1], 1.0)
        elif args.before_close:
            refs.append(("before (--before-close)", args.before_close, 2.0))
        for ref, value, target in refs:
            if value is None:
                continue
            ratio = mock / value
            verdict = "" if target is None else ("met" if ratio >= target else "MISSED")
            target_s = "" if target is None else f">= {target:.2f}"
            ratio_rows.append((mode, f"mockskill / {ref}", f"{ratio:.3f}", target_s, verdict))
    c.print_table(("client", "ratio", "value", "target", "verdict"), ratio_rows)


def _twice(value: float | None) -> float | None:
    return None if value is None else 2 * value


if __name__ == "__main__":
    main()
