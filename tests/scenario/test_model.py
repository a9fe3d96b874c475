"""The frozen scenario model: steps and how sequences play out."""

from __future__ import annotations

import dataclasses

import pytest

from mockskill.scenario.model import Reply, Sequence, Step
from mockskill.scenario.source import Position

HERE = Position("test.yaml", 3, 5)


def sequence(*times: int, end: str = "last") -> Sequence:
    steps = tuple(Step(Reply.json(200, {"step": i}), HERE, times=t) for i, t in enumerate(times))
    return Sequence(steps, end)  # type: ignore[arg-type]


# -- Sequence.step_at ---------------------------------------------------------------

# Steps with times 2, 1, 3: requests 0-1 get step 0, request 2 step 1, 3-5 step 2.
WITHIN = [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 2)]


def test_length_is_the_sum_of_times() -> None:
    assert sequence(2, 1, 3).length == 6
    assert sequence(1).length == 1


@pytest.mark.parametrize("end", ["last", "cycle", "fail"])
@pytest.mark.parametrize(("position", "step"), WITHIN, ids=[f"request-{p}" for p, _ in WITHIN])
def test_each_step_answers_times_requests_in_a_row(end: str, position: int, step: int) -> None:
    assert sequence(2, 1, 3, end=end).step_at(position) == step


@pytest.mark.parametrize("position", [6, 7, 100], ids=lambda p: f"request-{p}")
def test_end_last_repeats_the_last_step(position: int) -> None:
    assert sequence(2, 1, 3, end="last").step_at(position) == 2


@pytest.mark.parametrize(
    ("position", "step"),
    [(6, 0), (7, 0), (8, 1), (9, 2), (11, 2), (12, 0), (14, 1), (6 * 100 + 3, 2)],
    ids=lambda v: str(v),
)
def test_end_cycle_starts_over(position: int, step: int) -> None:
    assert sequence(2, 1, 3, end="cycle").step_at(position) == step


@pytest.mark.parametrize("position", [6, 7, 100], ids=lambda p: f"request-{p}")
def test_end_fail_answers_none_once_exhausted(position: int) -> None:
    assert sequence(2, 1, 3, end="fail").step_at(position) is None


def test_the_default_end_is_last() -> None:
    seq = Sequence((Step(Reply.json(200, {}), HERE, times=2),))
    assert seq.end == "last"
    assert seq.step_at(5) == 0


def test_a_single_step_sequence_with_cycle_always_answers_it() -> None:
    seq = sequence(1, end="cycle")
    assert [seq.step_at(p) for p in range(4)] == [0, 0, 0, 0]


def test_a_sequence_needs_at_least_one_step() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        Sequence(())


def test_sequences_are_frozen() -> None:
    seq = sequence(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        seq.end = "cycle"  # type: ignore[misc]


def test_position_reads_as_file_line_column() -> None:
    assert str(HERE) == "test.yaml:3:5"
