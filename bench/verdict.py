"""``GET /__admin/verdict`` over a full journal: how long one session's verdict takes (issue 32).

One ``python -m mockskill serve`` process (the default ``--journal-size``,
10 000 entries) on the scenario below. Its journal is filled with 10 000
keep-alive POSTs of one session (the worst case: every entry is the
session's), in two shapes:

- ``clean``: 10 000 invokes answered at once (a body of their own each), so
  10 000 retry chains of one attempt and a 200;
- ``findings``: 5 000 operations each failing once with retry advice and
  retried at once, so 5 000 ``retry-too-soon`` findings and a 409 listing them.

Then the verdict is asked ``--rounds`` times (after one warm-up, which also
builds the admin app), timed from the first byte sent to the last byte of the
answer read, with the server's CPU time for it (the sum of its threads'
``schedstat``: less at the mercy of other load on the machine than the wall
time); and, in the same rounds, the same session's
``GET /__admin/report?session=S`` (what a gate read before: the verdict
judges with the report's rules, without drawing what only a reader of the
report needs). Medians and p90 (target: the verdict <= 100 ms). The client
shares the machine's cores with the server. Run::

    python bench/verdict.py [--rounds 20 --entries 10000]
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import _common as c
from verify import admin

SESSION = "bench-verdict"
SCENARIO = """\
name: bench-verdict
description: bench/verdict.py's consumer, clean or retrying too soon.
skills:
  - id: translate  # what _common's readiness poll asks for
  - id: plain
    invoke:
      json: {ok: true}
  - id: flaky
    invoke:
      steps:
        - error: ENDPOINT_UNREACHABLE
          retry: {suggested_delay_ms: 1000, max_attempts: 3}
        - json: {ok: true}
      end: cycle
"""


def fill(port: int, entries: int, retrying: bool) -> None:
    """*entries* keep-alive POSTs on one connection, each answer read whole: each to
    ``plain`` with a body of its own, or (*retrying*) to ``flaky``, each body twice."""
    skill = "flaky" if retrying else "plain"
    with socket.create_connection((c.HOST, port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")
        for n in range(entries):
            sent = json.dumps({"input": {"n": n // 2 if retrying else n}}).encode()
            s.sendall(
                f"POST /skills/{skill}/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n".encode()
                + f"Content-Type: application/json\r\nMockskill-Session: {SESSION}\r\n".encode()
                + f"Content-Length: {len(sent)}\r\n\r\n".encode()
                + sent
            )
            reader.readline()
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)


def cpu_ms(pid: int) -> float:
    """The CPU time process *pid* has used so far, every thread's, in milliseconds."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    rows = []
    verdict_path = f"/__admin/verdict?session={SESSION}"
    report_path = f"/__admin/report?session={SESSION}"
    with c.scenario_file(SCENARIO) as path, c.serving(lambda p: c.mockskill_cmd(p, [path])) as s:
        for retrying in (False, True):
            status, _, _ = admin(s.port, "POST", "/__admin/reset?all=true")
            assert status == 200, status
            fill(s.port, args.entries, retrying)
            status, answer, _ = admin(s.port, "GET", verdict_path)  # warm-up
            size = len(json.loads(answer).get("findings", []))
            times: dict[str, list[float]] = {"verdict": [], "report": []}
            cpu: dict[str, list[float]] = {"verdict": [], "report": []}
            lengths: dict[str, int] = {}
            for _ in range(args.rounds):
                for name, target in (("verdict", verdict_path), ("report", report_path)):
                    before = cpu_ms(s.proc.pid)
                    got, body, took = admin(s.port, "GET", target)
                    cpu[name].append(cpu_ms(s.proc.pid) - before)
                    assert got == (status if name == "verdict" else 200), got
                    times[name].append(took)
                    lengths[name] = len(body)
            for name in ("verdict", "report"):
                rows.append(
                    [
                        "findings" if retrying else "clean",
                        name,
                        f"{status if name == 'verdict' else 200} ({size} findings)",
                        f"{lengths[name] / 1000:.0f} kB",
                        f"{c.median(times[name]):.1f}",
                        f"{c.percentile(times[name], 90):.1f}",
                        f"{c.median(cpu[name]):.1f}",
                    ]
                )
    headers = ["session", "asked", "answer", "body", "median ms", "p90 ms", "server CPU ms"]
    c.print_table(headers, rows)
    print()
    print(c.machine())


if __name__ == "__main__":
    main()
