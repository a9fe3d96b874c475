"""Verifying what a consumer sent: the journal's entries counted against a verification.

A :class:`~mockskill.scenario.verification.Verification` names requests (a
session, skill, method, path, and conditions in the language of ``when:``);
:func:`verify` counts the journal's entries that are such requests and, when
there are fewer than wanted, finds the closest of the others — fewest failed
conditions first, the newest first among equals — each with every condition
it failed and what it had instead. The conditions are tested by
:mod:`.conditions`' own :func:`~.conditions.meets` and
:func:`~.conditions.failed`, on a :class:`Recorded` view of each entry (what
the journal kept of its target, headers and body), so that a verification
reads a request exactly as a case does. Pure: the faces fetch the journal,
answer and raise.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from ..scenario.verification import Verification
from ..scenario.when import Condition
from .conditions import Facts, Unread, failed, meets
from .entries import Entry, shorten

NEAR_MISSES = 5
"""How many of the closest entries a verification that did not hold shows."""
SHOWN_ENTRIES = 20
"""How many matching entries (the newest) an answer of ``/__admin/verify`` holds."""


class Recorded:
    """A journal entry read as a request (:class:`~.conditions.Readable`): its headers by
    name in any case, its query string's parameters, its body. What the journal did not
    keep, or kept cut or as base64, cannot be read: :class:`~.conditions.Unread` says why."""

    __slots__ = ("entry",)

    def __init__(self, entry: Entry) -> None:
        self.entry = entry

    @property
    def body(self) -> str:
        entry = self.entry
        text = entry.body
        if text is None:
            if entry.body_digest is None and not entry.body_size:
                return ""  # no body: an empty one
            raise Unread("the journal did not keep its body")
        if entry.body_encoding == "base64":
            raise Unread("the journal kept it as base64 (not UTF-8 text)")
        size = entry.body_size
        # (a text's UTF-8 has at least as many bytes as it has characters: most need no encoding)
        if (
            size is not None
            and size > len(text)
            and size > len(text.encode("utf-8", "replace"))
            and not _whole(text)
        ):
            raise Unread(f"the journal kept only part of its {size} bytes")
        return text

    def header(self, name: str) -> str | None:
        headers = self.entry.headers
        if headers is None:
            raise Unread("the journal did not keep its headers")
        name = name.lower()
        size = len(name)
        found = None
        for written, value in headers:
            # (a name of another length is another name: most are not lowered to tell)
            if len(written) == size and written.lower() == name:
                # repeated ones joined by ",", as a request being served reads them
                found = value if found is None else f"{found},{value}"
        return found

    def arguments(self) -> Mapping[str, list[str]]:
        target = self.entry.target
        if target is None:
            raise Unread("the journal did not keep its target")
        arguments: dict[str, list[str]] = {}
        query = target.partition("?")[2]
        for key, value in parse_qsl(query, keep_blank_values=True, errors="replace"):
            arguments.setdefault(key, []).append(value)
        return arguments


def _whole(text: str) -> bool:
    """Whether *text* reads as a whole JSON document (a body whose secrets the journal
    masked is shorter than it was sent, yet whole; a cut one is not JSON)."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class NearMiss:
    """An entry a verification did not count, and every condition it failed."""

    entry: Entry
    failed: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"failed": list(self.failed), "entry": self.entry.as_json()}


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` found: the matching entries (oldest first), whether their count
    is the one wanted, and the closest others when there were too few."""

    verification: Verification
    matched: tuple[Entry, ...]
    near_misses: tuple[NearMiss, ...]
    read: int
    """How many entries were read (those of the session, or all)."""

    @property
    def held(self) -> bool:
        return self.verification.count.holds(len(self.matched))

    def as_json(self, shown: int = SHOWN_ENTRIES) -> dict[str, Any]:
        """The answer of ``/__admin/verify`` (the details of its refusal when it did not hold)."""
        kept = self.matched[-shown:] if shown else ()
        return {
            "held": self.held,
            "count": len(self.matched),
            "expected": self.verification.count.text,
            "requests": described(self.verification),
            "read": self.read,
            "entries": [e.as_json() for e in kept],
            "near_misses": [m.as_json() for m in self.near_misses],
        }

    @property
    def message(self) -> str:
        """What held, or what did not and the closest requests: the text of an AssertionError."""
        return message(self.as_json(shown=0), self.matched)


def verify(verification: Verification, entries: Iterable[Entry]) -> Verified:
    """Count the *entries* that are the requests *verification* names (see the module)."""
    session, skill = verification.session, verification.skill
    method, path = verification.method, verification.path
    failures = _Failures(verification.conditions) if verification.conditions else None
    matched: list[Entry] = []
    # the newest few entries of each number of failed conditions (the closest come from them)
    missed: dict[int, deque[Entry]] = {}
    read = 0
    for entry in entries:
        if session is not None and entry.session != session:
            continue
        read += 1
        apart = (
            (skill is not None and entry.skill != skill)
            + (method is not None and entry.method.upper() != method)
            + (path is not None and entry.path != path)
        )
        if failures is not None:
            apart += failures.of(entry)
        if apart:
            kept = missed.get(apart)
            if kept is None:
                kept = missed[apart] = deque(maxlen=NEAR_MISSES)
            kept.append(entry)
        else:
            matched.append(entry)
    near: tuple[NearMiss, ...] = ()
    if len(matched) < verification.count.at_least:
        # fewest failed conditions first; among equals, the newest
        closest = [e for apart in sorted(missed) for e in reversed(missed[apart])][:NEAR_MISSES]
        near = tuple(NearMiss(entry, reasons(verification, entry)) for entry in closest)
    return Verified(verification, tuple(matched), near, read)


class _Failures:
    """How many of a verification's conditions each entry fails, told as cheaply as the
    conditions allow, with the same answer :func:`~.conditions.meets` gives.

    First, without reading the entry as a request: a condition on a string that the
    entry's text does not hold anywhere fails (:func:`_needle`), and most entries of a
    journal fail that way. Then by :func:`~.conditions.meets`, once per distinct value
    the conditions read: those on the body depend on the body alone (and on whether and
    how it was kept), those on the query on the target (a client sends the same body,
    or query, again and again: a load test's journal is one body ten thousand times);
    headers differ from request to request (a length, a key, a trace): each entry's.
    """

    __slots__ = ("groups",)

    def __init__(self, conditions: Sequence[Condition]) -> None:
        grouped: dict[str, list[tuple[Condition, str | None]]] = {}
        for condition in conditions:
            group = "body" if condition.source == "raw_body" else condition.source
            grouped.setdefault(group, []).append((condition, _needle(condition)))
        self.groups: list[_Group] = [
            (_QUICK.get(group), _KEYS.get(group), tested, {}) for group, tested in grouped.items()
        ]

    def of(self, entry: Entry) -> int:
        failures = 0
        for quick, key_of, tested, told in self.groups:
            if quick is not None:
                missing = quick(tested, entry)
                if missing == len(tested):
                    failures += missing
                    continue
            if key_of is None:
                failures += _failed(tested, entry)
                continue
            key = key_of(entry)
            failed = told.get(key)
            if failed is None:
                failed = told[key] = _failed(tested, entry)
            failures += failed
        return failures


_Tested = list[tuple[Condition, "str | None"]]
"""Conditions on one part of a request, each with its needle (:func:`_needle`)."""


def _missing_in_body(tested: _Tested, entry: Entry) -> int:
    """How many of the conditions *tested* on the body fail for want of their needle.

    A JSON text without a backslash writes each string as it is: a string value (or
    key) the text does not hold is in no place of the body, and an equals or contains
    on it fails without the body being parsed."""
    text = entry.body
    if text is None or entry.body_encoding != "text" or "\\" in text:
        return 0
    missing = 0
    for _, needle in tested:
        if needle is not None and needle not in text:
            missing += 1
    return missing


def _missing_in_headers(tested: _Tested, entry: Entry) -> int:
    """How many of the conditions *tested* on headers fail for want of their needle: a
    value without a comma that no header's value holds (a repeated header's values are
    joined by commas: the needle is within one of them) is the value of none."""
    headers = entry.headers
    if headers is None:
        return 0
    missing = 0
    for _, needle in tested:
        if needle is None:
            continue
        for _, value in headers:
            if needle in value:
                break
        else:
            missing += 1
    return missing


_QUICK: dict[str, Callable[[_Tested, Entry], int]] = {
    "body": _missing_in_body,
    "headers": _missing_in_headers,
}
_KEYS: dict[str, Callable[[Entry], Hashable]] = {
    "body": lambda e: (e.body, e.body_encoding, e.body_size, e.body_digest is None),
    "query": lambda e: e.target,
}
"""What the conditions on the body and on the query read of an entry (:class:`Recorded`)."""
_Group = tuple[
    Callable[[_Tested, Entry], int] | None,
    Callable[[Entry], Hashable] | None,
    _Tested,
    dict[Hashable, int],
]
"""A part of the request: how its conditions fail without reading it (None: they are
read), what they read of an entry (None: each entry's own), the conditions, and the
failures told for each value read."""


def _failed(tested: _Tested, entry: Entry) -> int:
    """How many of the conditions *tested* *entry* fails, each told by :func:`meets`."""
    facts = Facts(Recorded(entry))
    return sum(1 for condition, _ in tested if not meets(condition, facts))


_ESCAPED = frozenset('"\\') | frozenset(map(chr, range(0x20)))
"""Characters JSON writes escaped in a string: a needle holding one is not searched for."""


def _needle(condition: Condition) -> str | None:
    """Text an entry must hold for *condition* to hold, when that can be told without
    reading it as a request: on a body pointer, an ``equals`` of a string, its JSON
    string, and a ``contains`` of one (in a string, an array, an object's keys), the
    string; on a header, an ``equals`` or ``contains`` of a value without a comma, the
    value. None otherwise."""
    if condition.source not in ("body", "headers"):
        return None
    for check in condition.checks:
        operand = check.operand
        if check.operator not in ("equals", "contains") or type(operand) is not str:
            continue
        if condition.source == "headers":
            if "," not in operand:
                return operand
        elif _ESCAPED.isdisjoint(operand):
            return f'"{operand}"' if check.operator == "equals" else operand
    return None


def reasons(verification: Verification, entry: Entry) -> tuple[str, ...]:
    """Every condition of *verification* that *entry* fails, and what it had instead."""
    said: list[str] = []
    for name, wanted, had in (
        ("skill", verification.skill, entry.skill),
        ("method", verification.method, entry.method.upper()),
        ("path", verification.path, entry.path),
    ):
        if wanted is not None and had != wanted:
            shown = "none" if had is None else repr(shorten(had, 60))
            said.append(f"{name} equals {wanted!r}: found {shown}")
    if verification.conditions:
        facts = Facts(Recorded(entry))
        said += [why for c in verification.conditions if (why := failed(c, facts)) is not None]
    return tuple(said)


def described(verification: Verification) -> str:
    """The requests *verification* names, in words: ``POST /x of session 'S' where ...``
    (empty: every request)."""
    parts = []
    if verification.method is not None or verification.path is not None:
        parts.append(" ".join(p for p in (verification.method, verification.path) if p))
    if verification.skill is not None:
        parts.append(f"to skill {verification.skill!r}")
    if verification.session is not None:
        parts.append(f"of session {verification.session!r}")
    if verification.conditions:
        parts.append("where " + " and ".join(_condition(c) for c in verification.conditions))
    return " ".join(parts)


def _condition(condition: Condition) -> str:
    return " ".join([condition.label, *(check.text for check in condition.checks)])


def _request(entry: Mapping[str, Any] | Entry) -> str:
    """``#12 POST /skills/echo/invoke?x=1 (skill 'echo', 200)``: an entry, as a line shows it."""
    data = entry.as_json() if isinstance(entry, Entry) else entry
    target = data.get("target") or data.get("path") or ""
    said = [f"skill {data['skill']!r}"] if data.get("skill") else []
    said.append(str(data.get("status") or "no answer"))
    return f"#{data.get('id')} {data.get('method')} {shorten(str(target), 120)} ({', '.join(said)})"


def message(answer: Mapping[str, Any], matched: Sequence[Entry] | None = None) -> str:
    """The words of a verification's answer (``/__admin/verify``'s, or its refusal's
    details): how many were wanted and found, and the near misses with what they failed.
    The Python faces raise it as an AssertionError; ``mockskill verify`` prints it."""
    count, expected = answer.get("count", 0), str(answer.get("expected", ""))
    noun = "request" if expected.endswith(" 1") else "requests"
    wanted = " ".join(filter(None, (expected, noun, answer.get("requests"))))
    held = "held" if answer.get("held") else "did not hold"
    lines = [f"verify {held}: expected {wanted}; found {count}"]
    if not answer.get("held") and matched is not None and count:
        lines += [f"  matched {_request(e)}" for e in matched[-SHOWN_ENTRIES:]]
    elif not answer.get("held") and count:
        lines += [f"  matched {_request(e)}" for e in answer.get("entries") or ()]
    misses = answer.get("near_misses") or ()
    if misses:
        lines.append("closest requests (fewest failed conditions first):")
        for miss in misses:
            lines.append(f"  {_request(miss.get('entry') or {})}")
            lines += [f"    {why}" for why in miss.get("failed") or ()]
    elif not answer.get("held") and not count:
        lines.append(f"no other request to compare: {answer.get('read', 0)} read in the journal")
    return "\n".join(lines)


def selected(
    entries: Iterable[Entry],
    *,
    skill: str | None = None,
    method: str | None = None,
    path: str | None = None,
    limit: int | None = None,
) -> list[Entry]:
    """*entries* of *skill*, *method* (any case) and *path*; the newest *limit* of them
    (``GET /__admin/requests``' filters, for the Python faces)."""
    wanted = None if method is None else method.upper()
    kept = [
        e
        for e in entries
        if (skill is None or e.skill == skill)
        and (wanted is None or e.method.upper() == wanted)
        and (path is None or e.path == path)
    ]
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit={limit!r}: expected an integer of at least 0")
        kept = kept[len(kept) - limit :] if limit else []
    return kept
