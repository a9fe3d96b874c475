"""Pieces due together go as their runs (found as the play is made:
tests/engine/test_plan.py): a piece with a delay and the pieces with none after it go as
one write (mockskill/transport/streaming.py), counted and journalled as the pieces they
are; a burst of a hundred thousand events is a few writes.

Plans are made by hand, the client is a raw socket (the bytes as sent), on both loops.
"""

from __future__ import annotations

import socket

import pytest
from transport_helpers import LOOPS, Recorder, serving

from mockskill.engine.plan import Answer, Plan, StreamPiece, StreamPlay

SSE = (("Content-Type", "text/event-stream; charset=utf-8"),)


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def event(n: int, delay_ms: float = 0) -> StreamPiece:
    return StreamPiece(delay_ms, b"id: %d\ndata: %d\n\n" % (n, n), str(n))


def read_to_last_chunk(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while not got.endswith(b"\r\n0\r\n\r\n"):
            data = s.recv(1 << 20)
            assert data, "closed before the last chunk"
            got += data
    return got


def test_a_burst_of_many_events_arrives_whole_in_order_and_is_counted(loop: str) -> None:
    pieces = tuple(event(n) for n in range(1, 20_001))
    plan = Plan(Answer(200, SSE), stream=StreamPlay(pieces))
    recorder = Recorder(lambda _: plan)
    with serving(recorder, loop=loop) as (server, _):
        got = read_to_last_chunk(server.port)
        ((_, outcome),) = recorder.wait_for(1)
    body = got.partition(b"\r\n\r\n")[2]
    ids = [int(line[4:]) for line in body.split(b"\n") if line.startswith(b"id: ")]
    assert ids == list(range(1, 20_001))
    assert outcome.stream is not None
    assert outcome.stream[:3] == (20_000, "20000", "complete")


def test_a_client_leaving_during_a_pause_is_journalled_with_the_burst_before_it(
    loop: str,
) -> None:
    burst = tuple(event(n) for n in range(1, 101))
    plan = Plan(Answer(200, SSE), stream=StreamPlay((*burst, event(101, 5000))))
    recorder = Recorder(lambda _: plan)
    with serving(recorder, loop=loop) as (server, _):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"id: 100\n" not in got:
                got += s.recv(1 << 16)
        ((_, outcome),) = recorder.wait_for(1)
    assert outcome.stream is not None
    assert outcome.stream[:3] == (100, "100", "client_left")
