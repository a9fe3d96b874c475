"""1000 and 10 000 concurrent requests to a 1 s delay, beside nginx's echo_sleep (issue 13).

Targets: 1000 x 1 s within 1.15 s wall, 10 000 x 1 s within 2.5 s, 0 failures;
delay overshoot p99 at 1000 concurrent within 20 ms of nginx's in the same run.

Two servers run at the same time for the whole run:

- **mockskill**: ``python -m mockskill serve`` (whatever transport it starts) on
  a scenario whose ``/skills/delay/invoke`` step is ``{delay: 1000, json: {ok: true}}``,
  plus the bundled healthy scenario (what the readiness poll asks for);
- **nginx** (one worker, ``worker_connections`` 25 000, listen backlog 4096)
  from a ``nginx.conf`` written to a temporary directory, where the same path
  is ``echo_sleep 1; echo '{"ok": true}'`` (libnginx-mod-http-echo): the
  reference for what this client can see of a 1 s timer at all.

Each burst opens ``N`` connections from one client thread, at most
``--connect-window`` (2000) connects in progress at a time, and sends one
``POST`` (``Connection: close``) on each as soon as it is connected; all N
requests are outstanding together. The window is there because the listen
queue holds at most ``net.core.somaxconn`` (4096 here) connections: 10 000
SYNs at once overflow it whatever the server, and the dropped ones are
retried by the kernel 1 s, then 3 s later (nginx: 5.2 s wall for 10 000 at
once, 0 failures), which would time the client's kernel, not the server.
``--connect-window 0`` connects all at once. Each request is timed from the
moment it is fully sent to the last byte of its body (per Content-Length, or
EOF for nginx's chunked answer); the overshoot is that minus 1 s. Wall is
first connect -> last byte; a failure is any error, timeout (``--timeout``)
or status other than 200. Around each burst the kernel's
``TcpExtListenOverflows`` and ``TCPSynRetrans`` are read (``/proc/net/netstat``,
machine-wide: run nothing else meanwhile): a connection the listen queue had
no room for is dropped and its SYN resent after 1 s, which is what a ~1 s
longer burst means. The bursts go to the servers in turn, ``--rounds``
times per size, with 2 s between bursts for sockets to wind down. Overshoot
percentiles are over all the rounds' requests; wall is the median and the
worst round.

The client (``--client epoll``, the default) is one thread on epoll and raw
non-blocking sockets, a few tens of microseconds per request;
``--client asyncio`` is the asyncio-streams client of delay_accuracy.py,
which at 10 000 is itself the bottleneck (nginx: ~7 s wall with it).
The client raises its RLIMIT_NOFILE before starting the servers, which
inherit it (mockskill) or set their own (nginx: ``worker_rlimit_nofile``).
The client is Python on the same cores: it is the same for both servers.
About 1-2 minutes with the defaults. Run::

    python bench/burst_peers.py [--clients 1000 10000 --rounds 2] [--skip-nginx]
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import selectors
import socket
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field

import _common as c
import _peers as p

PATH = "/skills/delay/invoke"
DELAY_S = 1.0
TARGET_WALL_S = {1000: 1.15, 10_000: 2.5}
TARGET_P99_VS_NGINX_MS = 20.0
COUNTERS = ("ListenOverflows", "TCPSynRetrans")
"""Kernel counters read before and after each burst (machine-wide: run nothing else)."""


async def _asyncio_burst(port: int, clients: int, timeout: float, window: int) -> list[c.Timed]:
    """The other benches' client: an asyncio stream per request (costlier per request)."""
    request = c.request_bytes("POST", PATH, port, b"{}")
    gate = asyncio.Semaphore(window) if window else None
    return list(
        await asyncio.gather(
            *(c.timed_request(port, request, timeout, connect_gate=gate) for _ in range(clients))
        )
    )


@dataclass
class _Conn:
    sock: socket.socket
    connect: float
    sent: float = 0.0
    data: bytearray = field(default_factory=bytearray)
    length: int | None = -1
    """Content-Length once the head is in; None: read to EOF; -1: head not in yet."""


def _outcome(data: bytes) -> str:
    status, _ = c.parse_response(bytes(data))
    return "ok" if status == 200 else f"HTTP {status}"


def epoll_burst(port: int, clients: int, timeout: float, window: int) -> list[c.Timed]:
    """*clients* requests from one thread on epoll: non-blocking connects (at most *window*
    in progress), one send each once connected, read to the last body byte.

    A few tens of microseconds per request, so that at 10 000 the client is not what
    is measured. Same timing points as ``_common.timed_request``.
    """
    request = c.request_bytes("POST", PATH, port, b"{}")
    sel = selectors.EpollSelector()
    results: list[c.Timed] = []
    todo, connecting = clients, 0
    open_: dict[int, _Conn] = {}

    def finish(conn: _Conn, outcome: str) -> None:
        sel.unregister(conn.sock)
        conn.sock.close()
        del open_[id(conn)]
        done = time.perf_counter()
        results.append(c.Timed(conn.connect, conn.sent or done, done, outcome))

    while todo or open_:
        while todo and (not window or connecting < window):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            conn = _Conn(sock, time.perf_counter())
            err = sock.connect_ex((c.HOST, port))
            open_[id(conn)] = conn
            sel.register(sock, selectors.EVENT_WRITE, conn)
            todo, connecting = todo - 1, connecting + 1
            if err not in (0, errno.EINPROGRESS):
                connecting -= 1
                finish(conn, errno.errorcode.get(err, str(err)))
        for key, _ in sel.select(0.05):
            conn = key.data
            if not conn.sent:
                connecting -= 1
                err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    finish(conn, errno.errorcode.get(err, str(err)))
                    continue
                try:
                    if conn.sock.send(request) != len(request):
                        finish(conn, "short send")
                        continue
                except OSError as exc:
                    finish(conn, type(exc).__name__)
                    continue
                conn.sent = time.perf_counter()
                sel.modify(conn.sock, selectors.EVENT_READ, conn)
                continue
            try:
                chunk = conn.sock.recv(65536)
            except OSError as exc:
                finish(conn, type(exc).__name__)
                continue
            conn.data += chunk
            if not chunk:
                if conn.length is None or (conn.length >= 0 and _body(conn) >= conn.length):
                    finish(conn, _outcome(conn.data))
                else:
                    finish(conn, "IncompleteRead" if conn.data else "EOF")
                continue
            if conn.length == -1 and b"\r\n\r\n" in conn.data:
                conn.length = _content_length(bytes(conn.data))
            if conn.length is not None and conn.length >= 0 and _body(conn) >= conn.length:
                finish(conn, _outcome(conn.data))
        now = time.perf_counter()
        for conn in [k for k in open_.values() if now - k.connect > timeout]:
            if not conn.sent:
                connecting -= 1
            finish(conn, "timeout")
    sel.close()
    return results


def _content_length(data: bytes) -> int | None:
    head = data.split(b"\r\n\r\n", 1)[0]
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


def _body(conn: _Conn) -> int:
    return len(conn.data) - conn.data.index(b"\r\n\r\n") - 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--rounds", type=int, default=2, help="bursts per size and server")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument(
        "--connect-window",
        type=int,
        default=2000,
        help="connects in progress at most (0: all at once)",
    )
    parser.add_argument(
        "--client",
        choices=("epoll", "asyncio"),
        default="epoll",
        help="epoll: one thread on raw sockets (default); asyncio: the other benches' client",
    )
    parser.add_argument("--skip-nginx", action="store_true")
    args = parser.parse_args()

    nofile = c.raise_nofile()
    if nofile < max(args.clients) + 100:
        raise SystemExit(f"RLIMIT_NOFILE is {nofile}: too low for {max(args.clients)} clients")

    overs: dict[tuple[str, int], list[float]] = {}
    walls: dict[tuple[str, int], list[float]] = {}
    fails: dict[tuple[str, int], Counter[str]] = {}
    drops: dict[tuple[str, int], list[list[int]]] = {}
    with ExitStack() as stack:
        path = stack.enter_context(c.scenario_file(c.DELAY_SCENARIO))
        healthy = str(c.REPO / "scenarios" / "healthy.yaml")
        mock = stack.enter_context(c.serving(lambda port: c.mockskill_cmd(port, [path, healthy])))
        ports = {"mockskill": mock.port}
        if not args.skip_nginx:
            ports["nginx echo_sleep"] = c.free_port()
            stack.enter_context(p.nginx(ports["nginx echo_sleep"], PATH, DELAY_S))
        for clients in args.clients:
            for _ in range(args.rounds):
                for name, port in ports.items():
                    before = c.tcp_counters(*COUNTERS)
                    if args.client == "epoll":
                        timed = epoll_burst(port, clients, args.timeout, args.connect_window)
                    else:
                        burst = _asyncio_burst(port, clients, args.timeout, args.connect_window)
                        timed = asyncio.run(burst)
                    after = c.tcp_counters(*COUNTERS)
                    key = (name, clients)
                    drops.setdefault(key, []).append(
                        [after[n] - before[n] for n in COUNTERS if n in before and n in after]
                    )
                    answered = [t for t in timed if t.outcome == "ok"]
                    overs.setdefault(key, []).extend(
                        ((t.done - t.sent) - DELAY_S) * 1000 for t in answered
                    )
                    walls.setdefault(key, []).append(
                        max(t.done for t in timed) - min(t.connect for t in timed)
                    )
                    fails.setdefault(key, Counter()).update(
                        t.outcome for t in timed if t.outcome != "ok"
                    )
                    time.sleep(2.0)

    print(
        f"concurrent POSTs to a {DELAY_S:.0f} s delay, one connection each, at most"
        f" {args.connect_window or 'all'} connects in progress; client: {args.client};"
        f" {args.rounds} bursts per size and server, in turn"
    )
    print(f"{c.machine()}; nginx {p.nginx_version()}")
    rows = []
    for (name, clients), over in overs.items():
        key = (name, clients)
        failures = sum(fails[key].values())
        wall = c.median(walls[key])
        verdict = ""
        if name == "mockskill" and clients in TARGET_WALL_S:
            target = TARGET_WALL_S[clients]
            ok = max(walls[key]) <= target and failures == 0
            verdict = f"{'met' if ok else 'MISSED'} (<= {target} s, 0 failures)"
        rows.append(
            (
                name,
                clients,
                f"{wall:.2f}",
                f"{max(walls[key]):.2f}",
                f"{failures} {dict(fails[key]) or ''}".strip(),
                f"{c.percentile(over, 50):.0f}",
                f"{c.percentile(over, 99):.0f}",
                f"{max(over):.0f}" if over else "nan",
                " ".join("/".join(str(v) for v in burst) for burst in drops[key]) or "?",
                verdict,
            )
        )
    headers = (
        "server",
        "clients",
        "wall s (median)",
        "wall s (worst)",
        "failures",
        "over p50 ms",
        "over p99 ms",
        "over max ms",
        "overflows/SYNs resent per burst",
        "target",
    )
    c.print_table(headers, rows)
    ours, ref = overs.get(("mockskill", 1000)), overs.get(("nginx echo_sleep", 1000))
    if ours and ref:
        gap = c.percentile(ours, 99) - c.percentile(ref, 99)
        verdict = "met" if gap <= TARGET_P99_VS_NGINX_MS else "MISSED"
        print(
            f"overshoot p99 at 1000: mockskill - nginx = {gap:.0f} ms"
            f" (target <= {TARGET_P99_VS_NGINX_MS:.0f} ms: {verdict})"
        )


if __name__ == "__main__":
    main()
