"""Steps and sequences: each rule a step can break, and what valid steps become."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import assert_problem

from mockskill import ScenarioError, load_text
from mockskill.cli import cli
from mockskill.protocol.catalog import retry_after_seconds
from mockskill.scenario.delays import Fixed
from mockskill.scenario.model import JSON_TYPE, TEXT_TYPE, KeepAlive, Reply, Sequence, Step
from mockskill.scenario.problems import Problem
from mockskill.scenario.source import Position
from mockskill.scenario.steps import MAX_DELAY_MS


def skill_yaml(invoke: str) -> str:
    """One skill whose ``invoke:`` is *invoke*; the invoke block starts on line 4."""
    return "skills:\n  - id: s\n    invoke:\n" + textwrap.indent(textwrap.dedent(invoke), "      ")


def problems_in(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    return list(caught.value.problems)


def invoke_of(invoke: str) -> Sequence:
    [skill] = load_text(skill_yaml(invoke), "s.yaml").skills
    return skill.invoke


def reply_of(invoke: str) -> Reply:
    sequence = invoke_of(invoke)
    assert len(sequence.steps) == 1
    return sequence.steps[0].reply


def body_of(reply: Reply) -> Any:
    return json.loads(reply.body)


# -- every rule a step can break ----------------------------------------------------

BAD_STEPS = [
    # (invoke block, path, line, column, expected, found, hint)
    pytest.param(
        "- error: AUTH_REQUIRED\n  mesage: hi\n",
        "skills[0].invoke[0].mesage",
        5,
        9,
        "a known key",
        "unknown key 'mesage'",
        "did you mean 'message'?",
        id="unknown-step-key",
    ),
    pytest.param(
        "error: EXECUTION_TIMEOUT\nretry:\n  suggested_delay: 100\n",
        "skills[0].invoke.retry.suggested_delay",
        6,
        9,
        "a known key",
        "unknown key 'suggested_delay'",
        "did you mean 'suggested_delay_ms'?",
        id="unknown-retry-key",
    ),
    pytest.param(
        "ends: cycle\nsteps:\n  - json: {}\n",
        "skills[0].invoke.ends",
        4,
        7,
        "a known key",
        "unknown key 'ends'",
        "did you mean 'end'?",
        id="unknown-sequence-key",
    ),
    pytest.param(
        "error: AUTH_REQUIRD\n",
        "skills[0].invoke.error",
        4,
        14,
        "one of AUTH_REQUIRED, PERMISSION_DENIED",
        "'AUTH_REQUIRD' (a string)",
        "did you mean 'AUTH_REQUIRED'?",
        id="misspelt-error-code",
    ),
    pytest.param(
        "error: [AUTH_REQUIRED]\n",
        "skills[0].invoke.error",
        4,
        14,
        "one of AUTH_REQUIRED",
        "a list of 1 item",
        "did you mean 'AUTH_REQUIRED'?",
        id="error-code-not-a-string",
    ),
    pytest.param(
        "error: VALIDATION_ERROR\n",
        "skills[0].invoke.error",
        4,
        14,
        "an error a provider sends",
        "VALIDATION_ERROR, which the consumer's own Schema Validator",
        "raw_descriptor",
        id="validation-error-is-not-sent",
    ),
    pytest.param(
        "error: AUTH_REQUIRED\nstatus: 500\n",
        "skills[0].invoke.status",
        5,
        15,
        "HTTP 401 for AUTH_REQUIRED",
        "500 (an integer)",
        "AUTH_REQUIRED is sent with HTTP 401",
        id="status-500-for-auth-required",
    ),
    pytest.param(
        "error: EXECUTION_TIMEOUT\nstatus: 500\n",
        "skills[0].invoke.status",
        5,
        15,
        "HTTP 504 or 408 for EXECUTION_TIMEOUT",
        "500 (an integer)",
        "HTTP 504 or 408",
        id="status-500-for-execution-timeout",
    ),
    pytest.param(
        "error: ENDPOINT_UNREACHABLE\nstatus: '503'\n",
        "skills[0].invoke.status",
        5,
        15,
        "HTTP 503 or 502 for ENDPOINT_UNREACHABLE",
        "'503' (a string)",
        "",
        id="error-status-as-text",
    ),
    pytest.param(
        "error: AUTH_REQUIRED\nretry: {suggested_delay_ms: 100}\n",
        "skills[0].invoke.retry",
        5,
        14,
        "no retry advice (or retry: null)",
        "a mapping with keys suggested_delay_ms",
        "AUTH_REQUIRED is not retryable",
        id="retry-on-non-retryable-code",
    ),
    pytest.param(
        "error: EXECUTION_TIMEOUT\nretry: 5\n",
        "skills[0].invoke.retry",
        5,
        14,
        "a mapping {suggested_delay_ms: N, max_attempts: N}",
        "5 (an integer)",
        "",
        id="retry-not-a-mapping",
    ),
    pytest.param(
        "error: EXECUTION_TIMEOUT\nretry: {max_attempts: 0}\n",
        "skills[0].invoke.retry.max_attempts",
        5,
        29,
        "a whole number of at least 1",
        "0 (an integer)",
        "",
        id="retry-max-attempts-0",
    ),
    pytest.param(
        "error: EXECUTION_TIMEOUT\nretry: {suggested_delay_ms: -5}\n",
        "skills[0].invoke.retry.suggested_delay_ms",
        5,
        35,
        "a whole number from 0 to 300000 ms",
        "-5 (an integer)",
        "",
        id="retry-negative-delay",
    ),
    pytest.param(
        "json: {}\ndelay: 1s\n",
        "skills[0].invoke.delay",
        5,
        14,
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "'1s' (a string)",
        "",
        id="delay-not-an-integer",
    ),
    pytest.param(
        "json: {}\ndelay: 1.5\n",
        "skills[0].invoke.delay",
        5,
        14,
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "1.5 (a number with a fraction)",
        "",
        id="delay-with-a-fraction",
    ),
    pytest.param(
        "json: {}\ndelay: -1\n",
        "skills[0].invoke.delay",
        5,
        14,
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        "-1 (an integer)",
        "",
        id="negative-delay",
    ),
    pytest.param(
        f"json: {{}}\ndelay: {MAX_DELAY_MS + 1}\n",
        "skills[0].invoke.delay",
        5,
        14,
        f"a whole number from 0 to {MAX_DELAY_MS} ms",
        f"{MAX_DELAY_MS + 1} (an integer)",
        "refused, not clamped",
        id="delay-over-max-is-refused-not-clamped",
    ),
    pytest.param(
        "json: {}\ntimes: 0\n",
        "skills[0].invoke.times",
        5,
        14,
        "a whole number of at least 1",
        "0 (an integer)",
        "",
        id="times-0",
    ),
    pytest.param(
        "json: {}\ntimes: true\n",
        "skills[0].invoke.times",
        5,
        14,
        "a whole number of at least 1",
        "true (a boolean)",
        "",
        id="times-true-is-not-a-number",
    ),
    pytest.param(
        "json: {}\ntext: hi\n",
        "skills[0].invoke.text",
        5,
        7,
        "one of error, json, text, body_base64, body_file, descriptor, rate_limited, task or stream"
        " in a step",
        "json and text together",
        "split them into two steps",
        id="two-body-kinds",
    ),
    pytest.param(
        "error: AUTH_REQUIRED\njson: {}\n",
        "skills[0].invoke.json",
        5,
        7,
        "one of error, json, text, body_base64, body_file, descriptor, rate_limited, task or stream"
        " in a step",
        "error and json together",
        "split them into two steps",
        id="error-and-body",
    ),
    pytest.param(
        "- {}\n",
        "skills[0].invoke[0]",
        4,
        9,
        "a step with error, json, text, body_base64, body_file, descriptor, rate_limited, task,"
        " stream, status, fault or hang",
        "an empty mapping",
        "",
        id="empty-step",
    ),
    pytest.param(
        "- AUTH_REQUIRED\n",
        "skills[0].invoke[0]",
        4,
        9,
        "a step (a mapping such as {error: AUTH_REQUIRED} or {json: ...})",
        "'AUTH_REQUIRED' (a string)",
        "",
        id="step-not-a-mapping",
    ),
    pytest.param(
        "json: {}\nmessage: hi\n",
        "skills[0].invoke.message",
        5,
        7,
        "error: CODE beside it",
        "message in a result step",
        "",
        id="message-on-a-result-step",
    ),
    pytest.param(
        "status: 204\nretry: null\n",
        "skills[0].invoke.retry",
        5,
        7,
        "error: CODE beside it",
        "retry in a result step",
        "",
        id="retry-on-a-result-step",
    ),
    pytest.param(
        "end: cycles\nsteps:\n  - json: {}\n",
        "skills[0].invoke.end",
        4,
        12,
        "one of last, cycle, fail",
        "'cycles' (a string)",
        "did you mean 'cycle'?",
        id="bad-end-rule",
    ),
    pytest.param(
        "[]\n",
        "skills[0].invoke",
        4,
        7,
        "at least one step",
        "an empty list",
        "",
        id="empty-list-of-steps",
    ),
    pytest.param(
        "steps: []\n",
        "skills[0].invoke.steps",
        4,
        14,
        "at least one step",
        "an empty list",
        "",
        id="empty-steps",
    ),
    pytest.param(
        "steps: {json: {}}\n",
        "skills[0].invoke.steps",
        4,
        14,
        "a list of steps",
        "a mapping with keys json",
        "",
        id="steps-not-a-list",
    ),
    pytest.param(
        "hello\n",
        "skills[0].invoke",
        4,
        7,
        "a step (mapping), a list of steps, or {steps: [...], end: ...}",
        "'hello' (a string)",
        "",
        id="sequence-not-a-mapping-or-list",
    ),
    pytest.param(
        "json: {}\nheaders:\n  Bad Header: x\n",
        "skills[0].invoke.headers.Bad Header",
        6,
        9,
        "a header name (letters, digits, -)",
        "'Bad Header' (a string)",
        "",
        id="header-name-with-space",
    ),
    pytest.param(
        "json: {}\nheaders:\n  X-A: {b: 1}\n",
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value (string or number)",
        "a mapping with keys b",
        "",
        id="header-value-mapping",
    ),
    pytest.param(
        "json: {}\nheaders:\n  X-A: null\n",
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value (string or number)",
        "null",
        "",
        id="header-value-null",
    ),
    pytest.param(
        'json: {}\nheaders:\n  X-A: "one\\r\\nX-Injected: two"\n',
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value on one line",
        "a line break",
        "",
        id="header-value-with-line-break",
    ),
    pytest.param(
        'json: {}\nheaders:\n  X-A: "\u65e5\u672c"\n',
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value that can go on the wire",
        "'\u65e5' (U+65E5) at position 1, which is not Latin-1",
        "percent-encode",
        id="header-value-not-latin-1",
    ),
    pytest.param(
        'json: {}\nheaders:\n  X-A: "a\\0b"\n',
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value that can go on the wire",
        "the control character U+0000 at position 2",
        "visible characters",
        id="header-value-nul",
    ),
    pytest.param(
        'json: {}\nheaders:\n  X-A: "a\\vb"\n',
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value that can go on the wire",
        "the control character U+000B at position 2",
        "visible characters",
        id="header-value-vertical-tab",
    ),
    pytest.param(
        'json: {}\nheaders:\n  X-A: "a\\x7f"\n',
        "skills[0].invoke.headers.X-A",
        6,
        14,
        "a header value that can go on the wire",
        "the control character U+007F at position 2",
        "visible characters",
        id="header-value-delete",
    ),
    pytest.param(
        "json: {}\nheaders:\n  Transfer-Encoding: chunked\n",
        "skills[0].invoke.headers.Transfer-Encoding",
        6,
        9,
        "a header a step may set",
        "Transfer-Encoding, which the server sets",
        "remove it",
        id="header-transfer-encoding",
    ),
    pytest.param(
        "json: {}\nheaders:\n  content-length: 5\n",
        "skills[0].invoke.headers.content-length",
        6,
        9,
        "a header a step may set",
        "content-length, which the server sets",
        "remove it",
        id="header-content-length",
    ),
    pytest.param(
        "error: ENDPOINT_UNREACHABLE\nheaders:\n  Connection: close\n",
        "skills[0].invoke.headers.Connection",
        6,
        9,
        "a header a step may set",
        "Connection, which is the server's",
        "remove it",
        id="header-connection-on-an-error",
    ),
    pytest.param(
        "error: ENDPOINT_UNREACHABLE\nretry: {suggested_delay_ms: 300001}\n",
        "skills[0].invoke.retry.suggested_delay_ms",
        5,
        35,
        "a whole number from 0 to 300000 ms",
        "300001 (an integer)",
        "refused, not clamped",
        id="retry-delay-above-the-longest-wait",
    ),
    pytest.param(
        "json: {}\nheaders: [X-A]\n",
        "skills[0].invoke.headers",
        5,
        16,
        "a mapping of header names to values",
        "a list of 1 item",
        "",
        id="headers-not-a-mapping",
    ),
    pytest.param(
        "text: 5\n",
        "skills[0].invoke.text",
        4,
        13,
        "a string (use json: for structured bodies)",
        "5 (an integer)",
        "",
        id="text-not-a-string",
    ),
    pytest.param(
        "json: .nan\n",
        "skills[0].invoke.json",
        4,
        13,
        "JSON values (no .nan or .inf)",
        "Out of range float values",
        "",
        id="json-nan",
    ),
    pytest.param(
        "descriptor: false\n",
        "skills[0].invoke.descriptor",
        4,
        19,
        "true (serve the skill's descriptor)",
        "false (a boolean)",
        "",
        id="descriptor-false",
    ),
    pytest.param(
        "status: 99\n",
        "skills[0].invoke.status",
        4,
        15,
        "a whole number from 200 to 599",
        "99 (an integer)",
        "",
        id="result-status-out-of-range",
    ),
    pytest.param(
        "status: 103\njson: {}\n",
        "skills[0].invoke.status",
        4,
        15,
        "a whole number from 200 to 599",
        "103 (an integer)",
        "a 1xx status is interim, not a final answer",
        id="result-status-interim",
    ),
    pytest.param(
        "status: 100\n",
        "skills[0].invoke.status",
        4,
        15,
        "a whole number from 200 to 599",
        "100 (an integer)",
        "a 1xx status is interim, not a final answer",
        id="result-status-continue",
    ),
    pytest.param(
        "error: AUTH_REQUIRED\nmessage: 5\n",
        "skills[0].invoke.message",
        5,
        16,
        "a string",
        "5 (an integer)",
        "",
        id="message-not-a-string",
    ),
    pytest.param(
        "error: PERMISSION_DENIED\ndetails: [a]\n",
        "skills[0].invoke.details",
        5,
        16,
        "a mapping (merged over the category's details)",
        "a list of 1 item",
        "",
        id="details-not-a-mapping",
    ),
    pytest.param(
        "error: PERMISSION_DENIED\ndetails: {ratio: .inf}\n",
        "skills[0].invoke.details",
        5,
        16,
        "JSON values (no .nan or .inf)",
        "Out of range float values",
        "",
        id="details-not-json",
    ),
]


@pytest.mark.parametrize(
    ("invoke", "path", "line", "column", "expected", "found", "hint"), BAD_STEPS
)
def test_a_bad_step_is_one_positioned_problem_saying_what_was_expected_and_found(
    invoke: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(skill_yaml(invoke))
    assert_problem(problem, path, line, column, expected, found, hint)


def test_a_step_of_a_later_list_item_is_placed_at_its_own_line() -> None:
    text = skill_yaml(
        """\
        - error: ENDPOINT_UNREACHABLE
        - json: {}
        - error: AUTH_REQUIRED
          status: 503
        """
    )
    [problem] = problems_in(text)
    assert problem.path == "skills[0].invoke[2].status"
    assert (problem.line, problem.column) == (7, 17)


def test_descriptor_true_is_refused_on_a_free_route() -> None:
    [problem] = problems_in("routes:\n  - path: /x\n    steps:\n      - descriptor: true\n")
    assert problem.path == "routes[0].steps[0].descriptor"
    assert problem.line == 4
    assert problem.found == "a free route"
    assert "routes have no descriptor" in problem.hint


def test_every_bad_step_of_a_sequence_is_reported() -> None:
    text = skill_yaml(
        """\
        - error: AUTH_REQUIRD
        - delay: -1
          json: {}
        - times: 0
          text: hi
        """
    )
    assert [p.path for p in problems_in(text)] == [
        "skills[0].invoke[0].error",
        "skills[0].invoke[1].delay",
        "skills[0].invoke[2].times",
    ]


# -- statuses each category allows ---------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("EXECUTION_TIMEOUT", 504, id="timeout-504"),
        pytest.param("EXECUTION_TIMEOUT", 408, id="timeout-408"),
        pytest.param("ENDPOINT_UNREACHABLE", 503, id="unreachable-503"),
        pytest.param("ENDPOINT_UNREACHABLE", 502, id="unreachable-502"),
        pytest.param("AUTH_REQUIRED", 401, id="auth-401"),
        pytest.param("PERMISSION_DENIED", 403, id="permission-403"),
        pytest.param("SKILL_NOT_FOUND", 404, id="not-found-404"),
        pytest.param("VERSION_INCOMPATIBLE", 422, id="version-422"),
    ],
)
def test_each_status_the_chapter_allows_for_a_code_is_served(code: str, status: int) -> None:
    reply = reply_of(f"error: {code}\nstatus: {status}\n")
    assert (reply.status, reply.error_code) == (status, code)
    assert body_of(reply)["error"]["code"] == code


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("AUTH_REQUIRED", 401, id="auth"),
        pytest.param("EXECUTION_TIMEOUT", 504, id="timeout"),
        pytest.param("ENDPOINT_UNREACHABLE", 503, id="unreachable"),
    ],
)
def test_an_error_without_status_uses_the_categorys_first_status(code: str, status: int) -> None:
    assert reply_of(f"error: {code}\n").status == status


# -- sequences ------------------------------------------------------------------------


def test_a_single_step_is_a_sequence_of_one_ending_on_last() -> None:
    sequence = invoke_of("json: {a: 1}\n")
    assert len(sequence.steps) == 1
    assert sequence.end == "last"
    assert body_of(sequence.steps[0].reply) == {"a": 1}


def test_a_list_of_steps_keeps_their_order_and_ends_on_last() -> None:
    sequence = invoke_of("- error: ENDPOINT_UNREACHABLE\n- status: 204\n")
    assert [s.reply.status for s in sequence.steps] == [503, 204]
    assert sequence.end == "last"


@pytest.mark.parametrize("end", ["last", "cycle", "fail"])
def test_the_steps_form_takes_its_end_rule(end: str) -> None:
    sequence = invoke_of(f"end: {end}\nsteps:\n  - json: 1\n  - json: 2\n")
    assert sequence.end == end
    assert [s.reply.body for s in sequence.steps] == [b"1", b"2"]


@pytest.mark.parametrize(
    ("end", "answers"),
    [
        pytest.param("last", [0, 0, 1, 1, 1, 1], id="last-repeats-the-last-step"),
        pytest.param("cycle", [0, 0, 1, 0, 0, 1], id="cycle-starts-again"),
        pytest.param("fail", [0, 0, 1, None, None, None], id="fail-answers-none"),
    ],
)
def test_times_repeats_a_step_and_the_end_rule_applies_after_the_last(
    end: str, answers: list[int | None]
) -> None:
    sequence = invoke_of(
        f"end: {end}\nsteps:\n  - error: ENDPOINT_UNREACHABLE\n    times: 2\n  - json: ok\n"
    )
    assert sequence.length == 3
    assert [sequence.step_at(i) for i in range(6)] == answers


def test_step_at_handles_large_positions_without_walking_them() -> None:
    sequence = invoke_of("end: cycle\nsteps:\n  - json: 1\n    times: 1000000\n  - json: 2\n")
    assert sequence.step_at(999_999) == 0
    assert sequence.step_at(1_000_000) == 1
    assert sequence.step_at(10 * 1_000_001 + 1_000_000) == 1


def test_a_sequence_needs_at_least_one_step() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        Sequence(())


def test_delay_and_times_and_position_are_kept_on_the_step() -> None:
    [first, second] = invoke_of("- json: 1\n  delay: 250\n  times: 3\n- json: 2\n").steps
    assert (first.delay, first.times) == (Fixed(250), 3)
    assert (second.delay, second.times) == (None, 1)
    assert first.where == Position("s.yaml", 4, 9)
    assert second.where == Position("s.yaml", 7, 9)


def test_the_longest_delay_is_accepted() -> None:
    [step] = invoke_of(f"json: 1\ndelay: {MAX_DELAY_MS}\n").steps
    assert step.delay == Fixed(MAX_DELAY_MS)


# -- errors: overrides over the category's defaults -----------------------------------


def test_an_error_step_renders_the_unified_body_with_defaults() -> None:
    reply = reply_of("error: AUTH_REQUIRED\n")
    error = body_of(reply)["error"]
    assert reply.content_type == JSON_TYPE
    assert error["code"] == "AUTH_REQUIRED"
    assert error["message"] == "Authentication is required to invoke this skill"
    assert error["details"]["required_auth_type"] == "oauth2"
    assert "retry" not in error
    assert dict(reply.headers)["WWW-Authenticate"].startswith("Bearer ")


def test_message_replaces_and_details_merge_over_the_defaults() -> None:
    reply = reply_of(
        "error: PERMISSION_DENIED\nmessage: No.\ndetails: {missing_scopes: [admin], extra: 1}\n"
    )
    error = body_of(reply)["error"]
    assert error["message"] == "No."
    assert error["details"] == {"skill_id": "s", "missing_scopes": ["admin"], "extra": 1}


def test_the_default_message_is_filled_from_the_final_details() -> None:
    reply = reply_of("error: EXECUTION_TIMEOUT\ndetails: {timeout_ms: 1000}\n")
    message = body_of(reply)["error"]["message"]
    assert message == "Skill execution exceeded the configured timeout of 1000ms"


def test_retryable_errors_carry_default_advice_and_retry_after_in_seconds() -> None:
    reply = reply_of("error: EXECUTION_TIMEOUT\n")
    assert body_of(reply)["error"]["retry"] == {
        "suggested_delay_ms": 5000,
        "max_attempts": 3,
    }
    assert dict(reply.headers)["Retry-After"] == "5"
    assert reply.retry is not None
    assert reply.retry.max_attempts == 3


@pytest.mark.parametrize(
    ("delay_ms", "seconds"),
    [
        pytest.param(1500, "2", id="1500ms-rounds-up-to-2"),
        pytest.param(1000, "1", id="1000ms-is-1"),
        pytest.param(1, "1", id="1ms-rounds-up-to-1"),
        pytest.param(0, "0", id="0ms-is-0"),
    ],
)
def test_retry_replaces_the_advice_and_retry_after_is_rounded_up(
    delay_ms: int, seconds: str
) -> None:
    reply = reply_of(f"error: ENDPOINT_UNREACHABLE\nretry: {{suggested_delay_ms: {delay_ms}}}\n")
    retry = body_of(reply)["error"]["retry"]
    assert retry == {"suggested_delay_ms": delay_ms, "max_attempts": 5}  # attempts kept
    assert dict(reply.headers)["Retry-After"] == seconds


@pytest.mark.parametrize(
    "name",
    [
        "Connection",
        "Keep-Alive",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Upgrade",
        "TRANSFER-ENCODING",
    ],
)
def test_hop_by_hop_and_framing_headers_are_refused_in_any_case(name: str) -> None:
    [problem] = problems_in(skill_yaml(f"json: {{}}\nheaders: {{{name}: x}}\n"))
    assert (problem.path, problem.expected) == (
        f"skills[0].invoke.headers.{name}",
        "a header a step may set",
    )


def test_latin_1_text_and_tabs_are_header_values_that_go_on_the_wire() -> None:
    reply = reply_of('json: {}\nheaders: {X-A: "caf\u00e9\tau lait", X-N: 5}\n')
    assert dict(reply.headers)["X-A"] == "caf\u00e9\tau lait"
    assert dict(reply.headers)["X-N"] == "5"


def test_the_longest_retry_advice_is_the_longest_wait_and_retry_after_stays_exact() -> None:
    reply = reply_of("error: ENDPOINT_UNREACHABLE\nretry: {suggested_delay_ms: 300000}\n")
    assert dict(reply.headers)["Retry-After"] == "300"
    [problem] = problems_in(
        skill_yaml(f"error: ENDPOINT_UNREACHABLE\nretry: {{suggested_delay_ms: {10**32}}}\n")
    )
    assert problem.found == f"{10**32} (an integer)"


def test_retry_advice_follows_a_raised_max_delay() -> None:
    text = skill_yaml("error: EXECUTION_TIMEOUT\nretry: {suggested_delay_ms: 600000}\n")
    [skill] = load_text(text, "s.yaml", max_delay_ms=600_000).skills
    assert dict(skill.invoke.steps[0].reply.headers)["Retry-After"] == "600"
    with pytest.raises(ScenarioError):
        load_text(text, "s.yaml")


@pytest.mark.parametrize(
    ("delay_ms", "seconds"),
    [(10**32, 10**29), (10**32 + 1, 10**29 + 1), (2**53 + 1, 2**53 // 1000 + 1), (999, 1)],
)
def test_retry_after_is_computed_in_integers(delay_ms: int, seconds: int) -> None:
    assert retry_after_seconds(delay_ms) == seconds


def test_validate_refuses_headers_that_cannot_go_on_the_wire(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        skill_yaml('json: 1\nheaders:\n  X-A: "\u65e5\u672c"\n  Transfer-Encoding: chunked\n'),
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:6:14: skills[0].invoke.headers.X-A: expected a header value" in result.output
    assert f"{path}:7:9: skills[0].invoke.headers.Transfer-Encoding:" in result.output
    assert "2 problems in 1 file" in result.output


def test_retry_null_removes_the_advice_and_the_header() -> None:
    reply = reply_of("error: ENDPOINT_UNREACHABLE\nretry: null\n")
    assert "retry" not in body_of(reply)["error"]
    assert "Retry-After" not in dict(reply.headers)
    assert reply.retry is None


def test_retry_null_is_allowed_on_a_non_retryable_code() -> None:
    reply = reply_of("error: AUTH_REQUIRED\nretry: null\n")
    assert reply.status == 401


def test_custom_headers_on_an_error_are_added_to_the_defaults() -> None:
    reply = reply_of("error: AUTH_REQUIRED\nheaders: {X-Trace: abc}\n")
    headers = dict(reply.headers)
    assert headers["X-Trace"] == "abc"
    assert "WWW-Authenticate" in headers


@pytest.mark.parametrize("name", ["Retry-After", "retry-after"])
def test_an_error_step_may_not_set_retry_after_by_hand(name: str) -> None:
    [problem] = problems_in(skill_yaml(f"error: ENDPOINT_UNREACHABLE\nheaders: {{{name}: 9}}\n"))
    assert problem.path == f"skills[0].invoke.headers.{name}"
    assert (problem.line, problem.column) == (5, 17)
    assert problem.expected == "no Retry-After header in an error step"
    assert "retry.suggested_delay_ms" in problem.hint


def test_a_result_step_may_set_retry_after_freely() -> None:
    reply = reply_of("status: 429\nheaders: {Retry-After: 9}\n")
    assert dict(reply.headers)["Retry-After"] == "9"


@pytest.mark.parametrize(
    ("text", "path"),
    [
        pytest.param('skills: [{id: "abc\\n"}]\n', "skills[0].id", id="skill-id"),
        pytest.param('name: "abc\\n"\nskills: [{id: a}]\n', "name", id="scenario-name"),
        pytest.param(
            'skills: [{id: a, invoke: {json: 1, headers: {"X-A\\n": v}}}]\n',
            "skills[0].invoke.headers.X-A\n",
            id="header-name",
        ),
    ],
)
def test_a_trailing_line_break_does_not_sneak_into_names(text: str, path: str) -> None:
    # "$" in a regular expression also matches before a final line break.
    [problem] = problems_in(text)
    assert problem.path == path


# -- results --------------------------------------------------------------------------


def test_a_json_result_is_served_as_json_with_status_200() -> None:
    reply = reply_of("json: {result: {text: Hallo}}\n")
    assert (reply.status, reply.content_type) == (200, JSON_TYPE)
    assert body_of(reply) == {"result": {"text": "Hallo"}}
    assert reply.error_code is None


def test_a_text_result_is_served_as_plain_text() -> None:
    reply = reply_of("text: Hello\nstatus: 201\n")
    assert (reply.status, reply.content_type, reply.body) == (201, TEXT_TYPE, b"Hello")


def test_a_status_only_result_has_an_empty_body() -> None:
    reply = reply_of("status: 204\n")
    assert (reply.status, reply.body) == (204, b"")


def test_custom_headers_are_kept_and_numbers_and_booleans_become_text() -> None:
    reply = reply_of("json: 1\nheaders: {X-Count: 3, X-Flag: true, X-Name: mock}\n")
    assert dict(reply.headers) == {"X-Count": "3", "X-Flag": "true", "X-Name": "mock"}


@pytest.mark.parametrize("name", ["Content-Type", "content-type", "CONTENT-TYPE"])
def test_a_content_type_header_overrides_the_body_kind_in_any_case(name: str) -> None:
    reply = reply_of(f"text: '<a/>'\nheaders: {{{name}: application/xml, X-A: b}}\n")
    assert reply.content_type == "application/xml"
    assert dict(reply.headers) == {"X-A": "b"}


def test_descriptor_true_serves_the_skills_descriptor() -> None:
    text = "skills:\n  - id: s\n    describe:\n      - status: 503\n      - descriptor: true\n"
    [skill] = load_text(text, "s.yaml").skills
    second = skill.describe.steps[1].reply
    assert (second.status, second.content_type, second.body) == (200, JSON_TYPE, skill.descriptor)


def test_base_url_in_a_body_marks_the_reply_as_templated() -> None:
    assert reply_of("json: {next: '{base_url}/x'}\n").templated
    assert not reply_of("json: {next: /x}\n").templated


def test_a_step_model_is_frozen() -> None:
    step = Step(Reply.json(200, 1), Position("f", 1, 1))
    with pytest.raises(AttributeError):
        step.times = 2  # type: ignore[misc]


# -- keep_alive: faults only keep-alive makes possible ----------------------------


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("{close_after: true}", KeepAlive(close_after=True)),
        ("{stale_after_ms: 500}", KeepAlive(stale_after_ms=500)),
        ("{stale_after_ms: 0, stale: drop_next}", KeepAlive(stale_after_ms=0, stale="drop_next")),
        ("{max_requests: 3}", KeepAlive(max_requests=3)),
        ("{max_requests: 2, stale_after_ms: 100}", KeepAlive(stale_after_ms=100, max_requests=2)),
    ],
    ids=["close-after", "stale", "stale-drop-next", "max-requests", "two-at-once"],
)
def test_keep_alive_is_read_into_the_step(block: str, expected: KeepAlive) -> None:
    [step] = invoke_of(f"- json: {{ok: true}}\n  keep_alive: {block}\n").steps
    assert step.keep_alive == expected


@pytest.mark.parametrize(
    ("block", "path", "expected", "found"),
    [
        ("{}", "keep_alive", "{close_after: true}", "an empty mapping"),
        ("true", "keep_alive", "{close_after: true}", "true"),
        ("{close_after: false}", "keep_alive.close_after", "true", "false"),
        ("{stale_after_ms: -1}", "keep_alive.stale_after_ms", "a whole number", "-1"),
        ("{stale: drop_next}", "keep_alive.stale", "stale_after_ms beside stale", "stale alone"),
        ("{stale_after_ms: 5, stale: drop}", "keep_alive.stale", "one of", "'drop'"),
        ("{max_requests: 0}", "keep_alive.max_requests", "a whole number", "0"),
        ("{max_request: 2}", "keep_alive.max_request", "a known key", "unknown key"),
    ],
    ids=[
        "empty",
        "not-a-mapping",
        "close-after-false",
        "negative-stale",
        "stale-alone",
        "unknown-stale-mode",
        "zero-max-requests",
        "misspelt-key",
    ],
)
def test_a_bad_keep_alive_is_refused_where_it_is(
    block: str, path: str, expected: str, found: str
) -> None:
    [problem] = problems_in(skill_yaml(f"- json: {{ok: true}}\n  keep_alive: {block}\n"))
    assert problem.path == f"skills[0].invoke[0].{path}"
    assert expected in problem.expected
    assert found in problem.found


@pytest.mark.parametrize("other", ["fault: EMPTY_RESPONSE", "hang: 100"])
def test_keep_alive_does_not_go_with_a_fault_or_a_hang(other: str) -> None:
    problems = problems_in(
        skill_yaml(f"- json: 1\n  {other}\n  keep_alive: {{close_after: true}}\n")
    )
    assert any(p.path.endswith("keep_alive") and p.found == "both" for p in problems)


# -- warnings: error answers outside the unified body --------------------------------


def warnings_of(text: str) -> list[Problem]:
    warnings: list[Problem] = []
    load_text(text, "s.yaml", warnings=warnings)
    return warnings


def test_a_skills_scripted_json_error_that_is_not_unified_is_a_positioned_warning() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              cases:
                - when: {body: {/a: 1}}
                  status: 400
                  json: {error: input.lang is required}
              steps:
                - {status: 500, json: {message: down}}
                - one_of:
                    - {weight: 1, status: 503, json: [down]}
                    - {weight: 1, json: {ok: true}}
        """
    )
    found = warnings_of(text)
    assert [(w.line, w.path, w.found) for w in found] == [
        (7, "skills[0].invoke.cases[0].json", "a mapping with keys error"),
        (9, "skills[0].invoke.steps[0].json", "a mapping with keys message"),
        (11, "skills[0].invoke.steps[1].one_of[0].json", "a list of 1 item"),
    ]
    assert found[0].expected.startswith("the unified error body {error: {code, message")
    assert found[0].hint.startswith("its error is not an object")
    assert "breaks the protocol" in found[0].hint


@pytest.mark.parametrize(
    "text",
    [
        "skills:\n  - id: s\n    invoke: {status: 400, json: {error: {code: X, message: m}}}\n",
        "skills:\n  - id: s\n    invoke: {error: EXECUTION_TIMEOUT}\n",
        "skills:\n  - id: s\n    invoke: {status: 200, json: {error: not an object}}\n",
        "skills:\n  - id: s\n    invoke: {status: 500, text: down}\n",
        "routes:\n  - path: /free\n    steps: [{status: 400, json: {error: free to differ}}]\n",
    ],
    ids=["unified", "error-step", "not-an-error-status", "not-json", "a-free-route"],
)
def test_no_warning_for_unified_bodies_successes_text_or_free_routes(text: str) -> None:
    assert warnings_of(text) == []


# -- {{...}} templates in a step (issue 28, items 5 and 6) ---------------------------------


def test_an_answer_with_placeholders_keeps_its_template_and_is_a_random_step_if_it_draws() -> None:
    reply = reply_of("json: {text: '{{request.body/input/text}}', id: '{{id}}'}\n")
    assert reply.template is not None
    assert reply.template.draws
    assert body_of(reply) == {"text": "{{request.body/input/text}}", "id": "{{id}}"}  # as written
    [step] = invoke_of("json: {id: '{{id}}'}\n").steps
    assert step.random  # its id comes from the run's seeded generator
    [plain] = invoke_of("json: {s: '{{session}}'}\n").steps
    assert not plain.random
    assert plain.reply.template is not None


def test_an_answer_without_placeholders_is_as_before_and_an_escape_is_unescaped() -> None:
    assert reply_of("json: {a: [1, 'x {y}']}\n").template is None
    escaped = reply_of("json: {a: '\\{{not a placeholder}}'}\n")
    assert escaped.template is None
    assert body_of(escaped) == {"a": "{{not a placeholder}}"}
    text = reply_of("text: 'literal \\{{x}}'\nheaders: {X-A: '\\{{y}}'}\n")
    assert (text.template, text.body, text.headers) == (None, b"literal {{x}}", (("X-A", "{{y}}"),))


TEMPLATE_PROBLEMS = [
    # (scenario, path, line, column, expected, found, hint)
    pytest.param(
        skill_yaml("json: {a: 'hi {{sesion}}'}\n"),
        "skills[0].invoke.json.a",
        4,
        21,
        "a placeholder name",
        "'{{sesion}}'",
        "did you mean 'session'?",
        id="misspelt name, placed inside the string",
    ),
    pytest.param(
        skill_yaml("text: '{{request.body/a/~2}}'\n"),
        "skills[0].invoke.text",
        4,
        14,
        "a JSON Pointer",
        "'/a/~2'",
        "~0 (for ~) or ~1 (for /)",
        id="malformed pointer",
    ),
    pytest.param(
        skill_yaml("json: {a: '{{request.body/{{id}}}}'}\n"),
        "skills[0].invoke.json.a",
        4,
        33,
        "'}}' closing the placeholder before another '{{'",
        "'{{request.body/{{id}}' (a placeholder inside a placeholder)",
        "placeholders do not nest",
        id="nested placeholders",
    ),
    pytest.param(
        skill_yaml("headers: {X-A: '{{request.path.id}}'}\njson: {}\n"),
        "skills[0].invoke.headers.X-A",
        4,
        23,
        "request.path.NAME only in a free route's step",
        "'{{request.path.id}}' in a skill's step",
        "{{skill.id}}",
        id="a path variable in a skill's step",
    ),
    pytest.param(
        "routes:\n  - path: /orders/<int:order>\n    steps:\n"
        "      - text: '{{request.path.ordr}}'\n",
        "routes[0].steps[0].text",
        4,
        16,
        "request.path.NAME naming a variable of the route's path (order)",
        "'{{request.path.ordr}}'",
        "did you mean 'request.path.order'?",
        id="a route's variable misspelt",
    ),
    pytest.param(
        "routes:\n  - path: /x\n    steps:\n      - text: '{{skill.id}}'\n",
        "routes[0].steps[0].text",
        4,
        16,
        "a placeholder a free route's answer can fill",
        "'{{skill.id}}' in a free route's step",
        "a free route has no skill",
        id="skill.id in a route",
    ),
    pytest.param(
        skill_yaml("headers: {Content-Type: 'text/{{request.body/t}}'}\ntext: x\n"),
        "skills[0].invoke.headers.Content-Type",
        4,
        31,
        "a Content-Type without placeholders",
        "'text/{{request.body/t}}'",
        "does not depend on the request",
        id="a templated Content-Type",
    ),
    pytest.param(
        skill_yaml("error: PERMISSION_DENIED\nmessage: '{{nope}}'\n"),
        "skills[0].invoke.message",
        5,
        17,
        "a placeholder name",
        "'{{nope}}'",
        "",
        id="an error's message",
    ),
    pytest.param(
        skill_yaml("error: PERMISSION_DENIED\ndetails: {who: {name: '{{request.heder.X}}'}}\n"),
        "skills[0].invoke.details.who.name",
        5,
        30,
        "a placeholder name",
        "'{{request.heder.X}}'",
        "did you mean 'request.header.X'?",
        id="an error's details, nested",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "column", "expected", "found", "hint"), TEMPLATE_PROBLEMS
)
def test_each_template_problem_is_positioned_at_load(
    text: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(text)
    assert_problem(problem, path, line, column, expected, found, hint)


def test_an_errors_templated_message_and_details_keep_the_unified_body() -> None:
    reply = reply_of(
        "error: PERMISSION_DENIED\nmessage: 'no, {{request.header.X-User}}'\n"
        "details: {user: '{{request.header.X-User}}', fixed: 1}\n"
    )
    assert reply.template is not None
    assert reply.template.body is not None
    assert reply.error_code == "PERMISSION_DENIED"
    error = body_of(reply)["error"]  # the body as written, for what reads the model
    assert error["message"] == "no, {{request.header.X-User}}"
    assert error["details"]["user"] == "{{request.header.X-User}}"
    assert error["details"]["fixed"] == 1
