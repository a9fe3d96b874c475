"""Cases and their conditions, as the loader reads them: what each becomes, each rule it checks."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_problem

from mockskill import ScenarioError, load_text
from mockskill.scenario.cases import parse_pointer
from mockskill.scenario.model import Case, Check, Skill
from mockskill.scenario.problems import Problem
from mockskill.scenario.when import Pattern

TRANSLATE = """
skills:
  - id: translate
    invoke:
      cases:
        - when:
            body: {/input/text: boom}
          error: EXECUTION_TIMEOUT
        - when:
            body: {/input/lang: {absent: true}}
          status: 400
          json: {error: lang is required}
      steps:
        - json: {translation: hola}
"""


def skill_of(text: str) -> Skill:
    [skill] = load_text(textwrap.dedent(text), "s.yaml").skills
    return skill


def problems_in(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(textwrap.dedent(text), "s.yaml")
    return list(caught.value.problems)


def cases_yaml(cases: str, *, steps: bool = True) -> str:
    """A translate skill whose invoke has *cases* (the list's items, at column 9) and a
    default step unless *steps* is false. The first case's ``- `` is on line 6."""
    default = "      steps:\n        - json: {translation: hola}\n" if steps else ""
    return (
        "skills:\n  - id: translate\n    invoke:\n      cases:\n"
        + textwrap.indent(textwrap.dedent(cases), "        ")
        + default
    )


# -- what cases become --------------------------------------------------------------


def test_the_issues_example_loads_as_two_cases_and_a_default() -> None:
    skill = skill_of(TRANSLATE)
    first, second = skill.invoke_cases
    assert isinstance(first, Case)
    assert (first.index, second.index) == (0, 1)
    [boom] = first.conditions
    assert (boom.source, boom.name, boom.pointer) == ("body", "/input/text", ("input", "text"))
    assert boom.checks == (Check("equals", "boom"),)
    assert first.sequence.steps[0].reply.error_code == "EXECUTION_TIMEOUT"
    [lang] = second.conditions
    assert lang.checks == (Check("absent"),)
    assert second.sequence.steps[0].reply.status == 400
    assert skill.invoke is not None
    assert skill.invoke.steps[0].reply.status == 200
    assert skill.describe_cases == ()


def test_a_case_may_have_a_sequence_of_its_own() -> None:
    skill = skill_of(
        cases_yaml("""\
        - when: {headers: {X-Tenant: acme}}
          steps:
            - error: ENDPOINT_UNREACHABLE
              times: 2
            - json: {ok: true}
          end: cycle
        """)
    )
    [case] = skill.invoke_cases
    assert case.sequence.length == 3
    assert case.sequence.end == "cycle"
    assert case.conditions[0].name == "x-tenant"  # header names in any case


def test_every_source_and_operator() -> None:
    [case] = skill_of(
        cases_yaml("""\
        - when:
            headers: {X-A: {matches: "^a+$", contains: a}}
            query: {debug: {exists: true}, lang: {equals: de}}
            body: {"": {contains: input}, /tags: {contains: 7}, /a~1b/0: {exists: false}}
            raw_body: {matches: "bo+m"}
          json: {}
        """)
    ).invoke_cases
    found = {(c.source, c.name): c.checks for c in case.conditions}
    pattern = found[("headers", "x-a")][0].operand
    assert isinstance(pattern, Pattern)
    assert pattern.pattern == "^a+$"
    assert pattern.search("aa") is not None
    assert pattern.search("ab") is None
    assert found[("headers", "x-a")][1] == Check("contains", "a")
    assert found[("query", "debug")] == (Check("exists"),)
    assert found[("query", "lang")] == (Check("equals", "de"),)
    assert found[("body", "")] == (Check("contains", "input"),)
    assert found[("body", "/tags")] == (Check("contains", 7),)
    assert found[("body", "/a~1b/0")] == (Check("absent"),)  # exists: false is absent
    assert found[("raw_body", "")][0].operator == "matches"


@pytest.mark.parametrize(
    ("written", "why", "instead"),
    [
        (r"(a)\1", "a backreference needs backtracking", "spell out the repeated text"),
        (r"(?P<n>a)(?P=n)", "a backreference needs backtracking", "spell out"),
        (r"^(?!admin)", "a lookaround needs backtracking", "put a case taking the requests"),
        (r"(?<=v)1", "a lookaround needs backtracking", "match the text itself"),
        (r"a\Z", "RE2 spells the end of the text \\z", "write \\z"),
        (r"(?>ab)", "an atomic group", "write a plain group, (?:...)"),
        (r"a{2}+", "a possessive quantifier", "write {2} alone"),
        (r"(?x) a b", "RE2 has no verbose mode", "without its spaces"),
        (r"a{1001}", "RE2 counts a repetition up to 1000", "use + or *"),
    ],
)
def test_an_expression_re2_cannot_run_is_a_problem_saying_why_and_what_to_write(
    written: str, why: str, instead: str
) -> None:
    """Python's re would take these, and some can backtrack for exponential time."""
    quoted = written.replace("'", "''")
    [problem] = problems_in(
        cases_yaml(f"- when: {{headers: {{X-A: {{matches: '{quoted}'}}}}}}\n  json: {{}}\n")
    )
    assert problem.path == "skills[0].invoke.cases[0].when.headers.X-A.matches"
    assert (problem.line, problem.column) == (5, 43)
    assert problem.expected == "a regular expression (RE2 syntax)"
    assert problem.found.startswith(repr(written))
    assert problem.hint.startswith(why), problem.hint
    assert instead in problem.hint


def test_an_expression_is_searched_in_linear_time() -> None:
    """The issue's expression, against a header built to make a backtracking engine take
    seconds (2**27 paths): RE2 answers no match at once."""
    [case] = skill_of(
        cases_yaml("- when: {headers: {X-A: {matches: '^([a-z0-9]+-?)+$'}}}\n  json: {}\n")
    ).invoke_cases
    [check] = case.conditions[0].checks
    assert check.operand.search("a" * 27 + "!") is None
    assert check.operand.search("a" * 10_000 + "!") is None
    assert check.operand.search("abc-def") is not None


def test_cases_without_steps_have_no_default() -> None:
    skill = skill_of(cases_yaml("- when: {body: {/x: 1}}\n  json: {}\n", steps=False))
    assert skill.invoke is None
    assert len(skill.invoke_cases) == 1


def test_a_route_may_have_cases_and_no_steps() -> None:
    [scenario] = load_text(
        textwrap.dedent("""\
        routes:
          - path: /orders
            method: POST
            cases:
              - when: {body: {/id: 1}}
                json: {order: 1}
        """),
        "r.yaml",
    ).scenarios
    [route] = scenario.routes
    assert route.sequence is None
    assert route.cases[0].conditions[0].pointer == ("id",)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", ()), ("/", ("",)), ("/a/0", ("a", "0")), ("/a~1b/~0c", ("a/b", "~c")), ("/~01", ("~1",))],
)
def test_json_pointers_unescape_as_rfc_6901_says(text: str, tokens: tuple[str, ...]) -> None:
    assert parse_pointer(text) == tokens


@pytest.mark.parametrize("text", ["a", "a/b", "/a~", "/a~2b"])
def test_what_is_not_a_json_pointer(text: str) -> None:
    assert parse_pointer(text) is None


# -- every rule a case can break -----------------------------------------------------

BAD_CASES = [
    # (cases, path, line, column, expected, found, hint)
    pytest.param(
        "- when: {body: {input/text: boom}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.body.input/text",
        5,
        25,
        "a JSON Pointer",
        "'input/text'",
        "beginning with /",
        id="pointer-without-slash",
    ),
    pytest.param(
        "- when: {body: {/a~2: boom}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.body./a~2",
        5,
        25,
        "a JSON Pointer",
        "'/a~2'",
        "beginning with /",
        id="pointer-bad-escape",
    ),
    pytest.param(
        "- when: {headers: {X-A: {matches: '(unclosed'}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.headers.X-A.matches",
        5,
        43,
        "a regular expression (RE2 syntax)",
        "'(unclosed'",
        "missing ): (unclosed",
        id="regex-does-not-compile",
    ),
    pytest.param(
        "- when: {bdy: {/a: 1}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.bdy",
        5,
        18,
        "a known key",
        "unknown key 'bdy'",
        "did you mean 'body'",
        id="unknown-source",
    ),
    pytest.param(
        "- when: {body: {/a: {equal: 1}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.body./a.equal",
        5,
        30,
        "a known key",
        "unknown key 'equal'",
        "did you mean 'equals'",
        id="unknown-operator",
    ),
    pytest.param(
        "- when: {headers: {X-A: {equals: 1}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.headers.X-A.equals",
        5,
        42,
        "a string (header values are text)",
        "1",
        "",
        id="header-value-not-text",
    ),
    pytest.param(
        "- when: {query: {a: {exists: yes please}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.query.a.exists",
        5,
        38,
        "true or false",
        "'yes please'",
        "",
        id="exists-not-boolean",
    ),
    pytest.param(
        "- when: {body: {/a: {absent: true, equals: 1}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.body./a",
        5,
        29,
        "absent alone",
        "absent with tests",
        "nothing to test",
        id="absent-with-tests",
    ),
    pytest.param(
        "- when: {body: {/a: {}}}\n  json: {}\n",
        "skills[0].invoke.cases[0].when.body./a",
        5,
        29,
        "at least one test",
        "an empty mapping",
        "",
        id="no-tests",
    ),
    pytest.param(
        "- json: {}\n",
        "skills[0].invoke.cases[0]",
        5,
        11,
        "the key 'when'",
        "it missing",
        "when: {}",
        id="case-without-when",
    ),
    pytest.param(
        "- when: {headers: {X-A: a}}\n",
        "skills[0].invoke.cases[0]",
        5,
        11,
        "a step (error:, json: ...) or steps:",
        "only when:",
        "",
        id="case-without-step",
    ),
    pytest.param(
        "- when: {headers: {X-A: a}}\n  eror: SKILL_NOT_FOUND\n",
        "skills[0].invoke.cases[0].eror",
        6,
        11,
        "a known key",
        "unknown key 'eror'",
        "did you mean 'error'",
        id="a-case's-step-checked-like-any",
    ),
    pytest.param(
        "- when: {}\n  json: {a: 1}\n- when: {headers: {X-A: a}}\n  json: {b: 2}\n",
        "skills[0].invoke.cases[1]",
        7,
        11,
        "a case some request can reach",
        "a case after case 1",
        "move case 1 last",
        id="unreachable-after-a-catch-all",
    ),
]


@pytest.mark.parametrize(
    ("cases", "path", "line", "column", "expected", "found", "hint"), BAD_CASES
)
def test_a_bad_case_is_a_positioned_problem(
    cases: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    problems = problems_in(cases_yaml(cases))
    assert_problem(problems[-1], path, line, column, expected, found, hint)


def test_body_conditions_on_describe_are_refused_as_it_carries_no_body() -> None:
    [problem] = problems_in(
        """\
        skills:
          - id: s
            describe:
              cases:
                - when: {body: {/a: 1}}
                  descriptor: true
        """
    )
    assert_problem(
        problem,
        "skills[0].describe.cases[0].when.body",
        5, 18, "conditions on headers or query", "a body condition on GET/HEAD", "POST",
    )  # fmt: skip


def test_body_conditions_on_a_get_route_are_refused() -> None:
    [problem] = problems_in(
        """\
        routes:
          - path: /x
            cases:
              - when: {raw_body: {contains: a}}
                json: {}
        """
    )
    assert (problem.path, problem.line, problem.column) == (
        "routes[0].cases[0].when.raw_body",
        4,
        16,
    )
    assert problem.found.startswith("a raw_body condition on GET requests")


def test_every_problem_of_every_case_at_once() -> None:
    problems = problems_in(
        cases_yaml(
            "- when: {body: {nope: 1}}\n  json: {}\n- when: {query: {a: {matches: '['}}}\n"
            "  json: {}\n"
        )
    )
    assert [p.path for p in problems] == [
        "skills[0].invoke.cases[0].when.body.nope",
        "skills[0].invoke.cases[1].when.query.a.matches",
    ]


def test_cases_must_be_a_non_empty_list() -> None:
    [problem] = problems_in(
        "skills:\n  - id: s\n    invoke:\n      cases: []\n      steps: [{json: {}}]\n"
    )
    assert_problem(
        problem, "skills[0].invoke.cases", 4, 14, "a list of cases", "a list of 0 items", ""
    )


def test_a_case_may_end_with_next_and_the_cases_after_an_empty_one_that_does_are_reachable() -> (
    None
):
    skill = skill_of(
        cases_yaml(
            """\
            - when: {}
              steps: [{json: {first: true}}]
              end: next
            - when: {body: {/x: 1}}
              json: {}
            """
        )
    )
    assert [case.sequence.end for case in skill.invoke_cases] == ["next", "last"]


def test_next_ends_only_a_case_s_steps() -> None:
    [problem] = problems_in(
        """\
        skills:
          - id: translate
            invoke:
              end: next
              steps: [{json: {}}]
        """
    )
    assert_problem(
        problem,
        "skills[0].invoke.end",
        4,
        12,
        "one of last, cycle, fail",
        "'next'",
        "only a case's steps may end so",
    )


# -- named cases (name:, chosen by the Mockskill-Case header) ------------------------

NAMED = """
skills:
  - id: pay
    describe:
      cases:
        - name: gone
          when: {}
          steps: [{error: SKILL_NOT_FOUND}]
          end: next
      steps:
        - descriptor: true
    invoke:
      cases:
        - name: ok
          when: {}
          json: {paid: true}
        - name: EXECUTION_TIMEOUT-408
          when: {headers: {X-Slow: "1"}}
          error: EXECUTION_TIMEOUT
          status: 408
"""


def test_a_case_keeps_its_name_and_is_labelled_by_it() -> None:
    (skill,) = load_text(NAMED).skills
    assert [c.name for c in skill.invoke_cases] == ["ok", "EXECUTION_TIMEOUT-408"]
    assert skill.describe_cases[0].name == "gone"
    assert skill.invoke_cases[1].label == "case 'EXECUTION_TIMEOUT-408'"


def test_a_named_case_after_one_that_takes_every_request_is_still_reachable() -> None:
    # (the header reaches it: only an unnamed one there is refused, as before)
    load_text(NAMED)
    unnamed = NAMED.replace("        - name: EXECUTION_TIMEOUT-408\n", "        -\n")
    unnamed = unnamed.replace("        -\n          when: {headers", "        - when: {headers")
    (problem,) = problems_in(unnamed)
    assert problem.path == "skills[0].invoke.cases[1]"
    assert "case 'ok', whose empty conditions take every request" in problem.found


@pytest.mark.parametrize(
    ("name", "found"),
    [("two words", "'two words'"), ("-dash", "'-dash'"), ("7", "7 (an integer)")],
    ids=["space", "leading-dash", "not-a-string"],
)
def test_a_case_name_is_a_token(name: str, found: str) -> None:
    text = NAMED.replace("name: ok", f"name: {name}" if name != "7" else "name: 7")
    (problem,) = problems_in(text)
    assert problem.path == "skills[0].invoke.cases[0].name"
    assert problem.expected.startswith("a case name")
    assert problem.found.startswith(found)


def test_a_case_name_is_unique_in_its_skill_across_both_endpoints() -> None:
    (problem,) = problems_in(NAMED.replace("name: gone", "name: ok"))
    assert problem.path == "skills[0].invoke.cases[0].name"
    assert problem.expected == "a case name unique in its skill or route"
    assert "'ok', the name of the case at s.yaml:" in problem.found


def test_a_case_name_is_unique_in_its_route() -> None:
    text = """
routes:
  - path: /orders
    cases:
      - {name: a, when: {query: {x: "1"}}, json: {}}
      - {name: a, when: {query: {x: "2"}}, json: {}}
"""
    (problem,) = problems_in(text)
    assert problem.path == "routes[0].cases[1].name"
