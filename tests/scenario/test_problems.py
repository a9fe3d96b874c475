"""Problems: how a path, a found value and a whole report are written."""

from __future__ import annotations

import pytest

from mockskill.scenario.problems import (
    Problem,
    ScenarioError,
    describe,
    did_you_mean,
    format_path,
    format_report,
)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param((), "(top level)", id="root"),
        pytest.param(("skills",), "skills", id="one-key"),
        pytest.param(("skills", 0, "invoke", 1, "status"), "skills[0].invoke[1].status", id="deep"),
        pytest.param((0, "x"), "[0].x", id="index-first"),
        pytest.param(("routes", 2), "routes[2]", id="index-last"),
    ],
)
def test_paths_are_written_with_dots_and_brackets(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(None, "null", id="null"),
        pytest.param(True, "true (a boolean)", id="true-is-not-a-number"),
        pytest.param(False, "false (a boolean)", id="false"),
        pytest.param(3, "3 (an integer)", id="int"),
        pytest.param(1.5, "1.5 (a number with a fraction)", id="float"),
        pytest.param("hi", "'hi' (a string)", id="string"),
        pytest.param({}, "an empty mapping", id="empty-mapping"),
        pytest.param({"a": 1, "b": 2}, "a mapping with keys a, b", id="mapping"),
        pytest.param([1], "a list of 1 item", id="one-item"),
        pytest.param([1, 2], "a list of 2 items", id="two-items"),
    ],
)
def test_found_values_are_described_with_their_yaml_kind(value: object, text: str) -> None:
    assert describe(value) == text


def test_long_strings_are_shortened_in_descriptions() -> None:
    shown = describe("x" * 200)
    assert shown.endswith("...' (a string)")
    assert len(shown) < 80


def test_big_mappings_show_their_first_six_keys() -> None:
    shown = describe({f"k{i}": i for i in range(10)})
    assert shown == "a mapping with keys k0, k1, k2, k3, k4, k5, ..."


@pytest.mark.parametrize(
    ("word", "choices", "hint"),
    [
        pytest.param("invokee", ["describe", "invoke"], "did you mean 'invoke'?", id="typo"),
        pytest.param(
            "AUTH_REQUIRD",
            ["AUTH_REQUIRED", "SKILL_NOT_FOUND"],
            "did you mean 'AUTH_REQUIRED'?",
            id="code",
        ),
        pytest.param("zzz", ["describe", "invoke"], "", id="nothing-close"),
        pytest.param("x", [], "", id="no-choices"),
    ],
)
def test_did_you_mean_names_the_nearest_choice_or_nothing(
    word: str, choices: list[str], hint: str
) -> None:
    assert did_you_mean(word, choices) == hint


def test_a_problem_reads_file_line_column_path_expected_found_and_hint() -> None:
    problem = Problem("a.yaml", 3, 7, "skills[0].id", "a string", "null", "add one")
    assert str(problem) == "a.yaml:3:7: skills[0].id: expected a string, found null; add one"


def test_a_problem_without_hint_has_no_trailing_semicolon() -> None:
    assert str(Problem("a.yaml", 1, 1, "name", "a string", "null")).endswith("found null")


def test_a_problem_as_json_carries_every_part_and_its_text() -> None:
    problem = Problem("a.yaml", 3, 7, "skills[0].id", "a string", "null", "add one")
    data = problem.as_json()
    assert data == {
        "file": "a.yaml",
        "line": 3,
        "column": 7,
        "path": "skills[0].id",
        "expected": "a string",
        "found": "null",
        "hint": "add one",
        "text": str(problem),
    }


def test_report_sorts_by_file_then_position_and_counts_in_the_last_line() -> None:
    late = Problem("b.yaml", 1, 1, "name", "x", "y")
    middle = Problem("a.yaml", 10, 2, "skills", "x", "y")
    early = Problem("a.yaml", 2, 5, "name", "x", "y")
    lines = format_report([late, middle, early]).splitlines()
    assert lines[:3] == [str(early), str(middle), str(late)]
    assert lines[3] == "3 problems in 2 files; nothing was loaded."


def test_report_of_one_problem_uses_the_singular() -> None:
    report = format_report([Problem("a.yaml", 1, 1, "name", "x", "y")])
    assert report.splitlines()[-1] == "1 problem in 1 file; nothing was loaded."


def test_same_line_problems_are_ordered_by_column() -> None:
    right = Problem("a.yaml", 4, 20, "b", "x", "y")
    left = Problem("a.yaml", 4, 3, "a", "x", "y")
    assert ScenarioError([right, left]).problems == (left, right)


def test_scenario_error_carries_every_problem_and_the_report_as_its_message() -> None:
    problems = [Problem("a.yaml", 9, 1, "x", "e", "f"), Problem("a.yaml", 1, 1, "y", "e", "f")]
    error = ScenarioError(problems)
    assert error.problems == tuple(sorted(problems))
    assert str(error) == format_report(problems)
