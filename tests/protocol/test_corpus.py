"""The corpus of invalid descriptors: its answers, its names, and serving it over the wire.

The expected violations are what :func:`mockskill.protocol.validator.validate` reports,
and for a handful of cases they are also written out here by hand, in the
error chapter's words, so that the corpus cannot silently follow a validator
bug. The schema file must reject exactly the invalid cases. Over the wire, a
real client (requests) reads the listing, every descriptor and every answer,
and the loop ``docs/corpus.md`` shows runs as a consumer would run it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from jsonschema import Draft202012Validator

import mockskill
from mockskill import Server
from mockskill.protocol import corpus
from mockskill.protocol.corpus import CASES, CorpusCase
from mockskill.protocol.validator import validate

SCHEMA_PATH = Path(mockskill.__file__).resolve().parent / "descriptor.schema.json"
SCHEMA_VALIDATOR = Draft202012Validator(
    json.loads(SCHEMA_PATH.read_text(encoding="utf-8")),
    format_checker=Draft202012Validator.FORMAT_CHECKER,
)

IDS = [case.name for case in CASES]

# The chapter's words, restated here rather than read back from the validator.
CAPABILITIES = "one of: plugin, api, knowledge, task"
URI = "string (URI format)"
SEMVER = "string (semantic version MAJOR.MINOR.PATCH)"
MISSING = "Required field is missing"
ENUM = "Invalid enum value"
TYPE = "Invalid type"
BAD_URI = "Invalid URI format"
BAD_VERSION = "Invalid version format"


def violation(field: str, expected: str, actual: Any, message: str) -> dict[str, Any]:
    return {"field": field, "expected": expected, "actual": actual, "message": message}


# Written out by hand: a validator bug must not change these without a test failing.
PINNED: dict[str, list[dict[str, Any]]] = {
    "valid-default": [],
    "unknown-protocol-version": [],
    "missing-protocol_version": [violation("/protocol_version", SEMVER, None, MISSING)],
    "missing-endpoint-url": [violation("/endpoint/url", URI, None, MISSING)],
    "wrong-enum-capability_type": [
        violation("/capability_type", CAPABILITIES, "unknown_type", ENUM)
    ],
    "wrong-type-name-number": [violation("/name", "string", 42, TYPE)],
    "malformed-uri-endpoint-url": [
        violation("/endpoint/url", URI, "skills.example/corpus/invoke", BAD_URI)
    ],
    "bad-protocol-version-major-minor": [
        violation("/protocol_version", SEMVER, "1.0", BAD_VERSION)
    ],
    "nested-auth-oauth2-without-scopes": [
        violation("/auth/scopes", "array of strings", None, MISSING)
    ],
    "several-chapter-example": [
        violation("/capability_type", CAPABILITIES, "unknown_type", ENUM),
        violation("/endpoint/url", URI, None, MISSING),
    ],
    "several-at-once": [
        violation("/protocol_version", SEMVER, "1.0", BAD_VERSION),
        violation("/id", "string", None, MISSING),
        violation("/capability_type", CAPABILITIES, "API", ENUM),
        violation("/endpoint/url", URI, "not a uri", BAD_URI),
        violation("/auth/scopes", "array of strings", None, MISSING),
    ],
    "not-an-object-array": [violation("", "object", [], TYPE)],
}

VALID = (
    "valid-default",
    "valid-minimal",
    "valid-oauth2",
    "valid-extra-fields",
    "unknown-protocol-version",
)

EXPECTED_NAMES = (
    "valid-default",
    "valid-minimal",
    "valid-oauth2",
    "valid-extra-fields",
    "unknown-protocol-version",
    "missing-protocol_version",
    "missing-id",
    "missing-name",
    "missing-capability_type",
    "missing-endpoint",
    "missing-endpoint-url",
    "wrong-enum-capability_type",
    "wrong-enum-endpoint-method",
    "wrong-enum-auth-type",
    "wrong-type-protocol_version-number",
    "wrong-type-protocol_version-boolean",
    "wrong-type-protocol_version-null",
    "wrong-type-protocol_version-array",
    "wrong-type-protocol_version-object",
    "wrong-type-id-number",
    "wrong-type-id-boolean",
    "wrong-type-id-null",
    "wrong-type-id-array",
    "wrong-type-id-object",
    "wrong-type-name-number",
    "wrong-type-name-boolean",
    "wrong-type-name-null",
    "wrong-type-name-array",
    "wrong-type-name-object",
    "wrong-type-description-number",
    "wrong-type-description-boolean",
    "wrong-type-description-null",
    "wrong-type-description-array",
    "wrong-type-description-object",
    "wrong-type-version-number",
    "wrong-type-version-boolean",
    "wrong-type-version-null",
    "wrong-type-version-array",
    "wrong-type-version-object",
    "wrong-type-capability_type-number",
    "wrong-type-capability_type-boolean",
    "wrong-type-capability_type-null",
    "wrong-type-capability_type-array",
    "wrong-type-capability_type-object",
    "wrong-type-endpoint-url-number",
    "wrong-type-endpoint-url-boolean",
    "wrong-type-endpoint-url-null",
    "wrong-type-endpoint-url-array",
    "wrong-type-endpoint-url-object",
    "wrong-type-endpoint-method-number",
    "wrong-type-endpoint-method-boolean",
    "wrong-type-endpoint-method-null",
    "wrong-type-endpoint-method-array",
    "wrong-type-endpoint-method-object",
    "wrong-type-auth-type-number",
    "wrong-type-auth-type-boolean",
    "wrong-type-auth-type-null",
    "wrong-type-auth-type-array",
    "wrong-type-auth-type-object",
    "wrong-type-auth-authorization_url-number",
    "wrong-type-auth-authorization_url-boolean",
    "wrong-type-auth-authorization_url-null",
    "wrong-type-auth-authorization_url-array",
    "wrong-type-auth-authorization_url-object",
    "wrong-type-auth-token_url-number",
    "wrong-type-auth-token_url-boolean",
    "wrong-type-auth-token_url-null",
    "wrong-type-auth-token_url-array",
    "wrong-type-auth-token_url-object",
    "wrong-type-endpoint-string",
    "wrong-type-endpoint-number",
    "wrong-type-endpoint-boolean",
    "wrong-type-endpoint-null",
    "wrong-type-endpoint-array",
    "wrong-type-auth-string",
    "wrong-type-auth-number",
    "wrong-type-auth-boolean",
    "wrong-type-auth-null",
    "wrong-type-auth-array",
    "wrong-type-auth-scopes-string",
    "wrong-type-auth-scopes-number",
    "wrong-type-auth-scopes-boolean",
    "wrong-type-auth-scopes-null",
    "wrong-type-auth-scopes-object",
    "malformed-uri-endpoint-url",
    "malformed-uri-endpoint-url-relative",
    "malformed-uri-endpoint-url-space",
    "malformed-uri-endpoint-url-empty",
    "malformed-uri-endpoint-url-placeholder",
    "malformed-uri-endpoint-url-bad-port",
    "malformed-uri-auth-authorization_url",
    "malformed-uri-auth-token_url",
    "bad-protocol-version-major-only",
    "bad-protocol-version-major-minor",
    "bad-protocol-version-words",
    "bad-protocol-version-leading-v",
    "bad-protocol-version-leading-zero",
    "bad-version-major-minor",
    "nested-auth-missing-type",
    "nested-auth-oauth2-without-scopes",
    "nested-auth-oauth2-without-authorization_url",
    "nested-auth-oauth2-bare",
    "nested-auth-scopes-item-number",
    "nested-endpoint-empty",
    "several-chapter-example",
    "several-at-once",
    "several-empty-object",
    "not-an-object-null",
    "not-an-object-string",
    "not-an-object-number",
    "not-an-object-boolean",
    "not-an-object-array",
    "not-an-object-array-of-descriptor",
)


# -- the corpus itself ---------------------------------------------------------------------


def test_the_names_are_pinned() -> None:
    # Consumers' tests may name cases: renaming, adding or removing one is deliberate.
    assert corpus.NAMES == EXPECTED_NAMES


def test_names_are_unique_and_url_safe() -> None:
    assert len(set(IDS)) == len(IDS)
    for name in IDS:
        assert corpus.NAME_PATTERN.fullmatch(name), name
        assert quote(name, safe="") == name, name


def test_the_corpus_is_deterministic() -> None:
    assert corpus.build() == CASES


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_case_expects_what_the_reference_validator_reports(case: CorpusCase) -> None:
    assert list(case.violations) == [v.as_json() for v in validate(case.descriptor)]
    assert all(isinstance(v, dict) for v in case.violations)
    assert case.description.strip()


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_cases_expect_the_chapters_words(name: str) -> None:
    case = corpus.get(name)
    assert case is not None
    assert list(case.violations) == PINNED[name]


def test_every_case_is_invalid_but_the_controls() -> None:
    assert tuple(case.name for case in CASES if case.valid) == VALID


def test_the_unknown_protocol_version_is_well_formed_and_not_one() -> None:
    case = corpus.get("unknown-protocol-version")
    assert case is not None
    assert case.descriptor["protocol_version"] == "99.0.0"
    assert "VERSION_INCOMPATIBLE" in case.description


def test_every_case_starts_from_the_default_with_a_concrete_endpoint() -> None:
    default = corpus.get("valid-default")
    assert default is not None
    assert default.descriptor["endpoint"]["url"] == corpus.ENDPOINT_URL
    placeholders = [c.name for c in CASES if "{base_url}" in json.dumps(c.descriptor)]
    assert placeholders == ["malformed-uri-endpoint-url-placeholder"]


@pytest.mark.parametrize(
    ("prefix", "at_least"),
    [
        ("missing-", 6),
        ("wrong-enum-", 3),
        ("wrong-type-", 50),
        ("malformed-uri-", 3),
        ("bad-protocol-version-", 3),
        ("nested-", 3),
        ("several-", 2),
        ("not-an-object-", 4),
    ],
)
def test_each_family_is_there(prefix: str, at_least: int) -> None:
    family = [case for case in CASES if case.name.startswith(prefix)]
    assert len(family) >= at_least
    assert not any(case.valid for case in family)


def test_several_at_once_reports_them_all() -> None:
    for case in CASES:
        if case.name.startswith("several-"):
            assert len(case.violations) >= 2, case.name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_schema_rejects_exactly_the_invalid_ones(case: CorpusCase) -> None:
    assert SCHEMA_VALIDATOR.is_valid(case.descriptor) == case.valid


def test_a_missing_name_is_none() -> None:
    assert corpus.get("no-such-case") is None


# -- over the wire -------------------------------------------------------------------------


def get(url: str) -> requests.Response:
    return requests.get(url, timeout=10)


def test_the_listing_names_every_case_with_absolute_urls(bundled: Server) -> None:
    response = get(f"{bundled.url}/__admin/corpus")
    assert response.status_code == 200
    listed = response.json()["cases"]
    assert [entry["name"] for entry in listed] == list(corpus.NAMES)
    for entry, case in zip(listed, CASES, strict=True):
        assert entry == {
            "name": case.name,
            "description": case.description,
            "descriptor_url": f"{bundled.url}/__admin/corpus/{case.name}",
            "violations_url": f"{bundled.url}/__admin/corpus/{case.name}/violations",
            "valid": case.valid,
        }


def test_every_case_is_served_exactly(bundled: Server) -> None:
    with requests.Session() as client:
        for case in CASES:
            descriptor = client.get(f"{bundled.url}/__admin/corpus/{case.name}", timeout=10)
            assert descriptor.status_code == 200, case.name
            assert descriptor.headers["Content-Type"] == "application/json", case.name
            assert descriptor.json() == case.descriptor, case.name
            answer = client.get(f"{bundled.url}/__admin/corpus/{case.name}/violations", timeout=10)
            assert answer.status_code == 200, case.name
            assert answer.headers["Content-Type"] == "application/json", case.name
            assert answer.json() == {"violations": list(case.violations)}, case.name


def test_a_served_null_descriptor_is_json_null(bundled: Server) -> None:
    response = get(f"{bundled.url}/__admin/corpus/not-an-object-null")
    assert response.status_code == 200
    assert response.text == "null"


@pytest.mark.parametrize("suffix", ["", "/violations"])
def test_an_unknown_case_is_skill_not_found(bundled: Server, suffix: str) -> None:
    url = f"{bundled.url}/__admin/corpus/missing-endpoint-ur{suffix}"
    response = get(url)
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == "SKILL_NOT_FOUND"
    assert "missing-endpoint-ur" in error["message"]
    assert error["details"]["url"] == url
    assert error["details"]["did_you_mean"][0] == "missing-endpoint-url"


def test_an_unknown_case_with_nothing_near_suggests_nothing(bundled: Server) -> None:
    response = get(f"{bundled.url}/__admin/corpus/zzzzzzzz")
    assert response.status_code == 404
    assert response.json()["error"]["details"]["did_you_mean"] == []


# -- the loop the docs show ----------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "corpus.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_docs_loop_runs_against_a_server() -> None:
    (loop,) = [body for lang, body in FENCE.findall(DOC.read_text()) if lang == "python"]
    assert "Server()" in loop
    assert "from mockskill.protocol.validator import validate" in loop
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(loop, str(DOC), "exec"), namespace)
    assert namespace["checked"] == len(CASES)


def test_the_docs_loop_catches_a_wrong_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    # A validator that stops at the first violation must fail the loop.
    (loop,) = [body for lang, body in FENCE.findall(DOC.read_text()) if lang == "python"]
    import mockskill.protocol.validator

    def first_only(document: Any) -> tuple[Any, ...]:
        return validate(document)[:1]

    first_caught = next(case.name for case in CASES if len(case.violations) > 1)
    monkeypatch.setattr(mockskill.protocol.validator, "validate", first_only)
    with pytest.raises(AssertionError, match=re.escape(first_caught)):
        exec(compile(loop, str(DOC), "exec"), {"__name__": "docs_example"})


def test_the_docs_table_lists_every_case() -> None:
    text = DOC.read_text()
    for name in corpus.NAMES:
        assert f"`{name}`" in text, name
