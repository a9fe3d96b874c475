"""The audit grades how real consumers recover from streams that go wrong.

A real server plays the stream steps of one scenario (loaded from YAML: ``idle_bound:``
and ``expected:`` included); real clients (requests, httpx) consume them as a consumer
with each bug does, and as a correct one does; the report of each session must hold
exactly the findings of its bug. Pauses are tens of milliseconds and ``retry:`` advice
a few hundred, so that the whole file takes seconds.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import requests

from mockskill import Server, bundled_path, load_paths, load_text
from mockskill.audit import report
from mockskill.engine.entries import Entry

SCENARIO = """
name: stream-audit
skills:
  - id: resumable
    invoke:
      - stream:
          resumable: true
          retry: 100ms
          events: [{repeat: 20, delay: 10ms, event: token, data: {t: x}, id_from: 1}]
          end: {data: {answer: 42}}
          fault: {after: 5, kind: reset}
      - stream:
          retry: 100ms
          events: [{repeat: 3, delay: 10ms, event: token, data: {t: x}, id_from: 6}]
          end: {data: {answer: 42}}
  - id: cut
    invoke:
      - stream:
          retry: 300ms
          events: [{repeat: 20, delay: 10ms, event: token, data: {t: x}, id_from: 1}]
          end: {data: {answer: 42}}
          fault: {after: 5, kind: close}
      - stream:
          events: [{repeat: 3, delay: 10ms, event: token, data: {t: x}, id_from: 1}]
          end: {data: {answer: 42}}
  - id: overload
    invoke:
      - stream:
          events: [{repeat: 3, delay: 10ms, event: token, data: {t: x}, id_from: 1}]
          end: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 400, max_attempts: 3}}
      - stream:
          events: [{data: {t: x}}]
          end: {data: {answer: 42}}
  - id: denied
    invoke:
      stream:
        events: [{data: {t: x}}]
        end: {error: PERMISSION_DENIED}
  - id: stall
    invoke:
      stream:
        idle_bound: 300ms
        events: [{repeat: 3, delay: 10ms, event: token, data: {t: x}, id_from: 1}]
        end: {data: {answer: 42}}
        fault: {after: 3, kind: stall, for: 1500ms}
  - id: long
    invoke:
      stream:
        expected: 2s
        heartbeat: 100ms
        events: [{repeat: 40, delay: 50ms, event: token, data: {t: x}, id_from: 1}]
        end: {data: {answer: 42}}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server(load_text(SCENARIO, "stream-audit.yaml")) as served:
        yield served


def invoke(skill: str) -> str:
    return f"/skills/{skill}/invoke"


def session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def rules(server: Server, name: str, count: int) -> list[str]:
    """The rules of the findings on session *name*, once its *count* requests are
    journalled (a stream's entry is made when it ends: the server sees a client leave a
    moment after it does)."""
    deadline = time.monotonic() + 5
    while True:
        entries = [e for e in server.journal() if e.session == name]
        if len(entries) >= count or time.monotonic() > deadline:
            assert len(entries) == count, entries
            break
        time.sleep(0.01)
    (found,) = report(entries, sessions=[name])["sessions"]
    return [f["rule"] for f in found["findings"]]


def entries_of(server: Server, name: str) -> list[Entry]:
    return [e for e in server.journal() if e.session == name]


def read_sse(answer: requests.Response) -> list[str]:
    """The ids of the events read from *answer* until it ends or breaks."""
    ids = []
    try:
        for line in answer.iter_lines():
            if line.startswith(b"id: "):
                ids.append(line[4:].decode())
    except requests.exceptions.RequestException:
        pass  # the cut: what a consumer's stream loop meets
    return ids


def post(url: str, name: str, **headers: str) -> requests.Response:
    return requests.post(
        url, headers={"Mockskill-Session": name, **headers}, stream=True, timeout=(5, 5)
    )


# -- resume-ignored ----------------------------------------------------------------------


@pytest.mark.parametrize("resumes", [False, True])
def test_a_cut_resumable_stream_is_re_requested_with_last_event_id(
    server: Server, resumes: bool
) -> None:
    name = session()
    key = {"Idempotency-Key": "op-1"}
    with post(server.url + invoke("resumable"), name, **key) as first:
        seen = read_sse(first)
    # Ids 1 to 5 went before the reset (an RST may drop the last ones the client had not read).
    assert seen
    assert seen == [str(n) for n in range(1, len(seen) + 1)]
    time.sleep(0.2)  # the retry: advice, 100 ms
    resume = {"Last-Event-ID": seen[-1]} if resumes else {}
    with post(server.url + invoke("resumable"), name, **key, **resume) as second:
        read_sse(second)
    assert rules(server, name, 2) == ([] if resumes else ["resume-ignored"])


# -- duplicate-execution -----------------------------------------------------------------


@pytest.mark.parametrize("keyed", [False, True])
def test_a_cut_post_stream_re_issued_without_its_key_ran_twice(server: Server, keyed: bool) -> None:
    name = session()
    key = {"Idempotency-Key": "op-1"} if keyed else {}
    with post(server.url + invoke("cut"), name, **key) as first:
        assert len(read_sse(first)) == 5  # then closed: no terminal event
    time.sleep(0.4)
    with post(server.url + invoke("cut"), name, **key) as second:
        read_sse(second)
    assert rules(server, name, 2) == ([] if keyed else ["duplicate-execution"])
    (cut, _) = entries_of(server, name)
    assert cut.stream is not None
    assert cut.stream["ended"] == "close"


# -- retry-too-soon ----------------------------------------------------------------------


def test_reconnecting_at_once_after_retry_is_retry_too_soon(server: Server) -> None:
    name = session()
    key = {"Idempotency-Key": "op-1"}
    with post(server.url + invoke("cut"), name, **key) as first:
        read_sse(first)
    with post(server.url + invoke("cut"), name, **key) as second:  # the retry: was 300 ms
        read_sse(second)
    assert rules(server, name, 2) == ["retry-too-soon"]


@pytest.mark.parametrize("waits", [0.0, 0.45])
def test_an_error_events_advice_is_honoured_or_retry_too_soon(server: Server, waits: float) -> None:
    name = session()
    with httpx.Client(headers={"Mockskill-Session": name, "Idempotency-Key": "op-1"}) as client:
        with client.stream("POST", server.url + invoke("overload")) as first:
            body = b"".join(first.iter_bytes())
        assert b"event: error" in body
        assert b'"suggested_delay_ms": 400' in body
        time.sleep(waits)
        with client.stream("POST", server.url + invoke("overload")) as second:
            b"".join(second.iter_bytes())
    assert rules(server, name, 2) == ([] if waits else ["retry-too-soon"])
    overloaded, _ = entries_of(server, name)
    assert (overloaded.status, overloaded.error_code) == (200, "ENDPOINT_UNREACHABLE")
    assert overloaded.retry is not None
    assert overloaded.retry.suggested_delay_ms == 400


# -- non-retryable-retried ---------------------------------------------------------------


def test_a_permission_denied_error_event_re_issued_unchanged(server: Server) -> None:
    name = session()
    for _ in range(2):
        with post(server.url + invoke("denied"), name, Authorization="Bearer t1") as answer:
            read_sse(answer)
        time.sleep(0.1)
    assert rules(server, name, 2) == ["non-retryable-retried"]
    counted = report(entries_of(server, name), sessions=[name])["sessions"][0]["coverage"]
    assert counted["categories"]["PERMISSION_DENIED"] == 2  # error events, by category


# -- stall-not-detected ------------------------------------------------------------------


@pytest.mark.parametrize("idle_timeout", [None, 0.25])
def test_a_stall_is_left_within_the_idle_bound(server: Server, idle_timeout: float | None) -> None:
    name = session()
    headers = {"Mockskill-Session": name}
    timeout = httpx.Timeout(5.0, read=idle_timeout)
    with httpx.Client(headers=headers, timeout=timeout) as client:
        try:
            with client.stream("POST", server.url + invoke("stall")) as answer:
                for _ in answer.iter_bytes():
                    pass
        except (httpx.ReadTimeout, httpx.RemoteProtocolError):
            pass  # the idle timeout; or, without one, the server closing after its stall
    found = rules(server, name, 1)
    assert found == ([] if idle_timeout else ["stall-not-detected"])
    (stalled,) = entries_of(server, name)
    assert stalled.stream is not None
    assert stalled.stream["ended"] == "stall"
    assert stalled.stream["idle_bound_ms"] == 300


# -- gave-up-despite-progress ------------------------------------------------------------


def test_leaving_a_stream_that_still_delivers_is_giving_up(server: Server) -> None:
    name = session()
    with post(server.url + invoke("long"), name) as answer:
        events = 0
        for line in answer.iter_lines():
            events += line.startswith(b"id: ")
            if events == 5:
                break  # a consumer's total timeout, shorter than the stream
    assert rules(server, name, 1) == ["gave-up-despite-progress"]
    (left,) = entries_of(server, name)
    assert left.stream is not None
    assert (left.stream["ended"], left.stream["expected_ms"]) == ("client_left", 2000)
    assert left.stream["stalled_ms"] <= left.stream["idle_bound_ms"]


def test_staying_to_the_end_of_a_long_stream_is_clean(server: Server) -> None:
    name = session()
    with post(server.url + invoke("long"), name) as answer:
        ids = read_sse(answer)
    assert len(ids) == 40
    assert rules(server, name, 1) == []


def test_the_reports_idle_slack_is_a_parameter(server: Server) -> None:
    name = session()
    with httpx.Client(headers={"Mockskill-Session": name}, timeout=5) as client:
        try:
            with client.stream("POST", server.url + invoke("stall")) as answer:
                for _ in answer.iter_bytes():
                    pass
        except httpx.RemoteProtocolError:
            pass  # held to the end of the 1.5 s stall, then closed without its last chunk
    assert rules(server, name, 1) == ["stall-not-detected"]
    for slack, found in (("5000", []), ("250", ["stall-not-detected"])):
        answer = requests.get(
            f"{server.url}/__admin/report",
            params={"session": name, "idle_slack_ms": slack},
            timeout=10,
        )
        assert answer.status_code == 200
        (audited,) = answer.json()["sessions"]
        assert [f["rule"] for f in audited["findings"]] == found
        assert answer.json()["policy"]["idle_slack_ms"] == float(slack)


# -- a correct consumer of the bundled streams -------------------------------------------


@pytest.mark.parametrize("skill", ["stream-cut", "stream-overload"])
def test_a_correct_consumer_of_the_bundled_streams_is_clean(skill: str) -> None:
    """It keeps one Idempotency-Key per operation and waits what the stream advised
    (its retry: field after a cut, the error event's suggested_delay_ms) before re-issuing."""
    bundled = load_paths([bundled_path() / "streams.yaml"])
    name = session()
    with Server(bundled) as served:
        key = {"Idempotency-Key": "op-1"}
        with post(served.url + invoke(skill), name, **key) as first:
            read_sse(first)
        time.sleep(1.05 if skill == "stream-cut" else 2.05)
        with post(served.url + invoke(skill), name, **key) as second:
            lines = read_sse(second)
        assert lines  # the second attempt streamed
        assert rules(served, name, 2) == []
