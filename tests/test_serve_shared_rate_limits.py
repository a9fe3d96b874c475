"""Three ``mockskill serve --state redis://...`` replicas share one rate limit's bucket.

Real processes on ephemeral ports, a real Redis, several clients at once
spread over the replicas: the replicas admit exactly what the bucket holds,
then the tokens it refilled (on Redis's clock), and refuse the rest with 429.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
import test_serve_shared
from test_serve_shared import Serve

serve = test_serve_shared.serve
"""``serve(*args)``: a ``mockskill serve`` process (the fixture of tests/test_serve_shared.py)."""

HERD = """\
name: herd
skills:
  - id: search
    rate_limit: {capacity: 20, refill: 1}
    invoke: {json: {ok: true}}
  - id: warm
    invoke: {json: {ok: true}}
"""
CAPACITY, REFILL = 20, 1.0
CLIENTS = 12
EACH = 10
"""Requests each client sends in a burst: 120 for a bucket of 20."""


def burst(bases: list[str]) -> Counter[int]:
    """*CLIENTS* clients at once, each with its own connections, sending *EACH* requests
    round robin over the replicas (one session: one bucket); the statuses answered."""
    go = threading.Barrier(CLIENTS)

    def client(n: int) -> list[int]:
        with requests.Session() as http:
            http.headers["Mockskill-Session"] = "herd"
            replicas = itertools.islice(itertools.cycle(bases), n, None)
            go.wait()
            return [
                http.post(
                    f"{base}/skills/search/invoke", json={"input": {}}, timeout=30
                ).status_code
                for base in itertools.islice(replicas, EACH)
            ]

    with ThreadPoolExecutor(CLIENTS) as pool:
        return Counter(itertools.chain.from_iterable(pool.map(client, range(CLIENTS))))


def test_three_replicas_admit_exactly_capacity_plus_refill_times_elapsed(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    files = tmp_path / "herd.yaml"
    files.write_text(HERD, encoding="utf-8")
    bases = [serve("--state", redis_url, str(files)) for _ in range(3)]
    for base in bases:  # each replica's connection to Redis made, its scripts loaded
        warm = requests.post(f"{base}/skills/warm/invoke", json={"input": {}}, timeout=10)
        assert warm.status_code == 200

    start = time.monotonic()
    first = burst(bases)
    end = time.monotonic()
    time.sleep(2.2)
    again = time.monotonic()
    second = burst(bases)
    last = time.monotonic()

    assert set(first) | set(second) <= {200, 429}
    assert first[200] + first[429] == second[200] + second[429] == CLIENTS * EACH
    # The bucket refills a token a second from its first spending: the first burst admits
    # the 20 it holds and the whole tokens refilled meanwhile (none, under a second); the
    # second what refilled since (2 tokens, 2.2 s later).
    assert CAPACITY <= first[200] <= CAPACITY + math.floor(REFILL * (end - start))
    refilled = first[200] + second[200] - CAPACITY
    assert math.floor(REFILL * (again - end)) <= refilled <= math.floor(REFILL * (last - start))
    if end - start < 1 and last - start < 3:  # as it goes unless the machine stalls
        assert (first[200], second[200]) == (20, 2)
