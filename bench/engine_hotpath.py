"""CPU per request of the engine's hot path, in process: LoopDispatcher.plan + played.

Builds the app as ``mockskill serve`` does on the bundled scenarios (a
Server, not started; its engine opened, so the refused port is held), then
hands its :class:`~mockskill.server.dispatch.LoopDispatcher` a transport Request for each
case and reports it played, *--iterations* times, timed with
``time.process_time`` (CPU, not wall clock: the machine is shared). No socket
and no loop: what is measured is the engine's planning and the journal's
append, the part of a request that is the engine's. Run::

    python bench/engine_hotpath.py [--iterations 20000] [--profile CASE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from mockskill.engine.plan import Outcome
from mockskill.server import Server
from mockskill.server.dispatch import LoopDispatcher
from mockskill.transport import Request

CASES = {
    "error-step": ("POST", "/skills/endpoint-unreachable/invoke", b"{}"),
    "translate": ("POST", "/skills/translate/invoke", b'{"text": "Hello world"}'),
    "describe": ("GET", "/skills/translate", b""),
}


def request(method: str, target: str, body: bytes, port: int) -> Request:
    headers: tuple[tuple[str, str], ...] = (("Host", f"127.0.0.1:{port}"),)
    if body:
        headers += (("Content-Type", "application/json"), ("Content-Length", str(len(body))))
    return Request(
        method=method,
        target=target,
        version="1.1",
        headers=headers,
        body=body,
        peer=("127.0.0.1", 50000),
        local=("127.0.0.1", port),
        time=time.time(),
        connection=1,
        index=1,
    )


def run(surface: LoopDispatcher, req: Request, iterations: int) -> float:
    """Microseconds of CPU per plan()+played()."""
    started = time.process_time()
    for _ in range(iterations):
        plan = surface.plan(req)
        now = time.time()
        surface.played(req, Outcome(plan.answer, now, now, now))  # type: ignore[union-attr]
    return (time.process_time() - started) / iterations * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--profile", choices=sorted(CASES), help="cProfile one case instead")
    args = parser.parse_args()
    server = Server(quiet=True)
    server.engine.open()
    surface = LoopDispatcher(server.engine, server._admin_wsgi)
    port = 8080
    try:
        if args.profile:
            req = request(*CASES[args.profile], port)
            run(surface, req, 1000)
            profiler = cProfile.Profile()
            profiler.runcall(run, surface, req, args.iterations)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            return
        for name, case in CASES.items():
            req = request(*case, port)
            # Warm: caches filled and the journal at its capacity (steady state: each
            # append drops the oldest), so every case is measured alike.
            run(surface, req, server.state.capacity + 1000)
            best = min(run(surface, req, args.iterations) for _ in range(3))
            print(f"{name:12} {best:7.1f} us/request (plan + played, best of 3)")
        print(f"journal: {len(server.state.journal())} entries (capacity {server.state.capacity})")
    finally:
        surface.close()
        server.engine.close()


if __name__ == "__main__":
    main()
