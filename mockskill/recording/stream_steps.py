"""A provider's stream, relayed and recorded, as a ``stream:`` step with its timing.

A proxied answer of type ``text/event-stream`` or ``application/x-ndjson`` is relayed
event by event (:mod:`mockskill.engine.relayed_streams` finds its events as they pass,
with when each one ended). :func:`stream_step` makes the step that plays it again:

- each event with its data, its name (SSE's ``event:``) and its id, in order, and its
  ``delay:`` as measured — from the event before it, the first from the head — rounded
  to the ms where each came, so that the pauses add up to the stream's time (none with
  ``--no-delay``); the head's own latency is the step's ``delay``
  (the writer's, as for any answer);
- a data that is JSON and that a replay would send byte for byte the same (compact) is
  kept as its value, any other as its text (sent as it came);
- the provider's last event stays an event, even one named ``result`` or ``error``, and
  the step has no ``end:``: an ``end:`` renames nothing but frames a result or the
  catalog's error body anew, where the recording keeps what the provider sent; the
  replayed stream closes cleanly after it, as the provider's did;
- a stream the upstream broke mid-way (the consumer's connection was cut) gets
  ``fault: {after: N, kind: reset}`` after the N events that came;
- SSE's ``retry:`` field (the last the provider sent) is the step's ``retry:``, sent
  first; comments and heartbeats are not kept (a replay's pauses are silent: a
  ``heartbeat:`` added to the step fills them).

What a stream step cannot hold — a ``{{`` (a stream's text has no placeholders), an
event over :data:`~mockskill.scenario.model.MAX_EVENT_BYTES` — makes it the ordinary
answer (its body as text), said in a note. An NDJSON line that is not in mockskill's
``{"event", "id", "data"}`` shape is kept whole as the event's data, which a replay
sends inside ``{"data": ...}`` (a note says so).
"""

from __future__ import annotations

import json
from typing import Any

from ..engine.exchange import Exchange
from ..engine.relayed_streams import RecordedStream, RelayedEvent
from ..scenario.model import MAX_EVENT_BYTES
from ..scenario.templates import OPEN
from .answers import DROPPED_ANSWER_HEADERS
from .rebase import Rebase
from .secrets import Secrets, is_secret_header

LEFT_OUT_HEADERS = frozenset({"content-type", "cache-control", "date", "server"})
"""The head's headers a stream step does not hold: its type (its format says it), and
``Cache-Control`` (a stream step sends ``no-cache`` itself), the serving software's."""
_NDJSON_KEYS = frozenset({"event", "id", "data"})
_EVENT_ROOM = MAX_EVENT_BYTES - 1024
"""The largest data kept in a step: an event's framing (its name, id, field names) fits
the rest of :data:`~mockskill.scenario.model.MAX_EVENT_BYTES`."""


def stream_step(
    exchange: Exchange,
    rewrite: Rebase,
    secrets: Secrets,
    notes: dict[str, None],
    *,
    delays: bool,
) -> dict[str, Any] | None:
    """The ``stream:`` step that plays *exchange*'s relayed stream again; None when the
    answer was no stream (or no 2xx one), or one a stream step cannot hold (then a note)."""
    stream = exchange.stream
    if stream is None or not 200 <= exchange.status < 300:
        return None
    events: list[dict[str, Any]] = []
    before = 0.0
    for event in stream.events:
        written = _event(event, stream.format, rewrite, secrets, notes)
        if written is None:
            notes.setdefault(
                "a stream held what a stream step cannot (a {{, or an event over"
                f" {MAX_EVENT_BYTES} bytes): it is recorded as a plain answer, without its timing"
            )
            return None
        delay = round(event.ms) - round(before)  # (rounded where it came: no drift)
        before = event.ms
        if delays and delay > 0:
            written["delay"] = f"{delay}ms"
        events.append(written)
    played: dict[str, Any] = {}
    if stream.format != "sse":
        played["format"] = stream.format
    if exchange.status != 200:
        played["status"] = exchange.status
    headers = _headers(exchange, rewrite, secrets)
    if headers:
        played["headers"] = headers
    if stream.retry_ms is not None and stream.format == "sse":
        played["retry"] = f"{stream.retry_ms}ms"
    played["events"] = events
    if stream.ended == "upstream_cut":
        played["fault"] = {"after": len(events), "kind": "reset"}
    _note(stream, notes)
    return {"stream": played}


def _note(stream: RecordedStream, notes: dict[str, None]) -> None:
    if stream.truncated:
        notes.setdefault(
            "a stream was longer than the recording keeps: its step has the events that fit"
        )
    if stream.ended in ("client_left", "stopped"):
        notes.setdefault(
            "a stream the consumer left (or the server's stop cut) is recorded as far as it"
            " came, ending cleanly there"
        )
    if stream.ended == "upstream_cut":
        notes.setdefault(
            "a stream the provider broke mid-way is recorded with a reset after its last event"
        )


def _headers(exchange: Exchange, rewrite: Rebase, secrets: Secrets) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in exchange.response_headers:
        lower = name.lower()
        if is_secret_header(name):
            secrets.header(name)
        elif lower not in DROPPED_ANSWER_HEADERS and lower not in LEFT_OUT_HEADERS:
            value = rewrite.text(value)
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _event(
    event: RelayedEvent, fmt: str, rewrite: Rebase, secrets: Secrets, notes: dict[str, None]
) -> dict[str, Any] | None:
    """*event* as a stream step's event (data, event, id), or None when no step holds it."""
    name, event_id, data = event.name, event.id, event.data
    value: Any
    if fmt == "ndjson":
        document = _json(data)
        if (
            isinstance(document, dict)
            and "data" in document
            and set(document) <= _NDJSON_KEYS
            and all(isinstance(document.get(k, ""), str | int) for k in ("event", "id"))
        ):
            name = document.get("event")
            event_id = None if "id" not in document else str(document["id"])
            value = document["data"]
        else:
            notes.setdefault(
                "NDJSON lines not in mockskill's {event, id, data} shape are kept whole as"
                ' their event\'s data: a replay sends each inside {"data": ...}'
            )
            value = document if document is not _NOT_JSON else data
    else:
        found = _json(data)
        same = found is not _NOT_JSON and not isinstance(found, str) and _compact(found) == data
        value = found if same else data
    value = (
        rewrite.text(value) if isinstance(value, str) else secrets.answer_out(rewrite.value(value))
    )
    texts = [value if isinstance(value, str) else _compact(value), name or "", event_id or ""]
    if any(OPEN in text for text in texts) or len(texts[0].encode()) > _EVENT_ROOM:
        return None
    written: dict[str, Any] = {}
    if name is not None:
        written["event"] = name
    if event_id is not None:
        written["id"] = event_id
    written["data"] = value
    return written


_NOT_JSON = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _compact(value: Any) -> str:
    """As a stream step sends a JSON value: compact, UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
