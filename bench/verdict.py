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
report needs); and the report of main before the verdict (``--reference``,
from ``git archive``), filled alike, in the same rounds. Medians and p90
(target: the verdict <= 100 ms). The client shares the machine's cores with
the servers. Run::

    python bench/verdict.py [--rounds 20 --entries 10000 --reference REV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import tempfile
from pathlib import Path

import _common as c
from verify import admin

SESSION = "bench-verdict"
REFERENCE = "e1fc88d"
"""main before the verdict (session 19): its report, beside this tree's, shows what the
audit's cuts gained (its journal, its report's shape and its rules are this tree's)."""
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
    parser.add_argument(
        "--reference",
        default=REFERENCE,
        help="the commit whose report runs beside (default: main before the verdict); '' none",
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        path = stack.enter_context(c.scenario_file(SCENARIO))
        servers = {"": stack.enter_context(c.serving(lambda p: c.mockskill_cmd(p, [path])))}
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="mockskill-ref-"))
        if args.reference and c.from_history(args.reference, ["mockskill"], folder):
            command = lambda p: c.with_pythonpath(c.mockskill_cmd(p, [path]), folder)  # noqa: E731
            servers[args.reference] = stack.enter_context(c.serving(command))
        rows = [row for retrying in (False, True) for row in measure(servers, args, retrying)]
    headers = ["session", "server", "asked", "answer", "body", "median ms", "p90 ms", "CPU ms"]
    c.print_table(headers, rows)
    print()
    print(c.machine())


def measure(
    servers: dict[str, c.Spawned], args: argparse.Namespace, retrying: bool
) -> list[list[str]]:
    """The rows of one shape of session: each server's journal filled alike, then the
    verdict (this tree's) and the report (every server's) asked in turn, round after round."""
    asked = [("", "verdict", f"/__admin/verdict?session={SESSION}")]
    asked += [(name, "report", f"/__admin/report?session={SESSION}") for name in servers]
    statuses = {}
    for server in servers.values():
        status, _, _ = admin(server.port, "POST", "/__admin/reset?all=true")
        assert status == 200, status
        fill(server.port, args.entries, retrying)
    for name, what, target in asked:  # warm-up (it builds the admin app too)
        status, answer, _ = admin(servers[name].port, "GET", target)
        findings = json.loads(answer).get("findings")
        if findings is None:
            findings = json.loads(answer)["sessions"][0]["findings"]
        statuses[name, what] = f"{status} ({len(findings)} findings)"
    times: dict[tuple[str, str], list[float]] = {(n, w): [] for n, w, _ in asked}
    cpu: dict[tuple[str, str], list[float]] = {(n, w): [] for n, w, _ in asked}
    lengths: dict[tuple[str, str], int] = {}
    for _ in range(args.rounds):
        for name, what, target in asked:
            pid = servers[name].proc.pid
            before = cpu_ms(pid)
            _, body, took = admin(servers[name].port, "GET", target)
            cpu[name, what].append(cpu_ms(pid) - before)
            times[name, what].append(took)
            lengths[name, what] = len(body)
    return [
        [
            "findings" if retrying else "clean",
            name or "this tree",
            what,
            statuses[name, what],
            f"{lengths[name, what] / 1000:.0f} kB",
            f"{c.median(times[name, what]):.1f}",
            f"{c.percentile(times[name, what], 90):.1f}",
            f"{c.median(cpu[name, what]):.1f}",
        ]
        for name, what, _ in asked
    ]


if __name__ == "__main__":
    main()
