"""Problems found in scenario files, and how they are reported.

A :class:`Problem` says where (file:line:column and the path inside the
document), what was expected, what was found, and a hint (a did-you-mean or
a fix). Loading collects every problem before it gives up, and raises one
:class:`ScenarioError` that carries them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """``("skills", 0, "invoke")`` → ``skills[0].invoke``; the root is ``(top level)``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def describe(value: Any) -> str:
    """What was found, for a message: the value and its YAML kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return f"{value} (an integer)"
    if isinstance(value, float):
        return f"{value} (a number with a fraction)"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"{shown!r} (a string)"
    if isinstance(value, dict):
        keys = ", ".join(str(k) for k in list(value)[:6])
        more = ", ..." if len(value) > 6 else ""
        return f"a mapping with keys {keys}{more}" if value else "an empty mapping"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return type(value).__name__


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``did you mean 'x'?`` for the nearest choice, or an empty string."""
    import difflib  # a suggestion for a misspelling: not at start-up

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong in a scenario file."""

    file: str
    line: int
    """1-based; 0 (and column 0) for Python data, placed by *path* alone (:meth:`by_path`)."""
    column: int
    path: str
    expected: str
    """What was wanted; empty when *found* says it all (YAML syntax errors)."""
    found: str
    hint: str = ""

    def by_path(self, files: Iterable[str]) -> Problem:
        """This problem as said of Python data, *files* (read as YAML their authors never
        saw): placed by its path alone (line and column 0) when it is in one of them, and
        naming no line of theirs in its text (a clash's "first at ...")."""
        import re  # Python data with a problem only

        files = set(files)
        names = "|".join(re.escape(f) for f in sorted(files))
        if not names:
            return self
        unplaced = re.compile(rf"({names}):\d+:\d+")
        found, hint = unplaced.sub(r"\1", self.found), unplaced.sub(r"\1", self.hint)
        line, column = (0, 0) if self.file in files else (self.line, self.column)
        return Problem(self.file, line, column, self.path, self.expected, found, hint)

    def __str__(self) -> str:
        # Line 0: Python data, placed by its path in the data (Problem.by_path)
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        if not self.expected:  # a YAML syntax error: *found* is the whole sentence
            text = f"{where}: {self.found}"
        else:
            text = f"{where}: {self.path}: expected {self.expected}"
            text += f", found {self.found}"
        if self.hint:
            text += f"; {self.hint}"
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "expected": self.expected,
            "found": self.found,
            "hint": self.hint,
            "text": str(self),
        }


def format_report(problems: Sequence[Problem]) -> str:
    """All problems, one a line, sorted by file and position, with a count."""
    lines = [str(p) for p in sorted(problems)]
    files = len({p.file for p in problems})
    noun = "problem" if len(problems) == 1 else "problems"
    where = "file" if files == 1 else "files"
    lines.append(f"{len(problems)} {noun} in {files} {where}; nothing was loaded.")
    return "\n".join(lines)


class ScenarioError(Exception):
    """Scenario files that cannot be served; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(sorted(problems))
        super().__init__(format_report(self.problems))
