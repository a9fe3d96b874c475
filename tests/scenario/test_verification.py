"""Reading a verification (``POST /__admin/verify``'s body): its conditions are a ``when:``.

A bad condition is the problem a scenario file's ``when:`` gets, at its line
and column in the JSON text; the other keys (session, skill, method, path,
count) are checked with a did-you-mean too. Python data is read as the JSON
it stands for and placed by its path.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import assert_problem

from mockskill.scenario.loader import load_text
from mockskill.scenario.problems import Problem, ScenarioError
from mockskill.scenario.verification import (
    BadVerification,
    Count,
    document,
    read_conditions,
    read_verification,
    verification_of,
)


def problems(text: str) -> list[Problem]:
    with pytest.raises(BadVerification) as raised:
        read_verification(textwrap.dedent(text).strip())
    return list(raised.value.problems)


def test_a_verification_reads_its_parts() -> None:
    verification = read_verification(
        '{"session": "S", "skill": "echo", "method": "post", "path": "/skills/echo/invoke",'
        ' "when": {"body": {"/input/text": "hello"}}, "count": {"equals": 1}}'
    )
    assert (verification.session, verification.skill) == ("S", "echo")
    assert (verification.method, verification.path) == ("POST", "/skills/echo/invoke")
    [condition] = verification.conditions
    assert (condition.label, condition.checks[0].text) == ("body /input/text", "equals 'hello'")
    assert verification.count == Count(1, 1)


@pytest.mark.parametrize(
    ("count", "wanted", "text"),
    [
        (None, Count(1, None), "at least 1"),
        ("2", Count(2, 2), "exactly 2"),
        ('{"equals": 0}', Count(0, 0), "exactly 0"),
        ('{"at_least": 3}', Count(3, None), "at least 3"),
        ('{"at_most": 2}', Count(0, 2), "at most 2"),
        ('{"at_least": 1, "at_most": 3}', Count(1, 3), "from 1 to 3"),
    ],
)
def test_a_count_is_exact_or_bounded_and_at_least_one_by_default(
    count: str | None, wanted: Count, text: str
) -> None:
    body = "{}" if count is None else f'{{"count": {count}}}'
    verification = read_verification(body)
    assert verification.count == wanted
    assert verification.count.text == text


def test_a_bad_condition_is_the_problem_a_scenario_files_when_gets() -> None:
    """The same mistake in a scenario's ``when:`` and in a verification: the same words,
    each at the line and column of the mistake in its own text (item 12)."""
    scenario = textwrap.dedent(
        """
        name: m
        skills:
          - id: echo
            invoke:
              cases:
                - when: {body: {/input/text: {machtes: "^a"}}, header: {x: y}}
                  json: {}
        """
    )
    with pytest.raises(ScenarioError) as raised:
        load_text(scenario, "m.yaml")
    in_file = sorted(raised.value.problems, key=lambda p: p.column)
    in_verify = problems(
        """
        {"session": "S",
         "when": {"body": {"/input/text": {"machtes": "^a"}}, "header": {"x": "y"}}}
        """
    )
    assert [(p.expected, p.found, p.hint) for p in in_verify] == [
        (p.expected, p.found, p.hint) for p in in_file
    ]
    body_problem, key_problem = in_verify
    assert_problem(
        body_problem,
        "when.body./input/text.machtes",
        2,
        36,
        "a known key",
        "unknown key 'machtes'",
        "did you mean 'matches'?",
    )
    assert_problem(
        key_problem,
        "when.header",
        2,
        55,
        "a known key",
        "unknown key 'header'",
        "did you mean 'headers'?",
    )


def test_a_body_condition_on_a_method_without_a_body_is_refused_as_in_a_scenario() -> None:
    [problem] = problems('{"method": "GET", "when": {"body": {"/a": 1}}}')
    assert_problem(
        problem,
        "when.body",
        1,
        28,
        "conditions on headers or query",
        "a body condition on GET requests",
        "match the body on an endpoint that takes one",
    )


def test_an_expression_re2_cannot_run_is_refused_with_why() -> None:
    [problem] = problems('{"when": {"raw_body": {"matches": "(a)\\\\1"}}}')
    assert problem.path == "when.raw_body.matches"
    assert problem.expected == "a regular expression (RE2 syntax)"
    assert "backreference" in problem.hint


def json_error(text: str) -> str:
    """What this Python's json says of *text* (its wording changed in 3.13)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return error.msg
    raise AssertionError(f"{text!r} is valid JSON")


@pytest.mark.parametrize(
    ("body", "path", "expected", "found", "hint"),
    [
        ('{"sesion": "S"}', "sesion", "a known key", "unknown key 'sesion'", "did you mean"),
        ('{"session": ""}', "session", "a non-empty string", "'' (a string)", ""),
        ('{"path": "skills"}', "path", "a path beginning with /", "'skills'", ""),
        ('{"method": "PO ST"}', "method", "an HTTP method", "'PO ST'", ""),
        ('{"count": -1}', "count", "a whole number of at least 0", "-1", ""),
        ('{"count": true}', "count", "a count: N", "true (a boolean)", ""),
        ('{"count": {"at_lest": 1}}', "count.at_lest", "a known key", "unknown key", "did you"),
        ('{"count": {"equals": 1, "at_most": 2}}', "count", "equals alone", "equals beside", ""),
        ('{"count": {"at_least": 3, "at_most": 2}}', "count.at_most", "at least at_least", "2", ""),
        ('{"when": []}', "when", "conditions: a mapping", "a list of 0 items", ""),
        ("[1]", "(top level)", "a verification: a JSON object", "a list of 1 item", ""),
        ("", "(top level)", "one JSON object", "nothing", ""),
        ('{"session": NaN}', "(JSON syntax)", "valid JSON", "NaN, which is JavaScript", "give"),
        ('{"session": "S",}', "(JSON syntax)", "valid JSON", json_error('{"session": "S",}'), ""),
    ],
)
def test_each_bad_part_is_a_positioned_problem(
    body: str, path: str, expected: str, found: str, hint: str
) -> None:
    [problem] = problems(body)
    assert problem.path == path
    assert (problem.line, problem.column) >= (1, 1)
    assert problem.expected.startswith(expected)
    assert problem.found.startswith(found)
    assert hint in problem.hint


def test_the_message_says_nothing_was_verified() -> None:
    with pytest.raises(BadVerification) as raised:
        read_verification('{"when": {"bdy": {}}}')
    said = str(raised.value)
    assert said.startswith("<verify request>:1:11: when.bdy: expected a known key")
    assert said.endswith("1 problem in the verification; nothing was verified.")
    assert isinstance(raised.value, ScenarioError)  # caught where a bad when: is


def test_python_data_is_placed_by_its_path() -> None:
    with pytest.raises(BadVerification) as raised:
        verification_of({"when": {"query": {"page": 2}}})
    [problem] = raised.value.problems
    assert (problem.file, problem.line, problem.column) == ("<verify>", 0, 0)
    assert problem.path == "when.query.page"
    assert problem.expected == "a string (equals) or a mapping of tests"
    with pytest.raises(BadVerification, match="plain data"):
        verification_of({"when": {"body": {"/a": {1, 2}}}})


def test_conditions_alone_are_positioned_in_their_own_text() -> None:
    """``mockskill verify --when``: the problem is at the line and column of what was typed."""
    with pytest.raises(BadVerification) as raised:
        read_conditions('{"body": {"input/text": "hello"}}', "--when")
    [problem] = raised.value.problems
    assert (problem.file, problem.line, problem.column, problem.path) == (
        "--when",
        1,
        11,
        "body.input/text",
    )
    assert problem.expected.startswith("a JSON Pointer")
    with pytest.raises(BadVerification):
        read_conditions('{"body": {"/a": 1}}', "--when", method="GET")
    [condition] = read_conditions('{"headers": {"X-A": "1"}}', "--when")
    assert condition.name == "x-a"


def test_the_document_the_faces_send_leaves_out_what_is_not_given() -> None:
    assert document() == {}
    assert document({"body": {"/a": 1}}, session="S", count=2) == {
        "session": "S",
        "when": {"body": {"/a": 1}},
        "count": {"equals": 2},
    }
    assert document(at_least=1, at_most=3)["count"] == {"at_least": 1, "at_most": 3}
    with pytest.raises(BadVerification, match="equals alone"):
        verification_of(document(count=1, at_most=3))
