"""What a request that matches nothing costs beside one that matches (issue 26, item 9).

One mockskill server (``python -m mockskill serve``) on a scenario of 300 free
routes (``/api/v1/resource<k>/<int:id>``, GET or PUT). A keep-alive client
on one connection sends, in turn, ``--requests`` GETs of a route
(``/api/v1/resource150/7``: matched) and of a path one letter off
(``/api/v1/resourc150/7``: a 404 with its near misses); the mean wall time
of a request of each, and their ratio (target <= 20). ``--reference REV``
also serves the package as commit REV had it, the same way, in the same run
(by default the commit before the near misses were indexed). Run::

    python bench/near_misses.py [--requests 2000 --rounds 3 --reference REV]
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import time
from collections.abc import Callable

import _common as c

ROUTES = 300
MATCHED = "/api/v1/resource150/7"
UNMATCHED = "/api/v1/resourc150/7"
REFERENCE = "5f3bd0e"
"""The commit before the near misses were indexed (each miss measured every route)."""


def scenario() -> str:
    routes = "".join(
        f"  - path: /api/v1/resource{k}/<int:id>\n    method: [GET, PUT]\n"
        f"    steps: [{{json: {{ok: {k}}}}}]\n"
        for k in range(ROUTES)
    )
    # (the translate skill: what the harness asks to know the server is up)
    return "name: near-misses-bench\nskills:\n  - id: translate\nroutes:\n" + routes


def mean_request_ms(port: int, path: str, count: int, expected: int) -> float:
    """Mean wall time of *count* sequential keep-alive GETs of *path* (each answer read
    whole by its Content-Length)."""
    request = f"GET {path} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n\r\n".encode()
    with socket.create_connection((c.HOST, port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")
        started = time.perf_counter()
        for _ in range(count):
            s.sendall(request)
            status = int(reader.readline().split()[1])
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            if status != expected:
                raise RuntimeError(f"GET {path}: {status}, not {expected}")
        return (time.perf_counter() - started) / count * 1000


def measure(cmd_for_port: Callable[[int], list[str]], args: argparse.Namespace) -> list[float]:
    """Matched ms, unmatched ms: the medians of the rounds."""
    matched, unmatched = [], []
    with c.serving(cmd_for_port) as server:
        mean_request_ms(server.port, MATCHED, 200, 200)  # warm-up (and the first miss's index)
        mean_request_ms(server.port, UNMATCHED, 20, 404)
        for _ in range(args.rounds):
            matched.append(mean_request_ms(server.port, MATCHED, args.requests, 200))
            count = max(20, args.requests // 10)
            unmatched.append(mean_request_ms(server.port, UNMATCHED, count, 404))
    return [c.median(matched), c.median(unmatched)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="matched ones per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference", default=REFERENCE, help="a commit; '' for none")
    args = parser.parse_args()
    rows = []
    with c.scenario_file(scenario()) as path, tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, Callable[[int], list[str]]] = {
            "this tree": lambda port: c.mockskill_cmd(port, [path])
        }
        old = args.reference and c.from_history(args.reference, ["mockskill"], tmp)
        if old:
            runs[f"commit {args.reference}"] = lambda port: c.with_pythonpath(
                c.mockskill_cmd(port, [path]), old
            )
        for name, cmd in runs.items():
            matched, unmatched = measure(cmd, args)
            ratio = unmatched / matched
            verdict = "met" if ratio <= 20 else "MISSED"
            rows.append([name, f"{matched:.3f}", f"{unmatched:.3f}", f"{ratio:.1f} ({verdict})"])
    print(f"{ROUTES} free routes, one keep-alive connection, {args.rounds} rounds")
    print(c.machine())
    c.print_table(["server", "matched ms", "unmatched ms", "ratio (target <= 20)"], rows)


if __name__ == "__main__":
    main()
