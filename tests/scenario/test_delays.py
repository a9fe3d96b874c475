"""Delay shapes: how a step's wait is written, checked at load, and drawn per request.

A delay is a number of milliseconds (fixed) or one shape — ``fixed``,
``uniform`` or ``lognormal`` — and the same shapes serve ``execution``.
Anything that could wait longer than the configured maximum is refused at
load, never clamped. Draws come from a seeded generator, so these tests use
``random.Random`` with a fixed seed and are exact, not flaky.
"""

from __future__ import annotations

import math
import random
import statistics
import textwrap

import pytest

from mockskill import ScenarioError, load_text
from mockskill.scenario.delays import Delay, Fixed, LogNormal, Uniform
from mockskill.scenario.model import Step
from mockskill.scenario.problems import Problem
from mockskill.scenario.reader import MAX_DELAY_MS

SHAPES_TEXT = "{fixed: MS}, {uniform: [MIN, MAX]} or {lognormal: {median: MS, sigma: S, cap: MS}}"


def step_of(invoke: str, *, max_delay_ms: int = MAX_DELAY_MS) -> Step:
    """The first invoke step of a one-skill scenario whose invoke is *invoke* (YAML)."""
    text = f"skills:\n  - id: a\n    invoke: {invoke}\n"
    scenarios = load_text(text, "d.yaml", max_delay_ms=max_delay_ms)
    return scenarios.skills[0].invoke.steps[0]


def delay_of(delay: str, *, max_delay_ms: int = MAX_DELAY_MS) -> Delay | None:
    return step_of(f"{{delay: {delay}, json: 1}}", max_delay_ms=max_delay_ms).delay


def problems_of(invoke: str, *, max_delay_ms: int = MAX_DELAY_MS) -> list[Problem]:
    text = f"skills:\n  - id: a\n    invoke: {invoke}\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), "d.yaml", max_delay_ms=max_delay_ms)
    return list(caught.value.problems)


def only_problem(invoke: str, *, max_delay_ms: int = MAX_DELAY_MS) -> Problem:
    problems = problems_of(invoke, max_delay_ms=max_delay_ms)
    assert len(problems) == 1, problems
    return problems[0]


def draws(delay: Delay, n: int = 5000, seed: int = 1234) -> list[float]:
    rng = random.Random(seed)
    return [delay.draw(rng) for _ in range(n)]


# -- the forms a delay may take ------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "shape"),
    [
        pytest.param("250", Fixed(250), id="a-plain-number-is-fixed"),
        pytest.param("0", Fixed(0), id="zero-is-allowed"),
        pytest.param("{fixed: 250}", Fixed(250), id="fixed"),
        pytest.param("{uniform: [50, 150]}", Uniform(50, 150), id="uniform"),
        pytest.param("{uniform: [100, 100]}", Uniform(100, 100), id="uniform-of-one-value"),
        pytest.param(
            "{lognormal: {median: 50, sigma: 1, cap: 200}}",
            LogNormal(50.0, 1.0, 200.0),
            id="lognormal",
        ),
        pytest.param(
            "{lognormal: {median: 50, sigma: 0.25, cap: 50}}",
            LogNormal(50.0, 0.25, 50.0),
            id="lognormal-cap-equal-to-median",
        ),
        pytest.param(
            "{lognormal: {median: 50, sigma: 5}}",
            LogNormal(50.0, 5.0, float(MAX_DELAY_MS)),
            id="lognormal-without-cap-is-capped-at-the-maximum",
        ),
    ],
)
def test_each_delay_shape_is_read_into_its_model(written: str, shape: Delay) -> None:
    assert delay_of(written) == shape


def test_execution_takes_the_same_shapes_as_delay() -> None:
    step = step_of("{execution: {uniform: [10, 20]}, delay: {fixed: 5}, json: 1}")
    assert step.execution == Uniform(10, 20)
    assert step.delay == Fixed(5)


def test_shapes_are_read_inside_random_outcomes_too() -> None:
    step = step_of(
        "{one_of: [{delay: {uniform: [1, 2]}, json: 1},"
        " {delay: {lognormal: {median: 5, sigma: 1, cap: 9}}, json: 2}]}"
    )
    assert [c.step.delay for c in step.choices] == [Uniform(1, 2), LogNormal(5.0, 1.0, 9.0)]


def test_a_lowered_maximum_is_the_default_lognormal_cap() -> None:
    delay = delay_of("{lognormal: {median: 50, sigma: 1}}", max_delay_ms=1000)
    assert delay == LogNormal(50.0, 1.0, 1000.0)


def test_each_shape_describes_itself_for_people() -> None:
    assert Fixed(250).describe() == "250 ms"
    assert Uniform(50, 150).describe() == "uniform 50-150 ms"
    assert "median 50" in LogNormal(50.0, 1.0, 200.0).describe()
    assert "cap 200" in LogNormal(50.0, 1.0, 200.0).describe()


# -- what is refused, and how the problem says so ------------------------------------

BAD_DELAYS = [
    # (delay as written, path, expected, found)
    pytest.param(
        "{uniform: [300, 100]}",
        "skills[0].invoke.delay.uniform",
        "MIN no larger than MAX",
        "[300, 100]",
        id="uniform-reversed",
    ),
    pytest.param(
        "{uniform: [100]}",
        "skills[0].invoke.delay.uniform",
        "[MIN, MAX] in ms",
        "a list of 1 item",
        id="uniform-one-bound",
    ),
    pytest.param(
        "{uniform: {min: 1, max: 2}}",
        "skills[0].invoke.delay.uniform",
        "[MIN, MAX] in ms",
        "a mapping with keys min, max",
        id="uniform-as-mapping",
    ),
    pytest.param(
        "{uniform: [-5, 100]}",
        "skills[0].invoke.delay.uniform[0]",
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "-5 (an integer)",
        id="uniform-negative-low",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: 1, cap: 10}}",
        "skills[0].invoke.delay.lognormal.cap",
        "a cap of at least the median (50 ms)",
        "10 (an integer)",
        id="lognormal-cap-below-median",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: 0}}",
        "skills[0].invoke.delay.lognormal.sigma",
        "a number above 0, at most 5",
        "0 (an integer)",
        id="lognormal-sigma-zero",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: -1}}",
        "skills[0].invoke.delay.lognormal.sigma",
        "a number above 0, at most 5",
        "-1 (an integer)",
        id="lognormal-sigma-negative",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: 5.5}}",
        "skills[0].invoke.delay.lognormal.sigma",
        "a number above 0, at most 5",
        "5.5 (a number with a fraction)",
        id="lognormal-sigma-too-wide",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: true}}",
        "skills[0].invoke.delay.lognormal.sigma",
        "a number above 0, at most 5",
        "true (a boolean)",
        id="lognormal-sigma-boolean",
    ),
    pytest.param(
        "{lognormal: {median: 0, sigma: 1}}",
        "skills[0].invoke.delay.lognormal.median",
        f"a whole number from 1 to {MAX_DELAY_MS} ms",
        "0 (an integer)",
        id="lognormal-median-zero",
    ),
    pytest.param(
        "{lognormal: {median: 50}}",
        "skills[0].invoke.delay.lognormal",
        "the key 'sigma'",
        "it missing",
        id="lognormal-without-sigma",
    ),
    pytest.param(
        "{lognormal: [50, 1]}",
        "skills[0].invoke.delay.lognormal",
        "{median: MS, sigma: S, cap: MS}",
        "a list of 2 items",
        id="lognormal-as-list",
    ),
    pytest.param(
        "{lognormal: {median: 50, sigma: 1, mean: 3}}",
        "skills[0].invoke.delay.lognormal.mean",
        "a known key",
        "unknown key 'mean'",
        id="lognormal-unknown-key",
    ),
    pytest.param(
        "{gaussian: {mean: 100}}",
        "skills[0].invoke.delay",
        f"one delay shape: {SHAPES_TEXT}",
        "a mapping with keys gaussian",
        id="unknown-shape",
    ),
    pytest.param(
        "{fixed: 1, uniform: [1, 2]}",
        "skills[0].invoke.delay",
        f"one delay shape: {SHAPES_TEXT}",
        "a mapping with keys fixed, uniform",
        id="two-shapes-at-once",
    ),
    pytest.param(
        "{}",
        "skills[0].invoke.delay",
        f"one delay shape: {SHAPES_TEXT}",
        "an empty mapping",
        id="no-shape",
    ),
    pytest.param(
        "-1",
        "skills[0].invoke.delay",
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "-1 (an integer)",
        id="negative",
    ),
    pytest.param(
        "1.5",
        "skills[0].invoke.delay",
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "1.5 (a number with a fraction)",
        id="fraction",
    ),
    pytest.param(
        "'100ms'",
        "skills[0].invoke.delay",
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "'100ms' (a string)",
        id="string-with-unit",
    ),
    pytest.param(
        "true",
        "skills[0].invoke.delay",
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "true (a boolean)",
        id="boolean",
    ),
]


@pytest.mark.parametrize(("delay", "path", "expected", "found"), BAD_DELAYS)
def test_a_bad_delay_is_one_problem_with_path_expected_and_found(
    delay: str, path: str, expected: str, found: str
) -> None:
    problem = only_problem(f"{{delay: {delay}, json: 1}}")
    assert (problem.file, problem.line) == ("d.yaml", 3)
    assert (problem.path, problem.expected, problem.found) == (path, expected, found)


def test_an_unknown_shape_names_every_shape_there_is() -> None:
    problem = only_problem("{delay: {exponential: 100}, json: 1}")
    for shape in ("fixed", "uniform", "lognormal"):
        assert shape in problem.expected
    assert "exponential" in problem.found
    assert "exponential" in str(problem)


def test_a_problem_points_at_the_line_of_the_bad_shape() -> None:
    text = """\
        skills:
          - id: a
            invoke:
              - {json: 1}
              - delay:
                  uniform: [300, 100]
                json: 2
    """
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), "d.yaml")
    (problem,) = caught.value.problems
    assert problem.path == "skills[0].invoke[1].delay.uniform"
    assert problem.line == 6
    assert str(problem).startswith("d.yaml:6:")


def test_problems_in_execution_name_execution() -> None:
    problem = only_problem("{execution: {uniform: [9, 1]}, json: 1}")
    assert problem.path == "skills[0].invoke.execution.uniform"


# -- the maximum: refused, never clamped --------------------------------------------


def test_a_delay_over_the_maximum_is_refused_not_clamped() -> None:
    problem = only_problem(f"{{delay: {MAX_DELAY_MS + 1}, json: 1}}")
    assert problem.path == "skills[0].invoke.delay"
    assert problem.expected == f"a whole number from 0 to {MAX_DELAY_MS} ms"
    assert problem.found == f"{MAX_DELAY_MS + 1} (an integer)"
    assert "refused, not clamped" in problem.hint


def test_the_maximum_itself_is_allowed() -> None:
    assert delay_of(str(MAX_DELAY_MS)) == Fixed(MAX_DELAY_MS)
    assert delay_of("1000", max_delay_ms=1000) == Fixed(1000)


@pytest.mark.parametrize(
    ("invoke", "path"),
    [
        pytest.param("{delay: 1001, json: 1}", "skills[0].invoke.delay", id="fixed"),
        pytest.param(
            "{delay: {fixed: 1001}, json: 1}", "skills[0].invoke.delay.fixed", id="fixed-shape"
        ),
        pytest.param(
            "{delay: {uniform: [0, 1001]}, json: 1}",
            "skills[0].invoke.delay.uniform[1]",
            id="uniform-high",
        ),
        pytest.param(
            "{delay: {lognormal: {median: 1001, sigma: 1}}, json: 1}",
            "skills[0].invoke.delay.lognormal.median",
            id="lognormal-median",
        ),
        pytest.param(
            "{delay: {lognormal: {median: 50, sigma: 1, cap: 1001}}, json: 1}",
            "skills[0].invoke.delay.lognormal.cap",
            id="lognormal-cap",
        ),
        pytest.param("{execution: 1001, json: 1}", "skills[0].invoke.execution", id="execution"),
        pytest.param("{hang: 1001}", "skills[0].invoke.hang", id="hang"),
        pytest.param(
            "{dribble: {chunks: 2, over: 1001}, json: 1}",
            "skills[0].invoke.dribble.over",
            id="dribble",
        ),
    ],
)
def test_a_lowered_maximum_refuses_every_wait_over_it(invoke: str, path: str) -> None:
    problem = only_problem(invoke, max_delay_ms=1000)
    assert problem.path == path
    assert "1000 ms" in problem.expected
    assert "1001 (an integer)" in problem.found
    assert "refused, not clamped" in problem.hint


def test_a_lowered_maximum_refuses_a_timeout_over_it() -> None:
    text = "skills:\n  - id: a\n    timeout_ms: 1001\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "d.yaml", max_delay_ms=1000)
    (problem,) = caught.value.problems
    assert problem.path == "skills[0].timeout_ms"
    assert problem.found == "1001 (an integer)"


def test_every_bad_delay_in_a_file_is_reported_at_once() -> None:
    problems = problems_of(
        "[{delay: {uniform: [3, 1]}, json: 1}, {delay: {gaussian: 1}, json: 2},"
        " {execution: {lognormal: {median: 9, sigma: 0}}, json: 3}]"
    )
    assert [p.path for p in problems] == [
        "skills[0].invoke[0].delay.uniform",
        "skills[0].invoke[1].delay",
        "skills[0].invoke[2].execution.lognormal.sigma",
    ]


# -- draws ---------------------------------------------------------------------------


def test_fixed_always_draws_exactly_its_value() -> None:
    assert set(draws(Fixed(250), n=100)) == {250.0}


def test_fixed_does_not_consume_the_generator() -> None:
    rng = random.Random(5)
    Fixed(250).draw(rng)
    assert rng.random() == random.Random(5).random()


def test_the_same_seed_draws_the_same_values() -> None:
    for shape in (Uniform(50, 150), LogNormal(50.0, 1.0, 200.0)):
        assert draws(shape, n=200, seed=9) == draws(shape, n=200, seed=9)
        assert draws(shape, n=200, seed=9) != draws(shape, n=200, seed=10)


def test_uniform_draws_stay_within_bounds_and_spread_evenly() -> None:
    values = draws(Uniform(100, 300))
    assert min(values) >= 100
    assert max(values) <= 300
    # Mean 200; its standard error over 5000 draws is under 1 ms.
    assert statistics.fmean(values) == pytest.approx(200, abs=5)
    # Each quarter of the range gets about a quarter of the draws.
    quarters = [0, 0, 0, 0]
    for value in values:
        quarters[min(3, int((value - 100) // 50))] += 1
    for count in quarters:
        assert 0.22 < count / len(values) < 0.28
    # And the draws reach into both ends of the range.
    assert min(values) < 102
    assert max(values) > 298


def test_a_uniform_of_one_value_always_draws_it() -> None:
    assert set(draws(Uniform(120, 120), n=50)) == {120.0}


def test_lognormal_draws_have_the_configured_median() -> None:
    # A cap far out in the tail (4 sigma) leaves the median where it was set.
    shape = LogNormal(200.0, 0.8, 5000.0)
    values = draws(shape)
    assert statistics.median(values) == pytest.approx(200, rel=0.10)
    assert min(values) > 0


def test_lognormal_has_a_long_right_tail() -> None:
    values = draws(LogNormal(200.0, 0.8, 5000.0))
    assert statistics.fmean(values) > statistics.median(values) * 1.2
    assert max(values) > 200 * math.exp(0.8 * 2.5)  # well past 2.5 sigma, somewhere in 5000


def test_lognormal_never_draws_above_its_cap() -> None:
    shape = LogNormal(50.0, 1.0, 200.0)
    values = draws(shape)
    assert max(values) <= 200
    # About 8 % of the uncapped draws would be above 200 (ln 4 = 1.39 sigma).
    assert max(values) > 150


def test_a_lognormal_cap_redraws_rather_than_clamps() -> None:
    shape = LogNormal(50.0, 1.0, 200.0)
    values = draws(shape)
    # Clamping would put the ~8 % of draws above 200 exactly at 200.
    assert values.count(200.0) == 0
    # No pile-up just below the cap either: the last 5 ms below it hold about
    # what the density says (~0.4 % of the draws), not the 8 % of the tail.
    near_cap = sum(1 for v in values if v > 195) / len(values)
    assert near_cap < 0.01
    # Redrawn, the tail is cut off: the median moves down a little (to ~45),
    # instead of staying put as it would if draws over the cap were clamped.
    assert 40 < statistics.median(values) < 50


def test_a_cap_equal_to_the_median_redraws_into_the_lower_half() -> None:
    values = draws(LogNormal(50.0, 1.0, 50.0), n=2000)
    assert max(values) <= 50
    assert values.count(50.0) == 0
