"""Draws: a drawn step's generator is a pure function of (seed, scenario, session, draw).

So the store only counts draws, and any process makes the same generator for
the same draw: a replay with the same seed gives the same values whichever
replica serves each request (tests/test_chaos.py replays it over the wire).
"""

from __future__ import annotations

import itertools
import statistics

import pytest

from mockskill.engine.choosing import generator


def values(seed: int, stream: str, session: str, draw: int, n: int = 8) -> list[float]:
    rng = generator(seed, stream, session, draw)
    return [rng.random() for _ in range(n)]


def test_the_same_arguments_make_the_same_generator() -> None:
    assert values(42, "chaos", "s", 3) == values(42, "chaos", "s", 3)


def test_each_argument_changes_the_values() -> None:
    base = values(42, "chaos", "s", 3)
    assert values(43, "chaos", "s", 3) != base
    assert values(42, "other", "s", 3) != base
    assert values(42, "chaos", "t", 3) != base
    assert values(42, "chaos", "s", 4) != base


def test_names_cannot_run_into_each_other() -> None:
    # Without the lengths, "a:b" + "c" and "a" + "b:c" would read alike.
    assert values(1, "a:b", "c", 0) != values(1, "a", "b:c", 0)
    assert values(1, "a", "1:b", 0) != values(1, "a:1", "b", 0)


def test_successive_draw_numbers_look_uniform_and_independent() -> None:
    firsts = [generator(7, "chaos", "s", n).random() for n in range(4000)]
    assert all(0.0 <= x < 1.0 for x in firsts)
    assert abs(statistics.fmean(firsts) - 0.5) < 0.02
    buckets = [0] * 10
    for x in firsts:
        buckets[int(x * 10)] += 1
    assert all(330 < count < 470 for count in buckets)  # 400 each expected (sigma 19)
    pairs = list(itertools.pairwise(firsts))
    correlation = statistics.correlation([a for a, _ in pairs], [b for _, b in pairs])
    assert abs(correlation) < 0.06


def test_a_session_name_of_any_characters_makes_a_generator() -> None:
    assert len(values(1, "", "\x00ünï/cødé\ud800", 0)) == 8


def test_the_generator_serves_every_method_a_step_draws_with() -> None:
    rng = generator(3, "chaos", "s", 0)
    assert 10 <= rng.uniform(10, 50) <= 50
    assert rng.lognormvariate(0.0, 1.0) > 0
    assert 0 <= rng.getrandbits(32) < 2**32
    assert 0 <= rng.getrandbits(100) < 2**100
    assert rng.getrandbits(0) == 0
    assert rng.randrange(7) in range(7)
    assert rng.choice("abc") in "abc"
    assert isinstance(rng.gauss(0.0, 1.0), float)  # gauss keeps a spare (gauss_next)
    widths = {generator(3, "chaos", "s", n).getrandbits(32).bit_length() for n in range(200)}
    assert max(widths) == 32  # the top bits are drawn too
    with pytest.raises(ValueError, match="non-negative"):
        rng.getrandbits(-1)
