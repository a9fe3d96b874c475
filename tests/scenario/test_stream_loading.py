"""A step's ``stream:``: what loads, what is refused.

The engine frames and the transport plays streams; these tests hold the loading side
(scenario/streams.py, the ``stream:`` hook of scenario/steps.py): the model a good file
gives (events unrolled, data dumped once, the terminal event, the fault), every
positioned problem a bad one gets, the docs' example and problem lines, and the bundled
``streams`` scenario.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import assert_problem, column, problems_in

from mockskill import ScenarioError, bundled_path, load_paths, load_text
from mockskill.protocol import catalog
from mockskill.scenario.model import (
    MAX_EVENT_BYTES,
    MAX_STREAM_EVENTS,
    STREAM_FAULTS,
    Skill,
    Step,
    Stream,
    StreamEnd,
    StreamEvent,
    StreamFault,
)
from mockskill.scenario.problems import Problem
from mockskill.scenario.source import Position
from mockskill.scenario.streams import MEDIA_TYPES, REPLACING_FAULTS, framed_size

DOCS = Path(__file__).resolve().parents[2] / "docs"


def stream_skill(body: str, *, step: str = "") -> str:
    """One skill ``s`` whose invoke is one step ``stream:`` *body* (block YAML, its first
    line on line 5); *step* holds more keys of the step (block YAML, after the stream)."""
    return (
        "skills:\n  - id: s\n    invoke:\n      - stream:\n"
        + textwrap.indent(textwrap.dedent(body), "          ")
        + textwrap.indent(textwrap.dedent(step), "        ")
    )


def events(*items: str, more: str = "") -> str:
    """A ``stream:`` body: ``events:`` (line 5) with *items* (flow mappings, item i on line
    6 + i), then *more* keys of the stream."""
    return "events:\n" + "".join(f"  - {item}\n" for item in items) + more


def the_step(text: str) -> Step:
    [skill] = load_text(text, "s.yaml").skills
    assert skill.invoke is not None
    return skill.invoke.steps[0]


def the_stream(text: str) -> Stream:
    stream = the_step(text).stream
    assert stream is not None
    return stream


def pauses(stream: Stream) -> list[int]:
    return [event.delay_ms for event in stream.events]


# -- what a good file gives ------------------------------------------------------------


BRIEF = stream_skill(
    """\
    format: sse
    retry: 2s
    heartbeat: 15s
    events:
      - {event: progress, data: {pct: 10}, id: "1", delay: 100ms}
      - {data: "two\\nlines"}
      - {comment: "just a comment"}
      - repeat: 200
        rate: 50/s
        event: token
        data: {text: tok}
        id_from: 1
    end: {event: result, data: {answer: 42}}
    fault: {after: 40, kind: reset}
    status: 200
    headers: {X-Trace: t-1}
    """
)


def test_the_briefs_example_loads_into_the_model_as_written() -> None:
    step = the_step(BRIEF)
    stream = step.stream
    assert stream is not None
    assert (stream.where.file, stream.where.line, stream.where.column) == ("s.yaml", 5, 11)
    assert stream.formats == ("sse",)
    assert (stream.retry_ms, stream.heartbeat_ms) == (2000, 15_000)
    progress, lines, comment, *tokens = stream.events
    assert progress == StreamEvent(progress.where, '{"pct":10}', "progress", "1", 100, is_json=True)
    assert (progress.where.line, progress.where.column) == (9, 15)
    assert lines == StreamEvent(lines.where, "two\nlines")
    assert comment == StreamEvent(comment.where, None, comment="just a comment")
    assert len(tokens) == 200
    assert {(t.data, t.name, t.is_json) for t in tokens} == {('{"text":"tok"}', "token", True)}
    assert [t.id for t in tokens] == [str(n) for n in range(1, 201)]
    assert {t.delay_ms for t in tokens} == {20}
    assert {(t.where.line, t.where.column) for t in tokens} == {(12, 15)}
    assert stream.end is not None
    end = stream.end.event
    assert stream.end == StreamEnd(StreamEvent(end.where, '{"answer":42}', "result", is_json=True))
    assert (end.where.line, end.where.column) == (17, 16)
    assert stream.fault == StreamFault("reset", 40)
    assert (stream.status, stream.headers) == (200, (("X-Trace", "t-1"),))
    assert not stream.resumable


def test_the_steps_reply_is_the_streams_head() -> None:
    step = the_step(BRIEF)
    assert step.reply.status == 200
    assert step.reply.content_type == "text/event-stream; charset=utf-8"
    assert step.reply.headers == (("X-Trace", "t-1"),)
    assert step.reply.body == b""
    assert (step.fault, step.dribble, step.hang_ms, step.proxy) == (None, None, None, None)


def test_what_a_stream_leaves_out_is_the_models_defaults() -> None:
    stream = the_stream(stream_skill(events("{data: a}")))
    assert stream == Stream(stream.where, stream.events)
    assert stream.formats == ("sse",)
    assert (stream.end, stream.fault, stream.heartbeat_ms, stream.retry_ms) == (None,) * 4
    assert (stream.status, stream.headers, stream.resumable) == (200, (), False)
    [event] = stream.events
    assert event == StreamEvent(event.where, "a")


@pytest.mark.parametrize(
    ("written", "data"),
    [
        ("{a: 1, b: [true, null]}", '{"a":1,"b":[true,null]}'),
        ("[1, 2]", "[1,2]"),
        ("42", "42"),
        ("null", "null"),
        ("'héllo'", "héllo"),
        ("{text: héllo}", '{"text":"héllo"}'),
        ("'{not: json}'", "{not: json}"),
    ],
)
def test_data_is_dumped_once_compact_or_kept_as_text(written: str, data: str) -> None:
    [event] = the_stream(stream_skill(events(f"{{data: {written}}}"))).events
    assert event.data == data


def test_an_id_may_be_a_whole_number_and_is_sent_as_text() -> None:
    [event] = the_stream(stream_skill(events("{data: a, id: 7}"))).events
    assert event.id == "7"


@pytest.mark.parametrize(
    ("pace", "expected"),
    [
        ("rate: 50/s", [20] * 5),
        ("rate: 3/s", [333, 334, 333, 333, 334]),
        ("rate: 30/m", [2000] * 5),
        ("rate: 0.5/s", [2000] * 5),
        ("rate: 4000/s", [0, 0, 1, 0, 0]),
        ("delay: 250ms", [250] * 5),
        ("", [0] * 5),
    ],
)
def test_a_repeat_is_paced_by_its_rate_without_drift(pace: str, expected: list[int]) -> None:
    item = "{repeat: 5, data: t" + (f", {pace}" if pace else "") + "}"
    stream = the_stream(stream_skill(events(item)))
    assert pauses(stream) == expected


def test_a_long_rate_keeps_its_average_exactly() -> None:
    stream = the_stream(stream_skill(events("{repeat: 3000, rate: 7/s, data: t}")))
    assert sum(pauses(stream)) == round(3000 * 1000 / 7)
    assert set(pauses(stream)) == {142, 143}


def test_a_repeat_without_ids_sends_the_same_event_and_with_id_repeats_it() -> None:
    plain = the_stream(stream_skill(events("{repeat: 3, data: t}"))).events
    assert [e.id for e in plain] == [None] * 3
    same = the_stream(stream_skill(events("{repeat: 3, data: t, id: x}"))).events
    assert [e.id for e in same] == ["x"] * 3
    counted = the_stream(stream_skill(events("{repeat: 3, data: t, id_from: 0}"))).events
    assert [e.id for e in counted] == ["0", "1", "2"]


def test_events_keep_their_order_around_a_repeat() -> None:
    stream = the_stream(
        stream_skill(events("{data: first}", "{repeat: 2, data: mid}", "{data: last}"))
    )
    assert [e.data for e in stream.events] == ["first", "mid", "mid", "last"]


@pytest.mark.parametrize(
    ("written", "formats", "content_type"),
    [
        ("sse", ("sse",), MEDIA_TYPES["sse"]),
        ("ndjson", ("ndjson",), "application/x-ndjson"),
        ("[sse, ndjson]", ("sse", "ndjson"), MEDIA_TYPES["sse"]),
        ("[ndjson, sse]", ("ndjson", "sse"), MEDIA_TYPES["ndjson"]),
    ],
)
def test_the_format_is_one_or_a_list_whose_first_is_the_default(
    written: str, formats: tuple[str, ...], content_type: str
) -> None:
    step = the_step(stream_skill(events("{data: a}", more=f"format: {written}\n")))
    assert step.stream is not None
    assert step.stream.formats == formats
    assert step.reply.content_type == content_type


def test_the_idle_bound_defaults_to_three_longest_pauses_and_at_least_a_second() -> None:
    slow = the_stream(stream_skill(events("{data: a, delay: 400ms}", "{data: b, delay: 50ms}")))
    assert (slow.idle_bound_ms, slow.idle_bound()) == (None, 1200)
    fast = the_stream(stream_skill(events("{data: a, delay: 10ms}")))
    assert fast.idle_bound() == 1000
    beating = the_stream(stream_skill(events("{data: a, delay: 3s}", more="heartbeat: 500ms\n")))
    assert beating.idle_bound() == 1500  # the heartbeat fills the pause: 500 ms between bytes
    ended = the_stream(stream_skill(events("{data: a}", more="end: {data: b, delay: 700ms}\n")))
    assert ended.idle_bound() == 2100


def test_expected_defaults_to_the_scripted_duration() -> None:
    text = events("{repeat: 10, rate: 50/s, data: t}", more="end: {data: r, delay: 30ms}\n")
    stream = the_stream(stream_skill(text))
    assert (stream.expected_ms, stream.expected()) == (None, 230)


def test_idle_bound_and_expected_are_read_as_written() -> None:
    text = events("{data: a}", more="idle_bound: 2s\nexpected: 1m\n")
    stream = the_stream(stream_skill(text))
    assert (stream.idle_bound(), stream.expected()) == (2000, 60_000)


def test_an_idle_bound_of_zero_is_a_positioned_problem() -> None:
    text = stream_skill(events("{data: a}", more="idle_bound: 0s\n"))
    [problem] = problems_in(text)
    assert problem.path == "skills[0].invoke[0].stream.idle_bound"
    assert problem.line == 7


def test_an_error_end_carries_the_catalogs_unified_body_with_its_retry_advice() -> None:
    stream = the_stream(
        stream_skill(events("{data: a}", more="end: {error: ENDPOINT_UNREACHABLE}\n"))
    )
    end = stream.end
    assert end is not None
    assert end.error_code == "ENDPOINT_UNREACHABLE"
    assert end.event.name == "error"
    assert end.event.data is not None
    body = json.loads(end.event.data)
    rendered = catalog.render("ENDPOINT_UNREACHABLE", catalog.Context.for_skill("s"))
    assert body == json.loads(rendered.body)
    assert body["error"]["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert ", " not in end.event.data  # dumped compact, as every event's data


def test_an_error_end_takes_an_error_steps_overrides() -> None:
    text = stream_skill(
        events(
            "{data: a}",
            more="""\
            end:
              error: EXECUTION_TIMEOUT
              message: overloaded
              details: {reason: busy}
              retry: {suggested_delay_ms: 1500, max_attempts: 2}
              event: failure
              id: last
            """.replace("            ", ""),
        )
    )
    end = the_stream(text).end
    assert end is not None
    assert (end.event.name, end.event.id, end.error_code) == (
        "failure",
        "last",
        "EXECUTION_TIMEOUT",
    )
    assert end.event.data is not None
    error = json.loads(end.event.data)["error"]
    assert error["message"] == "overloaded"
    assert error["details"]["reason"] == "busy"
    assert error["retry"] == {"suggested_delay_ms": 1500, "max_attempts": 2}


def test_a_result_end_is_named_result_unless_scripted_and_may_wait() -> None:
    plain = the_stream(stream_skill(events("{data: a}", more="end: {data: {answer: 42}}\n")))
    assert plain.end is not None
    assert (plain.end.event.name, plain.end.event.data, plain.end.error_code) == (
        "result",
        '{"answer":42}',
        None,
    )
    named = the_stream(
        stream_skill(events("{data: a}", more="end: {event: done, data: ok, delay: 1s}\n"))
    )
    assert named.end is not None
    assert (named.end.event.name, named.end.event.data, named.end.event.delay_ms) == (
        "done",
        "ok",
        1000,
    )


def test_a_stream_may_be_its_end_alone() -> None:
    stream = the_stream(stream_skill("end: {data: done}\n"))
    assert stream.events == ()
    assert stream.end is not None


@pytest.mark.parametrize("kind", [k for k in STREAM_FAULTS if k not in REPLACING_FAULTS])
def test_a_fault_that_ends_the_stream_may_come_after_the_last_event(kind: str) -> None:
    stream = the_stream(
        stream_skill(
            events(
                "{data: a, id: 1}", "{data: b, id: 2}", more=f"fault: {{after: 2, kind: {kind}}}\n"
            )
        )
    )
    assert stream.fault == StreamFault(kind, 2)


@pytest.mark.parametrize("kind", REPLACING_FAULTS)
def test_a_fault_that_replaces_event_n_plus_1_needs_that_event(kind: str) -> None:
    two = events(
        "{data: a, id: 1}", "{data: b, id: 2}", more=f"fault: {{after: 1, kind: {kind}}}\n"
    )
    assert the_stream(stream_skill(two)).fault == StreamFault(kind, 1)
    past = events(
        "{data: a, id: 1}", "{data: b, id: 2}", more=f"fault: {{after: 2, kind: {kind}}}\n"
    )
    [problem] = problems_in(stream_skill(past))
    assert problem.path == "skills[0].invoke[0].stream.fault.after"


def test_comments_do_not_count_among_the_events_a_fault_comes_after() -> None:
    text = stream_skill(
        events("{comment: hi}", "{data: a}", more="fault: {after: 2, kind: reset}\n")
    )
    [problem] = problems_in(text)
    assert problem.path == "skills[0].invoke[0].stream.fault.after"
    assert problem.found == "2 (an integer), with 1 event scripted"


def test_a_stall_may_last_a_scripted_time_or_until_the_client_leaves() -> None:
    timed = the_stream(
        stream_skill(events("{data: a}", more="fault: {after: 1, kind: stall, for: 5s}\n"))
    )
    assert timed.fault == StreamFault("stall", 1, 5000)
    open_ended = the_stream(
        stream_skill(events("{data: a}", more="fault: {after: 1, kind: stall}\n"))
    )
    assert open_ended.fault == StreamFault("stall", 1, None)


def test_a_stream_step_may_wait_repeat_and_move_the_state() -> None:
    step = the_step(
        stream_skill(events("{data: a}"), step="delay: 5\ntimes: 3\nset_state: Streaming\n")
    )
    assert (step.times, step.set_state) == (3, "Streaming")
    assert step.delay is not None


def test_a_sequence_plays_a_cut_stream_then_a_complete_one() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              - stream:
                  events: &tokens [{repeat: 60, rate: 50/s, data: t, id_from: 1}]
                  end: &result {data: done}
                  fault: {after: 40, kind: reset}
              - stream: {events: *tokens, end: *result}
        """
    )
    [skill] = load_text(text, "s.yaml").skills
    assert skill.invoke is not None
    first, second = (step.stream for step in skill.invoke.steps)
    assert first is not None
    assert second is not None
    assert first.fault == StreamFault("reset", 40)
    assert second.fault is None
    assert first.events == second.events
    assert first.end is not None
    assert first.end == second.end


def test_a_route_and_a_random_outcome_may_stream() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              one_of:
                - {stream: {events: [{data: a}]}, weight: 3}
                - {error: ENDPOINT_UNREACHABLE}
        routes:
          - path: /events
            steps: [{stream: {format: ndjson, events: [{data: {n: 1}}]}}]
        """
    )
    loaded = load_text(text, "s.yaml")
    [skill] = loaded.skills
    assert skill.invoke is not None
    assert skill.invoke.steps[0].choices[0].step.stream is not None
    [route] = loaded.scenarios[0].routes
    assert route.sequence is not None
    stream = route.sequence.steps[0].stream
    assert stream is not None
    assert stream.formats == ("ndjson",)


def test_a_scripted_json_value_is_marked_json_and_a_text_is_not() -> None:
    text = stream_skill(
        events(
            "{data: '42'}",
            "{data: 42}",
            "{data: [1]}",
            "{repeat: 2, data: {n: 1}}",
            "{repeat: 2, data: 'text', id_from: 1}",
            more="end: {data: '42'}\n",
        )
    )
    stream = the_stream(text)
    assert [(e.data, e.is_json) for e in stream.events] == [
        ("42", False),
        ("42", True),
        ("[1]", True),
        ('{"n":1}', True),
        ('{"n":1}', True),
        ("text", False),
        ("text", False),
    ]
    assert stream.end is not None
    assert (stream.end.event.data, stream.end.event.is_json) == ("42", False)
    error = the_stream(stream_skill(events("{data: a}", more="end: {error: PERMISSION_DENIED}\n")))
    assert error.end is not None
    assert error.end.event.is_json


def test_resumable_is_read_and_loads_without_a_word() -> None:
    text = stream_skill(events("{data: a, id: 1}", more="resumable: true\n"))
    warnings: list[Problem] = []
    scenarios = load_text(text, "s.yaml", warnings=warnings)
    [skill] = scenarios.skills
    assert skill.invoke is not None
    stream = skill.invoke.steps[0].stream
    assert stream is not None
    assert stream.resumable
    assert warnings == []


def test_a_resumable_stream_without_ids_is_warned_about_where_it_says_so() -> None:
    text = stream_skill(events("{data: a}", more="resumable: true\n"))
    warnings: list[Problem] = []
    load_text(text, "s.yaml", warnings=warnings)
    [warning] = warnings
    assert warning.path == "skills[0].invoke[0].stream.resumable"
    assert "give events ids" in warning.hint


def test_an_event_at_the_size_limit_loads_and_one_byte_more_does_not() -> None:
    # "data: " + text + "\n" + the blank line: 8 bytes of framing.
    fits = "x" * (MAX_EVENT_BYTES - 8)
    [event] = the_stream(stream_skill(events(f"{{data: {fits}}}"))).events
    assert framed_size(event, fits, "sse") == MAX_EVENT_BYTES
    [problem] = problems_in(stream_skill(events(f"{{data: {fits}x}}")))
    assert problem.path == "skills[0].invoke[0].stream.events[0]"
    assert problem.found == f"{MAX_EVENT_BYTES + 1} bytes framed as sse"


def test_an_event_is_measured_in_every_format_the_stream_may_answer() -> None:
    # In NDJSON the data is a JSON string: each tab is escaped there, two bytes.
    value = json.dumps("\t" * (MAX_EVENT_BYTES * 2 // 3))
    assert the_stream(stream_skill(events(f"{{data: {value}}}", more="format: sse\n")))
    [problem] = problems_in(
        stream_skill(events(f"{{data: {value}}}", more="format: [sse, ndjson]\n"))
    )
    assert problem.found.endswith("bytes framed as ndjson")


def test_framed_sizes_follow_the_wire() -> None:
    event = StreamEvent(Position("s.yaml", 1, 1), "two\nlines", "tok", "7", 0, "hi")
    sse = b": hi\nid: 7\nevent: tok\ndata: two\ndata: lines\n\n"
    assert framed_size(event, "two\nlines", "sse") == len(sse)
    ndjson = json.dumps({"event": "tok", "id": "7", "data": "two\nlines"}, separators=(",", ":"))
    assert framed_size(event, "two\nlines", "ndjson") == len(ndjson) + 1
    assert framed_size(StreamEvent(event.where, None, comment="hi"), None, "ndjson") == 0


def test_the_most_events_a_stream_may_have_load_and_one_more_does_not() -> None:
    stream = the_stream(stream_skill(events(f"{{repeat: {MAX_STREAM_EVENTS}, data: t}}")))
    assert len(stream.events) == MAX_STREAM_EVENTS
    [problem] = problems_in(
        stream_skill(events(f"{{repeat: {MAX_STREAM_EVENTS}, data: t}}", "{data: one more}"))
    )
    assert problem.path == "skills[0].invoke[0].stream.events[1]"
    assert problem.expected == f"at most {MAX_STREAM_EVENTS} events in a stream"


# -- positioned problems ----------------------------------------------------------------

S = "skills[0].invoke[0].stream"
"""Where a stream_skill's stream is."""

# (id, text, path, line, token on that line where the problem points, expected, found, hint)
CASES: list[tuple[str, str, str, int, str, str, str, str]] = [
    (
        "unknown stream key",
        stream_skill(events("{data: a}", more="heartbeet: 15s\n")),
        f"{S}.heartbeet",
        7,
        "heartbeet",
        "a known key",
        "unknown key 'heartbeet'",
        "did you mean 'heartbeat'?",
    ),
    (
        "unknown event key",
        stream_skill(events("{data: a, evnt: token}")),
        f"{S}.events[0].evnt",
        6,
        "evnt",
        "a known key",
        "unknown key 'evnt'",
        "did you mean 'event'?",
    ),
    (
        "unknown format",
        stream_skill(events("{data: a}", more="format: see\n")),
        f"{S}.format",
        7,
        "see",
        "one of sse, ndjson",
        "'see' (a string)",
        "did you mean 'sse'?",
    ),
    (
        "an event over the size limit",
        stream_skill(events("{data: " + "x" * MAX_EVENT_BYTES + "}")),
        f"{S}.events[0]",
        6,
        "{data",
        f"an event of at most {MAX_EVENT_BYTES} bytes framed",
        f"{MAX_EVENT_BYTES + 8} bytes framed as sse",
        "split its data over several events",
    ),
    (
        "an id with a line break",
        stream_skill(events('{data: a, id: "4\\n2"}')),
        f"{S}.events[0].id",
        6,
        '"4',
        "an id on one line",
        "a line break",
        "ends the id: field",
    ),
    (
        "an id with a NUL",
        stream_skill(events('{data: a, id: "4\\02"}')),
        f"{S}.events[0].id",
        6,
        '"4',
        "an id without NUL",
        "a NUL character",
        "ignores an id with NUL",
    ),
    (
        "an event name with a line break",
        stream_skill(events('{data: a, event: "to\\nken"}')),
        f"{S}.events[0].event",
        6,
        '"to',
        "an event name on one line",
        "a line break",
        "a line break ends the field",
    ),
    (
        "an id that is no text",
        stream_skill(events("{data: a, id: [1]}")),
        f"{S}.events[0].id",
        6,
        "[1]",
        "an id (a string or a whole number)",
        "a list of 1 item",
        "",
    ),
    (
        "an unknown fault",
        stream_skill(events("{data: a}", more="fault: {after: 1, kind: rest}\n")),
        f"{S}.fault.kind",
        7,
        "rest",
        "one of reset, close, stall",
        "'rest' (a string)",
        "did you mean 'reset'?",
    ),
    (
        "a zero rate",
        stream_skill(events("{repeat: 5, rate: 0/s, data: t}")),
        f"{S}.events[0].rate",
        6,
        "0/s",
        "events a second or a minute, more than 0",
        "'0/s' (a string)",
        "a rate is more than 0",
    ),
    (
        "a negative rate",
        stream_skill(events("{repeat: 5, rate: -5/s, data: t}")),
        f"{S}.events[0].rate",
        6,
        "-5/s",
        "events a second or a minute, more than 0",
        "'-5/s' (a string)",
        "a rate is more than 0",
    ),
    (
        "a rate without its unit",
        stream_skill(events("{repeat: 5, rate: 50, data: t}")),
        f"{S}.events[0].rate",
        6,
        "50",
        "events a second or a minute, more than 0",
        "50 (an integer)",
        "write 50/s",
    ),
    (
        "a rate slower than the longest pause",
        stream_skill(events("{repeat: 2, rate: 0.1/m, data: t}")),
        f"{S}.events[0].rate",
        6,
        "0.1/m",
        "a rate whose events are at most 300000 ms apart",
        "'0.1/m' (a string)",
        "refused, not clamped",
    ),
    (
        "rate on a single event",
        stream_skill(events("{data: a, rate: 5/s}")),
        f"{S}.events[0].rate",
        6,
        "rate",
        "rate: beside repeat:",
        "rate: on a single event",
        "waits delay: 100ms",
    ),
    (
        "rate and delay on a repeat",
        stream_skill(events("{repeat: 2, rate: 5/s, delay: 1s, data: t}")),
        f"{S}.events[0].rate",
        6,
        "rate",
        "rate: or delay:",
        "both",
        "keep one",
    ),
    (
        "id and id_from on a repeat",
        stream_skill(events("{repeat: 2, data: t, id: x, id_from: 1}")),
        f"{S}.events[0].id_from",
        6,
        "id_from",
        "id: (the same id each time) or id_from:",
        "both",
        "keep one",
    ),
    (
        "a negative delay",
        stream_skill(events("{data: a, delay: -100ms}")),
        f"{S}.events[0].delay",
        6,
        "-100ms",
        "a duration with its unit",
        "'-100ms' (a string)",
        "a duration is never negative",
    ),
    (
        "a delay without its unit",
        stream_skill(events("{data: a, delay: 100}")),
        f"{S}.events[0].delay",
        6,
        "100",
        "a duration with its unit",
        "100 (an integer)",
        "write the unit: 100ms or 100s",
    ),
    (
        "an event without data",
        stream_skill(events("{event: token}")),
        f"{S}.events[0]",
        6,
        "{event",
        "the key 'data' (or comment: alone)",
        "it missing",
        "never dispatched",
    ),
    (
        "a placeholder in data",
        stream_skill(events("{data: 'hi {{body.name}}'}")),
        f"{S}.events[0].data",
        6,
        "'hi",
        "a stream's fixed text, without {{...}} placeholders",
        "placeholders",
        "a later round's",
    ),
    (
        "more events than the limit",
        stream_skill(events(f"{{repeat: {MAX_STREAM_EVENTS + 1}, data: t}}")),
        f"{S}.events[0].repeat",
        6,
        str(MAX_STREAM_EVENTS + 1),
        f"a whole number from 1 to {MAX_STREAM_EVENTS}",
        f"{MAX_STREAM_EVENTS + 1} (an integer)",
        "",
    ),
    (
        "a fault after more events than there are",
        stream_skill(events("{data: a}", "{data: b}", more="fault: {after: 3, kind: reset}\n")),
        f"{S}.fault.after",
        8,
        "3",
        "at most 2: the events sent before it",
        "3 (an integer), with 2 events scripted",
        "",
    ),
    (
        "a malformed event after the last event",
        stream_skill(events("{data: a}", more="fault: {after: 1, kind: not_json}\n")),
        f"{S}.fault.after",
        7,
        "1",
        "at most 0: not_json is sent in place of event N+1",
        "1 (an integer), with 1 event scripted",
        "the event it replaces must be scripted",
    ),
    (
        "a malformed event in a stream of none",
        stream_skill("events: []\nend: {data: x}\nfault: {after: 0, kind: bad_utf8}\n"),
        f"{S}.fault.after",
        7,
        "0",
        "an event for bad_utf8 to replace",
        "0 (an integer), with 0 events scripted",
        "the event it replaces must be scripted",
    ),
    (
        "a duplicate id with no id before it",
        stream_skill(
            events("{data: a}", "{data: b}", more="fault: {after: 1, kind: duplicate_id}\n")
        ),
        f"{S}.fault.kind",
        8,
        "duplicate_id",
        "an event with an id among the first 1 before duplicate_id",
        "none: no id sent before it",
        "give the events ids",
    ),
    (
        "for: on a fault that is no stall",
        stream_skill(events("{data: a}", more="fault: {after: 1, kind: close, for: 5s}\n")),
        f"{S}.fault.for",
        7,
        "for",
        "for: only beside kind: stall",
        "for: beside kind: close",
        "",
    ),
    (
        "a fault without after",
        stream_skill(events("{data: a}", more="fault: {kind: reset}\n")),
        f"{S}.fault",
        7,
        "{kind",
        "the key 'after'",
        "it missing",
        "",
    ),
    (
        "a comment in an NDJSON-only stream",
        stream_skill(events("{data: a}", "{comment: hi}", more="format: ndjson\n")),
        f"{S}.events[1].comment",
        7,
        "comment",
        "comment: in a stream that may answer SSE",
        "comment: in an NDJSON-only stream",
        "NDJSON sends no comments",
    ),
    (
        "retry: in an NDJSON-only stream",
        stream_skill(events("{data: a}", more="format: ndjson\nretry: 1s\n")),
        f"{S}.retry",
        8,
        "retry",
        "retry: in a stream that may answer SSE",
        "retry: in an NDJSON-only stream",
        "NDJSON has no reconnection time",
    ),
    (
        "a format twice",
        stream_skill(events("{data: a}", more="format: [sse, sse]\n")),
        f"{S}.format[1]",
        7,
        "sse]",
        "each format once",
        "'sse' again",
        "the first is the default",
    ),
    (
        "a heartbeat of nothing",
        stream_skill(events("{data: a}", more="heartbeat: 0s\n")),
        f"{S}.heartbeat",
        7,
        "0s",
        "a duration with its unit",
        "'0s' (a string)",
        "a span of nothing never happens",
    ),
    (
        "an unknown error code at the end",
        stream_skill(events("{data: a}", more="end: {error: ENDPOINT_UNREACHABL}\n")),
        f"{S}.end.error",
        7,
        "ENDPOINT_UNREACHABL",
        "one of AUTH_REQUIRED",
        "'ENDPOINT_UNREACHABL' (a string)",
        "did you mean 'ENDPOINT_UNREACHABLE'?",
    ),
    (
        "retry advice on a code that is not retryable",
        stream_skill(
            events(
                "{data: a}",
                more="end: {error: PERMISSION_DENIED, retry: {suggested_delay_ms: 5}}\n",
            )
        ),
        f"{S}.end.retry",
        7,
        "{suggested",
        "no retry advice",
        "a mapping with keys suggested_delay_ms",
        "PERMISSION_DENIED is not retryable",
    ),
    (
        "an end with error and data",
        stream_skill(events("{data: a}", more="end: {error: ENDPOINT_UNREACHABLE, data: x}\n")),
        f"{S}.end.data",
        7,
        "data: x",
        "error: or data:",
        "both",
        "keep one",
    ),
    (
        "a result end without data",
        stream_skill(events("{data: a}", more="end: {event: result}\n")),
        f"{S}.end",
        7,
        "{event",
        "the key 'data' (a result), or error: CODE",
        "it missing",
        "",
    ),
    (
        "a Content-Type header",
        stream_skill(events("{data: a}", more="headers: {Content-Type: text/plain}\n")),
        f"{S}.headers.Content-Type",
        7,
        "Content-Type",
        "a header a stream may set",
        "Content-Type, which the stream's format sets",
        "format: sse sends text/event-stream",
    ),
    (
        "a framing header",
        stream_skill(events("{data: a}", more="headers: {Transfer-Encoding: chunked}\n")),
        f"{S}.headers.Transfer-Encoding",
        7,
        "Transfer-Encoding",
        "a header a step may set",
        "Transfer-Encoding, which the server sets",
        "remove it",
    ),
    (
        "an error status",
        stream_skill(events("{data: a}", more="status: 503\n")),
        f"{S}.status",
        7,
        "503",
        "a 2xx status (a stream is a success's answer)",
        "503 (an integer)",
        "an error before any event is a step of its own",
    ),
    (
        "a stream that sends nothing",
        stream_skill("events: []\n"),
        S,
        5,
        "events",
        "a stream with events: or an end:",
        "neither: it would send nothing",
        "add events",
    ),
    (
        "a stream that is no mapping",
        "skills:\n  - id: s\n    invoke: {stream: [a]}\n",
        "skills[0].invoke.stream",
        3,
        "[a]",
        "a stream: a mapping with events:",
        "a list of 1 item",
        "",
    ),
    *[
        (
            f"stream beside {key}",
            stream_skill(events("{data: a}"), step=f"{key}: {value}\n"),
            f"skills[0].invoke[0].{key}",
            7,
            key,
            "only times, delay and set_state beside stream",
            f"{key} as well",
            hint,
        )
        for key, value, hint in [
            ("fault", "CONNECTION_RESET_BY_PEER", "a stream's faults go inside it"),
            ("dribble", "{chunks: 2, over: 10}", "a stream's faults go inside it"),
            ("hang", "5", "a stream's faults go inside it"),
            ("proxy", "'http://127.0.0.1:1'", "a step forwards, or streams"),
            ("json", "{a: 1}", "its answer is the stream's events"),
            ("body_base64", "AA==", "its answer is the stream's events"),
            ("status", "200", "the stream's head goes inside it"),
            ("headers", "{X-A: b}", "the stream's head goes inside it"),
            ("after", "{error: EXECUTION_TIMEOUT}", "its answer is the stream's events"),
            ("keep_alive", "{close_after: true}", "its answer is the stream's events"),
        ]
    ],
]


@pytest.mark.parametrize(
    ("text", "path", "line", "token", "expected", "found", "hint"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_bad_stream_is_one_positioned_problem(
    text: str, path: str, line: int, token: str, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(text)
    assert problem.file == "s.yaml"
    assert_problem(problem, path, line, column(text, line, token), expected, found, hint)


def test_every_problem_of_a_stream_is_reported_at_once() -> None:
    text = stream_skill(
        events(
            '{data: a, id: "x\\ny"}',
            "{repeat: 2, rate: 0/s, data: t}",
            "{data: b, delay: -1s}",
            "{comment: hi}",
            more="format: ndjson\nheartbeat: 5\nend: {error: NOPE}\n"
            "fault: {after: 1, kind: rest}\n",
        )
    )
    paths = sorted(p.path for p in problems_in(text))
    assert paths == sorted(
        [
            f"{S}.events[0].id",
            f"{S}.events[1].rate",
            f"{S}.events[2].delay",
            f"{S}.events[3].comment",
            f"{S}.heartbeat",
            f"{S}.end.error",
            f"{S}.fault.kind",
        ]
    )


def test_a_bad_stream_and_a_bad_step_beside_it_in_a_sequence_are_reported_together() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              - stream: {events: [{data: a}], fault: {after: 1, kind: rest}}
              - {error: NOPE}
        """
    )
    paths = sorted(p.path for p in problems_in(text))
    assert paths == ["skills[0].invoke[0].stream.fault.kind", "skills[0].invoke[1].error"]


# -- the docs and the bundled scenario --------------------------------------------------


def _section() -> str:
    text = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    return text.split("\n## Streams\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_problem_lines_are_what_the_loader_says() -> None:
    shown = re.search(r"```text\n(streams\.yaml:.*?)```", _section(), re.DOTALL)
    assert shown is not None
    text = "name: streams\n" + stream_skill(
        events(
            '{data: a, id: "4\\n2"}',
            "{repeat: 5, rate: 0/s, data: t}",
            more="fault: {after: 9, kind: rest}\n",
        )
    ).replace("id: s", "id: tokens")
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "streams.yaml")
    assert [str(p) for p in caught.value.problems] == shown.group(1).splitlines()


def test_the_docs_tables_name_every_key_the_loader_reads() -> None:
    from mockskill.scenario import streams

    def first_column(heading: str) -> list[str]:
        rows = _section().split(f"\n{heading}\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
        return [row.split("|")[1].strip().strip("`") for row in rows]

    assert sorted(first_column("| key | meaning |")) == sorted(streams.STREAM_KEYS)
    event_keys = set(first_column("An event:\n\n| key | meaning |"))
    assert event_keys == {*streams.EVENT_KEYS, *streams.REPEAT_KEYS}
    assert all(f"`{key}`" in _section() for key in (*streams.END_KEYS, *streams.FAULT_KEYS))


def test_the_docs_fault_table_names_every_fault() -> None:
    page = (DOCS / "streams.md").read_text(encoding="utf-8")
    tables = page.split("\n| kind |")[1:]  # the faults that end a stream, then the others
    rows = [row for table in tables for row in table.split("\n\n", 1)[0].splitlines()[2:]]
    assert sorted(row.split("|")[1].strip().strip("`") for row in rows) == sorted(STREAM_FAULTS)


@pytest.fixture(scope="module")
def bundled() -> dict[str, Skill]:
    [scenario] = load_paths([bundled_path() / "streams.yaml"]).scenarios
    return {skill.id: skill for skill in scenario.skills}


def _streams(skill: Skill) -> list[Stream]:
    assert skill.invoke is not None
    found = [step.stream for step in skill.invoke.steps]
    assert all(stream is not None for stream in found)
    return [stream for stream in found if stream is not None]


def test_every_bundled_stream_answers_sse_by_default_and_ndjson_on_request(
    bundled: dict[str, Skill],
) -> None:
    assert sorted(bundled) == [
        "stream-cut",
        "stream-overload",
        "stream-resumable",
        "stream-stall",
        "stream-tokens",
    ]
    for skill in bundled.values():
        for stream in _streams(skill):
            assert stream.formats == ("sse", "ndjson")
        assert skill.invoke is not None
        assert skill.invoke.steps[0].reply.content_type == MEDIA_TYPES["sse"]


def test_the_bundled_tokens_are_200_at_50_a_second_then_a_result(bundled: dict[str, Skill]) -> None:
    [stream] = _streams(bundled["stream-tokens"])
    assert len(stream.events) == 200
    assert {e.name for e in stream.events} == {"token"}
    assert [e.id for e in stream.events] == [str(n) for n in range(1, 201)]
    assert sum(pauses(stream)) == 4000
    assert stream.end is not None
    assert stream.end.event.name == "result"
    assert stream.fault is None


def test_the_bundled_cut_is_reset_after_event_40_then_complete(bundled: dict[str, Skill]) -> None:
    skill = bundled["stream-cut"]
    first, second = _streams(skill)
    assert first.fault == StreamFault("reset", 40)
    assert first.events[39].id == "40"
    assert second.fault is None
    assert first.events == second.events
    assert first.end == second.end
    assert skill.invoke is not None
    assert [step.times for step in skill.invoke.steps] == [1, 1]
    assert skill.invoke.end == "last"


def test_the_bundled_stall_stops_after_event_10(bundled: dict[str, Skill]) -> None:
    [stream] = _streams(bundled["stream-stall"])
    assert stream.fault == StreamFault("stall", 10, 30_000)
    assert stream.heartbeat_ms is None  # a stall sends nothing at all


def test_the_bundled_overload_ends_with_a_retryable_error_event_once(
    bundled: dict[str, Skill],
) -> None:
    overloaded, recovered = _streams(bundled["stream-overload"])
    end = overloaded.end
    assert end is not None
    assert end.error_code == "ENDPOINT_UNREACHABLE"
    assert catalog.CATEGORIES[end.error_code].retryable
    assert end.event.data is not None
    error = json.loads(end.event.data)["error"]
    assert error["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 3}
    assert len(overloaded.events) == 20
    assert recovered.end is not None
    assert recovered.end.error_code is None


def test_the_bundled_resumable_is_reset_after_event_30_then_complete_both_resumable(
    bundled: dict[str, Skill],
) -> None:
    skill = bundled["stream-resumable"]
    first, second = _streams(skill)
    assert (first.resumable, second.resumable) == (True, True)
    assert first.fault == StreamFault("reset", 30)
    assert [e.id for e in first.events] == [str(n) for n in range(1, 61)]
    assert second.fault is None
    assert (first.events, first.end) == (second.events, second.end)
    assert skill.invoke is not None
    assert skill.invoke.end == "last"
