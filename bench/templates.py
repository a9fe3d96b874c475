"""A templated answer against the same answer written out, keep-alive (issue 28).

One ``mockskill serve`` process with two skills whose answers are the same JSON:
``templated`` makes it per request from five placeholders (a body pointer, a
header, a fresh id, the time, the session), ``plain`` has it written out (a
step planned once and kept, as every plain step is). ``wrk -t2 -c32``
keep-alive sends each the same POST (a small JSON body and an ``X-Trace``
header), in turn, ``--rounds`` times for ``--duration`` seconds; medians and
the ratio templated / plain are printed (target >= 0.85).

Two figures do not move with the machine's load: ``--cpu N`` measures, in this
process, the engine's CPU per request for each (``LoopDispatcher.plan`` and
``played``, no socket, no loop), best of three; ``--callgrind`` the
instructions per whole keep-alive request of each (the real server under
valgrind, as bench/callgrind_request.py counts them: (N2 run - N1 run) /
(N2 - N1), one kept-alive connection, the same POST). Run::

    python bench/templates.py [--rounds 3 --duration 5] [--cpu 20000] [--callgrind]
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
name: bench-templates
skills:
  - id: templated
    invoke:
      json:
        result:
          text: "{{request.body/input/text}}"
          trace: "{{request.header.X-Trace}}"
          id: "{{id}}"
          at: "{{now}}"
          session: "{{session}}"
  - id: plain
    invoke:
      json:
        result:
          text: "hello world"
          trace: "t-0123456789"
          id: "0b4e7b1e-5c8a-4f7e-9d2a-6f1c3e5a7b9d"
          at: "2026-12-03T21:00:00.000Z"
          session: "default"
"""
BODY = '{"input": {"text": "hello world"}}'
WRK_LUA = f"""\
wrk.method = "POST"
wrk.body = '{BODY}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Trace"] = "t-0123456789"
"""
SKILLS = ("plain", "templated")


def run_wrk(port: int, skill: str, seconds: int, lua: str) -> float:
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            "-c32",
            f"-d{seconds}s",
            "-s",
            lua,
            f"http://{c.HOST}:{port}/skills/{skill}/invoke",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"every answer should be a 200:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def same_answers(port: int) -> None:
    """Both skills answer alike (bar the id and the time): what is compared is comparable."""
    answers = {}
    for skill in SKILLS:
        request = c.request_bytes("POST", f"/skills/{skill}/invoke", port, BODY.encode())
        request = request.replace(b"\r\n\r\n", b"\r\nX-Trace: t-0123456789\r\n\r\n", 1)
        status, body = c.http_once(port, request)
        assert status == 200, (skill, status, body)
        answers[skill] = json.loads(body)["result"]
    for answer in answers.values():
        answer.pop("id"), answer.pop("at")
    assert answers["plain"] == answers["templated"], answers


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
                    ("X-Trace", "t-0123456789"),
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
                f"Content-Type: application/json\r\nX-Trace: t-0123456789\r\n"
                f"Content-Length: {len(BODY)}\r\n\r\n{BODY}"
            ).encode()
            pending = bytearray()
            with _connect(port, time.monotonic() + 600, proc) as sock:
                for _ in range(warmup + requests):
                    if _exchange(sock, request, pending) != 200:
                        raise RuntimeError(f"{skill}: not a 200")
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
    parser.add_argument("--rounds", type=int, default=3)
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
            ["answer", "instructions / keep-alive request"],
            [[skill, f"{per[skill]:,.0f}"] for skill in SKILLS],
        )
        print(
            f"plain / templated (the throughput ratio at equal cost per instruction):"
            f" {per['plain'] / per['templated']:.2f} (target >= 0.85)"
        )
        return
    if args.cpu:
        best = cpu(args.cpu)
        c.print_table(
            ["answer", "engine CPU µs / request (best of 3)"],
            [[skill, f"{best[skill]:.1f}"] for skill in SKILLS],
        )
        print(f"templated / plain CPU: {best['templated'] / best['plain']:.2f}")
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
            same_answers(served.port)
            for skill in SKILLS:  # warm-up: the kept plans, the loop's first requests
                run_wrk(served.port, skill, 1, lua)
            for _ in range(args.rounds):
                for skill in SKILLS:
                    results[skill].append(run_wrk(served.port, skill, args.duration, lua))
    medians = {skill: c.median(runs) for skill, runs in results.items()}
    c.print_table(
        ["answer", "req/s (median)", "runs"],
        [[s, f"{medians[s]:.0f}", " ".join(f"{r:.0f}" for r in results[s])] for s in SKILLS],
    )
    ratio = medians["templated"] / medians["plain"]
    print(f"templated / plain: {ratio:.2f} (target >= 0.85)")


if __name__ == "__main__":
    main()
