"""The plan type: frozen data that refuses what it cannot mean."""

from __future__ import annotations

import dataclasses

import pytest

from mockskill.engine.plan import Answer, Cut, Dribble, Fault, KeepAlive, Plan, Wait


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
