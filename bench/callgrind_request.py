"""Instructions per whole keep-alive request, counted by valgrind's callgrind (issue 13).

The load-independent figure of the keep-alive error step: the real server
(``python -m mockskill serve`` on the bundled scenarios, ``--journal-size``
1000 so the journal is at capacity after the warm-up) runs under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0``, and a client in
this process sends it requests on one kept-alive connection, one after the
other (raw socket, each answer read whole before the next goes), as
bench/keepalive.py's wrk does on each of its connections: ``POST
/skills/endpoint-unreachable/invoke`` (the 503 error step), with the same
headers. Two servers, one answering ``--warmup`` + *N1* requests and one
``--warmup`` + *N2*, run side by side (their counts do not depend on the
machine's load); the figure is (instructions of the N2 run - those of the
N1 run) / (N2 - N1): start-up, warm-up and stop cancel out. Every answer
must be the error step's 503.

``--functions K`` also prints the K C functions costing most per request
(``callgrind_annotate --inclusive=yes`` of each run, differenced the same
way); ``--keep DIR`` keeps the two callgrind files there.

``--proxy`` (issue 15) measures a proxied request instead: the served
scenario's ``endpoint-unreachable`` skill is ``proxy: <the floor>``
(bench/floor_server.py, started outside valgrind, answering the same 503),
so the figure is the whole proxied request: the consumer's exchange, the
engine's plan and journal, the relay and the pooled upstream exchange
(only the upstream's own cost is left out). Run::

    python bench/callgrind_request.py [--n1 2000 --n2 6000 --warmup 1200] [--functions 25]
    python bench/callgrind_request.py --proxy

(~3 min on 2 cores; needs valgrind: ``apt-get install valgrind``.)
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import _common as c
import _peers as p

PROXY_SCENARIO = """\
name: callgrind-proxy
skills:
  - id: translate
  - id: endpoint-unreachable
    proxy: http://127.0.0.1:{port}
"""

REQUEST = (
    "POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
)
"""What wrk sends in bench/keepalive.py (its Lua script sets the body and Content-Type)."""


@dataclass
class Run:
    requests: int
    instructions: int
    out: Path
    seconds: float


def _connect(port: int, deadline: float, proc: subprocess.Popen[bytes]) -> socket.socket:
    """A connection to the server, once it listens (a refused connect costs it nothing)."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        try:
            sock = socket.create_connection((c.HOST, port), timeout=60)
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on port {port}") from None
            time.sleep(0.05)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def _exchange(sock: socket.socket, request: bytes, pending: bytearray) -> int:
    """Send *request*, read its answer whole (by Content-Length); its status."""
    return answer(sock, request, pending)[0]


def answer(sock: socket.socket, request: bytes, pending: bytearray) -> tuple[int, bytes]:
    """Send *request* on a kept-alive connection, read its answer whole (by
    Content-Length; *pending* holds what was read past it); its status and body."""
    sock.sendall(request)
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    start = len(head) + 4
    while len(pending) < start + length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        pending += chunk
    body = bytes(pending[start : start + length])
    del pending[: start + length]
    return int(head.split(b" ", 2)[1]), body


def _total(out: Path) -> int:
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


def measure(requests: int, args: argparse.Namespace, where: Path) -> Run:
    """One server under callgrind answering ``--warmup`` + *requests* requests, then stopped."""
    port = c.free_port()
    out = where / f"callgrind.{requests}.out"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        args.python,
        "-m",
        "mockskill",
        "serve",
        "--port",
        str(port),
        "--quiet",
        "--journal-size",
        str(args.journal_size),
        *args.scenarios,
    ]
    env = c.valgrind_env()
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=str(c.BENCH_DIR),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(where / f"valgrind.{requests}.log", "wb"),  # noqa: SIM115
    )
    try:
        sock = _connect(port, time.monotonic() + 600, proc)
        request = REQUEST.format(path=c.ERROR_PATH, host=c.HOST, port=port).encode()
        pending = bytearray()
        with sock:
            for n in range(args.warmup + requests):
                status = _exchange(sock, request, pending)
                if status != 503:
                    raise RuntimeError(f"request {n + 1}: {status}, not the error step's 503")
        _stop(proc)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"the server under valgrind exited with {proc.returncode}")
    return Run(requests, _total(out), out, time.monotonic() - started)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and time for valgrind to write its file (minutes under load)."""
    proc.terminate()
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n1", type=int, default=2000)
    parser.add_argument("--n2", type=int, default=6000)
    parser.add_argument(
        "--warmup", type=int, default=1200, help="requests before either count (journal full)"
    )
    parser.add_argument("--journal-size", type=int, default=1000)
    parser.add_argument("--python", default=sys.executable, help="the server's interpreter")
    parser.add_argument("--functions", type=int, default=0, metavar="K")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the callgrind files here")
    parser.add_argument(
        "--proxy", action="store_true", help="a proxied request (to the floor) instead"
    )
    args = parser.parse_args()
    args.scenarios = []
    if args.n2 <= args.n1:
        parser.error("--n2 must be more than --n1")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="mockskill-callgrind-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        if args.proxy:
            floor_port = c.free_port()
            stack.enter_context(p.floor(floor_port))
            scenario = Path(tmp) / "proxy.yaml"
            scenario.write_text(PROXY_SCENARIO.format(port=floor_port))
            args.scenarios = [str(scenario)]
        runs: dict[int, Run] = {}
        failed: list[BaseException] = []

        def one(n: int) -> None:
            try:
                runs[n] = measure(n, args, where)
            except BaseException as exc:  # reported below, after the other run ends
                failed.append(exc)

        threads = [threading.Thread(target=one, args=(n,)) for n in (args.n1, args.n2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failed:
            raise failed[0]
        low, high = runs[args.n1], runs[args.n2]
        per = (high.instructions - low.instructions) / (args.n2 - args.n1)
        what = " proxied to the floor" if args.proxy else ""
        print(
            f"# callgrind, whole keep-alive request: POST {c.ERROR_PATH}{what}, one connection,"
            f" sequential; warm-up {args.warmup}, journal {args.journal_size}, PYTHONHASHSEED=0"
        )
        c.print_table(
            ("run", "requests counted", "instructions", "wall s"),
            [
                (name, r.requests, f"{r.instructions:,}", f"{r.seconds:.0f}")
                for name, r in (("N1", low), ("N2", high))
            ],
        )
        print(f"\n**{per:,.0f} instructions per request** ((N2 - N1) / {args.n2 - args.n1})")
        if args.functions:
            a, b = c.callgrind_functions(low.out), c.callgrind_functions(high.out)
            rows = sorted(
                ((b.get(k, 0) - a.get(k, 0)) / (args.n2 - args.n1), k) for k in set(a) | set(b)
            )[::-1][: args.functions]
            print()
            c.print_table(
                ("inclusive per request", "function"), [(f"{v:,.0f}", k) for v, k in rows]
            )
        print()
        print(c.machine())


if __name__ == "__main__":
    main()
