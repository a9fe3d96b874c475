"""Which case of an endpoint a request takes, and why each case before it did not.

An endpoint's cases (:class:`~mockskill.scenario.model.Case`) are tried in
order; the first whose conditions all hold plays its own sequence. Each
condition that fails says why, in words a consumer's author reads in a
near-miss (``body /input/text equals 'boom': found 'hello'``). Pure: the
request's parts a condition looks at are read once, on first use — the
JSON body parsed, the query string split — so that an endpoint without
cases, or a case decided by a header, costs nothing more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..scenario.model import Case, Check, Condition
from .entries import shorten
from .incoming import Incoming

MAX_SHOWN = 60
"""Characters of a request's value a reason quotes at most (a reason must stay a line)."""


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()
"""A value the request does not have: no such header, parameter or pointer target."""


class Facts:
    """The parts of one request that conditions look at, each read on first use."""

    __slots__ = ("_json", "_query", "_text", "found", "request")

    def __init__(self, request: Incoming) -> None:
        self.request = request
        self._json: Any = None
        self._query: dict[str, list[str]] | None = None
        self._text: str | None = None
        self.found: dict[tuple[str, str], list[Any] | None] = {}
        """Each place's values, once looked up (cases often test the same place)."""

    def json(self) -> Any:
        """The body as JSON; a :class:`NotJSON` when it is not (empty, not UTF-8, not JSON)."""
        if self._json is None:
            body = self.request.body
            if not body:
                parsed: Any = NotJSON("the body is empty")
            else:
                try:
                    parsed = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    parsed = NotJSON("the body is not JSON")
                except RecursionError:  # (bounded by --max-body, but deep enough to raise)
                    parsed = NotJSON("the body is nested too deeply to read")
            self._json = (parsed,)
        return self._json[0]

    def text(self) -> str:
        """The body as text (UTF-8, bad bytes replaced)."""
        if self._text is None:
            self._text = self.request.body.decode("utf-8", "replace")
        return self._text

    def query(self, name: str) -> list[str]:
        """The values of query parameter *name* (none: an empty list)."""
        if self._query is None:
            args = self.request.werkzeug().args
            self._query = {key: args.getlist(key) for key in args}
        return self._query.get(name, [])


class NotJSON:
    """A body that a JSON Pointer cannot look into, and why."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def pick(cases: Sequence[Case], request: Incoming) -> Case | None:
    """The first of *cases* whose conditions all hold for *request*; None when none does.

    The request's every case is tried on this path, so it only decides; why a
    case missed is :func:`misses`'s, asked only when no case and no default
    took the request.
    """
    facts = Facts(request)
    for case in cases:
        for condition in case.conditions:
            if not meets(condition, facts):
                break
        else:
            return case
    return None


def misses(cases: Sequence[Case], request: Incoming) -> list[dict[str, Any]]:
    """For each of *cases*, why it does not take *request*:
    ``{"case": "case 1", "reasons": [every condition that failed, and why]}``."""
    facts = Facts(request)
    return [
        {"case": case.label, "reasons": [why for c in case.conditions if (why := failed(c, facts))]}
        for case in cases
    ]


def meets(condition: Condition, facts: Facts) -> bool:
    """Whether *condition* holds for the request of *facts* (:func:`failed` without words).

    Every case of an endpoint is tried on the request's path: the values of a
    place are looked up once per request, and the common test (one ``equals``
    on one value) is compared here, without a call per check.
    """
    place = condition.place
    found = facts.found
    values = found[place] if place in found else found.setdefault(place, _values(condition, facts))
    if values is None:
        return False
    checks = condition.checks
    if not values:
        return all(check.operator == "absent" for check in checks)
    if len(checks) == 1 and len(values) == 1:
        check, value = checks[0], values[0]
        if check.operator == "equals":
            want = check.operand
            # JSON equality without same()'s calls when both are text (or alike and plain)
            if type(value) is type(want) and type(value) in _PLAIN:
                return bool(value == want)
            return same(value, want)
        return holds(check, value)
    for check in checks:
        for value in values:
            if holds(check, value):
                break
        else:
            return False
    return True


_PLAIN = frozenset({str, int, float, type(None)})
"""Types whose JSON equality is Python's when both sides have the same one."""


def _values(condition: Condition, facts: Facts) -> list[Any] | None:
    """The request's values of *condition*'s place (none: absent); None for a body
    pointer into a body that is not JSON."""
    source = condition.source
    if source == "body":
        body = facts.json()
        if isinstance(body, NotJSON):
            return None
        found = resolve(body, condition.pointer)
        return [] if found is ABSENT else [found]
    if source == "headers":
        header = facts.request.header(condition.name)
        return [] if header is None else [header]
    if source == "query":
        return facts.query(condition.name)
    return [facts.text()]


def failed(condition: Condition, facts: Facts) -> str | None:
    """Why *condition* does not hold for the request of *facts*; None when it holds."""
    place = condition.place
    found = facts.found
    values = found[place] if place in found else found.setdefault(place, _values(condition, facts))
    if values is None:
        body = facts.json()
        return f"{condition.label}: {body.why}"
    if not values:  # absent: only an absent test holds
        if all(check.operator == "absent" for check in condition.checks):
            return None
        return f"{condition.label} {_first_text(condition)}: it is absent"
    for check in condition.checks:  # (a repeated parameter: any of its values may hold)
        if not any(holds(check, value) for value in values):
            return f"{condition.label} {check.text}: found {_shown(values)}"
    return None


def _first_text(condition: Condition) -> str:
    return next(c.text for c in condition.checks if c.operator != "absent")


def resolve(document: Any, pointer: tuple[str, ...]) -> Any:
    """The value *pointer* (RFC 6901 tokens) names in *document*, or :data:`ABSENT`."""
    value = document
    for token in pointer:
        if isinstance(value, dict):
            if token not in value:
                return ABSENT
            value = value[token]
        elif isinstance(value, list):
            if not _INDEX.fullmatch(token) or int(token) >= len(value):
                return ABSENT
            value = value[int(token)]
        else:
            return ABSENT
    return value


_INDEX = re.compile(r"0|[1-9][0-9]*")
"""An array index in a pointer: no sign, no leading zero (RFC 6901)."""


def holds(check: Check, value: Any) -> bool:
    """Whether *check* holds for a *value* the request has (not :data:`ABSENT`)."""
    operator, operand = check.operator, check.operand
    if operator == "exists":
        return True
    if operator == "absent":
        return False
    if operator == "equals":
        return same(value, operand)
    if operator == "matches":
        return isinstance(value, str) and operand.search(value) is not None
    # contains: a substring of text, an element of an array, a key of an object
    if isinstance(value, str):
        return isinstance(operand, str) and operand in value
    if isinstance(value, list):
        return any(same(item, operand) for item in value)
    if isinstance(value, dict):
        return isinstance(operand, str) and operand in value
    return False


def same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, objects and arrays compared deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _shown(values: list[Any]) -> str:
    """The request's value(s) as a reason quotes them: JSON, shortened."""
    shown = [shorten(json.dumps(value, ensure_ascii=False), MAX_SHOWN) for value in values]
    return shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
