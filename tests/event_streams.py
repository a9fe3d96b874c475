"""What stream tests share: an event stream parser (the WHATWG algorithm, as a browser's
EventSource reads a ``text/event-stream``), and a JSON lines reader.

The parser follows the spec's "interpreting an event stream" section step by step (no
client library installed parses SSE): a test that reads mockskill's bytes with it reads
them as a consumer's EventSource would.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class Event:
    """An event as dispatched: its type, data, last event id, and the retry it set."""

    type: str = "message"
    data: str = ""
    last_event_id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class Parsed:
    """A stream read whole: its events, the comments seen, and the last ``retry:``."""

    events: list[Event]
    comments: list[str]
    retry: int | None


def parse_sse(stream: bytes | Iterable[bytes]) -> Parsed:
    """The events of an event stream, as the WHATWG spec dispatches them.

    Decoded as UTF-8 (a bad sequence raises: the spec would replace it, a test wants to
    see it); lines end with CRLF, LF or CR; a blank line dispatches the event being
    built (none when its data buffer is empty); an incomplete last event is dropped.
    """
    data = stream if isinstance(stream, bytes) else b"".join(stream)
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    events: list[Event] = []
    comments: list[str] = []
    retry: int | None = None
    last_id = ""
    event_type, buffer = "", ""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines[:-1]:  # (the last is not a line: nothing ended it)
        if line == "":
            if buffer:
                body = buffer[:-1] if buffer.endswith("\n") else buffer
                events.append(Event(event_type or "message", body, last_id, retry))
            event_type, buffer = "", ""
            continue
        if line.startswith(":"):
            comments.append(line[1:].removeprefix(" "))
            continue
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "event":
            event_type = value
        elif name == "data":
            buffer += value + "\n"
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
    return Parsed(events, comments, retry)


def parse_ndjson(data: bytes) -> list[Any]:
    """Each JSON line's value; empty lines (heartbeats) skipped."""
    return [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]
