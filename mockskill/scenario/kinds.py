"""What a step can be and do, declared once: its kinds, the faults, the delay shapes.

Each is a row of a frozen table: its YAML name, what it takes and a one-line
summary. Everything that lists them is driven from here — the loader's checks
and their "expected one of …" messages (:mod:`.steps`, :mod:`.wire`,
:mod:`.delays`), the JSON Schema's enums and alternatives (:mod:`.schema`
says which parts, a test compares the file), the players of the transport and
of the WSGI app (:func:`players`), and the tables of docs/scenarios.md and
docs/tls.md (:func:`docs_table`, a test compares them). A new fault, shape or
kind is a row here; the tests then name every place that does not follow yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar


@dataclass(frozen=True)
class Declared:
    """A row of a table here: its name as written in YAML, and its line in the docs."""

    name: str
    summary: str

    @property
    def shown(self) -> str:
        """How the docs' table names it."""
        return self.name


@dataclass(frozen=True)
class StepKind(Declared):
    """A key that gives a step something to answer with."""

    body: bool = False
    """Whether it is the step's body: a step has at most one body kind."""
    own_reader: bool = False
    """Whether the step is read by a reader of its own (a random or a forwarded step),
    not as a plain step."""
    made_per_request: bool = False
    """Whether the engine writes its answer per request (a rate-limited answer's headers
    read the clock; a stream's events are framed and timed as they go): only ``times``,
    ``delay`` and ``set_state`` may be beside it (and ``after`` beside ``task: submit``:
    the task started, its 202 lost)."""


STEP_KINDS: tuple[StepKind, ...] = (
    StepKind("error", "a protocol error in the unified body, at its category's status", body=True),
    StepKind("json", "a JSON body, sent as application/json", body=True),
    StepKind("text", "a text body, sent as text/plain", body=True),
    StepKind("body_base64", "a body of bytes, written in base64", body=True),
    StepKind("body_file", "a body of bytes, read from a file at load", body=True),
    StepKind("descriptor", "the skill's descriptor (skill endpoints only)", body=True),
    StepKind(
        "rate_limited",
        "a rate-limited answer (429 or 503) advising the wait given, without a bucket",
        body=True,
        made_per_request=True,
    ),
    StepKind(
        "task",
        "a long-running task's answer: `submit` starts it (202), `status` reports it as it is"
        " now (see [long-running tasks](#long-running-tasks))",
        body=True,
        made_per_request=True,
    ),
    StepKind(
        "stream",
        "a stream of events (SSE or NDJSON) with a terminal result or error event, and faults"
        " after event N (see [streams](#streams))",
        body=True,
        made_per_request=True,
    ),
    StepKind("status", "a result's status (200 to 599); alone, a result without a body"),
    StepKind("fault", "a transport fault done to the connection instead of an answer"),
    StepKind("hang", "the connection held without a byte, then closed, or answered late"),
    StepKind("one_of", "one of weighted outcomes, drawn per request", own_reader=True),
    StepKind("proxy", "the request forwarded to a real provider", own_reader=True),
)
BODY_KINDS: tuple[str, ...] = tuple(k.name for k in STEP_KINDS if k.body)
"""The kinds a step may have only one of (``error`` and the bodies)."""
WRITTEN_BODIES: tuple[str, ...] = tuple(
    k.name for k in STEP_KINDS if k.body and not k.made_per_request
)
"""The bodies a step writes out itself: what ``dribble`` can send slowly."""
PLAIN_KINDS: tuple[str, ...] = tuple(k.name for k in STEP_KINDS if not k.own_reader)
"""What a plain step must have at least one of."""


@dataclass(frozen=True)
class FaultKind(Declared):
    """A transport fault: done to the connection instead of the answer.

    It takes no parameters of its own: the faults that send some HTTP send the
    step's status, headers and body (or a small JSON body of their own).
    """

    random: bool = False
    """Whether playing it draws from the seeded generator."""


FAULTS: tuple[FaultKind, ...] = (
    FaultKind("CONNECTION_RESET_BY_PEER", "a TCP reset (RST) instead of an answer"),
    FaultKind("EMPTY_RESPONSE", "the connection closes without a byte"),
    FaultKind(
        "MALFORMED_RESPONSE_CHUNK", "a valid status line and headers, then broken chunked framing"
    ),
    FaultKind(
        "RANDOM_DATA_THEN_CLOSE",
        "bytes that are not HTTP (from the seeded generator), then close",
        random=True,
    ),
    FaultKind("TRUNCATED_BODY", "a `Content-Length` longer than the body sent, then close"),
)
"""The names are WireMock's, which users already know, plus ``TRUNCATED_BODY``."""
FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in FAULTS)
RANDOM_FAULTS: frozenset[str] = frozenset(f.name for f in FAULTS if f.random)


@dataclass(frozen=True)
class TLSFaultKind(Declared):
    """A TLS fault: how the handshake on a skill's own HTTPS port fails (``tls:``)."""

    raw: bool = False
    """Whether it is done to the raw connection, with no handshake at all."""
    transient: bool = False
    """Whether a retry may pass it (a middlebox, a server restarting)."""


TLS_FAULTS: tuple[TLSFaultKind, ...] = (
    TLSFaultKind("expired", "a certificate from the server's CA whose validity ended yesterday"),
    TLSFaultKind("not_yet_valid", "a certificate from the server's CA valid from tomorrow"),
    TLSFaultKind(
        "wrong_host", "a certificate from the server's CA for `wrong-host.mockskill.invalid` only"
    ),
    TLSFaultKind("untrusted", "a certificate from another CA, which the consumer was not given"),
    TLSFaultKind("self_signed", "a self-signed certificate"),
    TLSFaultKind(
        "weak_key",
        "a certificate from the server's CA with an RSA-1024 key (OpenSSL's default security"
        " level refuses it)",
    ),
    TLSFaultKind(
        "client_cert_required",
        "asks for a client certificate from the server's CA: none, or another, fails",
    ),
    TLSFaultKind(
        "handshake_reset",
        "the connection is reset (RST) once the ClientHello is in",
        raw=True,
        transient=True,
    ),
    TLSFaultKind(
        "handshake_hang",
        "no ServerHello, until the client gives up (or the server stops)",
        raw=True,
        transient=True,
    ),
    TLSFaultKind("plain_http", "a plain HTTP `400` answered on the TLS port", raw=True),
    TLSFaultKind("protocol_version", "TLS 1.0 only"),
)
TLS_FAULT_NAMES: tuple[str, ...] = tuple(f.name for f in TLS_FAULTS)


@dataclass(frozen=True)
class Param(Declared):
    """A key of a delay shape written as a mapping."""

    required: bool = True
    """Whether it must be written (else its default applies)."""


@dataclass(frozen=True)
class DelayShape(Declared):
    """A delay shape: ``{name: ...}``, drawn per request."""

    written: str
    """How it is written, as problems and the docs show it."""
    params: tuple[Param, ...] = ()
    """Its keys, when its value is a mapping."""

    @property
    def shown(self) -> str:
        return self.written


SHAPES: tuple[DelayShape, ...] = (
    DelayShape("fixed", "always the same (the same as a plain number)", "{fixed: MS}"),
    DelayShape("uniform", "every value in the range equally likely", "{uniform: [MIN, MAX]}"),
    DelayShape(
        "lognormal",
        "the long tail of real services: half the draws below `median`, a heavier tail as"
        " `sigma` grows (0 < S ≤ 5). A draw over `cap` is drawn again — never clamped, which"
        " would pile the tail up at the cap. Without `cap`, the maximum delay is the cap",
        "{lognormal: {median: MS, sigma: S, cap: MS}}",
        (
            Param("median", "the median wait in ms"),
            Param("sigma", "the spread, the standard deviation of the log"),
            Param("cap", "the longest wait in ms (default: the maximum delay)", required=False),
        ),
    ),
)
SHAPE_NAMES: tuple[str, ...] = tuple(s.name for s in SHAPES)


def shape(name: str) -> DelayShape:
    """The declared shape called *name*."""
    return next(s for s in SHAPES if s.name == name)


def listed(names: Iterable[str], last: str = "or") -> str:
    """``a, b or c``: names as a problem or a description lists them."""
    *first, final = names
    return f"{', '.join(first)} {last} {final}" if first else final


F = TypeVar("F", bound=Callable[..., object])


def implemented(names: tuple[str, ...], *functions: F) -> dict[str, F]:
    """The function that does each declared name, by name, in the declared order.

    Each is the function named after what it does, in lower case and leading
    underscores aside (``empty_response`` plays ``EMPTY_RESPONSE``, ``_uniform``
    reads ``uniform``). Raises ValueError when a name has none or a function no
    name: a name that loads must play, on every path that plays it.
    """
    found = {f.__name__.lstrip("_").lower(): f for f in functions}
    wanted = {name.lower(): name for name in names}
    if found.keys() != wanted.keys():
        extra = [f.__name__ for key, f in found.items() if key not in wanted]
        missing = [name for key, name in wanted.items() if key not in found]
        raise ValueError(f"functions {extra} do no declared name; nothing does {missing}")
    return {name: found[name.lower()] for name in names}


def players(*functions: F) -> dict[str, F]:
    """Each declared fault's player, by its name (see :func:`implemented`)."""
    return implemented(FAULT_NAMES, *functions)


def docs_table(heading: tuple[str, str], rows: Iterable[Declared]) -> str:
    """A Markdown table of declared rows, as the docs show them."""
    lines = [f"| {heading[0]} | {heading[1]} |", "|---|---|"]
    lines += [f"| `{row.shown}` | {row.summary} |" for row in rows]
    return "\n".join(lines) + "\n"


def step_table(step_kinds: Iterable[StepKind] = STEP_KINDS) -> str:
    """The step kinds' table of docs/scenarios.md."""
    return docs_table(("key", "answers with"), step_kinds)


def fault_table(faults: Iterable[FaultKind] = FAULTS) -> str:
    """The transport faults' table of docs/scenarios.md."""
    return docs_table(("fault", "on the wire"), faults)


def tls_table(faults: Iterable[TLSFaultKind] = TLS_FAULTS) -> str:
    """The TLS faults' table of docs/tls.md."""
    return docs_table(("fault", "the port's handshake"), faults)


def shape_table(shapes: Iterable[DelayShape] = SHAPES) -> str:
    """The delay shapes' table of docs/scenarios.md."""
    return docs_table(("shape", "meaning"), shapes)
