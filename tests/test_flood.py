"""After a flood of connections: the journal is packed before the heap is trimmed.

Each hanging connection that a client closes leaves a ``client_left`` entry,
made among the connections' objects; kept as they were made, ten thousand of
them would keep most of the flood's memory (bench/hang_flood.py). The server
has its journal pack them (State.compact) when the flood has gone, then trims.
"""

from __future__ import annotations

import resource
import socket
import sys
import textwrap
import time
from collections.abc import Callable

import pytest

from mockskill import Server, load_text
from mockskill.engine.state import COMPACT_SLICE
from mockskill.transport import shared

HANG = """
    skills:
      - id: hang
        invoke: {hang: 60000}
"""
FLOOD = shared.TRIM_AFTER + 100


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2 * FLOOD + 100,
    reason="too few descriptors for a flood",
)
def test_the_journal_is_packed_before_the_heap_is_trimmed_after_a_flood(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server(load_text(textwrap.dedent(HANG)), quiet=True)
    compact = server.state.compact
    calls: list[tuple[bool, int]] = []

    def compact_seen(budget: int = COMPACT_SLICE) -> bool:
        # The state's own compaction; noted with the trims done before it.
        done = compact(budget)
        assert server._transport is not None
        calls.append((done, server._transport.heap_trims))
        return done

    monkeypatch.setattr(server.state, "compact", compact_seen)
    with server:  # binding raises the descriptor limit
        assert server._transport is not None
        transport = server._transport
        request = b"POST /skills/hang/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        clients = []
        for _ in range(FLOOD):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            client.sendall(request)
            clients.append(client)
        wait_until(lambda: transport.open_connections == FLOOD)
        time.sleep(0.5)  # every request read: each hangs in the journal-to-be
        assert calls == []  # no compaction while the flood is held
        for client in clients:
            client.close()
        wait_until(lambda: bool(calls) and calls[-1][0])
        journal = server.state.journal()
        assert len(journal) == FLOOD
        assert all(e.client_left is not None and e.path == "/skills/hang/invoke" for e in journal)
        assert [e.id for e in journal] == sorted(e.id for e in journal)
        assert {trims for _, trims in calls} == {0}  # packed first, then trimmed
        if shared._malloc_trim() is not None:
            wait_until(lambda: transport.heap_trims == 1)
        # The set of connections is made anew: a set never shrinks, the flood's table would stay.
        assert transport._shared is not None
        bookkeeping = transport._shared
        wait_until(lambda: sys.getsizeof(bookkeeping.connections) < sys.getsizeof(set(range(99))))
