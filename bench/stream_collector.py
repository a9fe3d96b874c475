"""What Python's cyclic collector does in ``mockskill serve`` while 1 000 paced streams open
(issue 31): the objects it tracks idle and per held stream, what is frozen out of its view,
and every collection during the round (its generation and how long it held the process).

The server is ``python -m mockskill serve`` run by a small wrapper in a process of its own
that appends a ``gc.callbacks`` hook (the documented API: it times each collection) and
writes what it saw to a file once a second; the streams are bench/streams.py's paced part
(the same scenario, the same reader process, the same opening over ``--open-spread`` ms).
Load-independent in what it counts (objects, collections by generation), not in how long
a collection takes: the 1-minute load average is printed beside it. Run::

    python bench/stream_collector.py [--streams 1000 --seconds 5 --rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as c
import streams

WRAPPER = r"""
import gc, json, sys, threading, time

out = sys.argv.pop(1)
seen, began = [], [0.0]

def timed(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        seen.append([time.time(), info["generation"], (time.perf_counter() - began[0]) * 1000])

gc.callbacks.append(timed)

def write(histogram):
    import collections
    kinds = collections.Counter(type(o).__name__ for o in gc.get_objects()) if histogram else {}
    with open(out + ".tmp", "w") as f:
        json.dump({"seen": seen, "tracked": len(gc.get_objects()),
                   "frozen": gc.get_freeze_count(), "kinds": dict(kinds)}, f)
    import os
    os.replace(out + ".tmp", out)

def every_second():
    while True:
        time.sleep(1)
        write(histogram=True)

threading.Thread(target=every_second, daemon=True).start()
from mockskill.cli import main
sys.argv[0] = "mockskill"
main()
"""


def read(path: str) -> dict[str, Any]:
    said: dict[str, Any] = json.loads(Path(path).read_text())
    return said


def one_round(args: argparse.Namespace) -> dict[str, Any]:
    events = int(args.seconds * 20)
    port = c.free_port()
    fd, scenario = tempfile.mkstemp(suffix=".yaml", prefix="bench-collector-")
    os.write(fd, streams.SCENARIO.format(events=events, pace="rate: 20/s, ").encode())
    os.close(fd)
    out = tempfile.mktemp(suffix=".json", prefix="bench-collector-")
    cmd = [sys.executable, "-c", WRAPPER, out, "serve", scenario, "--port", str(port), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection((c.HOST, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("mockskill did not start") from None
                time.sleep(0.01)
        time.sleep(2.2)  # two of the wrapper's writes: the idle figures
        idle = read(out)
        began = time.time()
        held: dict[str, Any] = {}

        def while_held() -> dict[str, float]:
            time.sleep(1.2)  # (the wrapper's next write: every stream open)
            held.update(read(out))
            return {}

        said = streams.read_streams(port, args.streams, events, 50, args.open_spread, while_held)
        time.sleep(1.2)
        after = read(out)
    finally:
        c.stop(proc)
        Path(scenario).unlink()
        for path in (out, out + ".tmp"):
            Path(path).unlink(missing_ok=True)
    during = [s for s in after["seen"] if s[0] >= began]
    full = [s[2] for s in during if s[1] == 2]
    kinds = {k: (held["kinds"].get(k, 0) - idle["kinds"].get(k, 0)) / args.streams
             for k in held["kinds"]}  # fmt: skip
    return {
        "load": os.getloadavg()[0],
        "idle": idle["tracked"],
        "frozen": idle["frozen"],
        "per_stream": (held["tracked"] - idle["tracked"]) / args.streams,
        "young": sum(1 for s in during if s[1] < 2),
        "young_max": max((s[2] for s in during if s[1] < 2), default=0.0),
        "full": full,
        "kinds": sorted(((k, v) for k, v in kinds.items() if v >= 0.5), key=lambda kv: -kv[1]),
        "p99": said["p99"],
        "head_p99": said["head_p99"],
        "lost": said["lost"] + said["reordered"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5, help="each paced stream's length")
    parser.add_argument("--open-spread", type=float, default=1000, help="ms to open them over")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    c.raise_nofile()
    rows, kinds = [], []
    for n in range(args.rounds):
        r = one_round(args)
        full = ", ".join(f"{ms:.1f}" for ms in r["full"]) or "none"
        rows.append([n + 1, f"{r['load']:.1f}", r["idle"], r["frozen"], f"{r['per_stream']:.1f}",
                     r["young"], f"{r['young_max']:.1f}", full, r["p99"], r["head_p99"],
                     r["lost"]])  # fmt: skip
        kinds = r["kinds"]
    print(f"{args.streams} streams of 20 events/s for {args.seconds:g} s, opened over "
          f"{args.open_spread:g} ms: the serving process's cyclic collector\n")  # fmt: skip
    c.print_table(["round", "load avg", "tracked idle", "frozen", "tracked per stream",
                   "young collections", "longest young ms", "full collections ms",
                   "late p99 ms", "from head p99 ms", "lost + reordered"], rows)  # fmt: skip
    print("\nwhat a held stream adds (last round):",
          ", ".join(f"{k} {v:.1f}" for k, v in kinds))  # fmt: skip
    print(c.machine())


if __name__ == "__main__":
    main()
