"""Free routes' paths: Werkzeug's rule syntax, parsed and matched without Werkzeug.

A route's ``path`` is written in Werkzeug's rule syntax (``/orders/<int:id>``,
``/files/<path:rest>``, ``/<any(a, b):kind>``, ``/<string(length=2):lang>``,
``/<uuid:id>``, ``/<float(signed=True):x>``), and has always been matched the
way Werkzeug's ``Map(strict_slashes=False, merge_slashes=False)`` matches it.
Importing Werkzeug makes every start pay for its development server and test
client, which serving skills does not need: so
this module parses the same syntax with the same converters and arguments,
and matches with the same state machine (static parts before variable ones,
variable ones by Werkzeug's weights, a trailing slash optional), in a few
hundred lines of its own. Each rule is compiled once, when its scenario set
is loaded; a request costs one walk of the machine.

What is matched is which rule, never the values: a converter's values are
checked (``int(min=1, max=9)``, ``fixed_digits``) as Werkzeug checks them,
and then dropped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

E = TypeVar("E")

# The rule syntax Werkzeug documents, written here in our own terms: a rule is a run of
# slashes, static text and <converter(arguments):variable> parts; a converter's arguments
# are comma-separated values, each optionally name=, read as Werkzeug reads them (a number
# is one or more digits and one more character and maybe digits again; a word; a quoted
# string, optionally with a u/r prefix). tests/scenario/test_routes.py parses and matches
# random rules with both, so a difference shows. Compiled on the first rule parsed, not at
# import: a set without routes never needs them.
_NAME = "[a-zA-Z_][a-zA-Z0-9_]*"
_PART_SOURCE = (
    "(?P<slash>/)"
    "|(?P<static>[^</]+)"
    rf"|<(?:(?P<converter>{_NAME})(?:\((?P<arguments>.*?)\))?:)?(?P<variable>{_NAME})>"
)
_QUOTED = r"""[urUR]?(?P<stringval>"[^"]*?"|'[^']*')"""
_ARGUMENT_SOURCE = rf"\s*(?:(?P<name>\w+)\s*=\s*)?(?P<value>\d+.\d+|\d+.|[\w.]+|{_QUOTED})\s*,"
_grammar: list[re.Pattern[str]] = []
"""The two expressions, once compiled: a rule's parts, a converter's arguments."""
_CONSTANTS: dict[str, Any] = {"None": None, "True": True, "False": False}


class RuleError(ValueError):
    """A path that is not a rule; the message says why, as Werkzeug's did."""


class _Converter:
    """Matches one variable: its regular expression, and the check of what it matched."""

    regex = "[^/]+"
    weight = 100
    part_isolating = True
    """False: the variable may match slashes (``path``), so it takes the rest of the path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # (Werkzeug's base converter accepts and ignores any argument: so here)

    def valid(self, value: str) -> bool:
        return True


class _String(_Converter):
    def __init__(
        self, minlength: int = 1, maxlength: int | None = None, length: int | None = None
    ) -> None:
        if length is not None:
            counts = f"{{{int(length)}}}"
        else:
            most = "" if maxlength is None else str(int(maxlength))
            counts = f"{{{int(minlength)},{most}}}"
        self.regex = f"[^/]{counts}"


class _Any(_Converter):
    def __init__(self, *items: str) -> None:
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"takes names, not {item!r}")
        self.regex = f"(?:{'|'.join(re.escape(item) for item in items)})"


class _Path(_Converter):
    regex = "[^/].*?"
    weight = 200
    part_isolating = False


class _Number(_Converter):
    weight = 50
    regex = r"\d+"
    convert: Any = int

    def __init__(
        self,
        fixed_digits: int = 0,
        min: float | None = None,
        max: float | None = None,
        signed: bool = False,
    ) -> None:
        for name, bound in (("min", min), ("max", max)):
            # Checked here: Werkzeug compared them at request time, and answered a 500.
            if bound is not None and not isinstance(bound, (int, float)):
                raise TypeError(f"{name} must be a number, not {bound!r}")
        if signed:
            self.regex = f"-?{self.regex}"
        self.fixed_digits, self.min, self.max = fixed_digits, min, max

    def valid(self, value: str) -> bool:
        if self.fixed_digits and len(value) != self.fixed_digits:
            return False
        try:
            number = self.convert(value)
        except ValueError:
            return False
        return not (
            (self.min is not None and number < self.min)
            or (self.max is not None and number > self.max)
        )


class _Int(_Number):
    pass


class _Float(_Number):
    regex = r"\d+\.\d+"
    convert = float

    def __init__(
        self,
        min: float | None = None,
        max: float | None = None,
        signed: bool = False,
    ) -> None:
        super().__init__(min=min, max=max, signed=signed)


class _UUID(_Converter):
    regex = r"[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{12}"

    # (Werkzeug's to_python makes a UUID of it, which the expression admits always)


CONVERTERS: dict[str, type[_Converter]] = {
    "default": _String,
    "string": _String,
    "any": _Any,
    "path": _Path,
    "int": _Int,
    "float": _Float,
    "uuid": _UUID,
}
"""Werkzeug's converters, by the names a rule uses."""

Weight = tuple[int, tuple[tuple[int, int], ...], int, tuple[int, ...]]


class _Part(NamedTuple):
    """A step of the machine: a path segment (static), or a regular expression over one
    (or, *final*, over the rest of the path). Equal parts of two rules share a state."""

    content: str
    final: bool
    static: bool
    suffixed: bool
    weight: Weight


class Rule:
    """One parsed rule: its parts (each with its expression compiled, None for a static
    one), and its variables' converters in order."""

    __slots__ = ("converters", "parts", "text")

    def __init__(
        self,
        text: str,
        parts: tuple[tuple[_Part, re.Pattern[str] | None], ...],
        converters: tuple[_Converter, ...],
    ) -> None:
        self.text, self.parts, self.converters = text, parts, converters


def _grammar_of() -> list[re.Pattern[str]]:
    if not _grammar:
        _grammar.extend(re.compile(s) for s in (_PART_SOURCE, _ARGUMENT_SOURCE))
    return _grammar


def _arguments(text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A converter's arguments, read as Werkzeug reads them (``parse_converter_args``)."""
    text += ","
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    position = 0
    for item in _grammar_of()[1].finditer(text):
        if item.start() != position:
            raise RuleError(f"Cannot parse converter argument '{text[position : item.start()]}'")
        value = item.group("stringval")
        if value is None:
            value = item.group("value")
        read = _pythonized(value)
        if not item.group("name"):
            args.append(read)
        else:
            kwargs[item.group("name")] = read
        position = item.end()
    return tuple(args), kwargs


def _pythonized(value: str) -> Any:
    if value in _CONSTANTS:
        return _CONSTANTS[value]
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    if value[:1] == value[-1:] and value[0] in "\"'":
        value = value[1:-1]
    return str(value)


def _converter(name: str, arguments: str | None) -> _Converter:
    args, kwargs = _arguments(arguments or "")
    kind = CONVERTERS.get(name)
    if kind is None:
        raise RuleError(f"the converter {name!r} does not exist")
    try:
        return kind(*args, **kwargs)
    except TypeError as exc:  # an argument it does not take: said with the rule's name for it
        said, named = re.subn(r"^\w+\.__init__\(\)", f"the converter {name!r}", str(exc))
        raise RuleError(said if named else f"the converter {name!r}: {said}") from None
    except ValueError as exc:  # (int("x") of a length)
        raise RuleError(f"the converter {name!r}: {exc}") from None


def parse(text: str) -> Rule:
    """*text* (a path starting with ``/``) as a rule; RuleError says what is wrong with it."""
    if not text.startswith("/"):
        raise RuleError(f"URL rule '{text}' must start with a slash.")
    converters: list[_Converter] = []
    names: set[str] = set()
    parts = [_part("", False, True, False, (0, (), 0, ()))]  # the (empty) domain
    content, static, final = "", True, False
    argument_weights: list[int] = []
    static_weights: list[tuple[int, int]] = []
    number = 0

    def weight() -> Weight:
        statics, arguments = tuple(static_weights), tuple(argument_weights)
        return (-len(statics), statics, -len(arguments), arguments)

    position = 0
    while position < len(text):
        match = _grammar_of()[0].match(text, position)
        if match is None:
            raise RuleError(f"malformed url rule: {text!r}")
        data = match.groupdict()
        if data["static"] is not None:
            static_weights.append((len(static_weights), -len(data["static"])))
            content += data["static"] if static else re.escape(data["static"])
        if data["variable"] is not None:
            variable = data["variable"]
            if variable in _CONSTANTS:
                raise RuleError(f"a variable cannot be named {variable!r}")
            if static:
                content = re.escape(content)  # the part becomes an expression
            static = False
            converter = _converter(data["converter"] or "default", data["arguments"])
            if variable in names:
                raise RuleError(f"duplicate argument {variable!r}: a rule names each variable once")
            names.add(variable)
            converters.append(converter)
            if not converter.part_isolating:
                final = True
            content += f"(?P<_v{number}>{converter.regex})"
            number += 1
            argument_weights.append(converter.weight)
        if data["slash"] is not None:
            if final:
                content += "/"
            else:
                if not static:
                    content += r"\Z"
                parts.append(_part(content, final, static, False, weight()))
                content, static, final = "", True, False
                argument_weights, static_weights, number = [], [], 0
        position = match.end()
    suffixed = False
    if final and content.endswith("/"):
        # A slash after a variable that takes slashes: matched optionally, so that a
        # trailing slash is as for any rule (Werkzeug's "suffixed" part).
        suffixed = True
        content = content[:-1] + "(?<!/)(/?)"
    if not static:
        content += r"\Z"
    parts.append(_part(content, final, static, suffixed, weight()))
    if suffixed:
        parts.append(_part("", False, True, False, weight()))
    return Rule(text, tuple(parts), tuple(converters))


def _part(
    content: str, final: bool, static: bool, suffixed: bool, weight: Weight
) -> tuple[_Part, re.Pattern[str] | None]:
    return _Part(content, final, static, suffixed, weight), None if static else re.compile(content)


class _State(Generic[E]):
    __slots__ = ("dynamic", "rules", "static")

    def __init__(self) -> None:
        self.dynamic: list[tuple[_Part, re.Pattern[str], _State[E]]] = []
        self.rules: list[tuple[Rule, frozenset[str] | None, E]] = []
        self.static: dict[str, _State[E]] = {}


class Router(Generic[E]):
    """Rules and their endpoints, matched as one Werkzeug Map of them matches (no strict
    slashes, no merged slashes). Read-only once built: safe on any thread."""

    def __init__(self, rules: Iterable[tuple[str | Rule, Collection[str] | None, E]]) -> None:
        """*rules*: each a rule (its text, or parsed), the methods it takes (None: any; HEAD
        comes with GET) and the endpoint :meth:`match` answers for it."""
        self._root: _State[E] = _State()
        self._order: dict[int, int] = {}
        """Each entry's place among the rules given (by the entry's id: :meth:`every`)."""
        for rule, methods, endpoint in rules:
            parsed = parse(rule) if isinstance(rule, str) else rule
            taken = None
            if methods is not None:
                upper = {m.upper() for m in methods}
                if "GET" in upper:
                    upper.add("HEAD")
                taken = frozenset(upper)
            self._add(parsed, taken, endpoint)
        self._sort(self._root)

    def _add(self, rule: Rule, methods: frozenset[str] | None, endpoint: E) -> None:
        state = self._root
        for part, compiled in rule.parts:
            if compiled is None:
                state = state.static.setdefault(part.content, _State())
            else:
                for known, _, following in state.dynamic:
                    if known == part:
                        state = following
                        break
                else:
                    following = _State()
                    state.dynamic.append((part, compiled, following))
                    state = following
        entry = (rule, methods, endpoint)
        self._order[id(entry)] = len(self._order)
        state.rules.append(entry)

    def _sort(self, state: _State[E]) -> None:
        state.dynamic.sort(key=lambda entry: entry[0].weight)
        for following in state.static.values():
            self._sort(following)
        for *_, following in state.dynamic:
            self._sort(following)

    def match(self, path: str, method: str = "GET") -> E | None:
        """The endpoint of the rule *path* and *method* match; None when none does."""
        path = f"/{path.lstrip('/')}" if path else ""
        found = _walk(self._root, ["", *path.split("/")], [], method)
        if found is None:
            return None
        (rule, _, endpoint), values = found
        # Checked once the rule is found, as Werkzeug does: a value its converter refuses
        # (out of range, wrong digits) is no match at all, not a try of the next rule.
        for converter, value in zip(rule.converters, values, strict=True):
            if not converter.valid(value):
                return None
        return endpoint

    def every(self, path: str) -> list[E]:
        """The endpoints of every rule *path* matches, whatever their methods: each as a
        router of that rule alone would match it (in the order the rules were given).

        One walk of the machine, every branch taken, instead of a walk per rule: what a
        request that matched nothing is measured against (its near misses)."""
        path = f"/{path.lstrip('/')}" if path else ""
        found: dict[int, tuple[tuple[Rule, frozenset[str] | None, E], list[str]]] = {}
        _walk_every(self._root, ["", *path.split("/")], [], found)
        matched = []
        for entry, values in found.values():
            rule, _, endpoint = entry
            if all(c.valid(v) for c, v in zip(rule.converters, values, strict=True)):
                matched.append((self._order[id(entry)], endpoint))
        return [endpoint for _, endpoint in sorted(matched, key=lambda item: item[0])]


def _takes(methods: frozenset[str] | None, method: str) -> bool:
    return methods is None or method in methods


def _variable_steps(
    state: _State[E], parts: Sequence[str]
) -> Iterator[tuple[_State[E], Sequence[str], list[str]]]:
    """Each variable transition of *state* the path's next part (or, for a final
    converter, the rest of the path) takes, in order: the state it leads to, the parts
    left after it, and the values it read."""
    for test, compiled, following in state.dynamic:
        target, remaining = parts[0], parts[1:]
        if test.final:  # takes the rest of the path
            target, remaining = "/".join(parts), []
        match = compiled.match(target)
        if match is None:
            continue
        if test.suffixed and match.groups()[-1] == "/":
            remaining = [""]
        groups = sorted(
            ((k, v) for k, v in match.groupdict().items() if k.startswith("_v")),
            key=lambda item: int(item[0][2:]),
        )
        yield following, remaining, [v for _, v in groups]


def _walk(
    state: _State[E], parts: Sequence[str], values: list[str], method: str
) -> tuple[tuple[Rule, frozenset[str] | None, E], list[str]] | None:
    """Werkzeug's ``StateMachineMatcher.match``: the first rule along static transitions
    first, then variable ones by weight, backtracking; a trailing slash optional."""
    if not parts:
        for entry in state.rules:
            if _takes(entry[1], method):
                return entry, values
        if "" in state.static:  # the rule ends with a slash the path has not
            for entry in state.static[""].rules:
                if _takes(entry[1], method):
                    return entry, values
        return None
    part = parts[0]
    if part in state.static:
        found = _walk(state.static[part], parts[1:], values, method)
        if found is not None:
            return found
    for following, remaining, read in _variable_steps(state, parts):
        found = _walk(following, remaining, values + read, method)
        if found is not None:
            return found
    if list(parts) == [""]:  # the path ends with a slash the rule has not
        for entry in state.rules:
            if _takes(entry[1], method):
                return entry, values
    return None


def _walk_every(
    state: _State[E],
    parts: Sequence[str],
    values: list[str],
    found: dict[int, tuple[tuple[Rule, frozenset[str] | None, E], list[str]]],
) -> None:
    """:func:`_walk` for any method, every branch taken: each entry (by id) with the values
    of the first way through the machine that reaches it (the way a walk of its rule
    alone takes, the transitions being tried in the same order)."""

    def reached(entries: list[tuple[Rule, frozenset[str] | None, E]]) -> None:
        for entry in entries:
            found.setdefault(id(entry), (entry, values))

    if not parts:
        reached(state.rules)
        if "" in state.static:
            reached(state.static[""].rules)
        return
    part = parts[0]
    if part in state.static:
        _walk_every(state.static[part], parts[1:], values, found)
    for following, remaining, read in _variable_steps(state, parts):
        _walk_every(following, remaining, values + read, found)
    if list(parts) == [""]:
        reached(state.rules)


def variables(text: str) -> tuple[str, ...]:
    """The names of rule *text*'s variables, in order (none when it is not a rule)."""
    names = []
    for match in _grammar_of()[0].finditer(text):
        if match.group("variable") is not None:
            names.append(match.group("variable"))
    return tuple(names)


@functools.lru_cache(maxsize=256)
def _whole(text: str) -> re.Pattern[str]:
    """Rule *text* as one expression, each variable a named group, a trailing slash optional."""
    source = ""
    for match in _grammar_of()[0].finditer(text):
        data = match.groupdict()
        if data["variable"] is not None:
            converter = _converter(data["converter"] or "default", data["arguments"])
            source += f"(?P<{data['variable']}>{converter.regex})"
        else:
            source += re.escape(match.group())
    return re.compile(source.rstrip("/") + "/?")


def values(text: str, path: str) -> dict[str, str]:
    """The values of rule *text*'s variables in *path* (a path the rule matched), as sent:
    what the request's path held there (the converters' checks were the match's)."""
    found = _whole(text).fullmatch(path)
    return {} if found is None else found.groupdict()
