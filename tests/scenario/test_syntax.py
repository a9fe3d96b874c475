"""YAML syntax errors said in words (mockskill/scenario/syntax.py), as read_text reports them.

Every message PyYAML's scanner, parser, composer and reader can give a
scenario file is read with libyaml (the default, when PyYAML has it) and with
PyYAML's own parser, whose wordings differ.
"""

from __future__ import annotations

import re

import pytest
import yaml

from mockskill.scenario import source
from mockskill.scenario.source import read_text

# (text, line, column, what the problem says): one of each message PyYAML's scanner,
# parser, composer and reader can give a scenario file (libyaml's wording and the
# pure-Python one differ; both are read below).
SYNTAX_ERRORS = [
    pytest.param("a:\n\tb: 1\n", 2, 1, "a tab character indents this line", id="tab"),
    pytest.param("\t- 1\n", 1, 1, "a tab character indents this line", id="tab-first-line"),
    pytest.param(
        "skills:\n  - id: a\n\tinvoke: x\n", 3, 1, "a tab character indents", id="tab-in-plain"
    ),
    pytest.param("a: |\n\tx\n", 2, 1, "a tab character indents", id="tab-in-block-scalar"),
    pytest.param("a:\n  b: 1\n  \tc: 2\n", 3, 3, "a tab character indents", id="tab-after-spaces"),
    pytest.param("a: [1, 2\n", 2, 1, "the list opened at line 1, column 4", id="unclosed-list"),
    pytest.param("a: {b: 1\n", 2, 1, "the mapping opened at line 1, column 4", id="unclosed-map"),
    pytest.param("a: 1\n b: 2\n", 2, 3, "': ' where no mapping can begin", id="bad-indent"),
    pytest.param("key: value: x\n", 1, 11, "': ' where no mapping can begin", id="colon-value"),
    pytest.param("a: -\tx\n", 1, 4, "a '- ' list item where no list", id="dash-value"),
    pytest.param("a: *nowhere\n", 1, 4, "an alias (*name) with no anchor", id="undefined-alias"),
    pytest.param("a: 'open\n", 2, 1, "the quoted string opened at line 1, column 4", id="quote"),
    pytest.param('a: "x\n---\n"\n', 2, 1, "a document marker (--- or ...)", id="marker"),
    pytest.param("a: @x\n", 1, 4, "'@' cannot start a plain value", id="reserved-at"),
    pytest.param("a: `x\n", 1, 4, "'`' cannot start a plain value", id="reserved-backtick"),
    pytest.param("- a\nb: 1\n", 2, 1, "is not a '- ' item of the list", id="not-an-item"),
    pytest.param("a:\n  b: 1\n c: 2\n", 3, 2, "is not a 'key: value' of the", id="not-a-key"),
    pytest.param("a: b\nc\n", 2, 1, "a key without ':' after it", id="no-colon"),
    pytest.param("a: [,]\n", 1, 5, "a value is missing here", id="no-value"),
    pytest.param("[a, b]]\n", 1, 7, "more text after the end of the document", id="extra"),
    pytest.param('a: "\\q"\n', 1, (5, 6), "an escape YAML does not know", id="escape"),
    pytest.param('a: "\\x4"\n', 1, 7, "without enough hexadecimal digits", id="hex-escape"),
    pytest.param("a: &\n", 1, 5, "an anchor or alias without a name", id="anchor"),
    pytest.param("a: !<x 1\n", 1, 7, "a malformed tag", id="tag"),
    pytest.param("a: !x!y 1\n", 1, 4, "a tag whose handle no %TAG", id="tag-handle"),
    pytest.param("a: |0\n  x\n", 1, 5, "an indentation indicator of 0", id="indicator"),
    pytest.param("%YAML 2.0\n---\na: 1\n", 1, 1, "a %YAML version other", id="version"),
    pytest.param("%YAML 1.1\n%YAML 1.1\n---\na: 1\n", 2, 1, "given twice", id="directive"),
    pytest.param("a: \x07\n", 1, 4, "the character U+0007 cannot be written", id="control"),
]
SYNTAX_ERRORS += [
    pytest.param("%YAML a\n---\na: 1\n", 1, 7, "a directive (a line beginning", id="version-text"),
    pytest.param("a: !x%zz 1\n", 1, (6, 7), "a malformed tag", id="tag-uri-escape"),
    pytest.param("x: 1\na: \ud800\n", 2, 4, "U+D800", id="lone-surrogate"),
]
# Messages only one of the two implementations gives (the other accepts the text).
LIBYAML_ONLY = {"a: |x\n", "%FOO\n---\na\n", 'a: "x\\U0011FFFF"\n', 'a: "x\\ud800"\n'}
SYNTAX_ERRORS += [
    pytest.param("a: |x\n", 1, 5, "text after | or > on the line", id="block-header"),
    pytest.param("%FOO\n---\na\n", 1, 5, "a directive (a line beginning with %)", id="directive"),
    pytest.param('a: "x\\U0011FFFF"\n', 1, 8, "not a Unicode character", id="code-point"),
    pytest.param('a: "x\\ud800"\n', 1, 8, "not a Unicode character", id="surrogate-escape"),
]


@pytest.fixture(params=["libyaml", "pure-python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test reads with libyaml (the default, when built) and with PyYAML's own parser."""
    if request.param == "libyaml":
        if not hasattr(yaml, "CSafeLoader"):
            pytest.skip("PyYAML was built without libyaml")
        monkeypatch.setattr(source, "_Loader", yaml.CSafeLoader)
    else:
        monkeypatch.setattr(source, "_Loader", yaml.SafeLoader)
    return str(request.param)


@pytest.mark.parametrize(("text", "line", "column", "says"), SYNTAX_ERRORS)
def test_syntax_errors_say_what_is_wrong_in_a_sentence_where_it_is(
    loader: str, text: str, line: int, column: int | tuple[int, ...], says: str
) -> None:
    if loader == "pure-python" and text in LIBYAML_ONLY:
        pytest.skip("PyYAML's own parser accepts this (the code point: see the test below)")
    [problem] = read_text(text, "bad.yaml")[1]
    assert problem.path == "(YAML syntax)"
    # At the backslash (libyaml) or at the letter after it (PyYAML) for a bad escape.
    assert problem.line == line
    assert problem.column in (column if isinstance(column, tuple) else (column,))
    assert says in problem.found
    assert problem.hint, "each says how to fix it"
    text_shown = str(problem)
    assert text_shown == f"bad.yaml:{line}:{problem.column}: {problem.found}; {problem.hint}"
    # Not PyYAML's words: no "found found", no doubled word, no "while scanning ...".
    assert re.search(r"\b(\w+) \1\b", text_shown) is None, text_shown
    assert "while scanning" not in text_shown
    assert "while parsing" not in text_shown
    assert "cannot start any token" not in text_shown


def test_an_escape_beyond_unicode_is_a_problem_with_pure_pyyaml_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(source, "_Loader", yaml.SafeLoader)  # its chr() raises ValueError
    [problem] = read_text('a: "x\\U0011FFFF"\n', "bad.yaml")[1]
    assert problem.path == "(YAML syntax)"
    assert problem.hint == "Unicode ends at \\U0010FFFF"


def test_a_tab_in_indentation_reads_as_the_issue_asks() -> None:
    [problem] = read_text("name: x\nskills:\n\t- id: a\n", "bad.yaml")[1]
    assert (
        str(problem) == "bad.yaml:3:1: a tab character indents this line; YAML indents with spaces"
    )


def test_a_syntax_problem_in_json_keeps_its_fields() -> None:
    [problem] = read_text("a: [1\n", "bad.yaml")[1]
    assert problem.as_json()["expected"] == ""
    assert problem.as_json()["text"] == str(problem)
