"""A step's ``stream:`` — an answer that is a stream of events → checked model.

:func:`stream_step` reads a step that answers with a stream (docs/streams.md, and
docs/scenarios.md's "Streams") into a :class:`~.model.Step` whose
:attr:`~.model.Step.stream` is a frozen :class:`~.model.Stream`: its framings
(``format:``), its events with their pauses, a ``repeat:`` unrolled here once (its
``rate:`` made into each event's pause, its ``id_from:`` into each event's id), each
event's data dumped once (compact JSON) or kept as text, its terminal event (``end:``: a
result, or an error event carrying the catalog's unified body), its ``fault:`` after
event N, ``heartbeat:``, ``retry:``, and the head's ``status:`` and ``headers:``. Pauses
and spans carry their unit (:mod:`.durations`).

What only a whole stream can get wrong is checked here, each a positioned problem: an
event framed larger than :data:`~.model.MAX_EVENT_BYTES`, an id with a line break or a
NUL, more than :data:`~.model.MAX_STREAM_EVENTS` events, a fault after more events than
there are, a comment or ``retry:`` in a stream that is only NDJSON, ``stream:`` beside
another way of answering. How the events are framed and timed on the wire is the
engine's and the transport's; the sizes measured here follow the framing docs/streams.md
gives.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .durations import read_duration
from .kinds import listed
from .model import (
    MAX_EVENT_BYTES,
    MAX_STREAM_EVENTS,
    STREAM_FAULTS,
    STREAM_FORMATS,
    Reply,
    Step,
    Stream,
    StreamEnd,
    StreamEvent,
    StreamFault,
)
from .problems import Path, describe
from .reader import Reader
from .templates import OPEN
from .waits_and_faults import BAD
from .waits_and_faults import delay as read_delay

__all__ = [
    "BESIDE_STREAM",
    "END_KEYS",
    "EVENT_KEYS",
    "FAULT_KEYS",
    "MEDIA_TYPES",
    "REPEAT_KEYS",
    "REPLACING_FAULTS",
    "STREAM_KEYS",
    "framed_size",
    "stream_step",
]

STREAM_KEYS = (
    "format",
    "retry",
    "heartbeat",
    "events",
    "end",
    "fault",
    "resumable",
    "idle_bound",
    "expected",
    "status",
    "headers",
)
EVENT_KEYS = ("event", "data", "id", "delay", "comment")
"""An event of ``events:`` (or a comment alone: ``{comment: ...}``)."""
REPEAT_KEYS = ("repeat", "rate", "delay", "event", "data", "id", "id_from")
"""An item of ``events:`` that is one event sent ``repeat`` times."""
END_KEYS = ("event", "data", "id", "delay", "error", "message", "details", "retry")
"""``end:``: a result event (``data``), or an error event (``error`` and a step's overrides)."""
FAULT_KEYS = ("after", "kind", "for")
BESIDE_STREAM = ("stream", "times", "delay", "set_state")
"""A ``stream:`` step's keys: its answer is the stream (its status and headers inside it)."""
MEDIA_TYPES = {"sse": "text/event-stream; charset=utf-8", "ndjson": "application/x-ndjson"}
"""Each format's ``Content-Type`` (the head of a stream step's reply: its first format's)."""
REPLACING_FAULTS = tuple(
    kind for kind in STREAM_FAULTS if kind not in ("reset", "close", "stall", "broken_chunking")
)
"""The faults sent in place of event N+1 (a malformed event, a repeated or lower id): a
stream with such a fault needs an event after the N before it."""
_ID_FAULTS = ("duplicate_id", "out_of_order_id")
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*(s|m)")
_PER = {"s": 1000, "m": 60_000}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

ReadStep = Callable[[Reader, Any, Path, Any], "Step | None"]
"""The step reader (:func:`.steps.read_step`), handed in: it imports this module."""


@dataclass(frozen=True)
class _Item:
    """One item of ``events:`` read: the event (a repeat's first), how many times it is
    sent, the pause before each, and the ids of a repeat's events."""

    event: StreamEvent
    value: Any
    """The data as scripted (for the NDJSON size); None for none."""
    repeat: int = 1
    pauses: tuple[int, ...] = ()
    """A repeat's pause before each event (ms); empty: the event's own delay."""
    id_from: int | None = None


def stream_step(
    r: Reader, raw: dict[str, Any], path: Path, ctx: Any, read_step: ReadStep
) -> Step | None:
    """A step with ``stream:`` (its ``times`` and ``set_state`` are read by the caller);
    *read_step* reads the head (``status``, ``headers``) and an error end as a step's.

    Its :attr:`~.model.Step.reply` is the stream's head (its status and headers, the first
    format's ``Content-Type``, no body); :attr:`~.model.Step.stream` the events."""
    others = [k for k in raw if k not in BESIDE_STREAM]
    if others:
        key = others[0]
        r.bad(
            (*path, key),
            f"only {listed(BESIDE_STREAM[1:], 'and')} beside stream",
            f"{key} as well",
            _beside_hint(key),
            at_key=True,
        )
        return None
    delay = read_delay(r, raw, "delay", path)
    stream = read_stream(r, raw["stream"], (*path, "stream"), ctx, read_step)
    if stream is None or delay is BAD:
        return None
    reply = Reply.make(stream.status, b"", MEDIA_TYPES[stream.formats[0]], stream.headers)
    return Step(reply, r.position(path), delay=delay, stream=stream)


def _beside_hint(key: str) -> str:
    if key in ("fault", "hang", "dribble"):
        return "a stream's faults go inside it: stream: {fault: {after: N, kind: reset}}"
    if key in ("status", "headers"):
        return f"the stream's head goes inside it: stream: {{{key}: ...}}"
    if key == "proxy":
        return "a step forwards, or streams: split them into two steps"
    return "a step answers one way: its answer is the stream's events; split them into two steps"


def read_stream(r: Reader, value: Any, path: Path, ctx: Any, read_step: ReadStep) -> Stream | None:
    """``stream:``'s value, checked; None (problems recorded) when it is wrong."""
    raw = r.mapping(value, path, "a stream: a mapping with events: (and format, end, fault ...)")
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, STREAM_KEYS)
    formats = _formats(r, raw, path)
    sse = formats is not None and "sse" in formats
    retry = _duration(r, raw, "retry", path, minimum=0)
    heartbeat = _duration(r, raw, "heartbeat", path, minimum=1)
    idle_bound = _duration(r, raw, "idle_bound", path, minimum=1)
    expected = _duration(r, raw, "expected", path, minimum=0)
    if "retry" in raw and formats is not None and not sse:
        _sse_only(r, (*path, "retry"), "retry:", "NDJSON has no reconnection time")
    resumable = r.boolean(raw.get("resumable", False), (*path, "resumable"))
    items = _events(r, raw.get("events", []), (*path, "events"), formats or STREAM_FORMATS)
    end = _end(r, raw.get("end"), (*path, "end"), ctx, read_step, formats or STREAM_FORMATS)
    head = _head(r, raw, path, ctx, read_step)
    fault = _fault(r, raw.get("fault"), (*path, "fault"))
    if len(r.problems) > before or formats is None or items is None or head is None:
        return None
    if end is BAD or fault is BAD or resumable is None:
        return None
    events = _unrolled(r, items, (*path, "events"))
    if events is None:
        return None
    if not events and end is None:
        r.bad(
            path,
            "a stream with events: or an end:",
            "neither: it would send nothing",
            "add events: [{data: ...}], or end: {data: ...}",
        )
        return None
    assert end is None or isinstance(end, StreamEnd)
    assert fault is None or isinstance(fault, StreamFault)
    if fault is not None and not _fits(r, fault, (*path, "fault"), events):
        return None
    ids = any(e.id for e in events if e.data is not None) or (end is not None and end.event.id)
    if resumable and not ids:
        r.warn(
            (*path, "resumable"),
            "events with ids (id: or a repeat's id_from:) to resume after",
            "resumable: true, and no event with an id",
            "a consumer resumes after the last id it got (Last-Event-ID): give events ids",
        )
    status, headers = head
    return Stream(
        where=r.position(path),
        events=events,
        formats=formats,
        end=end,
        heartbeat_ms=heartbeat,
        retry_ms=retry,
        fault=fault,
        resumable=resumable,
        status=status,
        headers=headers,
        idle_bound_ms=idle_bound,
        expected_ms=expected,
    )


def _formats(r: Reader, raw: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    value = raw.get("format", STREAM_FORMATS[0])
    where = (*path, "format")
    if isinstance(value, str):
        return (value,) if r.among(value, where, STREAM_FORMATS) else None
    if not isinstance(value, list) or not value:
        r.bad(
            where, f"{listed(STREAM_FORMATS)}, or a list of them ([sse, ndjson])", describe(value)
        )
        return None
    found: list[str] = []
    for i, item in enumerate(value):
        if not r.among(item, (*where, i), STREAM_FORMATS):
            return None
        if item in found:
            r.bad((*where, i), "each format once", f"{item!r} again", "the first is the default")
            return None
        found.append(item)
    return tuple(found)


def _duration(r: Reader, raw: dict[str, Any], key: str, path: Path, *, minimum: int) -> int | None:
    if key not in raw:
        return None
    return read_duration(r, raw[key], (*path, key), minimum=minimum, maximum=r.max_delay_ms)


def _sse_only(r: Reader, path: Path, what: str, why: str) -> None:
    r.bad(
        path,
        f"{what} in a stream that may answer SSE (format: sse, or [sse, ndjson])",
        f"{what} in an NDJSON-only stream",
        f"{why}: remove it, or add sse to format:",
        at_key=True,
    )


def _events(r: Reader, value: Any, path: Path, formats: tuple[str, ...]) -> list[_Item] | None:
    if not isinstance(value, list):
        r.bad(
            path,
            "a list of events: [{event: NAME, data: ..., id: ID, delay: 100ms}]",
            describe(value),
        )
        return None
    items = [_item(r, raw, (*path, i), formats) for i, raw in enumerate(value)]
    if any(item is None for item in items):
        return None
    return [item for item in items if item is not None]


def _item(r: Reader, value: Any, path: Path, formats: tuple[str, ...]) -> _Item | None:
    raw = r.mapping(
        value, path, "an event: {data: ..., event: NAME, id: ID, delay: 100ms}, or {repeat: N, ...}"
    )
    if raw is None:
        return None
    before = len(r.problems)
    repeated = "repeat" in raw
    if "rate" in raw and not repeated:
        r.bad(
            (*path, "rate"),
            "rate: beside repeat: (the pace of a repeated event)",
            "rate: on a single event",
            "a single event waits delay: 100ms",
            at_key=True,
        )
        return None
    r.keys(raw, path, REPEAT_KEYS if repeated else EVENT_KEYS)
    name = _line(r, raw, "event", path, "an event name")
    event_id = _event_id(r, raw, path)
    comment = _line(r, raw, "comment", path, "a comment") if not repeated else None
    if comment is not None and "sse" not in formats:
        _sse_only(r, (*path, "comment"), "comment:", "NDJSON sends no comments")
    data, value_read = _data(r, raw, path)
    if "data" not in raw and comment is None and len(r.problems) == before:
        r.bad(
            path,
            "the key 'data' (or comment: alone)",
            "it missing",
            "an SSE event without data is never dispatched to the consumer",
        )
    if not repeated:
        pause = _duration(r, raw, "delay", path, minimum=0)
        if len(r.problems) > before:
            return None
        event = StreamEvent(
            r.position(path),
            data,
            name,
            event_id,
            0 if pause is None else pause,
            comment,
            is_json=_is_json(raw),
        )
        return _sized(r, _Item(event, value_read), path, formats)
    times = r.integer(raw, "repeat", path, default=1, minimum=1, maximum=MAX_STREAM_EVENTS)
    id_from = None
    if "id_from" in raw:
        if "id" in raw:
            r.bad(
                (*path, "id_from"),
                "id: (the same id each time) or id_from: (ids counted up)",
                "both",
                "keep one",
                at_key=True,
            )
        else:
            id_from = r.integer(raw, "id_from", path, default=0, minimum=0)
    pauses = _pace(r, raw, path, times)
    if len(r.problems) > before or times is None or pauses is None:
        return None
    first_id = str(id_from) if id_from is not None else event_id
    pause = pauses[0] if pauses else 0
    is_json = _is_json(raw)
    event = StreamEvent(r.position(path), data, name, first_id, pause, is_json=is_json)
    # The largest id a repeat sends is its last; its size bounds every event's.
    last_id = str(id_from + times - 1) if id_from is not None else event_id
    widest = StreamEvent(event.where, data, name, last_id, is_json=is_json)
    if _sized(r, _Item(widest, value_read), path, formats) is None:
        return None
    return _Item(event, value_read, times, pauses, id_from)


def _pace(r: Reader, raw: dict[str, Any], path: Path, times: int | None) -> tuple[int, ...] | None:
    """A repeat's pause before each of its *times* events: ``delay:`` each, or a ``rate:`` of
    N a second (or a minute) spread so that event *k* comes *k*·1000/N ms after the repeat
    began, rounded to the ms (no drift however long it lasts)."""
    if "rate" in raw and "delay" in raw:
        r.bad(
            (*path, "rate"),
            "rate: or delay: (the pace of a repeated event)",
            "both",
            "keep one",
            at_key=True,
        )
        return None
    if times is None:
        return None
    if "rate" not in raw:
        pause = _duration(r, raw, "delay", path, minimum=0)
        return None if "delay" in raw and pause is None else (pause or 0,) * times
    written = raw["rate"]
    match = _RATE.fullmatch(written.strip()) if isinstance(written, str) else None
    per_ms = float(match.group(1)) / _PER[match.group(2)] if match else 0.0
    if match is None or per_ms <= 0:
        found = describe(written)
        negative = isinstance(written, (int, float, str)) and str(written).strip().startswith("-")
        hint = "a rate is more than 0" if negative or match else "write 50/s (or 30/m)"
        r.bad((*path, "rate"), "events a second or a minute, more than 0: 50/s, 30/m", found, hint)
        return None
    gap = 1 / per_ms
    if gap > r.max_delay_ms:
        r.bad(
            (*path, "rate"),
            f"a rate whose events are at most {r.max_delay_ms} ms apart",
            describe(written),
            "longer pauses are refused, not clamped",
        )
        return None
    times_ms = [round(k * gap) for k in range(times + 1)]
    return tuple(b - a for a, b in itertools.pairwise(times_ms))


def _line(r: Reader, raw: dict[str, Any], key: str, path: Path, what: str) -> str | None:
    """``raw[key]``, a text on one line (an event's name, a comment); None when absent."""
    if key not in raw:
        return None
    value = raw[key]
    if not isinstance(value, str):
        r.bad((*path, key), f"{what} (a string)", describe(value))
        return None
    if _LINE_BREAK.search(value):
        r.bad((*path, key), f"{what} on one line", "a line break", "a line break ends the field")
        return None
    if OPEN in value:
        _no_placeholders(r, (*path, key))
        return None
    return value


def _event_id(r: Reader, raw: dict[str, Any], path: Path) -> str | None:
    """An event's ``id:`` as sent: a string or a whole number, with no line break (it would
    end the field) or NUL (a browser then ignores the id, WHATWG's rule)."""
    if "id" not in raw:
        return None
    value = raw["id"]
    where = (*path, "id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        r.bad(where, "an id (a string or a whole number)", describe(value))
        return None
    if _LINE_BREAK.search(value):
        r.bad(where, "an id on one line", "a line break", "a line break ends the id: field")
        return None
    if "\0" in value:
        r.bad(
            where,
            "an id without NUL",
            "a NUL character",
            "an EventSource ignores an id with NUL (WHATWG); leave it out",
        )
        return None
    if OPEN in value:
        _no_placeholders(r, where)
        return None
    return value


def _data(r: Reader, raw: dict[str, Any], path: Path) -> tuple[str | None, Any]:
    """An event's data as sent (a text kept, any other JSON value dumped compact), and the
    value as scripted."""
    if "data" not in raw:
        return None, None
    value = raw["data"]
    where = (*path, "data")
    if isinstance(value, str):
        if OPEN in value:
            _no_placeholders(r, where)
            return None, None
        return value, value
    try:
        dumped = _compact(value)
    except ValueError as exc:
        r.bad(where, "JSON values (no .nan or .inf)", str(exc))
        return None, None
    if OPEN in dumped:
        _no_placeholders(r, where)
        return None, None
    return dumped, value


def _is_json(raw: dict[str, Any]) -> bool:
    """Whether an event's ``data:`` is a JSON value other than a string (sent as that value
    in NDJSON; a string is a text, sent as a JSON string)."""
    return "data" in raw and not isinstance(raw["data"], str)


def _compact(value: Any) -> str:
    """*value* as JSON, dumped once as it is sent: compact, UTF-8 kept (ValueError for
    .nan or .inf)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _no_placeholders(r: Reader, path: Path) -> None:
    r.bad(
        path,
        "a stream's fixed text, without {{...}} placeholders",
        "placeholders",
        "a stream's events are not made from the request yet (a later round's)",
    )


def framed_size(event: StreamEvent, value: Any, form: str) -> int:
    """The bytes *event* takes on the wire in *form* (``sse`` or ``ndjson``), as
    docs/streams.md frames it; *value* is its data as scripted. A comment alone in NDJSON
    takes nothing (it is not sent)."""
    if form == "sse":
        size = 1  # the blank line that ends it
        fields = [
            (":", event.comment),
            ("id:", event.id),
            ("event:", event.name),
        ]
        for field, text in fields:
            if text is not None:
                size += len(f"{field} {text}\n".encode())
        if event.data is not None:
            size += sum(len(f"data: {line}\n".encode()) for line in _LINE_BREAK.split(event.data))
        return size
    if event.data is None:
        return 0
    line: dict[str, Any] = {}
    if event.name is not None:
        line["event"] = event.name
    if event.id is not None:
        line["id"] = event.id
    line["data"] = value
    return len(_compact(line).encode()) + 1


def _sized(r: Reader, item: _Item, path: Path, formats: tuple[str, ...]) -> _Item | None:
    """*item*, or None (a problem) when its event framed in a format is over the limit."""
    for form in formats:
        size = framed_size(item.event, item.value, form)
        if size > MAX_EVENT_BYTES:
            r.bad(
                path,
                f"an event of at most {MAX_EVENT_BYTES} bytes framed",
                f"{size} bytes framed as {form}",
                "split its data over several events (the oversized_line fault sends a long"
                " line on purpose)",
            )
            return None
    return item


def _unrolled(r: Reader, items: list[_Item], path: Path) -> tuple[StreamEvent, ...] | None:
    """The events as sent, a repeat unrolled; None (a problem) past the limit."""
    total = 0
    for i, item in enumerate(items):
        total += item.repeat
        if total > MAX_STREAM_EVENTS:
            r.bad(
                (*path, i),
                f"at most {MAX_STREAM_EVENTS} events in a stream",
                f"{total} events by this one",
                "a longer stream is a longer test: shorten the repeat",
            )
            return None
    events: list[StreamEvent] = []
    for item in items:
        if not item.pauses:
            events.append(item.event)
            continue
        event = item.event
        shared: dict[int, StreamEvent] = {}  # without ids, one object per pause (a rate has two)
        for k, pause in enumerate(item.pauses):
            if item.id_from is not None:
                event_id = str(item.id_from + k)
                events.append(dataclasses.replace(event, id=event_id, delay_ms=pause))
            else:
                if pause not in shared:
                    shared[pause] = dataclasses.replace(event, delay_ms=pause)
                events.append(shared[pause])
    return tuple(events)


def _end(
    r: Reader,
    value: Any,
    path: Path,
    ctx: Any,
    read_step: ReadStep,
    formats: tuple[str, ...],
) -> StreamEnd | object | None:
    """``end:``: the terminal event, None for none, or BAD (a problem recorded)."""
    if value is None:
        return None
    raw = r.mapping(value, path, "a terminal event: {event: result, data: ...}, or {error: CODE}")
    if raw is None or not r.keys(raw, path, END_KEYS):
        return BAD
    before = len(r.problems)
    name = _line(r, raw, "event", path, "an event name")
    event_id = _event_id(r, raw, path)
    pause = _duration(r, raw, "delay", path, minimum=0) or 0
    if "error" in raw:
        if "data" in raw:
            r.bad(
                (*path, "data"),
                "error: or data: (an error event's data is the unified body)",
                "both",
                "keep one",
                at_key=True,
            )
            return BAD
        error = {k: raw[k] for k in ("error", "message", "details", "retry") if k in raw}
        step = read_step(r, error, path, ctx)
        if step is None or len(r.problems) > before:
            return BAD
        if step.reply.template is not None:
            _no_placeholders(r, path)
            return BAD
        value_read = json.loads(step.reply.body)
        body = _compact(value_read)
        event = StreamEvent(r.position(path), body, name or "error", event_id, pause, is_json=True)
        if _sized(r, _Item(event, value_read), path, formats) is None:
            return BAD
        return StreamEnd(event, step.reply.error_code, step.reply.retry)
    for key in ("message", "details", "retry"):
        if key in raw:
            r.bad((*path, key), "error: CODE beside it", f"{key} in a result end", at_key=True)
            return BAD
    if "data" not in raw:
        r.bad(path, "the key 'data' (a result), or error: CODE", "it missing")
        return BAD
    data, value_read = _data(r, raw, path)
    if len(r.problems) > before or data is None:
        return BAD
    event = StreamEvent(
        r.position(path), data, name or "result", event_id, pause, is_json=_is_json(raw)
    )
    if _sized(r, _Item(event, value_read), path, formats) is None:
        return BAD
    return StreamEnd(event)


def _fault(r: Reader, value: Any, path: Path) -> StreamFault | object | None:
    """``fault:`` after event N (whether the stream has those events is :func:`_fits`'s
    question); None for none, or BAD."""
    if value is None:
        return None
    raw = r.mapping(value, path, "a fault: {after: N, kind: reset} (stall may take for: 5s)")
    if raw is None or not r.keys(raw, path, FAULT_KEYS, required=("after", "kind")):
        return BAD
    kind = raw["kind"]
    known = r.among(kind, (*path, "kind"), STREAM_FAULTS)
    after = r.integer(raw, "after", path, default=0, minimum=0)
    stall = None
    if "for" in raw and known:
        if kind != "stall":
            r.bad(
                (*path, "for"),
                "for: only beside kind: stall (how long the bytes stop)",
                f"for: beside kind: {kind}",
                at_key=True,
            )
            return BAD
        stall = read_duration(r, raw["for"], (*path, "for"), minimum=1, maximum=r.max_delay_ms)
        if stall is None:
            return BAD
    if not known or after is None:
        return BAD
    return StreamFault(kind, after, stall)


def _fits(r: Reader, fault: StreamFault, path: Path, events: tuple[StreamEvent, ...]) -> bool:
    """Whether *fault* comes after events the stream has (comments not counted), and one
    in place of event N+1 has that event (and an id before it, for the id faults)."""
    sent = [event for event in events if event.data is not None]
    kind, after = fault.kind, fault.after
    replaces = kind in REPLACING_FAULTS
    most = len(sent) - 1 if replaces else len(sent)
    if after > most:
        if replaces:
            expected = f"at most {most}: {kind} is sent in place of event N+1"
            hint = "the event it replaces must be scripted"
        else:
            expected = f"at most {most}: the events sent before it"
            hint = ""
        if most < 0:
            expected = f"an event for {kind} to replace"
        r.bad(
            (*path, "after"),
            expected,
            f"{describe(after)}, with {len(sent)} event{'' if len(sent) == 1 else 's'} scripted",
            hint,
        )
        return False
    if kind in _ID_FAULTS and not any(event.id is not None for event in sent[:after]):
        r.bad(
            (*path, "kind"),
            f"an event with an id among the first {after} before {kind}",
            "none: no id sent before it to repeat or go back from",
            "give the events ids (id: or a repeat's id_from:)",
        )
        return False
    return True


def _head(
    r: Reader, raw: dict[str, Any], path: Path, ctx: Any, read_step: ReadStep
) -> tuple[int, tuple[tuple[str, str], ...]] | None:
    """The stream's ``status:`` and ``headers:``, read as a result step's (a header the
    server sets refused as there); not its ``Content-Type``, which the format sets."""
    head = {k: raw[k] for k in ("status", "headers") if k in raw}
    if not head:
        return 200, ()
    for name in head.get("headers") or {}:
        if isinstance(name, str) and name.lower() == "content-type":
            r.bad(
                (*path, "headers", name),
                "a header a stream may set",
                f"{name}, which the stream's format sets",
                f"format: sse sends {MEDIA_TYPES['sse']}, ndjson {MEDIA_TYPES['ndjson']}",
                at_key=True,
            )
            return None
    if "status" not in head:
        head["status"] = 200
    step = read_step(r, head, path, ctx)
    if step is None:
        return None
    if step.reply.template is not None:
        _no_placeholders(r, (*path, "headers"))
        return None
    status = step.reply.status
    if not 200 <= status < 300:
        r.bad(
            (*path, "status"),
            "a 2xx status (a stream is a success's answer)",
            describe(raw.get("status")),
            "an error before any event is a step of its own: error: CODE",
        )
        return None
    return status, step.reply.headers
