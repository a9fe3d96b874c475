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
address and format and kept (:class:`KeptStreams`). A request's attempt
(:meth:`FramedStream.attempt`) is the stream from the start, or — for a resumable stream
and a ``Last-Event-ID`` naming an event it sends — a slice of its pieces from the event
after that one; its fault counts the events of the whole stream (docs/streams.md,
"Resuming"). The transport's report (:class:`~.plan.Streamed`) becomes the journal's
``Entry.stream`` (:meth:`FramedStream.record`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..protocol import catalog
from ..protocol.catalog import Context
from ..scenario.model import MAX_EVENT_BYTES, Reply, Step, Stream, StreamEvent, StreamFault
from .actions import Urls
from .entries import escaped, shorten
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

INDEX_ENTRY_BYTES = 100
"""What one id of a resumable stream's index (:attr:`FramedStream.after_id`) costs to keep,
about (a dict's slot and an int), counted in its :attr:`~FramedStream.size`."""

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
    for media_range, q in accepted(accept):
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
        found, specificity = q, rank
    return found


def accepted(accept: str) -> list[tuple[str, float]]:
    """*accept*'s media ranges (lower case) with their quality, in order (RFC 9110
    §12.5.1; a quality that is no number: 0, as if not named)."""
    ranges = []
    for part in accept.split(","):
        fields = part.split(";")
        q = 1.0
        for param in fields[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        ranges.append((fields[0].strip().lower(), q))
    return ranges


class _Judged(NamedTuple):
    """What a stream's journal entries say of it besides the transport's report (keys of
    ``Entry.stream``; the error end's code and advice, the entry's own, :meth:`error_sent`)."""

    resumable: bool = False
    retry_ms: int | None = None
    """SSE's ``retry:`` sent first (None: none; NDJSON has none)."""
    idle_bound_ms: int = 1000
    """:meth:`Stream.idle_bound <mockskill.scenario.model.Stream.idle_bound>`."""
    expected_ms: int = 0
    """:meth:`Stream.expected <mockskill.scenario.model.Stream.expected>`."""
    error: tuple[str, catalog.Retry | None] | None = None
    """An error end's code and retry advice (None: no error end)."""


NOT_JUDGED = _Judged()
"""A stream framed without what the journal says of it (the defaults)."""


@dataclass(frozen=True)
class StreamAttempt:
    """One request's part of a framed stream: the play, from the start or resumed after an
    event, with what the journal says of it besides the transport's report."""

    play: StreamPlay
    fault: str | None
    """The fault this attempt plays (None: none, or it resumed past the stream's)."""
    fault_after: int | None
    """The events of the whole stream that fault comes after (None: no fault)."""
    asked_from: str | None = None
    """The request's ``Last-Event-ID`` (cut and escaped as client text is in the journal;
    None: none sent)."""
    resumed_from: str | None = None
    """The id it continued after (None: it started over)."""


@dataclass(frozen=True)
class FramedStream:
    """A stream framed for one format: the head to send, the attempt from the start, and
    what a resumed attempt is sliced from (:meth:`attempt`)."""

    format: str
    answer: Answer
    """The head: status and headers (no body: the stream is the body)."""
    start: StreamAttempt
    """The attempt from the start (a request without ``Last-Event-ID``): made once."""
    size: int
    """The bytes of its pieces and of its play's runs: what keeping it costs."""
    whole: tuple[StreamPiece, ...] = ()
    """Every piece of the stream through its end, no ending fault cutting it: what a
    resumed attempt is sliced from (empty unless the stream is resumable)."""
    preamble: int = 0
    """The pieces before the first event that every attempt sends (SSE's ``retry:``)."""
    after_id: Mapping[str, int] = field(default_factory=dict)
    """Each id the stream sends → the index in :attr:`whole` of the piece that follows
    the first event carrying it (an id sent twice resumes after its first: the consumer
    sees an event again rather than missing one)."""
    cut: int | None = None
    """An ending fault's place: the index in :attr:`whole` it cuts at, after event N (None:
    no ending fault)."""
    malformed_at: int | None = None
    """A malformed event's place: the index in :attr:`whole` of its last piece (None: no
    such fault); an attempt resumed before it sends it."""
    judged: _Judged = NOT_JUDGED
    """What the journal says of every attempt besides the transport's report."""

    def error_sent(self, outcome: Outcome) -> tuple[str, catalog.Retry | None] | None:
        """The error end's code and advice when *outcome* says it was sent (the stream
        ended ``complete``, every event sent); None otherwise."""
        streamed = outcome.stream
        error = self.judged.error
        if error is None or streamed is None or streamed.ended != "complete":
            return None
        return error

    @property
    def play(self) -> StreamPlay:
        """The play from the start."""
        return self.start.play

    def attempt(self, last_event_id: str | None) -> StreamAttempt:
        """The attempt for a request carrying *last_event_id* (None: none): resumed after
        the first event carrying it when the stream is resumable and sends it, else from
        the start. A resumed attempt sends the ``retry:`` field again, the pieces after that
        event, then the end; the stream's fault counts the events of the whole stream: an
        ending fault after event N cuts an attempt resumed before event N (after N minus
        the events skipped), and is not done by one resumed at event N or later; a
        malformed event in place of event N+1 is sent when the attempt reaches it."""
        if last_event_id is None:
            return self.start
        last_event_id = _utf8(last_event_id)
        asked = shorten(escaped(last_event_id))
        at = self.after_id.get(last_event_id)
        if at is None:  # not resumable, or an id it never sends: it starts over
            return dataclasses.replace(self.start, asked_from=asked)
        whole, start = self.whole, self.start
        fault, fault_after = start.fault, start.fault_after
        ending, stall_ms = start.play.ending, start.play.stall_ms
        cut = self.cut
        if cut is not None and at < cut:  # resumed before event N: cut where the whole is
            pieces = whole[: self.preamble] + whole[at:cut]
        else:
            pieces = whole[: self.preamble] + whole[at:]
            ending, stall_ms = "complete", None
            malformed_at = self.malformed_at
            if malformed_at is None or at > malformed_at:  # resumed past the fault
                fault = fault_after = None
        play = dataclasses.replace(start.play, pieces=pieces, ending=ending, stall_ms=stall_ms)
        return StreamAttempt(play, fault, fault_after, asked, last_event_id)

    def record(self, outcome: Outcome, attempt: StreamAttempt | None = None) -> dict[str, Any]:
        """``Entry.stream`` (keys as :class:`~.entries.Entry` states) of *attempt* (None:
        the attempt from the start) that went as *outcome* says; one whose head never went
        (the client left, or the server stopped, during the step's waits) sent no event."""
        if attempt is None:
            attempt = self.start
        played = reported(outcome)
        record = {
            "format": self.format,
            "events": played["events"],
            "last_id": played["last_id"],
            "ended": played["ended"],
            "fault": attempt.fault,
            "fault_after": attempt.fault_after,
            "duration_ms": played["duration_ms"],
            "asked_from": attempt.asked_from,
            "resumed_from": attempt.resumed_from,
            "resumable": self.judged.resumable,
            "retry_ms": self.judged.retry_ms,
            "idle_bound_ms": self.judged.idle_bound_ms,
            "expected_ms": self.judged.expected_ms,
            "stalled_ms": played["stalled_ms"],
        }
        if self.judged.resumable and played["ended"] != "complete":
            # The ids a cut resumable stream sent: what a resume may ask after.
            record["sent_ids"] = sent_ids(attempt.play, played["events"])
        return record


def reported(outcome: Outcome) -> dict[str, Any]:
    """What the transport's report says of a stream played (keys of ``Entry.stream``):
    ``events``, ``last_id``, ``ended``, ``duration_ms`` (from the head) and ``stalled_ms``
    (since the last byte). One whose head never went (the client left, or the server
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
    return {
        "events": events,
        "last_id": last_id,
        "ended": ended,
        "duration_ms": duration_ms,
        "stalled_ms": stalled_ms,
    }


def sent_ids(play: StreamPlay, events: int) -> list[str]:
    """The ids of *play*'s first *events* events (an attempt's own: a resumed one's from
    the event after its id), the last :data:`MAX_SENT_IDS` of them."""
    ids = [p.event_id for p in play.pieces if p.counts][:events]
    return [i for i in ids if i is not None][-MAX_SENT_IDS:]


def _utf8(value: str) -> str:
    """A header's *value* (read as Latin-1, as every header is) as the UTF-8 text a client
    sends an id in (WHATWG's EventSource encodes ``Last-Event-ID`` so); as it is when its
    bytes are no UTF-8."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


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
    preamble = len(framer.pieces)
    fault = stream.fault
    ending = fault.kind if fault is not None and fault.kind in ENDING_FAULTS else None
    malformed = fault if fault is not None and ending is None else None
    cut = preamble if ending is not None and fault is not None and fault.after == 0 else None
    error: tuple[str, catalog.Retry | None] | None = None
    for event in stream.events:
        framer.delay += event.delay_ms
        if event.data is None:  # a comment alone (NDJSON has none: its pause carries on)
            if fmt == "sse" and event.comment is not None:
                framer.add(framer.delay, _comment(event.comment) + b"\n", None, counts=False)
            continue
        framer.event(event, malformed)
        if (
            ending is not None
            and fault is not None
            and cut is None
            and framer.events >= fault.after
        ):
            cut = len(framer.pieces)
    if ending is not None and cut is None:  # after the last event, fewer than N: the end's place
        cut = len(framer.pieces)
    end = stream.end
    if end is not None:
        framer.delay += end.event.delay_ms
        if end.error_code is not None:
            # The advice the end was loaded with (its retry: override), else the code's.
            advice = catalog.KEEP if end.retry is None else end.retry
            rendered = catalog.render(end.error_code, context, retry=advice)
            error = (end.error_code, rendered.retry)
            data = urls.fill_text(rendered.body)
            event = StreamEvent(
                end.event.where, data, end.event.name or "error", end.event.id, is_json=True
            )
        else:
            name = end.event.name or "result"
            event = dataclasses.replace(end.event, name=name)
        framer.event(event, malformed)
    heartbeat_ms = float(stream.heartbeat_ms) if stream.heartbeat_ms is not None else None
    stall_ms = None
    if fault is not None and fault.kind == "stall" and fault.stall_ms is not None:
        stall_ms = float(fault.stall_ms)
    whole = tuple(framer.pieces)
    pieces = whole if cut is None else whole[:cut]
    play = StreamPlay(
        pieces,
        ending or "complete",
        heartbeat_ms,
        HEARTBEATS[fmt] if heartbeat_ms else b"",
        stall_ms,
    )
    start = StreamAttempt(
        play, None if fault is None else fault.kind, None if fault is None else fault.after
    )
    judged = _Judged(
        stream.resumable,
        stream.retry_ms if fmt == "sse" else None,
        stream.idle_bound(),
        stream.expected(),
        error,
    )
    if not stream.resumable:  # only the attempt from the start is kept
        size = framer.size if cut is None else sum(len(piece.data) for piece in pieces)
        size += play.runs.copied  # (a burst's bytes, joined once more into its runs)
        return FramedStream(fmt, head, start, size, judged=judged)
    after_id: dict[str, int] = {}
    for i, piece in enumerate(whole):
        if piece.counts and piece.event_id and piece.event_id not in after_id:
            after_id[piece.event_id] = i + 1
    size = framer.size + INDEX_ENTRY_BYTES * len(after_id) + play.runs.copied
    return FramedStream(
        fmt, head, start, size, whole, preamble, after_id, cut, framer.malformed_at, judged
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
        self.malformed_at: int | None = None
        """The index of the malformed event's last piece (None: none framed)."""

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
        self._malformed(event, malformed.kind)
        self.malformed_at = len(self.pieces) - 1

    def _malformed(self, event: StreamEvent, kind: str) -> None:
        """Frame *event* as the malformed event of the fault *kind*."""
        sse = self.format == "sse"
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


def frame(fmt: str, event: StreamEvent) -> bytes:
    """*event*'s bytes in *fmt* (``sse`` or ``ndjson``), carrying its own id: how a stream
    made at run time (a watched task's, :mod:`.task_watch`) frames its events."""
    return _sse(event, event.id) if fmt == "sse" else _ndjson(event, event.id)


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
    when the event has them), its data the JSON value it was scripted as
    (:attr:`~mockskill.scenario.model.StreamEvent.is_json`), else its text as a JSON
    string (the text ``42`` is ``"42"``)."""
    parts = []
    if event.name is not None:
        parts.append(f'"event":{json.dumps(event.name, ensure_ascii=False)}')
    if event_id is not None:
        parts.append(f'"id":{json.dumps(event_id, ensure_ascii=False)}')
    data = event.data or ""
    parts.append(f'"data":{data if event.is_json else json.dumps(data, ensure_ascii=False)}')
    return ("{" + ",".join(parts) + "}\n").encode("utf-8")


def _not_json(data: str) -> str:
    """*data* made into something no JSON parser reads: cut before its last character, and
    opened with a brace when what is left would still read."""
    broken = data[:-1]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return "{" + broken


def stream_needs_loop(step: Step) -> Reply:
    """The WSGI path's answer to a stream step (an engine given the raw socket, under a WSGI
    server, loads one: capabilities.py refuses it only without): 501, a stream of events is
    mockskill's own transport's."""
    message = (
        "this step answers with a stream of events, which only mockskill's own server plays"
        " (mockskill serve, mockskill.Server); a WSGI server mounting the app answers with one"
        " body"
    )
    details = {"where": str(step.where)}
    return Reply.error(catalog.tool_error(501, "MOCKSKILL_STREAM_UNSUPPORTED", message, details))


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
