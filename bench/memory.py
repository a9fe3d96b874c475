"""Resident memory of the server: idle, then every 10 000 requests up to 100 000.

Targets: idle <= 40 MB (issue 13); <= 60 MB after 100 000 requests, and flat. The server runs as a
subprocess (``python -m mockskill serve --quiet`` on the bundled scenarios);
its VmRSS is read from /proc/PID/status once it answers, again after a
second of idling, after one ``GET /__admin/health`` (mockskill builds its
Flask admin app on the first admin request), then after each batch of ``--step`` requests (a new
connection each) to ``POST /skills/endpoint-unreachable/invoke`` (a 503
error step). The bare Flask app (bench/bare_flask.py) gets the same load
in the same run.

mockskill keeps a bounded journal (the last 10 000 requests), so its RSS is
expected to rise during the first 10 000 requests and then stay flat.
``--unique-sessions`` sends a new ``Mockskill-Session`` header on each
request: a consumer test suite that uses one session per test does that.

Batches are sent by a Python raw-socket client (count-bounded; wrk cannot
stop after N requests without a Lua response hook, which made it crawl
against servers that close every connection).

Run::

    python bench/memory.py [--total 100000 --step 10000] [--unique-sessions]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import _common as c

TARGET_MB = 60.0
TARGET_IDLE_MB = 40.0
ADMIN_PATH = "/__admin/health"
ADMIN_POINT = -2
"""The point after the first admin request (mockskill builds its Flask admin app then)."""


def batch(port: int, count: int, unique: bool, offset: int, concurrency: int) -> int:
    plain = c.request_bytes("POST", c.ERROR_PATH, port, b"{}")

    def make(i: int) -> bytes:
        header = f"\r\nMockskill-Session: s{offset + i}\r\n\r\n".encode()
        return plain.replace(b"\r\n\r\n", header, 1)

    result = c.load(port, make if unique else plain, count, concurrency)
    if set(result.statuses) != {503} or result.errors:
        raise RuntimeError(f"unexpected answers: {result.statuses} {result.errors}")
    return result.requests


def series(
    cmd: Callable[[int], list[str]], total: int, step: int, unique: bool, concurrency: int
) -> list[tuple[int, int]]:
    """(requests so far, RSS KiB) pairs: 'started', idle, then after each batch."""
    points: list[tuple[int, int]] = []
    with c.serving(cmd) as server:
        pid = server.proc.pid
        points.append((-1, c.rss_kb(pid)))
        time.sleep(1.0)
        points.append((0, c.rss_kb(pid)))
        # mockskill builds its admin app (Flask) on the first /__admin request: make
        # one, so that the load below runs on a server holding all it will hold.
        status, _ = c.http_once(server.port, c.request_bytes("GET", ADMIN_PATH, server.port))
        if status != 200 and status != 404:  # bare Flask has no /__admin: 404
            raise RuntimeError(f"GET {ADMIN_PATH} answered {status}")
        time.sleep(0.3)
        points.append((ADMIN_POINT, c.rss_kb(pid)))
        done = 0
        while done < total:
            n = min(step, total - done)
            done += batch(server.port, n, unique, done, concurrency)
            time.sleep(0.3)  # let finished handler threads exit
            points.append((done, c.rss_kb(pid)))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--step", type=int, default=10_000)
    parser.add_argument("--unique-sessions", action="store_true", help="also run this variant")
    parser.add_argument("--concurrency", type=int, default=4, help="client threads")
    parser.add_argument("--skip-bare", action="store_true")
    args = parser.parse_args()

    runs: list[tuple[str, Callable[[int], list[str]], bool]] = [
        ("mockskill", lambda p: c.mockskill_cmd(p), False),
    ]
    if args.unique_sessions:
        runs.append(("mockskill, new session per request", lambda p: c.mockskill_cmd(p), True))
    if not args.skip_bare:
        runs.append(("bare Flask", lambda p: c.bare_cmd(p), False))

    results = {
        name: series(cmd, args.total, args.step, unique, args.concurrency)
        for name, cmd, unique in runs
    }

    client = f"Python raw sockets, {args.concurrency} threads"
    print(f"VmRSS (MB) of the server process; POST {c.ERROR_PATH} (503), client: {client}")
    print(c.machine())
    names = list(results)
    rows = []
    for i, (count, _) in enumerate(results[names[0]]):
        label = {
            -1: "first answer",
            0: "idle (1 s later)",
            ADMIN_POINT: f"after GET {ADMIN_PATH}",
        }.get(count, f"{count:,} requests")
        rows.append((label, *(f"{results[n][i][1] / 1024:.1f}" for n in names)))
    c.print_table(("point", *names), rows)
    for name in names:
        points = results[name]
        final = points[-1][1] / 1024
        idle = points[1][1] / 1024
        after_journal = [kb for n, kb in points if n >= 20_000]
        growth = (max(after_journal) - min(after_journal)) / 1024 if after_journal else 0.0
        verdict = "met" if final <= TARGET_MB else "MISSED"
        print(
            f"{name}: idle {idle:.1f} MB (target <= {TARGET_IDLE_MB:.0f} MB:"
            f" {'met' if idle <= TARGET_IDLE_MB else 'MISSED'});"
            f" {points[2][1] / 1024:.1f} MB once the admin app is built;"
            f" final {final:.1f} MB (target <= {TARGET_MB:.0f} MB: {verdict});"
            f" spread from 20k requests on: {growth:.1f} MB"
        )


if __name__ == "__main__":
    main()
