"""The conditions of a case (``when:``), frozen: which value of a request, and its tests.

A :class:`Condition` names one place in a request (a header, a query
parameter, a body pointer, the raw body) and the :class:`Check` s its value
must pass. The case reader (:mod:`.cases`) builds them; the engine's picker
(:mod:`mockskill.engine.conditions`) compiles them into its tables. They are
apart from the model's steps and sequences because they say which request a
case takes, not what it answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .source import Position

Source = Literal["headers", "query", "body", "raw_body"]
Operator = Literal["equals", "contains", "matches", "exists", "absent"]


@dataclass(frozen=True)
class Check:
    """One test on one value: *operand* is the JSON value (``equals``, ``contains``), the
    compiled pattern (``matches``), or unused (``exists``, ``absent``)."""

    operator: Operator
    operand: Any = None

    @property
    def text(self) -> str:
        """The test as the scenario wrote it, for a near-miss: ``equals 'boom'``."""
        if self.operator in ("exists", "absent"):
            return self.operator
        shown = self.operand.pattern if isinstance(self.operand, re.Pattern) else self.operand
        return f"{self.operator} {shown!r}"


@dataclass(frozen=True)
class Condition:
    """Tests on one value of the request; all must hold."""

    source: Source
    name: str
    """A header's name (lower case), a query parameter's, a JSON Pointer; "" for raw_body."""
    pointer: tuple[str, ...]
    """A body pointer's tokens, unescaped (``/a~1b/0`` -> ``("a/b", "0")``); () otherwise."""
    checks: tuple[Check, ...]
    where: Position
    place: tuple[str, str] = field(init=False, repr=False, compare=False)
    """Where its value is, (source, name): the same for every condition there."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "place", (self.source, self.name))

    @property
    def label(self) -> str:
        """Where the value is, as the scenario wrote it: ``body /input/text``, ``header x-a``."""
        if self.source == "raw_body":
            return "the raw body"
        kind = {"headers": "header", "query": "query parameter", "body": "body"}[self.source]
        return f"{kind} {self.name or '(the whole body)'}"
