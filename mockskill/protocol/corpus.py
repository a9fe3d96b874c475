"""The corpus of invalid Skill Descriptors: every way to break the valid default, with its answer.

This module owns the corpus: a deterministic tuple of :class:`CorpusCase`, each a
descriptor (any JSON value) beside the violations that a correct validator
must report for it (the entries of ``VALIDATION_ERROR``'s
``details.violations``, as :func:`mockskill.protocol.validator.validate` reports them).
The admin blueprint serves it under ``/__admin/corpus`` so that a consumer can
run its own validator over every case in a loop (``docs/corpus.md``).

Every case is built from ``descriptor.default("corpus")`` with a concrete
endpoint URL (:data:`ENDPOINT_URL`), so that no case depends on the address of
the server that serves it. The families, in order:

- ``valid-*`` and ``unknown-protocol-version``: controls that a validator must
  accept (a validator that is too strict fails these);
- ``missing-*``: each required field left out;
- ``wrong-enum-*``: each enum field given a value outside it;
- ``wrong-type-*``: each field given each JSON type that it is not;
- ``malformed-uri-*``: URIs that are not absolute RFC 3986 URIs;
- ``bad-*version-*``: versions that are not MAJOR.MINOR.PATCH;
- ``nested-*``: mistakes inside ``auth`` that only a nested rule catches;
- ``several-*``: several mistakes at once (a validator must report them all);
- ``not-an-object-*``: a descriptor that is not a JSON object at all.

CorpusCase names are stable (tests pin the full list): a consumer's test may name
them. Renaming one is a deliberate, breaking act.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import descriptor as _descriptor
from .validator import validate

SKILL_ID = "corpus"
ENDPOINT_URL = "https://skills.example/corpus/invoke"
"""The endpoint of every case that has one: concrete, so no ``{base_url}`` to fill in."""

NAME_PATTERN = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
"""What a case name looks like: lower case, digits, ``-`` and ``_`` (URL-safe as it is)."""


@dataclass(frozen=True)
class CorpusCase:
    """One descriptor of the corpus, and what a correct validator reports for it."""

    name: str
    """Stable and URL-safe, e.g. ``missing-endpoint-url``; the last part of its URLs."""
    description: str
    """What is wrong with it (or, for a control, why it is valid)."""
    descriptor: Any
    """The descriptor: any JSON value (most are objects; the ``not-an-object-*`` are not)."""
    violations: tuple[dict[str, Any], ...]
    """``{field, expected, actual, message}`` each, in the reference validator's order."""

    @property
    def valid(self) -> bool:
        """Whether a correct validator accepts it (no violations)."""
        return not self.violations


def base() -> dict[str, Any]:
    """The valid default every case starts from (a fresh copy)."""
    return _descriptor.merge(_descriptor.default(SKILL_ID), {"endpoint": {"url": ENDPOINT_URL}})


def oauth2_base() -> dict[str, Any]:
    """The default with a complete, valid oauth2 auth section (for the auth cases)."""
    return _descriptor.merge(
        base(),
        {
            "auth": {
                "type": "oauth2",
                "authorization_url": "https://skills.example/oauth/authorize",
                "scopes": ["skill:invoke"],
                "token_url": "https://skills.example/oauth/token",
            }
        },
    )


# -- editing a descriptor at a path --------------------------------------------------------

_Path = tuple[str, ...]
_ABSENT = object()


def _with(document: dict[str, Any], path: _Path, value: Any) -> dict[str, Any]:
    """A copy of *document* with *path* set to *value* (or removed, for ``_ABSENT``)."""
    out = copy.deepcopy(document)
    owner = out
    for key in path[:-1]:
        owner = owner[key]
    if value is _ABSENT:
        del owner[path[-1]]
    else:
        owner[path[-1]] = copy.deepcopy(value)
    return out


def _slug(path: _Path) -> str:
    return "-".join(path)


def _dotted(path: _Path) -> str:
    return ".".join(path)


def _get(document: Mapping[str, Any], path: _Path) -> Any:
    value: Any = document
    for key in path:
        value = value[key]
    return value


# -- the families ------------------------------------------------------------------------

_Spec = tuple[str, str, Any]
"""(name, description, descriptor): a case before its violations are computed."""

REQUIRED: tuple[_Path, ...] = (
    ("protocol_version",),
    ("id",),
    ("name",),
    ("capability_type",),
    ("endpoint",),
    ("endpoint", "url"),
)
"""Every field the validator requires unconditionally (``auth.type`` is in ``nested-*``)."""

ENUMS: tuple[tuple[_Path, str, str], ...] = (
    (("capability_type",), "unknown_type", "the error chapter's own example"),
    (("endpoint", "method"), "post", "methods are upper case, as HTTP spells them"),
    (("auth", "type"), "basic", "not one of none, oauth2, api_key, bearer"),
)

STRING_FIELDS: tuple[_Path, ...] = (
    ("protocol_version",),
    ("id",),
    ("name",),
    ("description",),
    ("version",),
    ("capability_type",),
    ("endpoint", "url"),
    ("endpoint", "method"),
    ("auth", "type"),
)
"""String fields of the default descriptor."""
OAUTH2_STRING_FIELDS: tuple[_Path, ...] = (
    ("auth", "authorization_url"),
    ("auth", "token_url"),
)
"""String fields that only an oauth2 auth section has (cases start from :func:`oauth2_base`)."""
OBJECT_FIELDS: tuple[_Path, ...] = (("endpoint",), ("auth",))
ARRAY_FIELDS: tuple[_Path, ...] = (("auth", "scopes"),)
"""Array fields (oauth2 only)."""

WRONG_VALUES: Mapping[str, Any] = {
    "string": "not-an-object",
    "number": 42,
    "boolean": True,
    "null": None,
    "array": ["x"],
    "object": {"value": "x"},
}
"""One value of each JSON type; a field is given each one that is not its own type."""

MALFORMED_URIS: tuple[tuple[str, str, str], ...] = (
    ("", "skills.example/corpus/invoke", "no scheme"),
    ("relative", "/corpus/invoke", "a relative reference, not an absolute URI"),
    ("space", "https://skills.example/corpus invoke", "an unencoded space"),
    ("empty", "", "an empty string"),
    ("placeholder", "{base_url}/skills/corpus/invoke", "mockskill's placeholder left unfilled"),
    ("bad-port", "https://skills.example:http/corpus/invoke", "a port that is not a number"),
)

BAD_VERSIONS: tuple[tuple[str, str, str], ...] = (
    ("major-only", "2", "MAJOR only"),
    ("major-minor", "1.0", "MAJOR.MINOR, no PATCH"),
    ("words", "one.two.three", "words, not numbers"),
    ("leading-v", "v1.0.0", "a leading v (not part of SemVer)"),
    ("leading-zero", "01.0.0", "a leading zero (SemVer forbids it)"),
)


def _controls() -> Iterator[_Spec]:
    yield "valid-default", "Control: mockskill's valid default descriptor.", base()
    minimal = {k: v for k, v in base().items() if k in ("protocol_version", "id", "name")}
    minimal.update(capability_type="api", endpoint={"url": ENDPOINT_URL})
    yield (
        "valid-minimal",
        "Control: only the required fields (no description, version, endpoint.method or auth).",
        minimal,
    )
    yield (
        "valid-oauth2",
        "Control: a complete oauth2 auth section (authorization_url, scopes, token_url).",
        oauth2_base(),
    )
    extra = _descriptor.merge(
        oauth2_base(),
        {"x_vendor": {"tier": "gold"}, "endpoint": {"timeout_ms": 30000}, "auth": {"realm": "x"}},
    )
    yield (
        "valid-extra-fields",
        "Control: unknown fields at every level are allowed (a validator must not reject them).",
        extra,
    )
    yield (
        "unknown-protocol-version",
        "Control for VALIDATION_ERROR, trigger for VERSION_INCOMPATIBLE: protocol_version "
        "99.0.0 is a well-formed semantic version, so the reference validator reports no "
        "violation (it checks the format, not which versions a consumer supports). A 1.x "
        "consumer must refuse it with VERSION_INCOMPATIBLE, not VALIDATION_ERROR.",
        _with(base(), ("protocol_version",), "99.0.0"),
    )


def _missing() -> Iterator[_Spec]:
    for path in REQUIRED:
        yield (
            f"missing-{_slug(path)}",
            f"The required field {_dotted(path)} is missing.",
            _with(base(), path, _ABSENT),
        )


def _wrong_enums() -> Iterator[_Spec]:
    for path, value, why in ENUMS:
        yield (
            f"wrong-enum-{_slug(path)}",
            f"{_dotted(path)} is {value!r}: {why}.",
            _with(base(), path, value),
        )


def _wrong_types() -> Iterator[_Spec]:
    fields: list[tuple[_Path, str, Callable[[], dict[str, Any]]]] = [
        *((path, "string", base) for path in STRING_FIELDS),
        *((path, "string", oauth2_base) for path in OAUTH2_STRING_FIELDS),
        *((path, "object", base) for path in OBJECT_FIELDS),
        *((path, "array", oauth2_base) for path in ARRAY_FIELDS),
    ]
    for path, own, start in fields:
        for kind, value in WRONG_VALUES.items():
            if kind == own:
                continue
            yield (
                f"wrong-type-{_slug(path)}-{kind}",
                f"{_dotted(path)} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                f"({_json(value)}), not {'an' if own[0] in 'aeiou' else 'a'} {own}.",
                _with(start(), path, value),
            )


def _malformed_uris() -> Iterator[_Spec]:
    for suffix, value, why in MALFORMED_URIS:
        yield (
            "malformed-uri-endpoint-url" + (f"-{suffix}" if suffix else ""),
            f"endpoint.url is {value!r}: {why}.",
            _with(base(), ("endpoint", "url"), value),
        )
    for path in OAUTH2_STRING_FIELDS:
        value = "oauth/authorize"
        yield (
            f"malformed-uri-{_slug(path)}",
            f"{_dotted(path)} of an oauth2 auth section is {value!r}: no scheme.",
            _with(oauth2_base(), path, value),
        )


def _bad_versions() -> Iterator[_Spec]:
    for suffix, value, why in BAD_VERSIONS:
        yield (
            f"bad-protocol-version-{suffix}",
            f"protocol_version is {value!r}: {why}; a semantic version is MAJOR.MINOR.PATCH.",
            _with(base(), ("protocol_version",), value),
        )
    yield (
        "bad-version-major-minor",
        "version (the skill's own) is '1.0': MAJOR.MINOR, no PATCH.",
        _with(base(), ("version",), "1.0"),
    )


def _nested() -> Iterator[_Spec]:
    yield (
        "nested-auth-missing-type",
        "auth is present but empty: its type is required.",
        _with(base(), ("auth",), {}),
    )
    yield (
        "nested-auth-oauth2-without-scopes",
        "auth.type is oauth2, which requires scopes; they are missing.",
        _with(oauth2_base(), ("auth", "scopes"), _ABSENT),
    )
    yield (
        "nested-auth-oauth2-without-authorization_url",
        "auth.type is oauth2, which requires authorization_url; it is missing.",
        _with(oauth2_base(), ("auth", "authorization_url"), _ABSENT),
    )
    yield (
        "nested-auth-oauth2-bare",
        "auth is only {type: oauth2}: both authorization_url and scopes are missing.",
        _with(base(), ("auth",), {"type": "oauth2"}),
    )
    yield (
        "nested-auth-scopes-item-number",
        "auth.scopes is an array, but its second item is a number.",
        _with(oauth2_base(), ("auth", "scopes"), ["skill:invoke", 7]),
    )
    yield (
        "nested-endpoint-empty",
        "endpoint is an empty object: its url is missing.",
        _with(base(), ("endpoint",), {}),
    )


def _several() -> Iterator[_Spec]:
    yield (
        "several-chapter-example",
        "The error chapter's own example: capability_type 'unknown_type' and no endpoint.url.",
        _descriptor.merge(base(), {"capability_type": "unknown_type", "endpoint": {"url": None}}),
    )
    yield (
        "several-at-once",
        "Five mistakes, top level and nested: a bad protocol_version, no id, a wrong "
        "capability_type, a malformed endpoint.url and an oauth2 auth section without scopes.",
        _descriptor.merge(
            oauth2_base(),
            {
                "protocol_version": "1.0",
                "id": None,
                "capability_type": "API",
                "endpoint": {"url": "not a uri"},
                "auth": {"scopes": None},
            },
        ),
    )
    yield (
        "several-empty-object",
        "An empty object: every required top-level field is missing.",
        {},
    )


def _not_objects() -> Iterator[_Spec]:
    roots: tuple[tuple[str, Any, str], ...] = (
        ("null", None, "JSON null"),
        ("string", "corpus", "a string"),
        ("number", 1, "a number"),
        ("boolean", False, "a boolean"),
        ("array", [], "an empty array"),
        ("array-of-descriptor", [base()], "an array holding a valid descriptor"),
    )
    for suffix, value, what in roots:
        yield (
            f"not-an-object-{suffix}",
            f"The descriptor is {what}, not an object (the violation's field is '', the root).",
            value,
        )


def _json(value: Any) -> str:
    return json.dumps(value)


FAMILIES: tuple[Callable[[], Iterator[_Spec]], ...] = (
    _controls,
    _missing,
    _wrong_enums,
    _wrong_types,
    _malformed_uris,
    _bad_versions,
    _nested,
    _several,
    _not_objects,
)


def build() -> tuple[CorpusCase, ...]:
    """The corpus, built afresh: same cases, same order, every time."""
    cases = tuple(
        CorpusCase(name, description, document, tuple(v.as_json() for v in validate(document)))
        for family in FAMILIES
        for name, description, document in family()
    )
    names = [case.name for case in cases]
    if len(set(names)) != len(names):  # pragma: no cover - a programming error
        raise AssertionError("corpus case names are not unique")
    return cases


CASES: tuple[CorpusCase, ...] = build()
"""The corpus. Treat descriptors as read-only: serve or copy them, do not change them."""
_BY_NAME: Mapping[str, CorpusCase] = {case.name: case for case in CASES}
NAMES: tuple[str, ...] = tuple(_BY_NAME)


def get(name: str) -> CorpusCase | None:
    """The case called *name*, or None."""
    return _BY_NAME.get(name)
