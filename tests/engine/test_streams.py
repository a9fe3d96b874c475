"""A stream step planned (mockskill/engine/streams.py): the format a request's Accept
chooses, the bytes of each event (read back with the WHATWG algorithm and as JSON lines),
the fault as a piece or as the ending, and the journal's record of how it went.

Pure: no server, no clock. What the transport does with a plan is
tests/transport/test_streaming.py's; the whole path with real clients, tests/test_stream_steps.py's.
"""

from __future__ import annotations

import json

import pytest
from event_streams import parse_ndjson, parse_sse

from mockskill.engine.actions import Urls
from mockskill.engine.plan import Outcome, Streamed
from mockskill.engine.streams import FramedStream, KeptStreams, chosen_format, framed
from mockskill.protocol.catalog import Context, Retry
from mockskill.scenario.model import (
    MAX_EVENT_BYTES,
    Stream,
    StreamEnd,
    StreamEvent,
    StreamFault,
)
from mockskill.scenario.source import Position

HERE = Position("test.yaml", 1, 1)
URLS = Urls("http://127.0.0.1:9")
CONTEXT = Context.for_skill("tokens")


def event(data: str | None = None, **fields: object) -> StreamEvent:
    return StreamEvent(HERE, data, **fields)  # type: ignore[arg-type]


def tokens(count: int, delay_ms: int = 20) -> tuple[StreamEvent, ...]:
    return tuple(
        event(
            json.dumps({"text": f"t{n}"}), name="token", id=str(n), delay_ms=delay_ms, is_json=True
        )
        for n in range(1, count + 1)
    )


RESULT = StreamEnd(event('{"answer":42}', name="result", is_json=True))


def stream(**fields: object) -> Stream:
    fields.setdefault("events", tokens(3))
    return Stream(HERE, **fields)  # type: ignore[arg-type]


def body(made: Stream, fmt: str = "sse") -> bytes:
    return b"".join(p.data for p in framed(made, fmt, CONTEXT, URLS).play.pieces)


# -- the format: Accept chooses among the stream's ------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        pytest.param(None, "sse", id="no-accept-the-default"),
        pytest.param("*/*", "sse", id="any-the-default"),
        pytest.param("text/event-stream", "sse", id="sse"),
        pytest.param("application/x-ndjson", "ndjson", id="ndjson"),
        pytest.param("application/json", "sse", id="naming-none-the-default"),
        pytest.param("text/event-stream;q=0.5, application/x-ndjson", "ndjson", id="quality"),
        pytest.param("application/*, text/event-stream;q=0.1", "ndjson", id="a-type-range"),
        pytest.param("text/event-stream;q=0, */*", "ndjson", id="q0-refuses-one"),
        pytest.param("application/x-ndjson, text/event-stream", "sse", id="a-tie-the-order"),
        pytest.param("APPLICATION/X-NDJSON", "ndjson", id="any-case"),
        pytest.param("application/x-ndjson;q=zz", "sse", id="a-bad-quality-names-none"),
    ],
)
def test_accept_chooses_among_the_formats_the_first_by_default(
    accept: str | None, expected: str
) -> None:
    assert chosen_format(("sse", "ndjson"), accept) == expected


def test_a_stream_of_one_format_answers_it_whatever_the_accept() -> None:
    assert chosen_format(("ndjson",), "text/event-stream") == "ndjson"


@pytest.mark.parametrize(
    ("fmt", "content_type"),
    [("sse", "text/event-stream; charset=utf-8"), ("ndjson", "application/x-ndjson")],
)
def test_the_head_says_the_format_no_cache_and_the_streams_headers(
    fmt: str, content_type: str
) -> None:
    made = framed(stream(status=201, headers=(("X-Request-Id", "r1"),)), fmt, CONTEXT, URLS).answer
    assert made.status == 201
    assert made.body == b""
    assert dict(made.headers) == {
        "X-Request-Id": "r1",
        "Content-Type": content_type,
        "Cache-Control": "no-cache",
    }


# -- SSE framing, read back as an EventSource reads it -----------------------------


def test_sse_events_carry_their_id_name_and_data() -> None:
    parsed = parse_sse(body(stream(end=RESULT)))
    assert [(e.type, e.last_event_id, e.json()) for e in parsed.events] == [
        ("token", "1", {"text": "t1"}),
        ("token", "2", {"text": "t2"}),
        ("token", "3", {"text": "t3"}),
        ("result", "3", {"answer": 42}),
    ]


def test_a_text_of_several_lines_is_one_data_line_each() -> None:
    raw = body(stream(events=(event("two\nlines\r\nand\rmore"),)))
    assert raw == b"data: two\ndata: lines\ndata: and\ndata: more\n\n"
    assert parse_sse(raw).events[0].data == "two\nlines\nand\nmore"


def test_a_data_line_keeps_its_own_leading_space_and_utf8() -> None:
    parsed = parse_sse(body(stream(events=(event(" indented ünï"),))))
    assert parsed.events[0].data == " indented ünï"


def test_comments_alone_or_with_an_event_are_comment_lines() -> None:
    made = stream(events=(event(comment="just a comment"), event("x", comment="with it")))
    raw = body(made)
    assert raw == b": just a comment\n\n: with it\ndata: x\n\n"
    parsed = parse_sse(raw)
    assert parsed.comments == ["just a comment", "with it"]
    assert [e.data for e in parsed.events] == ["x"]


def test_retry_is_sent_first_and_not_counted_as_an_event() -> None:
    pieces = framed(stream(retry_ms=2000), "sse", CONTEXT, URLS).play.pieces
    assert pieces[0].data == b"retry: 2000\n\n"
    assert not pieces[0].counts
    assert parse_sse(b"".join(p.data for p in pieces)).events[0].retry == 2000


def test_an_error_end_is_the_unified_body_with_its_retry_advice() -> None:
    made = stream(end=StreamEnd(event(name=None), error_code="ENDPOINT_UNREACHABLE"))
    last = parse_sse(body(made)).events[-1]
    assert last.type == "error"
    error = last.json()["error"]
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert error["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert "{base_url}" not in last.data  # the placeholders filled for the address
    assert "http://127.0.0.1:9/skills/tokens/invoke" in last.data


def test_a_non_retryable_error_end_carries_no_retry_advice() -> None:
    made = stream(end=StreamEnd(event(name=None), error_code="PERMISSION_DENIED"))
    line = parse_ndjson(body(made, "ndjson"))[-1]
    assert line["event"] == "error"
    assert line["data"]["error"]["code"] == "PERMISSION_DENIED"
    assert "retry" not in line["data"]["error"]


def test_each_piece_waits_its_events_delay_and_counts_with_its_id() -> None:
    play = framed(stream(events=tokens(3, delay_ms=50), end=RESULT), "sse", CONTEXT, URLS).play
    assert [(p.delay_ms, p.event_id, p.counts) for p in play.pieces] == [
        (50, "1", True),
        (50, "2", True),
        (50, "3", True),
        (0, None, True),
    ]
    assert play.ending == "complete"


def test_a_heartbeat_is_a_comment_in_sse_and_an_empty_line_in_ndjson() -> None:
    assert framed(stream(heartbeat_ms=15), "sse", CONTEXT, URLS).play.heartbeat == b": \n\n"
    assert framed(stream(heartbeat_ms=15), "ndjson", CONTEXT, URLS).play.heartbeat == b"\n"
    assert framed(stream(), "sse", CONTEXT, URLS).play.heartbeat_ms is None


# -- NDJSON framing ------------------------------------------------------------------


def test_ndjson_is_one_object_a_line_its_data_the_json_value_or_the_text() -> None:
    scripted = (event("plain text"), event("[1, 2]", is_json=True))
    made = stream(events=(*tokens(2), *scripted), end=RESULT)
    assert parse_ndjson(body(made, "ndjson")) == [
        {"event": "token", "id": "1", "data": {"text": "t1"}},
        {"event": "token", "id": "2", "data": {"text": "t2"}},
        {"data": "plain text"},
        {"data": [1, 2]},
        {"event": "result", "data": {"answer": 42}},
    ]


def test_ndjson_tells_the_text_42_from_the_json_value_42() -> None:
    made = stream(events=(event("42"), event("42", is_json=True), event("[1]")))
    assert body(made, "ndjson") == b'{"data":"42"}\n{"data":42}\n{"data":"[1]"}\n'
    assert body(made, "sse") == b"data: 42\n\ndata: 42\n\ndata: [1]\n\n"


def test_ndjson_sends_no_comments_but_keeps_their_pause() -> None:
    made = stream(events=(event(comment="c", delay_ms=30), event('"x"', delay_ms=20, is_json=True)))
    pieces = framed(made, "ndjson", CONTEXT, URLS).play.pieces
    assert [(p.delay_ms, p.data) for p in pieces] == [(50, b'{"data":"x"}\n')]


# -- faults after event N ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["reset", "close", "stall", "broken_chunking"])
def test_an_ending_fault_cuts_after_event_n_and_the_end_never_comes(kind: str) -> None:
    made = stream(events=tokens(5), end=RESULT, fault=StreamFault(kind, 2, stall_ms=300))
    play = framed(made, "sse", CONTEXT, URLS).play
    assert [p.event_id for p in play.pieces] == ["1", "2"]
    assert play.ending == kind
    assert play.stall_ms == (300 if kind == "stall" else None)


def test_a_fault_after_more_events_than_there_are_comes_before_the_end() -> None:
    made = stream(events=tokens(2), end=RESULT, fault=StreamFault("reset", 40))
    play = framed(made, "sse", CONTEXT, URLS).play
    assert [p.event_id for p in play.pieces] == ["1", "2"]
    assert play.ending == "reset"


def test_a_fault_after_zero_events_sends_only_the_retry() -> None:
    made = stream(retry_ms=100, fault=StreamFault("close", 0))
    assert [p.data for p in framed(made, "sse", CONTEXT, URLS).play.pieces] == [b"retry: 100\n\n"]


def test_bad_utf8_replaces_event_n_plus_1_and_the_stream_goes_on() -> None:
    made = stream(end=RESULT, fault=StreamFault("bad_utf8", 1))
    for fmt in ("sse", "ndjson"):
        pieces = framed(made, fmt, CONTEXT, URLS).play.pieces
        broken = pieces[1].data
        with pytest.raises(UnicodeDecodeError):
            broken.decode("utf-8")
        assert pieces[1].event_id == "2"  # in place of event 2, with its id
        rest = b"".join(p.data for i, p in enumerate(pieces) if i != 1)
        assert len(pieces) == 4  # the stream went on: events 3 and the result
        assert rest.decode("utf-8")


def test_no_blank_line_merges_event_n_plus_1_with_the_next() -> None:
    parsed = parse_sse(body(stream(fault=StreamFault("no_blank_line", 1))))
    assert [e.data for e in parsed.events] == [
        '{"text": "t1"}',
        '{"text": "t2"}\n{"text": "t3"}',  # the reader sees one event of two data lines
    ]
    lines = body(stream(fault=StreamFault("no_blank_line", 1)), "ndjson").split(b"\n")
    assert lines[1].count(b"{") == 4  # two objects on one line: no JSON line reads it


def test_an_oversized_line_passes_the_event_size_limit() -> None:
    pieces = framed(stream(fault=StreamFault("oversized_line", 0)), "sse", CONTEXT, URLS)
    longest = max(len(line) for line in pieces.play.pieces[0].data.split(b"\n"))
    assert longest > MAX_EVENT_BYTES


@pytest.mark.parametrize("fmt", ["sse", "ndjson"])
def test_not_json_sends_data_no_json_parser_reads(fmt: str) -> None:
    made = stream(events=(*tokens(2), event("100", is_json=True)), fault=StreamFault("not_json", 1))
    raw = body(made, fmt)
    if fmt == "sse":
        events = parse_sse(raw).events
        assert events[0].json() == {"text": "t1"}
        with pytest.raises(json.JSONDecodeError):
            events[1].json()
        assert events[2].json() == 100
    else:
        with pytest.raises(json.JSONDecodeError):
            parse_ndjson(raw)
        good = [line for i, line in enumerate(raw.split(b"\n")) if i != 1 and line]
        assert [json.loads(line)["data"] for line in good] == [{"text": "t1"}, 100]


def test_duplicate_id_repeats_the_last_id_sent() -> None:
    events = parse_sse(body(stream(fault=StreamFault("duplicate_id", 1)))).events
    assert [(e.last_event_id, e.json()["text"]) for e in events] == [
        ("1", "t1"),
        ("1", "t2"),
        ("3", "t3"),
    ]


def test_duplicate_id_before_any_id_sends_the_event_twice_with_its_own() -> None:
    pieces = framed(stream(fault=StreamFault("duplicate_id", 0)), "sse", CONTEXT, URLS).play.pieces
    assert [p.event_id for p in pieces] == ["1", "1", "2", "3"]


def test_out_of_order_id_goes_below_the_last_id_sent() -> None:
    made = stream(events=tokens(4), fault=StreamFault("out_of_order_id", 2))
    pieces = framed(made, "ndjson", CONTEXT, URLS).play.pieces
    assert [json.loads(p.data)["id"] for p in pieces] == ["1", "2", "1", "4"]


# -- framed once; the journal's record -----------------------------------------------


def test_a_stream_is_framed_once_per_step_address_and_format() -> None:
    kept = KeptStreams()
    made = stream(formats=("sse", "ndjson"))
    first = kept.framed(made, None, CONTEXT, URLS)
    assert kept.framed(made, "*/*", CONTEXT, URLS) is first
    assert kept.framed(made, "application/x-ndjson", CONTEXT, URLS) is not first
    assert kept.framed(made, None, CONTEXT, Urls("http://other:1")) is not first
    kept.clear()
    assert kept.framed(made, None, CONTEXT, URLS) is not first


def test_what_keeping_a_stream_costs_counts_its_burst_joined_into_runs() -> None:
    paced = framed(stream(events=tokens(5)), "sse", CONTEXT, URLS)
    pieces = sum(len(p.data) for p in paced.play.pieces)
    assert paced.size == pieces  # every run one piece: its bytes, no copy
    burst = framed(stream(events=tokens(5, delay_ms=0)), "sse", CONTEXT, URLS)
    pieces = sum(len(p.data) for p in burst.play.pieces)
    assert burst.size == 2 * pieces  # the pieces, and the one run they are due in


def test_the_record_says_what_was_sent_how_it_ended_and_for_how_long() -> None:
    made = framed(stream(fault=StreamFault("reset", 2)), "ndjson", CONTEXT, URLS)
    outcome = Outcome(None, 100.0, headers_at=100.5)
    outcome.stream = Streamed(2, "2", "reset", 101.25, 101.0)
    assert made.record(outcome) == {
        "format": "ndjson",
        "events": 2,
        "last_id": "2",
        "ended": "reset",
        "fault": "reset",
        "fault_after": 2,
        "duration_ms": 750,
        "asked_from": None,
        "resumed_from": None,
        "resumable": False,
        "retry_ms": None,
        "idle_bound_ms": made.judged.idle_bound_ms,
        "expected_ms": made.judged.expected_ms,
        "stalled_ms": 250,
    }


def test_a_cut_resumable_stream_records_the_ids_it_sent() -> None:
    made = framed(
        stream(events=tokens(5), resumable=True, retry_ms=300, fault=StreamFault("reset", 3)),
        "sse",
        CONTEXT,
        URLS,
    )
    outcome = Outcome(None, 100.0, headers_at=100.0)
    outcome.stream = Streamed(3, "3", "reset", 100.5, 100.5)
    record = made.record(outcome)
    assert (record["resumable"], record["retry_ms"], record["sent_ids"]) == (
        True,
        300,
        ["1", "2", "3"],
    )
    whole = framed(stream(events=tokens(5), resumable=True), "sse", CONTEXT, URLS)
    outcome.stream = Streamed(5, "5", "complete", 100.5, 100.5)
    assert "sent_ids" not in whole.record(outcome)  # nothing to resume: no ids kept


def test_an_error_end_sent_is_the_entrys_error_with_its_advice() -> None:
    advice = Retry(400, 3)
    end = StreamEnd(event(None, name="error"), "ENDPOINT_UNREACHABLE", advice)
    made = framed(stream(end=end), "sse", CONTEXT, URLS)
    assert b'"suggested_delay_ms": 400' in body_of(made)
    outcome = Outcome(None, 100.0, headers_at=100.0)
    outcome.stream = Streamed(4, "3", "complete", 100.5, 100.5)
    assert made.error_sent(outcome) == ("ENDPOINT_UNREACHABLE", advice)
    outcome.stream = Streamed(2, "2", "client_left", 100.5, 100.4)
    assert made.error_sent(outcome) is None  # the client left before it
    plain = framed(stream(end=StreamEnd(event("{}"), "PERMISSION_DENIED")), "sse", CONTEXT, URLS)
    outcome.stream = Streamed(4, "3", "complete", 100.5, 100.5)
    assert plain.error_sent(outcome) == ("PERMISSION_DENIED", None)  # the category's: none


def body_of(made: FramedStream) -> bytes:
    return b"".join(piece.data for piece in made.play.pieces)


def test_a_stream_whose_head_never_went_records_no_event() -> None:
    made = framed(stream(), "sse", CONTEXT, URLS)
    left = made.record(Outcome(None, 100.0, client_left_at=100.2))
    assert (left["events"], left["ended"], left["fault"]) == (0, "client_left", None)
    stopped = made.record(Outcome(None, 100.0, stopped=True))
    assert stopped["ended"] == "stopped"
