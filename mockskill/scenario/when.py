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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .source import Position

ValueSource = Literal["headers", "query", "body", "raw_body"]
Operator = Literal["equals", "contains", "matches", "exists", "absent"]


class PatternError(ValueError):
    """An expression RE2 cannot compile: :attr:`reason` says why, :attr:`hint` what to
    write instead (empty when RE2's own message is all there is to say)."""

    def __init__(self, reason: str, hint: str = "") -> None:
        super().__init__(reason)
        self.reason, self.hint = reason, hint


# What RE2 refuses that Python's re takes, told by the start of RE2's message: why it is
# refused, and what to write instead.
_REFUSED: tuple[tuple[str, str, str], ...] = (
    (
        "invalid escape sequence: \\Z",
        "RE2 spells the end of the text \\z",
        "write \\z (the end of the text), or $",
    ),
    *(
        (
            f"invalid escape sequence: \\{digit}",
            "a backreference needs backtracking, which can take time exponential in the request",
            "spell out the repeated text, or test the value with one case per alternative",
        )
        for digit in "123456789"
    ),
    *(
        (
            f"invalid perl operator: {operator}",
            "a lookaround needs backtracking, which can take time exponential in the request",
            "match the text itself (foo(?=bar): foobar), or put a case taking the requests "
            "to exclude before this one (the first case that holds plays)",
        )
        for operator in ("(?=", "(?!", "(?<=", "(?<!")
    ),
    (
        "invalid perl operator: (?>",
        "an atomic group is Python's way to limit backtracking, and RE2 never backtracks",
        "write a plain group, (?:...)",
    ),
    (
        "invalid perl operator: (?x",
        "RE2 has no verbose mode",
        "write the expression without its spaces and comments",
    ),
    (
        "invalid repetition size",
        "RE2 counts a repetition up to 1000",
        "use + or *, or a smaller count",
    ),
    (
        "pattern too large",
        "it compiles to more than RE2's memory bound",
        "make it shorter (fewer counted repetitions), or test parts of it in separate cases",
    ),
)


class Pattern:
    """A ``matches:`` regular expression, compiled by RE2 (the google-re2 binding): a
    search takes time linear in the text whatever the expression, so no request can stall
    the loop through one. Equal when written the same (a reload compares scenario sets).

    :attr:`search` answers the text's match, or None, like :meth:`re.Pattern.search` for
    the tests that ask only whether there is one.
    """

    __slots__ = ("pattern", "search")

    pattern: str
    search: Callable[[str], object]

    def __init__(self, pattern: str) -> None:
        """Compile *pattern*; a :class:`PatternError` says why RE2 cannot."""
        import re2  # (a set with no `matches:` never loads it)

        options = re2.Options()
        options.log_errors = False  # the problem is told as a load problem, not on stderr
        try:
            re2.compile(pattern, options)
        except re2.error as error:
            raise _refused(pattern, error) from None
        # A one-expression set answers whether the text matches, without the spans and
        # match object a search builds: the test needs no more.
        matcher = re2.Set.SearchSet(options)
        try:
            matcher.Add(pattern)
            matcher.Compile()
        except re2.error:
            raise PatternError(
                "it compiles to more than RE2's memory bound", _REFUSED[-1][2]
            ) from None
        self.pattern = pattern
        self.search = matcher.Match

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


def searcher(patterns: list[Pattern]) -> Callable[[str], list[int] | None] | None:
    """One search of a text for several patterns (RE2's set): the indices of those it
    matches, or None; None when RE2 cannot hold them all in one (then search one by one)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    matcher = re2.Set.SearchSet(options)
    try:
        for pattern in patterns:
            matcher.Add(pattern.pattern)
        matcher.Compile()
    except re2.error:
        return None
    match: Callable[[str], list[int] | None] = matcher.Match
    return match


def _refused(pattern: str, error: Exception) -> PatternError:
    said = error.args[0] if error.args else ""
    message = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    if message.startswith("invalid perl operator: (?P") and "(?P=" in pattern:
        message = "invalid escape sequence: \\1"  # (RE2 cuts the name off its message)
    for start, reason, hint in _REFUSED:
        if message.startswith(start):
            return PatternError(reason, hint)
    repeated = message.removeprefix("bad repetition operator: ")
    if repeated != message and repeated.endswith("+") and len(repeated) > 1:
        return PatternError(
            "a possessive quantifier is Python's way to limit backtracking, and RE2 never "
            "backtracks",
            f"write {repeated[:-1]} alone",
        )
    return PatternError(message)


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
        shown = self.operand.pattern if isinstance(self.operand, Pattern) else self.operand
        return f"{self.operator} {shown!r}"


@dataclass(frozen=True)
class Condition:
    """Tests on one value of the request; all must hold."""

    source: ValueSource
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


def parse_pointer(text: str) -> tuple[str, ...] | None:
    """RFC 6901: the reference tokens of *text*, unescaped; None when it is not a pointer."""
    if text == "":
        return ()
    if not text.startswith("/") or re.search(r"~(?![01])", text):
        return None
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in text[1:].split("/"))
