"""What PyYAML says of broken YAML, said as a sentence with a fix.

PyYAML's scanner, parser and reader (libyaml's and the pure-Python ones,
whose wordings differ) report a *context* ("while scanning a quoted
scalar") and a *problem* ("found unexpected end of stream"), written to be
read after "found" or standalone, never both. :func:`explain` turns one
error into where it is, one sentence saying what is wrong there, and a
hint saying how to fix it — e.g. ``a tab character indents this line``,
``YAML indents with spaces``. A message no rule knows is kept, trimmed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class Explained:
    """One syntax error: where (1-based), what is wrong there, and how to fix it."""

    line: int
    column: int
    sentence: str
    hint: str


@dataclass(frozen=True)
class _Seen:
    """What a rule may mention: the character at the problem and where the context began."""

    char: str
    opened: str


_Rule = tuple[str, Callable[[_Seen], str], str, bool]
"""(pattern over "context | problem", sentence, hint, place at the context mark)."""


def _say(text: str) -> Callable[[_Seen], str]:
    return lambda seen: text.format(char=seen.char, opened=seen.opened)


_NO_TAGS = "scenario files take no tags; remove it"
_UNICODE_RANGE = "Unicode ends at \\U0010FFFF, and \\ud800-\\udfff are no characters on their own"
"""libyaml's words for both: an escape past Unicode's end, and a lone surrogate's."""

# Each pattern covers libyaml's wording and the pure-Python one (PyYAML's
# scanner.py, parser.py and composer.py). First match wins.
_RULES: tuple[_Rule, ...] = (
    (
        r"cannot start any token",
        _say("{char} cannot start a plain value"),
        "quote the value if it is text (YAML reserves {char} there)",
        False,
    ),
    (
        r"could not find expected ':'",
        _say("a key without ':' after it"),
        "write 'key: value', or indent the line so that it continues the value above",
        True,
    ),
    (
        r"mapping values are not allowed|found unexpected ':'",
        _say("': ' where no mapping can begin"),
        "indent the keys of one mapping alike, and quote a value that holds ': ' ('a: b')",
        False,
    ),
    (
        r"sequence entries are not allowed",
        _say("a '- ' list item where no list can begin"),
        "put each item on a line of its own, dashes indented alike; quote a value that"
        " begins with '- '",
        False,
    ),
    (
        r"mapping keys are not allowed",
        _say("a '? ' key where no mapping can begin"),
        "quote a value that begins with '?'",
        False,
    ),
    (
        r"flow sequence.*(expected ',' or ']'|expected node content|but got)",
        _say("the list opened at {opened} is not closed here"),
        "separate its items with ', ' and close it with ']'",
        False,
    ),
    (
        r"flow mapping.*(expected ',' or '}'|expected node content|but got)",
        _say("the mapping opened at {opened} is not closed here"),
        "separate its entries with ', ' and close it with '}}'",
        False,
    ),
    (
        r"expected '-' indicator|block collection.*expected <block end>",
        _say("this line is not a '- ' item of the list that begins at {opened}"),
        "indent it as the list's items are, or begin it with '- '",
        False,
    ),
    (
        r"expected key|block mapping.*expected <block end>",
        _say("this line is not a 'key: value' of the mapping that begins at {opened}"),
        "indent the keys of one mapping alike",
        False,
    ),
    (
        r"expected (the )?node content",
        _say("a value is missing here"),
        "write a value (or null), or remove the extra ',' or ':'",
        False,
    ),
    (
        r"expected '?<document start>'?",
        _say("more text after the end of the document"),
        "a document is one value: look for an extra ']' or '}}', or separate documents with ---",
        False,
    ),
    (
        r"unexpected end of stream",
        _say("the quoted string opened at {opened} is not closed"),
        "add the closing quote",
        False,
    ),
    (
        r"unexpected document (indicator|separator)",
        _say("a document marker (--- or ...) inside the quoted string opened at {opened}"),
        "close the quote before it",
        False,
    ),
    (
        r"while scanning an? (%YAML |%TAG )?directive|unknown directive",
        _say("a directive (a line beginning with %) that is malformed or unknown"),
        "only %YAML and %TAG exist; quote a value that begins with %",
        False,
    ),
    (
        r"while scanning an? (anchor|alias)",
        _say("an anchor or alias without a name of letters, digits, - and _"),
        "name it (&defaults, *defaults), or quote the value if it is text",
        False,
    ),
    (
        r"while (scanning|parsing) an? tag|tag URI|expected URI|URI escape",
        _say("a malformed tag (!...)"),
        _NO_TAGS,
        False,
    ),
    (
        r"unknown escape character",
        _say("an escape YAML does not know, in a double-quoted string"),
        "write \\\\ for a backslash, or use single quotes (no escapes)",
        False,
    ),
    (
        r"hexdecimal number|hexadecimal numbers",
        _say("an escape (\\x, \\u or \\U) without enough hexadecimal digits"),
        "give 2, 4 or 8 hex digits, or write \\\\ for a backslash",
        False,
    ),
    (
        r"invalid Unicode character escape",
        _say("an escape for a code point that is not a Unicode character"),
        _UNICODE_RANGE,
        False,
    ),
    (
        r"undefined alias",
        _say("an alias (*name) with no anchor (&name) before it"),
        "define the anchor first, or quote the value if it is text",
        False,
    ),
    (
        r"duplicate anchor",
        _say("an anchor (&name) defined twice"),
        "give each anchor its own name",
        False,
    ),
    (
        r"incompatible YAML document",
        _say("a %YAML version other than 1.x"),
        "write %YAML 1.1, or leave the directive out",
        False,
    ),
    (
        r"duplicate %?YAML directive",
        _say("the %YAML directive is given twice"),
        "keep one",
        False,
    ),
    (
        r"duplicate (%TAG directive|tag handle)",
        _say("a %TAG directive for a handle given already"),
        "keep one",
        False,
    ),
    (
        r"undefined tag handle",
        _say("a tag whose handle no %TAG directive defines"),
        _NO_TAGS,
        False,
    ),
    (
        r"indentation indicator",
        _say("an indentation indicator of 0 after | or >"),
        "use 1 to 9, or leave it out",
        False,
    ),
    (
        r"while scanning a block scalar",
        _say("text after | or > on the line that begins a block scalar"),
        "only an indentation digit, + or - and a comment may follow | or >",
        False,
    ),
)

TAB = "a tab character indents this line"
TAB_HINT = "YAML indents with spaces"


def explain(exc: yaml.MarkedYAMLError, text: str) -> Explained:
    """Where *exc* (raised reading *text*) is, and what it means, in words."""
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line, mark.column) if mark else (0, 0)
    problem = str(exc.problem or "")
    context = str(exc.context or "")
    tab = _tab(text, line, column, problem)
    if tab is not None:
        return tab
    seen = _Seen(_char(text, mark), _where(exc.context_mark))
    said = f"{context} | {problem}"
    for pattern, sentence, hint, at_context in _RULES:
        if re.search(pattern, said):
            if at_context and exc.context_mark is not None:
                line, column = exc.context_mark.line, exc.context_mark.column
            return Explained(line + 1, column + 1, sentence(seen), hint.format(char=seen.char))
    return Explained(line + 1, column + 1, _plain(problem, context), "")


def explain_reader(exc: yaml.reader.ReaderError, text: str) -> Explained:
    """A character YAML refuses anywhere in a file (control characters, U+FFFE ...)."""
    line, column = _line_column(text, int(exc.position))
    code = exc.character if isinstance(exc.character, int) else -1
    if code < 0:
        return Explained(line, column, f"{exc.reason}", "")
    sentence = f"the character U+{code:04X} cannot be written as it is in a YAML file"
    hint = f'write it as an escape in a double-quoted string: "\\x{code:02X}"'
    if code > 0xFF:
        hint = f'write it as an escape in a double-quoted string: "\\u{code:04X}"'
    return Explained(line, column, sentence, hint)


def explain_surrogate(text: str, position: int) -> Explained:
    """A lone surrogate (from Python text, never from a UTF-8 file): not a character."""
    line, column = _line_column(text, position)
    code = ord(text[position]) if 0 <= position < len(text) else 0
    sentence = f"U+{code:04X} (half of a surrogate pair) is not a character"
    return Explained(line, column, sentence, "remove it, or write the whole character")


def _line_column(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of *position* in *text*."""
    position = max(0, min(position, len(text)))
    return text.count("\n", 0, position) + 1, position - (text.rfind("\n", 0, position) + 1) + 1


def _tab(text: str, line: int, column: int, problem: str) -> Explained | None:
    """The tab behind an error, if a tab is what YAML stumbled on."""
    lines = text.split("\n")
    row = lines[line] if 0 <= line < len(lines) else ""
    at_tab = row[column : column + 1] == "\t"
    if not at_tab and "tab character" not in problem:
        return None
    indent = row[: len(row) - len(row.lstrip(" \t"))]
    if "\t" in indent and (column <= len(indent) or "tab character" in problem):
        return Explained(line + 1, indent.index("\t") + 1, TAB, TAB_HINT)
    if at_tab:
        return Explained(line + 1, column + 1, "a tab character where YAML wants a space", "")
    return Explained(line + 1, column + 1, TAB, TAB_HINT)


def _char(text: str, mark: yaml.Mark | None) -> str:
    if mark is None:
        return "this character"
    lines = text.split("\n")
    row = lines[mark.line] if mark.line < len(lines) else ""
    char = row[mark.column : mark.column + 1]
    return repr(char) if char.strip() else "this character"


def _where(mark: yaml.Mark | None) -> str:
    if mark is None:
        return "an earlier line"
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _plain(problem: str, context: str) -> str:
    """A message no rule knows: the problem (without a leading "found"), and its context."""
    sentence = re.sub(r"^found\s+", "", problem).strip()
    sentence = sentence or "something YAML cannot read"
    if context:
        sentence += f" ({context})"
    return sentence
