"""The reference servers of issue 13's benchmarks (not a benchmark itself).

This module owns how the peers are found, configured, started and stopped,
so that every script measures them the same way beside mockskill:

- **the floor**: bench/floor_server.py (asyncio + httptools, one constant answer);
- **WireMock** (the fastest peer): the standalone jar bundled by the npm package
  ``wiremock`` 3.13.x, installed into a cache folder outside git
  (``$MOCKSKILL_BENCH_CACHE``, default ``~/.cache/mockskill-bench``), run with
  ``--no-request-journal --disable-request-logging`` as a user tuning it for
  load would, with one stub equal to mockskill's ``endpoint-unreachable`` answer;
- **nginx** with the echo module's ``echo_sleep`` (the delay reference): a
  ``nginx.conf`` written to a temporary directory, nginx run as a child in
  the foreground (``daemon off``), stopped with SIGTERM (SIGKILL after 10 s).

Everything listens on 127.0.0.1 only, on a free port picked for the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import _common as c

WIREMOCK_NPM = "wiremock@3.13"
CACHE = Path(os.environ.get("MOCKSKILL_BENCH_CACHE", Path.home() / ".cache" / "mockskill-bench"))
FLOOR = c.BENCH_DIR / "floor_server.py"
NGINX_ECHO = Path("/usr/lib/nginx/modules/ngx_http_echo_module.so")
SKIPPED_HEADERS = {"date", "server", "content-length", "connection"}
"""Headers of mockskill's answer a stub does not copy: each server sets its own."""


@dataclass
class Answer:
    """One HTTP answer as read off the wire: what a stub has to reproduce."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def fetch(port: int, request: bytes) -> Answer:
    """Send one request on a new connection; the answer's status, headers and body."""
    with socket.create_connection((c.HOST, port), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
    return Answer(int(lines[0].split(" ", 2)[1]), headers, body)  # type: ignore[arg-type]


def error_request(port: int, connection: str = "close") -> bytes:
    """The benches' ``POST /skills/endpoint-unreachable/invoke`` with ``{}``."""
    return (
        f"POST {c.ERROR_PATH} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n"
        f"Connection: {connection}\r\n\r\n{{}}"
    ).encode()


def wait_for(probe: Callable[[], bool], deadline: float, proc: subprocess.Popen[bytes]) -> None:
    """Call *probe* every 5 ms until it is true; fail if *proc* exits or time runs out."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before answering")
        with contextlib.suppress(OSError, ValueError, IndexError):
            if probe():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{proc.args!r} did not answer in time")
        time.sleep(0.005)


@contextlib.contextmanager
def running(
    cmd: list[str],
    ready: Callable[[], bool],
    *,
    timeout: float = 60.0,
    stop_signal: int = signal.SIGTERM,
) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """Run *cmd* (output discarded) until *ready*; yield it and the seconds to ready."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(c.BENCH_DIR)
    )
    try:
        wait_for(ready, time.monotonic() + timeout, proc)
        yield proc, time.perf_counter() - started
    finally:
        if proc.poll() is None:
            proc.send_signal(stop_signal)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def answers_status(port: int, status: int) -> Callable[[], bool]:
    return lambda: fetch(port, error_request(port)).status == status


# --------------------------------------------------------------------------- mockskill


@contextlib.contextmanager
def mockskill(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m mockskill serve`` on the bundled scenarios: whatever transport it starts."""
    with running(c.mockskill_cmd(port), answers_status(port, 503)) as (proc, _):
        yield proc


# --------------------------------------------------------------------------- the floor


@contextlib.contextmanager
def floor(port: int, body: bytes | None = None) -> Iterator[subprocess.Popen[bytes]]:
    with tempfile.TemporaryDirectory(prefix="mockskill-floor-") as tmp:
        cmd = [sys.executable, str(FLOOR), "--port", str(port)]
        if body is not None:
            (Path(tmp) / "body").write_bytes(body)
            cmd += ["--body", str(Path(tmp) / "body")]
        with running(cmd, answers_status(port, 503)) as (proc, _):
            yield proc


# --------------------------------------------------------------------------- WireMock


def wiremock_jar(install: bool = True) -> Path:
    """The standalone jar from the npm package, installing it into CACHE if it is missing."""
    folder = CACHE / "wiremock"
    found = sorted(folder.glob("node_modules/wiremock/build/wiremock-standalone-*.jar"))
    if not found and install:
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("WireMock: npm is not installed (see bench/setup.sh)")
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", WIREMOCK_NPM],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return wiremock_jar(install=False)
    if not found:
        raise SystemExit(f"WireMock: no wiremock-standalone-*.jar under {folder}")
    return found[-1]


def wiremock_stub(answer: Answer) -> dict[str, object]:
    """A WireMock mapping answering the error path exactly as mockskill did."""
    headers = {k: v for k, v in answer.headers if k.lower() not in SKIPPED_HEADERS}
    return {
        "request": {"method": "POST", "url": c.ERROR_PATH},
        "response": {
            "status": answer.status,
            "headers": headers,
            "body": answer.body.decode(),
        },
    }


@contextlib.contextmanager
def wiremock(port: int, answer: Answer) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """A fresh JVM running WireMock with the one stub; yields it and seconds to first answer."""
    java = shutil.which("java")
    if java is None:
        raise SystemExit("WireMock: java is not installed (see bench/setup.sh)")
    jar = wiremock_jar()
    with tempfile.TemporaryDirectory(prefix="mockskill-wiremock-") as tmp:
        (Path(tmp) / "mappings").mkdir()
        (Path(tmp) / "__files").mkdir()
        stub = json.dumps(wiremock_stub(answer), indent=2)
        (Path(tmp) / "mappings" / "endpoint-unreachable.json").write_text(stub)
        cmd = [
            java,
            "-jar",
            str(jar),
            "--port",
            str(port),
            "--bind-address",
            c.HOST,
            "--root-dir",
            tmp,
            "--no-request-journal",
            "--disable-request-logging",
            "--disable-banner",
        ]
        with running(cmd, answers_status(port, answer.status), timeout=90) as started:
            yield started


def wiremock_version() -> str:
    try:
        return wiremock_jar(install=False).stem.removeprefix("wiremock-standalone-")
    except SystemExit:
        return "not installed"


# --------------------------------------------------------------------------- nginx

NGINX_CONF = """\
load_module {echo};
worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
worker_rlimit_nofile 30000;
events {{ worker_connections 25000; multi_accept on; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 100000;
    server {{
        listen {host}:{port} backlog=4096;
        default_type application/json;
        location = {delay_path} {{
            echo_sleep {delay_s};
            echo '{{"ok": true}}';
        }}
        location = /ready {{ return 200 'ready'; }}
    }}
}}
"""


@contextlib.contextmanager
def nginx(port: int, delay_path: str, delay_s: float) -> Iterator[subprocess.Popen[bytes]]:
    """nginx (one worker) whose *delay_path* answers after ``echo_sleep delay_s``."""
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(exe).exists() or not NGINX_ECHO.exists():
        raise SystemExit("nginx or libnginx-mod-http-echo is not installed (see bench/setup.sh)")
    with tempfile.TemporaryDirectory(prefix="mockskill-nginx-") as tmp:
        conf = Path(tmp) / "nginx.conf"
        values = {"echo": NGINX_ECHO, "tmp": tmp, "host": c.HOST, "port": port}
        conf.write_text(NGINX_CONF.format(**values, delay_path=delay_path, delay_s=delay_s))
        os.chmod(tmp, 0o755)  # the worker runs as nobody when started by root
        cmd = [exe, "-p", tmp, "-c", str(conf), "-e", f"{tmp}/error.log"]
        ready_req = b"GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

        def ready() -> bool:
            return fetch(port, ready_req).status == 200

        # SIGTERM: nginx's fast stop (master and worker); SIGKILL after 10 s if not.
        with running(cmd, ready, stop_signal=signal.SIGTERM) as (proc, _):
            yield proc


def nginx_version() -> str:
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    try:
        out = subprocess.run([exe, "-v"], capture_output=True, text=True, check=False).stderr
    except OSError:
        return "not installed"
    return out.strip().removeprefix("nginx version: ")
