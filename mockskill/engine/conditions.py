"""Which case of an endpoint a request takes, and why each case before it did not.

An endpoint's cases (:class:`~mockskill.scenario.model.Case`) are tried in
order; the first whose conditions all hold plays its own sequence. Each
condition that fails says why, in words a consumer's author reads in a
near-miss (``body /input/text equals 'boom': found 'hello'``). Pure: the
request's parts a condition looks at are read once, on first use — the
JSON body parsed, the query string split — so that an endpoint without
cases, or a case decided by a header, costs nothing more.

The request is read through :class:`Readable`: a request being served
(:class:`~.incoming.Incoming`) and one the journal kept
(:class:`~.verifying.Recorded`, what ``/__admin/verify`` tests) both provide
it, so that one evaluator answers both.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..scenario.model import Case, Check, Condition, ValueSource
from ..scenario.when import Pattern, searcher
from .entries import shorten

MAX_SHOWN = 60
"""Characters of a request's value a reason quotes at most (a reason must stay a line)."""


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()
"""A value the request does not have: no such header, parameter or pointer target."""


class Unread(Exception):
    """A part of a request that cannot be read, and why: a journal entry's body cut or kept
    as base64, its headers or target not kept. What :class:`Readable` raises instead of a
    value; a condition on that part does not hold (no test on it can be told)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Readable(Protocol):
    """What conditions read of a request: a request being served (:class:`~.incoming.Incoming`)
    or one the journal kept (:class:`~.verifying.Recorded`, which may raise :class:`Unread`)."""

    @property
    def body(self) -> bytes | str:
        """The body as sent: its bytes, or its text when it is kept as text (a journal's)."""
        ...

    def header(self, name: str) -> str | None:
        """The value of header *name* (any case; repeated ones joined by ``,``), or None."""
        ...

    def arguments(self) -> Mapping[str, list[str]]:
        """The query string's parameters, each with its values in order."""
        ...


class Facts:
    """The parts of one request that conditions look at, each read on first use."""

    __slots__ = ("_json", "_query", "_text", "found", "request", "unread")

    def __init__(self, request: Readable) -> None:
        self.request = request
        self._json: Any = None
        self._query: Mapping[str, list[str]] | None = None
        self._text: str | None = None
        self.found: dict[tuple[str, str], list[Any] | None] = {}
        """Each place's values, once looked up (cases often test the same place)."""
        self.unread: dict[str, str] | None = None
        """Why each part that could not be read could not (:class:`Unread`), by source."""

    def json(self) -> Any:
        """The body as JSON, or an :class:`UnreadableBody` (empty, not UTF-8, not JSON)."""
        if self._json is None:
            try:
                body = self.request.body
            except Unread as unread:  # (a journal entry's body cut, or not kept)
                self._json = (UnreadableBody(unread.why),)
                return self._json[0]
            if not body:
                parsed: Any = UnreadableBody("the body is empty")
            else:
                try:
                    parsed = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    parsed = UnreadableBody("the body is not JSON")
                except RecursionError:  # (bounded by --max-body, but deep enough to raise)
                    parsed = UnreadableBody("the body is nested too deeply to read")
            self._json = (parsed,)
        return self._json[0]

    def text(self) -> str | None:
        """The body as text (UTF-8, bad bytes replaced); None when it cannot be read."""
        if self._text is None:
            try:
                body = self.request.body
            except Unread as unread:
                self.cannot("raw_body", unread)
                return None
            self._text = body if isinstance(body, str) else body.decode("utf-8", "replace")
        return self._text

    def query(self, name: str) -> list[str] | None:
        """The values of query parameter *name* (none: an empty list); None when the query
        string cannot be read."""
        query = self._query
        if query is None:
            try:
                query = self._query = self.request.arguments()
            except Unread as unread:
                self.cannot("query", unread)
                return None
        return query.get(name, [])

    def cannot(self, source: str, unread: Unread) -> None:
        """Note that *source* cannot be read, and why (:meth:`why` says it)."""
        if self.unread is None:
            self.unread = {}
        self.unread[source] = unread.why

    def why(self, source: ValueSource) -> str:
        """Why the values of *source* could not be read (a body: why it is not JSON either)."""
        if source == "body":
            body = self.json()
            return body.why if isinstance(body, UnreadableBody) else "it cannot be read"
        return (self.unread or {}).get(source, "it cannot be read")


class UnreadableBody:
    """A body that a JSON Pointer cannot look into, and why."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class Picker:
    """An endpoint's cases, made ready to be tried: :meth:`pick` answers the first whose
    conditions all hold (each by :func:`meets`), as trying them in order would.

    A run of consecutive cases that each test one place for equality with a
    different plain value (``/input/n: 1``, ``/input/n: 2`` ...: the common
    way to script answers by input) is one dict lookup instead of a test per
    case: the first case of the run with the request's value is the first of
    the run that holds, since every other one tests the same place for
    another value. A value the dict cannot stand for exactly (a float, a
    boolean, several values, none) tries the run's cases one by one.
    """

    __slots__ = ("_steps",)

    def __init__(self, cases: Sequence[Case]) -> None:
        steps: list[_Tested | _Run | _Searched] = []
        for case in cases:
            key = _indexable(case)
            searched = _searchable(case)
            last = steps[-1] if steps else None
            if key is not None and isinstance(last, _Run) and last.place == key[0]:
                last.add(case, key[1])
            elif key is not None:
                steps.append(_Run(key[0], case, key[1]))
            elif searched is not None and isinstance(last, _Searched) and last.place == searched:
                last.cases.append(case)
            elif searched is not None:
                steps.append(_Searched(searched, case))
            else:
                steps.append(_tested(case))
        ready: list[_Tested | _Run | _Searched] = []
        for step in steps:
            if isinstance(step, _Run) and len(step.cases) == 1:
                ready.append(_tested(step.cases[0][0]))
            elif isinstance(step, _Searched) and (len(step.cases) == 1 or not step.compile()):
                ready.extend(_tested(case) for case in step.cases)
            else:
                ready.append(step)
        self._steps = tuple(ready)

    def pick(self, request: Readable) -> Case | None:
        facts = Facts(request)
        for step in self._steps:
            if type(step) is _Searched:
                picked = step.find(facts)
                if picked is not None:
                    return picked
                continue
            if type(step) is _Run:
                found = step.find(facts)
                if not isinstance(found, _NotIndexed):
                    if found is not None:
                        return found
                    continue
                tested: Sequence[_Tested] = step.cases
            else:
                tested = (step,)  # type: ignore[assignment]
            for case, tests in tested:
                for test in tests:
                    if not test(facts):
                        break
                else:
                    return case
        return None


_Test = Callable[["Facts"], bool]
_Tested = tuple[Case, tuple[_Test, ...]]
"""A case and a test per condition (what :func:`meets` answers, made for that condition)."""


def _tested(case: Case) -> _Tested:
    return (case, tuple(_test_of(condition) for condition in case.conditions))


def _test_of(condition: Condition) -> _Test:
    """:func:`meets` for *condition*, as one function made for it: a lone ``equals`` or
    ``matches`` tests without a call per check (the cost of a case is its tests)."""
    checks, place = condition.checks, condition.place
    if len(checks) != 1 or checks[0].operator not in ("equals", "matches"):
        return functools.partial(meets, condition)

    def values_of(facts: Facts) -> list[Any] | None:
        found = facts.found
        if place in found:
            return found[place]
        return found.setdefault(place, _values(condition, facts))

    if checks[0].operator == "matches":
        search = checks[0].operand.search

        def matches(facts: Facts) -> bool:
            for value in values_of(facts) or ():
                if type(value) is str and search(value) is not None:
                    return True
            return False

        return matches
    want = checks[0].operand
    kind = type(want)
    plain = kind in _PLAIN

    def equals(facts: Facts) -> bool:
        for value in values_of(facts) or ():
            if (value == want) if plain and type(value) is kind else same(value, want):
                return True
        return False

    return equals


_EXACT = frozenset({str, int, type(None)})
"""Plain values whose dict key is their JSON identity (bool and float are not: True
hashes as 1, and 1.0 as 1, which JSON tells apart or not as a dict would not)."""


class _NotIndexed:
    """A request value a run's dict cannot stand for: try its cases one by one."""


_NOT_INDEXED = _NotIndexed()


class _Run:
    """Consecutive cases each testing *place* for equality with a value: by value."""

    __slots__ = ("by_value", "cases", "place")

    def __init__(self, place: tuple[str, str], case: Case, value: Any) -> None:
        self.place = place
        self.cases: list[_Tested] = []
        self.by_value: dict[Any, Case] = {}
        self.add(case, value)

    def add(self, case: Case, value: Any) -> None:
        self.cases.append(_tested(case))
        self.by_value.setdefault(value, case)  # the first case with a value is the one

    def find(self, facts: Facts) -> Case | _NotIndexed | None:
        """The run's case for the request's value, None for no case of the run, or
        _NOT_INDEXED when the value has to be tried case by case."""
        condition = self.cases[0][0].conditions[0]
        place, found = self.place, facts.found
        values = (
            found[place] if place in found else found.setdefault(place, _values(condition, facts))
        )
        if values is None or not values:
            return None  # not JSON, or absent: no equality holds
        if len(values) != 1 or type(values[0]) not in _EXACT:
            return _NOT_INDEXED
        return self.by_value.get(values[0])


class _Searched:
    """Consecutive cases each testing *place* with one expression (``matches``): one RE2
    search of the value for all of them, the first case whose expression it matches."""

    __slots__ = ("cases", "place", "search")

    def __init__(self, place: tuple[str, str], case: Case) -> None:
        self.place = place
        self.cases: list[Case] = [case]
        self.search: Callable[[str], list[int] | None] | None = None

    def compile(self) -> bool:
        """Make the one search; False when RE2 cannot hold the expressions in one."""
        self.search = searcher([c.conditions[0].checks[0].operand for c in self.cases])
        return self.search is not None

    def find(self, facts: Facts) -> Case | None:
        """The run's first case the request's value matches (any of a repeated parameter's
        values), None for none."""
        condition = self.cases[0].conditions[0]
        place, found = self.place, facts.found
        values = (
            found[place] if place in found else found.setdefault(place, _values(condition, facts))
        )
        search = self.search
        assert search is not None  # (compiled by the picker)
        first = None
        for value in values or ():
            if type(value) is str and (matched := search(value)) is not None:
                index = min(matched)
                first = index if first is None else min(first, index)
        return None if first is None else self.cases[first]


def _searchable(case: Case) -> tuple[str, str] | None:
    """The place when *case* is one ``matches`` test on it."""
    if len(case.conditions) != 1:
        return None
    [condition] = case.conditions
    checks = condition.checks
    if len(checks) != 1 or checks[0].operator != "matches":
        return None
    return condition.place if isinstance(checks[0].operand, Pattern) else None


def _indexable(case: Case) -> tuple[tuple[str, str], Any] | None:
    """(place, value) when *case* is one equality test with an exactly hashable value."""
    if len(case.conditions) != 1:
        return None
    [condition] = case.conditions
    if len(condition.checks) != 1 or condition.checks[0].operator != "equals":
        return None
    value = condition.checks[0].operand
    return (condition.place, value) if type(value) in _EXACT else None


def misses(cases: Sequence[Case], request: Readable) -> list[dict[str, Any]]:
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
    """The request's values of *condition*'s place (none: absent); None when they cannot
    be read (a body pointer into a body that is not JSON, a body or headers not kept)."""
    source = condition.source
    if source == "body":
        body = facts.json()
        if isinstance(body, UnreadableBody):
            return None
        found = resolve(body, condition.pointer)
        return [] if found is ABSENT else [found]
    if source == "headers":
        try:
            header = facts.request.header(condition.name)
        except Unread as unread:  # not kept: no test on it can be told
            facts.cannot("headers", unread)
            return None
        return [] if header is None else [header]
    if source == "query":
        return facts.query(condition.name)
    text = facts.text()
    return None if text is None else [text]


def failed(condition: Condition, facts: Facts) -> str | None:
    """Why *condition* does not hold for the request of *facts*; None when it holds."""
    place = condition.place
    found = facts.found
    values = found[place] if place in found else found.setdefault(place, _values(condition, facts))
    if values is None:
        return f"{condition.label}: {facts.why(condition.source)}"
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
            if not _is_index(token) or int(token) >= len(value):
                return ABSENT
            value = value[int(token)]
        else:
            return ABSENT
    return value


def _is_index(token: str) -> bool:
    """Whether *token* is an array index in a pointer: ASCII digits, no sign, no leading
    zero (RFC 6901's ``0|[1-9][0-9]*``; told without a pattern to compile at import)."""
    return token.isascii() and token.isdigit() and (token[0] != "0" or token == "0")


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
