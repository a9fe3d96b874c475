"""A provider's stream relayed by a proxy step: its events found in the bytes as they pass.

A ``proxy`` step's upstream may answer with a stream of events — ``text/event-stream``
or ``application/x-ndjson``, by its ``Content-Type`` (:func:`stream_format`). The
transport relays it chunk by chunk as it comes and feeds each chunk, when it is handed
on, to a :class:`RelayedStream`, which finds the events' boundaries in the bytes:

- SSE: a blank line ends an event (a line ends at CRLF, LF or CR, as the WHATWG spec
  reads them); it counts when it had a ``data:`` field, as an ``EventSource``
  dispatches it — comments, heartbeats and a ``retry:`` alone do not; the last ``id:``
  seen is the event's id;
- NDJSON: a line ends an event; an empty line is a heartbeat, not counted; the id is
  the line's top-level ``id`` member, when the line is a JSON object.

It keeps the count, the last id, the SSE ``retry:``, the data of a last event named
``error`` (the provider's unified body, whose code and advice the journal gives the entry
as an error answer's), when bytes last came and the longest pause between them (how long
the stream had stalled at its end, and its idle bound: the scripted default's rule, 3 x the
longest pause and at least 1 s), whether it resumed after the request's ``Last-Event-ID``
(it never sent that id again), and, while a recording is on (``collect``), each
event's name, id, data and when it ended: what the recording makes a ``stream:`` step
of (:class:`RelayedEvent`). :meth:`RelayedStream.record` is the journal's
``Entry.stream``. Memory is bounded: without ``collect`` a line is looked at by its
first :data:`LINE_PREFIX` bytes; with it, what is kept stops at the recording's bound
(then :attr:`RelayedStream.truncated`). It decides nothing and does no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..scenario.model import MAX_STREAM_EVENTS, ProviderStreams
from .entries import escaped, shorten

STREAM_TYPES = {"text/event-stream": "sse", "application/x-ndjson": "ndjson"}
"""The answer types relayed as streams, and their format's name (as a stream step's)."""
LINE_PREFIX = 4096
"""The bytes of a line looked at when not collecting: enough for any field's name and an
id (a longer NDJSON line's id is not read)."""
_BREAK = re.compile(rb"\r\n|\r|\n")
ERROR_EVENT = "error"
"""The name of the event a provider ends a stream with when it fails (its data the unified
body), as a scripted stream's ``end: {error: ...}`` sends it."""
LEAST_IDLE_BOUND_MS = 1000
"""The least idle bound of a relayed stream, as of a scripted one (docs/scenarios.md)."""


def stream_format(headers: Sequence[tuple[str, str]]) -> str | None:
    """The stream format of an answer with *headers* (by its ``Content-Type``), or None:
    it is no stream."""
    for name, value in headers:
        if name.lower() == "content-type":
            return STREAM_TYPES.get(value.split(";")[0].strip().lower())
    return None


class RelayedEvent(NamedTuple):
    """One event of a relayed stream, as a recording keeps it."""

    data: str
    """Its data: SSE's ``data:`` lines joined by line feeds; an NDJSON line as it came."""
    name: str | None
    """SSE's ``event:`` (None: none)."""
    id: str | None
    """The id it carried (None: none)."""
    ms: float
    """When it ended (its last byte was relayed), in ms after the answer's head came."""


class RelayedStream:
    """The events of one relayed stream, found as its bytes are relayed (see the module)."""

    def __init__(
        self,
        fmt: str,
        head_ms: float,
        head_at: float,
        *,
        collect: int = 0,
        asked: str | None = None,
    ) -> None:
        self.format = fmt
        self.head_ms = head_ms
        """From the request sent upstream to the answer's head, in ms."""
        self.head_at = head_at
        """When the head came (``time.perf_counter()``): events' times count from it."""
        self.ended = "complete"
        """How it ended (:meth:`end`)."""
        self.duration_ms = 0.0
        self.events = 0
        self.last_id: str | None = None
        self.collected: list[RelayedEvent] = []
        """The events kept while recording (at most *collect* bytes of their data)."""
        self.retry_ms: int | None = None
        """The SSE ``retry:`` field's value (the last one sent; None: none)."""
        self.truncated = False
        """Whether events were left out of :attr:`collected` (past the recording's bound)."""
        self.asked = asked
        """The request's ``Last-Event-ID`` (None: it sent none)."""
        self.asked_sent = False
        """Whether an event carried :attr:`asked` (then the provider started over)."""
        self.ids_sent = False
        """Whether any event carried an id."""
        self.error_data: bytes | None = None
        """The data of the last event when it was named ``error`` (SSE's ``event:``, an
        NDJSON line's ``event`` member): as far as :data:`LINE_PREFIX` keeps it."""
        self.last_at = head_at
        """When bytes last came (``time.perf_counter()``; the head's time before any)."""
        self.longest_pause = 0.0
        """The longest pause between the head and bytes, or bytes and bytes, in seconds."""
        self._room = collect
        self._collect = collect > 0
        self._line = bytearray()
        self._after_cr = False
        self._id: str | None = None  # SSE's last event id buffer (it lasts, WHATWG)
        self._block_id: str | None = None  # the id: field of the event being read
        self._data: list[str] | None = None  # the event's data lines (None: no data: field)
        self._raw: list[bytes] = []  # its data lines as they came (within LINE_PREFIX)
        self._name: str | None = None
        self._pending = 0  # the bytes of the event's data lines kept so far

    def feed(self, data: bytes, at: float) -> None:
        """*data*, relayed at *at* (``time.perf_counter()``)."""
        if data:
            self.longest_pause = max(self.longest_pause, at - self.last_at)
            self.last_at = at
        if self._after_cr and data[:1] == b"\n":
            data = data[1:]  # a CRLF split between two chunks
        self._after_cr = False
        start = 0
        for found in _BREAK.finditer(data):
            self._take(data[start : found.start()])
            self._line_ended(at)
            start = found.end()
            if start == len(data) and found.group() == b"\r":
                self._after_cr = True
        self._take(data[start:])

    def _take(self, part: bytes) -> None:
        if not part:
            return
        if self._collect:
            self._line += part
            if len(self._line) + self._pending > self._room:
                self._stop_collecting()
        elif len(self._line) < LINE_PREFIX:
            self._line += part[: LINE_PREFIX - len(self._line)]

    def _stop_collecting(self) -> None:
        """Past the recording's bound: the count and the id go on, nothing more is kept."""
        self.truncated, self._collect = True, False
        del self._line[LINE_PREFIX:]
        self._pending = 0

    def _line_ended(self, at: float) -> None:
        line = bytes(self._line)
        self._line.clear()
        if self.format == "ndjson":
            if line.strip():
                self._ndjson(line, at)
            return
        if not line:
            if self._data is not None:
                self.last_id = None if self._id is None else shorten(self._id)
                error = self._name == ERROR_EVENT
                self.error_data = b"\n".join(self._raw)[:LINE_PREFIX] if error else None
                self._event("\n".join(self._data), self._name, self._block_id, at)
            self._data, self._name, self._block_id, self._pending = None, None, None, 0
            self._raw.clear()
            return
        if line.startswith(b":"):
            return  # a comment: a heartbeat
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            if self._data is None:
                self._data = []
            if len(self._raw) < 64:
                self._raw.append(value)
            if self._collect:
                self._data.append(value.decode("utf-8", "replace"))
                self._pending += len(value)
        elif field == b"id" and b"\0" not in value:
            self._id = self._block_id = value.decode("utf-8", "replace")
        elif field == b"event":
            self._name = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit() and len(value) <= 9:
            self.retry_ms = int(value)  # (the last one sent is the one a client keeps)

    def _ndjson(self, line: bytes, at: float) -> None:
        event_id: str | None = None
        self.error_data = None
        looked = b'"id"' in line or b'"error"' in line
        if looked and (self._collect or len(line) < LINE_PREFIX):
            try:
                document: Any = json.loads(line)
            except (ValueError, RecursionError):
                document = None
            if isinstance(document, dict):
                found = document.get("id")
                if isinstance(found, str | int) and not isinstance(found, bool):
                    event_id = str(found)
                if document.get("event") == ERROR_EVENT:
                    self.error_data = json.dumps(document.get("data")).encode()
        if event_id is not None:
            self.last_id = shorten(event_id)
        text = line.decode("utf-8", "replace").strip() if self._collect else ""
        self._event(text, None, event_id, at)

    def _event(self, data: str, name: str | None, event_id: str | None, at: float) -> None:
        self.events += 1
        if event_id is not None:
            self.ids_sent = True
            self.asked_sent = self.asked_sent or event_id == self.asked
        if not self._collect:
            return
        size = len(data) + len(name or "") + len(event_id or "")
        if size > self._room or len(self.collected) >= MAX_STREAM_EVENTS:
            self._stop_collecting()
            return
        self._room -= size
        ms = (at - self.head_at) * 1000
        self.collected.append(RelayedEvent(data, name, event_id, ms))

    def end(self, ended: str, at: float) -> None:
        """The stream *ended* at *at* (``time.perf_counter()``): ``complete`` (the upstream's
        answer whole), ``upstream_cut`` (the upstream failed mid-stream: the consumer's
        connection was cut), ``client_left``, ``stopped``."""
        self.ended, self.duration_ms = ended, (at - self.head_at) * 1000

    def record(self, declared: ProviderStreams | None = None) -> dict[str, Any]:
        """``Entry.stream`` (keys as :class:`~.entries.Entry` states) of the stream relayed.

        What the stream rules read of it: ``retry_ms``, ``stalled_ms`` (from the last bytes
        to the end) and ``idle_bound_ms`` (3 x its longest pause before them, at least
        1 s); ``asked_from`` and ``resumed_from`` (the provider resumed: an id came, never
        the one asked). ``resumable`` and ``expected_ms`` only as the proxy *declared*
        them (a provider's bytes say neither), which sets the idle bound too if it says one.
        """
        asked = None if self.asked is None else shorten(escaped(self.asked))
        resumed = asked is not None and self.ids_sent and not self.asked_sent
        stalled = max(0.0, self.head_at + self.duration_ms / 1000 - self.last_at)
        bound = max(LEAST_IDLE_BOUND_MS, round(3000 * self.longest_pause))
        if declared is not None and declared.idle_bound_ms is not None:
            bound = declared.idle_bound_ms
        return {
            "format": self.format,
            "events": self.events,
            "last_id": self.last_id,
            "ended": self.ended,
            "fault": None,
            "fault_after": None,
            "duration_ms": max(0, round(self.duration_ms)),
            "asked_from": asked,
            "resumed_from": asked if resumed else None,
            "resumable": declared is not None and declared.resumable,
            "retry_ms": self.retry_ms,
            "stalled_ms": round(stalled * 1000),
            "idle_bound_ms": bound,
            "expected_ms": None if declared is None else declared.expected_ms,
        }

    def taken(self) -> RecordedStream:
        """What a recording keeps of it."""
        return RecordedStream(
            self.format,
            tuple(self.collected),
            self.head_ms,
            self.ended,
            self.truncated,
            self.retry_ms,
        )


class RecordedStream(NamedTuple):
    """A relayed stream as a recording keeps it (:attr:`~.exchange.Exchange.stream`)."""

    format: str
    events: tuple[RelayedEvent, ...]
    head_ms: float
    """From the request sent upstream to the answer's head, in ms."""
    ended: str
    """:meth:`RelayedStream.end`'s."""
    truncated: bool
    """Events were left out past the recording's bound."""
    retry_ms: int | None = None
    """The SSE ``retry:`` field the provider sent (the last; None: none)."""
