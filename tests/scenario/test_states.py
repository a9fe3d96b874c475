"""Scenario states as the loader reads them: ``set_state:`` on a step, ``state:`` on a
case, and a required state that no step sets refused where it is written."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_problem

from mockskill import ScenarioError, load_text
from mockskill.scenario.model import INITIAL_STATE, Route
from mockskill.scenario.problems import Problem

ORDERS = """
name: orders
routes:
  - path: /orders
    method: POST
    steps:
      - json: {id: 1}
        set_state: placed
  - path: /orders/1
    cases:
      - state: placed
        json: {id: 1}
      - state: Started
        when: {headers: {x-peek: "yes"}}
        status: 204
    steps:
      - status: 404
"""


def routes_of(text: str) -> tuple[Route, ...]:
    return load_text(textwrap.dedent(text), "s.yaml").routes


def problems_in(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), "s.yaml")
    return list(caught.value.problems)


def test_a_step_sets_a_state_and_a_case_requires_one() -> None:
    post, get = routes_of(ORDERS)
    assert post.sequence is not None
    assert post.sequence.steps[0].set_state == "placed"
    placed, started = get.cases
    assert (placed.state, placed.conditions) == ("placed", ())
    assert started.state == INITIAL_STATE == "Started"
    assert started.conditions[0].name == "x-peek"


def test_a_case_with_a_state_and_no_conditions_does_not_shadow_the_next() -> None:
    [_, get] = routes_of(ORDERS)  # case 1 has no when: yet case 2 is reachable
    assert len(get.cases) == 2


def test_a_state_no_step_sets_is_refused_where_it_is_required_with_a_did_you_mean() -> None:
    [problem] = problems_in(
        ORDERS.replace("state: placed\n        json", "state: plcaed\n        json")
    )
    assert_problem(
        problem,
        "routes[1].cases[0].state",
        11,
        16,
        "a state a step of this scenario sets",
        "'plcaed', which no step sets",
        "did you mean 'placed'?",
    )


def test_a_state_far_from_any_set_lists_those_that_are() -> None:
    [problem] = problems_in(
        ORDERS.replace("state: placed\n        json", "state: gone\n        json")
    )
    assert "the states its steps set (set_state:): placed; Started is the first" in problem.hint


def test_states_are_per_scenario_a_state_set_in_another_does_not_count() -> None:
    text = """
    name: a
    routes:
      - path: /a
        cases:
          - state: placed
            json: {}
    ---
    name: b
    routes:
      - path: /b
        steps:
          - json: {}
            set_state: placed
    """
    [problem] = problems_in(text)
    assert problem.path == "routes[0].cases[0].state"


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, "two\nlines", 7, None, ["a"]])
def test_a_state_name_is_printable_text(name: object) -> None:
    import json

    text = ORDERS.replace("set_state: placed", f"set_state: {json.dumps(name)}")
    found = [p for p in problems_in(text) if p.path == "routes[0].steps[0].set_state"]
    assert found
    assert found[0].expected.startswith("a state's name")


def test_set_state_beside_one_of_and_in_its_outcomes() -> None:
    route, _ = routes_of("""
    name: s
    routes:
      - path: /pay
        method: POST
        steps:
          - set_state: tried
            one_of:
              - json: {ok: true}
                set_state: paid
              - error: EXECUTION_TIMEOUT
                status: 504
      - path: /status
        cases:
          - state: paid
            json: {paid: true}
          - state: tried
            json: {paid: false}
    """)
    assert route.sequence is not None
    step = route.sequence.steps[0]
    assert step.set_state == "tried"
    assert [c.step.set_state for c in step.choices] == ["paid", None]


def test_set_state_beside_failure_rate_is_the_successs_a_failure_moves_nothing() -> None:
    [route] = routes_of("""
    name: s
    routes:
      - path: /pay
        method: POST
        steps:
          - failure_rate: 0.5
            json: {ok: true}
            set_state: paid
    """)
    assert route.sequence is not None
    step = route.sequence.steps[0]
    failure, success = step.choices
    assert (step.set_state, failure.step.set_state, success.step.set_state) == (None, None, "paid")


def test_a_case_needs_when_or_state() -> None:
    text = ORDERS.replace(
        "      - state: placed\n        json: {id: 1}\n", "      - json: {id: 1}\n"
    )
    [problem] = problems_in(text)
    assert problem.expected == "the key 'when' (or 'state')"
