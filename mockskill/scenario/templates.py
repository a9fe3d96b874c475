"""Answers made from the request and the run: ``{{...}}`` placeholders, rendered.

The compiled form of a template and how it is rendered per request; reading
one at load, with its problems, is :mod:`.template_syntax`'s. The syntax:

==============================  ===============================================  =======
placeholder                     is replaced by                                   a whole
                                                                                 value is
==============================  ===============================================  =======
``{{request.body}}``            the request's JSON body                          its JSON
``{{request.body/input/text}}`` the value a JSON Pointer (RFC 6901) names in it  its JSON
``{{request.header.X-Name}}``   a request header (any case; the first one)       string
``{{request.query.name}}``      a query parameter (the first value)              string
``{{request.path.name}}``       a path variable of a free route                  string
``{{skill.id}}``                the skill answering                              string
``{{session}}``                 the session                                      string
``{{attempt}}``                 the attempt within the session's sequence, 1...  number
``{{id}}``                      this answer's fresh id (the same in all of it)   string
``{{now}}``                     this answer's time, ISO 8601 UTC                 string
``{{now.epoch_ms}}``            the same time in milliseconds since 1970         number
``{{random.int 1 100}}``        a whole number from 1 to 100 (each a new draw)   number
==============================  ===============================================  =======

A value the request may lack (``request.*`` and ``skill.id``) may be given a
default: ``{{request.body/lang | default "en"}}``; the default is a JSON
scalar (``"text"``, ``0``, ``true``, ``null``). Without one, a missing value
(or a pointer into a body that is not JSON) makes the answer a
:class:`NotRendered` naming the placeholder, for the engine to answer as a
labelled error. Spaces inside the braces are allowed; the first ``}}``
closes a placeholder (so a default cannot hold ``}}``).

A placeholder that is a whole string of a ``json:`` answer keeps the JSON
type of what it reads (a number stays a number, an object an object);
inside a longer string, or in text and headers, it is rendered as text
(strings as they are, other values as compact JSON). ``\\{{`` writes a
literal ``{{``; backslashes anywhere else are literal text (``\\\\{{``: one
backslash, then a placeholder). Single braces are never read here: the
server's ``{base_url}`` keeps being filled in as it is.

Rendering only looks values up: no code runs, nothing is read but the
request and the :class:`Source` handed in, a rendered value is never read as
a template again, and an answer stops at :data:`MAX_RENDERED_BYTES` before it
is built further. Pure: no I/O.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, Protocol

MAX_RENDERED_BYTES = 1024 * 1024
"""The largest answer a template renders: more is a :class:`NotRendered`, not memory."""

LARGEST_INT = 2**53 - 1
"""The bound of ``random.int``'s arguments: the whole numbers every JSON reader keeps exact."""

OPEN, CLOSE, ESCAPE = "{{", "}}", "\\"

NAMES = (
    "request.body/POINTER, request.header.NAME, request.query.NAME, request.path.NAME,"
    " skill.id, session, attempt, id, now, now.epoch_ms or random.int LOW HIGH"
)
"""Every placeholder, as a problem lists them."""


# -- what a template reads from ---------------------------------------------------------


class Source(Protocol):
    """What a template may read: the request, the run's generator and its clock.

    Each is asked only when a placeholder needs it (the engine's source reads
    the request lazily); one :class:`Reading` asks at most once per answer for
    the body, the fresh id and the time.
    """

    def body(self) -> bytes: ...

    def header(self, name: str) -> str | None:
        """The first header called *name* (lower case); None when there is none."""

    def query(self, name: str) -> str | None:
        """The first value of query parameter *name*; None when there is none."""

    def path_param(self, name: str) -> str | None:
        """Path variable *name* of the free route answering; None when it has none."""

    def skill_id(self) -> str | None:
        """The skill answering; None for a free route."""

    def session(self) -> str: ...

    def attempt(self) -> int:
        """The request's attempt within its session's sequence, from 1."""

    def fresh_id(self) -> str:
        """A new id, from the run's seeded generator."""

    def random_int(self, low: int, high: int) -> int:
        """A whole number from *low* to *high* inclusive, from the run's seeded generator."""

    def now_ms(self) -> int:
        """The time, in milliseconds since 1970 (UTC)."""


@dataclass(frozen=True)
class Values:
    """A :class:`Source` of plain values: ids and numbers from *rng*, the time from *clock_ms*.

    Ids are UUID version 4 in form, drawn from *rng*: the same seed, the same ids.
    """

    request_body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    query_params: Mapping[str, Sequence[str]] = field(default_factory=dict)
    path_params: Mapping[str, str] = field(default_factory=dict)
    skill: str | None = None
    session_name: str = "default"
    attempt_number: int = 1
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    clock_ms: Callable[[], int] = lambda: 0

    def body(self) -> bytes:
        return self.request_body

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name), None)

    def query(self, name: str) -> str | None:
        values = self.query_params.get(name)
        return values[0] if values else None

    def path_param(self, name: str) -> str | None:
        return self.path_params.get(name)

    def skill_id(self) -> str | None:
        return self.skill

    def session(self) -> str:
        return self.session_name

    def attempt(self) -> int:
        return self.attempt_number

    def fresh_id(self) -> str:
        return uuid4_text(self.rng.getrandbits(128))

    def random_int(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def now_ms(self) -> int:
        return self.clock_ms()


def uuid4_text(bits: int) -> str:
    """128 random *bits* as a version 4 UUID's text (what ``uuid.UUID(int=bits, version=4)``
    writes, without importing :mod:`uuid` at start-up)."""
    return uuid4_hex(bits.to_bytes(16).hex())


def uuid4_hex(h: str) -> str:
    """32 random hex digits *h* as a version 4 UUID's text (:func:`uuid4_text` of the same
    bits): a digest's ``hex()`` needs no round trip through an int."""
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT = {f"{n:x}": "89ab"[n & 3] for n in range(16)}
"""A hex digit with its top two bits made RFC 4122's variant, 10."""


class Lacking:
    """A value the request does not have, and why (a default stands in for it)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Failed(Exception):
    """Rendering stops: *why*, at *placeholder* (None: the answer as a whole)."""

    def __init__(self, why: str, placeholder: Placeholder | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.placeholder = placeholder


_UNREAD: Any = object()


class Reading:
    """One answer's reading of its request: the body parsed, the id and the time taken
    at most once (so ``{{id}}`` and ``{{now}}`` agree between body and headers), and
    what the answer may still grow by."""

    __slots__ = ("_body", "_id", "_now", "left", "limit", "source")

    def __init__(self, source: Source, limit: int = MAX_RENDERED_BYTES) -> None:
        self.source = source
        self.limit = limit
        self.left = limit
        self._body: Any = _UNREAD
        self._id: str | None = None
        self._now: int | None = None

    def spend(self, size: int) -> None:
        """Count *size* more characters of the answer; stop it when it is over its limit."""
        self.left -= size
        if self.left < 0:
            raise _Failed(self.over())

    def over(self) -> str:
        return f"the answer would be larger than {self.limit} bytes"

    def json(self) -> Any:
        """The body as JSON, or a :class:`Lacking` saying why it is not."""
        if self._body is _UNREAD:
            body = self.source.body()
            if not body:
                self._body = Lacking("the body is empty")
            else:
                try:
                    self._body = _json(body)
                except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
                    self._body = Lacking("the body is not JSON")
        return self._body

    def fresh_id(self) -> str:
        if self._id is None:
            self._id = self.source.fresh_id()
        return self._id

    def now_ms(self) -> int:
        if self._now is None:
            self._now = self.source.now_ms()
        return self._now


def _json(body: bytes) -> Any:
    """*body* read as ``when: body:`` reads it (``json.loads`` of the bytes: UTF-8 with or
    without a BOM, UTF-16, UTF-32), decoded first when it is UTF-8, the common case, as
    decoding is most of what reading bytes costs."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return json.loads(body)
    try:  # json.loads without its wrapper's calls: a body with no space around it
        value, end = _decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        if text.startswith("\ufeff"):
            return json.loads(body)
        raise


_decode = json.JSONDecoder().raw_decode


# -- the values a placeholder reads -------------------------------------------------------


@dataclass(frozen=True)
class BodyAt:
    written: str
    pointer: tuple[str, ...]

    def read(self, reading: Reading) -> Any:
        value = reading.json()
        if type(value) is Lacking:
            return value
        for token in self.pointer:
            if isinstance(value, dict) and token in value:
                value = value[token]
            elif isinstance(value, list) and _is_index(token) and int(token) < len(value):
                value = value[int(token)]
            else:
                return Lacking(f"the body has nothing at {self.written}")
        return value


def _is_index(token: str) -> bool:
    """RFC 6901's array index, ``0|[1-9][0-9]*``, in ASCII digits."""
    return token.isascii() and token.isdigit() and (token[0] != "0" or token == "0")


@dataclass(frozen=True)
class HeaderOf:
    name: str

    def read(self, reading: Reading) -> Any:
        found = reading.source.header(self.name)
        return Lacking(f"the request has no {self.name} header") if found is None else found


@dataclass(frozen=True)
class QueryOf:
    name: str

    def read(self, reading: Reading) -> Any:
        found = reading.source.query(self.name)
        return (
            Lacking(f"the request has no query parameter {self.name}") if found is None else found
        )


@dataclass(frozen=True)
class PathVariable:
    name: str

    def read(self, reading: Reading) -> Any:
        found = reading.source.path_param(self.name)
        return Lacking(f"the path has no variable {self.name}") if found is None else found


@dataclass(frozen=True)
class SkillId:
    def read(self, reading: Reading) -> Any:
        found = reading.source.skill_id()
        return Lacking("a free route answers, not a skill") if found is None else found


@dataclass(frozen=True)
class SessionName:
    def read(self, reading: Reading) -> Any:
        return reading.source.session()


@dataclass(frozen=True)
class AttemptNumber:
    def read(self, reading: Reading) -> Any:
        return reading.source.attempt()


@dataclass(frozen=True)
class FreshId:
    def read(self, reading: Reading) -> Any:
        return reading.fresh_id()


@dataclass(frozen=True)
class Now:
    def read(self, reading: Reading) -> Any:
        global _second, _instant
        ms = reading.now_ms()
        known, made = _instant
        if ms == known:  # the millisecond's text made once: answers come several a ms
            return made
        second, text = _second
        if ms // 1000 != second:  # the second's text made once: every answer in it asks
            second = ms // 1000
            text = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
            _second = (second, text)  # (one assignment: a thread reads both or neither)
        made = f"{text}{ms % 1000:03d}Z"
        _instant = (ms, made)
        return made


_second = (-1, "")
"""The last second an answer was made in, and its ISO 8601 text (without its ms)."""
_instant = (-1, "")
"""The last millisecond an answer was made in, and its ISO 8601 text."""


@dataclass(frozen=True)
class NowMs:
    def read(self, reading: Reading) -> Any:
        return reading.now_ms()


@dataclass(frozen=True)
class RandomInt:
    low: int
    high: int

    def read(self, reading: Reading) -> Any:
        return reading.source.random_int(self.low, self.high)


Value = (
    BodyAt
    | HeaderOf
    | QueryOf
    | PathVariable
    | SkillId
    | SessionName
    | AttemptNumber
    | FreshId
    | Now
    | NowMs
    | RandomInt
)
MAY_LACK = (BodyAt, HeaderOf, QueryOf, PathVariable, SkillId)
"""The values a default may stand in for; the others are always there."""
# -- compiled templates -------------------------------------------------------------------


@dataclass(frozen=True)
class Placeholder:
    """One ``{{...}}``: what it reads, and its default when the request lacks that."""

    written: str
    """As written, braces included: how a failure names it."""
    where: str
    """``file:line:column`` of its string and the path in the document, for a failure."""
    value: Value
    has_default: bool = False
    default: Any = None

    @functools.cached_property
    def json_hole(self) -> Callable[[Reading], str]:
        """How this placeholder fills a hole of a JSON answer, chosen once at load: a value
        of the run that is plain ASCII with nothing to escape (an id, the time, a number)
        is written as it is read; any other goes through :meth:`as_json`."""
        kind = type(self.value)
        if kind is FreshId or kind is Now:
            return self._quoted
        if kind is NowMs or kind is AttemptNumber or kind is RandomInt:
            return self._number
        return self.as_json

    def _quoted(self, reading: Reading) -> str:
        """An id's or the time's text as a JSON string: its characters need no escape."""
        out = f'"{self.value.read(reading)}"'
        left = reading.left = reading.left - len(out)
        if left < 0:
            raise _Failed(reading.over(), self)
        return out

    def _number(self, reading: Reading) -> str:
        """A whole number of the run (the time in ms, the attempt, a draw) as JSON."""
        out = str(self.value.read(reading))
        left = reading.left = reading.left - len(out)
        if left < 0:
            raise _Failed(reading.over(), self)
        return out

    def as_json(self, reading: Reading) -> str:
        """The value as JSON text (ASCII), keeping its type."""
        value = self.value.read(reading)
        if type(value) is not str:
            return self._encoded(value, reading, text=False)
        if len(value) >= reading.left:  # (its JSON is longer): stopped before it is copied
            raise _Failed(reading.over(), self)
        out: str = encode_basestring_ascii(value)
        left = reading.left = reading.left - len(out)
        if left < 0:
            raise _Failed(reading.over(), self)
        return out

    def as_text(self, reading: Reading) -> str:
        """The value as text: a string as it is, anything else as compact JSON."""
        value = self.value.read(reading)
        if type(value) is not str:
            return self._encoded(value, reading, text=True)
        reading.left -= len(value)
        if reading.left < 0:
            raise _Failed(reading.over(), self)
        return value

    def _encoded(self, value: Any, reading: Reading, *, text: bool) -> str:
        """A value that is not a string, or one the request lacks, as JSON or text."""
        if type(value) is Lacking:
            if not self.has_default:
                raise _Failed(value.why, self)
            value = self.default
        try:
            if text and type(value) is str:  # a default: a string as it is
                reading.spend(len(value))
                return value
            return _encode(value, reading, text=text)
        except _Failed as failed:
            raise _Failed(failed.why, self) from None


def _encode(value: Any, reading: Reading, *, text: bool) -> str:
    """*value* as JSON, spending as it grows: a large value stops the answer before it is
    copied, and a container is encoded a piece at a time (never whole past the limit)."""
    if type(value) is str:
        reading.spend(len(value) + 2)  # at least this much: counted before the copy is made
        out = json.dumps(value, ensure_ascii=not text)
        reading.spend(len(out) - len(value) - 2)
        return out
    separators = (",", ":") if text else None
    encoder = json.JSONEncoder(ensure_ascii=not text, allow_nan=False, separators=separators)
    chunks = []
    try:
        for chunk in encoder.iterencode(value):
            reading.spend(len(chunk))
            chunks.append(chunk)
    except ValueError:  # a number JSON cannot write (1e999 in the body reads as inf)
        raise _Failed("the value is a number JSON cannot hold (infinite)") from None
    except RecursionError:
        raise _Failed("the value is nested too deeply to write") from None
    return "".join(chunks)


@dataclass(frozen=True)
class NotRendered:
    """Why an answer could not be rendered: which placeholder, where it was written, why.

    The engine answers it as a labelled mockskill error (never a 500); :meth:`details`
    are that error's details.
    """

    placeholder: str
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.placeholder} could not be rendered: {self.why}"

    def details(self) -> dict[str, str]:
        return {"placeholder": self.placeholder, "at": self.where, "why": self.why}


def _not_rendered(failed: _Failed, where: str) -> NotRendered:
    if failed.placeholder is None:
        return NotRendered("(the answer)", where, failed.why)
    return NotRendered(failed.placeholder.written, failed.placeholder.where, failed.why)


@dataclass(frozen=True)
class Template:
    """A string compiled: literal text and placeholders, in order."""

    parts: tuple[str | Placeholder, ...]
    where: str
    literal: int
    """The length of its literal text, counted against the limit at once."""

    @property
    def constant(self) -> str | None:
        """The text when there is no placeholder (``\\{{`` unescaped), else None."""
        if any(type(p) is Placeholder for p in self.parts):
            return None
        return "".join(p for p in self.parts if type(p) is str)

    @property
    def whole(self) -> Placeholder | None:
        """The placeholder that is the whole string, if it is one."""
        if len(self.parts) == 1 and type(self.parts[0]) is Placeholder:
            return self.parts[0]
        return None

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(p for p in self.parts if type(p) is Placeholder)

    def text(self, reading: Reading) -> str | NotRendered:
        """The string rendered (a ``text:`` answer, an error's message)."""
        try:
            return self._text(reading)
        except _Failed as failed:
            return _not_rendered(failed, self.where)

    def body(self, reading: Reading) -> bytes | NotRendered:
        """The string rendered as UTF-8 (a lone surrogate from a JSON body: ``?``)."""
        try:
            text = self._text(reading)
            out = text.encode("utf-8", "replace")
            reading.spend(len(out) - len(text))
        except _Failed as failed:
            return _not_rendered(failed, self.where)
        return out

    def header(self, reading: Reading) -> str | NotRendered:
        """The string rendered as a header's value: a value read from the request that
        would break the header (a line break, a control character, a character beyond
        ISO-8859-1) is refused, never sent."""
        out = []
        try:
            reading.spend(self.literal)
            for part in self.parts:
                if type(part) is str:
                    out.append(part)
                    continue
                assert type(part) is Placeholder
                piece = part.as_text(reading)
                if not _fits_header(piece):
                    raise _Failed("the value holds characters a header cannot carry", part)
                out.append(piece)
        except _Failed as failed:
            return _not_rendered(failed, self.where)
        return "".join(out)

    def as_json(self, reading: Reading) -> str:
        """The string rendered, as a JSON string (ASCII): a hole of a :class:`JsonTemplate`."""
        text = self._text(reading)
        out: str = encode_basestring_ascii(text)
        reading.spend(len(out) - len(text))
        return out

    def _text(self, reading: Reading) -> str:
        reading.spend(self.literal)
        return "".join([p if isinstance(p, str) else p.as_text(reading) for p in self.parts])

    def filled(self, fill: Callable[[str], str]) -> Template:
        """This template with *fill* applied to its literal text only (the server's
        ``{base_url}``): what a placeholder renders is never filled in."""
        parts = tuple(fill(p) if type(p) is str else p for p in self.parts)
        return Template(parts, self.where, sum(len(p) for p in parts if type(p) is str))


def _fits_header(value: str) -> bool:
    """RFC 9110's field-value characters: visible ASCII, space, tab, ISO-8859-1's upper half."""
    if value.isascii() and value.isprintable():
        return True
    return all(c == "\t" or " " <= c <= "~" or "\x80" <= c <= "\xff" for c in value)


@dataclass(frozen=True)
class JsonTemplate:
    """A ``json:`` answer compiled: its JSON text in pieces, written at load, and holes
    (a :class:`Placeholder` that is a whole string, a :class:`Template` inside one)."""

    parts: tuple[str | Placeholder | Template | JsonTemplate, ...]
    """(A JsonTemplate among them: an error's ``details``, compiled where they were written.)"""
    where: str
    literal: int
    """The length of its JSON text between the holes, counted against the limit at once."""

    @property
    def constant(self) -> bytes | None:
        """The answer's bytes when nothing in it is a placeholder (it is planned once)."""
        if len(self.parts) == 1 and type(self.parts[0]) is str:
            return self.parts[0].encode()
        return None

    def render(self, reading: Reading) -> bytes | NotRendered:
        try:
            out = self.as_json(reading)
        except _Failed as failed:
            return _not_rendered(failed, self.where)
        return out.encode()  # (JSON written with ensure_ascii: ASCII)

    def as_json(self, reading: Reading) -> str:
        """The JSON text rendered (a hole of a larger one: an error's details)."""
        reading.spend(self.literal)
        out = list(self.parts)  # the literal text in place; each hole filled in
        for index, fill in self.fills:
            out[index] = fill(reading)
        return "".join(out)  # type: ignore[arg-type]

    @functools.cached_property
    def holes(self) -> tuple[int, ...]:
        """Where the holes are among :attr:`parts`."""
        return tuple(i for i, p in enumerate(self.parts) if not isinstance(p, str))

    @functools.cached_property
    def fills(self) -> tuple[tuple[int, Callable[[Reading], str]], ...]:
        """Each hole's index among :attr:`parts` and how it is filled, chosen once."""
        return tuple(
            (i, p.json_hole if isinstance(p, Placeholder) else p.as_json)  # type: ignore[union-attr]
            for i, p in ((i, self.parts[i]) for i in self.holes)
        )

    def filled(self, fill: Callable[[str], str]) -> JsonTemplate:
        """This template with *fill* applied to its literal JSON text only (see
        :meth:`Template.filled`)."""
        parts = tuple(
            fill(p) if isinstance(p, str) else p if isinstance(p, Placeholder) else p.filled(fill)
            for p in self.parts
        )
        return JsonTemplate(parts, self.where, sum(len(p) for p in parts if type(p) is str))


def draws(template: Template | JsonTemplate | Placeholder) -> bool:
    """Whether rendering *template* takes values from the run's generator (``{{id}}``,
    ``{{random.int}}``): its step is then a random one, given a generator per request."""
    if isinstance(template, Placeholder):
        return type(template.value) in (FreshId, RandomInt)
    return any(draws(p) for p in template.parts if not isinstance(p, str))


@dataclass(frozen=True)
class ReplyTemplate:
    """What of a scripted reply is made per request: its body's template and its
    headers' (the rest of the reply is as it was written)."""

    body: JsonTemplate | Template | None
    """The body's template (None: the reply's body as it is)."""
    headers: tuple[Template | None, ...]
    """One per header of the reply, in its order (None: that header as it is)."""
    draws: bool
    """Whether rendering takes values from the run's generator (see :func:`draws`)."""

    def filled(self, fill: Callable[[str], str]) -> ReplyTemplate:
        """With *fill* applied to the literal text of each template (not to what renders)."""
        body = None if self.body is None else self.body.filled(fill)
        headers = tuple(None if h is None else h.filled(fill) for h in self.headers)
        return ReplyTemplate(body, headers, self.draws)

    def body_of(self, reading: Reading) -> bytes | NotRendered | None:
        """The body rendered (None: it has no template)."""
        body = self.body
        if body is None:
            return None
        return body.render(reading) if isinstance(body, JsonTemplate) else body.body(reading)
