"""Request conditions: what a case of an endpoint asks of the request, checked at load.

A skill's ``describe``/``invoke`` and a route may list ``cases``; each case
has conditions (``when``) and its own sequence, and the first case whose
conditions all hold plays (the endpoint's default sequence otherwise)::

    invoke:
      cases:
        - when:
            body: {/input/text: boom}             # a JSON Pointer: equals
          error: EXECUTION_TIMEOUT
        - when:
            body: {/input/lang: {absent: true}}
          status: 400
          json: {error: lang is required}
      steps:                                      # the default; none: unmatched
        - json: {translation: hola}

A condition names where the value is (``headers``, ``query``, ``body`` by
JSON Pointer, ``raw_body``) and one or more tests on it: ``equals``,
``contains``, ``matches`` (a regular expression in RE2's syntax, searched),
``exists``, ``absent``; a plain value is ``equals``. This module owns their
reading: pointers parsed, regexes compiled (by RE2: a search is linear in the
text), a case no request can reach refused. The frozen model is
:mod:`.model`'s (:class:`~.model.Case`); what a request makes of it is the
engine's (:mod:`mockskill.engine.conditions`).
"""

from __future__ import annotations

import re
from typing import Any

from .model import CASE_END_RULES, Case, Check, Condition, Operator, Sequence, ValueSource
from .problems import Path, describe
from .reader import Reader
from .states import requiring
from .steps import StepContext, read_sequence
from .when import Pattern, PatternError, parse_pointer

SOURCES: tuple[ValueSource, ...] = ("headers", "query", "body", "raw_body")
OPERATORS: tuple[Operator, ...] = ("equals", "contains", "matches", "exists", "absent")
WHEN_KEYS: tuple[str, ...] = SOURCES
CASE_KEYS = ("name", "when", "state", "task_life")
"""A case's own keys; the rest are its sequence's (``steps``/``end``) or its one step's.
(``task_life:`` is read with the skill's ``task:``, by :mod:`.skills`.)"""
CASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
"""What a case's ``name`` looks like: it travels in a header (``Mockskill-Case``) and in
the audit's findings, so a token of at most 100 characters."""
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods whose requests carry no body a condition could look at."""


def read_when(
    r: Reader, value: Any, path: Path, *, methods: tuple[str, ...]
) -> tuple[Condition, ...] | None:
    """A case's ``when``: its conditions (none: the case takes every request).

    *methods* are those the endpoint answers: a body condition where none
    of them carries a body could never hold.
    """
    raw = r.mapping(value, path, "conditions: a mapping of headers, query, body, raw_body")
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, WHEN_KEYS)
    conditions: list[Condition] = []
    for source in raw:  # in the order written: a near-miss gives its reasons in that order
        if source not in SOURCES:
            continue  # (reported by keys above)
        where = (*path, source)
        if source in ("body", "raw_body") and set(methods) <= BODILESS:
            r.bad(
                where,
                "conditions on headers or query",
                f"a {source} condition on {'/'.join(methods)} requests, which carry no body",
                "match the body on an endpoint that takes one (POST, PUT, PATCH, DELETE)",
                at_key=True,
            )
            continue
        if source == "raw_body":
            tests = _read_tests(r, raw[source], where, source)
            if tests is not None:
                conditions.append(Condition(source, "", (), tests, r.position(where)))
            continue
        names = r.mapping(raw[source], where, f"a mapping of {_NAMED[source]} to tests")
        for name, tested in (names or {}).items():
            condition = _read_condition(r, source, name, tested, (*where, name))
            if condition is not None:
                conditions.append(condition)
    if len(r.problems) > before:
        return None
    return tuple(conditions)


_NAMED = {"headers": "header names", "query": "query parameters", "body": "JSON Pointers"}


def _read_condition(
    r: Reader, source: ValueSource, name: Any, tested: Any, path: Path
) -> Condition | None:
    if not isinstance(name, str) or (source != "body" and not name):
        r.bad(path, f"a {_NAMED[source][:-1]}", describe(name), at_key=True)
        return None
    pointer: tuple[str, ...] = ()
    if source == "body":
        parsed = parse_pointer(name)
        if parsed is None:
            r.bad(
                path,
                "a JSON Pointer: '' (the whole body) or /key/0/... (~0 for ~, ~1 for /)",
                describe(name),
                "write the path from the body's root, beginning with /",
                at_key=True,
            )
            return None
        pointer = parsed
    tests = _read_tests(r, tested, path, source)
    if tests is None:
        return None
    shown = name.lower() if source == "headers" else name
    return Condition(source, shown, pointer, tests, r.position(path))


def _read_tests(r: Reader, value: Any, path: Path, source: ValueSource) -> tuple[Check, ...] | None:
    """The tests on one value: a mapping of operators, or a plain value (``equals``)."""
    if not isinstance(value, dict):
        if source != "body" and not isinstance(value, str):
            r.bad(path, "a string (equals) or a mapping of tests", describe(value))
            return None
        return (Check("equals", value),)
    if not value:
        r.bad(path, "at least one test: " + ", ".join(OPERATORS), "an empty mapping")
        return None
    before = len(r.problems)
    r.keys(value, path, OPERATORS)
    tests: list[Check] = []
    for operator in value:  # in the order written: a near-miss names the first that fails
        if operator not in OPERATORS:
            continue  # (reported by keys above)
        operand, where = value[operator], (*path, operator)
        if operator in ("exists", "absent"):
            if r.boolean(operand, where) is None:
                continue
            # absent: false is exists (and the other way round): one test, said positively
            present = operand if operator == "exists" else not operand
            tests.append(Check("exists" if present else "absent"))
        elif operator == "matches":
            pattern = _pattern(r, operand, where)
            if pattern is not None:
                tests.append(Check("matches", pattern))
        elif source != "body" and not isinstance(operand, str):
            r.bad(where, f"a string ({_WHAT[source]} are text)", describe(operand))
        else:
            tests.append(Check(operator, operand))
    if len(r.problems) > before:
        return None
    operators = {test.operator for test in tests}
    if "absent" in operators and len(operators) > 1:
        r.bad(
            path,
            "absent alone",
            "absent with tests on the value",
            "a value that is absent has nothing to test",
        )
        return None
    return tuple(tests)


_WHAT = {"headers": "header values", "query": "query values", "raw_body": "bodies here"}


def _pattern(r: Reader, operand: Any, path: Path) -> Pattern | None:
    if not isinstance(operand, str):
        r.bad(path, "a regular expression (a string)", describe(operand))
        return None
    try:
        return Pattern(operand)
    except PatternError as error:
        hint = f"{error.reason}: {error.hint}" if error.hint else error.reason
        r.bad(path, "a regular expression (RE2 syntax)", describe(operand), hint)
        return None


def unreachable(cases: tuple[Case, ...], r: Reader, path: Path) -> bool:
    """Report each unnamed case after one with no conditions (it takes every request
    first), but one that passes requests on once its steps are played (``end: next``);
    True when there was one."""
    for case in cases:
        if not case.conditions and case.state is None and case.sequence.end != "next":
            # (a named case stays reachable: the Mockskill-Case header names it)
            later = [c for c in cases if c.index > case.index and c.name is None]
            for shadowed in later:
                r.bad(
                    (*path, shadowed.index),
                    "a case some request can reach",
                    f"a case after {case.label}, whose empty conditions take every request",
                    f"move {case.label} last, or give it conditions",
                )
            return bool(later)
    return False


CASES_KEYS = ("cases", "steps", "end")
"""An endpoint with cases: the cases, and its default sequence (none: unmatched)."""


def read_endpoint(
    r: Reader,
    value: Any,
    path: Path,
    ctx: StepContext,
    default: Sequence | None,
    *,
    methods: tuple[str, ...],
) -> tuple[Sequence | None, tuple[Case, ...]] | None:
    """An endpoint's default sequence and its cases; None (problems recorded) when wrong.

    Without ``cases`` it is :func:`~.steps.read_sequence`'s (and *default* when
    the key is missing). With them, the default is its ``steps`` (with
    ``end``), or none: a request no case takes is then unmatched.
    """
    if not (isinstance(value, dict) and "cases" in value):
        sequence = read_sequence(r, value, path, ctx, default)
        return None if sequence is None else (sequence, ())
    before = len(r.problems)
    r.keys(value, path, CASES_KEYS)
    raw_cases, cases_path = value["cases"], (*path, "cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        r.bad(cases_path, "a list of cases, each with when: and its steps", describe(raw_cases))
        return None
    cases = []
    for index, raw in enumerate(raw_cases):
        case = _read_case(r, raw, (*cases_path, index), index, ctx, methods)
        if case is not None:
            cases.append(case)
    fallback = None
    if "steps" in value:
        fallback = read_sequence(
            r, {k: value[k] for k in ("steps", "end") if k in value}, path, ctx
        )
    elif "end" in value:
        r.bad((*path, "end"), "end beside the default steps", "end without steps", at_key=True)
    if len(cases) == len(raw_cases):
        unreachable(tuple(cases), r, cases_path)
    if len(r.problems) > before:
        return None
    return fallback, tuple(cases)


def _read_case(
    r: Reader,
    raw: Any,
    path: Path,
    index: int,
    ctx: StepContext,
    methods: tuple[str, ...],
) -> Case | None:
    """One case: ``when`` and/or ``state`` (the scenario state it requires), and a sequence
    (``steps``/``end``, or one step's keys inline)."""
    case = r.mapping(raw, path, "a case: a mapping with when: and a step or steps:")
    if case is None:
        return None
    if "when" not in case and "state" not in case:
        r.bad(
            path,
            "the key 'when' (or 'state')",
            "it missing",
            "a case without conditions: write when: {}",
        )
        return None
    before = len(r.problems)
    state = requiring(r, case, path)
    name = _read_name(r, case, path)
    conditions: tuple[Condition, ...] | None = ()
    if "when" in case:
        conditions = read_when(r, case["when"], (*path, "when"), methods=methods)
    if "task_life" in case and "submit" not in ctx.tasks:
        r.bad(
            (*path, "task_life"),
            "task_life: in a case of a task skill's invoke",
            "it here, where no task is submitted",
            "give the skill a task: (a case's task_life: replaces its life for that case)",
            at_key=True,
        )
    played = {k: v for k, v in case.items() if k not in CASE_KEYS}
    if not played:
        r.bad(path, "a step (error:, json: ...) or steps: beside when:", "only when:")
        return None
    sequence = read_sequence(r, played, path, ctx, ends=CASE_END_RULES)
    if conditions is None or sequence is None or len(r.problems) > before:
        return None
    return Case(index, conditions, sequence, r.position(path), state, name)


def _read_name(r: Reader, case: dict[str, Any], path: Path) -> str | None:
    if "name" not in case:
        return None
    name = case["name"]
    if not isinstance(name, str) or CASE_NAME.fullmatch(name) is None:
        r.bad(
            (*path, "name"),
            "a case name: a letter or digit, then letters, digits, _ . : - (100 at most)",
            describe(name),
            "the name travels in the Mockskill-Case header: keep it a token",
        )
        return None
    return name


def named_twice(r: Reader, endpoints: list[tuple[Path, tuple[Case, ...]]]) -> None:
    """Report a case name used twice in one skill (its two endpoints) or route: the
    ``Mockskill-Case`` header must name one case."""
    seen: dict[str, Case] = {}
    for path, cases in endpoints:
        for case in cases:
            if case.name is None:
                continue
            first = seen.setdefault(case.name, case)
            if first is not case:
                r.bad(
                    (*path, "cases", case.index, "name"),
                    "a case name unique in its skill or route",
                    f"{case.name!r}, the name of the case at {first.where}",
                    "rename one: Mockskill-Case must name a single case",
                )
