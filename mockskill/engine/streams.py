"""A stream step's answer, planned: its format, its events framed, its fault, its record.

A step with ``stream:`` (:class:`~mockskill.scenario.model.Stream`, docs/streams.md)
answers with a head at once and then events over time. Here, without a socket or a
clock, that becomes data the transport plays (:class:`~.plan.StreamPlay`):

- the format, chosen by the request's ``Accept`` among the stream's formats
  (:func:`chosen_format`);
- the head: the stream's status and headers, ``Content-Type`` by format and
  ``Cache-Control: no-cache`` (the transport adds the framing: chunked, or
  close-delimited for HTTP/1.0);
- every event framed to its bytes once (Server-Sent Events as the WHATWG spec
  reads them; JSON lines), the SSE ``retry:`` field first, the terminal event
  last (a result, or the unified body of an error code with its retry advice);
- the fault: a malformed event, a repeated or lower id, in place of event N+1
  (then the stream goes on), or the ending the transport does after event N
  (``reset``, ``close``, ``stall``, ``broken_chunking``).

None of it reads the request but ``Accept``, so a stream is framed once per step,
address and format and kept (:class:`KeptStreams`); the transport's report
(:class:`~.plan.Streamed`) becomes the journal's ``Entry.stream``
(:meth:`FramedStream.record`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..protocol import catalog
from ..protocol.catalog import Context
from ..scenario.model import MAX_EVENT_BYTES, Stream, StreamEvent, StreamFault
from .actions import Urls
from .plan import STREAM_ENDINGS, Outcome, StreamPiece, StreamPlay
from .wire import Answer

CONTENT_TYPES = {"sse": "text/event-stream; charset=utf-8", "ndjson": "application/x-ndjson"}
"""Each format's ``Content-Type``."""
MEDIA_TYPES = {"text/event-stream": "sse", "application/x-ndjson": "ndjson"}
"""The media types an ``Accept`` names a format by."""
HEARTBEATS = {"sse": b": \n\n", "ndjson": b"\n"}
"""What a heartbeat is in each format: an SSE comment, an empty JSON line (which a JSON
lines reader skips)."""
ENDING_FAULTS = frozenset(STREAM_ENDINGS) - {"complete"}
"""The faults the transport does as the stream's ending, after event N; every other fault
is an event sent in place of event N+1 (the stream goes on)."""
BAD_UTF8 = b"\xc3\x28"
"""A two-byte UTF-8 sequence whose second byte is no continuation: never valid UTF-8."""

MAX_SENT_IDS = 1024
"""The most ids a cut resumable stream's record lists as sent (its last ones: a consumer
resumes after one it received last)."""

_LINES = re.compile(r"\r\n|\r|\n")
"""What SSE takes for a line break (WHATWG: CRLF, LF or CR): a text's ``data:`` lines."""


def chosen_format(formats: tuple[str, ...], accept: str | None) -> str:
    """The format of *formats* the request's *accept* prefers (its quality; the stream's
    order breaks a tie). No ``Accept``, ``*/*``, or an ``Accept`` naming none of them:
    the first, the stream's default — a provider streams whatever its client says it
    accepts (several SDKs send ``Accept: application/json`` on a streaming request), so
    the consumer meets the stream rather than a 406."""
    default = formats[0]
    if not accept or len(formats) == 1:
        return default
    best, best_q = default, 0.0
    for fmt in formats:
        q = _quality(fmt, accept)
        if q > best_q:
            best, best_q = fmt, q
    return best


def _quality(fmt: str, accept: str) -> float:
    """The quality *accept* gives *fmt*'s media type: that of its most specific range
    (RFC 9110 §12.5.1); 0 when no range names it."""
    media = next(m for m, f in MEDIA_TYPES.items() if f == fmt)
    kind = media.split("/")[0]
    found, specificity = 0.0, -1
    for part in accept.split(","):
        fields = part.split(";")
        media_range = fields[0].strip().lower()
        if media_range == media:
            rank = 2
        elif media_range == f"{kind}/*":
            rank = 1
        elif media_range == "*/*":
            rank = 0
        else:
            continue
        if rank < specificity:
            continue
        q = 1.0
        for param in fields[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    q = 0.0  # a quality that is no number: as if not named
        found, specificity = q, rank
    return found


@dataclass(frozen=True)
class FramedStream:
    """A stream framed for one format: the head to send, the play, and what the journal
    says of it besides the transport's report."""

    format: str
    answer: Answer
    """The head: status and headers (no body: the stream is the body)."""
    play: StreamPlay
    fault: str | None
    """The scripted fault's kind (None: none)."""
    fault_after: int | None
    """The events it was scripted after (None: no fault)."""
    size: int
    """The bytes of its pieces: what keeping it costs."""
    resumable: bool = False
    retry_ms: int | None = None
    """SSE's ``retry:`` sent first (None: none; NDJSON has none)."""
    idle_bound_ms: int = 1000
    """:meth:`Stream.idle_bound <mockskill.scenario.model.Stream.idle_bound>`."""
    expected_ms: int = 0
    """:meth:`Stream.expected <mockskill.scenario.model.Stream.expected>`."""
    error: tuple[str, catalog.Retry | None] | None = None
    """An error end's code and retry advice (None: no error end): what the entry of a
    stream that sent it carries, as an error answer's does (:meth:`error_sent`)."""

    def error_sent(self, outcome: Outcome) -> tuple[str, catalog.Retry | None] | None:
        """The error end's code and advice when *outcome* says it was sent (the stream
        ended ``complete``, every event sent); None otherwise."""
        streamed = outcome.stream
        if self.error is None or streamed is None or streamed.ended != "complete":
            return None
        return self.error

    def record(self, outcome: Outcome) -> dict[str, Any]:
        """``Entry.stream`` (keys as :class:`~.entries.Entry` states) of a stream that
        went as *outcome* says; one whose head never went (the client left, or the server
        stopped, during the step's waits) sent no event."""
        streamed = outcome.stream
        if streamed is None:
            events, last_id, ended, duration_ms = 0, None, "client_left", 0
            if outcome.stopped:
                ended = "stopped"
        else:
            events, last_id, ended = streamed.events, streamed.last_id, streamed.ended
            begun = outcome.headers_at if outcome.headers_at is not None else streamed.at
            duration_ms = max(0, round((streamed.at - begun) * 1000))
        stalled_ms = None
        if streamed is not None and streamed.last_byte_at is not None:
            stalled_ms = max(0, round((streamed.at - streamed.last_byte_at) * 1000))
        record = {
            "format": self.format,
            "events": events,
            "last_id": last_id,
            "ended": ended,
            "fault": self.fault,
            "fault_after": self.fault_after,
            "duration_ms": duration_ms,
            "resumed_from": None,  # resuming after Last-Event-ID is not served yet
            "resumable": self.resumable,
            "retry_ms": self.retry_ms,
            "idle_bound_ms": self.idle_bound_ms,
            "expected_ms": self.expected_ms,
            "stalled_ms": stalled_ms,
        }
        if self.resumable and ended != "complete":
            # The ids a cut resumable stream sent: what a resume may ask after.
            record["sent_ids"] = self.sent_ids(events)
        return record

    def sent_ids(self, events: int) -> list[str]:
        """The ids of the first *events* events, the last :data:`MAX_SENT_IDS` of them."""
        ids = [p.event_id for p in self.play.pieces if p.counts][:events]
        return [i for i in ids if i is not None][-MAX_SENT_IDS:]


def framed(stream: Stream, fmt: str, context: Context, urls: Urls) -> FramedStream:
    """*stream* framed in *fmt* (:data:`~mockskill.scenario.model.STREAM_FORMATS`), an
    error end's body for *context* with its placeholders filled for *urls*."""
    headers = (
        *stream.headers,
        ("Content-Type", CONTENT_TYPES[fmt]),
        ("Cache-Control", "no-cache"),
    )
    head = Answer(stream.status, headers)
    framer = _Framer(fmt)
    if fmt == "sse" and stream.retry_ms is not None:
        framer.add(0.0, b"retry: %d\n\n" % stream.retry_ms, None, counts=False)
    fault = stream.fault
    ending = fault.kind if fault is not None and fault.kind in ENDING_FAULTS else None
    malformed = fault if fault is not None and ending is None else None
    error: tuple[str, catalog.Retry | None] | None = None
    for event in stream.events:
        framer.delay += event.delay_ms
        if event.data is None:  # a comment alone (NDJSON has none: its pause carries on)
            if fmt == "sse" and event.comment is not None:
                if ending is not None and fault is not None and framer.events >= fault.after:
                    continue  # past the cut: nothing more is sent
                framer.add(framer.delay, _comment(event.comment) + b"\n", None, counts=False)
            continue
        if ending is not None and fault is not None and framer.events >= fault.after:
            break
        framer.event(event, malformed)
    end = stream.end
    if ending is not None:  # after event N, or after the last when there are fewer: never the end
        final = ending
    else:
        final = "complete"
        if end is not None:
            framer.delay += end.event.delay_ms
            if end.error_code is not None:
                # The advice the end was loaded with (its retry: override), else the code's.
                advice = catalog.KEEP if end.retry is None else end.retry
                rendered = catalog.render(end.error_code, context, retry=advice)
                error = (end.error_code, rendered.retry)
                data = urls.fill_text(rendered.body)
                event = StreamEvent(end.event.where, data, end.event.name or "error", end.event.id)
            else:
                name = end.event.name or "result"
                event = StreamEvent(end.event.where, end.event.data, name, end.event.id)
            framer.event(event, malformed)
    heartbeat_ms = float(stream.heartbeat_ms) if stream.heartbeat_ms is not None else None
    stall_ms = None
    if fault is not None and fault.kind == "stall" and fault.stall_ms is not None:
        stall_ms = float(fault.stall_ms)
    play = StreamPlay(
        tuple(framer.pieces),
        final,
        heartbeat_ms,
        HEARTBEATS[fmt] if heartbeat_ms else b"",
        stall_ms,
    )
    return FramedStream(
        fmt,
        head,
        play,
        None if fault is None else fault.kind,
        None if fault is None else fault.after,
        framer.size,
        resumable=stream.resumable,
        retry_ms=stream.retry_ms if fmt == "sse" else None,
        idle_bound_ms=stream.idle_bound(),
        expected_ms=stream.expected(),
        error=error,
    )


class _Framer:
    """The pieces of one stream as they are framed, with what framing the next needs: the
    pause carried to it, the events framed and the last id sent."""

    def __init__(self, fmt: str) -> None:
        self.format = fmt
        self.pieces: list[StreamPiece] = []
        self.delay = 0.0
        self.events = 0
        self.last_id: str | None = None
        self.size = 0

    def add(self, delay: float, data: bytes, event_id: str | None, *, counts: bool) -> None:
        self.pieces.append(StreamPiece(delay, data, event_id, counts))
        self.size += len(data)
        self.delay = 0.0
        if counts:
            self.events += 1
            if event_id is not None:
                self.last_id = event_id

    def event(self, event: StreamEvent, malformed: StreamFault | None) -> None:
        """Frame *event*: as it is, or as *malformed* makes it when it is the event that
        fault is scripted in place of."""
        if malformed is None or self.events != malformed.after:
            self.add(self.delay, self.frame(event, event.id), event.id, counts=True)
            return
        kind, sse = malformed.kind, self.format == "sse"
        if kind in ("duplicate_id", "out_of_order_id"):
            previous = self.last_id
            if kind == "duplicate_id":
                if previous is None:  # no id before it: it comes twice with its own
                    own = event.id if event.id is not None else "1"
                    self.add(self.delay, self.frame(event, own), own, counts=True)
                    previous = own
                wrong = previous
            else:
                wrong = str(int(previous) - 1) if previous and previous.isdigit() else "0"
            self.add(self.delay, self.frame(event, wrong), wrong, counts=True)
            return
        framed = self.frame(event, event.id)
        if kind == "no_blank_line":  # SSE: merged with the next event; NDJSON: two on a line
            data = framed[:-1]
        elif kind == "bad_utf8":
            marker = b"data: " if sse else b'"data":'
            at = framed.index(marker) + len(marker)
            if not sse:  # inside a JSON string, so that only the UTF-8 is broken
                text = json.dumps(event.data or "", ensure_ascii=False).encode()
                framed = framed[:at] + text + b"}\n"
                at += 1
            data = framed[:at] + BAD_UTF8 + framed[at:]
        elif kind == "oversized_line":
            long = StreamEvent(event.where, "x" * (MAX_EVENT_BYTES + 1), event.name, event.id)
            data = self.frame(long, event.id)
        elif kind == "not_json":
            if sse:
                broken = StreamEvent(event.where, _not_json(event.data or ""), event.name, event.id)
                data = self.frame(broken, event.id)
            else:
                data = framed[:-2] + b"\n"  # its closing brace gone: the line is no JSON
        else:  # pragma: no cover - the loader refuses any other kind
            raise ValueError(f"unknown stream fault {kind!r}")
        self.add(self.delay, data, event.id, counts=True)

    def frame(self, event: StreamEvent, event_id: str | None) -> bytes:
        """*event*'s bytes, carrying *event_id*."""
        if self.format == "sse":
            return _sse(event, event_id)
        return _ndjson(event, event_id)


def _sse(event: StreamEvent, event_id: str | None) -> bytes:
    """An SSE event (WHATWG's event stream): a comment line, ``id:``, ``event:``, one
    ``data:`` line per line of its data, and the blank line that dispatches it."""
    lines = []
    if event.comment is not None:
        lines.append(_comment(event.comment).decode())
    if event_id is not None:
        lines.append(f"id: {event_id}\n")
    if event.name is not None:
        lines.append(f"event: {event.name}\n")
    for line in _LINES.split(event.data or ""):
        lines.append(f"data: {line}\n")
    lines.append("\n")
    return "".join(lines).encode("utf-8")


def _comment(text: str) -> bytes:
    """An SSE comment: ``: text`` on each of its lines."""
    return "".join(f": {line}\n" for line in _LINES.split(text)).encode("utf-8")


def _ndjson(event: StreamEvent, event_id: str | None) -> bytes:
    """A JSON line: ``{"event": name, "id": id, "data": value}`` (the name and the id
    when the event has them), its data the JSON value it was scripted as, else its text."""
    parts = []
    if event.name is not None:
        parts.append(f'"event":{json.dumps(event.name, ensure_ascii=False)}')
    if event_id is not None:
        parts.append(f'"id":{json.dumps(event_id, ensure_ascii=False)}')
    parts.append(f'"data":{_json_value(event.data or "")}')
    return ("{" + ",".join(parts) + "}\n").encode("utf-8")


def _json_value(data: str) -> str:
    """*data* as a JSON value: itself when it is JSON text (a scripted value, dumped at
    load), else as a JSON string (a text)."""
    try:
        json.loads(data)
    except ValueError:
        return json.dumps(data, ensure_ascii=False)
    return data


def _not_json(data: str) -> str:
    """*data* made into something no JSON parser reads: cut before its last character, and
    opened with a brace when what is left would still read."""
    broken = data[:-1]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return "{" + broken


MAX_KEPT = 256
"""Framed streams :class:`KeptStreams` keeps (by step, address and format)."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""Bytes of framed pieces :class:`KeptStreams` keeps (a stream of 100 000 events is
megabytes: a few of them, kept for every address, would otherwise add up)."""


_Key = tuple[int, int, int, str]


class KeptStreams:
    """Streams framed once and kept, by the stream, the address (its :class:`Urls`) and
    the format; emptied whole when a bound is passed (an assignment is atomic, and the
    engine plans on threads too)."""

    __slots__ = ("_bytes", "_kept")

    def __init__(self) -> None:
        self._kept: dict[_Key, tuple[Stream, Urls, Context, FramedStream]] = {}
        self._bytes = 0

    def clear(self) -> None:
        """Forget every framing (the scenarios changed: their streams are asked for no more)."""
        self._kept = {}
        self._bytes = 0

    def framed(
        self, stream: Stream, accept: str | None, context: Context, urls: Urls
    ) -> FramedStream:
        """*stream* framed in the format *accept* chooses (:func:`chosen_format`), for
        *context* and *urls*: made once, then kept."""
        fmt = chosen_format(stream.formats, accept)
        kept = self._kept
        # By identity, the objects kept with it: none of their ids can be another's meanwhile.
        key = (id(stream), id(urls), id(context), fmt)
        found = kept.get(key)
        if found is not None and found[0] is stream and found[1] is urls and found[2] is context:
            return found[3]
        made = framed(stream, fmt, context, urls)
        if len(kept) >= MAX_KEPT or self._bytes + made.size > MAX_KEPT_BYTES:
            self.clear()
            kept = self._kept
        kept[key] = (stream, urls, context, made)
        self._bytes += made.size
        return made
