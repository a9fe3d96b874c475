"""Which case a request takes, and the reason each case before it gives for missing."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder

from mockskill import load_text
from mockskill.engine.conditions import ABSENT, Facts, Picker, meets, misses, resolve, same
from mockskill.engine.incoming import Incoming
from mockskill.scenario.model import Case


def cases_of(when: str) -> tuple[Case, ...]:
    """The invoke cases of a skill whose cases are *when* (YAML list items)."""
    text = "skills:\n  - id: s\n    invoke:\n      cases:\n" + textwrap.indent(
        textwrap.dedent(when), "        "
    )
    [skill] = load_text(text, "s.yaml").skills
    return skill.invoke_cases


def request(
    body: bytes | Any = b"", *, headers: dict[str, str] | None = None, query: str = ""
) -> Incoming:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    built = EnvironBuilder(
        path="/skills/s/invoke", method="POST", data=raw, headers=headers, query_string=query
    ).get_request()
    return Incoming.of(built)


def pick(cases: tuple[Case, ...], incoming: Incoming) -> Case | None:
    """The first case whose every condition meets the request, trying each in order: the
    rule, which the Picker answers faster."""
    facts = Facts(incoming)
    return next((c for c in cases if all(meets(d, facts) for d in c.conditions)), None)


def taken(cases: tuple[Case, ...], incoming: Incoming) -> int | None:
    case = Picker(cases).pick(incoming)
    assert case == pick(cases, incoming)
    missed = misses(cases, incoming)  # the words agree with the decision: none before it
    first = next((n for n, m in enumerate(missed) if not m["reasons"]), None)
    assert first == (None if case is None else case.index)
    return None if case is None else case.index


TRANSLATE = cases_of("""\
- when: {body: {/input/text: boom}}
  error: EXECUTION_TIMEOUT
- when: {body: {/input/lang: {absent: true}}}
  status: 400
  json: {error: lang is required}
""")


def test_the_issues_example_picks_by_the_body() -> None:
    assert taken(TRANSLATE, request({"input": {"text": "boom", "lang": "de"}})) == 0
    assert taken(TRANSLATE, request({"input": {"text": "hi"}})) == 1
    assert taken(TRANSLATE, request({"input": {"text": "hi", "lang": "de"}})) is None


def test_a_miss_says_which_condition_of_which_case_failed_and_why() -> None:
    incoming = request({"input": {"text": "hi", "lang": "de"}})
    assert pick(TRANSLATE, incoming) is None
    assert misses(TRANSLATE, incoming) == [
        {"case": "case 1", "reasons": ["body /input/text equals 'boom': found \"hi\""]},
        {"case": "case 2", "reasons": ['body /input/lang absent: found "de"']},
    ]


def test_a_body_that_is_not_json_misses_every_body_condition_saying_so() -> None:
    missed = misses(TRANSLATE, request(b"text=boom"))
    assert missed[0]["reasons"] == ["body /input/text: the body is not JSON"]
    missed = misses(TRANSLATE, request(b""))
    assert missed[0]["reasons"] == ["body /input/text: the body is empty"]


def test_headers_in_any_case_and_query_parameters_any_of_their_values() -> None:
    cases = cases_of("""\
    - when:
        headers: {X-Tenant: {matches: "^acme-"}}
        query: {lang: de}
      json: {}
    """)
    assert taken(cases, request(headers={"x-tenant": "acme-1"}, query="lang=en&lang=de")) == 0
    missed = misses(cases, request(headers={"X-Tenant": "acme-1"}, query="lang=en"))
    assert missed[0]["reasons"] == ["query parameter lang equals 'de': found \"en\""]
    missed = misses(cases, request(query="lang=de"))
    assert missed[0]["reasons"] == ["header x-tenant matches '^acme-': it is absent"]


def test_every_condition_of_a_case_is_reported_not_only_the_first() -> None:
    cases = cases_of("- when: {headers: {X-A: a}, query: {b: b}}\n  json: {}\n")
    missed = misses(cases, request())
    assert len(missed[0]["reasons"]) == 2


def test_the_tests_of_one_value_must_all_hold() -> None:
    cases = cases_of("- when: {raw_body: {contains: bo, matches: 'm$'}}\n  json: {}\n")
    assert taken(cases, request(b"boom")) == 0
    missed = misses(cases, request(b"boots"))
    assert missed[0]["reasons"] == ["the raw body matches 'm$': found \"boots\""]


@pytest.mark.parametrize(
    ("test", "body", "holds"),
    [
        ("{contains: oo}", {"v": "boom"}, True),
        ("{contains: 7}", {"v": [1, 7]}, True),
        ("{contains: 7}", {"v": [1, "7"]}, False),
        ("{contains: k}", {"v": {"k": None}}, True),
        ("{equals: 1}", {"v": 1.0}, True),
        ("{equals: 1}", {"v": True}, False),  # JSON: true is not 1
        ("{equals: {a: [1]}}", {"v": {"a": [1]}}, True),
        ("{equals: null}", {"v": None}, True),
        ("{exists: true}", {"v": None}, True),  # present, if null
        ("{absent: true}", {}, True),
        ("{matches: '^[0-9]+$'}", {"v": 12}, False),  # a number is not text
    ],
)
def test_each_operator_on_json_values(test: str, body: Any, holds: bool) -> None:
    cases = cases_of(f"- when: {{body: {{/v: {test}}}}}\n  json: {{}}\n")
    assert (taken(cases, request(body)) == 0) is holds


def test_json_pointers_resolve_as_rfc_6901_says() -> None:
    document = {"a/b": {"~c": [10, 20]}, "": 1}
    assert resolve(document, ("a/b", "~c", "1")) == 20
    assert resolve(document, ("",)) == 1
    assert resolve(document, ("a/b", "~c", "01")) is ABSENT  # no leading zeros
    assert resolve(document, ("a/b", "~c", "2")) is ABSENT
    assert resolve(document, ("a/b", "~c", "-")) is ABSENT
    assert resolve(document, ()) is document


@pytest.mark.parametrize(
    "token",
    ["0", "1", "10", "", "00", "01", "-1", "+1", "1 ", " 1", "1.0", "\u0661", "\u00b2", "x"],
)
def test_an_array_index_is_rfc_6901s_no_sign_no_leading_zero_ascii_digits(token: str) -> None:
    document = [[f"item {n}" for n in range(11)]]
    index = re.fullmatch(r"0|[1-9][0-9]*", token)  # the RFC's grammar (ASCII digits)
    found = resolve(document, ("0", token))
    assert found == (f"item {int(token)}" if index else ABSENT)


def test_json_equality_is_deep_and_strict_about_booleans() -> None:
    assert same([1, {"a": 2.0}], [1.0, {"a": 2}])
    assert not same([True], [1])
    assert not same({"a": 1}, {"a": 1, "b": 2})
    assert not same("1", 1)


def test_a_case_with_no_conditions_takes_every_request() -> None:
    cases = cases_of("- when: {headers: {X-A: a}}\n  json: {}\n- when: {}\n  json: {}\n")
    assert taken(cases, request()) == 1


def test_a_long_value_is_quoted_shortened_in_a_reason() -> None:
    missed = misses(TRANSLATE, request({"input": {"text": "x" * 10_000, "lang": "de"}}))
    reason = missed[0]["reasons"][0]
    assert len(reason) < 200
    assert "more characters" in reason


MIXED = cases_of("""\
- when: {body: {/n: 1}}
  json: {}
- when: {body: {/n: "1"}}
  json: {}
- when: {body: {/n: 1}}
  json: {}
- when: {body: {/n: null}}
  json: {}
- when: {body: {/n: 2.0}}
  json: {}
- when: {body: {/n: 3}}
  json: {}
- when: {body: {/m: 3}}
  json: {}
- when: {body: {/n: {matches: "^x"}}}
  json: {}
- when: {body: {/n: 4}}
  json: {}
- when: {body: {/n: true}}
  json: {}
- when: {headers: {X-N: "1"}, body: {/n: 5}}
  json: {}
""")

VALUES: list[Any] = [1, "1", 1.0, True, False, None, 2, 2.0, 3, 3.5, 4, 5, "x1", [1], {"n": 1}]


@pytest.mark.parametrize("value", [*VALUES, "absent", "not json"])
def test_the_picker_answers_what_trying_every_case_in_order_does(value: Any) -> None:
    picker = Picker(MIXED)
    for m in (None, 3):
        if value == "not json":
            incoming = request(b"n=1")
        else:
            body: dict[str, Any] = {} if value == "absent" else {"n": value}
            if m is not None:
                body["m"] = m
            incoming = request(body, headers={"X-N": "1"})
        assert picker.pick(incoming) == pick(MIXED, incoming), (value, m)


def test_a_run_of_equalities_on_one_place_is_one_lookup() -> None:
    twenty = cases_of("".join(f"- when: {{body: {{/n: {k}}}}}\n  json: {{}}\n" for k in range(20)))
    picker = Picker(twenty)
    assert len(picker._steps) == 1  # one run
    assert picker.pick(request({"n": 19})) is twenty[19]
    assert picker.pick(request({"n": 20})) is None
    assert picker.pick(request({"n": 19.0})) is twenty[19]  # tried one by one: JSON-equal


SEARCHED = cases_of("""\
- when: {query: {q: {matches: "^b"}}}
  json: {}
- when: {query: {q: {matches: "a"}}}
  json: {}
- when: {query: {q: {matches: "^ab$"}}}
  json: {}
- when: {query: {r: {matches: "."}}}
  json: {}
- when: {query: {q: {matches: "z"}}}
  json: {}
- when: {body: {/n: {matches: "^1"}}}
  json: {}
- when: {body: {/n: {matches: "2"}}}
  json: {}
""")


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("q=ab", {}), ("q=b", {}), ("q=zz", {}), ("q=xyz&r=1", {}), ("q=c&q=ba", {}),
        ("q=c&q=za", {}), ("", {}), ("r=", {}), ("", {"n": "12"}), ("", {"n": 12}),
        ("", {"n": "2"}), ("", b"not json"), ("q=", {"n": ["1"]}),
    ],
)  # fmt: skip
def test_a_run_of_expressions_on_one_place_answers_what_trying_each_does(
    query: str, body: Any
) -> None:
    incoming = request(body, query=query)
    assert Picker(SEARCHED).pick(incoming) == pick(SEARCHED, incoming), (query, body)


def test_a_run_of_expressions_on_one_place_is_one_search() -> None:
    twenty = cases_of(
        "".join(
            f"- when: {{body: {{/n: {{matches: '^{k}$'}}}}}}\n  json: {{}}\n" for k in range(20)
        )
    )
    picker = Picker(twenty)
    assert len(picker._steps) == 1  # one run, one RE2 search for the twenty
    assert picker.pick(request({"n": "19"})) is twenty[19]
    assert picker.pick(request({"n": "20"})) is None
    assert picker.pick(request({"n": 19})) is None  # a number is not text
