"""The reference Skill Descriptor validator, and its schema kept in step with it.

The chapter's VALIDATION_ERROR example is checked against its JSON, written
out below from the chapter, not produced by code. Then every rule, case by
case: each table states the violations expected, field by field, in the
chapter's words. Last, ``descriptor.schema.json`` and the validator must agree
on every case: the schema (checked with jsonschema, a test dependency) finds
an error exactly where the validator reports a violation, or at its parent
for a missing field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

import mockskill
from mockskill.protocol import descriptor
from mockskill.protocol.validator import (
    AUTH_TYPES,
    METHODS,
    SEMVER_PATTERN,
    Violation,
    is_semver,
    is_uri,
    pointer,
    validate,
    validation_error,
)

SCHEMA_PATH = Path(mockskill.__file__).resolve().parent / "descriptor.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
SCHEMA_VALIDATOR = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
# jsonschema checks the uri format only with an optional package installed
# (rfc3987 or rfc3986-validator); without one, cases that turn on a URI's
# syntax cannot be compared, and are skipped (with this reason).
URI_FORMAT_CHECKED = "uri" in FormatChecker.checkers
NO_URI_CHECKER = "jsonschema checks no uri format here: install rfc3986-validator"

BASE_URL = "http://127.0.0.1:8080"
REFUSED_BASE_URL = "http://127.0.0.1:1"

# The chapter's words, restated here rather than read back from the module.
CAPABILITIES = "one of: plugin, api, knowledge, task"
METHOD_CHOICES = "one of: GET, POST, PUT, PATCH, DELETE"
AUTH_CHOICES = "one of: none, oauth2, api_key, bearer"
URI = "string (URI format)"
SEMVER = "string (semantic version MAJOR.MINOR.PATCH)"
STRING = "string"
OBJECT = "object"
STRINGS = "array of strings"
MISSING = "Required field is missing"
TYPE = "Invalid type"
ENUM = "Invalid enum value"
BAD_URI = "Invalid URI format"
BAD_VERSION = "Invalid version format"

# The chapter's VALIDATION_ERROR example, as the chapter prints it.
CHAPTER_EXAMPLE = """\
{
  "error": {
    "code": "VALIDATION_ERROR",
    "message": "Skill descriptor validation failed",
    "details": {
      "violations": [
        {
          "field": "/capability_type",
          "expected": "one of: plugin, api, knowledge, task",
          "actual": "unknown_type",
          "message": "Invalid enum value"
        },
        {
          "field": "/endpoint/url",
          "expected": "string (URI format)",
          "actual": null,
          "message": "Required field is missing"
        }
      ]
    }
  }
}"""

Expected = tuple[str, str, Any, str]
"""A violation as the tables write it: (field, expected, actual, message)."""


def served(document: Any) -> Any:
    """*document* as a consumer receives it: placeholders filled, through JSON."""
    text = json.dumps(document)
    text = text.replace("{refused_base_url}", REFUSED_BASE_URL).replace("{base_url}", BASE_URL)
    return json.loads(text)


def found(document: Any) -> list[Expected]:
    return [(v.field, v.expected, v.actual, v.message) for v in validate(document)]


VALID: dict[str, Any] = served(descriptor.default("translate"))
OAUTH2: dict[str, Any] = {
    **VALID,
    "auth": {
        "type": "oauth2",
        "authorization_url": f"{BASE_URL}/oauth/authorize",
        "scopes": ["skill:invoke"],
        "token_url": f"{BASE_URL}/oauth/token",
    },
}
ABSENT: Any = object()
"""As a value for :func:`variant`: remove the field."""


def variant(base: dict[str, Any], where: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of *base* with the field at *where* set to *value* (or removed: ABSENT)."""
    out = copy.deepcopy(base)
    parent: Any = out
    for key in where[:-1]:
        parent = parent[key]
    if value is ABSENT:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return out


def at(where: tuple[str, ...]) -> str:
    return "".join("/" + key for key in where)


# -- the cases: (document, the violations expected) -------------------------------------

Case = tuple[str, Any, list[Expected]]
CASES: list[Case] = [
    ("default", VALID, []),
    ("default-unreachable", served(descriptor.default("nowhere", unreachable=True)), []),
    ("oauth2", OAUTH2, []),
]

# Each required field missing: actual null, expected what it should have been.
REQUIRED: list[tuple[dict[str, Any], tuple[str, ...], str]] = [
    (VALID, ("protocol_version",), SEMVER),
    (VALID, ("id",), STRING),
    (VALID, ("name",), STRING),
    (VALID, ("capability_type",), CAPABILITIES),
    (VALID, ("endpoint",), OBJECT),
    (VALID, ("endpoint", "url"), URI),
    (OAUTH2, ("auth", "type"), AUTH_CHOICES),
    (OAUTH2, ("auth", "authorization_url"), URI),
    (OAUTH2, ("auth", "scopes"), STRINGS),
]
CASES += [
    (f"missing{at(where)}", variant(base, where, ABSENT), [(at(where), expected, None, MISSING)])
    for base, where, expected in REQUIRED
]

# Optional fields may be left out.
OPTIONAL: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    (VALID, ("description",)),
    (VALID, ("version",)),
    (VALID, ("endpoint", "method")),
    (VALID, ("auth",)),
    (OAUTH2, ("auth", "token_url")),
]
CASES += [(f"optional{at(where)}", variant(base, where, ABSENT), []) for base, where in OPTIONAL]
CASES += [
    # authorization_url and scopes are oauth2's: other types need neither.
    (f"auth-{kind}-alone", variant(VALID, ("auth",), {"type": kind}), [])
    for kind in ("none", "api_key", "bearer")
]

# Each enum: the chapter's words whatever the wrong value, even of another type.
ENUMS: list[tuple[dict[str, Any], tuple[str, ...], str, list[Any]]] = [
    (VALID, ("capability_type",), CAPABILITIES, ["unknown_type", "API", "", " api", 3, None]),
    (VALID, ("endpoint", "method"), METHOD_CHOICES, ["post", "HEAD", "OPTIONS", 1, ["POST"]]),
    (VALID, ("auth", "type"), AUTH_CHOICES, ["basic", "OAuth2", "", True, {}]),
]
CASES += [
    (
        f"enum{at(where)}={value!r}",
        variant(base, where, value),
        [(at(where), expected, value, ENUM)],
    )
    for base, where, expected, values in ENUMS
    for value in values
]
CASES += [
    (f"enum{at(where)}={value}", variant(base, where, value), [])
    for base, where, _, values in [
        (VALID, ("capability_type",), "", ("plugin", "api", "knowledge", "task")),
        (VALID, ("endpoint", "method"), "", ("GET", "POST", "PUT", "PATCH", "DELETE")),
        (VALID, ("auth", "type"), "", ("none", "api_key", "bearer")),
    ]
    for value in values
]

# Each field of the wrong type: "Invalid type", expected what the field should be.
NOT_STRINGS: list[Any] = [1, 1.5, True, None, [], {}]
NOT_OBJECTS: list[Any] = ["x", 1, True, None, []]
TYPES: list[tuple[dict[str, Any], tuple[str, ...], str, list[Any]]] = [
    (VALID, ("protocol_version",), SEMVER, [*NOT_STRINGS, 1.0]),
    (VALID, ("id",), STRING, NOT_STRINGS),
    (VALID, ("name",), STRING, NOT_STRINGS),
    (VALID, ("description",), STRING, NOT_STRINGS),
    (VALID, ("version",), SEMVER, NOT_STRINGS),
    (VALID, ("endpoint",), OBJECT, [*NOT_OBJECTS, f"{BASE_URL}/skills/translate/invoke"]),
    (VALID, ("endpoint", "url"), URI, NOT_STRINGS),
    (VALID, ("auth",), OBJECT, [*NOT_OBJECTS, "none"]),
    (OAUTH2, ("auth", "authorization_url"), URI, NOT_STRINGS),
    (OAUTH2, ("auth", "scopes"), STRINGS, ["skill:invoke", 1, None, {}]),
    (OAUTH2, ("auth", "token_url"), URI, NOT_STRINGS),
]
CASES += [
    (
        f"type{at(where)}={value!r}",
        variant(base, where, value),
        [(at(where), expected, value, TYPE)],
    )
    for base, where, expected, values in TYPES
    for value in values
]

# URIs: absolute (a scheme), RFC 3986 syntax, ASCII. The reason says why not.
GOOD_URIS = [
    f"{BASE_URL}/skills/translate/invoke",
    "https://example.com/oauth/authorize",
    "HTTPS://EXAMPLE.COM",
    "http://user:pw@example.com:8443/a/b;c?q=1&r=%20#frag",
    "http://[::1]:8080/invoke",
    "http://[::ffff:192.0.2.1]/",
    "http://[v1.fe]/",
    "http://192.0.2.1/",
    "urn:skill:translate",
    "mailto:skills@example.com",
    "file:///srv/skill",
    "http://example.com/a//b",
    "x-custom+scheme.v1:rest",
]
BAD_URIS = {
    "no scheme": "example.com/invoke",
    "relative path": "/skills/translate/invoke",
    "network-path reference": "//example.com/invoke",
    "empty": "",
    "a space": "http://exa mple.com/",
    "scheme starts with a digit": "1http://example.com",
    "bad percent-encoding": "http://example.com/%zz",
    "truncated percent-encoding": "http://example.com/%4",
    "unclosed IP literal": "http://[::1/",
    "not an IPv6 address": "http://[1::2::3]/",
    "IPv6 zone ID (RFC 6874)": "http://[fe80::1%25eth0]/",
    "port not a number": "http://example.com:http/",
    "two fragments": "http://example.com/#a#b",
    "brackets in a path": "http://example.com/[a]",
    "non-ASCII host (an IRI)": "http://bücher.example/",
    "unfilled placeholder": "{base_url}/skills/translate/invoke",
    "backslash": "http:\\\\example.com\\invoke",
}
URI_FIELDS = [(VALID, ("endpoint", "url")), (OAUTH2, ("auth", "authorization_url"))]
CASES += [
    (f"uri{at(where)}={reason}", variant(base, where, uri), [(at(where), URI, uri, BAD_URI)])
    for base, where in [*URI_FIELDS, (OAUTH2, ("auth", "token_url"))]
    for reason, uri in BAD_URIS.items()
]
CASES += [
    (f"uri{at(where)}={uri}", variant(base, where, uri), [])
    for base, where in URI_FIELDS
    for uri in GOOD_URIS
]

# Semantic versions: SemVer 2.0.0, pre-release and build parts included.
GOOD_VERSIONS = ["0.0.0", "1.0.0", "2.0.0", "10.20.30", "1.0.0-alpha.1", "1.0.0+build.5"]
GOOD_VERSIONS += ["1.0.0-rc.1+sha.5114f85", "1.0.0-0.3.7", "1.0.0-x-y-z.--"]
BAD_VERSIONS = {
    "two parts": "1.0",
    "one part": "1",
    "four parts": "1.0.0.0",
    "a v prefix": "v1.0.0",
    "leading zero": "01.0.0",
    "wildcards": "1.x.x",
    "empty": "",
    "leading space": " 1.0.0",
    "empty pre-release": "1.0.0-",
    "empty build": "1.0.0+",
    "numeric pre-release with a leading zero": "1.0.0-01",
    "non-ASCII digits": "\u0661.\u0660.\u0660",  # Arabic-Indic 1.0.0
    "negative": "-1.0.0",
}
VERSION_FIELDS = [("protocol_version",), ("version",)]
CASES += [
    (f"semver{at(where)}={reason}", variant(VALID, where, v), [(at(where), SEMVER, v, BAD_VERSION)])
    for where in VERSION_FIELDS
    for reason, v in BAD_VERSIONS.items()
]
CASES += [
    (f"semver{at(where)}={v}", variant(VALID, where, v), [])
    for where in VERSION_FIELDS
    for v in GOOD_VERSIONS
]

# Nested mistakes, and several at once: all of them, in the schema's order.
CASES += [
    (
        "nested/endpoint-empty",
        variant(VALID, ("endpoint",), {}),
        [("/endpoint/url", URI, None, MISSING)],
    ),
    (
        "nested/auth-empty",
        variant(VALID, ("auth",), {}),
        [("/auth/type", AUTH_CHOICES, None, MISSING)],
    ),
    (
        "nested/oauth2-alone",
        variant(VALID, ("auth",), {"type": "oauth2"}),
        [
            ("/auth/authorization_url", URI, None, MISSING),
            ("/auth/scopes", STRINGS, None, MISSING),
        ],
    ),
    (
        "nested/scopes-items",
        variant(OAUTH2, ("auth", "scopes"), ["skill:invoke", 2, None, "skill:admin", ["x"]]),
        [
            ("/auth/scopes/1", STRING, 2, TYPE),
            ("/auth/scopes/2", STRING, None, TYPE),
            ("/auth/scopes/4", STRING, ["x"], TYPE),
        ],
    ),
    ("nested/scopes-empty", variant(OAUTH2, ("auth", "scopes"), []), []),
    (
        # Outside oauth2 the oauth2 fields are not required, but still checked.
        "nested/api_key-with-a-bad-url",
        variant(VALID, ("auth",), {"type": "api_key", "token_url": "nowhere"}),
        [("/auth/token_url", URI, "nowhere", BAD_URI)],
    ),
    (
        "nested/unknown-auth-type-with-oauth2-fields-missing",
        variant(VALID, ("auth",), {"type": "basic"}),
        [("/auth/type", AUTH_CHOICES, "basic", ENUM)],
    ),
    (
        "nested/oauth2-all-wrong",
        variant(
            VALID,
            ("auth",),
            {"type": "oauth2", "authorization_url": "/authorize", "scopes": "a b", "token_url": 1},
        ),
        [
            ("/auth/authorization_url", URI, "/authorize", BAD_URI),
            ("/auth/scopes", STRINGS, "a b", TYPE),
            ("/auth/token_url", URI, 1, TYPE),
        ],
    ),
    (
        "several/everything-missing",
        {},
        [
            ("/protocol_version", SEMVER, None, MISSING),
            ("/id", STRING, None, MISSING),
            ("/name", STRING, None, MISSING),
            ("/capability_type", CAPABILITIES, None, MISSING),
            ("/endpoint", OBJECT, None, MISSING),
        ],
    ),
    (
        "several/everything-wrong",
        {
            "auth": {"scopes": [1], "type": "oauth2"},
            "endpoint": {"method": "post", "url": "invoke"},
            "capability_type": "tool",
            "version": "1.0",
            "description": 1,
            "name": None,
            "id": 42,
            "protocol_version": 1,
        },
        [
            ("/protocol_version", SEMVER, 1, TYPE),
            ("/id", STRING, 42, TYPE),
            ("/name", STRING, None, TYPE),
            ("/description", STRING, 1, TYPE),
            ("/version", SEMVER, "1.0", BAD_VERSION),
            ("/capability_type", CAPABILITIES, "tool", ENUM),
            ("/endpoint/url", URI, "invoke", BAD_URI),
            ("/endpoint/method", METHOD_CHOICES, "post", ENUM),
            ("/auth/authorization_url", URI, None, MISSING),
            ("/auth/scopes/0", STRING, 1, TYPE),
        ],
    ),
    (
        "several/the-chapters-pair-and-more",
        variant(
            variant(descriptor.chapter_invalid("translate"), ("id",), ABSENT),
            ("protocol_version",),
            "2",
        ),
        [
            ("/protocol_version", SEMVER, "2", BAD_VERSION),
            ("/id", STRING, None, MISSING),
            ("/capability_type", CAPABILITIES, "unknown_type", ENUM),
            ("/endpoint/url", URI, None, MISSING),
        ],
    ),
    (
        # Descriptors may carry more than the schema knows, at any level.
        "extra-fields",
        {
            **variant(OAUTH2, ("endpoint", "timeout_ms"), 1000),
            "tags": ["x"],
            "x~odd/key": None,
            "auth": {**OAUTH2["auth"], "audience": "skills"},
        },
        [],
    ),
]

# Not an object at all: one violation, at the root.
CASES += [
    (f"root={value!r}", value, [("", OBJECT, value, TYPE)])
    for value in [[], ["this", "is", "not", "a", "descriptor"], "translate", 1, 1.5, True, None]
]

CASE_IDS = [case_id for case_id, _, _ in CASES]
CASE_DOCUMENTS = {case_id: document for case_id, document, _ in CASES}


def test_case_ids_are_unique() -> None:
    assert len(set(CASE_IDS)) == len(CASE_IDS)


@pytest.mark.parametrize(("document", "expected"), [c[1:] for c in CASES], ids=CASE_IDS)
def test_each_case_reports_exactly_its_violations(document: Any, expected: list[Expected]) -> None:
    assert found(document) == expected


# -- the chapter's example ---------------------------------------------------------------


def test_the_chapters_example_gives_the_chapters_body() -> None:
    body = validation_error(validate(descriptor.chapter_invalid("translate")))
    assert body == json.loads(CHAPTER_EXAMPLE)
    # Key order too, as the chapter prints it.
    assert json.dumps(body, indent=2) == CHAPTER_EXAMPLE


def test_the_chapters_example_served_gives_the_same_body() -> None:
    body = validation_error(validate(served(descriptor.chapter_invalid("translate"))))
    assert body == json.loads(CHAPTER_EXAMPLE)


# -- the descriptors mockskill serves ----------------------------------------------------


@pytest.mark.parametrize("skill_id", ["translate", "web-search", "a_b.c~d"])
@pytest.mark.parametrize("unreachable", [False, True], ids=["reachable", "unreachable"])
def test_the_default_descriptor_is_valid(skill_id: str, unreachable: bool) -> None:
    assert validate(served(descriptor.default(skill_id, unreachable=unreachable))) == ()


def test_a_descriptor_with_its_placeholder_unfilled_has_no_valid_uri() -> None:
    # {base_url} is filled per request: what a consumer checks never has it.
    assert found(descriptor.default("translate")) == [
        ("/endpoint/url", URI, "{base_url}/skills/translate/invoke", BAD_URI)
    ]


def bundled_descriptors() -> Iterator[tuple[str, bool, Any]]:
    """(skill id, served raw?, descriptor as served) for every bundled skill."""
    for skill in mockskill.load_paths([mockskill.bundled_path()]).skills:
        text = skill.descriptor.replace(b"{refused_base_url}", REFUSED_BASE_URL.encode())
        text = text.replace(b"{base_url}", BASE_URL.encode())
        yield skill.id, skill.raw, json.loads(text)


BUNDLED = list(bundled_descriptors())


def test_there_are_bundled_descriptors() -> None:
    ids = {skill_id for skill_id, _, _ in BUNDLED}
    assert {"translate", "auth-required", "invalid-descriptor"} <= ids


@pytest.mark.parametrize(
    ("skill_id", "raw", "document"), BUNDLED, ids=[skill_id for skill_id, _, _ in BUNDLED]
)
def test_every_bundled_descriptor_is_valid_but_the_invalid_ones(
    skill_id: str, raw: bool, document: Any
) -> None:
    violations = validate(document)
    if skill_id == "invalid-descriptor":
        body = validation_error(violations)
        assert body["error"]["details"] == json.loads(CHAPTER_EXAMPLE)["error"]["details"]
    elif raw:
        # Served as scripted: it may be broken on purpose; checking it must not fail.
        assert all(isinstance(v, Violation) for v in violations)
    else:
        assert violations == ()


# -- the rules' parts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ((), ""),
        (("endpoint", "url"), "/endpoint/url"),
        (("auth", "scopes", 0), "/auth/scopes/0"),
        (("a/b",), "/a~1b"),
        (("m~n",), "/m~0n"),
        (("~/",), "/~0~1"),
        (("~1",), "/~01"),
        (("",), "/"),
        ((" ",), "/ "),
    ],
    ids=repr,
)
def test_pointers_are_rfc_6901(tokens: tuple[str | int, ...], expected: str) -> None:
    assert pointer(*tokens) == expected


@pytest.mark.parametrize("uri", GOOD_URIS)
def test_good_uris(uri: str) -> None:
    assert is_uri(uri)


@pytest.mark.parametrize("uri", list(BAD_URIS.values()), ids=list(BAD_URIS))
def test_bad_uris(uri: str) -> None:
    assert not is_uri(uri)


@pytest.mark.parametrize("version", GOOD_VERSIONS)
def test_good_versions(version: str) -> None:
    assert is_semver(version)


@pytest.mark.parametrize("version", list(BAD_VERSIONS.values()), ids=list(BAD_VERSIONS))
def test_bad_versions(version: str) -> None:
    assert not is_semver(version)


def test_a_final_newline_is_not_part_of_a_uri_or_a_version() -> None:
    # Python's "$" matches before a final newline; ECMA-262's does not, and
    # neither does the validator (jsonschema's Python regexes would let these
    # through, so they are tested here, not in the agreement below).
    assert not is_uri(f"{BASE_URL}/invoke\n")
    assert not is_semver("1.0.0\n")
    assert found(variant(VALID, ("version",), "1.0.0\n")) == [
        ("/version", SEMVER, "1.0.0\n", BAD_VERSION)
    ]


def test_a_violation_is_frozen_and_keeps_the_chapters_key_order() -> None:
    violation = Violation("/endpoint/url", URI, None, MISSING)
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.field = "/x"  # type: ignore[misc]
    assert list(violation.as_json()) == ["field", "expected", "actual", "message"]


def test_a_violation_keeps_the_value_it_found() -> None:
    document = variant(VALID, ("endpoint",), ["a"])
    (violation,) = validate(document)
    document["endpoint"].append("b")
    assert violation.actual == ["a"]


def test_validate_does_not_change_the_descriptor() -> None:
    document = copy.deepcopy(CASE_DOCUMENTS["several/everything-wrong"])
    before = copy.deepcopy(document)
    validate(document)
    assert document == before


def test_the_validation_error_body_is_unified_json_without_retry() -> None:
    body = validation_error(iter(validate({})))
    assert json.loads(json.dumps(body)) == body
    assert list(body) == ["error"]
    assert list(body["error"]) == ["code", "message", "details"]  # not retryable: no advice
    assert len(body["error"]["details"]["violations"]) == 5


def test_no_violations_is_no_validation_error() -> None:
    with pytest.raises(ValueError, match="no violations"):
        validation_error(validate(VALID))


# -- the schema file, in step with the validator --------------------------------------------


def test_the_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"].endswith("descriptor.schema.json")
    assert SCHEMA["additionalProperties"] is True


def schema_properties(schema: dict[str, Any], where: str = "") -> Iterator[tuple[str, Any]]:
    """(pointer, subschema) of every property the schema names, in its order."""
    for name, sub in schema.get("properties", {}).items():
        yield f"{where}/{name}", sub
        yield from schema_properties(sub, f"{where}/{name}")


SCHEMA_FIELDS = list(schema_properties(SCHEMA))


@pytest.mark.parametrize(("where", "sub"), SCHEMA_FIELDS, ids=[w for w, _ in SCHEMA_FIELDS])
def test_every_field_is_described(where: str, sub: dict[str, Any]) -> None:
    assert len(sub.get("description", "")) > 20, where


def test_the_inferences_are_marked() -> None:
    # Even the chapter's own fields leave something to infer (whether one is
    # required, which schemes a URL may have): every description says what.
    for where, sub in SCHEMA_FIELDS:
        assert "Inferred" in sub["description"], where


def test_the_schema_has_the_validators_constants() -> None:
    props = SCHEMA["properties"]
    assert props["capability_type"]["enum"] == list(descriptor.CAPABILITY_TYPES)
    assert props["endpoint"]["properties"]["method"]["enum"] == list(METHODS)
    assert props["auth"]["properties"]["type"]["enum"] == list(AUTH_TYPES)
    assert SCHEMA["$defs"]["semver"]["pattern"] == SEMVER_PATTERN
    assert SCHEMA["$defs"]["uri"]["format"] == "uri"


def test_violations_come_in_the_schemas_field_order() -> None:
    # A document where every field the schema names is wrong (all of them
    # objects, which no field but the objects takes), walked in key order
    # opposite to the schema's: the violations still follow the schema.
    wrong: dict[str, Any] = {
        "auth": {"token_url": {}, "scopes": {}, "authorization_url": {}, "type": {}},
        "endpoint": {"method": {}, "url": {}},
    }
    for name in reversed(list(SCHEMA["properties"])):
        wrong.setdefault(name, {})
    reported = [v.field for v in validate(wrong)]
    leaves = [w for w, sub in SCHEMA_FIELDS if "properties" not in sub]
    assert reported == leaves


def schema_pointers(document: Any) -> set[str]:
    """Where the schema finds errors (a missing field at its own pointer, as the validator)."""
    pointers: set[str] = set()
    for error in SCHEMA_VALIDATOR.iter_errors(document):
        where = pointer(*error.absolute_path)
        if error.validator == "required":
            pointers |= {
                f"{where}{pointer(name)}"
                for name in error.validator_value
                if name not in error.instance
            }
        else:
            pointers.add(where)
    return pointers


@pytest.mark.parametrize(("document", "expected"), [c[1:] for c in CASES], ids=CASE_IDS)
def test_the_schema_agrees_with_the_validator(document: Any, expected: list[Expected]) -> None:
    violations = validate(document)
    if not URI_FORMAT_CHECKED and any(v.message == BAD_URI for v in violations):
        pytest.skip(NO_URI_CHECKER)
    assert SCHEMA_VALIDATOR.is_valid(document) == (violations == ())
    assert schema_pointers(document) == {v.field for v in violations}


@pytest.mark.parametrize("uri", [*GOOD_URIS, *BAD_URIS.values()], ids=[*GOOD_URIS, *BAD_URIS])
def test_the_uri_format_agrees_with_jsonschemas(uri: str) -> None:
    if not URI_FORMAT_CHECKED:
        pytest.skip(NO_URI_CHECKER)
    assert FormatChecker().conforms(uri, "uri") == is_uri(uri)
