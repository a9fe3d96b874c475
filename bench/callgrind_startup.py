"""Instructions from ``mockskill serve`` to its first answer, and where they go (issue 27).

The load-independent companion of bench/startup.py and bench/frozen.py's
start-up row: each install's console script (``VENV/bin/mockskill serve`` on
the bundled scenarios, bytecode cached as ``pip install`` leaves it) runs
under ``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``; once it answers
``GET /skills/translate`` with the right descriptor, its counts are dumped
(``callgrind_control -d``) and it is stopped. Printed per install: the
instructions to the first answer, and the share of them spent

- compiling source at run time (CPython's parser and compiler: the methods
  ``dataclasses`` and ``collections.namedtuple`` generate for each class,
  which 3.13's ``dataclasses`` generates in one ``exec`` per class where 3.11
  and 3.12 take one per method);
- in the cyclic garbage collector.

Run, with the installs bench/frozen.py makes (or any venv with mockskill)::

    python bench/callgrind_startup.py VENV [VENV ...] [--env NAME=VALUE]

``--env PYTHONMALLOC=malloc`` runs an old main whose console script would
otherwise execute itself again onto that allocator (valgrind follows no
exec here), so the figure leaves that second start out. Needs valgrind
(``apt-get install valgrind``); ~1 min per install.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import _common as c

PARTS = {
    "run-time compiling": ("Parser/peg_api.c:_PyParser_ASTFromString", "compile.c:_PyAST_Compile"),
    "cyclic GC": ("gcmodule.c:gc_collect_main",),
}
"""What the table splits out: C functions (their inclusive cost) by the part they make up."""


def first_answer(venv: Path, env: dict[str, str], where: Path) -> Path:
    """Run *venv*'s ``mockskill serve`` under callgrind up to its first answer: its dump."""
    port = c.free_port()
    out = where / "callgrind.out"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        str(venv / "bin" / "mockskill"),
        "serve",
        "--port",
        str(port),
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=str(c.BENCH_DIR),
        env={**c.valgrind_env(), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        request = c.request_bytes("GET", c.DESCRIBE_PATH, port)
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{venv}: the server exited with {proc.returncode}")
            try:
                if c.descriptor_ok(*c.http_once(port, request)):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{venv}: no first answer in 600 s")
            time.sleep(0.05)
        # Dumped now, so that the counts stop at the first answer, not at the stop.
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
        dumped = out.with_name(out.name + ".1")
        while not dumped.exists():
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait()
    return dumped


def total(out: Path) -> int:
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


def split(out: Path) -> dict[str, int]:
    """Inclusive instructions of each of :data:`PARTS` in *out* (outermost calls only)."""
    costs = c.callgrind_functions(out)
    parts = {}
    for part, functions in PARTS.items():
        # callgrind_annotate names a recursive function's inner cycles with a 'N suffix;
        # the plain name is its outermost calls' inclusive cost.
        parts[part] = sum(
            cost for name, cost in costs.items() if name.endswith(functions) and "'" not in name
        )
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venvs", nargs="+", type=Path, help="virtual environments with mockskill")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    print(f"# callgrind, `mockskill serve` to its first answer; env {env or '-'}; {c.machine()}")
    rows = []
    for venv in args.venvs:
        with tempfile.TemporaryDirectory(prefix="callgrind-startup-") as where:
            out = first_answer(venv, env, Path(where))
            whole, parts = total(out), split(out)
        version = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        cells = [f"{cost / 1e6:.1f} M ({cost / whole:.0%})" for cost in parts.values()]
        rows.append([str(venv), version, f"{whole / 1e6:.1f} M", *cells])
    c.print_table(["install", "Python", "instructions", *PARTS], rows)


if __name__ == "__main__":
    main()
