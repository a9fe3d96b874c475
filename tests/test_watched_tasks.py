"""A task watched as a stream of its state changes, from outside (docs/tasks.md, "Watching a
task"): a ``GET`` of the status URL that asks for ``text/event-stream`` (or
``application/x-ndjson``) answers the task as it is, then one event per status change as
its life reaches it, and ends after the terminal one; a cancel or an input sent meanwhile
shows in the watch (at once on this server; at the next reading of the record on another
replica of a shared store); ``Last-Event-ID`` resumes after the change it names; a plain
poll is unchanged. Real servers on ephemeral ports, real clients (httpx streaming, Node's
fetch), the events read as a browser's EventSource reads them (tests/event_streams.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from event_streams import parse_ndjson, parse_sse
from redis_server import RedisServer

from mockskill import Server, load_text

SSE = {"Accept": "text/event-stream"}
SESSION = {"Mockskill-Session": "watch"}

REPORT = """
skills:
  - id: report
    task:
      poll_after: 100ms
      life:
        - {status: submitted, for: 500ms}
        - {status: working, for: 400ms, progress: [10, 60]}
        - {status: completed, json: {report: done}}
"""
"""Submitted for half a second (a watch sent at once finds it so, even on a loaded machine),
working for 400 ms, then completed: changes 0, 1 and 2."""
LONG = """
skills:
  - id: long
    task:
      poll_after: 10s
      watch: {heartbeat: 50ms}
      life:
        - {status: working, for: 60s}
        - {status: completed}
"""
"""Working for a minute, advising polls 10 s apart: only a cancel ends it within a test,
and a watch that shows it sooner than 10 s was told at once, not by re-reading."""


def submitted(server: Server, skill: str) -> str:
    """A new task of *skill*: its status URL (the 202's ``Location``)."""
    answer = httpx.post(f"{server.url}/skills/{skill}/invoke", headers=SESSION)
    assert answer.status_code == 202
    return answer.headers["Location"]


def watched(url: str, headers: dict[str, str] | None = None) -> tuple[httpx.Response, bytes]:
    """The watch of *url*, read to its end: the answer's head and its body."""
    with httpx.stream("GET", url, headers={**SSE, **(headers or {})}, timeout=10) as answer:
        return answer, answer.read()


def journal(server: Server) -> list[dict[str, Any]]:
    entries = httpx.get(f"{server.url}/__admin/journal", params={"session": "watch"}).json()
    return [e for e in entries["entries"] if e["task"] is not None]


def once_watched(
    server: Server, action: Callable[[], object], after: float = 0.1
) -> threading.Thread:
    """*action* on a thread, *after* seconds once *server* follows a watch (its request read
    and its first events sent), whatever the machine's load made of the time before."""

    def run() -> None:
        deadline = time.monotonic() + 20
        while not len(server.watches) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(after)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_watch_streams_the_task_from_submit_to_completed(serve: Any) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    answer, body = watched(url)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert answer.headers["cache-control"] == "no-cache"
    events = parse_sse(body).events
    assert [(e.type, e.last_event_id) for e in events] == [
        ("submitted", "0"),
        ("working", "1"),
        ("completed", "2"),
    ]
    tasks = [e.json()["task"] for e in events]
    assert tasks[1]["progress"] == 10  # as a poll just after the phase began answers
    assert tasks[2]["result"] == {"report": "done"}
    # Each event's data is what a poll answers then: the terminal one, exactly.
    assert httpx.get(url).json() == events[-1].json()
    assert "poll_after_ms" not in tasks[2]
    assert tasks[0]["poll_after_ms"] == 100


def test_a_watch_of_a_task_already_ended_sends_it_and_ends(serve: Any) -> None:
    server = serve(LONG)
    url = submitted(server, "long")
    assert httpx.delete(url).json()["task"]["status"] == "cancelled"  # (no settle: at once)
    _, body = watched(url)
    assert [(e.type, e.last_event_id) for e in parse_sse(body).events] == [("cancelled", "2")]


def test_a_cancel_on_this_server_shows_in_the_watch_at_once(serve: Any) -> None:
    server = serve(LONG)
    url = submitted(server, "long")
    cancel = once_watched(server, lambda: httpx.delete(url))
    began = time.monotonic()
    _, body = watched(url)
    cancel.join()
    took = time.monotonic() - began
    parsed = parse_sse(body)
    assert [(e.type, e.last_event_id) for e in parsed.events] == [
        ("working", "0"),
        ("cancelled", "2"),  # one past the life's last change (completed is 1)
    ]
    assert took < 5  # not at the next reading (10 s, the poll cadence): told at once
    assert parsed.comments  # heartbeats (every 50 ms) while it waited


def test_an_input_mid_watch_moves_the_life_on(serve: Any) -> None:
    server = serve("""
        skills:
          - id: asks
            task:
              poll_after: 10s
              life:
                - {status: working, for: 400ms}
                - {status: input_required, expects: {body: {/answer: {exists: true}}}}
                - {status: working, for: 100ms}
                - {status: completed}
        """)
    url = submitted(server, "asks")

    def give() -> None:  # once the task awaits it
        while httpx.get(url).json()["task"]["status"] != "input_required":
            time.sleep(0.05)
        httpx.post(url, json={"answer": 42})

    given = once_watched(server, give, after=0)
    _, body = watched(url)
    given.join()
    assert [(e.type, e.last_event_id) for e in parse_sse(body).events] == [
        ("working", "0"),
        ("input_required", "1"),
        ("working", "2"),
        ("completed", "3"),
    ]


def test_last_event_id_resumes_after_the_change_it_names(serve: Any) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    _, body = watched(url, {"Last-Event-ID": "0"})
    assert [e.last_event_id for e in parse_sse(body).events] == ["1", "2"]
    # An id that names no change: the watch starts with the task as it is.
    _, body = watched(url, {"Last-Event-ID": "banana"})
    assert [e.last_event_id for e in parse_sse(body).events] == ["2"]
    # After the terminal change: nothing is left to send.
    answer, body = watched(url, {"Last-Event-ID": "2"})
    assert answer.status_code == 200
    assert parse_sse(body).events == []


def test_a_watch_in_json_lines(serve: Any) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    headers = {"Accept": "application/x-ndjson"}
    with httpx.stream("GET", url, headers=headers, timeout=10) as answer:
        assert answer.headers["content-type"] == "application/x-ndjson"
        lines = parse_ndjson(answer.read())
    assert [(line["event"], line["id"]) for line in lines] == [
        ("submitted", "0"),
        ("working", "1"),
        ("completed", "2"),
    ]
    assert lines[-1]["data"]["task"]["status"] == "completed"


@pytest.mark.parametrize(
    "accept",
    [None, "*/*", "application/json", "application/json, text/event-stream", "text/*"],
    ids=["none", "any", "json", "json-or-sse", "text-any"],
)
def test_a_poll_that_does_not_ask_for_a_stream_by_name_is_a_plain_poll(
    serve: Any, accept: str | None
) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    answer = httpx.get(url, headers={} if accept is None else {"Accept": accept})
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["task"]["status"] == "submitted"
    assert journal(server)[-1]["task"]["action"] == "poll"


def test_an_unknown_task_is_the_404_a_poll_gets(serve: Any) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    made_up = url[: url.rindex(".") + 1] + "0123456789"
    watch = httpx.get(made_up, headers=SSE)
    poll = httpx.get(made_up)
    assert watch.status_code == poll.status_code == 404
    assert watch.json() == poll.json()
    assert watch.json()["error"]["code"] == "TASK_NOT_FOUND"


def test_a_skill_can_opt_out_of_watches(serve: Any) -> None:
    server = serve("""
        skills:
          - id: report
            task:
              watch: false
              life:
                - {status: working, for: 1s}
                - {status: completed}
        """)
    url = submitted(server, "report")
    answer = httpx.get(url, headers=SSE)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["task"]["status"] == "working"


def test_a_watch_is_journalled_as_a_stream_attempt_and_is_no_poll(serve: Any) -> None:
    server = serve(REPORT)
    url = submitted(server, "report")
    watched(url)
    httpx.get(url)  # a poll at once after the watch: not too soon, the watch advised no wait
    _submit, watch, poll = journal(server)
    assert watch["task"]["action"] == "watch"
    assert watch["task"]["status"] == "completed"  # the last change it sent
    stream = watch["stream"]
    assert stream["format"] == "sse"
    assert (stream["events"], stream["last_id"], stream["ended"]) == (3, "2", "complete")
    assert stream["watch"] == watch["task"]["id"]
    assert poll["task"]["action"] == "poll"
    rules = {f["rule"] for f in server.report(session="watch")["sessions"][0]["findings"]}
    assert "poll-too-soon" not in rules
    assert "task-abandoned" not in rules


def test_a_watch_left_and_watched_again_without_last_event_id_is_no_resume_ignored(
    serve: Any,
) -> None:
    server = serve(LONG)
    url = submitted(server, "long")
    with httpx.stream("GET", url, headers=SSE, timeout=10) as answer:
        for line in answer.iter_lines():
            if line.startswith("id:"):
                break  # the consumer leaves after the first event
    time.sleep(0.1)
    httpx.delete(url)
    _, body = watched(url)
    assert [e.type for e in parse_sse(body).events] == ["cancelled"]
    time.sleep(0.1)
    left = journal(server)[1]
    assert left["stream"]["ended"] == "client_left"
    rules = {f["rule"] for f in server.report(session="watch")["sessions"][0]["findings"]}
    assert "resume-ignored" not in rules
    assert "gave-up-despite-progress" not in rules


def test_a_cancel_on_another_replica_shows_at_the_next_reading(redis_url: str) -> None:
    text = """
skills:
  - id: long
    task:
      poll_after: 100ms
      watch: {heartbeat: 50ms}
      life:
        - {status: working, for: 60s}
        - {status: completed}
"""
    with (
        Server(load_text(text, "a.yaml"), state=redis_url) as one,
        Server(load_text(text, "a.yaml"), state=redis_url) as two,
    ):
        url = submitted(one, "long")
        on_two = two.url + url[url.index("/skills/") :]
        cancel = once_watched(one, lambda: httpx.delete(on_two), after=0.2)
        _, body = watched(url)
        cancel.join()
        events = parse_sse(body).events
        assert [(e.type, e.last_event_id) for e in events] == [
            ("working", "0"),
            ("cancelled", "2"),
        ]
        assert events[-1].json()["task"]["status_url"] == url  # the watch's replica's URL
        # Watched on the second replica after the cancel: the same task, the same end.
        _, body = watched(on_two, {"Last-Event-ID": "0"})
        assert [e.type for e in parse_sse(body).events] == ["cancelled"]
        entries = httpx.get(f"{two.url}/__admin/journal", params={"session": "watch"}).json()
        watches = [e for e in entries["entries"] if (e["task"] or {}).get("action") == "watch"]
        assert len(watches) == 2
        assert json.dumps(watches)  # (journalled in the shared store, either replica's)


def test_a_stopping_server_ends_its_watches_at_once_journalled_stopped() -> None:
    server = Server(LONG, grace=60).start()
    url = submitted(server, "long")
    ended: list[BaseException] = []

    def watch() -> None:
        try:
            watched(url)
        except httpx.HTTPError as exc:  # the connection cut: the server went away
            ended.append(exc)

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.2)
    began = time.monotonic()
    server.stop()
    watcher.join()
    assert time.monotonic() - began < 30  # not the 60 s grace: a watch has no end to wait for
    assert len(ended) == 1
    (entry,) = [e for e in server.journal() if e.stream is not None]
    assert entry.stream["ended"] == "stopped"


def test_the_wsgi_app_answers_a_watch_as_a_poll() -> None:
    from werkzeug.test import Client

    from mockskill import create_app
    from mockskill.engine.engine import Engine
    from mockskill.engine.state import State

    engine = Engine(load_text(REPORT, "w.yaml"), State())
    client = Client(create_app(engine))
    location = client.post("/skills/report/invoke").headers["Location"]
    answer = client.get(location, headers=SSE)
    assert answer.status_code == 200
    assert answer.content_type == "application/json"
    assert answer.get_json()["task"]["status"] == "submitted"


def test_leaving_a_watch_is_no_failed_attempt_to_retry(serve: Any) -> None:
    server = serve(LONG)
    url = submitted(server, "long")
    for _ in range(4):  # watched, left after the first event, watched again at once
        with httpx.stream("GET", url, headers=SSE, timeout=10) as answer:
            for line in answer.iter_lines():
                if line.startswith("id:"):
                    break
    httpx.delete(url)
    deadline = time.monotonic() + 5
    while len(journal(server)) < 6 and time.monotonic() < deadline:
        time.sleep(0.02)  # (a watch is journalled when the server sees the client gone)
    assert [e["stream"]["ended"] for e in journal(server) if e["stream"]] == ["client_left"] * 4
    rules = {f["rule"] for f in server.report(session="watch")["sessions"][0]["findings"]}
    assert "retry-too-soon" not in rules
    assert "too-many-attempts" not in rules


NODE = shutil.which("node")
READER = Path(__file__).resolve().parent / "node" / "stream_reader.mjs"


@pytest.mark.skipif(
    NODE is None and os.environ.get("MOCKSKILL_REQUIRE_NODE") != "1",
    reason="node is not installed",
)
def test_nodes_fetch_watches_a_task_to_its_end(serve: Any) -> None:
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    server = serve("""
        skills:
          - id: counted
            task:
              poll_after: 100ms
              life:
                - {status: working, polls: 1}
                - {status: completed, json: {done: true}}
        """)
    url = submitted(server, "counted")
    reader = subprocess.Popen(
        [NODE, str(READER), url, "20000", "text/event-stream"], stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while not len(server.watches) and time.monotonic() < deadline:
        time.sleep(0.02)  # (node's start: the watch is followed once its request is read)
    httpx.get(url)  # the first poll answers working, the second ends the phase
    httpx.get(url)
    shown, _ = reader.communicate(timeout=30)
    outcome = json.loads(shown)
    assert "error" not in outcome  # the body ended: fetch's for-await loop is over
    events = parse_sse(outcome["text"].encode()).events
    assert [(e.type, e.last_event_id) for e in events] == [("working", "0"), ("completed", "1")]
    assert events[-1].json()["task"]["result"] == {"done": True}


def test_a_watch_rides_out_an_unreachable_store_and_ends_when_the_task_is_gone(
    redis_server: RedisServer, redis_url: str
) -> None:
    with Server(load_text(LONG.replace("10s", "100ms"), "a.yaml"), state=redis_url) as server:
        url = submitted(server, "long")

        def outage() -> None:  # Redis away for a few readings, back empty (no persistence)
            redis_server.stop()
            time.sleep(0.4)
            redis_server.start()

        restarted = once_watched(server, outage)
        answer, body = watched(url)
        restarted.join()
        assert answer.status_code == 200
        parsed = parse_sse(body)
        assert [(e.type, e.last_event_id) for e in parsed.events] == [("working", "0")]
        assert parsed.comments  # heartbeats went on while the store could not be read
        assert server.watches.store_failures > 0
