"""The reference Skill Descriptor validator: every violation, as the chapter reports them.

This module owns the rules a Skill Descriptor must follow and the
``VALIDATION_ERROR`` body that reports their violations. The error chapter
asks for *every* violating field (not just the first), each as a JSON Pointer
with what was expected, what was found (``null`` when missing) and a short
message; where the chapter gives words (``one of: plugin, api, knowledge,
task``, ``string (URI format)``, ``Invalid enum value``, ``Required field is
missing``) they are used as given.

The chapter does not define the descriptor's full schema; the rules here are
the documented inference also published, for people and tools, as
``descriptor.schema.json`` beside this module (each inference is explained in
its descriptions). The two are written separately — jsonschema is not a
runtime dependency — and ``tests/protocol/test_validator.py`` proves that they agree.

Every field has one ``expected`` text, whatever went wrong with it: the
message says what went wrong (missing, wrong type, bad format, not in the
enum). Violations come in the schema's field order, nested fields where their
parent stands.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import CATEGORIES, unified_body
from .descriptor import CAPABILITY_TYPES

METHODS: tuple[str, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""``endpoint.method`` (inferred: the methods a JSON invocation may use)."""
AUTH_TYPES: tuple[str, ...] = ("none", "oauth2", "api_key", "bearer")
"""``auth.type`` (inferred: ``oauth2`` is the chapter's; the rest are common schemes)."""

MISSING = "Required field is missing"
INVALID_TYPE = "Invalid type"
INVALID_ENUM = "Invalid enum value"
INVALID_URI = "Invalid URI format"
INVALID_VERSION = "Invalid version format"

STRING = "string"
OBJECT = "object"
URI = "string (URI format)"
SEMVER = "string (semantic version MAJOR.MINOR.PATCH)"
ARRAY_OF_STRINGS = "array of strings"

SEMVER_PATTERN = (
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$(?![\s\S])"
)
"""SemVer 2.0.0 (semver.org's own expression), as ``descriptor.schema.json`` states it.

``[0-9]`` rather than ``\\d`` because Python's ``\\d`` also matches non-ASCII
digits; ``$(?![\\s\\S])`` rather than a bare ``$`` because Python's ``$`` also
matches before a final newline, which ECMA-262 (the schema's regex dialect)
does not: written this way, both dialects accept exactly the same strings.
"""
_SEMVER = re.compile(SEMVER_PATTERN)

# RFC 3986, section 3 and appendix A: an absolute URI (a scheme is required),
# which is what JSON Schema's "uri" format means. ASCII only: an IRI with
# unencoded non-ASCII characters is not a URI.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT_ENCODED = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT_ENCODED})"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT_ENCODED})*"
# An IPv4 address is also a reg-name, so a host is an IP literal or a reg-name;
# what is inside the brackets is checked apart (see _is_ip_literal).
_HOST = rf"(?:\[(?P<ip_literal>[^\]]*)\]|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT_ENCODED})*)"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_HIER_PART = (
    rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*"  # "//" authority path-abempty
    rf"|/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"  # path-absolute
    rf"|{_SEGMENT_NZ}(?:/{_SEGMENT})*"  # path-rootless
    r"|)"  # path-empty
)
_QUERY_OR_FRAGMENT = rf"(?:{_PCHAR}|[/?])*"
_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+\-.]*:{_HIER_PART}(?:\?{_QUERY_OR_FRAGMENT})?(?:#{_QUERY_OR_FRAGMENT})?"
)
_IP_FUTURE = rf"v[0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+"  # compiled by re on first use


def is_uri(value: str) -> bool:
    """Whether *value* is an absolute URI (RFC 3986), as JSON Schema's ``uri`` format means."""
    match = _URI.fullmatch(value)
    if match is None:
        return False
    literal = match.group("ip_literal")
    return literal is None or _is_ip_literal(literal)


def _is_ip_literal(text: str) -> bool:
    if re.fullmatch(_IP_FUTURE, text):
        return True
    if "%" in text:  # a zone ID is RFC 6874's, not RFC 3986's; Python would accept it
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def is_semver(value: str) -> bool:
    """Whether *value* is a semantic version (SemVer 2.0.0: MAJOR.MINOR.PATCH[-pre][+build])."""
    return _SEMVER.match(value) is not None


def one_of(choices: Iterable[str]) -> str:
    """The chapter's ``expected`` text for an enum: ``one of: plugin, api, knowledge, task``."""
    return "one of: " + ", ".join(choices)


def pointer(*tokens: str | int) -> str:
    """The JSON Pointer (RFC 6901) of *tokens* from the root; ``""`` is the root itself."""
    return "".join("/" + _escape(token) for token in tokens)


def _escape(token: str | int) -> str:
    # RFC 6901 section 3: "~" first, or the "~1" made for "/" would become "~01".
    return str(token).replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Violation:
    """One violating field, as an entry of ``details.violations``."""

    field: str
    """Where: a JSON Pointer (``/endpoint/url``; ``""`` for the descriptor itself)."""
    expected: str
    """What the field should be (``string (URI format)``, ``one of: ...``)."""
    actual: Any
    """The value found; None (JSON null) when the field is missing."""
    message: str
    """What is wrong (``Required field is missing``, ``Invalid enum value`` ...)."""

    def as_json(self) -> dict[str, Any]:
        """The entry, keys in the chapter's order."""
        return {
            "field": self.field,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
        }


# -- the rules, as a small tree walked in the schema's order ---------------------

_Found = list[Violation]
_Walk = Callable[[_Found, str, Any], None]
"""Checks a present value at a pointer, adding what is wrong with it to the list."""


@dataclass(frozen=True)
class _Kind:
    """What a field must be: its ``expected`` text, and how a present value is checked."""

    expected: str
    walk: _Walk


@dataclass(frozen=True)
class _Field:
    """A field of a descriptor object: its name, its kind, and whether it is required."""

    name: str
    kind: _Kind
    required: bool | Callable[[Mapping[str, Any]], bool] = False
    """True, False, or whether it is required in this object (the oauth2 fields)."""

    def is_required(self, owner: Mapping[str, Any]) -> bool:
        return self.required if isinstance(self.required, bool) else self.required(owner)


def _report(found: _Found, where: str, expected: str, actual: Any, message: str) -> None:
    # A copy, so that a violation does not change when the caller's document does.
    found.append(Violation(where, expected, copy.deepcopy(actual), message))


def _string(expected: str = STRING, *, check: Callable[[str], str | None] | None = None) -> _Kind:
    """A string; *check* returns the message for a string that is still wrong."""

    def walk(found: _Found, where: str, value: Any) -> None:
        if not isinstance(value, str):
            _report(found, where, expected, value, INVALID_TYPE)
        elif check is not None and (message := check(value)) is not None:
            _report(found, where, expected, value, message)

    return _Kind(expected, walk)


def _uri() -> _Kind:
    return _string(URI, check=lambda value: None if is_uri(value) else INVALID_URI)


def _semver() -> _Kind:
    return _string(SEMVER, check=lambda value: None if is_semver(value) else INVALID_VERSION)


def _enum(choices: Sequence[str]) -> _Kind:
    expected = one_of(choices)

    def walk(found: _Found, where: str, value: Any) -> None:
        # A value of another type is not one of the choices either: one
        # violation, with the chapter's enum wording, rather than two.
        if not (isinstance(value, str) and value in choices):
            _report(found, where, expected, value, INVALID_ENUM)

    return _Kind(expected, walk)


def _array_of(item: _Kind, expected: str) -> _Kind:
    def walk(found: _Found, where: str, value: Any) -> None:
        if not isinstance(value, list):
            _report(found, where, expected, value, INVALID_TYPE)
            return
        for index, element in enumerate(value):
            item.walk(found, f"{where}/{index}", element)

    return _Kind(expected, walk)


def _object(*fields: _Field) -> _Kind:
    """An object with *fields* (in this order); other keys are allowed and not checked."""

    def walk(found: _Found, where: str, value: Any) -> None:
        if not isinstance(value, dict):
            _report(found, where, OBJECT, value, INVALID_TYPE)
            return
        for field in fields:
            at = where + pointer(field.name)
            if field.name in value:
                field.kind.walk(found, at, value[field.name])
            elif field.is_required(value):
                _report(found, at, field.kind.expected, None, MISSING)

    return _Kind(OBJECT, walk)


def _is_oauth2(auth: Mapping[str, Any]) -> bool:
    return auth.get("type") == "oauth2"


_DESCRIPTOR = _object(
    _Field("protocol_version", _semver(), required=True),
    _Field("id", _string(), required=True),
    _Field("name", _string(), required=True),
    _Field("description", _string()),
    _Field("version", _semver()),
    _Field("capability_type", _enum(CAPABILITY_TYPES), required=True),
    _Field(
        "endpoint",
        _object(
            _Field("url", _uri(), required=True),
            _Field("method", _enum(METHODS)),
        ),
        required=True,
    ),
    _Field(
        "auth",
        _object(
            _Field("type", _enum(AUTH_TYPES), required=True),
            # The chapter's AUTH_REQUIRED details carry these so that a
            # consumer can run the flow unaided; a descriptor that announces
            # oauth2 must carry them too.
            _Field("authorization_url", _uri(), required=_is_oauth2),
            _Field("scopes", _array_of(_string(), ARRAY_OF_STRINGS), required=_is_oauth2),
            _Field("token_url", _uri()),
        ),
    ),
)


def validate(descriptor: Any) -> tuple[Violation, ...]:
    """Every violation in *descriptor* (any JSON value), in the schema's order; empty when valid.

    Strings are checked as served: a descriptor that still holds mockskill's
    ``{base_url}`` placeholder has no valid URIs.
    """
    found: _Found = []
    _DESCRIPTOR.walk(found, pointer(), descriptor)
    return tuple(found)


def validation_error(violations: Iterable[Violation]) -> dict[str, Any]:
    """The unified ``VALIDATION_ERROR`` body that reports *violations* (not retryable: no advice).

    Raises ValueError for no violations: a valid descriptor raises no error.
    """
    entries = [v.as_json() for v in violations]
    if not entries:
        raise ValueError(
            "no violations: a valid descriptor raises no VALIDATION_ERROR "
            "(call validation_error only when validate() found something)"
        )
    category = CATEGORIES["VALIDATION_ERROR"]
    return unified_body(category.code, category.message, {"violations": entries})
