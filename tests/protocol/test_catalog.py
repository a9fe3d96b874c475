"""The error chapter as mockskill renders it: seven categories, one body shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mockskill.protocol import catalog
from mockskill.protocol.catalog import (
    BASE_URL,
    CATEGORIES,
    CODES,
    SERVED_CODES,
    Context,
    Retry,
    render,
)

# The chapter's table, restated here rather than read back from the module.
CHAPTER_STATUSES: dict[str, set[int]] = {
    "VALIDATION_ERROR": set(),
    "AUTH_REQUIRED": {401},
    "PERMISSION_DENIED": {403},
    "SKILL_NOT_FOUND": {404},
    "EXECUTION_TIMEOUT": {408, 504},
    "ENDPOINT_UNREACHABLE": {502, 503},
    "VERSION_INCOMPATIBLE": {422},
}
RETRYABLE = {"EXECUTION_TIMEOUT", "ENDPOINT_UNREACHABLE"}
SERVED = sorted(code for code, statuses in CHAPTER_STATUSES.items() if statuses)
TRANSLATE = Context.for_skill("translate")


def error_of(rendered: catalog.Rendered) -> dict[str, Any]:
    body = json.loads(rendered.body)
    assert list(body) == ["error"]
    error: dict[str, Any] = body["error"]
    return error


def header(rendered: catalog.Rendered, name: str) -> str | None:
    values = [v for k, v in rendered.headers if k.lower() == name.lower()]
    assert len(values) <= 1, f"{name} sent {len(values)} times"
    return values[0] if values else None


# -- the categories -----------------------------------------------------------


def test_the_catalog_has_exactly_the_seven_codes_of_the_chapter() -> None:
    assert sorted(CODES) == sorted(CHAPTER_STATUSES)
    assert len(CODES) == 7


@pytest.mark.parametrize("code", sorted(CHAPTER_STATUSES))
def test_each_category_allows_exactly_the_statuses_of_the_chapter(code: str) -> None:
    assert set(CATEGORIES[code].statuses) == CHAPTER_STATUSES[code]


@pytest.mark.parametrize("code", SERVED)
def test_the_default_status_is_one_the_chapter_allows(code: str) -> None:
    assert CATEGORIES[code].status in CHAPTER_STATUSES[code]
    assert render(code, TRANSLATE).status in CHAPTER_STATUSES[code]


def test_validation_error_is_never_sent_by_a_provider() -> None:
    assert not CATEGORIES["VALIDATION_ERROR"].sent_by_provider
    assert "VALIDATION_ERROR" not in SERVED_CODES
    assert sorted(SERVED_CODES) == SERVED


def test_exactly_timeout_and_unreachable_are_retryable() -> None:
    assert {code for code, c in CATEGORIES.items() if c.retryable} == RETRYABLE


@pytest.mark.parametrize("code", sorted(CHAPTER_STATUSES))
def test_only_retryable_categories_carry_default_retry_advice(code: str) -> None:
    assert (CATEGORIES[code].retry is not None) == (code in RETRYABLE)


# -- the default bodies match the chapter's examples ---------------------------


def test_default_validation_error_body() -> None:
    error = error_of(render("VALIDATION_ERROR"))
    assert error["code"] == "VALIDATION_ERROR"
    assert error["message"] == "Skill descriptor validation failed"
    assert error["details"] == {"violations": []}
    assert "retry" not in error


def test_default_auth_required_body_says_how_to_authenticate() -> None:
    rendered = render("AUTH_REQUIRED", TRANSLATE)
    error = error_of(rendered)
    assert rendered.status == 401
    assert error["code"] == "AUTH_REQUIRED"
    assert error["message"] == "Authentication is required to invoke this skill"
    assert set(error["details"]) == {"required_auth_type", "authorization_url", "scopes"}
    assert error["details"]["required_auth_type"] == "oauth2"
    assert error["details"]["authorization_url"].startswith(BASE_URL + "/")
    assert error["details"]["scopes"] == ["skill:invoke"]
    assert "retry" not in error


def test_default_permission_denied_body_names_the_skill_and_missing_scopes() -> None:
    rendered = render("PERMISSION_DENIED", TRANSLATE)
    error = error_of(rendered)
    assert rendered.status == 403
    assert error["code"] == "PERMISSION_DENIED"
    assert error["message"]
    assert error["details"]["skill_id"] == "translate"
    assert error["details"]["missing_scopes"] == ["skill:invoke"]
    assert "retry" not in error


@pytest.mark.parametrize(
    ("context", "url"),
    [
        pytest.param(
            Context.for_skill("nope", "describe"), f"{BASE_URL}/skills/nope", id="descriptor"
        ),
        pytest.param(Context.for_skill("nope"), f"{BASE_URL}/skills/nope/invoke", id="invoke"),
    ],
)
def test_default_skill_not_found_body_names_what_was_asked_for(context: Context, url: str) -> None:
    rendered = render("SKILL_NOT_FOUND", context)
    error = error_of(rendered)
    assert rendered.status == 404
    assert error["details"] == {"skill_id": "nope", "url": url}
    assert "retry" not in error


def test_default_execution_timeout_body_is_the_chapters_example() -> None:
    rendered = render("EXECUTION_TIMEOUT", TRANSLATE)
    error = error_of(rendered)
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["message"] == "Skill execution exceeded the configured timeout of 30000ms"
    assert set(error["details"]) == {"timeout_ms", "elapsed_ms"}
    assert error["details"]["timeout_ms"] == 30000
    assert error["details"]["elapsed_ms"] > error["details"]["timeout_ms"]
    assert error["retry"] == {"suggested_delay_ms": 5000, "max_attempts": 3}
    assert rendered.retry == Retry(5000, 3)


def test_default_endpoint_unreachable_body_is_the_chapters_example() -> None:
    rendered = render("ENDPOINT_UNREACHABLE", TRANSLATE)
    error = error_of(rendered)
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert error["message"] == "Failed to connect to skill endpoint"
    assert error["details"] == {
        "endpoint_url": f"{BASE_URL}/skills/translate/invoke",
        "reason": "Connection refused",
    }
    assert error["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert rendered.retry == Retry(2000, 5)


def test_default_version_incompatible_body_is_the_chapters_example() -> None:
    rendered = render("VERSION_INCOMPATIBLE", TRANSLATE)
    error = error_of(rendered)
    assert rendered.status == 422
    assert error["message"] == "Protocol version 2.0.0 is not compatible with consumer version 1.x"
    assert set(error["details"]) == {
        "descriptor_version",
        "consumer_supported_range",
        "upgrade_url",
    }
    assert error["details"]["descriptor_version"] == "2.0.0"
    assert error["details"]["consumer_supported_range"] == "1.x.x"
    assert error["details"]["upgrade_url"].startswith("https://")
    assert "retry" not in error


@pytest.mark.parametrize("code", sorted(CHAPTER_STATUSES))
def test_every_rendered_body_has_the_unified_shape(code: str) -> None:
    rendered = render(code, TRANSLATE)
    error = error_of(rendered)
    assert rendered.code == code
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert isinstance(error["details"], dict)
    assert set(error) <= {"code", "message", "details", "retry"}
    assert ("retry" in error) == (code in RETRYABLE)


# -- the message follows the details --------------------------------------------


def test_timeout_message_follows_an_overridden_timeout() -> None:
    error = error_of(render("EXECUTION_TIMEOUT", details={"timeout_ms": 1000}))
    assert error["message"] == "Skill execution exceeded the configured timeout of 1000ms"


def test_version_message_follows_overridden_versions() -> None:
    details = {"descriptor_version": "3.1.0", "consumer_supported_range": "2.x.x"}
    error = error_of(render("VERSION_INCOMPATIBLE", details=details))
    assert error["message"] == "Protocol version 3.1.0 is not compatible with consumer version 2.x"


def test_an_explicit_message_is_sent_as_written() -> None:
    error = error_of(render("EXECUTION_TIMEOUT", message="Too slow {timeout_ms}"))
    assert error["message"] == "Too slow {timeout_ms}"


# -- overrides ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param("EXECUTION_TIMEOUT", 408, id="timeout-408"),
        pytest.param("EXECUTION_TIMEOUT", 504, id="timeout-504"),
        pytest.param("ENDPOINT_UNREACHABLE", 502, id="unreachable-502"),
        pytest.param("ENDPOINT_UNREACHABLE", 503, id="unreachable-503"),
    ],
)
def test_status_override_is_sent(code: str, status: int) -> None:
    assert render(code, status=status).status == status


def test_details_override_merges_over_the_defaults_key_by_key() -> None:
    error = error_of(render("ENDPOINT_UNREACHABLE", TRANSLATE, details={"reason": "Bad gateway"}))
    assert error["details"] == {
        "endpoint_url": f"{BASE_URL}/skills/translate/invoke",
        "reason": "Bad gateway",
    }


def test_details_override_may_add_keys() -> None:
    error = error_of(render("EXECUTION_TIMEOUT", details={"trace_id": "abc"}))
    assert error["details"]["trace_id"] == "abc"
    assert error["details"]["timeout_ms"] == 30000


def test_details_override_leaves_the_callers_mapping_alone() -> None:
    details = {"reason": "Bad gateway"}
    render("ENDPOINT_UNREACHABLE", details=details)
    assert details == {"reason": "Bad gateway"}


def test_retry_override_replaces_the_advice() -> None:
    rendered = render("EXECUTION_TIMEOUT", retry=Retry(1000, 2))
    assert error_of(rendered)["retry"] == {"suggested_delay_ms": 1000, "max_attempts": 2}
    assert rendered.retry == Retry(1000, 2)
    assert header(rendered, "Retry-After") == "1"


def test_retry_none_removes_the_advice_and_the_retry_after_header() -> None:
    rendered = render("ENDPOINT_UNREACHABLE", retry=None)
    assert "retry" not in error_of(rendered)
    assert rendered.retry is None
    assert header(rendered, "Retry-After") is None


def test_extra_headers_are_added_to_the_defaults() -> None:
    rendered = render("AUTH_REQUIRED", headers={"X-Trace": "abc"})
    assert header(rendered, "X-Trace") == "abc"
    assert header(rendered, "WWW-Authenticate") is not None


# -- headers ------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(CHAPTER_STATUSES))
def test_retry_after_is_present_exactly_when_there_is_retry_advice(code: str) -> None:
    rendered = render(code, TRANSLATE)
    assert (header(rendered, "Retry-After") is not None) == (code in RETRYABLE)


@pytest.mark.parametrize(
    ("delay_ms", "seconds"),
    [(0, 0), (1, 1), (999, 1), (1000, 1), (1001, 2), (2000, 2)],
    ids=lambda v: str(v),
)
def test_retry_after_is_the_suggested_delay_in_seconds_rounded_up(
    delay_ms: int, seconds: int
) -> None:
    assert catalog.retry_after_seconds(delay_ms) == seconds
    rendered = render("EXECUTION_TIMEOUT", retry=Retry(delay_ms, 3))
    assert header(rendered, "Retry-After") == str(seconds)


def test_default_retry_after_headers_follow_the_default_advice() -> None:
    assert header(render("EXECUTION_TIMEOUT"), "Retry-After") == "5"
    assert header(render("ENDPOINT_UNREACHABLE"), "Retry-After") == "2"


def test_auth_required_carries_www_authenticate_with_the_default_scope() -> None:
    value = header(render("AUTH_REQUIRED", TRANSLATE), "WWW-Authenticate")
    assert value is not None
    assert value.startswith("Bearer ")
    assert 'scope="skill:invoke"' in value


def test_www_authenticate_follows_overridden_scopes() -> None:
    rendered = render("AUTH_REQUIRED", details={"scopes": ["skill:invoke", "skill:admin"]})
    value = header(rendered, "WWW-Authenticate")
    assert value is not None
    assert 'scope="skill:invoke skill:admin"' in value


@pytest.mark.parametrize("code", sorted(set(CHAPTER_STATUSES) - {"AUTH_REQUIRED"}))
def test_only_auth_required_challenges_for_credentials(code: str) -> None:
    assert header(render(code, TRANSLATE), "WWW-Authenticate") is None


# -- the checks the loader uses -------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param(code, status, id=f"{code}-{status}")
        for code, statuses in sorted(CHAPTER_STATUSES.items())
        for status in sorted(statuses)
    ],
)
def test_status_problem_accepts_every_status_the_chapter_allows(code: str, status: int) -> None:
    assert catalog.status_problem(code, status) is None


@pytest.mark.parametrize(
    ("code", "status", "allowed"),
    [
        pytest.param("EXECUTION_TIMEOUT", 500, ["408", "504"], id="timeout-500"),
        pytest.param("EXECUTION_TIMEOUT", 503, ["408", "504"], id="timeout-unreachables-503"),
        pytest.param("ENDPOINT_UNREACHABLE", 504, ["502", "503"], id="unreachable-504"),
        pytest.param("AUTH_REQUIRED", 403, ["401"], id="auth-403"),
        pytest.param("SKILL_NOT_FOUND", 410, ["404"], id="not-found-410"),
        pytest.param("VERSION_INCOMPATIBLE", 400, ["422"], id="version-400"),
    ],
)
def test_status_problem_names_the_allowed_statuses(
    code: str, status: int, allowed: list[str]
) -> None:
    problem = catalog.status_problem(code, status)
    assert problem is not None
    assert code in problem
    for text in allowed:
        assert text in problem


@pytest.mark.parametrize("status", [400, 422, 500])
def test_status_problem_says_validation_error_is_never_sent(status: int) -> None:
    problem = catalog.status_problem("VALIDATION_ERROR", status)
    assert problem is not None
    assert "never sent" in problem
    assert "HTTP  " not in problem


@pytest.mark.parametrize("code", sorted(RETRYABLE))
def test_retry_problem_allows_advice_on_retryable_codes(code: str) -> None:
    assert catalog.retry_problem(code) is None


@pytest.mark.parametrize("code", sorted(set(CHAPTER_STATUSES) - RETRYABLE))
def test_retry_problem_refuses_advice_on_other_codes(code: str) -> None:
    problem = catalog.retry_problem(code)
    assert problem is not None
    assert code in problem
    assert "not retryable" in problem


# -- unified_body and tool errors ------------------------------------------------------


def test_unified_body_leaves_out_unset_optional_parts() -> None:
    assert catalog.unified_body("X", "m") == {"error": {"code": "X", "message": "m"}}


def test_unified_body_keeps_empty_details() -> None:
    assert catalog.unified_body("X", "m", {}) == {
        "error": {"code": "X", "message": "m", "details": {}}
    }


def test_unified_body_includes_details_and_retry_when_given() -> None:
    body = catalog.unified_body("X", "m", {"a": 1}, Retry(100, 2))
    assert body == {
        "error": {
            "code": "X",
            "message": "m",
            "details": {"a": 1},
            "retry": {"suggested_delay_ms": 100, "max_attempts": 2},
        }
    }


def test_unified_body_copies_the_details() -> None:
    details = {"a": 1}
    body = catalog.unified_body("X", "m", details)
    body["error"]["details"]["a"] = 2
    assert details == {"a": 1}


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param(400, "MOCKSKILL_BAD_REQUEST", id="bad-request"),
        pytest.param(500, "MOCKSKILL_SEQUENCE_EXHAUSTED", id="exhausted"),
    ],
)
def test_tool_errors_use_the_unified_shape_without_retry(status: int, code: str) -> None:
    rendered = catalog.tool_error(status, code, "what went wrong", {"hint": "fix it"})
    assert rendered.status == status
    assert rendered.code == code
    assert rendered.retry is None
    assert rendered.headers == ()
    assert json.loads(rendered.body) == {
        "error": {"code": code, "message": "what went wrong", "details": {"hint": "fix it"}}
    }


def test_tool_error_codes_are_not_protocol_codes() -> None:
    assert not any(code.startswith("MOCKSKILL_") for code in CODES)


@pytest.mark.parametrize("code", sorted(CHAPTER_STATUSES))
def test_every_rendered_body_passes_the_check_of_error_bodies(code: str) -> None:
    assert catalog.error_body_problem(json.loads(render(code, TRANSLATE).body)) is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"error": "input.lang is required"}, "its error is not an object"),
        ({"message": "no"}, "it has no error object"),
        ([], "it has no error object"),
        ({"error": {"message": "m"}}, "its error.code is missing or not a string"),
        ({"error": {"code": "X", "message": 5}}, "its error.message is missing or not a string"),
        ({"error": {"code": "X", "message": "m", "details": []}}, "its error.details is not"),
        ({"error": {"code": "X", "message": "m", "retry": 3}}, "its error.retry is not an object"),
        (
            {"error": {"code": "X", "message": "m", "retry": {"max_attempts": -1}}},
            "its error.retry.max_attempts is not a non-negative number",
        ),
        (
            {"error": {"code": "X", "message": "m", "retry": {"suggested_delay_ms": True}}},
            "its error.retry.suggested_delay_ms is not a non-negative number",
        ),
        ({"error": {"code": "MY_OWN", "message": "m", "details": {}, "retry": {}}}, None),
    ],
)
def test_the_check_of_error_bodies_says_what_breaks_the_unified_shape(
    body: Any, problem: str | None
) -> None:
    found = catalog.error_body_problem(body)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)


# -- codes outside the chapter: a rate limit's, a long-running task's ------------------

TASK_STATUSES = {
    "TASK_NOT_FOUND": 404,
    "TASK_EXPIRED": 404,
    "TASK_FINISHED": 409,
    "TASK_NOT_CANCELLABLE": 409,
    "TASK_NOT_AWAITING_INPUT": 409,
    "TASK_INPUT_INVALID": 422,
}


def test_the_codes_outside_the_chapter_are_a_rate_limits_and_a_tasks() -> None:
    refused = "TASK_CALLBACK_REFUSED"  # (an invoke's refusal, not a status URL's)
    assert set(catalog.OUTSIDE_CHAPTER) == {"RATE_LIMITED", refused, *TASK_STATUSES}
    assert set(catalog.TASK_CODES) == set(TASK_STATUSES)
    assert not set(catalog.OUTSIDE_CHAPTER) & set(CODES)  # never taken for the chapter's


@pytest.mark.parametrize(("code", "status"), sorted(TASK_STATUSES.items()))
def test_a_tasks_refusal_renders_in_the_unified_body_without_retry_advice(
    code: str, status: int
) -> None:
    category = catalog.OUTSIDE_CHAPTER[code]
    assert not category.retryable
    assert all((category.message, category.when, category.fix))
    rendered = render(code, details={"task_id": "abc.0.0123456789", "status": "working"})
    assert rendered.status == status
    assert rendered.retry is None
    assert header(rendered, "Retry-After") is None
    error = error_of(rendered)
    assert catalog.error_body_problem({"error": error}) is None
    assert error["code"] == code
    assert "abc.0.0123456789" in error["message"]
    assert "{" not in error["message"]  # every name it uses is filled


CATALOG_PAGE = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"


def catalog_rows() -> dict[str, str]:
    """docs/catalog.md's error table: each code's row."""
    rows = {}
    for line in CATALOG_PAGE.read_text().splitlines():
        found = re.match(r"\| `([A-Z_]+)`", line)
        if found and line.count("|") > 5:
            rows[found.group(1)] = line
    return rows


@pytest.mark.parametrize("code", [*CODES, *catalog.OUTSIDE_CHAPTER])
def test_the_catalog_page_lists_every_code_with_its_statuses(code: str) -> None:
    row = catalog_rows()[code]
    category = CATEGORIES.get(code) or catalog.OUTSIDE_CHAPTER[code]
    status_cell = row.split("|")[2]
    for status in category.statuses:
        assert str(status) in status_cell, row
    assert ("(outside the chapter)" in row) == (code in catalog.OUTSIDE_CHAPTER), row
