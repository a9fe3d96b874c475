"""The shared journal's cost (issue 14): record() on the caller's side, the flusher's rate.

Starts a private ``redis-server`` on a free port (no persistence) and a
:class:`~mockskill.store.journal.RedisJournal` on it, and measures:

- **record()**, the part a request pays on its thread (the event loop): the
  journal made with ``start=False`` (no flusher), *--records* calls, best of
  three, CPU µs per call (``time.process_time``: the machine is shared);
  beside it the in-memory ``State.record`` for scale;
- **the flusher alone**: that many records queued first, then the flusher
  started: entries/s until all are in the stream, the batches it took;
- **both at once**: records in a tight loop with the flusher running (what a
  wrk-like load does, but faster: the loop records far more per second than a
  server serves): the wall time until all are sent, the batch sizes, and how
  many a full queue let go (``trimmed``: behind *capacity* newer ones);
- **reads**: ``entries()`` of a full journal, the first time (decoding each
  entry) and again (decoding none), and of one session.

``--calls N`` records N entries into a journal with no flusher and exits
(``--drain``: then starts the flusher and sends them all): for instruction
counts under callgrind, ``(run of N2 - run of N1) / (N2 - N1)``, of the
caller's side alone, or of recording and sending (the flusher's share: the
difference of the two)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/journal.py --calls 20000 [--drain] [--into memory|none]

Run::

    python bench/journal.py [--records 30000] [--capacity 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator

import redis

from mockskill.engine.entries import Entry
from mockskill.engine.state import State
from mockskill.store.journal import RedisJournal

SESSIONS = 30


def recorded(n: int) -> list[Entry]:
    """*n* entries as the engine records an error step's (30 sessions, round robin)."""
    now = time.time()
    return [
        Entry(0, now, now + 0.0004, f"client-{k % SESSIONS}", "POST",
                 "/skills/endpoint-unreachable/invoke", 503, "invoke",
                 "endpoint-unreachable", "bundled", 0, k, "ENDPOINT_UNREACHABLE")
        for k in range(n)
    ]  # fmt: skip


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    program = shutil.which("redis-server")
    if program is None:
        raise SystemExit("redis-server is not on the PATH (apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="mockskill-bench-redis-")
    args = [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", folder]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port)
        for _ in range(500):
            with contextlib.suppress(redis.ConnectionError):
                client.ping()
                break
            time.sleep(0.01)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def journal(url: str, capacity: int, *, start: bool) -> RedisJournal:
    client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
    client.flushall()
    return RedisJournal(client, "mockskill:bench:", capacity, "bench:1", start=start)


def nothing(entry: Entry) -> None:
    """Record nowhere: the loop's own cost."""


def cpu_per_call(records: list[Entry], record: Callable[[Entry], None]) -> float:
    started = time.process_time()
    for entry in records:
        record(entry)
    return (time.process_time() - started) / len(records) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--capacity", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--drain", action="store_true", help="with --calls: then send them")
    parser.add_argument(
        "--into",
        choices=("journal", "memory", "none"),
        default="journal",
        help="with --calls: record into the Redis journal, the in-memory State, or nothing"
        " (the loop and the entries' making alone, to subtract)",
    )
    options = parser.parse_args()
    with redis_server() as url:
        if options.calls is not None:
            idle = journal(url, options.calls, start=False)
            entries = recorded(options.calls)
            into: dict[str, Callable[[Entry], None]] = {
                "journal": idle.record,
                "memory": State(seed=1, journal_size=options.calls).record,
                "none": nothing,
            }
            record = into[options.into]
            for entry in entries:
                record(entry)
            if options.drain:
                idle.start()
                assert idle.flush(timeout=600)
                assert idle.sent == options.calls
            return
        records = recorded(options.records)
        rows = []

        best = []
        for _ in range(3):
            idle = journal(url, options.records, start=False)
            best.append(cpu_per_call(records, idle.record))
        state = State(seed=1, journal_size=options.capacity)
        memory = min(cpu_per_call(records, state.record) for _ in range(3))
        rows.append(("record(), caller's CPU", f"{min(best):.2f} µs/call",
                     f"in-memory State.record: {memory:.2f} µs/call"))  # fmt: skip

        queued = journal(url, options.records, start=False)
        for entry in records:
            queued.record(entry)
        started = time.perf_counter()
        queued.start()
        assert queued.flush(timeout=300)
        took = time.perf_counter() - started
        per_batch = queued.sent / max(queued.batches, 1)
        rows.append(("flusher alone", f"{options.records / took:,.0f} entries/s",
                     f"{queued.batches} batches, {per_batch:.0f} per batch"))  # fmt: skip
        queued.close()

        busy = journal(url, options.capacity, start=True)
        started = time.perf_counter()
        for entry in records:
            busy.record(entry)
        recorded_in = time.perf_counter() - started
        assert busy.flush(timeout=300)
        took = time.perf_counter() - started
        rows.append(("tight loop + flusher", f"{options.records / took:,.0f} records/s",
                     f"recording {recorded_in / options.records * 1e6:.2f} µs/call wall; "
                     f"{busy.sent} sent in {busy.batches} batches "
                     f"({busy.sent / max(busy.batches, 1):.0f} per batch), "
                     f"{busy.trimmed} trimmed, {busy.lost} lost"))  # fmt: skip

        full = journal(url, options.capacity, start=True)
        for entry in records[: options.capacity]:
            full.record(entry)
        full.flush(timeout=300)
        for label in ("entries(), first read", "entries(), read again"):
            started = time.perf_counter()
            count = len(full.entries())
            rows.append((label, f"{(time.perf_counter() - started) * 1e3:.0f} ms",
                         f"{count} entries"))  # fmt: skip
        started = time.perf_counter()
        count = len(full.entries("client-7"))
        rows.append(("entries(session)", f"{(time.perf_counter() - started) * 1e3:.0f} ms",
                     f"{count} entries"))  # fmt: skip
        full.close()
        busy.close()

    print("| measure | figure | notes |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
