"""A relayed stream's events, found in the bytes however the provider's chunks cut them.

:class:`~mockskill.engine.relayed_streams.RelayedStream` is fed each chunk the proxy
relays; what it counts (the journal's ``Entry.stream``) and keeps (a recording's
events) must not depend on where the chunks were cut, and must be what a consumer's
EventSource dispatches (comments, heartbeats and a ``retry:`` alone are no events).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from mockskill.engine.relayed_streams import LINE_PREFIX, RelayedStream, stream_format
from mockskill.scenario.model import ProviderStreams

SSE = (
    b"retry: 2000\n\n"
    b": a heartbeat\n\n"
    b'id: 1\r\nevent: token\r\ndata: {"t":1}\r\n\r\n'
    b"data: two\rdata: lines\r\r"
    b"id: bad\x00id\ndata: 3\n\n"
    b"event: result\ndata:\n\n"
    b"data: never dispatched"
)


def fed(body: bytes, fmt: str, cuts: int | None, collect: int = 1 << 20) -> RelayedStream:
    stream = RelayedStream(fmt, 0.0, 0.0, collect=collect)
    size = cuts or len(body)
    for at, start in enumerate(range(0, len(body), size)):
        stream.feed(body[start : start + size], at / 1000)
    return stream


@pytest.mark.parametrize("cuts", [None, 1, 2, 3, 7])
def test_sse_events_are_the_ones_an_event_source_dispatches_wherever_chunks_are_cut(
    cuts: int | None,
) -> None:
    stream = fed(SSE, "sse", cuts)
    assert stream.events == 4
    assert stream.retry_ms == 2000
    assert stream.last_id == "1"  # an id with NUL is ignored, as an EventSource does
    assert [(e.name, e.id, e.data) for e in stream.collected] == [
        ("token", "1", '{"t":1}'),
        (None, None, "two\nlines"),
        (None, None, "3"),
        ("result", None, ""),
    ]
    times = [e.ms for e in stream.collected]
    assert times == sorted(times)


@pytest.mark.parametrize("cuts", [None, 1, 5])
def test_ndjson_events_are_lines_and_an_empty_line_is_a_heartbeat(cuts: int | None) -> None:
    body = b'{"event":"token","id":7,"data":1}\n\n  \n{"no":"id"}\r\n{"id":"x"'
    stream = fed(body, "ndjson", cuts)
    assert stream.events == 2  # the last line never ended
    assert stream.last_id == "7"
    lines = ['{"event":"token","id":7,"data":1}', '{"no":"id"}']
    assert [e.data for e in stream.collected] == lines


def test_without_a_recording_a_long_line_is_read_by_its_first_bytes_only() -> None:
    stream = RelayedStream("sse", 0.0, 0.0)
    piece = b"x" * LINE_PREFIX
    tracemalloc.start()
    try:
        stream.feed(b"data: ", 0.0)
        for _ in range(2000):  # an 8 MiB line
            stream.feed(piece, 0.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LINE_PREFIX
    stream.feed(b"\nid: 9\n\n", 0.0)
    assert (stream.events, stream.last_id, stream.collected) == (1, "9", [])


def test_past_the_recordings_bound_events_are_counted_not_kept() -> None:
    stream = fed(b"data: aaaa\n\n" * 10, "sse", 3, collect=30)
    assert stream.events == 10
    assert len(stream.collected) < 10
    assert stream.truncated


def test_the_journal_record_says_how_the_relayed_stream_ended() -> None:
    stream = RelayedStream("sse", 5.0, 10.0)
    stream.feed(b"retry: 300\n\nid: 1\ndata: a\n\n", 10.1)
    stream.end("upstream_cut", 10.25)
    assert stream.record() == {
        "format": "sse",
        "events": 1,
        "last_id": "1",
        "ended": "upstream_cut",
        "fault": None,
        "fault_after": None,
        "duration_ms": 250,
        "asked_from": None,
        "resumed_from": None,
        "resumable": False,  # a provider's bytes say neither this
        "retry_ms": 300,
        "stalled_ms": 150,  # the bytes stopped at 10.1, the stream ended at 10.25
        "idle_bound_ms": 1000,  # 3 x its longest pause (100 ms), at least 1 s
        "expected_ms": None,  # a provider declares no duration
    }


def test_what_the_proxy_declares_of_the_providers_streams_is_journalled() -> None:
    stream = RelayedStream("sse", 0.0, 0.0)
    stream.feed(b"data: a\n\n", 0.01)
    stream.end("client_left", 0.25)
    record = stream.record(ProviderStreams(resumable=True, idle_bound_ms=400, expected_ms=900))
    assert (record["resumable"], record["idle_bound_ms"], record["expected_ms"]) == (True, 400, 900)
    record = stream.record(ProviderStreams(expected_ms=900))
    assert (record["resumable"], record["idle_bound_ms"]) == (False, 1000)  # the bytes' bound


def test_the_idle_bound_is_three_times_the_longest_pause_before_the_bytes_stopped() -> None:
    stream = RelayedStream("sse", 0.0, 0.0)
    for at in (0.5, 0.75, 1.25):  # pauses of 500, 250 and 500 ms
        stream.feed(b"data: a\n\n", at)
    stream.end("client_left", 4.25)
    record = stream.record()
    assert (record["idle_bound_ms"], record["stalled_ms"]) == (1500, 3000)


@pytest.mark.parametrize(
    ("body", "resumed"),
    [
        (b"id: 41\ndata: a\n\nid: 42\ndata: b\n\n", "40"),  # went on after it
        (b"id: 1\ndata: a\n\nid: 40\ndata: b\n\n", None),  # started over: sent it again
        (b"data: a\n\n", None),  # no id: nothing says where it began
    ],
)
def test_a_stream_resumed_after_the_id_asked_when_it_never_sent_that_id(
    body: bytes, resumed: str | None
) -> None:
    stream = RelayedStream("sse", 0.0, 0.0, asked="40")
    stream.feed(body, 0.1)
    stream.end("complete", 0.2)
    assert (stream.record()["asked_from"], stream.record()["resumed_from"]) == ("40", resumed)


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        ("sse", b'data: 1\n\nevent: error\ndata: {"error": {"code": "X"}}\n\n'),
        ("ndjson", b'{"data": 1}\n{"event": "error", "data": {"error": {"code": "X"}}}\n'),
    ],
)
def test_the_data_of_a_last_event_named_error_is_kept(fmt: str, body: bytes) -> None:
    stream = fed(body, fmt, 5, collect=0)
    assert stream.error_data is not None
    assert json.loads(stream.error_data) == {"error": {"code": "X"}}
    stream.feed(b"data: 2\n\n" if fmt == "sse" else b'{"data": 2}\n', 1.0)
    assert stream.error_data is None  # the stream went on: it did not end in the error


@pytest.mark.parametrize(
    ("kind", "fmt"),
    [
        ("text/event-stream", "sse"),
        ("Text/Event-Stream; charset=utf-8", "sse"),
        ("application/x-ndjson", "ndjson"),
        ("application/json", None),
    ],
)
def test_a_stream_is_known_by_its_content_type(kind: str, fmt: str | None) -> None:
    assert stream_format([("content-type", kind)]) == fmt
