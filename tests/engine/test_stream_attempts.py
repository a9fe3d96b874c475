"""A resumable stream's attempts (mockskill/engine/streams.py, :meth:`FramedStream.attempt`):
a request's ``Last-Event-ID`` naming an event the stream sends continues after it; any
other starts over. The stream's fault counts the events of the whole stream.

Pure: no server, no clock. The whole path with real clients (and across replicas) is
tests/test_stream_resume.py's.
"""

from __future__ import annotations

import json

import pytest
from event_streams import parse_sse

from mockskill.engine.actions import Urls
from mockskill.engine.entries import MAX_TEXT
from mockskill.engine.plan import Outcome, Streamed
from mockskill.engine.streams import KeptStreams, StreamAttempt, framed
from mockskill.protocol.catalog import Context
from mockskill.scenario.model import Stream, StreamEnd, StreamEvent, StreamFault
from mockskill.scenario.source import Position

HERE = Position("test.yaml", 1, 1)
URLS = Urls("http://127.0.0.1:9")
CONTEXT = Context.for_skill("tokens")
RESULT = StreamEnd(StreamEvent(HERE, '{"answer":42}', "result", is_json=True))


def tokens(count: int) -> tuple[StreamEvent, ...]:
    return tuple(
        StreamEvent(HERE, json.dumps({"n": n}), "token", str(n), 10, is_json=True)
        for n in range(1, count + 1)
    )


def resumable(**fields: object) -> Stream:
    fields.setdefault("events", tokens(6))
    fields.setdefault("end", RESULT)
    fields.setdefault("resumable", True)
    return Stream(HERE, **fields)  # type: ignore[arg-type]


def sent(attempt: StreamAttempt) -> list[str | None]:
    """The ids of the events an attempt sends (the result's: ``result``)."""
    events = parse_sse(b"".join(p.data for p in attempt.play.pieces)).events
    return [e.last_event_id if e.type == "token" else e.type for e in events]


def test_a_request_without_last_event_id_gets_the_attempt_from_the_start() -> None:
    made = framed(resumable(), "sse", CONTEXT, URLS)
    assert made.attempt(None) is made.start
    assert sent(made.start) == ["1", "2", "3", "4", "5", "6", "result"]
    assert (made.start.asked_from, made.start.resumed_from) == (None, None)


def test_an_id_the_stream_sends_continues_after_that_event() -> None:
    attempt = framed(resumable(), "sse", CONTEXT, URLS).attempt("4")
    assert sent(attempt) == ["5", "6", "result"]
    assert (attempt.asked_from, attempt.resumed_from) == ("4", "4")
    assert attempt.play.ending == "complete"
    assert attempt.play.pieces[0].delay_ms == 10  # the pause before event 5, as scripted


def test_the_retry_field_comes_first_on_a_resumed_attempt_too() -> None:
    attempt = framed(resumable(retry_ms=1500), "sse", CONTEXT, URLS).attempt("5")
    assert attempt.play.pieces[0].data == b"retry: 1500\n\n"
    assert sent(attempt) == ["6", "result"]


def test_resumed_after_the_last_event_only_the_end_comes() -> None:
    assert sent(framed(resumable(), "sse", CONTEXT, URLS).attempt("6")) == ["result"]


@pytest.mark.parametrize("asked", ["99", "", "4 ", "result"])
def test_an_id_the_stream_never_sends_starts_over_and_says_what_was_asked(asked: str) -> None:
    made = framed(resumable(), "sse", CONTEXT, URLS)
    attempt = made.attempt(asked)
    assert attempt.play is made.start.play
    assert (attempt.asked_from, attempt.resumed_from) == (asked, None)


def test_a_stream_not_declared_resumable_starts_over_whatever_the_id() -> None:
    made = framed(resumable(resumable=False), "sse", CONTEXT, URLS)
    attempt = made.attempt("4")
    assert sent(attempt) == ["1", "2", "3", "4", "5", "6", "result"]
    assert (attempt.asked_from, attempt.resumed_from) == ("4", None)


def test_ndjson_resumes_after_the_same_event() -> None:
    attempt = framed(resumable(), "ndjson", CONTEXT, URLS).attempt("5")
    lines = [json.loads(p.data) for p in attempt.play.pieces]
    assert lines == [
        {"event": "token", "id": "6", "data": {"n": 6}},
        {"event": "result", "data": {"answer": 42}},
    ]


def test_an_id_sent_twice_resumes_after_its_first_event() -> None:
    twice = (*tokens(2), StreamEvent(HERE, "again", "token", "2"), *tokens(4)[2:])
    attempt = framed(resumable(events=twice), "sse", CONTEXT, URLS).attempt("2")
    assert sent(attempt) == ["2", "3", "4", "result"]


# -- the fault counts the events of the whole stream ---------------------------------


@pytest.mark.parametrize("kind", ["reset", "close", "stall", "broken_chunking"])
def test_an_ending_fault_after_n_cuts_an_attempt_resumed_before_n(kind: str) -> None:
    made = framed(resumable(fault=StreamFault(kind, 4, stall_ms=50)), "sse", CONTEXT, URLS)
    assert sent(made.start) == ["1", "2", "3", "4"]
    attempt = made.attempt("2")
    assert sent(attempt) == ["3", "4"]
    assert (attempt.play.ending, attempt.fault, attempt.fault_after) == (kind, kind, 4)
    assert attempt.play.stall_ms == (50 if kind == "stall" else None)


@pytest.mark.parametrize("resumed_at", ["4", "5"])
def test_an_attempt_resumed_at_event_n_or_later_does_not_do_the_ending_fault(
    resumed_at: str,
) -> None:
    made = framed(resumable(fault=StreamFault("stall", 4, stall_ms=50)), "sse", CONTEXT, URLS)
    attempt = made.attempt(resumed_at)
    assert sent(attempt)[-1] == "result"
    assert sent(attempt)[0] == str(int(resumed_at) + 1)
    assert (attempt.play.ending, attempt.play.stall_ms) == ("complete", None)
    assert (attempt.fault, attempt.fault_after) == (None, None)


def test_a_malformed_event_is_sent_by_an_attempt_that_reaches_it() -> None:
    made = framed(resumable(fault=StreamFault("not_json", 3)), "sse", CONTEXT, URLS)
    before = made.attempt("3")  # event 4 is the malformed one: this attempt sends it
    events = parse_sse(b"".join(p.data for p in before.play.pieces)).events
    with pytest.raises(json.JSONDecodeError):
        events[0].json()
    assert (before.fault, before.fault_after) == ("not_json", 3)
    past = made.attempt("4")
    assert [e.json() for e in parse_sse(b"".join(p.data for p in past.play.pieces)).events] == [
        {"n": 5},
        {"n": 6},
        {"answer": 42},
    ]
    assert (past.fault, past.fault_after) == (None, None)


def test_a_duplicate_id_resumes_after_the_first_event_that_carried_it() -> None:
    made = framed(resumable(fault=StreamFault("duplicate_id", 2)), "sse", CONTEXT, URLS)
    assert sent(made.start) == ["1", "2", "2", "4", "5", "6", "result"]
    attempt = made.attempt("2")  # the duplicate (event 3 sent with id 2) comes again
    assert sent(attempt) == ["2", "4", "5", "6", "result"]
    assert attempt.fault == "duplicate_id"


# -- what the journal keeps of the id asked ------------------------------------------


def test_the_id_asked_is_kept_as_client_text_is_cut_and_escaped() -> None:
    made = framed(resumable(), "sse", CONTEXT, URLS)
    long = made.attempt("x" * 500)
    assert long.asked_from == "x" * MAX_TEXT + f"...[{500 - MAX_TEXT} more characters]"
    forged = made.attempt("4\u202e")
    assert (forged.asked_from, forged.resumed_from) == ("4%E2%80%AE", None)


def test_a_utf8_id_is_matched_as_the_browser_sends_it() -> None:
    events = (StreamEvent(HERE, "a", id="é1"), StreamEvent(HERE, "b", id="é2"))
    made = framed(resumable(events=events, end=None), "sse", CONTEXT, URLS)
    as_read = "é1".encode().decode("latin-1")  # headers are read as Latin-1
    attempt = made.attempt(as_read)
    assert (attempt.resumed_from, [p.event_id for p in attempt.play.pieces]) == ("é1", ["é2"])


def test_the_record_says_what_was_asked_and_where_it_resumed() -> None:
    made = framed(resumable(fault=StreamFault("reset", 5)), "sse", CONTEXT, URLS)
    attempt = made.attempt("2")
    outcome = Outcome(None, 100.0, headers_at=100.0)
    outcome.stream = Streamed(3, "5", "reset", 100.1)
    record = made.record(outcome, attempt)
    assert record["asked_from"] == "2"
    assert record["resumed_from"] == "2"
    assert (record["events"], record["last_id"], record["ended"]) == (3, "5", "reset")
    assert (record["fault"], record["fault_after"]) == ("reset", 5)
    over = made.record(outcome, made.attempt("nope"))
    assert (over["asked_from"], over["resumed_from"]) == ("nope", None)


def test_a_stream_is_framed_once_and_every_attempt_is_a_slice_of_its_pieces() -> None:
    kept, stream = KeptStreams(), resumable()
    made = kept.framed(stream, None, CONTEXT, URLS)
    assert kept.framed(stream, None, CONTEXT, URLS) is made
    attempt = made.attempt("3")
    assert all(any(p is w for w in made.whole) for p in attempt.play.pieces)
