"""A token bucket's sums: refill first, then a whole token or a refusal, and the waits."""

from __future__ import annotations

import pytest

from mockskill.engine.buckets import spend
from mockskill.engine.store import ADMITTED, FULL_MS, NEXT_MS, REMAINING, Bucket, Spent

FIVE_A_SECOND = Bucket("sc/skill/search/s", 5, 1.0, "s")
HALF = Bucket("sc/route/0/1.2.3.4", 2, 0.5, None)
"""One token every two seconds."""


def spent_in_turn(bucket: Bucket, times: list[float]) -> list[Spent]:
    """What requests at *times* (seconds, from a full bucket at 0) come to, in turn."""
    tokens, at, answers = float(bucket.capacity), 0.0, []
    for now in times:
        after, answer = spend(bucket.capacity, bucket.refill, tokens, now - at)
        if answer[ADMITTED]:  # as a store keeps it: a refusal changes nothing
            tokens, at = after, now
        answers.append(answer)
    return answers


def test_a_full_bucket_admits_its_capacity_at_once_then_refuses() -> None:
    answers = spent_in_turn(FIVE_A_SECOND, [0.0] * 7)
    assert [a[ADMITTED] for a in answers] == [True] * 5 + [False] * 2
    assert [a[REMAINING] for a in answers] == [4, 3, 2, 1, 0, 0, 0]
    assert [a[NEXT_MS] for a in answers] == [0, 0, 0, 0, 1000, 1000, 1000]
    assert [a[FULL_MS] for a in answers] == [1000, 2000, 3000, 4000, 5000, 5000, 5000]


def test_it_refills_at_its_rate_and_the_waits_shrink_with_time() -> None:
    answers = spent_in_turn(HALF, [0.0, 0.0, 0.5, 1.25, 2.0, 2.0, 3.5])
    assert [a[ADMITTED] for a in answers] == [True, True, False, False, True, False, False]
    # 0.5 s after the second: a quarter token, 1.5 s to the next; 1.25 s: 0.75 s to it.
    assert [a[NEXT_MS] for a in answers] == [0, 2000, 1500, 750, 2000, 2000, 500]
    assert [a[FULL_MS] for a in answers] == [2000, 4000, 3500, 2750, 4000, 4000, 2500]
    assert all(a[REMAINING] == 0 for a in answers[1:])


def test_it_never_holds_more_than_its_capacity() -> None:
    first, later = spent_in_turn(FIVE_A_SECOND, [0.0, 3600.0])
    assert first == later == (True, 4, 0, 1000)


@pytest.mark.parametrize(
    ("tokens", "elapsed", "want"),
    [
        (0.0, 0.999, False),  # a token is a whole one
        (0.0, 1.0, True),
        (0.75, 0.25, True),
        (0.5, -3.0, False),  # a clock that went back refills nothing, takes nothing
    ],
)
def test_a_request_is_admitted_with_a_whole_token_only(
    tokens: float, elapsed: float, want: bool
) -> None:
    after, answer = spend(5, 1.0, tokens, elapsed)
    assert answer[ADMITTED] is want
    assert after == (tokens + max(elapsed, 0) - 1 if want else tokens + max(elapsed, 0))


def test_fractions_of_a_millisecond_are_waited_whole() -> None:
    _, answer = spend(1, 3.0, 0.0, 0.0)  # a token every 333.33 ms
    assert answer == (False, 0, 334, 334)
