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
import tempfile
from pathlib import Path

import _common as c
from _per_request import engine_cpu, instructions_per_request

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


HEADERS: tuple[tuple[str, str], ...] = (("X-Trace", "t-0123456789"),)
"""The headers each request adds (besides Host, Content-Type and Content-Length)."""


def cpu(iterations: int) -> dict[str, float]:
    """Microseconds of CPU per request in the engine alone, best of three, per skill."""
    return engine_cpu(SCENARIO, SKILLS, BODY.encode(), HEADERS, iterations)


def callgrind(n1: int, n2: int, warmup: int) -> dict[str, float]:
    """Instructions per request of each skill: (N2 run - N1 run) / (N2 - N1)."""
    return instructions_per_request(
        SCENARIO, SKILLS, BODY, HEADERS, lambda skill, n: 200, n1, n2, warmup
    )


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


def _ok(skill: str, n: int) -> int:
    """Every answer is a 200."""
    return 200
