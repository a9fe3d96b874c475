"""``rate_limit:`` on skills and routes, the ``rate_limited:`` step: what loads, what is refused.

The engine spends the buckets and writes the answers; these tests hold the
loading side: the model the loader builds (scenario/rate_limits.py), its
positioned problems, the docs' tables and example, and the bundled
``rate-limits`` scenario.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from conftest import assert_problem

from mockskill import ScenarioError, bundled_path, load_paths, load_text
from mockskill.protocol import catalog
from mockskill.scenario import rate_limits
from mockskill.scenario.model import (
    LIMIT_KEYS,
    RATE_ANSWERS,
    RATE_HEADER_FORMS,
    RETRY_AFTER_FORMS,
    RateAnswer,
    RateLimit,
    RateLimited,
    Skill,
    Step,
)
from mockskill.scenario.problems import Problem

DOCS = Path(__file__).resolve().parents[2] / "docs"


def limited_skill(limit: str) -> str:
    """One skill whose ``rate_limit:`` is *limit* (flow YAML), on line 3 from column 17."""
    return f"skills:\n  - id: s\n    rate_limit: {limit}\n"


def invoke(step: str) -> str:
    """One skill whose invoke endpoint is *step* (flow YAML), on line 3 from column 13."""
    return f"skills:\n  - id: s\n    invoke: {step}\n"


def the_skill(text: str) -> Skill:
    [skill] = load_text(textwrap.dedent(text), "s.yaml").skills
    return skill


def first_step(step: str) -> Step:
    skill = the_skill(invoke(step))
    assert skill.invoke is not None
    return skill.invoke.steps[0]


def problems_in(text: str, **kwargs: int) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml", **kwargs)  # type: ignore[arg-type]
    return list(caught.value.problems)


# -- rate_limit: what loads ------------------------------------------------------------


def test_a_limit_needs_only_capacity_and_refill_and_keys_per_session_answering_429() -> None:
    limit = the_skill(limited_skill("{capacity: 5, refill: 1}")).rate_limit
    assert limit is not None
    assert limit == RateLimit(5, 1.0, limit.where)
    assert (limit.where.file, limit.where.line, limit.where.column) == ("s.yaml", 3, 17)
    assert (limit.key, limit.key_name) == ("session", None)
    assert limit.answer == RateAnswer(status=429, retry_after="seconds", headers="ietf")
    assert isinstance(limit.refill, float)


def test_every_part_of_a_limit_is_read_as_written() -> None:
    skill = the_skill(
        """\
        skills:
          - id: search
            rate_limit:
              capacity: 2
              refill: 0.5
              key: {header: X-Tenant}
              status: 503
              retry_after: date
              headers: x-ratelimit-epoch
        """
    )
    assert skill.rate_limit is not None
    assert (skill.rate_limit.capacity, skill.rate_limit.refill) == (2, 0.5)
    assert (skill.rate_limit.key, skill.rate_limit.key_name) == ("header", "x-tenant")
    assert skill.rate_limit.answer == RateAnswer(503, "date", "x-ratelimit-epoch")


def test_a_skill_without_a_limit_or_with_a_null_one_has_none() -> None:
    assert the_skill("skills:\n  - id: s\n").rate_limit is None
    assert the_skill(limited_skill("null")).rate_limit is None


def test_a_route_can_be_limited_keyed_by_a_body_pointer_kept_as_written() -> None:
    [route] = load_text(
        "routes:\n"
        "  - path: /v1/things\n"
        "    rate_limit: {capacity: 2, refill: 0.5, key: {body: /account/tenant~1id}}\n"
        "    steps: [json: 1]\n"
        "  - {path: /free, steps: [json: 1]}\n",
        "s.yaml",
    ).routes[:1]
    assert route.rate_limit is not None
    assert (route.rate_limit.key, route.rate_limit.key_name) == ("body", "/account/tenant~1id")
    assert (route.rate_limit.where.line, route.rate_limit.where.column) == (3, 17)


def test_a_route_that_forwards_can_be_limited_too() -> None:
    [route] = load_text(
        "routes:\n  - {path: /a, proxy: 'http://h', rate_limit: {capacity: 1, refill: 1}}\n"
    ).routes
    assert route.rate_limit is not None
    assert route.sequence.steps[0].proxy is not None


@pytest.mark.parametrize("key", [k for k in LIMIT_KEYS if k not in rate_limits.NAMED_KEYS])
def test_each_key_kind_written_as_a_word_loads(key: str) -> None:
    limit = the_skill(limited_skill(f"{{capacity: 1, refill: 1, key: {key}}}")).rate_limit
    assert limit is not None
    assert (limit.key, limit.key_name) == (key, None)


@pytest.mark.parametrize("form", RETRY_AFTER_FORMS)
def test_each_retry_after_form_loads(form: str) -> None:
    limit = the_skill(limited_skill(f"{{capacity: 1, refill: 1, retry_after: {form}}}")).rate_limit
    assert limit is not None
    assert limit.answer.retry_after == form


@pytest.mark.parametrize("form", RATE_HEADER_FORMS)
def test_each_header_form_loads(form: str) -> None:
    limit = the_skill(limited_skill(f"{{capacity: 1, refill: 1, headers: {form}}}")).rate_limit
    assert limit is not None
    assert limit.answer.headers == form


@pytest.mark.parametrize("status", RATE_ANSWERS)
def test_each_refusal_status_loads(status: int) -> None:
    limit = the_skill(limited_skill(f"{{capacity: 1, refill: 1, status: {status}}}")).rate_limit
    assert limit is not None
    assert limit.answer.status == status


def test_the_slowest_refill_is_one_token_in_the_longest_wait_and_follows_a_raised_one() -> None:
    slowest = 1000 / 300_000
    assert the_skill(limited_skill(f"{{capacity: 1, refill: {slowest!r}}}")).rate_limit
    [problem] = problems_in(limited_skill("{capacity: 1, refill: 0.003}"))
    assert problem.hint == "slower refills advise waits longer than a step may script"
    [skill] = load_text(limited_skill("{capacity: 1, refill: 0.003}"), max_delay_ms=600_000).skills
    assert skill.rate_limit is not None


# -- rate_limited: what loads ----------------------------------------------------------


def test_a_scripted_refusal_needs_only_its_wait_and_repeats_with_times() -> None:
    step = first_step("{rate_limited: {retry_after_ms: 1500}, times: 2}")
    assert step.rate_limited == RateLimited(1500, limit=1, answer=RateAnswer())
    assert step.times == 2
    assert (step.where.line, step.where.column) == (3, 13)


def test_a_scripted_refusal_reads_every_part() -> None:
    step = first_step(
        "{rate_limited: {retry_after_ms: 0, retry_after: ms, headers: x-ratelimit,"
        " status: 503, limit: 10}}"
    )
    assert step.rate_limited == RateLimited(0, 10, RateAnswer(503, "ms", "x-ratelimit"))


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, catalog.RATE_LIMITED.code), (503, "ENDPOINT_UNREACHABLE")],
    ids=["429", "503"],
)
def test_a_scripted_refusals_reply_names_its_status_and_code_and_leaves_the_body_to_the_engine(
    status: int, code: str
) -> None:
    step = first_step(f"{{rate_limited: {{retry_after_ms: 1500, status: {status}}}}}")
    assert (step.reply.status, step.reply.error_code, step.reply.body) == (status, code, b"")
    assert step.reply.retry is None  # the advice depends on the form, made per request


def test_a_scripted_refusal_may_wait_first_and_move_the_state() -> None:
    step = first_step("{rate_limited: {retry_after_ms: 10}, delay: 50, set_state: throttled}")
    assert step.delay is not None
    assert step.set_state == "throttled"


def test_a_scripted_refusal_is_an_outcome_a_failure_and_a_cases_step_like_any_step() -> None:
    skill = the_skill(
        """\
        skills:
          - id: s
            invoke:
              cases:
                - when: {headers: {X-Tenant: {equals: noisy}}}
                  rate_limited: {retry_after_ms: 100}
              steps:
                - one_of:
                    - {weight: 1, rate_limited: {retry_after_ms: 200}}
                    - {weight: 3, json: 1}
                - json: 2
                  failure_rate: 0.5
                  failure: {rate_limited: {retry_after_ms: 300, status: 503}}
        """
    )
    [case] = skill.invoke_cases
    assert case.sequence.steps[0].rate_limited == RateLimited(100)
    assert skill.invoke is not None
    one_of, failing = skill.invoke.steps
    assert one_of.choices[0].step.rate_limited == RateLimited(200)
    failure = failing.choices[0].step.rate_limited
    assert failure == RateLimited(300, answer=RateAnswer(status=503))


def test_a_routes_step_can_be_a_scripted_refusal() -> None:
    [route] = load_text(
        "routes:\n  - {path: /a, steps: [rate_limited: {retry_after_ms: 5}]}\n"
    ).routes
    assert route.sequence.steps[0].rate_limited == RateLimited(5)


# -- problems --------------------------------------------------------------------------

# id: (the limit, path, line, column, expected, found, hint), for limited_skill(limit)
LIMIT_PROBLEMS = {
    "zero capacity": (
        "{capacity: 0, refill: 1}",
        "skills[0].rate_limit.capacity",
        3,
        28,
        "a whole number from 1 to 1000000",
        "0 (an integer)",
        "",
    ),
    "negative capacity": (
        "{capacity: -5, refill: 1}",
        "skills[0].rate_limit.capacity",
        3,
        28,
        "a whole number from 1 to 1000000",
        "-5 (an integer)",
        "",
    ),
    "a fraction of a capacity": (
        "{capacity: 2.5, refill: 1}",
        "skills[0].rate_limit.capacity",
        3,
        28,
        "a whole number from 1 to 1000000",
        "2.5 (a number with a fraction)",
        "",
    ),
    "a capacity in quotes": (
        "{capacity: '5', refill: 1}",
        "skills[0].rate_limit.capacity",
        3,
        28,
        "a whole number",
        "'5' (a string)",
        "",
    ),
    "zero refill": (
        "{capacity: 5, refill: 0}",
        "skills[0].rate_limit.refill",
        3,
        39,
        "a number of tokens a second, from 0.00333333 (one every 300000 ms, the longest wait)"
        " to 1000000",
        "0 (an integer)",
        "0.5 is one token every 2 s",
    ),
    "negative refill": (
        "{capacity: 5, refill: -0.5}",
        "skills[0].rate_limit.refill",
        3,
        39,
        "a number of tokens a second",
        "-0.5 (a number with a fraction)",
        "0.5 is one token every 2 s",
    ),
    "refill as a word": (
        "{capacity: 5, refill: fast}",
        "skills[0].rate_limit.refill",
        3,
        39,
        "a number of tokens a second",
        "'fast' (a string)",
        "",
    ),
    "infinite refill": (
        "{capacity: 5, refill: .inf}",
        "skills[0].rate_limit.refill",
        3,
        39,
        "a number of tokens a second",
        "inf (a number with a fraction)",
        "",
    ),
    "no capacity": (
        "{refill: 1}",
        "skills[0].rate_limit",
        3,
        17,
        "the key 'capacity'",
        "it missing",
        "",
    ),
    "a misspelt key": (
        "{capacity: 5, refill: 1, retry-after: date}",
        "skills[0].rate_limit.retry-after",
        3,
        42,
        "a known key",
        "unknown key 'retry-after'",
        "did you mean 'retry_after'?",
    ),
    "not a mapping": (
        "5",
        "skills[0].rate_limit",
        3,
        17,
        "{capacity: N, refill: TOKENS_PER_SECOND, ...}",
        "5 (an integer)",
        "",
    ),
    "an unknown key kind": (
        "{capacity: 5, refill: 1, key: tenant}",
        "skills[0].rate_limit.key",
        3,
        47,
        "one of session, credential, client, {header: NAME} or {body: /POINTER}",
        "'tenant' (a string)",
        "",
    ),
    "a misspelt key kind": (
        "{capacity: 5, refill: 1, key: credentials}",
        "skills[0].rate_limit.key",
        3,
        47,
        "one of session, credential, client",
        "'credentials' (a string)",
        "did you mean 'credential'?",
    ),
    "header without its name": (
        "{capacity: 5, refill: 1, key: header}",
        "skills[0].rate_limit.key",
        3,
        47,
        "one of session, credential, client",
        "'header' (a string)",
        "name what it reads: {header: X-Tenant}",
    ),
    "body without its pointer": (
        "{capacity: 5, refill: 1, key: body}",
        "skills[0].rate_limit.key",
        3,
        47,
        "one of session, credential, client",
        "'body' (a string)",
        "name what it reads: {body: /tenant}",
    ),
    "a misspelt named kind": (
        "{capacity: 5, refill: 1, key: {headers: X-Tenant}}",
        "skills[0].rate_limit.key.headers",
        3,
        48,
        "a known key",
        "unknown key 'headers'",
        "did you mean 'header'?",
    ),
    "two named kinds": (
        "{capacity: 5, refill: 1, key: {header: X-A, body: /a}}",
        "skills[0].rate_limit.key",
        3,
        47,
        "one of session, credential, client",
        "a mapping with keys header, body",
        "",
    ),
    "a header name with a space": (
        "{capacity: 5, refill: 1, key: {header: 'X Tenant'}}",
        "skills[0].rate_limit.key.header",
        3,
        56,
        "a header name (letters, digits, - and the like)",
        "'X Tenant' (a string)",
        "",
    ),
    "an empty header name": (
        "{capacity: 5, refill: 1, key: {header: ''}}",
        "skills[0].rate_limit.key.header",
        3,
        56,
        "a header name",
        "'' (a string)",
        "",
    ),
    "a body key that is not a pointer": (
        "{capacity: 5, refill: 1, key: {body: tenant}}",
        "skills[0].rate_limit.key.body",
        3,
        54,
        "a JSON Pointer to a value in the body: /key/0/... (~0 for ~, ~1 for /)",
        "'tenant' (a string)",
        "write the path from the body's root, beginning with /",
    ),
    "a pointer with a bad escape": (
        "{capacity: 5, refill: 1, key: {body: /a~2b}}",
        "skills[0].rate_limit.key.body",
        3,
        54,
        "a JSON Pointer to a value in the body",
        "'/a~2b' (a string)",
        "write the path from the body's root",
    ),
    "the whole body as a key": (
        "{capacity: 5, refill: 1, key: {body: ''}}",
        "skills[0].rate_limit.key.body",
        3,
        54,
        "a JSON Pointer to a value in the body",
        "'' (a string)",
        "write the path from the body's root",
    ),
    "an unknown status": (
        "{capacity: 5, refill: 1, status: 500}",
        "skills[0].rate_limit.status",
        3,
        50,
        "429 (RATE_LIMITED, outside the chapter) or 503 (ENDPOINT_UNREACHABLE, in-protocol)",
        "500 (an integer)",
        "",
    ),
    "a status in quotes": (
        "{capacity: 5, refill: 1, status: '429'}",
        "skills[0].rate_limit.status",
        3,
        50,
        "429 (RATE_LIMITED",
        "'429' (a string)",
        "",
    ),
    "an unknown retry_after form": (
        "{capacity: 5, refill: 1, retry_after: second}",
        "skills[0].rate_limit.retry_after",
        3,
        55,
        "one of seconds, date, fractional, ms, missing, malformed",
        "'second' (a string)",
        "did you mean 'seconds'?",
    ),
    "an unknown header form": (
        "{capacity: 5, refill: 1, headers: X-RateLimit}",
        "skills[0].rate_limit.headers",
        3,
        51,
        "one of ietf, x-ratelimit, x-ratelimit-epoch, none",
        "'X-RateLimit' (a string)",
        "did you mean 'x-ratelimit'?",
    ),
}


@pytest.mark.parametrize(
    ("limit", "path", "line", "column", "expected", "found", "hint"),
    LIMIT_PROBLEMS.values(),
    ids=LIMIT_PROBLEMS.keys(),
)
def test_a_bad_limit_is_one_positioned_problem(
    limit: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(limited_skill(limit))
    assert_problem(problem, path, line, column, expected, found, hint)


def test_a_problem_reads_as_one_line_with_where_what_was_expected_and_found_and_a_hint() -> None:
    [problem] = problems_in(limited_skill("{capacity: 5, refill: 1, key: sesion}"))
    assert str(problem) == (
        "s.yaml:3:47: skills[0].rate_limit.key: expected one of session, credential, client,"
        " {header: NAME} or {body: /POINTER}, found 'sesion' (a string); did you mean"
        " 'session'?"
    )


def test_every_problem_of_a_limit_is_reported_at_once() -> None:
    problems = problems_in(
        limited_skill("{capacity: 0, refill: 0, key: tenant, status: 418, headers: rfc}")
    )
    assert [p.path.rsplit(".", 1)[1] for p in problems] == [
        "capacity",
        "refill",
        "key",
        "status",
        "headers",
    ]


def test_a_routes_limit_is_checked_the_same_way() -> None:
    [problem] = problems_in("routes:\n  - {path: /a, steps: [json: 1], rate_limit: {refill: 1}}\n")
    assert_problem(problem, "routes[0].rate_limit", 2, 46, "the key 'capacity'", "it missing", "")


# id: (the step, path, line, column, expected, found, hint), for invoke(step)
STEP_PROBLEMS = {
    "no wait": (
        "{rate_limited: {status: 503}}",
        "skills[0].invoke.rate_limited",
        3,
        28,
        "the key 'retry_after_ms'",
        "it missing",
        "",
    ),
    "a negative wait": (
        "{rate_limited: {retry_after_ms: -1}}",
        "skills[0].invoke.rate_limited.retry_after_ms",
        3,
        45,
        "a whole number from 0 to 300000 ms",
        "-1 (an integer)",
        "",
    ),
    "a wait longer than any step's": (
        "{rate_limited: {retry_after_ms: 300001}}",
        "skills[0].invoke.rate_limited.retry_after_ms",
        3,
        45,
        "a whole number from 0 to 300000 ms",
        "300001 (an integer)",
        "longer delays are refused, not clamped",
    ),
    "a wait in seconds": (
        "{rate_limited: {retry_after_ms: 1.5}}",
        "skills[0].invoke.rate_limited.retry_after_ms",
        3,
        45,
        "a whole number from 0 to 300000 ms",
        "1.5 (a number with a fraction)",
        "",
    ),
    "a zero limit": (
        "{rate_limited: {retry_after_ms: 5, limit: 0}}",
        "skills[0].invoke.rate_limited.limit",
        3,
        55,
        "a whole number from 1 to 1000000",
        "0 (an integer)",
        "",
    ),
    "a misspelt key": (
        "{rate_limited: {retry_after_ms: 5, retry_afer: ms}}",
        "skills[0].invoke.rate_limited.retry_afer",
        3,
        48,
        "a known key",
        "unknown key 'retry_afer'",
        "did you mean 'retry_after'?",
    ),
    "an unknown form": (
        "{rate_limited: {retry_after_ms: 5, retry_after: http-date}}",
        "skills[0].invoke.rate_limited.retry_after",
        3,
        61,
        "one of seconds, date, fractional, ms, missing, malformed",
        "'http-date' (a string)",
        "did you mean 'date'?",
    ),
    "a wait alone": (
        "{rate_limited: 1500}",
        "skills[0].invoke.rate_limited",
        3,
        28,
        "{retry_after_ms: MS, retry_after: FORM, headers: FORM, ...}",
        "1500 (an integer)",
        "",
    ),
    "a body beside it": (
        "{rate_limited: {retry_after_ms: 5}, json: {slow: down}}",
        "skills[0].invoke.json",
        3,
        49,
        "only times, delay and set_state beside rate_limited",
        "json as well",
        "another answer goes in another step",
    ),
    "an error beside it": (
        "{error: ENDPOINT_UNREACHABLE, rate_limited: {retry_after_ms: 5}}",
        "skills[0].invoke.error",
        3,
        14,
        "only times, delay and set_state beside rate_limited",
        "error as well",
        "another answer goes in another step",
    ),
    "a status beside it": (
        "{rate_limited: {retry_after_ms: 5}, status: 503}",
        "skills[0].invoke.status",
        3,
        49,
        "only times, delay and set_state beside rate_limited",
        "status as well",
        "(status, retry_after, headers and limit go inside it)",
    ),
    "headers beside it": (
        "{rate_limited: {retry_after_ms: 5}, headers: {X-A: b}}",
        "skills[0].invoke.headers",
        3,
        49,
        "only times, delay and set_state beside rate_limited",
        "headers as well",
        "another answer goes in another step",
    ),
    "a fault beside it": (
        "{rate_limited: {retry_after_ms: 5}, fault: EMPTY_RESPONSE}",
        "skills[0].invoke.fault",
        3,
        49,
        "only times, delay and set_state beside rate_limited",
        "fault as well",
        "another answer goes in another step",
    ),
    "after beside it": (
        "{rate_limited: {retry_after_ms: 5}, after: {error: EXECUTION_TIMEOUT}}",
        "skills[0].invoke.after",
        3,
        49,
        "only times, delay and set_state beside rate_limited",
        "after as well",
        "another answer goes in another step",
    ),
}


@pytest.mark.parametrize(
    ("step", "path", "line", "column", "expected", "found", "hint"),
    STEP_PROBLEMS.values(),
    ids=STEP_PROBLEMS.keys(),
)
def test_a_bad_scripted_refusal_is_one_positioned_problem(
    step: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(invoke(step))
    assert_problem(problem, path, line, column, expected, found, hint)


def test_a_scripted_refusals_wait_follows_a_raised_max_delay() -> None:
    step = "{rate_limited: {retry_after_ms: 600000}}"
    [problem] = problems_in(invoke(step))
    assert problem.expected == "a whole number from 0 to 300000 ms"
    [skill] = load_text(invoke(step), max_delay_ms=600_000).skills
    assert skill.invoke is not None
    assert skill.invoke.steps[0].rate_limited == RateLimited(600_000)


def test_dribble_and_after_name_only_the_bodies_a_step_writes_itself() -> None:
    [dribble] = problems_in(invoke("{status: 200, dribble: {chunks: 2, over: 10}}"))
    assert dribble.expected == (
        "a body to dribble (error, json, text, body_base64, body_file or descriptor)"
    )
    [after] = problems_in(invoke("{delay: 5, after: {error: EXECUTION_TIMEOUT}}"))
    assert after.expected.startswith(
        "the answer the skill made beside after (json, text, body_base64, body_file or descriptor)"
    )


# -- the docs --------------------------------------------------------------------------


def _section() -> str:
    text = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    return text.split("\n## Rate limits\n", 1)[1].split("\n## ", 1)[0]


def _first_column(heading: str) -> list[str]:
    """The first column of the Rate limits section's table whose heading is *heading*."""
    rows = _section().split(f"\n{heading}\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [row.split("|")[1].strip().strip("`") for row in rows]


def test_the_docs_tables_list_every_key_kind_and_form() -> None:
    named = {"header": "{header: NAME}", "body": "{body: /POINTER}"}
    keys = _first_column("| `key` | one bucket per |")
    assert keys == [named.get(k, k) for k in LIMIT_KEYS]
    assert _first_column("| `retry_after` | the wait, as sent |") == list(RETRY_AFTER_FORMS)
    assert _first_column("| `headers` | the rate-limit headers |") == list(RATE_HEADER_FORMS)


def test_the_docs_problem_lines_are_what_the_loader_says() -> None:
    shown = re.search(r"```text\n(limits\.yaml:.*?)```", _section(), re.DOTALL)
    assert shown is not None
    text = "name: limits\nskills:\n  - id: search\n    rate_limit:\n"
    text += "      refill: 0\n      key: tenant\n      capacity: 5\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "limits.yaml")
    assert [str(p) for p in caught.value.problems] == shown.group(1).splitlines()


# -- the bundled scenario --------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled() -> dict[str, Skill]:
    [scenario] = load_paths([bundled_path() / "rate-limits.yaml"]).scenarios
    return {skill.id: skill for skill in scenario.skills}


@pytest.mark.parametrize(("skill_id", "status"), [("rate-limited", 429), ("rate-limited-503", 503)])
def test_the_bundled_buckets_hold_5_and_refill_one_a_second_per_session(
    bundled: dict[str, Skill], skill_id: str, status: int
) -> None:
    limit = bundled[skill_id].rate_limit
    assert limit is not None
    assert (limit.capacity, limit.refill, limit.key) == (5, 1.0, "session")
    assert limit.answer == RateAnswer(status=status)


@pytest.mark.parametrize("form", ["date", "fractional", "missing", "malformed", "ms"])
def test_each_bundled_retry_after_skill_refuses_twice_in_its_form_then_answers(
    bundled: dict[str, Skill], form: str
) -> None:
    skill = bundled[f"retry-after-{form}"]
    assert skill.rate_limit is None
    assert skill.invoke is not None
    refused, answered = skill.invoke.steps
    assert refused.rate_limited is not None
    assert (refused.times, refused.rate_limited.answer.retry_after) == (2, form)
    assert refused.rate_limited.wait_ms <= 2000  # short enough for a test suite
    assert answered.rate_limited is None
    assert answered.reply.status == 200


def test_the_bundled_forms_differ_visibly_in_their_waits(bundled: dict[str, Skill]) -> None:
    waits = {
        skill_id: skill.invoke.steps[0].rate_limited.wait_ms
        for skill_id, skill in bundled.items()
        if skill.invoke is not None and skill.invoke.steps[0].rate_limited is not None
    }
    assert waits["retry-after-date"] % 1000 == 0  # a whole second: the date shows it
    assert waits["retry-after-fractional"] % 1000 != 0  # else 2.0 reads like seconds
