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

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from ..scenario.verification import Verification
from ..scenario.when import Condition, ValueSource
from .conditions import Facts, failed, meets
from .entries import Entry, shorten

NEAR_MISSES = 5
"""How many of the closest entries a verification that did not hold shows."""
SHOWN_ENTRIES = 20
"""How many matching entries (the newest) an answer of ``/__admin/verify`` holds."""


class Recorded:
    """A journal entry read as a request (:class:`~.conditions.Readable`): its headers by
    name in any case, its query string's parameters, its body; what the journal did not
    keep, or kept cut or as base64, cannot be read, and says why."""

    __slots__ = ("_headers", "entry")

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._headers: dict[str, str] | None = None

    @property
    def body(self) -> bytes:
        text = self.entry.body
        return b"" if text is None else text.encode("utf-8", "surrogatepass")

    def header(self, name: str) -> str | None:
        headers = self._headers
        if headers is None:
            headers = self._headers = {}
            for written, value in self.entry.headers or ():
                key = written.lower()  # repeated ones joined by ",", as a served request's
                headers[key] = f"{headers[key]},{value}" if key in headers else value
        return headers.get(name.lower())

    def arguments(self) -> Mapping[str, list[str]]:
        query = (self.entry.target or "").partition("?")[2]
        arguments: dict[str, list[str]] = {}
        for key, value in parse_qsl(query, keep_blank_values=True, errors="replace"):
            arguments.setdefault(key, []).append(value)
        return arguments

    def unreadable(self, source: ValueSource) -> str | None:
        entry = self.entry
        if source == "headers":
            return None if entry.headers is not None else "the journal did not keep its headers"
        if source == "query":
            return None if entry.target is not None else "the journal did not keep its target"
        if entry.body is None:
            if entry.body_digest is None and not entry.body_size:
                return None  # no body: an empty one
            return "the journal did not keep its body"
        if entry.body_encoding == "base64":
            return "the journal kept it as base64 (not UTF-8 text)"
        size = entry.body_size
        if size is not None and size > len(self.body) and not _whole(entry.body):
            return f"the journal kept only part of its {size} bytes"
        return None


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

    @property
    def text(self) -> str:
        return f"{_request(self.entry)}: " + "; ".join(self.failed)


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
    conditions = verification.conditions
    matched: list[Entry] = []
    missed: list[tuple[int, Entry]] = []
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
        if conditions:
            facts = Facts(Recorded(entry))
            apart += sum(not meets(condition, facts) for condition in conditions)
        if apart:
            missed.append((apart, entry))
        else:
            matched.append(entry)
    near: tuple[NearMiss, ...] = ()
    if len(matched) < verification.count.at_least:
        # fewest failed conditions first; among equals, the newest
        closest = heapq.nsmallest(NEAR_MISSES, missed, key=lambda m: (m[0], -m[1].id))
        near = tuple(NearMiss(entry, reasons(verification, entry)) for _, entry in closest)
    return Verified(verification, tuple(matched), near, read)


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
