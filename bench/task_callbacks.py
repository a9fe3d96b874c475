"""Task callbacks delivered on time under load (issue 30): 1 000 tasks completing within
one second, each pushed to a local receiver, while the skill surface keeps answering.

Three processes: a ``mockskill.Server`` (in memory) whose skill ``job`` runs as a task
``working`` for ``--life`` ms, then ``completed``, pushing ``completed`` to the URL its
invoke's ``X-Callback-Url`` names; a receiver (asyncio, keep-alive, answers 200 at once)
that notes when each delivery arrived; and this one, which submits ``--tasks`` tasks
spread evenly over ``--spread`` ms (so that they complete within that long, ``--life``
later) from 8 keep-alive connections, while one more connection asks ``GET
/skills/plain`` (a descriptor) back to back, every 1 ms at most, from the first submit
until every delivery arrived (or 10 s after the last was due).

Printed: the machine's 1-minute load average after the round (2 CPUs shared: a figure
taken under load says so), the lateness of each delivery (its arrival - the scripted
time: the 202's ``created_at`` + ``--life``), p50/p99/max, deliveries missing or signed
wrongly, the server's own view from its journal (``late_ms`` p99: when each was sent;
attempts, those not acknowledged, deliveries dropped by the cap), the skill surface's
latency p50/p99/max meanwhile (targets: lateness p99 <= 50 ms, surface p99 <= 20 ms), and
the server's CPU time from ready to the end of the round. Each round is run twice in
turn, with the receiver and without (the same tasks, polled only: no ``X-Callback-Url``),
and the CPU one delivery costs is the difference of the medians over the tasks: a
figure the machine's load moves less than the lateness.
Run::

    python bench/task_callbacks.py [--tasks 1000 --spread 1000 --life 1000 --rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common as c

SECRET = "bench-secret"

SERVER = r"""
import collections, json, sys, textwrap, time
from mockskill import Server, load_text

life_ms, port, secret = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
scenarios = load_text(textwrap.dedent(f'''
    skills:
      - id: plain
      - id: job
        task:
          life:
            - {{status: working, for: {life_ms}ms}}
            - {{status: completed, json: {{done: true}}}}
          callback:
            url: {{header: X-Callback-Url}}
            secret: {secret}
            on: [completed]
'''), "bench.yaml")
server = Server(scenarios, port=port, journal_size=20_000).start()
print("ready", time.process_time(), flush=True)
sys.stdin.readline()
cpu = time.process_time()
attempts = [e for e in server.journal("bench") if e.endpoint == "callback"]
late = sorted(e.task["late_ms"] for e in attempts)
print(json.dumps({"attempts": len(attempts), "cpu": cpu,
                  "unacknowledged": sum(not e.task["acknowledged"] for e in attempts),
                  "sent_late_p99": late[int(len(late) * 0.99)] if late else None,
                  "dropped": server.courier.dropped,
                  "failures": server.courier.failures}), flush=True)
server.stop()
"""

RECEIVER = r"""
import asyncio, json, signal, sys, time

got = []

async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length, signature = 0, ""
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
                elif name.lower() == b"mockskill-signature":
                    signature = value.strip().decode()
            body = await reader.readexactly(length)
            got.append((time.time(), signature, body.decode()))
            if len(got) == int(sys.argv[3]):
                print("all", flush=True)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("ready", flush=True)
    await stop
    server.close()
    with open(sys.argv[2], "w") as out:
        json.dump(got, out)

asyncio.run(main())
"""


def created_ms(text: str) -> float:
    when = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return when.replace(tzinfo=datetime.UTC).timestamp() * 1000


def submitter(
    port: int, hook: str | None, starts: list[float], created: dict[str, float],
    lock: threading.Lock,
) -> None:  # fmt: skip
    connection = http.client.HTTPConnection(c.HOST, port, timeout=10)
    headers = {"Content-Type": "application/json", "Mockskill-Session": "bench"}
    if hook is not None:  # (else a task polled only: the baseline)
        headers["X-Callback-Url"] = hook
    for start in starts:
        wait = start - time.time()
        if wait > 0:
            time.sleep(wait)
        connection.request("POST", "/skills/job/invoke", body=b"{}", headers=headers)
        answer = connection.getresponse()
        task = json.loads(answer.read())["task"]
        with lock:
            created[task["id"]] = created_ms(task["created_at"])
    connection.close()  # (else the server's stop waits for it: its grace)


def surface(port: int, until: threading.Event, latencies: list[float]) -> None:
    connection = http.client.HTTPConnection(c.HOST, port, timeout=10)
    while not until.is_set():
        began = time.perf_counter()
        connection.request("GET", "/skills/plain")
        answer = connection.getresponse()
        answer.read()
        took = time.perf_counter() - began
        assert answer.status == 200
        latencies.append(took * 1000)
        if took < 0.001:
            time.sleep(0.001 - took)
    connection.close()


def round_(tasks: int, spread_ms: int, life_ms: int, hooked: bool) -> tuple[list[object], float]:
    """One round: its table row and the server's CPU seconds while it ran. Not *hooked*:
    the same tasks with no receiver (the baseline of the CPU a delivery costs)."""
    port, hook_port = c.free_port(), c.free_port()
    hook = f"http://127.0.0.1:{hook_port}/hook" if hooked else None
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "got.json"
        env = {**os.environ, "PYTHONPATH": str(c.REPO)}
        receiver = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, str(hook_port), str(out), str(tasks)],
            stdout=subprocess.PIPE, env=env)  # fmt: skip
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(life_ms), str(port), SECRET],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)  # fmt: skip
        assert receiver.stdout is not None
        assert server.stdout is not None
        receiver.stdout.readline()
        cpu_ready = float(server.stdout.readline().split()[1])
        created: dict[str, float] = {}
        lock = threading.Lock()
        latencies: list[float] = []
        until = threading.Event()
        probe = threading.Thread(target=surface, args=(port, until, latencies))
        first = time.time() + 0.2
        starts = [first + i * spread_ms / 1000 / tasks for i in range(tasks)]
        clients = [
            threading.Thread(target=submitter, args=(port, hook, starts[k::8], created, lock))
            for k in range(8)
        ]
        probe.start()
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        last_due = first + (spread_ms + life_ms) / 1000
        time.sleep(max(0.0, last_due + 0.3 - time.time()))
        until.set()  # (the surface is asked as long in either round: comparable CPU)
        probe.join()
        if hooked:  # until every delivery arrived (at most 10 s after the last was due),
            # so that a late one is measured, not refused by a receiver gone
            arrived = threading.Thread(target=receiver.stdout.readline, daemon=True)
            arrived.start()
            arrived.join(max(0.0, last_due + 10 - time.time()))
        receiver.terminate()
        receiver.wait(10)
        got = json.loads(out.read_text())
        assert server.stdin is not None
        server.stdin.write(b"done\n")
        server.stdin.flush()
        said = json.loads(server.stdout.readline())
        server.stdin.close()
        server.wait(30)
        if said["failures"]:
            print(f"attempts without a whole answer: {said['failures']}", file=sys.stderr)
    cpu = said["cpu"] - cpu_ready
    surface_cells = [
        len(latencies),
        f"{c.percentile(latencies, 50):.2f}",
        f"{c.percentile(latencies, 99):.2f}",
        f"{max(latencies):.2f}",
        f"{cpu:.2f}",
    ]
    if not hooked:
        return [os.getloadavg()[0], "no receiver", *["-"] * 7, *surface_cells], cpu
    lateness, forged = [], 0
    for at, signature, body in got:
        expected = "sha256=" + hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
        forged += signature != expected
        task = json.loads(body)["task"]
        lateness.append(at * 1000 - (created[task["id"]] + life_ms))
    missing = tasks - len({json.loads(body)["task"]["id"] for _, _, body in got})
    return [
        os.getloadavg()[0],
        "receiver",
        f"{c.percentile(lateness, 50):.1f}",
        f"{c.percentile(lateness, 99):.1f}",
        f"{max(lateness):.1f}",
        missing,
        forged,
        said["sent_late_p99"],
        "/".join(str(said[k]) for k in ("attempts", "unacknowledged", "dropped")),
        *surface_cells,
    ], cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--spread", type=int, default=1000, help="ms the submits take")
    parser.add_argument("--life", type=int, default=1000, help="ms each task works")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    c.raise_nofile()
    rows, cpu = [], {True: [], False: []}
    for n in range(args.rounds):
        for hooked in (True, False):  # taken in turn: the machine's load weighs on both
            row, spent = round_(args.tasks, args.spread, args.life, hooked)
            rows.append([n + 1, *row])
            cpu[hooked].append(spent)
    print(f"{args.tasks} tasks submitted over {args.spread} ms, each completing {args.life} ms"
          " after its submit, pushed to a local receiver\n")  # fmt: skip
    c.print_table(
        ["round", "load avg", "tasks push to", "late p50 ms", "late p99 ms", "late max ms",
         "missing", "bad signature", "sent late p99 ms", "attempts/unacked/dropped",
         "surface requests", "surface p50 ms", "surface p99 ms", "surface max ms", "server CPU s"],
        rows,
    )  # fmt: skip
    per = (c.median(cpu[True]) - c.median(cpu[False])) / args.tasks * 1e6
    print(f"\nserver CPU per delivery (median with - median without, / {args.tasks}): {per:.0f} us")
    print()
    print(c.machine())


if __name__ == "__main__":
    main()
