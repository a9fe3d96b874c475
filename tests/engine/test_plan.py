"""The plan type: frozen data that refuses what it cannot mean, rendered once."""

from __future__ import annotations

import dataclasses

import pytest

from mockskill.engine.plan import Answer, Cut, Dribble, Fault, KeepAlive, Plan, Wait


def test_a_head_carries_the_length_and_the_close_when_asked() -> None:
    answer = Answer(201, (("X-A", "1"),), b"body")
    assert answer.head(close=False) == (
        b"HTTP/1.1 201 Created\r\nX-A: 1\r\nContent-Length: 4\r\n\r\n"
    )
    assert answer.head(close=True).endswith(b"Content-Length: 4\r\nConnection: close\r\n\r\n")


def test_a_head_is_rendered_once() -> None:
    answer = Answer(200, (), b"x")
    assert answer.head(close=False) is answer.head(close=False)


def test_a_custom_reason_and_an_unknown_status() -> None:
    assert Answer(200, reason="Fine").head(close=False).startswith(b"HTTP/1.1 200 Fine\r\n")
    assert Answer(599).head(close=False).startswith(b"HTTP/1.1 599 Unknown\r\n")


@pytest.mark.parametrize("status", [100, 204, 304])
def test_statuses_without_a_body_have_no_length(status: int) -> None:
    assert b"Content-Length" not in Answer(status, (), b"x").head(close=False)


@pytest.mark.parametrize(
    "header",
    [("X-A", "a\r\nInjected: 1"), ("X-A\r\nB", "v"), ("X:A", "v"), ("X-A", "a\nb")],
    ids=["crlf-in-value", "crlf-in-name", "colon-in-name", "lf-in-value"],
)
def test_a_header_that_would_break_the_framing_is_refused(header: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="would break the framing"):
        Answer(200, (header,))


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
        lambda: Plan(Answer(200), dribble=Dribble(2, 10), fault=Fault.EMPTY_RESPONSE),
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
    assert not Plan(Answer(200), fault=Fault.EMPTY_RESPONSE).instant


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


def test_an_answer_renders_its_bytes_once_per_close_flag() -> None:
    answer = Answer(200, (("Content-Type", "text/plain"),), b"hello")
    assert answer.wire(close=False) == answer.head(close=False) + b"hello"
    assert answer.wire(close=True) == answer.head(close=True) + b"hello"
    assert b"Connection: close" in answer.wire(close=True)
    assert b"Connection" not in answer.wire(close=False)
    assert answer.wire(close=False) is answer.wire(close=False)  # kept, not re-joined
    assert answer.head(close=True) is answer.head(close=True)


def test_an_answer_without_a_body_sends_only_its_head() -> None:
    answer = Answer(204, (), b"ignored")
    assert answer.wire(close=False) == answer.head(close=False)
    assert answer.wire(close=False).endswith(b"\r\n\r\n")
