"""Reading a skill: the descriptor it serves (default, merged, or raw) and its default steps."""

from __future__ import annotations

import json
import textwrap

import pytest

from mockskill import ScenarioError, load_text
from mockskill.protocol.descriptor import default as default_descriptor


def descriptor_of(skill_yaml: str) -> object:
    [skill] = load_text(textwrap.dedent(skill_yaml)).skills
    return json.loads(skill.descriptor)


def test_a_skill_without_descriptor_serves_the_default_and_a_default_invoke() -> None:
    [skill] = load_text("skills:\n  - id: plain\n", "p.yaml").skills
    assert json.loads(skill.descriptor) == default_descriptor("plain")
    assert skill.raw is False
    [describe] = skill.describe.steps
    assert (describe.reply.status, describe.reply.body) == (200, skill.descriptor)
    [invoke] = skill.invoke.steps
    assert json.loads(invoke.reply.body) == {"skill": "plain", "result": "ok"}
    assert (skill.where.line, skill.where.column) == (2, 5)


def test_a_descriptor_merges_over_the_default_nested_and_null_removes() -> None:
    document = descriptor_of(
        """\
        skills:
          - id: merged
            descriptor:
              name: Merged
              endpoint: {url: null, timeout_ms: 10}
              auth: null
              tags: [a, b]
        """
    )
    expected = default_descriptor("merged")
    expected["name"] = "Merged"
    expected["endpoint"] = {"method": "POST", "timeout_ms": 10}
    del expected["auth"]
    expected["tags"] = ["a", "b"]
    assert document == expected


def test_the_skill_name_comes_from_its_descriptor() -> None:
    [skill] = load_text("skills: [{id: t, descriptor: {name: Translate}}]").skills
    assert skill.name == "Translate"


@pytest.mark.parametrize(
    ("raw", "served"),
    [
        pytest.param("{only: this}", {"only": "this"}, id="object"),
        pytest.param("[1, 2]", [1, 2], id="list"),
        pytest.param("'just text'", "just text", id="string"),
        pytest.param("null", None, id="null"),
        pytest.param("42", 42, id="number"),
    ],
)
def test_raw_descriptor_is_served_as_is_even_when_not_an_object(raw: str, served: object) -> None:
    [skill] = load_text(f"skills:\n  - id: raw\n    raw_descriptor: {raw}\n").skills
    assert skill.raw is True
    assert json.loads(skill.describe.steps[0].reply.body) == served
    assert json.loads(skill.descriptor) == served
    assert skill.name == "raw"


@pytest.mark.parametrize(
    ("written", "found", "hint"),
    [
        ("yes", "yes unquoted (YAML 1.1's boolean true, a word to YAML 1.2)", "write true"),
        ("off", "off unquoted (YAML 1.1's boolean false, a word to YAML 1.2)", "write false"),
        ("'yes'", "'yes' (a string)", "write true"),
        ("2", "2 (an integer)", ""),
    ],
)
def test_unreachable_that_is_not_a_boolean_offers_what_is_valid(
    written: str, found: str, hint: str
) -> None:
    text = f"skills:\n  - id: s\n    unreachable: {written}\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    # One problem, and no advice to quote it: a quoted 'yes' is a string, not a boolean.
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (3, "skills[0].unreachable")
    assert (problem.expected, problem.found, problem.hint) == ("true or false", found, hint)


def test_a_yes_where_a_boolean_is_wanted_is_said_so_in_cases_and_proxies() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              cases:
                - when: {body: {/a: {absent: yes}}}
                  json: 1
              steps:
                - proxy: {url: 'https://p', verify: no}
        """
    )
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    assert [(p.path, p.hint) for p in caught.value.problems] == [
        ("skills[0].invoke.cases[0].when.body./a.absent", "write true"),
        ("skills[0].invoke.steps[0].proxy.verify", "write false"),
    ]
