"""Watched tasks followed by the transport (mockskill/transport/task_watches.py): a watch's
record read again at the task's poll cadence, what it planned replaced by what follows
from the new reading (``Streaming.follow``), held open with heartbeats while the task
waits, and forgotten when its stream is over. A real server, httpx streaming.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from event_streams import parse_sse

SSE = {"Accept": "text/event-stream"}

POLLED = """
skills:
  - id: counted
    task:
      poll_after: 100ms
      watch: {heartbeat: 30ms}
      life:
        - {status: working, polls: 1}
        - {status: completed, json: {done: true}}
"""
"""Working for one poll: only a poll moves it on, and a poll tells no watch at once (it
counts, it does not cancel or give input): the watch sees it at its next reading."""


def test_a_change_made_by_a_poll_is_seen_at_the_next_reading(serve: Any) -> None:
    server = serve(POLLED)
    url = httpx.post(f"{server.url}/skills/counted/invoke").headers["Location"]

    def polled_twice() -> None:  # the first poll answers working, the second ends the phase
        time.sleep(0.2)
        httpx.get(url)
        httpx.get(url)

    poller = threading.Thread(target=polled_twice)
    poller.start()
    with httpx.stream("GET", url, headers=SSE, timeout=10) as answer:
        body = answer.read()
    poller.join()
    parsed = parse_sse(body)
    assert [(e.type, e.last_event_id) for e in parsed.events] == [
        ("working", "0"),
        ("completed", "1"),
    ]
    assert parsed.events[-1].json()["task"]["result"] == {"done": True}
    assert parsed.comments  # heartbeats while it was held open, waiting for the polls


def test_a_watch_over_is_forgotten(serve: Any) -> None:
    server = serve(POLLED)
    url = httpx.post(f"{server.url}/skills/counted/invoke").headers["Location"]
    with httpx.stream("GET", url, headers=SSE, timeout=10) as answer:
        for line in answer.iter_lines():
            if line.startswith("id:"):
                assert len(server.watches) == 1  # followed while it is held open
                break
    deadline = time.monotonic() + 5
    while len(server.watches) and time.monotonic() < deadline:
        time.sleep(0.02)  # (the server sees the client gone a moment after it left)
    assert len(server.watches) == 0
