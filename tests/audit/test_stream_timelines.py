"""A session's stream attempts as the report draws them: a bar each (``session["streams"]``).

Hand-made journal entries (``Entry.stream``, as the transport records a stream step's
answer): each attempt is a bar from its head to its end, with the events it sent, its last
id and how it ended; a re-issue is the next attempt of its skill; the findings whose
journal ids name an attempt are numbered on it as the report lists them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema

from mockskill.audit import report
from mockskill.audit.timelines import STREAMS_SHOWN, stream_timelines
from mockskill.engine.entries import Entry

T0 = 1_000_000.0


def attempt(
    n: int, at: float, ms: float, ended: str, events: int, skill: str = "stream-cut", **more: Any
) -> Entry:
    """Journal entry *n*: a stream whose head went at +*at* s (the request 5 ms before),
    that ran *ms* and *ended* after *events* events (ids 1..events)."""
    record = {
        "format": "sse",
        "events": events,
        "last_id": str(events) if events else None,
        "ended": ended,
        "fault": ended if ended in ("reset", "close", "stall", "broken_chunking") else None,
        "fault_after": events if ended in ("reset", "close", "stall") else None,
        "duration_ms": ms,
        "resumed_from": None,
        **more,
    }
    return Entry(
        n, T0 + at - 0.005, T0 + at + ms / 1000, "s", "POST", f"/skills/{skill}/invoke", 200,
        "invoke", skill=skill, headers_sent=T0 + at, executed=True, stream=record,
    )  # fmt: skip


def test_each_attempt_is_a_bar_from_its_head_to_where_it_ended() -> None:
    cut = attempt(1, 0, 800, "reset", 40)
    whole = attempt(2, 1, 1200, "complete", 61, last_id="60")
    rows = stream_timelines([whole, cut], [])  # in order of start, whatever the journal's
    assert [(r["id"], r["attempt"], r["ended"], r["broke"]) for r in rows] == [
        (1, 1, "reset", True),
        (2, 2, "complete", False),
    ]
    first, second = rows
    times = [round((first[k] - T0) * 1000) for k in ("started", "head", "finished")]
    assert times == [-5, 0, 800]  # the request, its head, the stream's end (ms)
    assert (first["events"], first["last_id"], first["fault"], first["fault_after"]) == (
        40,
        "40",
        "reset",
        40,
    )
    assert (second["events"], second["last_id"], second["duration_ms"]) == (61, "60", 1200)


def test_each_ending_is_kept_as_the_journal_says_it() -> None:
    endings = ["complete", "reset", "close", "stall", "client_left", "gave_up"]
    rows = stream_timelines(
        [attempt(n, n, 100, ended, 10, skill=f"s{n}") for n, ended in enumerate(endings, 1)], []
    )
    assert [r["ended"] for r in rows] == endings
    assert [r["broke"] for r in rows] == [False, True, True, True, True, True]
    # Each skill's first attempt: a re-issue is counted per skill and endpoint.
    assert {r["attempt"] for r in rows} == {1}


def test_a_watch_the_consumer_left_did_not_break_and_one_the_server_cut_did() -> None:
    left = attempt(1, 0, 300, "client_left", 1, watch="T.0.a", last_id="0")
    stopped = attempt(2, 1, 300, "stopped", 1, watch="T.0.a", last_id="0")
    rows = stream_timelines([left, stopped], [])
    assert [(r["ended"], r["broke"]) for r in rows] == [("client_left", False), ("stopped", True)]


def test_what_the_stream_rules_weigh_is_kept_where_the_journal_has_it() -> None:
    stalled = attempt(
        1, 0, 900, "stall", 10, stalled_ms=800, idle_bound_ms=300, expected_ms=2000,
        retry_ms=1000, asked_from="7", resumed_from="7",
    )  # fmt: skip
    overloaded = attempt(2, 1, 400, "complete", 21)._replace(error_code="ENDPOINT_UNREACHABLE")
    first, second = stream_timelines([stalled, overloaded], [])
    assert (first["stalled_ms"], first["idle_bound_ms"], first["expected_ms"]) == (800, 300, 2000)
    assert (first["retry_ms"], first["asked_from"], first["resumed_from"]) == (1000, "7", "7")
    # An error end is a complete stream whose entry carries the code, as an error answer's.
    assert (second["ended"], second["broke"], second["error_code"]) == (
        "complete",
        False,
        "ENDPOINT_UNREACHABLE",
    )
    # A record without them (an older journal's): None, not missing.
    assert second["stalled_ms"] is None
    assert second["asked_from"] is None


def test_a_head_time_not_kept_is_the_end_less_the_duration() -> None:
    entry = attempt(1, 0, 250, "client_left", 3)._replace(headers_sent=None)
    [row] = stream_timelines([entry], [])
    assert round((row["head"] - T0) * 1000) == 0


def test_entries_that_were_no_stream_are_no_bar() -> None:
    plain = Entry(1, T0, T0 + 0.01, "s", "POST", "/skills/echo/invoke", 200, "invoke", "echo")
    assert stream_timelines([plain], []) == []


def test_findings_naming_an_attempts_entry_are_numbered_on_it() -> None:
    entries = [attempt(1, 0, 800, "reset", 40), attempt(2, 1, 1200, "complete", 61)]
    findings = [
        {"rule": "retry-too-soon", "attempts": [7, 8]},  # another chain's
        {"rule": "resume-ignored", "attempts": [1, 2]},
        {"rule": "duplicate-execution", "attempts": [2]},
    ]
    rows = stream_timelines(entries, findings)
    assert [r["findings"] for r in rows] == [[2], [2, 3]]


def test_a_session_of_many_attempts_shows_the_newest() -> None:
    entries = [attempt(n, n, 10, "complete", 1) for n in range(1, STREAMS_SHOWN + 6)]
    rows = stream_timelines(entries, [])
    assert len(rows) == STREAMS_SHOWN
    assert rows[0]["id"] == 6
    assert rows[-1]["attempt"] == STREAMS_SHOWN + 5


def test_the_report_gives_each_session_its_streams_as_its_document_says() -> None:
    entries = [
        attempt(1, 0, 800, "reset", 40),
        attempt(2, 1, 1200, "complete", 61, stalled_ms=0, idle_bound_ms=1000, expected_ms=1200),
    ]
    [session] = report(entries, now=T0 + 10)["sessions"]
    assert [r["id"] for r in session["streams"]] == [1, 2]
    assert session["tasks"] == []
    document = json.loads(
        resources.files("mockskill.admin").joinpath("openapi.json").read_text(encoding="utf-8")
    )
    schema = _session_schema(document)["properties"]["streams"]
    jsonschema.validate(json.loads(json.dumps(session["streams"])), schema)


def _session_schema(node: Any) -> dict[str, Any]:
    """The schema of a report's session in the admin API's document (the one with tasks)."""
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict) and "tasks" in properties and "chains" in properties:
            return node
        children: list[Any] = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        children = []
    for child in children:
        found = _session_schema(child)
        if found:
            return found
    return {}
