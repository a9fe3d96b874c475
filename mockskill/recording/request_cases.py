"""Telling an endpoint's recorded requests apart: the ``when:`` of each case.

Requests to one endpoint that differ — in their query, a header that
matters, their body — become cases, each playing the answers its own
requests got. A :class:`Shape` is what of a request a case can test (secrets
and transport headers left out); :func:`cases` finds, for each distinct
shape, a few conditions that hold for it and for no other shape seen: JSON
body pointers that equal (or are absent), query parameters and headers that
equal (or are absent), the raw body matched whole where it is not JSON.

The conditions are then played as the engine plays them (first case that
holds), on the recorded requests themselves, so that each request's answer
lands in the case a replay will pick for it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..engine.conditions import ABSENT, resolve, same

MAX_LEAVES = 64
"""Body pointers tried per request; a bigger body is told apart by its whole."""


@dataclass(frozen=True)
class Shape:
    """What of one request a case may test."""

    query: tuple[tuple[str, tuple[str, ...]], ...]
    """Each parameter's values, by name, sorted."""
    headers: tuple[tuple[str, str], ...]
    """The headers that matter (lower-case names, sorted)."""
    body_key: str
    """The body, canonical (JSON with sorted keys, or the text): what makes two alike."""
    json: Any = field(default=ABSENT, compare=False, hash=False)
    """The body as JSON (secret fields out), or ABSENT when it is not JSON."""
    text: str | None = field(default=None, compare=False, hash=False)
    """The body as text when it is not JSON and holds no secret; None otherwise."""


@dataclass(frozen=True)
class Test:
    """One condition of a case: where (source, name) and the test (equals a value, absent)."""

    source: str
    name: str
    absent: bool = False
    value: Any = None

    def holds(self, shape: Shape) -> bool:
        if self.source == "query":
            values = dict(shape.query).get(self.name, ())
            return not values if self.absent else any(v == self.value for v in values)
        if self.source == "headers":
            header = dict(shape.headers).get(self.name)
            return header is None if self.absent else header == self.value
        if self.source == "body":
            if shape.json is ABSENT:
                return False  # a body that is not JSON meets no pointer condition
            found = resolve(shape.json, _tokens(self.name))
            if self.absent:
                return found is ABSENT
            return found is not ABSENT and same(found, self.value)
        return shape.text is not None and shape.text == self.value

    def written(self) -> Any:
        """The test as ``when:`` writes it."""
        if self.absent:
            return {"absent": True}
        if self.source == "raw_body":
            # RE2 (scenario.conditions) spells the end of the text \z, not \Z.
            return {"matches": r"\A" + re.escape(self.value) + r"\z"}
        if isinstance(self.value, (dict, list)) or self.value is None:
            return {"equals": self.value}
        return self.value


def when(tests: tuple[Test, ...]) -> dict[str, Any]:
    """A case's ``when:`` mapping of *tests*."""
    out: dict[str, Any] = {}
    for test in tests:
        if test.source == "raw_body":
            out["raw_body"] = test.written()
        else:
            out.setdefault(test.source, {})[test.name] = test.written()
    return out


def _tokens(pointer: str) -> tuple[str, ...]:
    if pointer == "":
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _pointer(tokens: tuple[str, ...]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _leaves(value: Any, tokens: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """(pointer, value) of every leaf of a JSON value (empty containers are leaves)."""
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*tokens, str(k)))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*tokens, str(i)))]
    return [(_pointer(tokens), value)]


def _candidates(shape: Shape, others: list[Shape]) -> list[Test]:
    """Tests that hold for *shape*, the likeliest to tell it apart first."""
    out: list[Test] = []
    if shape.json is not ABSENT:
        leaves = _leaves(shape.json)
        if len(leaves) <= MAX_LEAVES:
            out += [Test("body", p, value=v) for p, v in leaves]
            mine = {p for p, _ in leaves}
            theirs = {
                p
                for o in others
                if o.json is not ABSENT and len(_leaves(o.json)) <= MAX_LEAVES
                for p, _ in _leaves(o.json)
            }
            out += [Test("body", p, absent=True) for p in sorted(theirs - mine)]
    query = dict(shape.query)
    out += [Test("query", name, value=v) for name, values in shape.query for v in values]
    out += [
        Test("query", name, absent=True)
        for name in sorted({n for o in others for n, _ in o.query} - set(query))
    ]
    headers = dict(shape.headers)
    out += [Test("headers", name, value=v) for name, v in shape.headers]
    out += [
        Test("headers", name, absent=True)
        for name in sorted({n for o in others for n, _ in o.headers} - set(headers))
    ]
    return [t for t in out if t.holds(shape)]


def _whole(shape: Shape) -> Test | None:
    """The test of the whole body: what tells apart what no part of it does."""
    if shape.json is not ABSENT:
        return Test("body", "", value=shape.json)
    if shape.text is not None:
        return Test("raw_body", "", value=shape.text)
    return None


def _telling(shape: Shape, others: list[Shape]) -> tuple[Test, ...]:
    """A few tests that hold for *shape* and, together, for none of *others* it can tell
    apart (greedy: the test that rules out most of the rest, until none is left)."""
    left = [o for o in others if o != shape]
    chosen: list[Test] = []
    candidates = _candidates(shape, left)
    while left:
        best, ruled_out = None, 0
        for test in candidates:
            n = sum(1 for o in left if not test.holds(o))
            if n > ruled_out:
                best, ruled_out = test, n
        if best is None:
            break
        chosen.append(best)
        left = [o for o in left if best.holds(o)]
    whole = _whole(shape)
    if left and whole is not None and any(not whole.holds(o) for o in left):
        chosen.append(whole)  # (a body no pointer tells apart: a long one, or not JSON)
        left = [o for o in left if whole.holds(o)]
    # what is left holds for every test of this shape: it is tried before it (cases())
    return tuple(chosen)


def cases(shapes: list[Shape]) -> tuple[list[tuple[Test, ...]], list[int]]:
    """Each distinct shape's tests, in the order the cases are tried, and for each
    request (of *shapes*, in order) the index of the case a replay picks for it.

    A shape whose every test also holds for another (its query a subset of the
    other's) comes after that other, so that the more particular case is tried first.
    """
    distinct = list(dict.fromkeys(shapes))
    tests = {s: _telling(s, distinct) for s in distinct}
    order: list[Shape] = []
    pending = list(distinct)
    while pending:
        for s in pending:  # the first whose tests no other pending shape also meets
            if not any(o != s and all(t.holds(o) for t in tests[s]) for o in pending):
                break
        else:
            s = pending[0]  # alike to its conditions: it takes the others' requests too
        order.append(s)
        pending.remove(s)
    listed = [tests[s] for s in order]
    picked = []
    for shape in shapes:
        index = next(
            (i for i, ts in enumerate(listed) if all(t.holds(shape) for t in ts)), len(listed)
        )
        picked.append(index)
    return listed, picked


def shape_of(
    query: list[tuple[str, str]], headers: dict[str, str], body: Any, text: str | None
) -> Shape:
    """The :class:`Shape` of a request: *body* its JSON (secrets out) or ABSENT."""
    grouped: dict[str, list[str]] = {}
    for name, value in query:  # (in any order: a test holds if any value does)
        grouped.setdefault(name, []).append(value)
    grouped = {name: sorted(set(values)) for name, values in grouped.items()}
    if body is not ABSENT:
        key = "json:" + json.dumps(body, sort_keys=True)
    else:
        key = "text:" + (text if text is not None else "(not testable)")
    return Shape(
        tuple(sorted((k, tuple(v)) for k, v in grouped.items())),
        tuple(sorted(headers.items())),
        key,
        body,
        text,
    )
