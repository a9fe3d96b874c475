"""A stream played to a connection (mockskill/transport/streaming.py): the head at once,
each piece after its delay, heartbeats in long pauses, the endings, the client leaving,
the server stopping, and a client that does not read.

Plans are made by hand (the engine's framing is tests/engine/test_streams.py's); the
clients are real (requests, httpx, aiohttp, curl, Node's fetch, raw sockets where a
client would hide the bytes), on both event loops. Timing bounds are loose on the slow
side (shared machines) and strict where the point is: an event never comes before its
time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
from event_streams import parse_sse
from transport_helpers import (
    LOOPS,
    Recorder,
    connect,
    is_closed,
    parse,
    read_until_closed,
    serving,
)

from mockskill.engine.plan import Answer, Outcome, Plan, StreamPiece, StreamPlay, Wait
from mockskill.transport import Request, ThreadedServer

SSE = (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"))
HEAD = Answer(200, SSE)
LOOP_TICK = 0.002
"""How early a loop's timer may fire by the monotonic clock (uvloop counts whole ms)."""


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def events(count: int, delay_ms: float = 0, first: int = 1) -> tuple[StreamPiece, ...]:
    """*count* SSE events, ids from *first*, each *delay_ms* after the one before."""
    return tuple(
        StreamPiece(delay_ms, b"id: %d\ndata: %d\n\n" % (n, n), str(n))
        for n in range(first, first + count)
    )


def streaming(*pieces: StreamPiece, ending: str = "complete", **play: object) -> Recorder:
    """A handler answering every request with a stream of *pieces*."""
    plan = Plan(HEAD, stream=StreamPlay(tuple(pieces), ending, **play))  # type: ignore[arg-type]
    return Recorder(lambda _: plan)


def only_outcome(recorder: Recorder) -> Outcome:
    ((_, outcome),) = recorder.wait_for(1)
    return outcome


def closed_all(server: ThreadedServer, timeout: float = 2.0) -> bool:
    """Whether the server's connections are all gone within *timeout* (a cut connection is
    lost on the loop's next turn, after the exchange was reported)."""
    deadline = time.monotonic() + timeout
    while server.server.open_connections:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def get(server: ThreadedServer, path: str = "/stream") -> str:
    return f"http://127.0.0.1:{server.port}{path}"


# -- the head, the pieces on time, the last chunk --------------------------------------


def test_events_arrive_in_order_each_after_its_delay(loop: str) -> None:
    with serving(streaming(*events(5, delay_ms=60)), loop=loop) as (server, recorder):
        begun = time.monotonic()
        arrivals = []
        with requests.get(get(server), stream=True, timeout=5) as answer:
            assert answer.headers["Transfer-Encoding"] == "chunked"
            assert answer.headers["Content-Type"] == "text/event-stream; charset=utf-8"
            for line in answer.iter_lines():
                if line.startswith(b"data: "):
                    arrivals.append((int(line[6:]), time.monotonic() - begun))
        assert [n for n, _ in arrivals] == [1, 2, 3, 4, 5]
        for n, at in arrivals:
            assert 0.06 * n - LOOP_TICK <= at < 0.06 * n + 1.0
        outcome = only_outcome(recorder)
        assert outcome.stream is not None
        assert outcome.stream[:3] == (5, "5", "complete")
        assert outcome.headers_at is not None
        assert outcome.stream.at - outcome.headers_at >= 0.3 - LOOP_TICK
        assert not outcome.closed


def test_the_head_goes_at_once_not_with_the_first_event(loop: str) -> None:
    with serving(streaming(*events(1, delay_ms=800)), loop=loop) as (server, _):
        begun = time.monotonic()
        with requests.get(get(server), stream=True, timeout=5) as answer:
            assert time.monotonic() - begun < 0.6
            assert answer.status_code == 200
            assert answer.content == b"id: 1\ndata: 1\n\n"
            assert time.monotonic() - begun >= 0.8 - LOOP_TICK


def test_httpx_streams_the_events_and_reuses_the_connection_after(loop: str) -> None:
    with (
        serving(streaming(*events(3, delay_ms=10)), loop=loop) as (server, _),
        httpx.Client() as client,
    ):
        for _ in range(2):
            with client.stream("GET", get(server)) as answer:
                body = b"".join(answer.iter_bytes())
            assert [e.data for e in parse_sse(body).events] == ["1", "2", "3"]
        assert server.server.accepted == 1  # kept alive after a whole stream


def test_the_pace_does_not_drift_with_many_short_delays(loop: str) -> None:
    with serving(streaming(*events(50, delay_ms=10)), loop=loop) as (server, recorder):
        begun = time.monotonic()
        body = requests.get(get(server), timeout=5).content
        took = time.monotonic() - begun
        assert len(parse_sse(body).events) == 50
        assert 0.5 - LOOP_TICK <= took < 1.5  # each delay counts from when the last was due
        streamed = only_outcome(recorder).stream
        assert streamed is not None
        assert streamed[:4] == (50, "50", "complete", pytest.approx(time.time(), abs=5))
        assert streamed.last_byte_at == streamed.at  # the last chunk went as it ended


def test_an_http_1_0_client_gets_the_stream_delimited_by_the_close(loop: str) -> None:
    with serving(streaming(*events(3, delay_ms=5)), loop=loop) as (server, recorder):
        with connect(server) as sock:
            sock.sendall(b"GET /stream HTTP/1.0\r\n\r\n")
            raw = read_until_closed(sock)
        head, _, body = raw.partition(b"\r\n\r\n")
        assert b"Transfer-Encoding" not in head
        assert b"Connection: close" in head
        assert body == b"id: 1\ndata: 1\n\nid: 2\ndata: 2\n\nid: 3\ndata: 3\n\n"
        assert only_outcome(recorder).closed


def test_a_head_request_gets_the_head_alone(loop: str) -> None:
    with serving(streaming(*events(3, delay_ms=500)), loop=loop) as (server, recorder):
        begun = time.monotonic()
        answer = requests.head(get(server), timeout=5)
        assert answer.status_code == 200
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        assert time.monotonic() - begun < 0.4
        stream = only_outcome(recorder).stream
        assert stream is not None
        assert stream[:3] == (0, None, "complete")


def test_the_plans_waits_come_before_the_head(loop: str) -> None:
    plan = Plan(HEAD, waits=(Wait(150),), stream=StreamPlay(events(1)))
    with serving(Recorder(lambda _: plan), loop=loop) as (server, _):
        begun = time.monotonic()
        with requests.get(get(server), stream=True, timeout=5) as answer:
            assert time.monotonic() - begun >= 0.15 - LOOP_TICK
            assert answer.content == b"id: 1\ndata: 1\n\n"


class OffTheLoop(Recorder):
    """A handler whose plans are awaited (as a remote store's are): played by a task."""

    def plan(self, request: Request) -> asyncio.Future[Plan]:  # type: ignore[override]
        async def later() -> Plan:
            await asyncio.sleep(0.01)
            return self.plans(request)

        return asyncio.ensure_future(later())


def test_a_plan_made_off_the_loop_streams_too(loop: str) -> None:
    recorder = OffTheLoop(lambda _: Plan(HEAD, stream=StreamPlay(events(3, delay_ms=10))))
    with serving(recorder, loop=loop) as (server, _), httpx.Client() as client:
        for _ in range(2):
            assert len(parse_sse(client.get(get(server)).content).events) == 3
        stream = recorder.wait_for(2)[1][1].stream
        assert stream is not None
        assert stream[:3] == (3, "3", "complete")


def test_a_request_pipelined_behind_a_stream_is_answered_after_it(loop: str) -> None:
    def plans(request: Request) -> Plan:
        if request.target == "/stream":
            return Plan(HEAD, stream=StreamPlay(events(3, delay_ms=30)))
        return Plan(Answer(200, (), b"next"))

    with serving(Recorder(plans), loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(
            b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        stream, after = parse(read_until_closed(sock))
        assert len(parse_sse(stream.body).events) == 3
        assert after.body == b"next"


def test_a_status_without_a_body_is_sent_without_framing(loop: str) -> None:
    plan = Plan(Answer(204, ()), stream=StreamPlay(events(2)))
    with serving(Recorder(lambda _: plan), loop=loop) as (server, recorder):
        answer = requests.get(get(server), timeout=5)
        assert (answer.status_code, answer.content) == (204, b"")
        assert "Transfer-Encoding" not in answer.headers
        stream = only_outcome(recorder).stream
        assert stream is not None
        assert stream[:3] == (0, None, "complete")


def test_comments_and_retry_are_sent_but_not_counted(loop: str) -> None:
    pieces = (
        StreamPiece(0, b"retry: 2000\n\n", None, False),
        StreamPiece(0, b": a comment\n\n", None, False),
        *events(2),
    )
    with serving(streaming(*pieces), loop=loop) as (server, recorder):
        parsed = parse_sse(requests.get(get(server), timeout=5).content)
        assert (parsed.retry, parsed.comments, len(parsed.events)) == (2000, ["a comment"], 2)
        stream = only_outcome(recorder).stream
        assert stream is not None
        assert stream[:2] == (2, "2")


# -- heartbeats ----------------------------------------------------------------------


def test_heartbeats_fill_a_pause_longer_than_their_period(loop: str) -> None:
    pieces = (*events(1), *events(1, delay_ms=350, first=2))
    recorder = streaming(*pieces, heartbeat_ms=100, heartbeat=b": \n\n")
    with serving(recorder, loop=loop) as (server, _):
        parsed = parse_sse(requests.get(get(server), timeout=5).content)
        assert [e.data for e in parsed.events] == ["1", "2"]
        assert parsed.comments == ["", "", ""]  # at 100, 200, 300 ms of the 350 ms pause


def test_a_heartbeat_is_a_byte_the_stream_reports_as_its_last(loop: str) -> None:
    pieces = (*events(1), *events(1, delay_ms=2000, first=2))
    recorder = streaming(*pieces, heartbeat_ms=100, heartbeat=b": \n\n")
    with serving(recorder, loop=loop) as (server, _):
        with requests.get(get(server), stream=True, timeout=5) as answer:
            beats = 0
            for line in answer.iter_lines():
                beats += line.startswith(b":")
                if beats == 3:
                    break  # the client leaves during the pause, heartbeats still coming
        streamed = only_outcome(recorder).stream
        assert streamed is not None
        assert streamed.ended == "client_left"
        assert streamed.last_byte_at is not None
        assert streamed.at - streamed.last_byte_at < 0.1 + 0.5  # a heartbeat's period, and noise


def test_no_heartbeat_when_events_come_faster(loop: str) -> None:
    recorder = streaming(*events(5, delay_ms=20), heartbeat_ms=100, heartbeat=b": \n\n")
    with serving(recorder, loop=loop) as (server, _):
        assert parse_sse(requests.get(get(server), timeout=5).content).comments == []


# -- the endings -----------------------------------------------------------------------


def test_reset_after_event_n_is_a_connection_error_after_the_events(loop: str) -> None:
    with serving(streaming(*events(3, delay_ms=5), ending="reset"), loop=loop) as (server, rec):
        seen = []
        # Mid-body, requests says so as a broken chunked read, the reset its cause.
        with (  # noqa: PT012 (what comes first, then the error)
            pytest.raises(requests.exceptions.ChunkedEncodingError) as raised,
            requests.get(get(server), stream=True, timeout=5) as answer,
        ):
            for line in answer.iter_lines():
                seen.append(line)
        assert "Connection reset by peer" in str(raised.value)
        assert b"data: 3" in seen
        outcome = only_outcome(rec)
        assert outcome.stream is not None
        assert outcome.stream[:3] == (3, "3", "reset")
        assert outcome.closed


def test_reset_is_a_tcp_reset_on_a_raw_socket(loop: str) -> None:
    with (
        serving(streaming(*events(1), ending="reset"), loop=loop) as (server, _),
        connect(server) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        got = b""
        with pytest.raises(ConnectionResetError):  # noqa: PT012 (what came, then the reset)
            while chunk := sock.recv(65536):
                got += chunk
        assert b"data: 1" in got


def test_close_ends_the_body_cleanly_with_no_more_events(loop: str) -> None:
    with serving(streaming(*events(2), ending="close"), loop=loop) as (server, recorder):
        answer = requests.get(get(server), timeout=5)  # a clean end: no error
        assert [e.data for e in parse_sse(answer.content).events] == ["1", "2"]
        stream = only_outcome(recorder).stream
        assert stream is not None
        assert stream[:3] == (2, "2", "close")
        with connect(server) as sock:  # and the connection closes after it
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            (whole,) = parse(read_until_closed(sock))
            assert whole.body.endswith(b"data: 2\n\n")


def test_broken_chunking_is_a_protocol_error_for_every_client(loop: str) -> None:
    recorder = streaming(*events(2), ending="broken_chunking")
    with serving(recorder, loop=loop) as (server, _):
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            requests.get(get(server), timeout=5)
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(get(server), timeout=5)
        curl = subprocess.run(["curl", "-sN", get(server)], capture_output=True, timeout=30)
        assert curl.returncode == 56  # "failure in receiving network data"
        assert b"data: 2" in curl.stdout
        stream = recorder.wait_for(1)[0][1].stream
        assert stream is not None
        assert stream[:3] == (2, "2", "broken_chunking")


def test_a_stall_sends_nothing_more_until_its_time_then_closes(loop: str) -> None:
    recorder = streaming(*events(2), ending="stall", stall_ms=400)
    with serving(recorder, loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        begun = time.monotonic()
        sock.settimeout(0.2)
        got = b""
        with pytest.raises(TimeoutError):  # noqa: PT012 (the events, then silence)
            while chunk := sock.recv(65536):
                got += chunk
        assert got.endswith(b"data: 2\n\n\r\n")  # the last chunk never came
        assert is_closed(sock, timeout=2)
        assert time.monotonic() - begun >= 0.4 - LOOP_TICK
        outcome = only_outcome(recorder)
        assert outcome.stream is not None
        assert outcome.stream[:3] == (2, "2", "stall")
        assert outcome.client_left_at is None
        streamed = outcome.stream
        assert streamed.last_byte_at is not None
        assert streamed.at - streamed.last_byte_at >= 0.4 - LOOP_TICK  # the bytes had stopped


def test_a_client_with_a_read_timeout_meets_a_stall_as_a_timeout(loop: str) -> None:
    recorder = streaming(*events(1), ending="stall")  # until the client leaves
    with serving(recorder, loop=loop) as (server, _):
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream("GET", get(server), timeout=0.3) as answer,
        ):
            for _ in answer.iter_bytes():
                pass
        outcome = only_outcome(recorder)
        assert outcome.stream is not None
        assert outcome.stream[:3] == (1, "1", "stall")
        assert outcome.client_left_at is not None  # it held the stall until it left
        streamed = outcome.stream
        assert streamed.last_byte_at is not None
        assert 0.3 - LOOP_TICK <= streamed.at - streamed.last_byte_at < 2.0


# -- the client leaving, the server stopping, a client that does not read ----------------


def test_the_client_leaving_mid_stream_ends_it_at_once(loop: str) -> None:
    recorder = streaming(*events(100, delay_ms=50))
    with serving(recorder, loop=loop) as (server, _):
        with requests.get(get(server), stream=True, timeout=5) as answer:
            lines = answer.iter_lines()
            while next(lines) != b"data: 3":
                pass
        left = time.monotonic()
        outcome = only_outcome(recorder)
        assert time.monotonic() - left < 1
        assert outcome.stream is not None
        assert outcome.stream.ended == "client_left"
        assert 3 <= outcome.stream.events < 10
        assert outcome.client_left_at is not None
        assert closed_all(server)


def test_the_server_stopping_ends_a_stream_as_stopped(loop: str) -> None:
    recorder = streaming(*events(100, delay_ms=50))
    with serving(recorder, loop=loop) as (server, _), connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(65536)
        begun = time.monotonic()
        server.stop(grace=0.1)
        assert time.monotonic() - begun < 2
        outcome = only_outcome(recorder)
        assert outcome.stream is not None
        assert outcome.stream.ended == "stopped"
        assert outcome.stopped


def test_a_client_that_does_not_read_is_given_up_on_and_not_buffered_for(loop: str) -> None:
    # 100 000 events of 100 bytes, all due at once: 10 MB the client never reads.
    piece = StreamPiece(0, b"data: " + b"x" * 92 + b"\n\n")
    recorder = streaming(*(piece,) * 100_000)
    with serving(recorder, loop=loop, write_timeout=0.3) as (server, _):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        with sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            begun = time.monotonic()
            outcome = only_outcome(recorder)
            assert time.monotonic() - begun < 3
            assert outcome.stream is not None
            assert outcome.stream.ended == "gave_up"
            # Written while the kernel's buffers (a few MB on loopback) and the transport's
            # high-water mark had room, then nothing: never the 10 MB queued in memory.
            assert outcome.stream.events < 50_000
            assert closed_all(server)


def test_a_client_reading_slowly_gets_every_event(loop: str) -> None:
    piece = StreamPiece(0, b"data: " + b"x" * 992 + b"\n\n")
    with serving(streaming(*(piece,) * 1000), loop=loop, write_timeout=0.5) as (server, rec):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        with sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
                time.sleep(0.001)
        (whole,) = parse(got)
        assert len(parse_sse(whole.body).events) == 1000
        stream = only_outcome(rec).stream
        assert stream is not None
        assert stream[:3] == (1000, None, "complete")


# -- what each client makes of each ending (docs/streams.md's table) ---------------------

ENDINGS = ("complete", "close", "reset", "broken_chunking", "stall")
REQUESTS_MEETS = {
    "complete": None,
    "close": None,  # the clean end a consumer must not take for a whole stream
    "reset": requests.exceptions.ChunkedEncodingError,
    "broken_chunking": requests.exceptions.ChunkedEncodingError,
    "stall": requests.exceptions.ConnectionError,  # its read timeout
}
HTTPX_MEETS = {
    "complete": None,
    "close": None,
    "reset": httpx.ReadError,
    "broken_chunking": httpx.RemoteProtocolError,
    "stall": httpx.ReadTimeout,
}
AIOHTTP_MEETS: dict[str, type[BaseException] | tuple[type[BaseException], ...] | None] = {
    "complete": None,
    "close": None,
    "reset": aiohttp.ClientPayloadError,
    # Read with the head (the client was slow): its parser's 400. Read after it: the
    # parser's error is lost, and only the total timeout ends the read.
    "broken_chunking": (TimeoutError, aiohttp.ClientResponseError),
    "stall": aiohttp.SocketTimeoutError,
}
CURL_EXITS = {"complete": 0, "close": 0, "reset": 56, "broken_chunking": 56, "stall": 28}


def ended_stream(ending: str) -> Recorder:
    return streaming(*events(2, delay_ms=5), ending=ending)


@pytest.mark.parametrize("ending", ENDINGS)
def test_requests_meets_each_ending_as_documented(ending: str) -> None:
    with serving(ended_stream(ending)) as (server, _):
        raises = REQUESTS_MEETS[ending]
        lines: list[bytes] = []
        with contextlib.ExitStack() as stack:
            if raises is not None:
                stack.enter_context(pytest.raises(raises))
            answer = stack.enter_context(requests.get(get(server), stream=True, timeout=0.5))
            lines.extend(answer.iter_lines())
        assert b"data: 2" in lines


@pytest.mark.parametrize("ending", ENDINGS)
def test_httpx_meets_each_ending_as_documented(ending: str) -> None:
    with serving(ended_stream(ending)) as (server, _):
        raises = HTTPX_MEETS[ending]
        lines: list[str] = []
        with contextlib.ExitStack() as stack:
            if raises is not None:
                stack.enter_context(pytest.raises(raises))
            answer = stack.enter_context(httpx.stream("GET", get(server), timeout=0.5))
            lines.extend(answer.iter_lines())
        assert "data: 2" in lines


@pytest.mark.parametrize("ending", ENDINGS)
def test_aiohttp_meets_each_ending_as_documented(ending: str) -> None:
    lines: list[bytes] = []

    async def read(url: str) -> None:
        timeout = aiohttp.ClientTimeout(total=0.6, sock_read=0.3)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as answer:
            async for line in answer.content:
                lines.append(line)

    with serving(ended_stream(ending)) as (server, _):
        raises = AIOHTTP_MEETS[ending]
        with contextlib.ExitStack() as stack:
            if raises is not None:
                stack.enter_context(pytest.raises(raises))
            asyncio.run(read(get(server)))
        assert b"data: 2\n" in lines


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("ending", ENDINGS)
def test_curl_meets_each_ending_as_documented(ending: str) -> None:
    with serving(ended_stream(ending)) as (server, _):
        shown = subprocess.run(
            ["curl", "-sN", "-m", "0.5", get(server)], capture_output=True, timeout=30
        )
        assert shown.returncode == CURL_EXITS[ending]
        assert b"data: 2" in shown.stdout


NODE = shutil.which("node")
READER = Path(__file__).resolve().parent.parent / "node" / "stream_reader.mjs"
FETCH_MEETS: dict[str, tuple[str, set[str | None]] | None] = {
    "complete": None,
    "close": None,
    # "terminated", caused by the socket's end as undici saw it first (either)
    "reset": ("TypeError", {"UND_ERR_SOCKET", "ECONNRESET"}),
    "broken_chunking": ("TypeError", {"HPE_INVALID_CHUNK_SIZE"}),
    "stall": ("TimeoutError", {None}),  # only an AbortSignal's timeout ends it
}


@pytest.mark.skipif(
    NODE is None and os.environ.get("MOCKSKILL_REQUIRE_NODE") != "1",
    reason="node is not installed",
)
@pytest.mark.parametrize("ending", ENDINGS)
def test_nodes_fetch_meets_each_ending_as_documented(ending: str) -> None:
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    with serving(ended_stream(ending)) as (server, _):
        shown = subprocess.run(
            # (the abort ends only the stall; a shorter one met a loaded machine's slow start)
            [NODE, str(READER), get(server), "2000"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        outcome = json.loads(shown.stdout)
        assert "data: 2\n" in outcome["text"]
        met = FETCH_MEETS[ending]
        if met is None:
            assert "error" not in outcome
        else:
            assert outcome["error"] == met[0]
            assert outcome["cause"] in met[1]
