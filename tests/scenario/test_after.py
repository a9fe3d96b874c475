"""``after:`` on a scripted step: the answer the skill made, then how it was lost."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_problem

from mockskill import ScenarioError, load_text
from mockskill.scenario.model import Step
from mockskill.scenario.problems import Problem


def skill_yaml(invoke: str) -> str:
    """One skill whose ``invoke:`` is *invoke*; the invoke block starts on line 4."""
    return "skills:\n  - id: s\n    invoke:\n" + textwrap.indent(textwrap.dedent(invoke), "      ")


def first_step(invoke: str) -> Step:
    [skill] = load_text(skill_yaml(invoke)).skills
    assert skill.invoke is not None
    return skill.invoke.steps[0]


def problems_in(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    return list(caught.value.problems)


def test_an_error_after_a_result_is_sent_and_the_result_is_what_ran() -> None:
    step = first_step("- json: {id: 7}\n  delay: 20\n  after: {error: EXECUTION_TIMEOUT}\n")
    assert step.reply.status == 504
    assert step.reply.error_code == "EXECUTION_TIMEOUT"
    assert step.ran is not None
    assert (step.ran.status, step.ran.body) == (200, b'{"id": 7}')
    assert step.delay is not None
    assert step.fault is None


def test_a_fault_after_a_result_cuts_or_drops_that_result() -> None:
    step = first_step("- {status: 201, json: {id: 7}, after: {fault: TRUNCATED_BODY}}\n")
    assert (step.reply.status, step.fault) == (201, "TRUNCATED_BODY")
    assert step.ran is step.reply  # what is cut is the answer the skill made


def test_after_goes_in_each_outcome_of_a_random_step() -> None:
    step = first_step(
        """\
        - one_of:
            - {json: 1, after: {fault: CONNECTION_RESET_BY_PEER}}
            - {json: 2}
        """
    )
    ran = [c.step.ran for c in step.choices]
    assert ran[0] is not None
    assert ran[1] is None


def test_beside_failure_rate_after_is_its_successs_the_failure_never_ran() -> None:
    step = first_step("- {json: 1, failure_rate: 0.5, after: {error: EXECUTION_TIMEOUT}}\n")
    failure, success = (c.step for c in step.choices)
    assert failure.ran is None
    assert success.ran is not None


def test_a_step_without_after_ran_nothing_lost() -> None:
    assert first_step("- json: 1\n").ran is None


@pytest.mark.parametrize(
    ("invoke", "path", "line", "column", "expected", "found", "hint"),
    [
        (
            "- error: ENDPOINT_UNREACHABLE\n  after: {error: EXECUTION_TIMEOUT}\n",
            "skills[0].invoke[0].error",
            4,
            9,
            "the answer the skill made beside after",
            "an error",
            "put the error in after:",
        ),
        (
            "- json: 1\n  fault: EMPTY_RESPONSE\n  after: {error: EXECUTION_TIMEOUT}\n",
            "skills[0].invoke[0].fault",
            5,
            9,
            "no fault, hang or dribble beside after",
            "fault as well",
            "how the answer the skill made was lost",
        ),
        (
            "- json: 1\n  after: {status: 500}\n",
            "skills[0].invoke[0].after",
            5,
            16,
            "{error: CODE, ...} or {fault: NAME}",
            "a mapping",
            "",
        ),
        (
            "- after: {error: EXECUTION_TIMEOUT}\n",
            "skills[0].invoke[0]",
            4,
            9,
            "the answer the skill made beside after (json, text",
            "a mapping",
            "how a skill's answer was lost",
        ),
    ],
)
def test_each_after_problem_is_positioned(
    invoke: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(skill_yaml(invoke))
    assert_problem(problem, path, line, column, expected, found, hint)


def test_a_skill_declares_that_it_honours_idempotency_key() -> None:
    text = "skills:\n  - {id: pay, idempotency_key: true}\n  - {id: other}\n"
    assert [s.idempotency_key for s in load_text(text).skills] == [True, False]
    [problem] = problems_in("skills:\n  - {id: pay, idempotency_key: 1}\n")
    assert problem.path == "skills[0].idempotency_key"
