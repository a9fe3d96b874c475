"""Polls of live tasks on a shared (Redis) store: what a poll costs there (issue 30).

One ``mockskill serve --state redis://...`` worker on a redis-server this
script starts. ``--tasks`` (2000) tasks of a skill whose life is one long
``for:`` phase are submitted first (in 20 sessions), so they stay live; then
``wrk -t2 -c32`` keep-alive, in turn for ``--rounds``: a plain skill's invoke
(one sequence step: one ``EVALSHA``) and ``GET``s of the status URLs (a wrk Lua
script walking the list: each poll a different live task, one TOUCH script
each). Medians, the ratio, ``EVALSHA`` per request, and the CPU per request
of mockskill, redis-server and wrk (``redis_state.py``'s table).

``--memory`` runs the same on ``--state memory`` too, for the side by side.
``--store``: the store's side alone, no server: ``--tasks`` tasks submitted,
then each polled (a TOUCH script) and, beside it, as many plain sequence steps
(a TAKE script), ``RedisStore.answer_async`` on this process's loop, 32 at a
time (their batches pipelined as the server's are): the CPU per need of this
process and of redis-server. Client, server and Redis share the machine's
cores (2 here). Run::

    python bench/tasks_shared.py [--tasks 2000 --rounds 3 --duration 5 --memory]
    python bench/tasks_shared.py --store [--tasks 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import _common as c
import _peers as p
from keepalive import WRK_LUA
from rate_limits_shared import post, serving, wrk
from redis_state import Cpu, commandstats, cpu_seconds, redis_server

from mockskill.engine.store import Need, Submit, Submitted, Take, Touch
from mockskill.store import open_store

SESSIONS = 20
SCENARIO = """\
name: bench-tasks-shared
description: A plain skill and a task skill that stays live (bench/tasks_shared.py).
skills:
  - id: free
    invoke: {json: {ok: true}}
  - id: report
    task:
      life:
        - {status: working, for: 1h, progress: [10, 40, 80]}
        - {status: completed, json: {report: done}}
"""
POLLS_LUA = """\
local paths = {}
for line in io.lines("%s") do
  paths[#paths + 1] = line
end
local next_path = 0
function setup(thread)
  thread:set("offset", math.random(#paths))
end
function init(args)
  next_path = offset
end
function request()
  next_path = next_path %% #paths + 1
  return wrk.format("GET", paths[next_path])
end
"""
"""wrk's script for the polls: each request the next status URL of the list (the two
threads start at random places in it)."""


def submitted(port: int, count: int) -> list[str]:
    """*count* tasks submitted (in *SESSIONS* sessions): their status URLs' paths."""
    paths = []
    for n in range(count):
        request = (
            f"POST /skills/report/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
            f"Mockskill-Session: bench-{n % SESSIONS}\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}"
        ).encode()
        answer = p.fetch(port, request)
        if answer.status != 202:
            raise RuntimeError(f"submit {n}: {answer.status}")
        location = next(v for k, v in answer.headers if k.lower() == "location")
        paths.append(location[location.index("/skills/") :])
    return paths


def measure(state: str, name: str, args: argparse.Namespace, redis: tuple[int, int] | None) -> None:
    """The two runs on *state*; *redis*: its redis-server's port and pid (else memory)."""
    redis_port = redis[0] if redis else None
    runs: dict[str, list[float]] = {"plain invoke": [], "poll of a live task": []}
    evalsha = dict.fromkeys(runs, 0.0)
    requests = dict.fromkeys(runs, 0)
    cpu = Cpu()
    with (
        tempfile.TemporaryDirectory() as tmp,
        c.scenario_file(SCENARIO) as scenario,
        serving(scenario, state) as (port, proc),
    ):
        paths = submitted(port, args.tasks)
        listing = Path(tmp) / "paths.txt"
        listing.write_text("\n".join(paths) + "\n")
        lua = {
            "plain invoke": Path(tmp) / "post.lua",
            "poll of a live task": Path(tmp) / "polls.lua",
        }
        lua["plain invoke"].write_text(WRK_LUA)
        lua["poll of a live task"].write_text(POLLS_LUA % listing)
        paths_of = {"plain invoke": "/skills/free/invoke", "poll of a live task": "/"}
        pids = {"mockskill": (proc.pid, False)}
        if redis is not None:
            pids["redis-server"] = (redis[1], False)
        p.fetch(port, post(port, "/skills/free/invoke"))
        for _ in range(args.rounds):
            for run, path in paths_of.items():
                before = commandstats(redis_port).get("evalsha", 0) if redis_port else 0
                with cpu.run(run, pids) as count:
                    rps, total = wrk(port, path, args.duration, str(lua[run]), 200)
                    count.append(total)
                runs[run].append(rps)
                if redis_port is not None:
                    evalsha[run] += commandstats(redis_port).get("evalsha", 0) - before
                requests[run] += total
    print(
        f"\n{name}: mockskill serve (one worker), {args.tasks} live tasks in {SESSIONS}"
        f" sessions; wrk -t2 -c32 keep-alive, {args.rounds} x {args.duration} s each, in turn"
    )
    plain = c.median(runs["plain invoke"])
    c.print_table(
        ["run", "req/s (median)", "runs", "/ plain", "EVALSHA per request (journal too)"],
        [
            (
                run,
                f"{c.median(r):.0f}",
                " ".join(f"{x:.0f}" for x in r),
                f"{c.median(r) / plain:.2f}",
                f"{evalsha[run] / max(requests[run], 1):.3f}" if redis_port else "",
            )
            for run, r in runs.items()
        ],
    )
    cpu.print()


CONCURRENT = 32
"""Needs in flight at once in ``--store`` (as wrk's 32 connections)."""


def store_only(tasks: int) -> None:
    """What a poll's TOUCH and a plain step's TAKE cost on Redis, the store alone."""
    with redis_server() as (port, redis_pid):
        store = open_store(f"redis://{c.HOST}:{port}/0", replica="bench")
        try:
            numbers = []
            for n in range(tasks):
                answer = store.answer(Submit(f"bench-{n % SESSIONS}", "b/report", 3_600_000, tasks))
                assert isinstance(answer, Submitted)
                assert answer.number is not None
                numbers.append((f"bench-{n % SESSIONS}", answer.number))
            polls: list[Need] = [
                Touch(session, number, "poll", 3_600_000, "b/report") for session, number in numbers
            ]
            takes: list[Need] = [
                Take(f"bench-{n % SESSIONS}", "skill/free/invoke", 0, "b", None, False)
                for n in range(tasks)
            ]
            rows = []
            for name, needs in (("plain step (TAKE)", takes), ("poll (TOUCH)", polls)):
                rows.append((name, *answered_async(store, needs, port, redis_pid)))
        finally:
            store.close()
    print(
        f"\nThe store alone: {tasks} needs of each kind, RedisStore.answer_async,"
        f" {CONCURRENT} in flight (live tasks: {tasks} in {SESSIONS} sessions)"
    )
    c.print_table(
        ["need", "needs/s", "this process us/need", "redis-server us/need", "EVALSHA/need"], rows
    )


def answered_async(
    store: object, needs: list[Need], port: int, redis_pid: int
) -> tuple[str, str, str, str]:
    """Answers *needs* on a loop, *CONCURRENT* at a time: the rate and the CPU per need."""

    async def run() -> None:
        queue = iter(needs)

        async def worker() -> None:
            for need in queue:
                await store.answer_async(need)  # type: ignore[attr-defined]

        await asyncio.gather(*(worker() for _ in range(CONCURRENT)))

    calls = commandstats(port).get("evalsha", 0)
    mine, theirs, start = time.process_time(), cpu_seconds(redis_pid), time.monotonic()
    asyncio.run(run())
    elapsed = time.monotonic() - start
    mine, theirs = time.process_time() - mine, cpu_seconds(redis_pid) - theirs
    evalsha = commandstats(port).get("evalsha", 0) - calls
    n = len(needs)
    return (
        f"{n / elapsed:.0f}",
        f"{mine / n * 1e6:.1f}",
        f"{theirs / n * 1e6:.1f}",
        f"{evalsha / n:.2f}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="live tasks polled")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--memory", action="store_true", help="--state memory too")
    parser.add_argument("--store", action="store_true", help="the store alone, no server")
    args = parser.parse_args()
    if args.store:
        print(c.machine())
        store_only(args.tasks)
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    print(c.machine())
    with redis_server() as redis:
        measure(f"redis://{c.HOST}:{redis[0]}/0", "Redis", args, redis)
    if args.memory:
        measure("memory", "memory", args, None)


if __name__ == "__main__":
    main()
