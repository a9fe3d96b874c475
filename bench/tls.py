"""HTTPS against plain HTTP, in the same run (issue 16): handshakes/s, keep-alive req/s, start-up.

One ``python -m mockskill serve --tls --http-port Q`` process serves the same
scenarios over HTTPS (its port) and plain HTTP (Q). ``wrk -t2 -c32`` loads
``POST /skills/endpoint-unreachable/invoke`` (the 503 error step), in turn:

- **Connection: close** on every request: a new connection, so a TLS
  handshake, per request — the handshakes per second;
- **keep-alive** (wrk's default): the steady cost of TLS on a kept connection.

Each load runs ``--rounds`` times, the two ports in turn; medians and the
ratio TLS / plain are printed. Every answer must be the error step's 503.

Start-up: process start to the first correct answer, ``serve --tls`` (over
HTTPS) beside ``serve`` (plain), ``--starts`` times each, medians; and, in a
child interpreter, the certificate generation alone (the local CA and the
server's leaf: ``mockskill.transport.tls.authority().server_context()``),
whose budget is 500 ms. Run::

    python bench/tls.py [--duration 5 --rounds 3 --starts 5]

(~1 min; needs wrk.)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

WRK_LUA = """
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
"""
MODES = {"keep-alive": [], "Connection: close": ["-H", "Connection: close"]}


def run_wrk(url: str, seconds: int, mode: str, lua: str) -> float:
    cmd = ["wrk", "-t2", "-c32", f"-d{seconds}s", *MODES[mode], "-s", lua, url]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=seconds + 30)
    text = out.stdout
    if "Non-2xx or 3xx responses" not in text:
        raise RuntimeError(f"expected every answer to be the 503 error step:\n{text}")
    requests = int(re.search(r"(\d+) requests in", text).group(1))  # type: ignore[union-attr]
    non2xx = int(re.search(r"Non-2xx or 3xx responses: (\d+)", text).group(1))  # type: ignore[union-attr]
    if requests != non2xx:
        raise RuntimeError(f"{requests - non2xx} answers were not the 503:\n{text}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))  # type: ignore[union-attr]


def ready_tls(port: int, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    """Poll until ``GET /skills/translate`` answers 200 over TLS (unverified: speed only)."""
    context = ssl._create_unverified_context()
    request = c.request_bytes("GET", c.DESCRIBE_PATH, port)
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with (
                socket.create_connection((c.HOST, port), timeout=2) as raw,
                context.wrap_socket(raw) as sock,
            ):
                sock.sendall(request)
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                    if b"\r\n\r\n" in data:
                        break
            if data.startswith(b"HTTP/1.1 200"):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("no TLS answer")
        time.sleep(0.001)


def start_once(tls: bool) -> float:
    port = c.free_port()
    cmd = [sys.executable, "-m", "mockskill", "serve", "--port", str(port), "--quiet"]
    cmd += ["--tls"] if tls else []
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(c.BENCH_DIR)
    )
    try:
        if tls:
            ready_tls(port, time.monotonic() + 20, proc)
        else:
            c.wait_ready(port, time.monotonic() + 20, proc)
        return time.perf_counter() - started
    finally:
        c.stop(proc)


CERTS = """
import json, time
t = time.perf_counter()
from mockskill.transport import tls
imported = time.perf_counter()
tls.authority().server_context(["127.0.0.1"])
done = time.perf_counter()
print(json.dumps({"import": imported - t, "generate": done - imported}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see bench/setup.sh)")
    c.raise_nofile()
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="mockskill-bench-") as tmp:
        lua = str(Path(tmp) / "post.lua")
        Path(lua).write_text(WRK_LUA)
        port, plain = c.free_port(), c.free_port()
        cmd = [sys.executable, "-m", "mockskill", "serve", "--port", str(port), "--quiet"]
        cmd += ["--tls", "--http-port", str(plain)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(c.BENCH_DIR)
        )
        try:
            ready_tls(port, time.monotonic() + 20, proc)
            c.wait_ready(plain, time.monotonic() + 20, proc)
            urls = {
                "HTTPS": f"https://{c.HOST}:{port}{c.ERROR_PATH}",
                "HTTP": f"http://{c.HOST}:{plain}{c.ERROR_PATH}",
            }
            for _ in range(args.rounds):
                for mode in MODES:
                    for name, url in urls.items():
                        rps = run_wrk(url, args.duration, mode, lua)
                        results.setdefault((name, mode), []).append(rps)
        finally:
            c.stop(proc)
    starts = {tls: [start_once(tls) for _ in range(args.starts)] for tls in (False, True)}
    certs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", CERTS], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(args.starts)
    ]

    print(f"POST {c.ERROR_PATH} (503), wrk -t2 -c32, {args.rounds} x {args.duration} s, in turn")
    rows = []
    for mode in MODES:
        tls_rps = c.median(results[("HTTPS", mode)])
        plain_rps = c.median(results[("HTTP", mode)])
        rows.append(
            (
                mode,
                f"{tls_rps:,.0f}",
                f"{plain_rps:,.0f}",
                f"{tls_rps / plain_rps:.0%}",
                " / ".join(f"{r:,.0f}" for r in results[("HTTPS", mode)]),
            )
        )
    c.print_table(("load", "HTTPS req/s", "HTTP req/s", "HTTPS / HTTP", "HTTPS runs"), rows)
    print()
    c.print_table(
        ("start-up (median)", "ms"),
        [
            ("serve (plain), first answer", f"{c.median(starts[False]) * 1000:.0f}"),
            ("serve --tls, first HTTPS answer", f"{c.median(starts[True]) * 1000:.0f}"),
            (
                "certificates: import trustme",
                f"{c.median([x['import'] for x in certs]) * 1000:.0f}",
            ),
            (
                "certificates: CA + leaf made",
                f"{c.median([x['generate'] for x in certs]) * 1000:.0f}",
            ),
        ],
    )
    print()
    print(c.machine())


if __name__ == "__main__":
    main()
