"""The plan type: frozen data that refuses what it cannot mean."""

from __future__ import annotations

import dataclasses

import pytest

from mockskill.engine.plan import (
    RUN_BYTES,
    Answer,
    Cut,
    Dribble,
    Fault,
    KeepAlive,
    Plan,
    StreamPiece,
    StreamPlay,
    Wait,
)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Answer(99),
        lambda: Answer(1000),
        lambda: Wait(-1),
        lambda: Cut(-1, Answer(504)),
        lambda: Dribble(0, 100),
        lambda: Dribble(2, -1),
        lambda: KeepAlive(stale_after_ms=-1),
        lambda: KeepAlive(max_requests=0),
        lambda: Plan(Answer(200), dribble=Dribble(2, 10), fault=Fault("EMPTY_RESPONSE")),
        lambda: Plan(Answer(200), close=True, keep_alive=KeepAlive(close_after=True)),
        lambda: Plan(Answer(200), waits=(Wait(5),), journalled=True),
    ],
    ids=[
        "status-too-low",
        "status-too-high",
        "negative-wait",
        "negative-cut",
        "no-chunks",
        "negative-dribble",
        "negative-stale",
        "zero-max-requests",
        "fault-and-dribble",
        "close-and-keep-alive-fault",
        "journalled-but-waiting",
    ],
)
def test_a_plan_refuses_what_it_cannot_mean(build: object) -> None:
    with pytest.raises(ValueError, match=r"must be|not both|no keep-alive|only an instant"):
        build()  # type: ignore[operator]


def test_only_a_plan_without_waits_dribble_or_fault_is_instant() -> None:
    assert Plan(Answer(200)).instant
    assert Plan(Answer(200), close=True, keep_alive=None).instant
    assert not Plan(Answer(200), waits=(Wait(0),)).instant
    assert not Plan(Answer(200), dribble=Dribble(1, 0)).instant
    assert not Plan(Answer(200), fault=Fault("EMPTY_RESPONSE")).instant


def test_a_journalled_plan_is_reported_as_a_copy_made_once_and_an_unjournalled_as_itself() -> None:
    plan = Plan(Answer(503, (), b"x"), close=True, journalled=True)
    reported = plan.reported
    assert not reported.journalled
    assert reported is plan.reported  # made once
    assert reported.answer is plan.answer  # the same rendered bytes
    assert dataclasses.replace(reported, journalled=True) == plan
    unjournalled = Plan(Answer(200))
    assert unjournalled.reported is unjournalled


def test_a_plan_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Plan(Answer(200)).close = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("size", "chunks", "pieces"),
    [(10, 3, [4, 4, 2]), (10, 1, [10]), (2, 5, [1, 1]), (0, 3, [0])],
)
def test_a_dribble_cuts_the_body_into_at_most_its_chunks(
    size: int, chunks: int, pieces: list[int]
) -> None:
    assert [len(p) for p in Dribble(chunks, 100).pieces(b"x" * size)] == pieces


def event(n: int, delay_ms: float = 0) -> StreamPiece:
    return StreamPiece(delay_ms, b"id: %d\ndata: %d\n\n" % (n, n), str(n))


def test_a_stream_s_run_is_a_piece_with_a_delay_and_the_undelayed_pieces_after_it() -> None:
    retry = StreamPiece(0, b"retry: 1000\n\n", counts=False)
    no_id = StreamPiece(0, b"data: x\n\n")
    play = StreamPlay((retry, event(1), event(2), event(3, 10), no_id, event(4, 5)))
    runs = play.runs
    assert runs.ends == (3, 5, 6)
    assert runs.events == (2, 4, 5)  # the retry field is no event; the id-less one is
    assert runs.last_ids == ("2", "3", "4")  # an event without an id keeps the last one
    assert runs.data[0] == b"".join(p.data for p in play.pieces[:3])
    assert runs.data[2] is play.pieces[5].data  # a run of one piece: its bytes, no copy
    assert runs.copied == len(runs.data[0]) + len(runs.data[1])


def test_a_stream_s_run_ends_at_the_run_size_so_flow_control_is_looked_at_between() -> None:
    big = StreamPiece(0, b"data: %s\n\n" % (b"x" * 1000))
    runs = StreamPlay((big,) * 200).runs
    assert len(runs.ends) > 1
    assert all(len(data) <= RUN_BYTES + len(big.data) for data in runs.data)
    assert b"".join(runs.data) == big.data * 200
    assert runs.ends[-1] == 200
    assert runs.events[-1] == 200


def test_a_play_s_runs_are_its_own_pieces_also_when_it_is_made_from_another() -> None:
    play = StreamPlay((event(1), event(2), event(3), event(4, 10)))
    resumed = dataclasses.replace(play, pieces=play.pieces[2:])  # (a resumed attempt's)
    assert resumed.runs.ends == (1, 2)
    assert resumed.runs.events == (1, 2)
    assert resumed.runs.last_ids == ("3", "4")
    assert resumed == StreamPlay(play.pieces[2:])  # the runs follow from the pieces
    assert StreamPlay(()).runs.ends == ()  # no piece: no run (the ending at once)
