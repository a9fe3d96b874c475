"""What one keep-alive request to each skill of a scenario costs, two load-independent ways.

:func:`engine_cpu` times the engine alone in this process (engine_hotpath.py's plan and
record); :func:`instructions_per_request` counts the instructions of ``mockskill serve``
under callgrind (bench/callgrind_request.py's way: an N2 run less an N1 run, over N2 - N1).
The benchmarks that compare skills side by side (templates.py, rate_limits.py) share them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import _common as c
from callgrind_request import _connect, _exchange, _stop, _total

Expected = Callable[[str, int], "int | None"]
"""The status the n-th request (0-based) to a skill must get; None: any."""


def engine_cpu(
    scenario: str,
    skills: Iterable[str],
    body: bytes,
    headers: tuple[tuple[str, str], ...],
    iterations: int,
) -> dict[str, float]:
    """Microseconds of CPU per POST of *body* (with *headers*) to each skill's invoke, in
    the engine alone, best of three, after a warm-up that fills the journal."""
    from engine_hotpath import run

    from mockskill import Server, load_text
    from mockskill.server.dispatch import LoopDispatcher
    from mockskill.transport import Request

    server = Server(load_text(scenario, "bench.yaml"), quiet=True)
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)
    best: dict[str, float] = {}
    try:
        for skill in skills:
            req = Request(
                method="POST",
                target=f"/skills/{skill}/invoke",
                version="1.1",
                headers=(
                    ("Host", "127.0.0.1:8080"),
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(body))),
                    *headers,
                ),
                body=body,
                peer=("127.0.0.1", 50000),
                local=("127.0.0.1", 8080),
                time=time.time(),
                connection=1,
                index=1,
            )
            run(surface, req, server.state.capacity + 1000)  # warm: the journal full
            best[skill] = min(run(surface, req, iterations) for _ in range(3))
    finally:
        surface.close()
        server.engine.close()
    return best


def instructions_per_request(
    scenario: str,
    skills: Iterable[str],
    body: str,
    headers: tuple[tuple[str, str], ...],
    expected: Expected,
    n1: int,
    n2: int,
    warmup: int,
) -> dict[str, float]:
    """Instructions per POST of *body* (with *headers*) to each skill's invoke: (the N2 run
    - the N1 run) / (N2 - N1), both after *warmup* requests."""
    per: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mockskill-callgrind-") as tmp:
        for skill in skills:
            low, high = (
                _instructions(scenario, skill, body, headers, expected, n, warmup, Path(tmp))
                for n in (n1, n2)
            )
            per[skill] = (high - low) / (n2 - n1)
    return per


def _instructions(
    scenario: str,
    skill: str,
    body: str,
    headers: tuple[tuple[str, str], ...],
    expected: Expected,
    requests: int,
    warmup: int,
    where: Path,
) -> int:
    """Instructions of ``mockskill serve`` under callgrind answering *warmup* + *requests*
    POSTs to *skill* on one kept-alive connection."""
    port = c.free_port()
    out = where / f"callgrind.{skill}.{requests}.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    cmd += ["-m", "mockskill", "serve", "--port", str(port), "--quiet", "--journal-size", "1000"]
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    request = (
        f"POST /skills/{skill}/invoke HTTP/1.1\r\nHost: {c.HOST}:{port}\r\n"
        f"Content-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    with c.scenario_file(scenario) as path:
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
                for n in range(warmup + requests):
                    status = _exchange(sock, request, pending)
                    wanted = expected(skill, n)
                    if wanted is not None and status != wanted:
                        raise RuntimeError(f"{skill}: a {status}, not a {wanted}")
            _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _total(out)
