"""Reading ``{{...}}`` templates at load: a string or a ``json:`` value compiled into
:mod:`.templates`' values, or positioned problems.

Everything that can be wrong is a problem at load, placed at the placeholder
inside its string when the file lets it be found: unknown names (with a
did-you-mean), malformed pointers, unclosed or nested placeholders, a
placeholder in a default or in a key, ``{{{`` (Handlebars' unescaped form).
Nothing here runs at request time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .problems import Path, Problem, format_path
from .reader import Reader
from .templates import (
    CLOSE,
    ESCAPE,
    LARGEST_INT,
    MAY_LACK,
    NAMES,
    OPEN,
    AttemptNumber,
    BodyAt,
    FreshId,
    HeaderOf,
    JsonTemplate,
    Now,
    NowMs,
    PathVariable,
    Placeholder,
    QueryOf,
    RandomInt,
    ReplyTemplate,
    SessionName,
    SkillId,
    Template,
    Value,
    draws,
)
from .when import parse_pointer

_NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class Scope:
    """Where a template is written, so that a placeholder that cannot be filled there is
    a problem at load: a skill's step (*skill* true), a free route's (false, and the
    *variables* of its path), or either (None: an outage's step, which answers both)."""

    skill: bool | None = None
    variables: tuple[str, ...] | None = None


ANYWHERE = Scope()

_PLAIN: dict[str, Value] = {
    "skill.id": SkillId(),
    "session": SessionName(),
    "attempt": AttemptNumber(),
    "id": FreshId(),
    "now": Now(),
    "now.epoch_ms": NowMs(),
}
_FAMILIES = ("request.header", "request.query", "request.path")
_KNOWN = ("request.body", *_FAMILIES, *_PLAIN, "random.int")
"""What a misspelt name is compared with, for a did-you-mean."""
_HABITS = {
    "uuid": "id",
    "randomValue": "id",
    "request.id": "id",
    "timestamp": "now",
    "request.headers": "request.header.NAME",
    "request.url": "request.path.NAME or request.query.NAME",
    "request.path": "request.path.NAME",
    "request.query": "request.query.NAME",
    "request.header": "request.header.NAME",
}
"""Names other tools' users write, and what to write here."""
_SERVER_PLACEHOLDERS = ("base_url", "refused_base_url", "tls_base_url:")
HEADER_NAME_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
"""The characters of a header name (RFC 9110's token), as ``request.header.NAME`` takes it."""


@dataclass(frozen=True)
class _Flaw:
    offset: int
    """Where in the string, for the column."""
    expected: str
    found: str
    hint: str = ""


def compile_text(
    r: Reader, text: str, path: Path, *, at_key: bool = False, scope: Scope | None = None
) -> Template | None:
    """*text*, the string at *path* of *r*'s document, compiled; None (with a problem
    positioned at each faulty placeholder) when it cannot be."""
    line, column = r.doc.position(path, at_key=at_key)
    where = f"{r.doc.file}:{line}:{column} ({format_path(path)})"
    parts, flaws = _parse(text, where, scope or ANYWHERE)
    if not flaws:
        literal = sum(len(p) for p in parts if type(p) is str)
        return Template(tuple(parts), where, literal)
    lines = r.doc.text.splitlines()
    for flaw in flaws:
        at_line, at_column = _inside(lines, line, column, text, flaw.offset)
        r.problems.append(
            Problem(
                r.doc.file,
                at_line,
                at_column,
                format_path(path),
                flaw.expected,
                flaw.found,
                flaw.hint,
            )
        )
    return None


def compile_json(
    r: Reader, value: Any, path: Path, scope: Scope | None = None
) -> JsonTemplate | None:
    """A ``json:`` answer (*value*, at *path*) compiled: every string in it a template,
    the rest written as JSON once; None (with problems) when anything is wrong."""
    line, column = r.doc.position(path)
    where = f"{r.doc.file}:{line}:{column} ({format_path(path)})"
    before = len(r.problems)
    pieces: list[str | Placeholder | Template] = []
    _compile_value(r, value, path, pieces, scope or ANYWHERE)
    if len(r.problems) > before:
        return None
    parts: list[str | Placeholder | Template] = []
    for piece in pieces:  # neighbouring literal pieces are one
        if type(piece) is str and parts and type(parts[-1]) is str:
            parts[-1] += piece
        else:
            parts.append(piece)
    literal = sum(len(p) for p in parts if type(p) is str)
    return JsonTemplate(tuple(parts), where, literal)


def _compile_value(
    r: Reader, value: Any, path: Path, out: list[str | Placeholder | Template], scope: Scope
) -> None:
    if not _has_braces(value):
        try:  # as Reply.json writes it, so an answer without placeholders is unchanged
            out.append(json.dumps(value, allow_nan=False))
        except ValueError as exc:
            r.bad(path, "JSON values (no .nan or .inf)", str(exc))
        return
    if isinstance(value, str):
        template = compile_text(r, value, path, scope=scope)
        if template is None:
            return
        whole, constant = template.whole, template.constant
        if whole is not None:
            out.append(whole)
        elif constant is not None:
            out.append(json.dumps(constant))
        else:
            out.append(template)
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(", ")
            _compile_value(r, item, (*path, index), out, scope)
        out.append("]")
    else:
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(", ")
            out.append(_key(r, key, (*path, key)) + ": ")
            _compile_value(r, item, (*path, key), out, scope)
        out.append("}")


def _has_braces(value: Any) -> bool:
    """Whether *value* holds ``{{`` in a string or a key: only such values are walked."""
    if isinstance(value, str):
        return OPEN in value
    if isinstance(value, list):
        return any(_has_braces(item) for item in value)
    if isinstance(value, dict):
        return any(_has_braces(k) or _has_braces(v) for k, v in value.items())
    return False


def _key(r: Reader, key: Any, path: Path) -> str:
    """A key as JSON writes it: keys are not templated (``\\{{`` is still a literal ``{{``)."""
    if not isinstance(key, str):
        return json.dumps({key: 0})[1:-4]  # JSON's own text for a key 1, true or null
    if OPEN not in key:
        return json.dumps(key)
    template = compile_text(r, key, path, at_key=True)
    if template is None:
        return ""
    if template.constant is None:
        r.bad(
            path,
            "a key without placeholders",
            f"{template.placeholders[0].written!r} in a key",
            "keys are written as they are; put the placeholder in the value,"
            " or write \\{{ for a literal {{",
            at_key=True,
        )
        return ""
    return json.dumps(template.constant)


def _parse(text: str, where: str, scope: Scope) -> tuple[list[str | Placeholder], list[_Flaw]]:
    """*text*'s literal pieces and placeholders, or what is wrong with it."""
    parts: list[str | Placeholder] = []
    flaws: list[_Flaw] = []
    literal: list[str] = []
    start = 0
    while True:
        at = text.find(OPEN, start)
        if at < 0:
            literal.append(text[start:])
            break
        slashes = at
        while slashes > start and text[slashes - 1] == ESCAPE:
            slashes -= 1
        literal.append(text[start:slashes] + ESCAPE * ((at - slashes) // 2))
        if (at - slashes) % 2:  # an odd backslash escapes the braces
            literal.append(OPEN)
            start = at + 2
            continue
        end = text.find(CLOSE, at + 2)
        if end < 0:
            flaws.append(
                _Flaw(
                    at,
                    "'}}' closing the placeholder",
                    f"{_shown(text[at:])} and the end of the string",
                    "a literal {{ is written \\{{",
                )
            )
            break
        written = text[at : end + 2]
        flaw = _flawed_braces(text, at, end)
        if flaw is not None:
            flaws.append(flaw)
        else:
            read = _placeholder(written[2:-2], written, where, scope)
            if isinstance(read, _Flaw):
                flaws.append(_Flaw(at, read.expected, read.found, read.hint))
            else:
                text_before = "".join(literal)
                if text_before:
                    parts.append(text_before)
                literal = []
                parts.append(read)
        start = end + 2
    rest = "".join(literal)
    if rest or not parts:
        parts.append(rest)
    return parts, flaws


def _flawed_braces(text: str, at: int, end: int) -> _Flaw | None:
    """What is wrong with the braces of the placeholder from *at* to *end*, if anything."""
    if text.startswith("{", at + 2):
        return _Flaw(
            at,
            "'{{' and a placeholder name",
            f"{_shown(text[at : end + 2])} (three braces)",
            "nothing is escaped here, so Handlebars' {{{name}}} is {{name}};"
            " a { right before a placeholder needs a space between them",
        )
    inner = text.find(OPEN, at + 2, end)
    if inner < 0:
        return None
    if "|" in text[at + 2 : inner]:
        return _Flaw(
            inner,
            "a default without placeholders",
            f"{_shown(text[inner:])} inside the default of {_shown(text[at:inner])}",
            "a default is written as it is: nothing in it is filled in",
        )
    return _Flaw(
        inner,
        "'}}' closing the placeholder before another '{{'",
        f"{_shown(text[at : end + 2])} (a placeholder inside a placeholder)",
        "placeholders do not nest: a rendered value is never read as a template;"
        " a literal {{ is written \\{{",
    )


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _placeholder(inner: str, written: str, where: str, scope: Scope) -> Placeholder | _Flaw:
    """The placeholder *written* (*inner* is between its braces), or what is wrong."""
    expression, bar, filtered = inner.partition("|")
    words = expression.split()
    if not words:
        return _Flaw(0, f"a placeholder name: {NAMES}", f"{written!r} (nothing in it)")
    name, arguments = words[0], words[1:]
    value = _value(name, arguments, written, scope)
    if isinstance(value, _Flaw):
        return value
    if not bar:
        return Placeholder(written, where, value)
    if not isinstance(value, MAY_LACK):
        return _Flaw(
            0,
            f"no default: {name} always has a value",
            f"{written!r}",
            f"write {{{{{expression.strip()}}}}}",
        )
    default = _default(filtered, written)
    if isinstance(default, _Flaw):
        return default
    return Placeholder(written, where, value, True, default[0])


def _value(name: str, arguments: list[str], written: str, scope: Scope) -> Value | _Flaw:
    """What *name* (with its *arguments*) reads, or what is wrong with it."""
    if name == "random.int":
        return _random_int(arguments, written)
    if arguments:
        return _Flaw(
            0,
            f"{{{{{name}}}}} without arguments",
            f"{written!r}",
            "only random.int takes arguments (a pointer or a name has no spaces in it)",
        )
    if name == "request.body" or name.startswith("request.body/"):
        pointer = parse_pointer(name[len("request.body") :])
        if pointer is None:
            return _Flaw(
                0,
                "a JSON Pointer after request.body: /key/0/... (~0 for ~, ~1 for /)",
                f"{name[len('request.body') :]!r} in {written!r}",
                "a ~ in a pointer is ~0 (for ~) or ~1 (for /)",
            )
        return BodyAt(name[len("request.body") :] or "the body's root", pointer)
    if name.startswith("request.body"):
        rest = name[len("request.body") :].lstrip(".")
        return _Flaw(
            0,
            "a JSON Pointer right after request.body: request.body/key/0/...",
            f"{written!r}",
            f"did you mean 'request.body/{rest.replace('.', '/')}'?",
        )
    for family in _FAMILIES:
        if name.startswith(family + "."):
            return _named(family, name[len(family) + 1 :], written, scope)
    if name == "skill.id" and scope.skill is False:
        return _Flaw(
            0,
            "a placeholder a free route's answer can fill",
            f"{written!r} in a free route's step",
            "a free route has no skill; write the id as it is",
        )
    if name in _PLAIN:
        return _PLAIN[name]
    return _Flaw(0, f"a placeholder name: {NAMES}", f"{written!r}", _suggestion(name))


def _named(family: str, key: str, written: str, scope: Scope) -> Value | _Flaw:
    if family == "request.header":
        if key and all(c in HEADER_NAME_CHARS for c in key):
            return HeaderOf(key.lower())
        return _Flaw(0, "a header name (letters, digits, - and the like)", f"{written!r}")
    if family == "request.query":
        if key:
            return QueryOf(key)
        return _Flaw(0, "request.query.NAME", f"{written!r}")
    if key.isascii() and key.isidentifier():
        return _path_variable(key, written, scope)
    return _Flaw(
        0,
        "request.path.NAME, a path variable's name (letters, digits and _)",
        f"{written!r}",
        "a free route's path names its variables: /orders/<id> has request.path.id",
    )


def _path_variable(key: str, written: str, scope: Scope) -> Value | _Flaw:
    """``request.path.KEY``, where the step's endpoint has such a variable."""
    if scope.skill:
        return _Flaw(
            0,
            "request.path.NAME only in a free route's step (a variable of its path)",
            f"{written!r} in a skill's step",
            "a skill's paths have no variables; {{skill.id}} is the skill's id",
        )
    if scope.variables is None or key in scope.variables:
        return PathVariable(key)
    import difflib  # a misspelling's suggestion only

    close = difflib.get_close_matches(key, scope.variables, n=1)
    named = ", ".join(scope.variables) or "none"
    return _Flaw(
        0,
        f"request.path.NAME naming a variable of the route's path ({named})",
        f"{written!r}",
        f"did you mean 'request.path.{close[0]}'?" if close else "",
    )


def _random_int(arguments: list[str], written: str) -> Value | _Flaw:
    bounds = [_whole_number(a) for a in arguments]
    if len(bounds) == 2 and bounds[0] is not None and bounds[1] is not None:
        low, high = bounds[0], bounds[1]
        if low <= high:
            return RandomInt(low, high)
    return _Flaw(
        0,
        f"random.int LOW HIGH: two whole numbers, LOW at most HIGH, within ±{LARGEST_INT}",
        f"{written!r}",
        "for example {{random.int 1 100}}",
    )


def _whole_number(text: str) -> int | None:
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 16:
        return None
    number = int(text)
    return number if -LARGEST_INT <= number <= LARGEST_INT else None


def _default(filtered: str, written: str) -> tuple[Any] | _Flaw:
    """The default of ``| default VALUE`` (*filtered*), as a one-tuple (it may be null)."""
    words = filtered.split(None, 1)
    if not words or words[0] != "default":
        import difflib  # a misspelt filter's suggestion only

        close = difflib.get_close_matches(words[0], ["default"], n=1) if words else []
        return _Flaw(
            0,
            "'| default VALUE' after the name",
            f"{written!r}",
            "did you mean 'default'?" if close else "the only filter is default",
        )
    literal = words[1].strip() if len(words) > 1 else ""
    try:
        value = json.loads(literal) if literal else _NO_DEFAULT
    except (ValueError, RecursionError):
        value = _NO_DEFAULT
    if type(value) in (str, int, bool, type(None)) or (
        type(value) is float and math.isfinite(value)
    ):
        return (value,)
    quoted = literal.strip("'")
    hint = f'write default "{quoted}" (in double quotes)' if literal and '"' not in literal else ""
    return _Flaw(
        0,
        'a default: a string in double quotes ("none"), a number, true, false or null',
        f"{literal!r} in {written!r}" if literal else f"nothing after default in {written!r}",
        hint,
    )


def _suggestion(name: str) -> str:
    """A did-you-mean for an unknown *name*, or what to write instead."""
    import difflib  # a misspelling's suggestion only: not at start-up

    if name.startswith(_SERVER_PLACEHOLDERS):
        return f"{{{name}}} is the server's own placeholder, in single braces: write {{{name}}}"
    if name in _HABITS:
        return f"write {{{{{_HABITS[name]}}}}}"
    head, slash, rest = name.partition("/")
    if slash and difflib.get_close_matches(head, ["request.body"], n=1):
        return f"did you mean 'request.body/{rest}'?"
    segments = name.split(".")
    if len(segments) > 2:
        family, key = ".".join(segments[:2]), ".".join(segments[2:])
        close = difflib.get_close_matches(family, _FAMILIES, n=1)
        if close:
            return f"did you mean '{close[0]}.{key}'?"
    close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return ""


def _inside(lines: list[str], line: int, column: int, value: str, offset: int) -> tuple[int, int]:
    """Where *offset* of *value*, a string written at *line*:*column*, is in the file.

    Worked out for a string on one line (plain or quoted) and a block scalar
    (``|``), then checked against the file's text; anything else (an escape
    before it, a folded line) is placed at the string itself.
    """
    if not 0 < line <= len(lines):
        return line, column
    before = value[:offset]
    down = before.count("\n")
    across = offset - (before.rfind("\n") + 1)
    first = lines[line - 1][column - 1 : column]
    if first in ("|", ">"):
        body = [text for text in lines[line:] if text.strip()]
        indent = len(body[0]) - len(body[0].lstrip(" ")) if body else 0
        at_line, at_column = line + 1 + down, indent + 1 + across
    elif down == 0:
        at_line, at_column = line, column + across + (1 if first in ("'", '"') else 0)
    else:
        return line, column
    snippet = value[offset:].split("\n", 1)[0][:20]
    if 0 < at_line <= len(lines) and lines[at_line - 1][at_column - 1 :].startswith(snippet):
        return at_line, at_column
    return line, column


def compile_headers(
    r: Reader, headers: Mapping[str, str], path: Path, scope: Scope
) -> dict[str, Template] | None:
    """The templates of a step's *headers* (those holding ``{{``), by name; a header whose
    value is then constant is given it in *headers*' place by the caller. None (with
    problems) when one cannot be compiled."""
    out = {}
    ok = True
    for name, value in headers.items():
        if OPEN in value:
            template = compile_text(r, value, (*path, "headers", name), scope=scope)
            if template is None:
                ok = False
            else:
                out[name] = template
    return out if ok else None


def reply_template(
    body: JsonTemplate | Template | None,
    headers: Sequence[tuple[str, str]],
    templates: Mapping[str, Template],
) -> ReplyTemplate | None:
    """What of a reply with *headers* is made per request: *body* and the headers named in
    *templates* (None when nothing is: the reply is planned once, as any other)."""
    if body is not None and body.constant is not None:
        body = None
    held = tuple(
        None if (t := templates.get(name)) is None or t.constant is not None else t
        for name, _ in headers
    )
    if body is None and not any(held):
        return None
    made = [t for t in (body, *held) if t is not None]
    return ReplyTemplate(body, held, any(draws(t) for t in made))


_HOLE = "\ue000mockskill-hole-{}\ue001"
"""A stand-in for an error's templated message or detail while the catalog writes its body
(a private-use character: no catalog text holds one)."""


@dataclass(frozen=True)
class ErrorHoles:
    """An error step's ``message`` and ``details`` with each templated value a stand-in,
    for :func:`mockskill.protocol.catalog.render`; :meth:`body` is the body it renders
    with each stand-in a hole for its template."""

    message: str | None
    details: dict[str, Any] | None
    holes: tuple[tuple[str, Template | JsonTemplate], ...]
    where: str

    def body(self, rendered: str) -> JsonTemplate | None:
        """The error body *rendered* by the catalog, its stand-ins holes (None: none)."""
        if not self.holes:
            return None
        parts: list[str | Placeholder | Template | JsonTemplate] = []
        rest = rendered
        for stand_in, template in self.holes:
            before, found, rest = rest.partition(json.dumps(stand_in))
            assert found, "the catalog writes each message and detail as it is given"
            parts += [before, template]
        parts.append(rest)
        literal = sum(len(p) for p in parts if isinstance(p, str))
        return JsonTemplate(tuple(parts), self.where, literal)


def compile_error(
    r: Reader, message: str | None, details: dict[str, Any] | None, path: Path, scope: Scope
) -> ErrorHoles | None:
    """An error step's *message* and *details* read for placeholders; None (with
    problems) when one cannot be compiled."""
    line, column = r.doc.position(path)
    holes: list[tuple[str, Template | JsonTemplate]] = []
    ok = True
    if message is not None and OPEN in message:
        template = compile_text(r, message, (*path, "message"), scope=scope)
        if template is None:
            ok = False
        elif template.constant is not None:
            message = template.constant
        else:  # always a string: a whole placeholder is written as text in a message
            holes.append((_HOLE.format(len(holes)), template))
            message = holes[-1][0]
    if details is not None and _has_braces(details):
        kept = {}
        for key, value in details.items():
            at = (*path, "details", key)
            if isinstance(key, str) and OPEN in key:
                written = _key(r, key, at)
                if not written:
                    ok = False
                    continue
                key = json.loads(written)
            compiled = compile_json(r, value, at, scope) if _has_braces(value) else None
            if compiled is None:
                ok = ok and not _has_braces(value)
                kept[key] = value
            elif compiled.constant is not None:
                kept[key] = json.loads(compiled.constant)
            else:
                holes.append((_HOLE.format(len(holes)), compiled))
                kept[key] = holes[-1][0]
        details = kept
    if not ok:
        return None
    where = f"{r.doc.file}:{line}:{column} ({format_path(path)})"
    return ErrorHoles(message, details, tuple(holes), where)
