"""A relayed stream as a recording writes it: a ``stream:`` step the loader accepts.

Each event keeps its name, id and data (a JSON value when a replay would send the same
bytes, else the text as it came) and its measured pause; what a stream step cannot hold
makes the answer a plain one, said in a note.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml
from recording_helpers import exchange

from mockskill.engine.relayed_streams import RecordedStream, RelayedEvent
from mockskill.recording import write

SSE_TYPE = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))


def streamed(
    events: list[RelayedEvent],
    *,
    fmt: str = "sse",
    status: int = 200,
    ended: str = "complete",
    truncated: bool = False,
) -> Any:
    kind = "text/event-stream" if fmt == "sse" else "application/x-ndjson"
    base = exchange(
        "POST",
        "/skills/s/invoke",
        status=status,
        text=b"the bytes relayed",
        response_headers=(("Content-Type", kind), ("Cache-Control", "no-cache")),
        ms=500.0,
    )
    stream = RecordedStream(fmt, tuple(events), 12.4, ended, truncated)
    return dataclasses.replace(base, stream=stream)


def recorded(*exchanges: Any, delays: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    written = write(exchanges, delays=delays)
    skill = yaml.safe_load(written.text)["skills"][0]
    invoke = skill["invoke"]
    return (invoke["steps"] if isinstance(invoke, dict) else invoke), list(written.notes)


def test_an_sse_event_keeps_its_name_id_and_data_and_its_pause_from_the_one_before() -> None:
    steps, notes = recorded(
        streamed(
            [
                RelayedEvent('{"pct":10}', "progress", "1", 20.2),
                RelayedEvent('{"pct": 20}', None, None, 70.6),
                RelayedEvent("42", None, "3", 70.9),
                RelayedEvent('"quoted"', "result", None, 100.0),
            ]
        )
    )
    (step,) = steps
    assert step["delay"] == 12  # the head's latency
    assert step["stream"] == {
        "events": [
            {"event": "progress", "id": "1", "data": {"pct": 10}, "delay": "20ms"},
            {"data": '{"pct": 20}', "delay": "51ms"},  # not compact: sent as it came
            {"id": "3", "data": 42},
            {"event": "result", "data": '"quoted"', "delay": "29ms"},
        ]
    }
    assert notes == []


def test_ndjson_lines_in_mockskills_shape_are_read_back_into_events() -> None:
    steps, notes = recorded(
        streamed(
            [
                RelayedEvent('{"event":"token","id":4,"data":{"t":"a"}}', None, "4", 1.0),
                RelayedEvent('{"model":"m","response":"b"}', None, None, 2.0),
            ],
            fmt="ndjson",
        ),
        delays=False,
    )
    assert steps[0]["stream"] == {
        "format": "ndjson",
        "events": [
            {"event": "token", "id": "4", "data": {"t": "a"}},
            {"data": {"model": "m", "response": "b"}},
        ],
    }
    assert any("NDJSON lines not in mockskill's" in note for note in notes)


def test_a_stream_the_provider_broke_is_recorded_with_a_reset_after_its_events() -> None:
    steps, notes = recorded(
        streamed([RelayedEvent("one", None, "1", 1.0)], ended="upstream_cut"), delays=False
    )
    assert steps[0]["stream"]["fault"] == {"after": 1, "kind": "reset"}
    assert any("broke mid-way" in note for note in notes)


def test_what_a_stream_step_cannot_hold_makes_a_plain_answer_said_in_a_note() -> None:
    steps, notes = recorded(streamed([RelayedEvent("hello {{name}}", None, None, 1.0)]))
    assert "stream" not in steps[0]
    assert steps[0]["text"] == "the bytes relayed"
    assert any("cannot" in note for note in notes)


def test_an_error_status_with_a_stream_type_is_recorded_as_a_plain_answer() -> None:
    steps, _ = recorded(streamed([RelayedEvent("x", None, None, 1.0)], status=500))
    assert "stream" not in steps[0]


def test_a_stream_longer_than_the_recording_keeps_is_said_in_a_note() -> None:
    _, notes = recorded(streamed([RelayedEvent("x", None, None, 1.0)], truncated=True))
    assert any("longer than the recording keeps" in note for note in notes)


def test_a_secret_the_provider_echoed_in_an_event_is_scrubbed_from_the_step() -> None:
    echoed = streamed([RelayedEvent('{"token":"sk-live-0123456789"}', "auth", None, 1.0)])
    sent = dataclasses.replace(
        echoed, headers=(*echoed.headers, ("Authorization", "Bearer sk-live-0123456789"))
    )
    written = write([sent], delays=False)
    assert "sk-live-0123456789" not in written.text
    invoke = yaml.safe_load(written.text)["skills"][0]["invoke"]
    steps = invoke["steps"] if isinstance(invoke, dict) else invoke
    assert steps[0]["stream"]["events"][0]["event"] == "auth"
