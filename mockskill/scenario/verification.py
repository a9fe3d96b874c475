"""What a verification asks of the journal (``POST /__admin/verify``), read and checked.

A verification names the requests to count — their ``session``, ``skill``,
``method`` and ``path``, and conditions in the language of a case's ``when:``
(read here by :func:`~.cases.read_when` itself, so a bad condition is the
same positioned problem as in a scenario file) — and how many there must be
(``count``: ``{"equals": N}``, ``{"at_least": N}``, ``{"at_most": N}``, both
of the last two, or a bare N for ``equals``; at least 1 when left out, as in
WireMock). The text is JSON (YAML reads it, keeping each value's line and
column); Python data is read as the JSON it stands for and placed by path.
The engine counts the journal's entries against it
(:mod:`mockskill.engine.verifying`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cases import read_when
from .problems import Problem, ScenarioError, describe, format_report
from .reader import Reader
from .source import Document, json_problem, read_text
from .when import Condition

VERIFY_KEYS = ("session", "skill", "method", "path", "when", "count")
"""The keys a verification takes."""
COUNT_KEYS = ("equals", "at_least", "at_most")
ANY_METHOD = ("POST",)
"""The methods a verification without ``method`` reads conditions for: one that carries a
body, so that a body condition is not refused as one on GET."""


class BadVerification(ScenarioError):
    """A verification that cannot be read: every problem, positioned (a ScenarioError, as a
    bad ``when:`` in a scenario file is); its message says nothing was verified."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        super().__init__(problems)
        report = format_report(self.problems).rsplit("\n", 1)
        noun = "problem" if len(self.problems) == 1 else "problems"
        ending = f"{len(self.problems)} {noun} in the verification; nothing was verified."
        Exception.__init__(self, "\n".join([*report[:-1], ending]))


@dataclass(frozen=True)
class Count:
    """How many matching requests a verification wants: from *at_least* to *at_most*
    (None: no bound)."""

    at_least: int = 1
    at_most: int | None = None

    def holds(self, count: int) -> bool:
        return count >= self.at_least and (self.at_most is None or count <= self.at_most)

    @property
    def text(self) -> str:
        """``exactly 1``, ``at least 1``, ``at most 2``, ``from 1 to 3``."""
        if self.at_most is None:
            return f"at least {self.at_least}"
        if self.at_most == self.at_least:
            return f"exactly {self.at_least}"
        if self.at_least == 0:
            return f"at most {self.at_most}"
        return f"from {self.at_least} to {self.at_most}"


@dataclass(frozen=True)
class Verification:
    """The requests a verification counts, and how many it wants."""

    conditions: tuple[Condition, ...] = ()
    session: str | None = None
    """None: every session's requests."""
    skill: str | None = None
    method: str | None = None
    """Upper case; None: any."""
    path: str | None = None
    """The request's path (percent-decoded, no query string: as the journal's ``path``)."""
    count: Count = Count()


def read_verification(text: str, file: str = "<verify request>") -> Verification:
    """The verification *text* (a JSON object) asks for; BadVerification with every problem."""
    document = _document(text, file)
    problems: list[Problem] = []
    r = Reader(document, problems)
    verification = _read(r, document.data)
    if problems or verification is None:
        raise BadVerification(problems)
    return verification


def verification_of(data: Mapping[str, Any], file: str = "<verify>") -> Verification:
    """The verification Python *data* stands for (as JSON); problems placed by their path."""
    try:
        text = json.dumps(data, indent=1, allow_nan=False)
    except (TypeError, ValueError) as exc:
        expected = "plain data: dicts, lists, strings, numbers, booleans, None"
        raise BadVerification([Problem(file, 0, 0, "(top level)", expected, str(exc))]) from None
    try:
        return read_verification(text, file)
    except BadVerification as exc:
        raise BadVerification([p.by_path({file}) for p in exc.problems]) from None


def read_conditions(text: str, file: str, *, method: str | None = None) -> tuple[Condition, ...]:
    """Conditions alone (a ``when:`` mapping, as ``mockskill verify --when`` takes them),
    positioned in *text*; BadVerification with every problem."""
    document = _document(text, file)
    problems: list[Problem] = []
    r = Reader(document, problems)
    methods = (method.upper(),) if method else ANY_METHOD
    conditions = read_when(r, document.data, (), methods=methods)
    if problems or conditions is None:
        raise BadVerification(problems)
    return conditions


def _document(text: str, file: str) -> Document:
    """*text*, one JSON value, read as YAML for its positions once it is known to be JSON;
    BadVerification when it is not JSON, or not one value."""
    problem = json_problem(text, file) if text.strip() else None
    if problem is not None:
        raise BadVerification([problem])
    documents, problems = read_text(text, file)
    if not problems and len(documents) != 1:
        found = "nothing" if not documents else f"{len(documents)} documents"
        problems.append(Problem(file, 1, 1, "(top level)", "one JSON object", found))
    if problems:
        raise BadVerification(problems)
    return documents[0]


def _read(r: Reader, data: Any) -> Verification | None:
    raw = r.mapping(data, (), "a verification: a JSON object of when, count, session, ...")
    if raw is None:
        return None
    r.keys(raw, (), VERIFY_KEYS)
    texts: dict[str, str | None] = {}
    for key in ("session", "skill", "method", "path"):
        value = raw.get(key)
        if value is None:
            texts[key] = None
        elif not isinstance(value, str) or not value:
            r.bad((key,), f"a non-empty string ({_WHAT[key]})", describe(value))
        elif key == "path" and not value.startswith("/"):
            r.bad((key,), "a path beginning with / (no query string)", describe(value))
        elif key == "method" and not (value.isascii() and value.isalpha()):
            r.bad((key,), "an HTTP method (GET, POST, ...)", describe(value))
        else:
            texts[key] = value.upper() if key == "method" else value
    method = texts.get("method")
    conditions: tuple[Condition, ...] | None = ()
    if "when" in raw:
        methods = (method,) if method else ANY_METHOD
        conditions = read_when(r, raw["when"], ("when",), methods=methods)
    count = _count(r, raw["count"]) if "count" in raw else Count()
    if conditions is None or count is None or r.problems:
        return None
    return Verification(
        conditions,
        session=texts.get("session"),
        skill=texts.get("skill"),
        method=method,
        path=texts.get("path"),
        count=count,
    )


_WHAT = {
    "session": "the Mockskill-Session of the requests",
    "skill": "a skill id",
    "method": "an HTTP method",
    "path": "the requests' path",
}


def _count(r: Reader, value: Any) -> Count | None:
    """``count``: a bare N (exactly N), or a mapping of equals, or at_least and/or at_most."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = r.number_at(value, ("count",), minimum=0)
        return None if n is None else Count(n, n)
    raw = r.mapping(value, ("count",), "a count: N, or {equals: N}, {at_least: N}, {at_most: N}")
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, ("count",), COUNT_KEYS)
    if not raw:
        r.bad(("count",), "one of equals, at_least, at_most", "an empty mapping")
        return None
    bounds = {
        key: r.number_at(raw[key], ("count", key), minimum=0) for key in COUNT_KEYS if key in raw
    }
    if len(r.problems) > before or None in bounds.values():
        return None
    if "equals" in bounds and len(bounds) > 1:
        r.bad(
            ("count",),
            "equals alone, or at_least and/or at_most",
            "equals beside " + " and ".join(k for k in bounds if k != "equals"),
            "equals N is at_least N and at_most N",
        )
        return None
    if "equals" in bounds:
        n = bounds["equals"]
        assert n is not None
        return Count(n, n)
    at_least, at_most = bounds.get("at_least", 0), bounds.get("at_most")
    assert at_least is not None
    if at_most is not None and at_most < at_least:
        r.bad(
            ("count", "at_most"),
            f"at least at_least ({at_least})",
            describe(at_most),
            "no count is both",
        )
        return None
    return Count(at_least, at_most)


def document(
    when: Mapping[str, Any] | None = None,
    *,
    session: str | None = None,
    skill: str | None = None,
    method: str | None = None,
    path: str | None = None,
    count: int | None = None,
    at_least: int | None = None,
    at_most: int | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /__admin/verify`` for these arguments (the Python faces' and
    the command line's): what is None is left out."""
    body: dict[str, Any] = {}
    for key, value in (("session", session), ("skill", skill), ("method", method), ("path", path)):
        if value is not None:
            body[key] = value
    if when is not None:
        body["when"] = when
    if count is not None:
        body["count"] = {"equals": count}
        if at_least is not None or at_most is not None:
            body["count"].update(
                {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
            )  # (refused by the reader: count is exact)
    elif at_least is not None or at_most is not None:
        body["count"] = {
            k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None
        }
    return body
