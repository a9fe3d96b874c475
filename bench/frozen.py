"""Issue 27's frozen targets, in one run, beside the old main (5f6c57a).

Issue 27 spends the room the speed targets left on simplicity, within bounds
it freezes against ``main`` as it was when it was filed. This script checks
all of them in one run and prints one table: each figure of this checkout,
the same figure of the reference taken in the same run, their ratio, the
target and PASS or FAIL (``recorded`` where the issue records without gating).

**What runs.** Both trees are installed as a user gets them: ``pip install .``
(not editable, bytecode compiled by pip) into a virtual environment per
Python version, under ``$MOCKSKILL_FROZEN_DIR`` (default ``/tmp``)
``/mockskill-frozen/``. The old main comes from this repository's history as a
detached worktree there (``git worktree add --detach``), made once; this
checkout is installed again at every run (its working tree, committed or
not). Every server is the install's console script, ``mockskill serve``, as
each was shipped: the old main's goes through its launcher (which executes
itself again onto ``PYTHONMALLOC=malloc``), this checkout's as it is. The
Python versions are ``python3`` and each other version ``pyproject.toml``
declares that ``.ci/pythons`` finds (the same search CI makes); one the old
main cannot install or serve on is said in the table, and compared nowhere.

**The figures** (load and start-up on ``python3``'s version unless said),
the two trees' loads taken in turn (the order flipped each round) so that
the machine's drift falls on both:

- keep-alive error step: ``wrk -t2 -c32`` on ``POST
  /skills/endpoint-unreachable/invoke`` (bench/keepalive.py's load), the
  medians: this checkout >= 0.90 x the old main, and >= WireMock warm (a JVM
  warmed by ``--warmup`` seconds of the same load, bench/_peers.py, measured
  in its own rounds and stopped before the trees' rounds);
- 1000 concurrent requests to a 1 s delay (bench/burst_peers.py's epoll
  client, at most 2000 connects in progress): worst wall <= 1.15 s, 0
  failures; 10 000 the same way: recorded;
- 10 000 hanging connections, three floods in a row on one server per tree
  (bench/hang_flood.py's round): RSS once the clients have gone and
  ``--settle`` seconds have passed, recorded; the third flood's within 2 MB
  of the second's;
- start -> first correct ``GET /skills/translate`` (bench/_common.py's
  poll), on each Python version: median <= 1.05 x the old main's; the CPU
  time to it (bench/startup.py's schedstat reading) beside it, not gated;
- ``duplicates --repo mockskill`` (pairs of places sharing six or more
  lines): fewer than the old main's (45 when the issue was filed).

The exit status is 1 when a gated figure fails. Needs wrk (bench/setup.sh)
and, unless ``--skip-wiremock``, Java and WireMock's jar (bench/setup.sh, or
fetched by npm on first use). Client and servers share the machine's cores:
run it on a quiet machine. About 10 minutes the first time (the installs),
~8 after. ``--quick`` is a smoke run of a minute or two (3 s loads, 100
connections, one Python) that checks the harness, not the targets.
``--extras fast`` runs the loads (keep-alive, bursts, floods) on both trees
installed with that extra (uvloop), as the keep-alive figure beside
WireMock was taken before the issue; start-up stays on the plain installs. Run::

    python3 bench/frozen.py [--quick] [--extras fast]
        [--only keepalive bursts floods startup duplicates]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import _common as c
import _peers as p
import burst_peers
import hang_flood
import keepalive
import startup as starts

OLD_MAIN = "5f6c57a"
"""``main`` as it was when issue 27 was filed."""
WORK = Path(os.environ.get("MOCKSKILL_FROZEN_DIR", tempfile.gettempdir())) / "mockskill-frozen"
SECTIONS = ("duplicates", "startup", "keepalive", "bursts", "floods")
FLOODS = 3
"""Floods in a row per server: the third's RSS is judged against the second's."""
KEEPALIVE_RATIO = 0.90
STARTUP_RATIO = 1.05
BURST_WALL_S = 1.15
RSS_FLAT_KB = 2 * 1024
ISSUE_PAIRS = 45
"""``duplicates`` over mockskill/ when issue 27 was filed."""


def _log(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- installs


@dataclass(frozen=True)
class Tree:
    key: str
    """A short name for paths: ``old``, ``new``."""
    label: str
    path: Path
    changes: bool
    """Whether the tree may change between runs (then it is installed again each run)."""
    rev: str = ""
    """The revision of a fixed tree: each has installs of its own."""


@dataclass(frozen=True)
class Install:
    tree: Tree
    version: str
    venv: Path
    problem: str = ""
    """Why this install cannot serve (empty when it can)."""

    def serve(self, port: int, paths: Sequence[str] = ()) -> list[str]:
        script = self.venv / "bin" / "mockskill"
        return [str(script), "serve", *paths, "--port", str(port), "--quiet"]

    def healthy(self) -> str:
        """The tree's own healthy scenario, which the readiness poll asks for."""
        return str(self.tree.path / "scenarios" / "healthy.yaml")


def pythons(every_version: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """(version, interpreter) of ``python3`` and, with *every_version*, of each other
    declared version ``.ci/pythons`` finds; and a line for each it does not."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    current = subprocess.run(
        ["python3", "-c", probe], check=True, capture_output=True, text=True
    ).stdout.strip()
    found, missing = [(current, "python3")], []
    if every_version:
        listed = subprocess.run(
            ["bash", str(c.REPO / ".ci" / "pythons")], check=True, capture_output=True, text=True
        ).stdout
        for version, where in (line.split(maxsplit=1) for line in listed.splitlines()):
            if where == "missing":
                missing.append(f"Python {version}: not on this machine, skipped")
            else:
                found.append((version, where))
    return found, missing


def old_main_tree(rev: str) -> Tree:
    """A detached worktree of *rev* under WORK, made if absent."""
    where = WORK / f"main-{rev}"
    if not (where / "pyproject.toml").exists():
        _log(f"git worktree add --detach {where} {rev}")
        WORK.mkdir(parents=True, exist_ok=True)
        # --force: the folder may have gone (a cleaned /tmp) while git still lists it.
        add = ["worktree", "add", "--force", "--detach", str(where), rev]
        subprocess.run(["git", "-C", str(c.REPO), *add], check=True, capture_output=True)
    return Tree("old", f"old main {rev}", where, changes=False, rev=rev)


def install(tree: Tree, version: str, python: str, extras: str = "") -> Install:
    """*tree* installed with ``pip install .`` (``.[EXTRAS]`` with *extras*) into
    WORK/venv-KEY[-REV]-VERSION[-EXTRAS], then probed."""
    name = f"{tree.key}-{tree.rev}" if tree.rev else tree.key
    venv = WORK / f"venv-{name}-{version}{'-' + extras if extras else ''}"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    steps: list[list[str]] = []
    if not (venv / "bin" / "python").exists():
        steps.append([python, "-m", "venv", str(venv)])
    if tree.changes or not (venv / "bin" / "mockskill").exists():
        # pip installs a local folder again even at the same version: the working tree's state.
        steps.append([*pip, f"{tree.path}[{extras}]" if extras else str(tree.path)])
    for step in steps:
        _log(f"{tree.label}, Python {version}: {' '.join(step[-4:])}")
        done = subprocess.run(step, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            return Install(tree, version, venv, f"cannot install: {_last_line(done.stderr)}")
    return Install(tree, version, venv, probe(Install(tree, version, venv)))


def probe(inst: Install) -> str:
    """Empty when the install's ``mockskill serve`` answers; else its last line on stderr."""
    port = c.free_port()
    with tempfile.TemporaryFile() as err:
        cmd = inst.serve(port)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=c.BENCH_DIR)
        try:
            c.wait_ready(port, time.monotonic() + 60, proc)
        except (RuntimeError, TimeoutError) as exc:
            err.seek(0)
            return f"cannot serve: {_last_line(err.read().decode(errors='replace')) or exc}"
        finally:
            c.stop(proc)
    return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


@contextmanager
def serving(inst: Install, paths: Sequence[str] = ()) -> Iterator[c.Spawned]:
    port = c.free_port()
    spawned = c.spawn(inst.serve(port, paths), port, timeout=60)
    try:
        yield spawned
    finally:
        c.stop(spawned.proc)


def in_turn(items: Sequence[Install], round_: int) -> Sequence[Install]:
    """*items* in order on even rounds, reversed on odd ones: neither always goes first."""
    return items if round_ % 2 == 0 else list(reversed(items))


# --------------------------------------------------------------------------- the table


@dataclass
class Row:
    figure: str
    python: str
    value: str
    """This checkout's figure."""
    reference: str
    """The same-run reference's figure, named."""
    ratio: float | None
    target: str
    verdict: str
    """PASS, FAIL, ``recorded``, or why it was not compared."""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def not_compared(figure: str, version: str, new: Install, old: Install) -> Row | None:
    """A row saying why *figure* is not compared on *version*, or None when both serve."""
    if not new.problem and not old.problem:
        return None
    why = "; ".join(f"{i.tree.label} {i.problem}" for i in (new, old) if i.problem)
    new_cell = new.problem or "(runs)"
    old_cell = old.problem or "(runs)"
    return Row(figure, version, new_cell, old_cell, None, "", f"not compared: {why}")


# --------------------------------------------------------------------------- figures


def duplicate_pairs(tree: Tree) -> tuple[int | None, str]:
    """Pairs ``duplicates`` lists over *tree*'s mockskill/, and its first line."""
    exe = shutil.which("duplicates")
    if exe is None:
        return None, "duplicates is not installed"
    out = subprocess.run(
        [exe, "--repo", str(tree.path / "mockskill"), "--seconds", "300"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    first = out.splitlines()[0] if out else ""
    if "incomplete:" in out:
        return None, _last_line(out)
    if first.startswith("no duplicates"):
        return 0, first
    found = re.match(r"(\d+) pairs", first)
    return (int(found.group(1)), first) if found else (None, first or "no output")


def duplicates(new: Tree, old: Tree) -> list[Row]:
    (ours, our_line), (theirs, their_line) = duplicate_pairs(new), duplicate_pairs(old)
    _log(f"duplicates: this checkout: {our_line}; {old.label}: {their_line}")
    figure = "duplicates --repo mockskill: pairs"
    if ours is None or theirs is None:
        return [Row(figure, "-", our_line, their_line, None, "", "not compared")]
    return [
        Row(
            figure,
            "-",
            str(ours),
            f"{old.label}: {theirs}",
            ours / theirs if theirs else None,
            f"< old main's ({ISSUE_PAIRS} when filed)",
            verdict(ours < theirs),
        )
    ]


def startup(rounds: int, pairs: Sequence[tuple[str, Install, Install]]) -> list[Row]:
    """Start -> first correct answer of each tree's console script, per Python version."""
    rows = []
    figure = "start -> first answer, median ms (p90; CPU ms)"
    for version, new, old in pairs:
        skipped = not_compared(figure, version, new, old)
        if skipped is not None:
            rows.append(skipped)
            continue
        _log(f"start-up on Python {version}: {rounds} rounds")
        times: dict[str, list[float]] = {new.tree.key: [], old.tree.key: []}
        # CPU time to the first answer: what a busy machine stretches least (read, not gated).
        cpu: dict[str, list[float]] = {new.tree.key: [], old.tree.key: []}
        for n in range(rounds):
            for inst in in_turn([old, new], n):
                port = c.free_port()
                spawned = c.spawn(inst.serve(port), port, timeout=60)
                times[inst.tree.key].append(spawned.ready_s * 1000)
                cpu[inst.tree.key].append(starts.cpu_s(spawned.proc.pid) * 1000)
                c.stop(spawned.proc)
        ours, theirs = times[new.tree.key], times[old.tree.key]
        ratio = c.median(ours) / c.median(theirs)
        rows.append(
            Row(
                figure,
                version,
                start_cell(ours, cpu[new.tree.key]),
                f"{old.tree.label}: {start_cell(theirs, cpu[old.tree.key])}",
                ratio,
                f"<= {STARTUP_RATIO:.2f} x old main",
                verdict(ratio <= STARTUP_RATIO),
            )
        )
    return rows


def start_cell(ms: Sequence[float], cpu_ms: Sequence[float]) -> str:
    return f"{c.median(ms):.0f} ({c.percentile(ms, 90):.0f}; {c.median(cpu_ms):.0f})"


def keep_alive(args: argparse.Namespace, version: str, new: Install, old: Install) -> list[Row]:
    """``wrk -t2 -c32`` keep-alive on the error step: WireMock warm, then both trees in turn."""
    figure = "keep-alive error step, wrk -t2 -c32, median req/s"
    skipped = not_compared(figure, version, new, old)
    if skipped is not None:
        return [skipped]
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (bench/setup.sh installs it)")
    runs: dict[str, list[float]] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(keepalive.WRK_LUA)
        ports = {inst.tree.key: stack.enter_context(serving(inst)).port for inst in (old, new)}
        answer = p.fetch(ports["new"], p.error_request(ports["new"]))
        if not args.skip_wiremock:
            # Measured on its own and stopped before the trees are: a JVM left up after
            # load (its compiler and collector threads) takes CPU from what runs next.
            port = c.free_port()
            _log(f"WireMock: starting, then {args.warmup} s of warm-up load")
            with p.wiremock(port, answer):
                keepalive.run_wrk(port, args.warmup, "keep-alive", lua, answer.status)
                for n in range(args.rounds):
                    _log(f"WireMock warm, round {n + 1} of {args.rounds}: {args.duration} s")
                    run = keepalive.run_wrk(port, args.duration, "keep-alive", lua, answer.status)
                    runs.setdefault("wiremock", []).append(run.rps)
        names = list(ports)
        for n in range(args.rounds):
            _log(f"keep-alive round {n + 1} of {args.rounds}: {args.duration} s each")
            for name in names if n % 2 == 0 else reversed(names):
                run = keepalive.run_wrk(
                    ports[name], args.duration, "keep-alive", lua, answer.status
                )
                runs.setdefault(name, []).append(run.rps)
    ours, theirs = c.median(runs["new"]), c.median(runs["old"])
    _log(
        "keep-alive runs: "
        + "; ".join(f"{k} {' '.join(f'{v:.0f}' for v in r)}" for k, r in runs.items())
    )
    rows = [
        Row(
            figure,
            version,
            f"{ours:.0f}",
            f"{old.tree.label}: {theirs:.0f}",
            ours / theirs,
            f">= {KEEPALIVE_RATIO:.2f} x old main",
            verdict(ours / theirs >= KEEPALIVE_RATIO),
        )
    ]
    if "wiremock" in runs:
        warm = c.median(runs["wiremock"])
        rows.append(
            Row(
                figure,
                version,
                f"{ours:.0f}",
                f"WireMock {p.wiremock_version()} warm ({args.warmup} s): {warm:.0f}",
                ours / warm,
                ">= 1.00 x WireMock warm",
                verdict(ours >= warm),
            )
        )
    return rows


@dataclass
class Bursts:
    walls: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)

    def cell(self) -> str:
        fails = sum(self.failures.values())
        detail = f" {dict(self.failures)}" if fails else ""
        return f"{max(self.walls):.2f} s, {fails} failures{detail}"


def bursts(args: argparse.Namespace, version: str, new: Install, old: Install) -> list[Row]:
    """Concurrent requests to a 1 s delay, each size to both trees in turn."""
    figure = f"concurrent x 1 s delay, worst wall of {args.burst_rounds}"
    skipped = not_compared(figure, version, new, old)
    if skipped is not None:
        return [skipped]
    seen = {inst.tree.key: {n: Bursts() for n in args.clients} for inst in (old, new)}
    with ExitStack() as stack:
        path = stack.enter_context(c.scenario_file(c.DELAY_SCENARIO))
        servers = {
            inst.tree.key: stack.enter_context(serving(inst, [path, inst.healthy()]))
            for inst in (old, new)
        }
        for clients in args.clients:
            for n in range(args.burst_rounds):
                for inst in in_turn([old, new], n):
                    _log(f"burst of {clients} to {inst.tree.label} ({n + 1}/{args.burst_rounds})")
                    port = servers[inst.tree.key].port
                    timed = burst_peers.epoll_burst(port, clients, args.timeout, window=2000)
                    got = seen[inst.tree.key][clients]
                    got.walls.append(max(t.done for t in timed) - min(t.connect for t in timed))
                    got.failures.update(t.outcome for t in timed if t.outcome != "ok")
                    time.sleep(2.0)  # sockets wind down between bursts
    rows = []
    for clients in args.clients:
        ours, theirs = seen["new"][clients], seen["old"][clients]
        gated = clients == args.clients[0]
        ok = max(ours.walls) <= BURST_WALL_S and not ours.failures
        rows.append(
            Row(
                f"{clients} concurrent x 1 s delay, worst wall of {args.burst_rounds}",
                version,
                ours.cell(),
                f"{old.tree.label}: {theirs.cell()}",
                max(ours.walls) / max(theirs.walls),
                f"<= {BURST_WALL_S} s, 0 failures" if gated else "recorded",
                verdict(ok) if gated else "recorded",
            )
        )
    return rows


def floods(args: argparse.Namespace, version: str, new: Install, old: Install) -> list[Row]:
    """FLOODS floods of hanging connections per server, the two trees' in turn: RSS after each."""
    figure = f"RSS after {args.hanging} hanging connections, MB"
    skipped = not_compared(figure, version, new, old)
    if skipped is not None:
        return [skipped]
    after: dict[str, list[int]] = {"new": [], "old": []}
    held: dict[str, list[int]] = {"new": [], "old": []}
    failed: dict[str, int] = {"new": 0, "old": 0}
    with ExitStack() as stack:
        path = stack.enter_context(c.scenario_file(hang_flood.SCENARIO))
        servers = {
            inst.tree.key: stack.enter_context(serving(inst, [path, inst.healthy()]))
            for inst in (old, new)
        }
        for n in range(FLOODS):
            for inst in in_turn([old, new], n):
                key, server = inst.tree.key, servers[inst.tree.key]
                _log(f"flood {n + 1} of {FLOODS}: {args.hanging} hanging on {inst.tree.label}")
                flood = hang_flood.hang_round(
                    server.port, server.proc.pid, args.hanging, args.requests, settle=0
                )
                r = asyncio.run(flood)
                time.sleep(args.settle)  # the same wait after every flood, then one reading
                after[key].append(c.rss_kb(server.proc.pid))
                held[key].append(r.rss_held_kb)
                failed[key] += sum(r.busy_failures.values()) + r.dropped_early

    def mb(values: Sequence[int]) -> str:
        return " / ".join(f"{v / 1024:.1f}" for v in values)

    def cell(key: str) -> str:
        return f"{mb(after[key])} (held {mb(held[key])}; {failed[key]} failures)"

    drift = {key: abs(values[2] - values[1]) for key, values in after.items()}
    return [
        Row(
            figure + f", floods 1 / 2 / 3 ({args.settle:g} s after each)",
            version,
            cell("new"),
            f"{old.tree.label}: {cell('old')}",
            after["new"][2] / after["old"][2],
            "recorded",
            "recorded",
        ),
        Row(
            "RSS flat: flood 3 vs flood 2 after, MB apart",
            version,
            f"{drift['new'] / 1024:.1f}",
            f"{old.tree.label}: {drift['old'] / 1024:.1f}",
            None,
            f"<= {RSS_FLAT_KB // 1024} MB",
            verdict(drift["new"] <= RSS_FLAT_KB),
        ),
    ]


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of the harness")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--old", default=OLD_MAIN, help="the reference commit")
    parser.add_argument("--rounds", type=int, default=3, help="keep-alive loads per server")
    parser.add_argument("--duration", type=int, default=5, help="seconds per keep-alive load")
    parser.add_argument("--warmup", type=int, default=120, help="seconds of WireMock warm-up")
    parser.add_argument("--skip-wiremock", action="store_true")
    parser.add_argument(
        "--extras",
        default="",
        help="install both trees with these extras for the loads (e.g. fast: uvloop)",
    )
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[1000, 10_000], help="burst sizes (first gated)"
    )
    parser.add_argument("--burst-rounds", type=int, default=2, help="bursts per size and tree")
    parser.add_argument("--timeout", type=float, default=30.0, help="per burst request, s")
    parser.add_argument("--hanging", type=int, default=10_000, help="connections per flood")
    parser.add_argument("--requests", type=int, default=200, help="GETs before/while hanging")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after a flood")
    parser.add_argument("--startup-rounds", type=int, default=15, help="starts per tree")
    args = parser.parse_args()
    if args.quick:  # what the smoke run changes, unless given
        given = set(sys.argv)
        quick = {
            "--rounds": ("rounds", 1),
            "--duration": ("duration", 3),
            "--warmup": ("warmup", 5),
            "--clients": ("clients", [100, 200]),
            "--burst-rounds": ("burst_rounds", 1),
            "--hanging": ("hanging", 100),
            "--requests": ("requests", 20),
            "--settle": ("settle", 1.0),
            "--startup-rounds": ("startup_rounds", 3),
        }
        for option, (name, value) in quick.items():
            if option not in given:
                setattr(args, name, value)
    return args


def main() -> None:
    args = parse_args()
    nofile = c.raise_nofile()  # before the servers start: they inherit it
    if "bursts" in args.only and nofile < max(args.clients) + 100:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {max(args.clients)} clients")
    started = time.monotonic()
    new = Tree("new", "this checkout", c.REPO, changes=True)
    old = old_main_tree(args.old)
    found, missing = pythons(every_version=not args.quick and "startup" in args.only)
    pairs = [(v, install(new, v, exe), install(old, v, exe)) for v, exe in found]
    version, new_main, old_main = pairs[0]
    if args.extras:  # the loads' installs; start-up stays on the plain ones
        exe = found[0][1]
        new_main, old_main = (install(tree, version, exe, args.extras) for tree in (new, old))
        version = f"{version} [{args.extras}]"
    for each_version, *installs in [*pairs, (version, new_main, old_main)]:
        for inst in installs:
            if inst.problem:
                _log(f"{inst.tree.label} on Python {each_version}: {inst.problem}")

    rows: list[Row] = []
    if "duplicates" in args.only:
        rows += duplicates(new, old)
    if "startup" in args.only:
        rows += startup(args.startup_rounds, pairs)
    if "keepalive" in args.only:
        rows += keep_alive(args, version, new_main, old_main)
    if "bursts" in args.only:
        rows += bursts(args, version, new_main, old_main)
    if "floods" in args.only:
        rows += floods(args, version, new_main, old_main)

    print(f"issue 27's frozen targets: this checkout beside {old.label}, one run")
    took = f"{time.monotonic() - started:.0f} s" + (" (--quick)" if args.quick else "")
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs,"
        f" load {os.getloadavg()[0]:.2f} at the end, run took {took}"
    )
    print(f"this checkout: {describe(c.REPO)}; installs under {WORK}")
    for line in missing:
        print(line)
    c.print_table(
        ("figure", "Python", "this checkout", "reference (same run)", "ratio", "target", "verdict"),
        [
            (
                r.figure,
                r.python,
                r.value,
                r.reference,
                "" if r.ratio is None else f"{r.ratio:.3f}",
                r.target,
                r.verdict,
            )
            for r in rows
        ],
    )
    if any(r.verdict == "FAIL" for r in rows):
        sys.exit(1)


def describe(tree: Path) -> str:
    """The commit a tree is at, and whether its working tree has changes."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True
    ).stdout.strip()
    return f"{head or '?'}{' with uncommitted changes' if dirty else ''}"


if __name__ == "__main__":
    main()
