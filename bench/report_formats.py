"""``mockskill report --format``: each format's time beside the JSON report's (issue 32).

One ``python -m mockskill serve`` process, its journal filled with ``--entries`` (3 000)
requests over ``--sessions`` (20) sessions, each a consumer that breaks rules the way
the issue's CI would catch it: ``retry-down`` hammered (retry-too-soon,
too-many-attempts), ``auth-required`` retried unchanged, ``retry-recovers`` and
``translate`` chains that end well. Then, for every format in turn, round after round
(the formats alternate within a round, each round starting one format later, so drift
on the shared cores hits them alike):

- ``command``: ``python -m mockskill report URL --format F`` in a process, its output
  read whole, as CI runs it (interpreter start, fetch, audit on the server, writing);
  ``its CPU``: that process's user + system time (the server's audit not in it), which
  the other loads on shared cores disturb less than the wall time;
- ``fetch + write``: :func:`mockskill.cli.report.fetch` and the writer in this process,
  the command's work without the interpreter's start;
- ``write``: the writer alone on the fetched report (``json``: the same dumps the
  command prints).

Medians, and each format's ratio to ``json`` in the same column (target: every format's
command within 1.2 x json's). Run::

    python bench/report_formats.py [--rounds 10 --entries 3000 --sessions 20]
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import time

import _common as c

from mockskill.audit.formats import FORMATS
from mockskill.cli.report import fetch

# What each session's consumer sends, in order: (skill, times).
PLAYS = (("retry-down", 4), ("auth-required", 2), ("retry-recovers", 3), ("translate", 6))


def fill(port: int, entries: int, sessions: int) -> int:
    """Send about *entries* requests over *sessions* sessions on one keep-alive connection;
    the number sent."""
    per_session = sum(n for _, n in PLAYS)
    sent = 0
    with socket.create_connection((c.HOST, port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")
        while sent + per_session <= entries:
            session = f"bench-{sent // per_session % sessions}"
            for skill, times in PLAYS:
                for _ in range(times):
                    s.sendall(
                        f"POST /skills/{skill}/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
                        f"Mockskill-Session: {session}\r\nContent-Type: application/json\r\n"
                        "Content-Length: 2\r\n\r\n{}".encode()
                    )
                    reader.readline()
                    length = 0
                    while (line := reader.readline()) not in (b"\r\n", b""):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    reader.read(length)
                    sent += 1
    return sent


def command_ms(url: str, form: str) -> tuple[float, float]:
    """The command's wall time and its process's CPU time (user + system), in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mockskill", "report", url, "--format", form],
        capture_output=True,
        check=False,
    )
    took = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout:
        raise RuntimeError(f"--format {form} exited {done.returncode}: {done.stderr!r}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return took, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    forms = list(FORMATS)
    times: dict[str, dict[str, list[float]]] = {
        f: {"command": [], "its CPU": [], "fetch + write": [], "write": []} for f in forms
    }
    with c.serving(lambda port: [*c.mockskill_cmd(port), "--journal-size", "20000"]) as server:
        url = f"http://{c.HOST}:{server.port}"
        sent = fill(server.port, args.entries, args.sessions)
        got = fetch(url)  # (and the admin app is built)
        findings = sum(len(s["findings"]) for s in got["sessions"])
        chains = sum(len(s["chains"]) for s in got["sessions"])
        sizes = {f: len(FORMATS[f](got, url)) for f in forms}
        for round_ in range(args.rounds):
            # Each round starts one format later: no format always follows the same one.
            for form in forms[round_ % len(forms) :] + forms[: round_ % len(forms)]:
                wall, cpu = command_ms(url, form)
                times[form]["command"].append(wall)
                times[form]["its CPU"].append(cpu)
                started = time.perf_counter()
                FORMATS[form](fetch(url), url)
                times[form]["fetch + write"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                FORMATS[form](got, url)
                times[form]["write"].append((time.perf_counter() - started) * 1000)
    print(
        f"\n{sent} requests in {len(got['sessions'])} sessions: {chains} chains,"
        f" {findings} findings; {args.rounds} rounds, medians in ms\n"
    )
    columns = ("command", "its CPU", "fetch + write", "write")
    base = {col: c.median(times["json"][col]) for col in columns}
    rows = []
    for form in forms:
        row: list[object] = [form, f"{sizes[form] / 1024:.0f} KiB"]
        for col in columns:
            ms = c.median(times[form][col])
            row += [f"{ms:.1f}", f"{ms / base[col]:.2f}"]
        rows.append(row)
    headers = ["format", "output"]
    for col in columns:
        headers += [col, "x json"]
    c.print_table(headers, rows)
    worst = max(c.median(times[f]["command"]) / base["command"] for f in forms)
    print(f"\nworst command / json: {worst:.2f} (target <= 1.2)")
    print(c.machine())


if __name__ == "__main__":
    main()
