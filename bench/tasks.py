"""Polls of live tasks against a plain scripted step, and a poll's timing at a boundary
(issue 30).

One ``mockskill serve`` process (in memory) with three skills: ``plain`` answers a
scripted JSON; ``report`` is a task skill whose phases last hours (``submitted`` for 1 h,
``working`` for 1 h with progress), so the tasks stay live however long the run;
``quick`` is a task skill of short phases, for the boundary check. ``--tasks`` (10 000)
``report`` tasks are submitted first; then ``wrk -t2 -c32`` keep-alive sends ``plain``'s
invoke, and, in turn, polls that walk the list of every live task's status URL (a Lua
script: each wrk thread takes the next URL of the list for each request, from its own
place in it; plain's script writes each request too, so that wrk spends as much on either
and what differs is the server's), ``--rounds`` times for ``--duration`` seconds,
alternating the order; medians and the ratio to ``plain`` are
printed (target: polls >= 0.85 of plain's rate).

The boundary check submits ``quick`` tasks and polls each one every millisecond or so
around its phases' ends: a poll sent after a boundary must see the new state. It prints,
per boundary, the lateness: how long after the boundary (the task's ``created_at`` plus
the phases' ``for:``) the last poll that still saw the old state was sent (0 when none
was), and when the first answer that saw the new one arrived (target: within 10 ms).

``--cpu N`` measures instead, in this process, the engine's CPU per request
(``LoopDispatcher.plan`` and ``played``, no socket, no loop; best of three): ``plain``'s
invoke, and polls walking ``--tasks`` live tasks; ``--callgrind`` counts the instructions
per whole keep-alive request of each (the real server under valgrind, as
bench/callgrind_request.py counts them: (N2 run - N1 run) / (N2 - N1), one kept-alive
connection; the polls walk the tasks submitted during the warm-up); ``--memory`` the bytes
the engine holds per live task (tracemalloc, in process: the store's record, the id's
reading kept, the answers' text kept). Run::

    python bench/tasks.py [--rounds 5 --duration 5] [--tasks 10000] [--cpu 20000]
        [--callgrind [--keep DIR]] [--memory] [--boundary]
"""

from __future__ import annotations

import argparse
import calendar
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _common as c
from callgrind_request import _connect, _exchange, _stop, _total, answer

from mockskill import bundled_path

SCENARIO = """
name: bench-tasks
skills:
  - id: plain
    invoke:
      json: {result: ok}
  - id: report
    task:
      poll_after: 1s
      life:
        - {status: submitted, for: 1h}
        - {status: working, for: 1h, progress: [10, 40, 80]}
        - {status: completed, json: {report: done}}
  - id: cased
    # report's life as a named case's own (task_life:): its tasks' polls find the life
    # from the id, among the skill's and its cases'
    task:
      life: [{status: completed}]
    invoke:
      cases:
        - name: own
          when: {headers: {x-never: sent}}
          task_life:
            poll_after: 1s
            life:
              - {status: submitted, for: 1h}
              - {status: working, for: 1h, progress: [10, 40, 80]}
              - {status: completed, json: {report: done}}
          steps: [{task: submit}]
      steps: [{task: submit}]
  - id: quick
    task:
      poll_after: 1s
      life:
        - {status: submitted, for: 300ms}
        - {status: working, for: 300ms, progress: [20, 60]}
        - {status: completed, json: {report: done}}
"""
BUNDLED = str(bundled_path())
"""Served beside: the server is ready when its translate skill answers."""
BODY = '{"input": {"text": "hello world"}}'
PLAIN_LUA = f"""\
wrk.method = "POST"
wrk.body = '{BODY}'
wrk.headers["Content-Type"] = "application/json"
function request()
  return wrk.format()
end
"""
POLL_LUA = """\
local paths = {{
{paths}
}}
local next_path = 0
function setup(thread)
  thread:set("offset", next_path)
  next_path = next_path + 7919
end
function init(args)
  cursor = offset
end
function request()
  cursor = cursor % #paths + 1
  return wrk.format("GET", paths[cursor])
end
"""
QUICK_BOUNDARIES = (("submitted", "working", 300), ("working", "completed", 600))
"""(old status, new status, ms after created_at) of ``quick``'s boundaries."""
TARGET = 0.85
"""Polls of live tasks: at least this share of plain's rate."""
LATE_MS = 10.0
"""A poll just after a boundary sees the new state within this."""


def submit(sock: socket.socket, port: int, skill: str, pending: bytearray) -> dict[str, object]:
    """Submit a task of *skill* on a kept-alive connection; the task as its 202 says."""
    request = (
        f"POST /skills/{skill}/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}"
    ).encode()
    status, body = answer(sock, request, pending)
    if status != 202:
        raise RuntimeError(f"a submit got {status}: {body[:200]!r}")
    task: dict[str, object] = json.loads(body)["task"]
    return task


def status_path(task: dict[str, object]) -> str:
    url = str(task["status_url"])
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def submit_many(port: int, skill: str, count: int) -> list[str]:
    """Submit *count* tasks of *skill*; their status paths."""
    pending = bytearray()
    with socket.create_connection((c.HOST, port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return [status_path(submit(sock, port, skill, pending)) for _ in range(count)]


def run_wrk(port: int, path: str, seconds: int, lua: str) -> float:
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", lua, f"http://{c.HOST}:{port}{path}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    if "Socket errors" in out or "Non-2xx" in out:
        raise RuntimeError(f"{path}: unexpected answers:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def check_poll(port: int, path: str) -> None:
    """What is polled is what it says: a live task, working or submitted, 200."""
    pending = bytearray()
    with socket.create_connection((c.HOST, port), timeout=10) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n\r\n".encode()
        status, body = answer(sock, request, pending)
    task = json.loads(body)["task"]
    assert status == 200, (status, body)
    assert task["status"] in ("submitted", "working"), body


def throughput(args: argparse.Namespace) -> None:
    results: dict[str, list[float]] = {"plain": [], "poll": []}
    with (
        tempfile.TemporaryDirectory(prefix="mockskill-bench-") as tmp,
        c.scenario_file(SCENARIO) as path,
        c.serving(lambda port: c.mockskill_cmd(port, [BUNDLED, path])) as served,
    ):
        port = served.port
        started = time.monotonic()
        paths = submit_many(port, "report", args.tasks)
        print(f"{args.tasks} tasks submitted in {time.monotonic() - started:.1f} s")
        check_poll(port, paths[0])
        plain_lua = Path(tmp) / "plain.lua"
        plain_lua.write_text(PLAIN_LUA)
        poll_lua = Path(tmp) / "poll.lua"
        poll_lua.write_text(POLL_LUA.format(paths=",\n".join(f'"{p}"' for p in paths)))
        runs = {
            "plain": ("/skills/plain/invoke", str(plain_lua)),
            "poll": (paths[0], str(poll_lua)),
        }
        for target, lua in runs.values():  # warm-up
            run_wrk(port, target, 1, lua)
        for round_ in range(args.rounds):
            # Alternated, so a drift of the machine's load falls on both alike.
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
            for what in order:
                target, lua = runs[what]
                results[what].append(run_wrk(port, target, args.duration, lua))
        check_poll(port, paths[-1])
    medians = {what: c.median(runs) for what, runs in results.items()}
    c.print_table(
        ["request", "req/s (median)", "/ plain", "target", "runs"],
        [
            [
                "plain invoke" if what == "plain" else f"poll ({args.tasks} live tasks)",
                f"{medians[what]:.0f}",
                f"{medians[what] / medians['plain']:.2f}",
                "" if what == "plain" else f">= {TARGET:.2f}",
                " ".join(f"{r:.0f}" for r in results[what]),
            ]
            for what in results
        ],
    )


def _created_ms(task: dict[str, object]) -> float:
    """The task's ``created_at`` (RFC 3339, UTC, to the ms) in epoch ms."""
    text = str(task["created_at"])
    whole, _, ms = text.rstrip("Z").partition(".")
    second = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return second * 1000.0 + int(ms or 0)


def boundary(args: argparse.Namespace) -> None:
    """Polls around each of ``quick``'s boundaries: how late the new state shows."""
    rows = []
    worst = 0.0
    with (
        c.scenario_file(SCENARIO) as path,
        c.serving(lambda port: c.mockskill_cmd(port, [BUNDLED, path])) as served,
    ):
        port = served.port
        pending = bytearray()
        with socket.create_connection((c.HOST, port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stale: dict[str, list[float]] = {old: [] for old, _, _ in QUICK_BOUNDARIES}
            first: dict[str, list[float]] = {old: [] for old, _, _ in QUICK_BOUNDARIES}
            for _ in range(args.boundary_tasks):
                task = submit(sock, port, "quick", pending)
                created = _created_ms(task)
                request = (
                    f"GET {status_path(task)} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n\r\n"
                ).encode()
                for old, new, at in QUICK_BOUNDARIES:
                    edge = created + at
                    late_old = 0.0  # the last poll sent after the edge still seeing *old*
                    while True:
                        # Polled from 5 ms before the edge, every 0.5 ms.
                        wait = (edge - 5 - time.time() * 1000) / 1000
                        if wait > 0:
                            time.sleep(wait)
                        sent = time.time() * 1000
                        _, body = answer(sock, request, pending)
                        got = time.time() * 1000
                        seen = json.loads(body)["task"]["status"]
                        if seen == old:
                            late_old = max(late_old, sent - edge)
                            time.sleep(0.0005)
                            continue
                        if seen != new:
                            raise RuntimeError(f"{old} -> {seen}, not {new}")
                        stale[old].append(late_old)
                        first[old].append(max(0.0, got - edge))
                        break
    for old, new, _ in QUICK_BOUNDARIES:
        worst = max(worst, *stale[old])
        rows.append(
            [
                f"{old} -> {new}",
                len(stale[old]),
                f"{max(stale[old]):.2f}",
                f"{c.median(first[old]):.2f}",
                f"{max(first[old]):.2f}",
            ]
        )
    c.print_table(
        [
            "boundary",
            "tasks",
            "old state seen after it, ms (max)",
            "new state first answered after it, ms (median)",
            "(max)",
        ],
        rows,
    )
    verdict = "holds" if worst <= LATE_MS else "does NOT hold"
    print(f"target: a poll after a boundary sees the new state within {LATE_MS:.0f} ms: {verdict}")


def cpu(iterations: int, count: int) -> dict[str, float]:
    """Microseconds of CPU per request in the engine alone, best of three: plain's invoke,
    and polls walking *count* live tasks."""
    from mockskill import Server, load_text
    from mockskill.engine.plan import Outcome
    from mockskill.server.dispatch import LoopDispatcher
    from mockskill.transport import Request

    server = Server(load_text(SCENARIO, "bench.yaml"), quiet=True)
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)

    def request(
        method: str, target: str, body: bytes, more: tuple[tuple[str, str], ...] = ()
    ) -> Request:
        headers: tuple[tuple[str, str], ...] = (("Host", "127.0.0.1:8080"), *more)
        if body:
            headers += (("Content-Type", "application/json"), ("Content-Length", str(len(body))))
        return Request(
            method=method,
            target=target,
            version="1.1",
            headers=headers,
            body=body,
            peer=("127.0.0.1", 50000),
            local=("127.0.0.1", 8080),
            time=time.time(),
            connection=1,
            index=1,
        )

    def play(req: Request) -> bytes:
        plan = surface.plan(req)
        now = time.time()
        surface.played(req, Outcome(plan.answer, now, now, now))  # type: ignore[union-attr]
        return plan.answer.body  # type: ignore[union-attr]

    def run(requests: list[Request], n: int) -> float:
        started = time.process_time()
        for i in range(n):
            req = requests[i % len(requests)]
            plan = surface.plan(req)
            now = time.time()
            surface.played(req, Outcome(plan.answer, now, now, now))  # type: ignore[union-attr]
        return (time.process_time() - started) / n * 1e6

    best: dict[str, float] = {}
    try:
        submit_req = request("POST", "/skills/report/invoke", BODY.encode())
        polls = []
        for _ in range(count):
            task = json.loads(play(submit_req))["task"]
            polls.append(request("GET", status_path(task), b""))
        own = request("POST", "/skills/cased/invoke", BODY.encode(), (("Mockskill-Case", "own"),))
        case_polls = []
        for _ in range(count):
            task = json.loads(play(own))["task"]
            case_polls.append(request("GET", status_path(task), b""))
        plain = [request("POST", "/skills/plain/invoke", BODY.encode())]
        for what, requests in (("plain", plain), ("poll", polls), ("case", case_polls)):
            run(requests, server.state.capacity + 1000)  # warm: the journal full
            best[what] = min(run(requests, iterations) for _ in range(3))
    finally:
        surface.close()
        server.engine.close()
    return best


def memory(count: int) -> float:
    """Bytes held per live task by the whole engine in this process (the store's record,
    the id's reading kept, what the answers keep): tracemalloc's count across submitting
    *count* tasks and polling each once. The journal is bounded whatever the tasks (its
    newest rows whole, the older packed): it keeps 100 rows here, full before counting."""
    import tracemalloc

    from mockskill import Server, load_text
    from mockskill.engine.plan import Outcome
    from mockskill.server.dispatch import LoopDispatcher
    from mockskill.transport import Request

    server = Server(load_text(SCENARIO, "bench.yaml"), quiet=True, journal_size=100)
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)

    def play(method: str, target: str, body: bytes) -> bytes:
        headers: tuple[tuple[str, str], ...] = (("Host", "127.0.0.1:8080"),)
        if body:
            headers += (("Content-Type", "application/json"), ("Content-Length", str(len(body))))
        target = f" {target}"[1:]  # (a string of its own, as each request read has)
        req = Request(method, target, "1.1", headers, body, ("127.0.0.1", 50000),
                      ("127.0.0.1", 8080), time.time(), 1, 1)  # fmt: skip
        plan = surface.plan(req)
        now = time.time()
        surface.played(req, Outcome(plan.answer, now, now, now))  # type: ignore[union-attr]
        return plan.answer.body  # type: ignore[union-attr]

    try:
        first = status_path(
            json.loads(play("POST", "/skills/report/invoke", BODY.encode()))["task"]
        )
        for _ in range(server.state.capacity + 1000):
            play("GET", first, b"")
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        paths = []
        for _ in range(count):
            task = json.loads(play("POST", "/skills/report/invoke", BODY.encode()))["task"]
            paths.append(status_path(task))
        for path in paths:
            play("GET", path, b"")
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
    finally:
        surface.close()
        server.engine.close()
    held = sum(s.size_diff for s in after.compare_to(before, "filename"))
    own = sys.getsizeof(paths) + sum(sys.getsizeof(p) for p in paths)  # the bench's list
    return (held - own) / count


def profile(iterations: int, count: int) -> None:
    """cProfile of the polls (what ``--cpu`` times), for finding where a poll's time goes."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(cpu, iterations, count)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def callgrind(n1: int, n2: int, warmup: int, keep: Path | None = None) -> dict[str, float]:
    """Instructions per request: (N2 run - N1 run) / (N2 - N1), after *warmup* requests
    (for polls: *warmup* tasks submitted, then walked). The runs' out files are kept in
    *keep* if given (``callgrind.{plain,poll}.N.out``: ``callgrind_annotate`` compares
    them function by function), else let go."""
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mockskill-callgrind-") as tmp:
        where = Path(tmp) if keep is None else keep
        where.mkdir(parents=True, exist_ok=True)
        for what in ("plain", "poll"):
            low, high = (_instructions(what, n, warmup, where) for n in (n1, n2))
            per[what] = (high - low) / (n2 - n1)
    return per


def _instructions(what: str, requests: int, warmup: int, where: Path) -> int:
    port = c.free_port()
    out = where / f"callgrind.{what}.{requests}.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    cmd += ["-m", "mockskill", "serve", "--port", str(port), "--quiet", "--journal-size", "1000"]
    plain = (
        f"POST /skills/plain/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n{BODY}"
    ).encode()
    with c.scenario_file(SCENARIO) as path:
        proc = subprocess.Popen(
            [*cmd, path],
            cwd=str(c.BENCH_DIR),
            env=c.valgrind_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            pending = bytearray()
            with _connect(port, time.monotonic() + 600, proc) as sock:
                paths = [status_path(submit(sock, port, "report", pending)) for _ in range(warmup)]
                polls = [
                    f"GET {p} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n\r\n".encode() for p in paths
                ]
                nth: Callable[[int], bytes] = (
                    (lambda n: plain) if what == "plain" else (lambda n: polls[n % len(polls)])
                )
                for n in range(warmup + requests):
                    status = _exchange(sock, nth(n), pending)
                    if status != 200:
                        raise RuntimeError(f"{what}: a {status}")
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _total(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--tasks", type=int, default=10_000, help="live tasks polled")
    parser.add_argument("--cpu", type=int, default=0, help="in-process CPU, N requests each")
    parser.add_argument("--profile", action="store_true", help="with --cpu: cProfile it")
    parser.add_argument("--callgrind", action="store_true", help="instructions per request")
    parser.add_argument("--n1", type=int, default=500)
    parser.add_argument("--n2", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=1200)
    parser.add_argument("--keep", type=Path, help="with --callgrind: keep the out files here")
    parser.add_argument("--memory", action="store_true", help="bytes held per live task")
    parser.add_argument("--boundary", action="store_true", help="only the boundary check")
    parser.add_argument("--boundary-tasks", type=int, default=20)
    args = parser.parse_args()
    print(c.machine())
    if args.callgrind:
        per = callgrind(args.n1, args.n2, args.warmup, args.keep)
        c.print_table(
            ["request", "instructions / keep-alive request", "plain / it", "target"],
            [
                ["plain invoke", f"{per['plain']:,.0f}", "1.00", ""],
                ["poll", f"{per['poll']:,.0f}", f"{per['plain'] / per['poll']:.2f}", ">= 0.85"],
            ],
        )
        return
    if args.memory:
        per_task = memory(args.tasks)
        print(f"{args.tasks} live tasks, each submitted and polled once: {per_task:.0f} B each")
        return
    if args.cpu:
        if args.profile:
            profile(args.cpu, args.tasks)
            return
        best = cpu(args.cpu, args.tasks)
        c.print_table(
            ["request", "engine CPU µs / request (best of 3)", "plain / it"],
            [
                ["plain invoke", f"{best['plain']:.1f}", "1.00"],
                [
                    f"poll ({args.tasks} live tasks)",
                    f"{best['poll']:.1f}",
                    f"{best['plain'] / best['poll']:.2f}",
                ],
                [
                    f"poll ({args.tasks} live tasks of a case's task_life:)",
                    f"{best['case']:.1f}",
                    f"{best['plain'] / best['case']:.2f}",
                ],
            ],
        )
        return
    if not args.boundary:
        throughput(args)
    boundary(args)


if __name__ == "__main__":
    main()
