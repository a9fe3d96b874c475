"""A provider's stream through mockskill's proxy: relayed as it comes, journalled, recorded.

The provider is a real streaming server (``tests/sse_upstream.py``: http.server, each
event a chunk flushed as it is written) behind a ``proxy`` step of a served scenario
(``mockskill.Server``, what ``mockskill serve`` runs); the consumer is httpx reading the
answer as a stream. A stream is relayed event by event (the consumer holds event 1
while the provider has not sent event 2), journalled as a stream (``Entry.stream``:
its events counted in the bytes relayed), and a recording makes a ``stream:`` step of
it that loads and replays the same events, in order, with their pauses.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from event_streams import Event, parse_ndjson, parse_sse
from sse_upstream import FLOOD, PAUSE, TOKENS, StreamingProvider

from mockskill import Server, load_text
from mockskill.scenario.model import ScenarioSet


@pytest.fixture
def provider() -> Iterator[StreamingProvider]:
    with StreamingProvider() as started:
        yield started


def proxied(url: str) -> str:
    return f"""
name: proxied-streams
skills:
  - {{id: tokens, proxy: {url}}}
  - {{id: gated, proxy: {url}}}
  - {{id: lines, proxy: {url}}}
  - {{id: cut, proxy: {{url: {url}, timeout_ms: 2000}}}}
  - {{id: whole, proxy: {url}}}
  - {{id: flood, proxy: {url}}}
"""


def stream_entries(server: Server) -> list[dict[str, Any]]:
    return [e.as_json() for e in server.journal() if e.stream is not None]


def fields(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.type, e.last_event_id, e.data) for e in events]


def test_the_consumer_reads_event_1_before_the_provider_sent_event_2(
    provider: StreamingProvider,
) -> None:
    with Server(proxied(provider.url)) as server, httpx.Client(timeout=10) as client:
        with client.stream("POST", server.invoke_url("gated")) as answer:
            assert answer.headers["content-type"] == "text/event-stream"
            assert answer.headers["x-provider"] == "streams"
            lines = answer.iter_lines()
            first = [next(lines) for _ in range(3)]
            assert first == ["id: 1", "data: first", ""]
            assert provider.second_sent_at is None  # the provider still holds event 2
            read_first_at = time.monotonic()
            provider.gate.set()
            rest = list(lines)
        assert provider.second_sent_at is not None
        assert read_first_at < provider.second_sent_at
        got = parse_sse("\n".join(first + rest).encode() + b"\n")
        assert fields(got.events) == [
            ("message", "1", "first"),
            ("message", "2", "second\ntwo lines"),
            ("result", "2", '{"done":true}'),
        ]
        (entry,) = stream_entries(server)
    assert entry["upstream"]["status"] == 200
    stream = entry["stream"]
    assert (stream["format"], stream["events"], stream["last_id"]) == ("sse", 3, "2")
    assert (stream["ended"], stream["fault"], stream["resumed_from"]) == ("complete", None, None)


def test_a_relayed_stream_is_journalled_with_its_events_counted_and_its_duration(
    provider: StreamingProvider,
) -> None:
    with Server(proxied(provider.url)) as server, httpx.Client(timeout=10) as client:
        with client.stream("POST", server.invoke_url("tokens")) as answer:
            arrivals = []
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                arrivals.append(time.monotonic())
        with client.stream("POST", server.invoke_url("lines")) as answer:
            lines = answer.read()
        tokens, ndjson = stream_entries(server)
    events = parse_sse(body).events
    assert [e.type for e in events] == ["token"] * TOKENS + ["result"]
    assert arrivals[-1] - arrivals[0] >= (TOKENS - 1) * PAUSE * 0.8  # as they came: spread
    assert tokens["stream"]["events"] == TOKENS + 1  # heartbeats (comments) not counted
    assert tokens["stream"]["last_id"] == str(TOKENS)  # the result has none: the last stays
    assert tokens["stream"]["duration_ms"] >= TOKENS * PAUSE * 1000 * 0.8
    assert parse_ndjson(lines)[-1] == {"event": "result", "data": "done"}
    assert ndjson["stream"]["format"] == "ndjson"
    assert (ndjson["stream"]["events"], ndjson["stream"]["last_id"]) == (4, "3")


def test_a_stream_the_provider_breaks_cuts_the_consumer_after_the_events_that_came(
    provider: StreamingProvider,
) -> None:
    with Server(proxied(provider.url)) as server, httpx.Client(timeout=10) as client:
        ending, got = read_all(client, server.invoke_url("cut"))
        (entry,) = stream_entries(server)
    assert ending == "cut"
    assert [e.data for e in parse_sse(got).events] == ["one", "two"]
    assert (entry["stream"]["events"], entry["stream"]["ended"]) == (2, "upstream_cut")
    assert entry["upstream"]["error"] is not None


def consume(base: str, client: httpx.Client) -> dict[str, Any]:
    """The run recorded and replayed: each stream read as a consumer reads it."""
    seen: dict[str, Any] = {}
    for skill in ("tokens", "gated", "lines"):
        began = time.monotonic()
        with client.stream("POST", f"{base}/skills/{skill}/invoke") as answer:
            body = answer.read()
            kind = answer.headers["content-type"].split(";")[0]
        took = time.monotonic() - began
        if kind == "application/x-ndjson":
            seen[skill] = (parse_ndjson(body), took)
        else:
            parsed = parse_sse(body)
            seen[skill] = ((parsed.retry, fields(parsed.events)), took)
    ending, body = read_all(client, f"{base}/skills/cut/invoke")
    seen["cut"] = (ending, fields(parse_sse(body).events))
    return seen


def read_all(client: httpx.Client, url: str) -> tuple[str, bytes]:
    """A stream's bytes as they came, and whether it ended ``whole`` or was ``cut``."""
    body = b""
    try:
        with client.stream("POST", url) as answer:
            for chunk in answer.iter_bytes():
                body += chunk
    except (httpx.RemoteProtocolError, httpx.ReadError):
        return "cut", body
    return "whole", body


def test_a_recorded_stream_replays_the_same_events_in_order_with_their_pauses(
    provider: StreamingProvider,
) -> None:
    provider.gate.set()  # (gated streams whole here)
    with Server(ScenarioSet()) as proxy, httpx.Client(timeout=10) as client:
        proxy.recording.start(provider.url)
        recorded = consume(proxy.url, client)
        text = proxy.recording.stop().written.text
    load_text(text, "recorded.yaml")  # what mockskill validate checks
    document = yaml.safe_load(text)
    skills = {skill["id"]: skill for skill in document["skills"]}
    (tokens,) = skills["tokens"]["invoke"]["steps"]
    events = tokens["stream"]["events"]
    assert "end" not in tokens["stream"]  # the provider's last event stays an event
    assert events[0] | {"delay": "?"} == {
        "event": "token",
        "id": "1",
        "data": {"text": "t1"},
        "delay": "?",
    }
    last = {key: value for key, value in events[-1].items() if key != "delay"}
    assert last == {"event": "result", "data": '{"answer": 42}'}  # kept as it came
    pauses = [int(e["delay"].removesuffix("ms")) for e in events[1:-1]]
    assert all(PAUSE * 1000 * 0.7 <= p <= 1000 for p in pauses), pauses
    assert tokens["stream"]["headers"] == {"X-Provider": "streams"}
    assert tokens["stream"]["retry"] == "1500ms"
    (cut,) = skills["cut"]["invoke"]["steps"]
    assert cut["stream"]["fault"] == {"after": 2, "kind": "reset"}
    assert "format" not in tokens["stream"]
    assert skills["lines"]["invoke"]["steps"][0]["stream"]["format"] == "ndjson"

    with Server(text) as replay, httpx.Client(timeout=10) as client:
        replayed = consume(replay.url, client)
    for skill in ("tokens", "gated", "lines"):
        assert replayed[skill][0] == recorded[skill][0], skill
    cut_after_two = ("cut", [("message", "1", "one"), ("message", "2", "two")])
    assert replayed["cut"] == recorded["cut"] == cut_after_two
    assert replayed["tokens"][1] >= TOKENS * PAUSE * 0.8  # the pauses played again


def test_no_delay_records_a_stream_without_its_pauses(provider: StreamingProvider) -> None:
    with Server(ScenarioSet()) as proxy, httpx.Client(timeout=10) as client:
        proxy.recording.start(provider.url, delays=False)
        client.post(f"{proxy.url}/skills/tokens/invoke")
        text = proxy.recording.stop().written.text
    (step,) = yaml.safe_load(text)["skills"][0]["invoke"]["steps"]
    assert "delay" not in step
    assert all("delay" not in event for event in step["stream"]["events"])
    assert len(step["stream"]["events"]) == TOKENS + 1


def test_a_stream_that_came_whole_with_its_head_is_journalled_as_a_stream_too(
    provider: StreamingProvider,
) -> None:
    with Server(proxied(provider.url)) as server, httpx.Client(timeout=10) as client:
        answer = client.post(server.invoke_url("whole"))
        (entry,) = stream_entries(server)
    assert [e.data for e in parse_sse(answer.content).events] == ["1", "2"]
    stream = entry["stream"]
    assert (stream["events"], stream["last_id"], stream["ended"]) == (2, "b", "complete")


PROVIDER_ERRORS = """
name: provider
skills:
  - id: denied
    invoke:
      stream:
        retry: 300ms
        events: [{repeat: 2, delay: 5ms, event: token, data: {text: tok}, id_from: 1}]
        end: {error: PERMISSION_DENIED}
  - id: overloaded
    invoke:
      stream:
        format: ndjson
        events: [{event: token, data: {text: tok}, id: "1"}]
        end: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 700, max_attempts: 2}}
"""


def test_a_relayed_stream_ending_in_an_error_event_is_that_errors_answer() -> None:
    # the provider is mockskill itself here: its error events are the unified body
    with (
        Server(PROVIDER_ERRORS) as provider,
        Server(
            proxied(provider.url)
            .replace("id: tokens", "id: denied")
            .replace("id: gated", "id: overloaded")
        ) as server,
    ):
        with httpx.Client(timeout=10) as client:
            client.post(server.invoke_url("denied"))
            client.post(server.invoke_url("overloaded"))
        denied, overloaded = server.journal()
    assert denied.error_code == "PERMISSION_DENIED"
    assert denied.stream is not None
    assert denied.stream["retry_ms"] == 300
    assert overloaded.error_code == "ENDPOINT_UNREACHABLE"
    assert overloaded.retry is not None
    assert (overloaded.retry.suggested_delay_ms, overloaded.retry.max_attempts) == (700, 2)


def test_mockskill_serve_relays_a_stream_as_it_comes_and_journals_it(
    provider: StreamingProvider, tmp_path: Path
) -> None:
    scenario = tmp_path / "proxied.yaml"
    scenario.write_text(proxied(provider.url), encoding="utf-8")
    command = [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--quiet"]
    process = subprocess.Popen(
        [*command, str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        base = re.search(r" at (http://\S+)", banner)
        assert base is not None, banner
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", f"{base[1]}/skills/gated/invoke") as answer:
                lines = answer.iter_lines()
                assert [next(lines) for _ in range(3)] == ["id: 1", "data: first", ""]
                assert provider.second_sent_at is None
                provider.gate.set()
                assert "data: second" in list(lines)
            journal = client.get(f"{base[1]}/__admin/journal").json()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    (entry,) = [e for e in journal["entries"] if e.get("stream")]
    assert (entry["stream"]["events"], entry["stream"]["ended"]) == (3, "complete")


def test_a_consumer_that_stops_reading_stops_the_provider_not_fills_mockskill(
    provider: StreamingProvider,
) -> None:
    with Server(proxied(provider.url)) as server, httpx.Client(timeout=10) as client:
        with client.stream("POST", server.invoke_url("flood")) as answer:
            next(answer.iter_bytes())  # one chunk read, then nothing
            time.sleep(0.5)
            held = provider.flooded
            time.sleep(0.3)
            assert provider.flooded - held < 8 * 1024 * 1024, held  # the provider waits
        # what is between them: the sockets' buffers and mockskill's 256 KiB, not the stream
        assert held < FLOOD // 4, held
