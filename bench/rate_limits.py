"""A rate-limited skill against the same skill without a limit, keep-alive (issue 29).

One ``mockskill serve`` process (in memory) with four skills answering the same JSON:
``plain`` has no limit; ``limited`` spends a token of a bucket so large it never
refuses (capacity and refill 1 000 000) and sends the IETF rate-limit headers, as the
bundled limits do; ``limited-quiet`` is the same bucket with ``headers: none`` (its
answers are the kept plan's); ``over-limit`` has a bucket of one token every 20 s, so
every request but the first is refused (429 ``RATE_LIMITED``, its body and headers
made per request). ``wrk -t2 -c32`` keep-alive sends each the same POST, in turn,
``--rounds`` times for ``--duration`` seconds; medians and the ratios to ``plain``
are printed (targets: limited >= 0.90, over-limit >= 1.0).

``--cpu N`` measures instead, in this process, the engine's CPU per request of each
skill (``LoopDispatcher.plan`` and ``played``, no socket, no loop; best of three): a
figure that does not move with the machine's load; so does ``--callgrind``, the
instructions per whole keep-alive request of each (the real server under valgrind, as
bench/callgrind_request.py counts them: (N2 run - N1 run) / (N2 - N1), one kept-alive
connection, the same POST). Run::

    python bench/rate_limits.py [--rounds 5 --duration 5] [--cpu 20000] [--callgrind]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

from mockskill import bundled_path

SCENARIO = """
name: bench-rate-limits
skills:
  - id: plain
    invoke:
      json: {result: ok}
  - id: limited
    rate_limit: {capacity: 1000000, refill: 1000000, headers: ietf}
    invoke:
      json: {result: ok}
  - id: limited-quiet
    rate_limit: {capacity: 1000000, refill: 1000000, headers: none}
    invoke:
      json: {result: ok}
  - id: over-limit
    rate_limit: {capacity: 1, refill: 0.05}
    invoke:
      json: {result: ok}
"""
BODY = '{"input": {"text": "hello world"}}'
WRK_LUA = f"""\
wrk.method = "POST"
wrk.body = '{BODY}'
wrk.headers["Content-Type"] = "application/json"
"""
SKILLS = ("plain", "limited", "limited-quiet", "over-limit")
TARGETS = {"limited": 0.90, "limited-quiet": 0.90, "over-limit": 1.0}


def run_wrk(port: int, skill: str, seconds: int, lua: str) -> float:
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", lua,
         f"http://{c.HOST}:{port}/skills/{skill}/invoke"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout  # fmt: skip
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    refused = 0 if non2xx is None else int(non2xx.group(1))
    # (over the limit, one request in 20 s is admitted: a run may hold one)
    expected = total - 1 <= refused <= total if skill == "over-limit" else refused == 0
    if "Socket errors" in out or not expected:
        raise RuntimeError(f"{skill}: unexpected answers:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def check_answers(port: int) -> None:
    """What is compared is what it says: the same body, the headers as the forms say."""
    for skill in SKILLS:
        request = c.request_bytes("POST", f"/skills/{skill}/invoke", port, BODY.encode())
        status, body = c.http_once(port, request)
        if skill == "over-limit":
            status, body = c.http_once(port, request)  # (the first took its one token)
            assert status == 429, (skill, status, body)
            assert json.loads(body)["error"]["code"] == "RATE_LIMITED"
        else:
            assert (status, json.loads(body)) == (200, {"result": "ok"}), (skill, status)


def cpu(iterations: int) -> dict[str, float]:
    """Microseconds of CPU per request in the engine alone (engine_hotpath.py's plan +
    played), best of three, per skill, after a warm-up that fills the journal."""
    from engine_hotpath import run

    from mockskill import Server, load_text
    from mockskill.server.dispatch import LoopDispatcher
    from mockskill.transport import Request

    server = Server(load_text(SCENARIO, "bench.yaml"), quiet=True)
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)
    best: dict[str, float] = {}
    try:
        for skill in SKILLS:
            body = BODY.encode()
            req = Request(
                method="POST",
                target=f"/skills/{skill}/invoke",
                version="1.1",
                headers=(
                    ("Host", "127.0.0.1:8080"),
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(body))),
                ),
                body=body,
                peer=("127.0.0.1", 50000),
                local=("127.0.0.1", 8080),
                time=time.time(),
                connection=1,
                index=1,
            )
            run(surface, req, server.state.capacity + 1000)  # warm: the journal full
            best[skill] = min(run(surface, req, iterations) for _ in range(3))
    finally:
        surface.close()
        server.engine.close()
    return best


def instructions(skill: str, requests: int, warmup: int, where: Path) -> int:
    """Instructions of ``mockskill serve`` under callgrind answering *warmup* + *requests*
    POSTs to *skill* on one kept-alive connection (bench/callgrind_request.py's way)."""
    from callgrind_request import _connect, _exchange, _stop, _total

    port = c.free_port()
    out = where / f"callgrind.{skill}.{requests}.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    cmd += ["-m", "mockskill", "serve", "--port", str(port), "--quiet", "--journal-size", "1000"]
    expected = 429 if skill == "over-limit" else 200
    with c.scenario_file(SCENARIO) as path:
        proc = subprocess.Popen(
            [*cmd, path],
            cwd=str(c.BENCH_DIR),
            env=c.valgrind_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            request = (
                f"POST /skills/{skill}/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}"
            ).encode()
            pending = bytearray()
            with _connect(port, time.monotonic() + 600, proc) as sock:
                for n in range(warmup + requests):
                    status = _exchange(sock, request, pending)
                    if status != expected and not (skill == "over-limit" and n == 0):
                        raise RuntimeError(f"{skill}: a {status}, not a {expected}")
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _total(out)


def callgrind(n1: int, n2: int, warmup: int) -> dict[str, float]:
    """Instructions per request of each skill: (N2 run - N1 run) / (N2 - N1)."""
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mockskill-callgrind-") as tmp:
        for skill in SKILLS:
            low = instructions(skill, n1, warmup, Path(tmp))
            high = instructions(skill, n2, warmup, Path(tmp))
            per[skill] = (high - low) / (n2 - n1)
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--cpu", type=int, default=0, help="in-process CPU, N requests each")
    parser.add_argument("--callgrind", action="store_true", help="instructions per request")
    parser.add_argument("--n1", type=int, default=500)
    parser.add_argument("--n2", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=1200)
    args = parser.parse_args()
    print(c.machine())
    if args.callgrind:
        per = callgrind(args.n1, args.n2, args.warmup)
        c.print_table(
            ["skill", "instructions / keep-alive request", "plain / it", "target"],
            [[s, f"{per[s]:,.0f}", f"{per['plain'] / per[s]:.2f}", _target(s)] for s in SKILLS],
        )
        return
    if args.cpu:
        best = cpu(args.cpu)
        c.print_table(
            ["skill", "engine CPU µs / request (best of 3)", "plain / it"],
            [[s, f"{best[s]:.1f}", f"{best['plain'] / best[s]:.2f}"] for s in SKILLS],
        )
        return
    results: dict[str, list[float]] = {skill: [] for skill in SKILLS}
    with tempfile.TemporaryDirectory(prefix="mockskill-bench-") as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        bundled = str(bundled_path())  # (the server is ready when its translate skill answers)
        with (
            c.scenario_file(SCENARIO) as path,
            c.serving(lambda port: c.mockskill_cmd(port, [bundled, path])) as served,
        ):
            check_answers(served.port)
            for skill in SKILLS:  # warm-up: the kept plans, the loop's first requests
                run_wrk(served.port, skill, 1, lua)
            for round_ in range(args.rounds):
                # Alternated: each round in the other order, so a drift of the machine's
                # load falls on every skill alike.
                for skill in SKILLS if round_ % 2 == 0 else reversed(SKILLS):
                    results[skill].append(run_wrk(served.port, skill, args.duration, lua))
    medians = {skill: c.median(runs) for skill, runs in results.items()}
    c.print_table(
        ["skill", "req/s (median)", "/ plain", "target", "runs"],
        [
            [
                s,
                f"{medians[s]:.0f}",
                f"{medians[s] / medians['plain']:.2f}",
                _target(s),
                " ".join(f"{r:.0f}" for r in results[s]),
            ]
            for s in SKILLS
        ],
    )


def _target(skill: str) -> str:
    return f">= {TARGETS[skill]:.2f}" if skill in TARGETS else ""


if __name__ == "__main__":
    main()
