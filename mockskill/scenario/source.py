"""Reading YAML safely, keeping where every value came from.

Scenario files are composed into YAML nodes (never constructed into
arbitrary objects) and turned into plain data — dicts, lists, strings,
numbers, booleans, null — with a map from each path in the document to the
line and column it was written at. The loader reports problems with those
positions.

Hostile input is refused with a clear problem rather than a crash or a hang:
files over :data:`MAX_FILE_BYTES`, documents that expand (through aliases) to
more than :data:`MAX_NODES` values — the "billion laughs" — or that nest
deeper than :data:`MAX_DEPTH`, tags outside the safe set, and duplicate keys
(which YAML would otherwise resolve silently, last one wins). YAML 1.1's
surprise is caught too: an unquoted ``yes``, ``no``, ``on`` or ``off`` is a
problem as a value (it would be a boolean: ``country: NO`` is ``false``) and
the word as a key. Syntax errors are said in words (:mod:`mockskill.scenario.syntax`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

import yaml

from .path_access import not_a_file, special
from .problems import Path, Problem, format_path

if TYPE_CHECKING:
    from .syntax import Explained


@dataclass(frozen=True)
class Position:
    """Where something was written: file, line and column (1-based)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64

try:  # libyaml is ten times faster when present; both compose the same nodes
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

_SCALARS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
}
_STANDARD = "tag:yaml.org,2002:"
"""The prefix of YAML's standard tags, which a file writes as !!."""
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_YAML11_WORDS = frozenset({"yes", "no", "on", "off"})
"""Booleans to YAML 1.1 (and PyYAML), words to YAML 1.2 and to people: refused as values."""
_TAGGED = {"bool": "a boolean", "int": "an integer", "float": "a number", "null": "null"}
"""What each standard scalar tag reads, for a problem when its text is not one."""
_DIGITS = r"[-+]?[0-9_]+"
"""An integer's text (compiled by re on the first tagged one read, not at import)."""
_UNREADABLE = object()
"""A value or key that was a problem: a key that is this is left out of its mapping."""
_UNSEEN = object()
_COLLECTIONS: dict[type[yaml.Node], str] = {
    yaml.MappingNode: "tag:yaml.org,2002:map",
    yaml.SequenceNode: "tag:yaml.org,2002:seq",
}
_PARSE_DEPTH = 4 * MAX_DEPTH
"""Nesting refused before composing: the composer recurses, and would crash on deeper."""


@dataclass
class Document:
    """One YAML document as plain data, with the position of every path."""

    file: str
    index: int
    data: Any
    positions: dict[Path, tuple[int, int]] = field(repr=False)
    """Path of a value → (line, column) of the value, 1-based."""
    key_positions: dict[Path, tuple[int, int]] = field(repr=False)
    """Path of a mapping entry → (line, column) of its key."""
    text: str = field(default="", repr=False)
    """The whole text the document was read from (every document of it)."""
    folder: str | None = field(default=None, repr=False)
    """The folder of the file it was read from; None for text (``body_file`` reads there)."""
    words: dict[Path, tuple[str, Problem]] = field(default_factory=dict, repr=False)
    """Each unquoted YAML 1.1 word read as a boolean (``yes``): the word and its problem,
    which the reader words again where a boolean is wanted (:meth:`Reader.boolean`)."""

    def problem(
        self, path: Path, expected: str, found: str, hint: str = "", *, at_key: bool = False
    ) -> Problem:
        """A problem at *path*, placed at its key (for key problems) or its value."""
        line, column = self.position(path, at_key=at_key)
        return Problem(self.file, line, column, format_path(path), expected, found, hint)

    def position(self, path: Path, *, at_key: bool = False) -> tuple[int, int]:
        """Where *path* was written; the nearest written ancestor when it was not."""
        if at_key and path in self.key_positions:
            return self.key_positions[path]
        probe = path
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get((), (1, 1))


class _TooBig(Exception):
    pass


class _Constructor(yaml.constructor.SafeConstructor):
    """Resolves merge keys keeping each key once, so that merges cannot multiply."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        super().flatten_mapping(node)
        # PyYAML keeps every merged pair (the last one wins when constructed):
        # nested "<<: [*a, *a, ...]" would grow exponentially before any
        # value is counted, and a reused mapping would look like it repeats keys.
        last = {_key_id(key): i for i, (key, _) in enumerate(node.value)}
        if len(last) < len(node.value):
            node.value = [pair for i, pair in enumerate(node.value) if last[_key_id(pair[0])] == i]


def _key_id(node: yaml.Node) -> object:
    return (node.tag, node.value) if isinstance(node, yaml.ScalarNode) else id(node)


class _Builder:
    """Turns one composed node tree into plain data, with positions."""

    def __init__(self, file: str, index: int, text: str = "") -> None:
        self.doc = Document(file, index, None, {}, {}, text)
        self.problems: list[Problem] = []
        self.nodes = 0
        self.constructor = _Constructor()
        self._keys: dict[int, Any] = {}
        """Each key node's key, by id (the tree, alive while it is built, keeps ids apart)."""

    def build(self, node: yaml.Node) -> Document | None:
        """The document, or None when it was refused whole (too big or too deep)."""
        try:
            self.doc.data = self._value(node, (), 0)
        except _TooBig:
            return None
        return self.doc

    def _bad(self, path: Path, node: yaml.Node, expected: str, found: str, hint: str = "") -> None:
        line, column = node.start_mark.line + 1, node.start_mark.column + 1
        self.problems.append(
            Problem(self.doc.file, line, column, format_path(path), expected, found, hint)
        )

    def _bad_tag(self, path: Path, node: yaml.Node) -> None:
        self._bad(
            path,
            node,
            "a plain YAML value (string, number, boolean, null, list or mapping)",
            f"the tag {_written(node.tag)}",
            "scenario files are read as safe YAML; remove the tag",
        )

    def _value(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self._bad(
                path,
                node,
                f"a document of at most {MAX_NODES} values once aliases are expanded",
                "more (an alias bomb?)",
                "write the values out, or use fewer nested aliases",
            )
            raise _TooBig
        if depth > MAX_DEPTH:
            self._bad(path, node, f"nesting at most {MAX_DEPTH} levels deep", "deeper nesting")
            raise _TooBig
        self.doc.positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if type(node) in _COLLECTIONS and node.tag != _COLLECTIONS[type(node)]:
            self._bad_tag(path, node)  # then read as the plain collection it is written as
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self._value(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)
        if node.tag == _TIMESTAMP:
            return node.value  # a date in a body stays the text that was written
        if node.tag not in _SCALARS:
            self._bad_tag(path, node)
            return None
        if _is_yaml11_word(node):
            value = self.constructor.construct_object(node)
            self._bad(
                path,
                node,
                "true or false, or a quoted string",
                f"{node.value} unquoted, which YAML 1.1 reads as the boolean {str(value).lower()}",
                f"quote it ('{node.value}') for the word, or write {str(value).lower()}",
            )
            self.doc.words[path] = (node.value, self.problems[-1])
            return value
        value = self._scalar(node, path)
        return None if value is _UNREADABLE else value

    def _scalar(self, node: yaml.ScalarNode, path: Path) -> Any:
        try:
            return self.constructor.construct_object(node)
        # An explicit tag on text it cannot read: !!bool maybe (KeyError), !!int x
        # (ValueError, as an integer of more digits than Python converts: 4300).
        except (ValueError, KeyError):
            kind = node.tag.rsplit(":", 1)[-1]
            if kind == "int" and re.fullmatch(_DIGITS, node.value):
                self._bad(
                    path,
                    node,
                    "a number Python can read (at most 4300 digits)",
                    f"a number of {len(node.value)} characters",
                    "quote it if it is text",
                )
            else:
                self._bad(
                    path,
                    node,
                    f"{_TAGGED.get(kind, 'a value')}, as the tag !!{kind} says",
                    repr(node.value),
                    f"remove the tag !!{kind}, and quote the value if it is text",
                )
            return _UNREADABLE

    def _key(self, node: yaml.ScalarNode, path: Path) -> Any:
        """The key *node* names, once per node (a mapping reads its keys twice); a tag
        outside plain YAML, or one its text does not fit, is a problem, said once."""
        key = self._keys.get(id(node), _UNSEEN)
        if key is _UNSEEN:
            if node.tag == _TIMESTAMP or _is_yaml11_word(node):
                # A key is a name: "on:" means the word, never True (YAML 1.2 agrees),
                # and a date is the text written, as a date value is.
                key = node.value
            elif node.tag not in _SCALARS:
                self._bad_tag(path, node)
                key = _UNREADABLE
            else:
                key = self._scalar(node, path)
            self._keys[id(node)] = key
        return key

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self._key(key_node, path)
            if key is _UNREADABLE:
                continue
            if key in seen:
                first = seen[key].start_mark.line + 1
                self._bad(
                    (*path, key),
                    key_node,
                    "each key once in a mapping",
                    f"{key!r} again (first on line {first})",
                    "YAML would silently keep only the last one; remove one",
                )
            seen[key] = key_node
        try:
            self.constructor.flatten_mapping(node)  # resolves "<<: *defaults" merge keys
        except yaml.constructor.ConstructorError as exc:
            self._bad(path, node, "merge keys (<<) that name mappings", str(exc.problem))
            return {}
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._bad(path, key_node, "a plain scalar as a mapping key", "a complex key")
                continue
            key = self._key(key_node, path)
            if key is _UNREADABLE:
                continue
            key_path = (*path, key)
            mark = key_node.start_mark
            self.doc.key_positions[key_path] = (mark.line + 1, mark.column + 1)
            self.doc.positions.pop(key_path, None)  # a later duplicate wins, as in YAML
            out[key] = self._value(value_node, key_path, depth + 1)
        return out


def read_text(text: str, file: str) -> tuple[list[Document], list[Problem]]:
    """Parse every document in *text*; *file* names it in problems."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        return [], [_whole_file(file, f"a file of at most {MAX_FILE_BYTES} bytes", "more")]
    documents: list[Document] = []
    problems: list[Problem] = []
    try:
        nodes: Iterable[yaml.Node | None]
        if _indicators(text) <= _PARSE_DEPTH:
            nodes = _composed_first(text)  # it cannot nest deeper: no pass to measure it
        else:
            deep = _too_deep(text)
            if deep is not None:
                line, column = deep.line + 1, deep.column + 1
                expected = f"nesting at most {MAX_DEPTH} levels deep"
                problem = Problem(file, line, column, "(YAML nesting)", expected, "deeper nesting")
                return [], [problem]
            nodes = _compose_all(text)
        for index, node in enumerate(nodes):
            if node is None or _is_empty(node):
                continue  # nothing between two "---"
            builder = _Builder(file, index, text)
            document = builder.build(node)
            if document is not None:
                documents.append(document)
            problems.extend(builder.problems)
    # The syntax module (its words for every PyYAML error) is imported only when a
    # file has a syntax error: a start that loads valid files does not pay for it.
    except yaml.MarkedYAMLError as exc:
        from .syntax import explain

        problems.append(_syntax(file, explain(exc, text)))
    except yaml.reader.ReaderError as exc:
        from .syntax import explain_reader

        problems.append(_syntax(file, explain_reader(exc, text)))
    except UnicodeEncodeError as exc:  # libyaml reads UTF-8: a lone surrogate has none
        from .syntax import explain_surrogate

        problems.append(_syntax(file, explain_surrogate(text, exc.start)))
    except ValueError as exc:  # pure PyYAML's chr() on an escape beyond U+10FFFF
        sentence = f"an escape YAML cannot read ({exc})"
        hint = "Unicode ends at \\U0010FFFF"
        problems.append(Problem(file, 1, 1, "(YAML syntax)", "", sentence, hint))
    except yaml.YAMLError as exc:
        problems.append(_whole_file(file, "valid YAML", str(exc)))
    return documents, problems


def _syntax(file: str, said: Explained) -> Problem:
    # No "expected": PyYAML's messages say what is wrong, not what was wanted,
    # so the problem reads as the one sentence (problems.Problem.__str__).
    return Problem(file, said.line, said.column, "(YAML syntax)", "", said.sentence, said.hint)


def _too_deep(text: str) -> Any:
    """The mark where collections first nest deeper than :data:`_PARSE_DEPTH`, or None."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > _PARSE_DEPTH:
                    return event.start_mark
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # Newer libyaml (PyYAML >= 6.0.4) has a nesting limit of its own.
        if "nesting depth" in str(exc.problem):
            return exc.problem_mark
        raise
    return None


_INDICATORS = "-?:[{"


def _indicators(text: str) -> int:
    """How many of *text*'s characters could open a collection: at least as many as it
    has collections, so more than it can nest.

    Each collection starts at an indicator of its own: a block sequence at its
    first ``-``, a block mapping at its first key's ``:`` (or ``?``), a flow
    collection at its ``[`` or ``{``, a flow sequence's single-pair mapping at its
    ``:`` (or ``?``). Counted wherever they stand (in a URL, a word), so over.
    """
    return sum(text.count(indicator) for indicator in _INDICATORS)


def _composed_first(text: str) -> Iterator[yaml.Node | None]:
    """:func:`_compose_all`, for a text :func:`_too_deep` need not measure, failing as
    the two passes did: that pass parsed the whole text before any document was built.

    So every document is composed before the first is yielded: the first syntax error
    (the parser's, met here by composing) is raised before any. An error of the
    composer's own (an undefined alias) was raised after the documents before it had
    been built, unless the parse found a syntax error anywhere: then that, first.
    """
    nodes: list[yaml.Node | None] = []
    try:
        nodes.extend(_compose_all(text))
    except yaml.composer.ComposerError:
        _too_deep(text)  # raises the text's first syntax error, if it has one
        yield from nodes
        raise
    yield from nodes


def _written(tag: str) -> str:
    """*tag* as a file writes it: !!binary for tag:yaml.org,2002:binary; others as they are."""
    return "!!" + tag[len(_STANDARD) :] if tag.startswith(_STANDARD) else tag


def _is_yaml11_word(node: yaml.Node) -> bool:
    """An unquoted yes, no, on or off (any case YAML knows): YAML 1.1 makes it a boolean."""
    return (
        isinstance(node, yaml.ScalarNode)
        and node.tag == _BOOL
        and not node.style
        and node.value.lower() in _YAML11_WORDS
    )


def _is_empty(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL and node.value == ""


def _compose_all(text: str) -> Iterator[yaml.Node | None]:
    loader = _Loader(text)
    try:
        while loader.check_node():
            yield loader.get_node()
    finally:
        loader.dispose()


def read_file(path: FsPath) -> tuple[list[Document], list[Problem]]:
    """Read and parse one scenario file, refusing oversized ones before reading them.

    Only a regular file is read, and at most one byte past the limit: the path
    is opened without blocking and checked as opened (a FIFO or a device put
    in a file's place after it was listed is refused, not waited on or read
    without end).
    """
    name = str(path)
    too_big = f"a file of at most {MAX_FILE_BYTES} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as opened:
            info = os.fstat(opened.fileno())
            if not stat.S_ISREG(info.st_mode):
                return [], [not_a_file(path, special(info.st_mode) or "not a regular file")]
            if info.st_size > MAX_FILE_BYTES:
                return [], [_whole_file(name, too_big, f"{info.st_size}")]
            raw = opened.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return [], [_whole_file(name, "a readable file", exc.strerror or str(exc))]
    if len(raw) > MAX_FILE_BYTES:  # it grew since fstat
        return [], [_whole_file(name, too_big, "more")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [_whole_file(name, "UTF-8 text", f"byte {exc.start} that is not UTF-8")]
    documents, problems = read_text(text, name)
    folder = str(path.absolute().parent)
    for document in documents:
        document.folder = folder
    return documents, problems


def _whole_file(file: str, expected: str, found: str) -> Problem:
    return Problem(file, 1, 1, "(file)", expected, found)


def json_problem(text: str, file: str) -> Problem | None:
    """Why *text*, said to be JSON, is not (positioned), or None: a body of JSON is read by
    the YAML loader (JSON is YAML) for its positions, but must be JSON all the same."""
    from ..protocol import jsonstyle  # (a body said to be JSON only: not at start-up)

    try:
        jsonstyle.loads(text)
    except json.JSONDecodeError as exc:
        return Problem(file, exc.lineno, exc.colno, "(JSON syntax)", "valid JSON", exc.msg)
    except RecursionError:
        return Problem(file, 1, 1, "(JSON nesting)", "valid JSON", "nesting too deep")
    except jsonstyle.NotJSON as exc:
        found = f"{exc.word}, which is JavaScript, not JSON"
        hint = "give a number, null, or a quoted string"
        line, column = _position(text, exc.word)
        return Problem(file, line, column, "(JSON syntax)", "valid JSON", found, hint)
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        return Problem(file, 1, 1, "(JSON syntax)", "JSON Python can read", str(exc))
    return None


def _position(text: str, word: str) -> tuple[int, int]:
    """Line and column (1-based) of the first *word* outside a string in JSON *text*."""
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN', text):
        if match.group(0).lstrip("-") == word.lstrip("-"):
            before = text[: match.start()]
            return before.count("\n") + 1, match.start() - (before.rfind("\n") + 1) + 1
    return 1, 1
