"""Instructions per CONNECTION, under valgrind's callgrind: a load-independent figure (issue 13).

Wall-clock bursts (``burst_peers.py``) move with whatever else the two cores
run; instruction counts do not. This script starts ``python -m mockskill
serve`` under ``valgrind --tool=callgrind`` (``PYTHONHASHSEED=0``), and from
this process (another one, no valgrind) opens connections to it in *waves*:
``--wave`` connections at once, one ``POST`` each (``Connection: close``),
the answer read to its last body byte, then closed; the next wave once all of
the wave are answered. The server is stopped with SIGTERM and callgrind's
total read from its output file. Two servers are measured, one taking
``N1`` connections and one ``N2`` (after the same warm-up, which fills the
journal to its capacity), and the figure is ``(total(N2) - total(N1)) /
(N2 - N1)``: start-up, warm-up and stop cancel out, what is left is one
connection's accept, request, answer, close and the loop's share.

Steps (``--step``, one scenario for both):

- ``plain``: ``{json: {ok: true}}`` on ``/skills/plain/invoke``, answered at once;
- ``delay``: ``{delay: 1000, json: {ok: true}}`` on ``/skills/delay/invoke``: the
  wait on the shared timers, and its end, are counted too.

With ``--wave 1`` every connection is alone (the loop's own server accepts
it); with a wave of hundreds the kernel queues them and the Listener takes
them (``transport/listening.py``), as in a burst. The two servers of a
figure run one after the other (``--parallel``: at once; the counts do not
care, but a ``delay`` wave's timers share milliseconds a little differently).
``--functions K`` also prints the K C functions costing most per connection
(``callgrind_annotate --inclusive=yes`` of both runs, differenced the same
way); ``--keep DIR`` keeps the callgrind files there. A figure takes ~2-4 min
(mostly the two start-ups under valgrind). Run::

    python bench/callgrind_connection.py [--step plain delay] [--wave 500] \\
        [--counts 500 1500] [--journal-size 500] [--functions 25] [--parallel]
    python bench/callgrind_connection.py --step plain --wave 1   # one at a time

(a ``delay`` wave takes a second at least: ``--wave 1`` with it takes N seconds.)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import re
import selectors
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import _common as c

SCENARIO = """\
name: bench-connection
description: One plain and one delayed step (bench/callgrind_connection.py).
skills:
  - id: plain
    invoke:
      json: {ok: true}
  - id: delay
    invoke:
      delay: 1000
      json: {ok: true}
"""

PATHS = {"plain": "/skills/plain/invoke", "delay": "/skills/delay/invoke"}


def _ready(port: int, timeout: float) -> None:
    """Wait until the server answers the plain step (valgrind: slow to start)."""
    deadline = time.monotonic() + timeout
    status = 0
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((c.HOST, port), timeout=1.0) as sock:
                sock.settimeout(max(1.0, deadline - time.monotonic()))
                sock.sendall(c.request_bytes("POST", PATHS["plain"], port, b"{}"))
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
        except OSError:
            time.sleep(0.05)  # not listening yet
            continue
        status, _ = c.parse_response(data)
        if status == 200:
            return
        time.sleep(0.5)  # listening, the scenario not served yet
    raise RuntimeError(f"the server did not answer in time (last status {status})")


def wave(port: int, path: str, count: int, timeout: float = 120.0) -> int:
    """*count* connections at once, one request each, read to the last body byte; failures."""
    request = c.request_bytes("POST", path, port, b"{}")
    sel = selectors.EpollSelector()
    pending: dict[int, tuple[socket.socket, bytearray]] = {}
    failures = 0
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        err = sock.connect_ex((c.HOST, port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            failures += 1
            continue
        pending[sock.fileno()] = (sock, bytearray())
        sel.register(sock, selectors.EVENT_WRITE)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for key, events in sel.select(0.5):
            sock, data = pending[key.fd]
            if events & selectors.EVENT_WRITE:
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    failures += 1
                    _done(sel, pending, sock)
                    continue
                sock.send(request)  # small: goes whole into an empty socket buffer
                sel.modify(sock, selectors.EVENT_READ)
                continue
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            data += chunk
            head, sep, body = bytes(data).partition(b"\r\n\r\n")
            match = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            if sep and match and len(body) >= int(match.group(1)):
                failures += not head.startswith(b"HTTP/1.1 200")
                _done(sel, pending, sock)
            elif not chunk:
                failures += 1
                _done(sel, pending, sock)
    failures += len(pending)
    for sock, _ in list(pending.values()):
        _done(sel, pending, sock)
    sel.close()
    return failures


def _done(
    sel: selectors.BaseSelector,
    pending: dict[int, tuple[socket.socket, bytearray]],
    sock: socket.socket,
) -> None:
    del pending[sock.fileno()]
    sel.unregister(sock)
    sock.close()


def measure(step: str, count: int, wave_size: int, warm: int, journal: int, folder: str) -> int:
    """Callgrind's total for a server that took *warm* + *count* connections (in waves)."""
    out = Path(folder) / f"callgrind.{step}.{wave_size}.{count}"
    scenario = Path(folder) / "scenario.yaml"
    port = c.free_port()
    cmd = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        *c.mockskill_cmd(port, [str(scenario)]), "--journal-size", str(journal),
    ]  # fmt: skip
    env = c.valgrind_env()
    proc = subprocess.Popen(
        cmd, cwd=str(c.BENCH_DIR), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _ready(port, 600.0)
        failures = 0
        for total in (warm, count):
            while total > 0:
                size = min(wave_size, total)
                failures += wave(port, PATHS[step], size)
                total -= size
        if failures:
            raise RuntimeError(f"{failures} requests failed ({step}, wave {wave_size})")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    match = re.search(r"^(?:summary|totals): *(\d+)", out.read_text(), re.M)
    if match is None:
        raise RuntimeError(f"no total in {out}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--step", nargs="+", choices=sorted(PATHS), default=["plain", "delay"])
    parser.add_argument("--wave", nargs="+", type=int, default=[500])
    parser.add_argument("--counts", nargs=2, type=int, default=[500, 1500], metavar=("N1", "N2"))
    parser.add_argument("--journal-size", type=int, default=500)
    parser.add_argument(
        "--warm", type=int, default=None, help="connections first (default: journal size + 100)"
    )
    parser.add_argument("--parallel", action="store_true", help="the two servers at once")
    parser.add_argument("--functions", type=int, default=0, metavar="K")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the callgrind files here")
    args = parser.parse_args()
    n1, n2 = args.counts
    warm = args.journal_size + 100 if args.warm is None else args.warm
    c.raise_nofile()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mockskill-callgrind-") as tmp:
        folder = str(args.keep or tmp)
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "scenario.yaml").write_text(SCENARIO)
        for step in args.step:
            for size in args.wave:
                jobs = [(step, n, size, warm, args.journal_size, folder) for n in (n1, n2)]
                if args.parallel:
                    with concurrent.futures.ThreadPoolExecutor(2) as pool:
                        t1, t2 = pool.map(lambda job: measure(*job), jobs)
                else:
                    t1, t2 = (measure(*job) for job in jobs)
                per = (t2 - t1) / (n2 - n1)
                rows.append((step, size, f"{t1:,}", f"{t2:,}", f"{per / 1000:.1f} k"))
                print(f"{step} wave {size}: {per / 1000:.1f} k instructions per connection")
                if args.functions:
                    out = Path(folder) / f"callgrind.{step}.{size}"
                    a, b = (
                        c.callgrind_functions(Path(f"{out}.{n1}")),
                        c.callgrind_functions(Path(f"{out}.{n2}")),
                    )
                    costs = sorted(((b.get(k, 0) - a.get(k, 0)) / (n2 - n1), k) for k in a | b)
                    for cost, name in costs[::-1][: args.functions]:
                        print(f"  {cost:12,.0f}  {name}")
    print(
        f"callgrind, PYTHONHASHSEED=0, journal {args.journal_size} (full after {warm} warm-up"
        f" connections), N1 = {n1}, N2 = {n2} connections in waves"
    )
    print(c.machine())
    headers = ("step", "wave", "total N1", "total N2", "per connection")
    c.print_table(headers, rows)


if __name__ == "__main__":
    main()
