"""Stream steps served whole: a skill's invoke answering with a stream of events, met by
real clients (requests, httpx, aiohttp, curl), each attempt journalled.

The scenarios are built from the model (a loaded skill whose invoke steps are given a
``stream:``), so that these tests do not wait on the YAML loader's keys; what they check
is what a consumer sees on the wire and what the journal says of each attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import subprocess
import time

import aiohttp
import httpx
import pytest
import requests
from event_streams import parse_ndjson, parse_sse

from mockskill import Server, load_text
from mockskill.engine.entries import Entry
from mockskill.scenario.model import (
    ScenarioSet,
    Sequence,
    Stream,
    StreamEnd,
    StreamEvent,
    StreamFault,
)
from mockskill.scenario.source import Position

HERE = Position("streams.yaml", 1, 1)
INVOKE = "/skills/tokens/invoke"
LOOP_TICK = 0.002


def token(n: int, delay_ms: int = 0) -> StreamEvent:
    return StreamEvent(HERE, json.dumps({"text": f"t{n}"}), "token", str(n), delay_ms, is_json=True)


def tokens(count: int, delay_ms: int = 0) -> tuple[StreamEvent, ...]:
    return tuple(token(n, delay_ms) for n in range(1, count + 1))


RESULT = StreamEnd(StreamEvent(HERE, '{"answer":42}', "result", is_json=True))


def stream(**fields: object) -> Stream:
    fields.setdefault("events", tokens(5, delay_ms=10))
    fields.setdefault("end", RESULT)
    return Stream(HERE, **fields)  # type: ignore[arg-type]


def streaming(*streams: Stream, end: str = "last") -> ScenarioSet:
    """A scenario whose skill ``tokens`` answers its invokes with *streams*, one a request
    (then as *end* says)."""
    loaded = load_text("name: streams\nskills:\n  - id: tokens\n")
    scenario = loaded.scenarios[0]
    skill = scenario.skills[0]
    assert skill.invoke is not None
    plain = skill.invoke.steps[0]
    steps = tuple(dataclasses.replace(plain, stream=s) for s in streams)
    skill = dataclasses.replace(skill, invoke=Sequence(steps, end))  # type: ignore[arg-type]
    return ScenarioSet((dataclasses.replace(scenario, skills=(skill,)),))


def journal(server: Server, count: int, timeout: float = 5.0) -> list[Entry]:
    """The invokes journalled, waiting up to *timeout* s for *count* of them."""
    deadline = time.monotonic() + timeout
    while True:
        entries = [e for e in server.journal() if e.path == INVOKE]
        if len(entries) >= count or time.monotonic() > deadline:
            assert len(entries) == count, entries
            return entries
        time.sleep(0.01)


# -- real clients read the events ---------------------------------------------------


def test_requests_reads_the_events_line_by_line_on_time() -> None:
    with Server(streaming(stream(events=tokens(5, delay_ms=50)))) as server:
        begun = time.monotonic()
        lines, arrivals = [], []
        with requests.post(server.url + INVOKE, stream=True, timeout=5) as answer:
            assert answer.status_code == 200
            assert answer.headers["Content-Type"] == "text/event-stream; charset=utf-8"
            assert answer.headers["Cache-Control"] == "no-cache"
            for line in answer.iter_lines():
                lines.append(line + b"\n")
                if line.startswith(b"data: "):
                    arrivals.append(time.monotonic() - begun)
        events = parse_sse(b"".join(lines)).events
        assert [(e.type, e.last_event_id) for e in events] == [
            *(("token", str(n)) for n in range(1, 6)),
            ("result", "5"),
        ]
        assert events[-1].json() == {"answer": 42}
        for n, at in enumerate(arrivals[:5], start=1):
            assert 0.05 * n - LOOP_TICK <= at < 0.05 * n + 1.0
        (entry,) = journal(server, 1)
        assert entry.status == 200
        assert entry.stream is not None
        assert entry.stream == {
            "format": "sse",
            "events": 6,
            "last_id": "5",
            "ended": "complete",
            "fault": None,
            "fault_after": None,
            "duration_ms": entry.stream["duration_ms"],
            "asked_from": None,
            "resumed_from": None,
            "resumable": False,
            "retry_ms": None,
            "idle_bound_ms": 1000,
            "expected_ms": 250,
            "stalled_ms": 0,
        }
        assert 250 <= entry.stream["duration_ms"] < 2000


def test_httpx_streams_ndjson_when_its_accept_asks_for_it() -> None:
    both = stream(formats=("sse", "ndjson"))
    with Server(streaming(both)) as server, httpx.Client() as client:
        headers = {"Accept": "application/x-ndjson"}
        with client.stream("POST", server.url + INVOKE, headers=headers) as answer:
            assert answer.headers["content-type"] == "application/x-ndjson"
            lines = [json.loads(line) for line in answer.iter_lines() if line]
        assert lines[0] == {"event": "token", "id": "1", "data": {"text": "t1"}}
        assert lines[-1] == {"event": "result", "data": {"answer": 42}}
        sse = client.post(server.url + INVOKE, headers={"Accept": "*/*"})
        assert sse.headers["content-type"].startswith("text/event-stream")
        assert len(parse_sse(sse.content).events) == 6
        assert [e.stream["format"] for e in journal(server, 2) if e.stream] == ["ndjson", "sse"]


def test_aiohttp_reads_the_events_as_they_come() -> None:
    async def read(url: str) -> list[tuple[float, bytes]]:
        got = []
        async with aiohttp.ClientSession() as session, session.post(url) as answer:
            begun = time.monotonic()
            async for line in answer.content:
                got.append((time.monotonic() - begun, line))
        return got

    with Server(streaming(stream(events=tokens(3, delay_ms=100)))) as server:
        lines = asyncio.run(read(server.url + INVOKE))
        body = b"".join(line for _, line in lines)
        assert [e.type for e in parse_sse(body).events] == ["token"] * 3 + ["result"]
        first = next(at for at, line in lines if line.startswith(b"data:"))
        last = [at for at, line in lines if line.startswith(b"data:")][-1]
        # Spread out as sent (the third 200 ms after the first, a late first aside), not
        # read at once at the end.
        assert last - first >= 0.1


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_shows_the_stream() -> None:
    with Server(streaming(stream(events=tokens(2)))) as server:
        shown = subprocess.run(
            ["curl", "-sN", "-X", "POST", server.url + INVOKE],
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
        assert shown == (
            b'id: 1\nevent: token\ndata: {"text": "t1"}\n\n'
            b'id: 2\nevent: token\ndata: {"text": "t2"}\n\n'
            b'event: result\ndata: {"answer":42}\n\n'
        )


# -- faults after event N, as each client meets them ------------------------------------


def test_a_sequence_cut_at_event_n_then_complete_is_journalled_per_attempt() -> None:
    cut = stream(events=tokens(60), fault=StreamFault("reset", 40))
    whole = stream(events=tokens(60))
    with Server(streaming(cut, whole)) as server:
        seen: list[bytes] = []
        with (  # noqa: PT012 (what comes first, then the error)
            pytest.raises(requests.exceptions.ChunkedEncodingError),
            requests.post(server.url + INVOKE, stream=True, timeout=5) as answer,
        ):
            for line in answer.iter_lines():
                seen.append(line)
        assert b"id: 40" in seen
        assert b"id: 41" not in seen
        again = requests.post(server.url + INVOKE, timeout=5)  # the consumer re-issues
        assert parse_sse(again.content).events[-1].type == "result"
        first, second = journal(server, 2)
        assert first.stream is not None
        assert second.stream is not None
        assert (first.stream["events"], first.stream["last_id"], first.stream["ended"]) == (
            40,
            "40",
            "reset",
        )
        assert (first.stream["fault"], first.stream["fault_after"]) == ("reset", 40)
        assert (second.stream["events"], second.stream["ended"], second.stream["fault"]) == (
            61,
            "complete",
            None,
        )
        assert (first.step, second.step) == (0, 1)


def test_close_after_event_n_is_a_clean_end_without_the_terminal_event() -> None:
    with Server(streaming(stream(fault=StreamFault("close", 2)))) as server:
        answer = httpx.post(server.url + INVOKE)  # no error: the body ended cleanly
        events = parse_sse(answer.content).events
        assert [e.type for e in events] == ["token", "token"]  # and no result: the bug to catch
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert entry.stream["ended"] == "close"


def test_broken_chunking_is_a_client_error() -> None:
    with Server(streaming(stream(fault=StreamFault("broken_chunking", 3)))) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(server.url + INVOKE)
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert (entry.stream["events"], entry.stream["ended"]) == (3, "broken_chunking")


def test_a_stall_sends_no_byte_until_the_clients_read_timeout() -> None:
    with Server(streaming(stream(fault=StreamFault("stall", 1)))) as server:
        begun = time.monotonic()
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream("POST", server.url + INVOKE, timeout=0.3) as answer,
        ):
            for _ in answer.iter_bytes():
                pass
        assert time.monotonic() - begun >= 0.3 - LOOP_TICK
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert (entry.stream["events"], entry.stream["ended"]) == (1, "stall")
        assert entry.client_left is not None
        assert entry.stream["duration_ms"] >= 250  # how long the consumer held the stall


def test_a_stall_for_a_time_closes_without_the_last_chunk() -> None:
    stall = stream(fault=StreamFault("stall", 2, stall_ms=200))
    with Server(streaming(stall)) as server:
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            requests.post(server.url + INVOKE, timeout=5)
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert entry.stream["ended"] == "stall"
        assert entry.client_left is None


def test_an_error_event_mid_stream_carries_the_unified_body_and_its_retry_advice() -> None:
    overloaded = StreamEnd(StreamEvent(HERE, name="error"), error_code="ENDPOINT_UNREACHABLE")
    with Server(streaming(stream(events=tokens(3), end=overloaded))) as server:
        events = parse_sse(requests.post(server.url + INVOKE, timeout=5).content).events
        assert events[-1].type == "error"
        error = events[-1].json()["error"]
        assert error["code"] == "ENDPOINT_UNREACHABLE"
        assert error["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
        assert server.url in json.dumps(error)  # its URLs are this server's


def test_malformed_events_reach_the_client_and_the_stream_goes_on() -> None:
    with Server(streaming(stream(formats=("ndjson",), fault=StreamFault("not_json", 1)))) as server:
        body = requests.post(server.url + INVOKE, timeout=5).content
        lines = body.split(b"\n")
        with pytest.raises(json.JSONDecodeError):
            json.loads(lines[1])
        assert json.loads(lines[-2])["event"] == "result"
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert entry.stream["ended"] == "complete"
        assert (entry.stream["fault"], entry.stream["fault_after"]) == ("not_json", 1)


def test_heartbeats_keep_a_long_pause_alive_in_either_format() -> None:
    slow = stream(events=(token(1), token(2, delay_ms=350)), heartbeat_ms=100)
    both = dataclasses.replace(slow, formats=("sse", "ndjson"))
    with Server(streaming(both)) as server:
        parsed = parse_sse(requests.post(server.url + INVOKE, timeout=5).content)
        assert len(parsed.comments) == 3
        ndjson = requests.post(
            server.url + INVOKE, headers={"Accept": "application/x-ndjson"}, timeout=5
        ).content
        assert ndjson.split(b"\n")[:-1].count(b"") == 3  # empty lines between the objects
        assert len(parse_ndjson(ndjson)) == 3


# -- the server stays healthy ---------------------------------------------------------------


def test_the_client_leaving_mid_stream_is_journalled_and_the_server_goes_on() -> None:
    with Server(streaming(stream(events=tokens(100, delay_ms=20)))) as server:
        with requests.post(server.url + INVOKE, stream=True, timeout=5) as answer:
            lines = answer.iter_lines()
            while next(lines) != b"id: 3":
                pass
        (entry,) = journal(server, 1)
        assert entry.stream is not None
        assert entry.stream["ended"] == "client_left"
        assert 3 <= entry.stream["events"] < 20
        assert requests.get(server.url + "/skills", timeout=5).status_code == 200


@pytest.mark.parametrize(
    "accept",
    ["", ";;;,,,", "text/event-stream;q=zz", "x" * 4000, "application/x-ndjson;q=-1"],
    ids=["empty", "punctuation", "bad-quality", "long", "negative-quality"],
)
def test_a_hostile_accept_gets_the_default_stream_never_a_500(accept: str) -> None:
    both = stream(formats=("sse", "ndjson"), events=tokens(1))
    with Server(streaming(both)) as server:
        answer = requests.post(server.url + INVOKE, headers={"Accept": accept}, timeout=5)
        assert answer.status_code == 200
        assert answer.headers["Content-Type"].startswith("text/event-stream")
