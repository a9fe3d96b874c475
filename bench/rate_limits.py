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
import tempfile
from pathlib import Path

import _common as c
from _per_request import engine_cpu, instructions_per_request

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


HEADERS: tuple[tuple[str, str], ...] = ()
"""The headers each request adds (besides Host, Content-Type and Content-Length)."""


def cpu(iterations: int) -> dict[str, float]:
    """Microseconds of CPU per request in the engine alone, best of three, per skill."""
    return engine_cpu(SCENARIO, SKILLS, BODY.encode(), HEADERS, iterations)


def _expected(skill: str, n: int) -> int:
    """Over the limit the first request takes the one token; every other is refused."""
    return 429 if skill == "over-limit" and n > 0 else 200


def callgrind(n1: int, n2: int, warmup: int) -> dict[str, float]:
    """Instructions per request of each skill: (N2 run - N1 run) / (N2 - N1)."""
    return instructions_per_request(SCENARIO, SKILLS, BODY, HEADERS, _expected, n1, n2, warmup)


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


def _expected(skill: str, n: int) -> int | None:
    """Over the limit, every request is refused but the first (it takes the one token)."""
    if skill != "over-limit":
        return 200
    return None if n == 0 else 429
