"""Time from process start to the first correct response (target: <= 250 ms, issue 13).

Each round spawns, in turn, ``python -m mockskill serve --port P --quiet``,
the ``mockskill`` console script, and the bare Flask baseline
(bench/bare_flask.py), and polls ``GET /skills/translate`` every millisecond
(new connection each time) until it answers 200 with the right JSON; the
time is taken from just before ``Popen`` to that answer. Between rounds the
server gets SIGTERM. For scale, ``python -c pass`` (interpreter start and
exit) is timed too, and the in-process ``Server(...).start()`` after import.

Besides the wall time, each start's CPU time up to the first answer is read
from ``/proc/PID/task/*/schedstat`` (every thread of the server, in ns): the
machine's other work stretches the wall time, much less the CPU time. The
ratio column is the median over bare Flask's median in the same condition.

**Bytecode.** With ``PYTHONDONTWRITEBYTECODE=1`` in the environment and an
editable install (no ``__pycache__`` in the source tree), every start
compiles mockskill's ~13 000 lines again, while Flask's compiled bytecode
came with its wheel: that is not what an installed mockskill does (pip
compiles it; the Docker image does too). So the mockskill and bare Flask
rows are measured twice: as the environment has it, and with the bytecode
cached (``PYTHONPYCACHEPREFIX`` set to a temporary folder, written by one
discarded start of each first). The header says which case the first
rows are.

**The reference.** The issue asked for 250 ms when the server of its day
took 230 ms here, and this machine's speed drifts by 1.3-2 x between hours
(bare Flask's cached start has read 141 ms and 333 ms on different days). So
the server of the issue's day (``--reference``, default ``2efc3b9``, taken
from this repository's history with ``git archive`` into a temporary folder
and started with ``PYTHONPATH`` at it, its bytecode cached like the rest) is
started in the same rounds, and the verdict is the brief's ratio: a
mockskill row's p90 at most 250/230 of the reference's p90 in the same run.
The absolute 250 ms is printed beside it. Without git or that commit (a
shallow clone) the reference row is left out and only the absolute verdict
is given.

Run::

    python bench/startup.py [--rounds 15] [--reference REV]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import _common as c

TARGET_MS = 250.0
"""Issue 13 (was 300 ms): p90 of the mockskill variants."""
REFERENCE_REV = "2efc3b9"
"""The commit of the day issue 13 was filed, whose server started in "today 230 ms"."""
REFERENCE_MS = 230.0
"""That server's start-up as the issue measured it: the bound is TARGET_MS / REFERENCE_MS of it."""


def time_python_floor() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def time_in_process() -> float:
    """Server(...).start() and the first answer, in a fresh interpreter, after imports."""
    code = (
        f"import time, sys; sys.path.insert(0, {str(c.BENCH_DIR)!r}); import _common as c\n"
        "from mockskill import Server\n"
        "t = time.perf_counter(); s = Server(port=0, quiet=True).start()\n"
        "c.wait_ready(s.port, time.monotonic() + 10); print(time.perf_counter() - t); s.stop()\n"
    )
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=c.BENCH_DIR)
    return float(out.stdout.strip())


def cpu_s(pid: int) -> float:
    """CPU seconds the process's threads have run so far (``/proc/PID/task/*/schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):  # a thread that ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def bytecode_state() -> str:
    """Whether a plain start of mockskill finds its modules compiled, in words."""
    spec = find_spec("mockskill")
    if spec is None or spec.origin is None:
        return "mockskill not found"
    package = Path(spec.origin).parent
    cached = any(package.rglob("__pycache__/*.pyc"))
    if sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"):
        if not cached:
            return "compiles mockskill at every start (PYTHONDONTWRITEBYTECODE set, no __pycache__)"
        return "PYTHONDONTWRITEBYTECODE set, mockskill's __pycache__ present"
    return "bytecode written and read as usual"


def with_cache(cmd: list[str], folder: str) -> list[str]:
    """*cmd* reading and writing bytecode under *folder* (``env`` execs, so the pid is Python's)."""
    return ["env", "-u", "PYTHONDONTWRITEBYTECODE", f"PYTHONPYCACHEPREFIX={folder}", *cmd]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="starts of each server")
    parser.add_argument(
        "--reference",
        default=REFERENCE_REV,
        help="commit whose server is the same-run reference ('' for none)",
    )
    args = parser.parse_args()

    cache = tempfile.mkdtemp(prefix="mockskill-bench-pyc-")
    old = tempfile.mkdtemp(prefix="mockskill-bench-reference-")
    reference = (
        c.from_history(args.reference, ["mockskill", "scenarios"], old) if args.reference else None
    )
    bare = "bare Flask (bench/bare_flask.py)"
    bare_cached = "bare Flask, bytecode cached"
    reference_name = f"the issue's day's serve ({args.reference}), bytecode cached"
    variants: dict[str, Callable[[int], list[str]]] = {
        "python -m mockskill serve": lambda p: c.mockskill_cmd(p),
        "mockskill serve (console script)": lambda p: c.mockskill_cmd(p, console_script=True),
        bare: lambda p: c.bare_cmd(p),
        "python -m mockskill serve, bytecode cached": lambda p: with_cache(
            c.mockskill_cmd(p), cache
        ),
        "mockskill serve (console script), bytecode cached": lambda p: with_cache(
            c.mockskill_cmd(p, console_script=True), cache
        ),
        bare_cached: lambda p: with_cache(c.bare_cmd(p), cache),
    }
    if reference is not None:
        variants[reference_name] = lambda p: with_cache(
            c.with_pythonpath(c.mockskill_cmd(p), reference), cache
        )
    baseline = {name: bare_cached if "cached" in name else bare for name in variants}
    for name, cmd in variants.items():
        if "cached" in name:  # one discarded start writes the bytecode
            port = c.free_port()
            c.stop(c.spawn(cmd(port), port).proc)
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    times["python -c pass (floor)"] = []
    times["Server().start() in-process, after import"] = []
    for _ in range(args.rounds):  # alternate, so drift hits all alike
        for name, cmd in variants.items():
            port = c.free_port()
            spawned = c.spawn(cmd(port), port)
            cpu[name].append(cpu_s(spawned.proc.pid))
            times[name].append(spawned.ready_s)
            c.stop(spawned.proc)
        times["python -c pass (floor)"].append(time_python_floor())
        times["Server().start() in-process, after import"].append(time_in_process())
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)

    print(f"start-up to first correct GET {c.DESCRIBE_PATH}; {args.rounds} runs each")
    print(c.machine())
    print(f"bytecode in the first rows: {bytecode_state()}")
    bound = None
    if reference is not None:
        bound = c.percentile([v * 1000 for v in times[reference_name]], 90) * (
            TARGET_MS / REFERENCE_MS
        )
        print(
            f"same-run bound: the reference's p90 x {TARGET_MS:.0f}/{REFERENCE_MS:.0f}"
            f" = {bound:.0f} ms (the issue: {TARGET_MS:.0f} ms when its day's server took"
            f" {REFERENCE_MS:.0f}); judged on the bytecode-cached rows, as installed"
        )
    rows = []
    for name, values in times.items():
        ms = [v * 1000 for v in values]
        absolute = ratio = cpu_ms = same_run = ""
        judged = name.startswith(("python -m mockskill", "mockskill serve"))
        if judged:
            absolute = "met" if c.percentile(ms, 90) <= TARGET_MS else "MISSED"
        if judged and bound is not None and "cached" in name:
            same_run = "met" if c.percentile(ms, 90) <= bound else "MISSED"
        if name in baseline:
            ratio = f"{c.median(values) / c.median(times[baseline[name]]):.2f}"
            cpu_ms = f"{c.median(cpu[name]) * 1000:.0f}"
        rows.append(
            (
                name,
                f"{c.median(ms):.0f}",
                f"{c.percentile(ms, 90):.0f}",
                f"{min(ms):.0f}",
                f"{max(ms):.0f}",
                cpu_ms,
                ratio,
                same_run,
                absolute,
            )
        )
    c.print_table(
        (
            "command",
            "median ms",
            "p90 ms",
            "min ms",
            "max ms",
            "CPU ms (median)",
            "/ bare Flask",
            "p90 <= same-run bound",
            f"p90 <= {TARGET_MS:.0f} ms",
        ),
        rows,
    )


if __name__ == "__main__":
    main()
