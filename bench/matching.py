"""Requests per second through an endpoint's cases: 20 cases against one (issue 15).

One mockskill server (``python -m mockskill serve`` on a scenario written for
the run) with four invoke endpoints, each answering ``{"ok": N}``:

- ``plain``: no cases (the sequence alone: what every request cost before);
- ``one-case``: one case, ``body: {/input/n: 1}``;
- ``twenty-cases``: 20 cases, ``body: {/input/n: k}`` for k = 1..20, and the
  request sends n = 20, so that it is tried against all twenty (19 miss,
  the last plays). Equalities on one place are one dict lookup
  (``engine/conditions.py``'s ``Picker``), so this is also the best case;
- ``twenty-regexes``: 20 cases, ``body: {/input/n: {matches: '^k$'}}``, the
  request sends "20": every case's test runs, the worst case.

Each gets ``wrk -t2 -c32`` keep-alive POSTs with the body
``{"input": {"n": ...}}`` for ``--duration`` seconds, in turn, ``--rounds``
times; medians and the ratios of each twenty to one case (target >= 80 %).
The client shares the 2 cores: the ratio counts, not the absolute figures.
Run::

    python bench/matching.py [--rounds 3 --duration 5]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import _common as c

CASES = 20
ENDPOINTS = {"plain": "1", "one-case": "1", "twenty-cases": "20", "twenty-regexes": '"20"'}
"""Each endpoint, and the n its requests send (as JSON)."""


def scenario() -> str:
    twenty = "".join(
        f"        - when: {{body: {{/input/n: {k}}}}}\n          json: {{ok: {k}}}\n"
        for k in range(1, CASES + 1)
    )
    regexes = "".join(
        f"        - when: {{body: {{/input/n: {{matches: '^{k}$'}}}}}}\n"
        f"          json: {{ok: {k}}}\n"
        for k in range(1, CASES + 1)
    )
    return (
        "name: matching-bench\nskills:\n  - id: translate\n"
        "  - id: plain\n    invoke:\n      json: {ok: 1}\n"
        "  - id: one-case\n    invoke:\n      cases:\n"
        "        - when: {body: {/input/n: 1}}\n          json: {ok: 1}\n"
        "  - id: twenty-cases\n    invoke:\n      cases:\n"
        + twenty
        + "  - id: twenty-regexes\n    invoke:\n      cases:\n"
        + regexes
    )


def wrk(port: int, skill: str, n: str, seconds: int, lua_dir: Path) -> float:
    lua = lua_dir / f"{skill}.lua"
    lua.write_text(
        'wrk.method = "POST"\n'
        f'wrk.body = \'{{"input": {{"n": {n}}}}}\'\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", str(lua),
         f"http://{c.HOST}:{port}/skills/{skill}/invoke"],
        check=True, capture_output=True, text=True, timeout=seconds + 30,
    ).stdout  # fmt: skip
    if "Non-2xx" in out:
        raise RuntimeError(f"{skill}: not every answer was a 200:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in ENDPOINTS}
    with (
        c.scenario_file(scenario()) as path,
        c.serving(lambda port: c.mockskill_cmd(port, [path])) as server,
        tempfile.TemporaryDirectory() as lua_dir,
    ):
        for name, n in ENDPOINTS.items():  # a short warm-up each
            wrk(server.port, name, n, 1, Path(lua_dir))
        for _ in range(args.rounds):
            for name, n in ENDPOINTS.items():
                runs[name].append(wrk(server.port, name, n, args.duration, Path(lua_dir)))
    print(f"keep-alive POST /skills/<id>/invoke, wrk -t2 -c32, {args.rounds} x {args.duration} s")
    print(c.machine())
    medians = {name: c.median(values) for name, values in runs.items()}
    c.print_table(
        ["endpoint", "median req/s", "runs req/s"],
        [[name, f"{medians[name]:.0f}", " ".join(f"{v:.0f}" for v in runs[name])]
         for name in ENDPOINTS],
    )  # fmt: skip
    for twenty in ("twenty-cases", "twenty-regexes"):
        ratio = medians[twenty] / medians["one-case"]
        verdict = "met" if ratio >= 0.8 else "MISSED"
        print(f"{twenty} / one case: {ratio:.3f} (target >= 0.80: {verdict})")
    print(f"one case / no cases: {medians['one-case'] / medians['plain']:.3f}")


if __name__ == "__main__":
    main()
