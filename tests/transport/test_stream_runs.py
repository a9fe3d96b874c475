"""Pieces due together, found once per play (mockskill/transport/streaming.py's runs): a
piece with a delay and the pieces with none after it go as one write, counted and
journalled as the pieces they are; a burst of a hundred thousand events is a few joins.

Plans are made by hand, the client is a raw socket (the bytes as sent), on both loops.
"""

from __future__ import annotations

import gc
import socket

import pytest
from transport_helpers import LOOPS, Recorder, serving

from mockskill.engine.plan import Answer, Plan, StreamPiece, StreamPlay
from mockskill.transport import streaming
from mockskill.transport.streaming import BATCH_BYTES, Runs, runs_of

SSE = (("Content-Type", "text/event-stream; charset=utf-8"),)


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def event(n: int, delay_ms: float = 0) -> StreamPiece:
    return StreamPiece(delay_ms, b"id: %d\ndata: %d\n\n" % (n, n), str(n))


def test_a_run_is_a_piece_with_a_delay_and_the_undelayed_pieces_after_it() -> None:
    retry = StreamPiece(0, b"retry: 1000\n\n", counts=False)
    no_id = StreamPiece(0, b"data: x\n\n")
    play = StreamPlay((retry, event(1), event(2), event(3, 10), no_id, event(4, 5)))
    runs = Runs(play)
    assert runs.ends == [3, 5, 6]
    assert runs.events == [2, 4, 5]  # the retry field is no event; the id-less one is
    assert runs.last_ids == ["2", "3", "4"]  # an event without an id keeps the last one
    assert runs.data[0] == b"".join(p.data for p in play.pieces[:3])
    assert runs.data[2] is play.pieces[5].data  # a run of one piece: its bytes, no copy


def test_a_run_ends_at_the_batch_size_so_flow_control_is_looked_at_between() -> None:
    big = StreamPiece(0, b"data: %s\n\n" % (b"x" * 1000))
    runs = Runs(StreamPlay((big,) * 200))
    assert len(runs.ends) > 1
    assert all(len(data) <= BATCH_BYTES + len(big.data) for data in runs.data)
    assert b"".join(runs.data) == big.data * 200
    assert runs.ends[-1] == 200
    assert runs.events[-1] == 200


def test_runs_are_found_once_per_play_and_forgotten_with_it() -> None:
    play = StreamPlay(tuple(event(n) for n in range(1, 4)))
    assert runs_of(play) is runs_of(play)
    twin = StreamPlay(play.pieces)  # equal, but another play: its own runs
    assert runs_of(twin) is not runs_of(play)
    key = id(twin)
    assert key in streaming._RUNS
    del twin
    gc.collect()
    assert key not in streaming._RUNS  # (the play's runs do not outlive it)


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
