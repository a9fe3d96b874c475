"""Querying the request journal: the filters ``/__admin/journal`` and ``/unmatched`` take.

Each query parameter names a filter (session, skill, method, path, endpoint,
status, error code, replica, since, until) and ``limit`` keeps the newest entries; a
parameter the journal does not take, a repeated one, or a value it cannot
use is a :class:`BadFilter` (a 400 naming the parameter and what it
expects), never a silently empty answer.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.datastructures import MultiDict

from ..engine.state import Entry
from ..protocol.catalog import unified_body


class BadFilter(Exception):
    """A query parameter an admin listing does not take, or a value it cannot use (a 400).

    The journal's filters raise it, and so do the scenarios' and the report's
    options: one shape for every bad query parameter of ``/__admin``.
    """

    def __init__(self, parameter: str, message: str, expected: Any) -> None:
        super().__init__(message)
        self.parameter, self.message, self.expected = parameter, message, expected

    def body(self) -> dict[str, Any]:
        details = {"parameter": self.parameter, "expected": self.expected}
        return unified_body("MOCKSKILL_BAD_REQUEST", self.message, details)


def _integer(name: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise BadFilter(name, f"{name}={text!r} is not an integer of at least {minimum}", "integer")
    return value


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadFilter(name, f"{name}={text!r} is not a time in seconds since the epoch", "number")
    return value


Test = Callable[[Entry], bool]


def _equal(field: str) -> Callable[[str, str], Test]:
    return lambda name, text: lambda e: getattr(e, field) == text


ENDPOINT_KINDS = (
    "list",
    "describe",
    "invoke",
    "route",
    "task",
    "token",
    "authorize",
    "unmatched",
    "refused",
    "callback",
)
"""What an entry's ``endpoint`` may be (:attr:`mockskill.engine.state.Entry.endpoint`)."""


def _endpoint(name: str, text: str) -> Test:
    # Refused rather than matching nothing: a misspelt kind would look like an empty journal.
    if text not in ENDPOINT_KINDS:
        hint = difflib.get_close_matches(text, ENDPOINT_KINDS, n=1)
        message = (
            f"{name}={text!r} is not an endpoint kind; it is one of {', '.join(ENDPOINT_KINDS)}"
        )
        if hint:
            message += f" (did you mean {hint[0]!r}?)"
        raise BadFilter(name, message, list(ENDPOINT_KINDS))
    return lambda e: e.endpoint == text


def _status(name: str, text: str) -> Test:
    wanted = _integer(name, text, 100)
    return lambda e: e.status == wanted


def _method(name: str, text: str) -> Test:
    wanted = text.upper()  # (methods are case-sensitive on the wire, but written in capitals)
    return lambda e: e.method.upper() == wanted


def _since(name: str, text: str) -> Test:
    start = _seconds(name, text)
    return lambda e: e.started >= start


def _until(name: str, text: str) -> Test:
    end = _seconds(name, text)
    return lambda e: e.started <= end


JOURNAL_FILTERS: dict[str, Callable[[str, str], Test]] = {
    "session": _equal("session"),
    "skill": _equal("skill"),
    "method": _method,
    "path": _equal("path"),
    "endpoint": _endpoint,
    "status": _status,
    "error_code": _equal("error_code"),
    "replica": _equal("replica"),
    "since": _since,
    "until": _until,
}
UNMATCHED_FILTERS = {k: JOURNAL_FILTERS[k] for k in ("session", "replica", "since", "until")}
REQUESTS_FILTERS = JOURNAL_FILTERS
"""``/__admin/requests`` lists the journal's entries as requests: with the same filters."""


def select(
    entries: list[Entry],
    args: MultiDict[str, str],
    filters: Mapping[str, Callable[[str, str], Test]],
) -> list[Entry]:
    """*entries* that pass every filter in *args*; ``limit=N``: the newest N of them."""
    tests: list[Test] = []
    limit = None
    for name in args:
        text = args[name]
        if len(args.getlist(name)) > 1:  # not silently the first of them
            message = f"{name!r} is given {len(args.getlist(name))} times; give it once"
            raise BadFilter(name, message, "one value")
        if name == "limit":
            limit = _integer(name, text, 0)
        elif name in filters:
            tests.append(filters[name](name, text))
        else:
            allowed = [*filters, "limit"]
            hint = difflib.get_close_matches(name, allowed, n=1)
            message = f"{name!r} is not a filter of this listing; it takes {', '.join(allowed)}"
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise BadFilter(name, message, allowed)
    selected = [e for e in entries if all(test(e) for test in tests)]
    if limit is not None:
        selected = selected[len(selected) - limit :] if limit else []
    return selected
