"""Rate limits in the state store: how exact a bucket is, what a limit costs on Redis (issue 29).

``--accuracy`` (targets: within 1 %): ``--duration`` (10) seconds of open-loop
load at 5 x the refill rate against a bucket of ``CAPACITY`` tokens refilled
``REFILL`` a second: each request is sent at its time on a fixed schedule,
never waiting for the answers before it, and the admitted ones are counted
against capacity + refill x duration (and against capacity + refill x the span
from the first request sent to the last, what the bucket could refill). Over
HTTP, a ``mockskill serve`` process serving a limited skill, in memory and on
a redis-server this script starts, each request on a connection of its own
(``_common.timed_request``: 200 admitted, 429 refused). ``--store``: the
store's side alone, no server: ``Take``s with the limit answered by
``State.answer`` in this process and by ``RedisStore.answer_async`` on a loop.

``--throughput`` (target: limited >= 0.85 x free, on Redis): one worker,
``mockskill serve --state redis://...``, ``wrk -t2 -c32`` keep-alive on the
same skill with and without a limit, in turn for ``--rounds``, medians and the
ratios: a per-session limit (a field of the session's hash), a per-client one
(a key of its own) — both with tokens to spare, every request admitted — and
one refusing every request; Redis's ``EVALSHA`` per request on each (one: the
bucket rides the sequence step's script) and the CPU per request of mockskill,
redis-server and wrk (``redis_state.py``'s table).

Client, server and Redis share the machine's cores (2 here). Run::

    python bench/rate_limits_shared.py --accuracy [--store] [--duration 10]
    python bench/rate_limits_shared.py --throughput [--rounds 3 --duration 5]

In-memory throughput (a limited skill against a free one, under and over its
limit) is bench/rate_limits.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import _common as c
import _peers as p
from keepalive import WRK_LUA
from redis_state import Cpu, commandstats, redis_server

from mockskill.engine.state import State
from mockskill.engine.store import ADMITTED, Bucket, NeedAnswer, Take, Taken
from mockskill.store import open_store

CAPACITY = 50
REFILL = 50.0
"""Tokens a second: at 5 x this rate, four requests in five are refused."""
LOAD = 5
"""The open-loop rate, as a multiple of the refill rate."""
TARGET_ERROR = 0.01
TARGET_RATIO = 0.85
PLENTY = 1_000_000
"""A limit's capacity and refill (the most the loader takes) that no load here spends:
every request admitted."""

SCENARIO = f"""\
name: bench-rate-limits
description: One skill with and without rate limits (bench/rate_limits_shared.py).
skills:
  - id: accurate
    rate_limit: {{capacity: {CAPACITY}, refill: {REFILL}}}
    invoke: {{json: {{ok: true}}}}
  - id: free
    invoke: {{json: {{ok: true}}}}
  - id: per-session
    rate_limit: {{capacity: {PLENTY}, refill: {PLENTY}}}
    invoke: {{json: {{ok: true}}}}
  - id: per-client
    rate_limit: {{capacity: {PLENTY}, refill: {PLENTY}, key: client}}
    invoke: {{json: {{ok: true}}}}
  - id: refused
    rate_limit: {{capacity: 1, refill: 0.004}}
    invoke: {{json: {{ok: true}}}}
"""
THROUGHPUT = {
    "free": ("/skills/free/invoke", 200),
    "limited per session": ("/skills/per-session/invoke", 200),
    "limited per client": ("/skills/per-client/invoke", 200),
    "limited, all refused": ("/skills/refused/invoke", 429),
}
"""The runs of ``--throughput``: the path, and the status every answer has."""


class Count:
    """What one accuracy run admitted, against what the bucket could."""

    def __init__(self, name: str, admitted: int, sent: int, span: float, duration: float) -> None:
        self.name, self.admitted, self.sent, self.span = name, admitted, sent, span
        self.nominal = CAPACITY + REFILL * duration
        """Capacity + refill x the duration: the target's figure."""
        self.possible = CAPACITY + math.floor(REFILL * span)
        """Capacity + the whole tokens refilled from the first request sent to the last."""

    def row(self) -> tuple[object, ...]:
        error = (self.admitted - self.nominal) / self.nominal
        return (
            self.name,
            self.sent,
            f"{self.span:.3f}",
            self.admitted,
            f"{self.nominal:.0f}",
            f"{error:+.2%}",
            self.possible,
            "yes" if abs(error) <= TARGET_ERROR else "NO",
        )


def schedule(duration: float) -> list[float]:
    """When each request goes, in seconds from the start: *LOAD* x the refill rate."""
    rate = LOAD * REFILL
    return [n / rate for n in range(int(duration * rate))]


def admitted_of(answer: NeedAnswer) -> bool:
    assert isinstance(answer, Taken)
    assert answer.spent is not None
    return answer.spent[ADMITTED]


def bucket_take(name: str) -> Take:
    """A Take of the bench's bucket, per session (the default key), as the engine makes it."""
    bucket = Bucket(f"bench/skill/{name}/invoke/session default", CAPACITY, REFILL, "default")
    return Take("default", f"skill/{name}/invoke", 0, "bench", None, False, bucket)


def store_in_memory(duration: float) -> Count:
    """``State.answer`` on the schedule (it answers at once: open loop as it is)."""
    state, need = State(seed=1), bucket_take("accurate")
    times = schedule(duration)
    start = time.monotonic()
    admitted, sent = 0, []
    for due in times:
        wait = start + due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        sent.append(time.monotonic())
        admitted += admitted_of(state.answer(need))
    return Count("store: memory (State.answer)", admitted, len(sent), sent[-1] - sent[0], duration)


async def open_loop(send: Callable[[], Awaitable[bool]], duration: float) -> tuple[int, float]:
    """*send* on the schedule, each in a task of its own (none waits for an answer): how
    many were admitted, and the span from the first sent to the last."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks, sent = [], []
    for due in schedule(duration):
        await asyncio.sleep(max(0.0, start + due - loop.time()))
        sent.append(loop.time())
        tasks.append(asyncio.ensure_future(send()))
    results = await asyncio.gather(*tasks)
    return sum(results), sent[-1] - sent[0]


def store_on_redis(url: str, duration: float) -> Count:
    """``RedisStore.answer_async`` on the schedule, on this process's loop."""
    store, need = open_store(url, replica="bench"), bucket_take("accurate-redis")

    async def send() -> bool:
        return admitted_of(await store.answer_async(need))

    async def run() -> tuple[int, float]:
        await store.answer_async(Take("warm", "k", 0, "", None, False))  # connected
        return await open_loop(send, duration)

    try:
        admitted, span = asyncio.run(run())
    finally:
        store.close()
    return Count("store: Redis (answer_async)", admitted, len(schedule(duration)), span, duration)


def post(port: int, path: str, connection: str = "close") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n"
        f"Connection: {connection}\r\n\r\n{{}}"
    ).encode()


@contextlib.contextmanager
def serving(scenario: str, state: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``mockskill serve SCENARIO --state STATE`` (one worker) until it answers; its port."""
    port = c.free_port()
    cmd = [*c.mockskill_cmd(port, [scenario]), "--state", state]
    with p.running(cmd, lambda: p.fetch(port, post(port, "/skills/free/invoke")).status == 200) as (
        proc,
        _,
    ):
        yield port, proc


def over_http(port: int, name: str, duration: float) -> Count:
    """Open-loop POSTs to the limited skill, each on a new connection."""
    request = post(port, "/skills/accurate/invoke")

    async def send() -> bool:
        timed = await c.timed_request(port, request, timeout=30)
        if timed.outcome not in ("ok", "HTTP 429"):
            raise RuntimeError(f"unexpected answer: {timed.outcome}")
        return timed.outcome == "ok"

    admitted, span = asyncio.run(open_loop(send, duration))
    return Count(name, admitted, len(schedule(duration)), span, duration)


def accuracy(duration: float, store_only: bool) -> None:
    c.raise_nofile()
    counts = []
    with redis_server() as (redis_port, _), c.scenario_file(SCENARIO) as scenario:
        url = f"redis://{c.HOST}:{redis_port}/0"
        if store_only:
            counts = [store_in_memory(duration), store_on_redis(url, duration)]
        else:
            for name, state in (("HTTP: memory", "memory"), ("HTTP: Redis", url)):
                with serving(scenario, state) as (port, _):
                    counts.append(over_http(port, name, duration))
    print(
        f"Bucket accuracy: capacity {CAPACITY}, refill {REFILL:g}/s; open loop at {LOAD} x the"
        f" refill rate ({LOAD * REFILL:g} requests/s) for {duration:g} s"
    )
    print(c.machine())
    c.print_table(
        [
            "run",
            "sent",
            "span s",
            "admitted",
            "capacity + refill x duration",
            "error",
            "capacity + whole tokens in the span",
            f"within {TARGET_ERROR:.0%}",
        ],
        [count.row() for count in counts],
    )


def wrk(port: int, path: str, seconds: int, lua: str, status: int) -> tuple[float, int]:
    """``wrk -t2 -c32`` keep-alive POSTs on *path*: req/s and requests; every answer *status*
    (a 429: but one, a token refilled meanwhile: one every 250 s)."""
    out = subprocess.run(
        ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", lua, f"http://{c.HOST}:{port}{path}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    ).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    wrong = int(non2xx.group(1)) if non2xx else 0
    if (status >= 300 and total - wrong > 1) or (status < 300 and wrong):
        raise RuntimeError(f"expected every answer of {path} to be a {status}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return rps, total


def throughput(rounds: int, duration: int) -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    runs: dict[str, list[float]] = {name: [] for name in THROUGHPUT}
    evalsha: dict[str, float] = dict.fromkeys(THROUGHPUT, 0.0)
    requests: dict[str, int] = dict.fromkeys(THROUGHPUT, 0)
    cpu = Cpu()
    with (
        tempfile.TemporaryDirectory() as tmp,
        redis_server() as (redis_port, redis_pid),
        c.scenario_file(SCENARIO) as scenario,
    ):
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        with serving(scenario, f"redis://{c.HOST}:{redis_port}/0") as (port, proc):
            pids = {"mockskill": (proc.pid, False), "redis-server": (redis_pid, False)}
            for path, _status in THROUGHPUT.values():  # refused's one token spent beforehand
                p.fetch(port, post(port, path))
            for _ in range(rounds):
                for name, (path, status) in THROUGHPUT.items():
                    before = commandstats(redis_port).get("evalsha", 0)
                    with cpu.run(name, pids) as count:
                        rps, total = wrk(port, path, duration, lua, status)
                        count.append(total)
                    runs[name].append(rps)
                    evalsha[name] += commandstats(redis_port).get("evalsha", 0) - before
                    requests[name] += total
    print(
        f"mockskill serve --state redis://... (one worker); wrk -t2 -c32 keep-alive,"
        f" {rounds} x {duration} s each, the skills in turn"
    )
    print(c.machine())
    free = c.median(runs["free"])
    c.print_table(
        ["skill", "req/s (median)", "runs", "/ free", "EVALSHA per request"],
        [
            (
                name,
                f"{c.median(r):.0f}",
                " ".join(f"{x:.0f}" for x in r),
                f"{c.median(r) / free:.2f}",
                f"{evalsha[name] / max(requests[name], 1):.3f}",
            )
            for name, r in runs.items()
        ],
    )
    print(f"\ntarget: a limited skill under its limit >= {TARGET_RATIO} x free")
    cpu.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--accuracy", action="store_true", help="admitted vs capacity + refill x t")
    what.add_argument("--throughput", action="store_true", help="limited vs free, on Redis")
    parser.add_argument("--store", action="store_true", help="accuracy of the stores alone")
    parser.add_argument("--duration", type=int, help="seconds per run (10; throughput 5)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.accuracy:
        accuracy(args.duration or 10, args.store)
    else:
        throughput(args.rounds, args.duration or 5)


if __name__ == "__main__":
    main()
