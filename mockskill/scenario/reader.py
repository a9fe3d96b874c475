"""Checking plain YAML data, one value at a time, collecting every problem.

A :class:`Reader` wraps one parsed document and is handed down the
scenario's structure; each check records a positioned problem and returns
None (or False) instead of raising, so that one load reports everything
wrong at once, the way cfgv does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

from .problems import Path, Problem, describe, did_you_mean
from .source import Document, Position


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_BOOLEAN_WORDS = {
    **dict.fromkeys(("yes", "y", "on", "true", "1"), "true"),
    **dict.fromkeys(("no", "n", "off", "false", "0"), "false"),
}
"""Text a person may mean as a boolean, and the boolean to write instead."""

MAX_DELAY_MS = 300_000
"""The longest wait a step may ask for, by default; longer ones are refused, never clamped."""


class Reader:
    """Checks on one document's data; problems land in :attr:`problems`."""

    MISSING: Final = _Missing()

    def __init__(
        self,
        doc: Document,
        problems: list[Problem],
        *,
        max_delay_ms: int = MAX_DELAY_MS,
        warnings: list[Problem] | None = None,
    ) -> None:
        self.doc = doc
        self.problems = problems
        self.max_delay_ms = max_delay_ms
        self.warnings: list[Problem] = [] if warnings is None else warnings
        """What is allowed but likely a mistake (``mockskill validate`` shows them)."""
        self.states_set: set[str] = set()
        """The states the document's steps move a session into (:mod:`.states`)."""
        self.states_required: list[tuple[Path, str]] = []
        """The states its cases require, where (:func:`.states.check` checks them)."""

    def bad(
        self, path: Path, expected: str, found: str, hint: str = "", *, at_key: bool = False
    ) -> None:
        self.problems.append(self.doc.problem(path, expected, found, hint, at_key=at_key))

    def warn(self, path: Path, expected: str, found: str, hint: str = "") -> None:
        """Like :meth:`bad`, for something that loads (a provider broken on purpose may mean it)."""
        self.warnings.append(self.doc.problem(path, expected, found, hint))

    def boolean(self, value: Any, path: Path, expected: str = "true or false") -> bool | None:
        """*value* (at *path*) as a boolean; None, with a problem that offers what is valid.

        An unquoted ``yes``/``no``/``on``/``off`` was a problem as it was read ("quote
        it, or write true"); where only a boolean is valid, quoting would not do, so
        that problem is said again: write ``true`` (or ``false``).
        """
        said = self.doc.words.get(path)
        if said is not None and said[1] in self.problems:
            word, problem = said
            self.problems[self.problems.index(problem)] = self.doc.problem(
                path,
                expected,
                f"{word} unquoted (YAML 1.1's boolean {str(value).lower()}, a word to YAML 1.2)",
                f"write {str(value).lower()}",
            )
            return None
        if isinstance(value, bool):
            return value
        meant = _BOOLEAN_WORDS.get(value.lower()) if isinstance(value, str) else None
        self.bad(path, expected, describe(value), f"write {meant}" if meant else "")
        return None

    def position(self, path: Path) -> Position:
        line, column = self.doc.position(path)
        return Position(self.doc.file, line, column)

    def keys(
        self,
        mapping: dict[Any, Any],
        path: Path,
        allowed: Sequence[str],
        required: Sequence[str] = (),
    ) -> bool:
        """Report unknown keys (with a did-you-mean) and missing required ones."""
        ok = True
        for key in mapping:
            if key not in allowed:
                hint = did_you_mean(str(key), allowed)
                if not hint:
                    hint = "allowed here: " + ", ".join(allowed)
                self.bad((*path, key), "a known key", f"unknown key {key!r}", hint, at_key=True)
                ok = False
        for key in required:
            if key not in mapping:
                self.bad(path, f"the key {key!r}", "it missing")
                ok = False
        return ok

    def among(
        self,
        value: Any,
        path: Path,
        choices: Iterable[str],
        *,
        shown: Iterable[str] | None = None,
    ) -> bool:
        """Whether *value* is one of *choices*; if not, say so with a did-you-mean.

        *shown* are the choices the problem lists, when not all of them are
        meant to be written (a did-you-mean still looks at every choice).
        """
        choices = tuple(choices)
        if isinstance(value, str) and value in choices:
            return True
        listed = ", ".join(choices if shown is None else shown)
        self.bad(path, f"one of {listed}", describe(value), did_you_mean(str(value), choices))
        return False

    def mapping(self, value: Any, path: Path, what: str) -> dict[Any, Any] | None:
        if isinstance(value, dict):
            return value
        self.bad(path, what, describe(value))
        return None

    def json_bytes(self, value: Any, path: Path) -> bytes | None:
        """*value* encoded as JSON, or None (with a problem) when YAML gave it .nan or .inf."""
        try:
            return json.dumps(value, allow_nan=False).encode()
        except ValueError as exc:
            self.bad(path, "JSON values (no .nan or .inf)", str(exc))
            return None

    def string(
        self, raw: dict[str, Any], key: str, path: Path, *, default: str | None = None
    ) -> str | None:
        value = raw.get(key, default)
        if isinstance(value, str):
            return value
        if value is None and key not in raw:
            return None
        self.bad((*path, key), "a string", describe(value))
        return None

    def integer(
        self,
        raw: dict[str, Any],
        key: str,
        path: Path,
        *,
        default: int,
        minimum: int | None = None,
        maximum: int | None = None,
        unit: str = "",
    ) -> int | None:
        """``raw[key]`` (or *default*) as a whole number within bounds."""
        return self.number_at(
            raw.get(key, default), (*path, key), minimum=minimum, maximum=maximum, unit=unit
        )

    def number_at(
        self,
        value: Any,
        where: Path,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        unit: str = "",
    ) -> int | None:
        """*value* as a whole number within bounds (booleans are not numbers)."""
        suffix = f" {unit}" if unit else ""
        if minimum is not None and maximum is not None:
            wanted = f"a whole number from {minimum} to {maximum}{suffix}"
        elif minimum is not None:
            wanted = f"a whole number of at least {minimum}{suffix}"
        else:
            wanted = f"a whole number{suffix}"
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(where, wanted, describe(value))
            return None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            too_long = unit == "ms" and maximum is not None and value > maximum
            hint = "longer delays are refused, not clamped" if too_long else ""
            self.bad(where, wanted, describe(value), hint)
            return None
        return value
