"""A resumable stream met by real clients: an attempt cut after event N, re-issued with
``Last-Event-ID``, continues after it — on the same server, or on another replica of a
shared store (nothing is stored per stream: the id names the event). Any other re-issue
starts over. Each attempt is journalled with the id it asked from and where it resumed.
"""

from __future__ import annotations

import time

import httpx
import pytest
import requests
from event_streams import parse_sse

from mockskill import Server, load_text
from mockskill.engine.entries import Entry
from mockskill.scenario.loader import bundled_path

INVOKE = "/skills/stream-resumable/invoke"
BUNDLED = bundled_path() / "streams.yaml"
FAST = """\
name: fast
skills:
  - id: fast
    invoke:
      stream:
        resumable: RESUMABLE
        events:
          - {repeat: 8, delay: 1ms, event: token, data: {text: tok}, id_from: 1}
        end: {data: {answer: 42}}
        fault: {after: 5, kind: reset}
"""


def fast(*, resumable: bool = True) -> Server:
    return Server(load_text(FAST.replace("RESUMABLE", str(resumable).lower()), "fast.yaml"))


def journal(server: Server, path: str, count: int, timeout: float = 5.0) -> list[Entry]:
    """The requests to *path* journalled, waiting up to *timeout* s for *count* of them."""
    deadline = time.monotonic() + timeout
    while True:
        entries = [e for e in server.journal() if e.path == path]
        if len(entries) >= count or time.monotonic() > deadline:
            assert len(entries) == count, entries
            return entries
        time.sleep(0.01)


def cut_attempt(client: httpx.Client, url: str, last_event_id: str | None = None) -> list[str]:
    """The ids of the events an attempt (with *last_event_id*, when given) delivered before
    it was cut."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    lines: list[str] = []
    with (  # noqa: PT012 (what comes first, then the error)
        pytest.raises(httpx.TransportError),
        client.stream("POST", url, json={}, headers=headers) as answer,
    ):
        assert answer.status_code == 200
        for line in answer.iter_lines():
            lines.append(line)
    return [line.removeprefix("id: ") for line in lines if line.startswith("id: ")]


def test_the_bundled_stream_cut_after_30_resumes_after_30_with_last_event_id() -> None:
    with Server(BUNDLED) as server, httpx.Client(timeout=5) as client:
        first = cut_attempt(client, server.url + INVOKE)
        assert first == [str(n) for n in range(1, 31)]
        again = client.post(server.url + INVOKE, json={}, headers={"Last-Event-ID": first[-1]})
        events = parse_sse(again.content).events
        assert [e.last_event_id for e in events if e.type == "token"] == [
            str(n) for n in range(31, 61)
        ]
        assert events[-1].type == "result"
        assert events[-1].json() == {"answer": 42, "tokens": 60}
        cut, resumed = journal(server, INVOKE, 2)
    assert cut.stream is not None
    assert resumed.stream is not None
    assert (cut.stream["events"], cut.stream["last_id"], cut.stream["ended"]) == (30, "30", "reset")
    assert (cut.stream["asked_from"], cut.stream["resumed_from"]) == (None, None)
    assert (resumed.stream["events"], resumed.stream["last_id"]) == (31, "60")
    assert (resumed.stream["ended"], resumed.stream["fault"]) == ("complete", None)
    assert (resumed.stream["asked_from"], resumed.stream["resumed_from"]) == ("30", "30")
    assert (cut.step, resumed.step) == (0, 1)


def test_an_attempt_cut_on_one_replica_resumes_on_another(redis_url: str) -> None:
    with (
        Server(BUNDLED, state=redis_url) as one,
        Server(BUNDLED, state=redis_url) as two,
        httpx.Client(timeout=5) as client,
    ):
        first = cut_attempt(client, one.url + INVOKE)
        assert first[-1] == "30"
        again = client.post(two.url + INVOKE, json={}, headers={"Last-Event-ID": "30"})
        events = parse_sse(again.content).events
        assert events[0].last_event_id == "31"
        assert [e.type for e in events][-1] == "result"
        entries = journal(two, INVOKE, 2)  # the shared journal: both replicas' attempts
    cut, resumed = sorted(entries, key=lambda e: e.started)
    assert cut.stream is not None
    assert resumed.stream is not None
    assert (cut.stream["ended"], cut.stream["last_id"]) == ("reset", "30")
    assert (resumed.stream["resumed_from"], resumed.stream["events"]) == ("30", 31)
    assert (cut.step, resumed.step) == (0, 1)


def test_a_resumed_attempt_before_the_fault_is_cut_where_the_whole_stream_is() -> None:
    with fast() as server, httpx.Client(timeout=5) as client:
        url = server.url + "/skills/fast/invoke"
        assert cut_attempt(client, url) == ["1", "2", "3", "4", "5"]
        # The same step again: resumed after 3, it is reset after event 5 of the stream.
        assert cut_attempt(client, url, "3") == ["4", "5"]
        # Resumed at event 5 (past the fault): the rest, and the end.
        done = client.post(url, json={}, headers={"Last-Event-ID": "5"})
        events = parse_sse(done.content).events
        assert [e.last_event_id for e in events] == ["6", "7", "8", "8"]
        assert events[-1].json() == {"answer": 42}
        _, cut, whole = journal(server, "/skills/fast/invoke", 3)
    assert cut.stream is not None
    assert whole.stream is not None
    assert (cut.stream["events"], cut.stream["ended"], cut.stream["fault_after"]) == (2, "reset", 5)
    assert (whole.stream["events"], whole.stream["ended"], whole.stream["fault"]) == (
        4,
        "complete",
        None,
    )


@pytest.mark.parametrize(
    ("resumable", "asked"), [(True, "99"), (False, "3")], ids=["unknown-id", "not-resumable"]
)
def test_any_other_re_issue_starts_over_and_the_journal_says_what_was_asked(
    resumable: bool, asked: str
) -> None:
    with fast(resumable=resumable) as server, httpx.Client(timeout=5) as client:
        url = server.url + "/skills/fast/invoke"
        assert cut_attempt(client, url, asked) == ["1", "2", "3", "4", "5"]
        [entry] = journal(server, "/skills/fast/invoke", 1)
    assert entry.stream is not None
    assert (entry.stream["asked_from"], entry.stream["resumed_from"]) == (asked, None)
    assert (entry.stream["events"], entry.stream["ended"]) == (5, "reset")


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("x" * 5000, "x" * 128 + "...[4872 more characters]"),
        ("3\u202e", "3%E2%80%AE"),  # a bidi override, sent as UTF-8: escaped, and no id
    ],
    ids=["long", "bidi-override"],
)
def test_a_hostile_last_event_id_starts_over_and_is_kept_cut_and_escaped(
    sent: str, kept: str
) -> None:
    with fast() as server:
        url = server.url + "/skills/fast/invoke"
        with (  # noqa: PT012 (what comes first, then the error)
            pytest.raises(requests.exceptions.ChunkedEncodingError),
            requests.post(
                url, headers={"Last-Event-ID": sent.encode()}, stream=True, timeout=5
            ) as answer,
        ):
            assert answer.status_code == 200
            answer.content  # noqa: B018 (read to the reset)
        [entry] = journal(server, "/skills/fast/invoke", 1)
    assert entry.stream is not None
    assert (entry.stream["asked_from"], entry.stream["resumed_from"]) == (kept, None)
    assert entry.stream["events"] == 5


def test_a_last_event_id_with_a_control_character_is_a_400_never_a_500() -> None:
    with fast() as server:
        url = server.url + "/skills/fast/invoke"
        answer = requests.post(url, headers={"Last-Event-ID": b"3\x1b[31m"}, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "MOCKSKILL_HTTP_400"


def test_resumed_after_the_terminal_event_the_stream_ends_at_once_with_nothing_sent() -> None:
    text = """\
name: done
skills:
  - id: done
    invoke:
      stream:
        resumable: true
        events: [{data: a, id: 1}]
        end: {data: {ok: true}, id: last}
"""
    with Server(load_text(text, "done.yaml")) as server:
        url = server.url + "/skills/done/invoke"
        answer = httpx.post(url, headers={"Last-Event-ID": "last"}, timeout=5)
        assert (answer.status_code, answer.content) == (200, b"")
        [entry] = journal(server, "/skills/done/invoke", 1)
    assert entry.stream is not None
    assert (entry.stream["events"], entry.stream["ended"]) == (0, "complete")
    assert entry.stream["resumed_from"] == "last"
