"""Acting a step out on a real connection: delays, hangs, slow bodies, timeouts, refusals.

Every test talks to a real server on a real socket with a real client
(requests, httpx, or a bare socket where a client would hide what happens).
Timing bounds are generous on the slow side — these run on shared, noisy
machines — and strict only where the behaviour is the point: a fixed delay
is never shorter than its time, a timeout is answered at the timeout and not
at the scripted execution time, a client that gives up frees the server at
once instead of at the step's bound.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
import pytest
import requests

from mockskill import Server
from mockskill.engine.state import Entry

Serve = Callable[..., Server]

ACTIONS = """
    name: actions
    skills:
      - id: fast
      - id: fixed
        invoke: {delay: 300, json: {ok: true}}
      - id: spread
        invoke: {delay: {uniform: [50, 150]}, json: 2}
      - id: hang
        invoke: {hang: 3000}
      - id: mute
        invoke: {hang: 600}
      - id: late
        invoke: {hang: 500, json: {late: true}}
      - id: drip
        invoke: {dribble: {chunks: 4, over: 600}, json: {slow: body}}
      - id: drip-fine
        invoke: {dribble: {chunks: 16, over: 600}, json: {slow: body}}
      - id: drip-long
        invoke: {dribble: {chunks: 4, over: 3000}, text: aaaabbbbccccdddd}
      - id: timed
        timeout_ms: 300
        invoke: {execution: 2000, json: {ok: true}}
      - id: timed-408
        timeout_ms: 300
        timeout_status: 408
        invoke: {execution: 2000, json: {ok: true}}
      - id: quick
        timeout_ms: 1000
        invoke: {execution: 200, json: {ok: true}}
      - id: away
        unreachable: true
"""


def invoke(
    server: Server, skill: str, session: dict[str, str], **kwargs: object
) -> requests.Response:
    kwargs.setdefault("timeout", 10)
    return requests.post(server.invoke_url(skill), headers=session, **kwargs)  # type: ignore[arg-type]


def entry_of(server: Server, session: dict[str, str], skill: str, within: float = 2.0) -> Entry:
    """The journal entry of the one request to *skill* in *session*, waiting up to *within* s."""
    deadline = time.monotonic() + within
    while True:
        entries = [
            e for e in server.state.journal(session["Mockskill-Session"]) if e.skill == skill
        ]
        if entries:
            assert len(entries) == 1, entries
            return entries[0]
        if time.monotonic() > deadline:
            pytest.fail(f"no journal entry for {skill!r} within {within} s")
        time.sleep(0.01)


def timed(call: Callable[[], object]) -> tuple[object, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def exception_chain(exc: BaseException) -> list[BaseException]:
    """Every exception that *exc* wraps: causes, contexts, urllib3 reasons and args."""
    seen: list[BaseException] = []
    stack: list[object] = [exc]
    while stack:
        item = stack.pop()
        if not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        stack += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
    return seen


def handler_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if "process_request" in t.name}


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(ACTIONS)


# -- delays ----------------------------------------------------------------------------


def test_a_fixed_delay_takes_at_least_its_time(server: Server, session: dict[str, str]) -> None:
    response, elapsed = timed(lambda: invoke(server, "fixed", session))
    assert isinstance(response, requests.Response)
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert 0.3 <= elapsed < 2.0
    entry = entry_of(server, session, "fixed")
    assert entry.delay_ms == 300
    assert entry.status == 200
    assert entry.client_left is None


def test_a_drawn_delay_is_waited_and_recorded(server: Server, session: dict[str, str]) -> None:
    response, elapsed = timed(lambda: invoke(server, "spread", session))
    assert isinstance(response, requests.Response)
    assert response.json() == 2
    entry = entry_of(server, session, "spread")
    assert entry.delay_ms is not None
    assert 50 <= entry.delay_ms <= 150
    assert elapsed >= entry.delay_ms / 1000


def test_a_client_that_gives_up_during_a_delay_is_recorded(
    serve: Serve, session: dict[str, str]
) -> None:
    server = serve("skills: [{id: slow, invoke: {delay: 3000, json: 1}}]")
    with pytest.raises(requests.ReadTimeout):
        invoke(server, "slow", session, timeout=(5, 0.4))
    entry = entry_of(server, session, "slow", within=1.0)
    assert entry.status is None
    assert entry.client_left is not None
    assert entry.client_left - entry.started == pytest.approx(0.4, abs=0.3)


# -- hang ------------------------------------------------------------------------------


def test_a_hang_lasts_until_the_client_times_out_and_records_when_it_left(
    server: Server, session: dict[str, str]
) -> None:
    before = handler_threads()
    with pytest.raises(requests.ReadTimeout):
        invoke(server, "hang", session, timeout=(5, 0.5))
    gave_up = time.monotonic()
    # Recorded as soon as the client left, long before the 3 s bound.
    entry = entry_of(server, session, "hang", within=1.0)
    assert time.monotonic() - gave_up < 1.0
    assert entry.status is None  # nothing was answered
    assert entry.client_left is not None
    assert entry.client_left - entry.started == pytest.approx(0.5, abs=0.3)
    assert entry.finished - entry.started < 1.5
    # And the thread that served it has ended: the hang did not keep it.
    deadline = time.monotonic() + 1.0
    while handler_threads() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not handler_threads() - before


def test_the_server_answers_other_requests_during_a_hang(
    server: Server, session: dict[str, str]
) -> None:
    hang_over = threading.Event()

    def hang() -> None:
        with contextlib.suppress(requests.ReadTimeout):
            invoke(server, "hang", session, timeout=(5, 1.0))
        hang_over.set()

    thread = threading.Thread(target=hang, daemon=True)
    thread.start()
    time.sleep(0.1)
    for _ in range(5):
        response, elapsed = timed(lambda: invoke(server, "fast", session))
        assert isinstance(response, requests.Response)
        assert response.status_code == 200
        assert elapsed < 1.0
    assert not hang_over.is_set()
    thread.join(timeout=10)
    assert hang_over.is_set()


def test_a_hang_without_a_reply_closes_the_connection_after_its_bound(
    server: Server, session: dict[str, str]
) -> None:
    started = time.monotonic()
    with pytest.raises(requests.ConnectionError):
        invoke(server, "mute", session)
    assert 0.6 <= time.monotonic() - started < 3.0
    entry = entry_of(server, session, "mute")
    assert entry.status is None
    assert entry.client_left is None  # the client waited; the server closed


def test_a_hang_without_a_reply_sends_not_a_byte(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(raw_request(server, "mute"))
        assert sock.recv(1024) == b""  # closed, nothing said


def test_a_hang_then_answers_after_its_bound(server: Server, session: dict[str, str]) -> None:
    response, elapsed = timed(lambda: invoke(server, "late", session, timeout=(5, 5)))
    assert isinstance(response, requests.Response)
    assert response.status_code == 200
    assert response.json() == {"late": True}
    assert 0.5 <= elapsed < 2.5
    entry = entry_of(server, session, "late")
    assert entry.status == 200
    assert entry.client_left is None


def test_a_hang_that_answers_still_lets_an_impatient_client_go(
    server: Server, session: dict[str, str]
) -> None:
    with pytest.raises(requests.ReadTimeout):
        invoke(server, "late", session, timeout=(5, 0.2))
    entry = entry_of(server, session, "late", within=1.0)
    assert entry.status is None
    assert entry.client_left is not None


# -- dribble ---------------------------------------------------------------------------


def raw_request(server: Server, skill: str, session: dict[str, str] | None = None) -> bytes:
    lines = [
        f"POST /skills/{skill}/invoke HTTP/1.1",
        f"Host: 127.0.0.1:{server.port}",
        "Content-Length: 0",
        *(f"{k}: {v}" for k, v in (session or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("skill", ["drip", "drip-fine"])
def test_a_dribbled_body_arrives_whole_spread_over_its_time(
    server: Server, session: dict[str, str], skill: str
) -> None:
    started = time.monotonic()
    response = invoke(server, skill, session, stream=True)
    headers_at = time.monotonic()
    body = response.content
    done_at = time.monotonic()
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(b'{"slow": "body"}'))
    assert body == b'{"slow": "body"}'
    assert response.json() == {"slow": "body"}
    assert done_at - started >= 0.9 * 0.6
    assert done_at - started < 3.0
    # A slow body, not a slow start: the status and headers come first.
    assert done_at - headers_at >= 0.5 * 0.6
    entry = entry_of(server, session, skill)
    assert entry.status == 200
    assert entry.client_left is None
    assert entry.finished - entry.started >= 0.9 * 0.6


def test_a_body_dribbled_in_one_chunk_still_takes_its_time(
    serve: Serve, session: dict[str, str]
) -> None:
    # One piece cannot be spread, but `over` is still how long the body takes:
    # the status and headers at once, the whole body after `over`.
    server = serve("skills: [{id: one, invoke: {dribble: {chunks: 1, over: 600}, json: 1}}]")
    started = time.monotonic()
    response = invoke(server, "one", session, stream=True)
    assert response.content == b"1"
    assert time.monotonic() - started >= 0.9 * 0.6


def test_a_dribbled_body_comes_in_pieces(server: Server, session: dict[str, str]) -> None:
    with httpx.stream("POST", server.invoke_url("drip"), headers=session, timeout=5) as response:
        headers_at = time.monotonic()
        arrivals = [(time.monotonic(), piece) for piece in response.iter_raw() if piece]
    body = b"".join(piece for _, piece in arrivals)
    assert body == b'{"slow": "body"}'
    assert len(arrivals) >= 3  # the four pieces, unless two landed in one read
    # The last piece comes about `over` after the headers.
    assert arrivals[-1][0] - headers_at >= 0.9 * 0.6
    assert arrivals[-1][0] - arrivals[0][0] >= 0.3  # spread out, not all at once


def test_a_client_that_gives_up_mid_body_is_recorded(
    server: Server, session: dict[str, str]
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(raw_request(server, "drip-long", session))
        received = b""
        while b"\r\n\r\n" not in received or received.endswith(b"\r\n\r\n"):
            chunk = sock.recv(1024)
            assert chunk, f"closed early: {received!r}"
            received += chunk
    left = time.time()
    head, body = received.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"Content-Length: 16" in head
    assert b"aaaabbbbccccdddd".startswith(body)
    assert len(body) < 16
    # Recorded once the server notices — long before the 3 s the body would take.
    entry = entry_of(server, session, "drip-long", within=1.0)
    assert entry.client_left is not None
    assert entry.client_left == pytest.approx(left, abs=0.3)
    assert entry.finished - entry.started < 1.5


def test_a_dribbled_answer_is_in_the_journal_once_its_client_has_it(
    serve: Serve, session: dict[str, str]
) -> None:
    # A CI gate reads the report as soon as the consumer returns: the entry must be
    # there by then, not when the server has finished lingering on the socket.
    server = serve("skills: [{id: drip, invoke: {dribble: {chunks: 2, over: 10}, json: [1, 2]}}]")
    name = session["Mockskill-Session"]
    with httpx.Client(headers=session, timeout=10) as client:
        for attempt in range(200):
            if attempt % 2:
                body = client.post(server.invoke_url("drip")).content
            else:
                body = requests.post(server.invoke_url("drip"), headers=session, timeout=10).content
            assert body == b"[1, 2]"
            journal = server.state.journal(name)
            assert len(journal) == attempt + 1, f"try {attempt + 1}: the last answer is missing"
            entry = journal[-1]
            assert (entry.status, entry.client_left) == (200, None)
            assert entry.headers_sent is not None
            assert entry.started <= entry.headers_sent <= entry.finished


# -- execution and the skill's timeout -------------------------------------------------


@pytest.mark.parametrize(("skill", "status"), [("timed", 504), ("timed-408", 408)])
def test_execution_over_the_timeout_is_answered_at_the_timeout(
    server: Server, session: dict[str, str], skill: str, status: int
) -> None:
    response, elapsed = timed(lambda: invoke(server, skill, session))
    assert isinstance(response, requests.Response)
    assert 0.3 <= elapsed < 1.0  # at the 300 ms timeout, not after the 2000 ms execution
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["message"] == "Skill execution exceeded the configured timeout of 300ms"
    assert error["retry"] == {"suggested_delay_ms": 5000, "max_attempts": 3}
    details = error["details"]
    assert details["timeout_ms"] == 300
    # Measured, not copied from the script (2000) nor the category's default (30001).
    assert 300 <= details["elapsed_ms"] < 1000
    assert details["elapsed_ms"] <= elapsed * 1000 + 5
    entry = entry_of(server, session, skill)
    assert details["elapsed_ms"] == pytest.approx((entry.finished - entry.started) * 1000, abs=50)
    assert entry.status == status
    assert entry.error_code == "EXECUTION_TIMEOUT"
    assert entry.execution_ms == 2000  # what the script asked for
    assert entry.retry is not None
    assert entry.retry.suggested_delay_ms == 5000


def test_execution_within_the_timeout_answers_normally_after_it(
    server: Server, session: dict[str, str]
) -> None:
    response, elapsed = timed(lambda: invoke(server, "quick", session))
    assert isinstance(response, requests.Response)
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert "Retry-After" not in response.headers
    assert 0.2 <= elapsed < 0.9
    entry = entry_of(server, session, "quick")
    assert entry.execution_ms == 200
    assert entry.error_code is None


def test_the_timeout_is_answered_to_httpx_too(server: Server, session: dict[str, str]) -> None:
    response = httpx.post(server.invoke_url("timed"), headers=session, timeout=5)
    assert response.status_code == 504
    assert response.json()["error"]["details"]["timeout_ms"] == 300


# -- unreachable -----------------------------------------------------------------------


def refused_url(server: Server) -> str:
    descriptor = requests.get(server.skill_url("away"), timeout=10).json()
    url: str = descriptor["endpoint"]["url"]
    return url


def test_an_unreachable_skill_names_a_refused_port_on_this_host(server: Server) -> None:
    url = refused_url(server)
    parts = urlsplit(url)
    assert parts.scheme == "http"
    assert parts.hostname == "127.0.0.1"
    assert parts.port is not None
    assert parts.port != server.port
    assert parts.path == "/skills/away/invoke"


def test_following_the_descriptor_meets_a_real_connection_refusal(server: Server) -> None:
    url = refused_url(server)
    with pytest.raises(requests.ConnectionError) as caught:
        requests.post(url, json={}, timeout=5)
    chain = exception_chain(caught.value)
    assert any(isinstance(e, ConnectionRefusedError) for e in chain), chain

    with pytest.raises(httpx.ConnectError):
        httpx.post(url, json={}, timeout=5)

    port = urlsplit(url).port
    assert port is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_the_refused_port_is_held_while_serving_and_released_after(server: Server) -> None:
    port = urlsplit(refused_url(server)).port
    assert port is not None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        with pytest.raises(OSError, match="in use") as caught:
            other.bind(("127.0.0.1", port))
        assert caught.value.errno == errno.EADDRINUSE
    server.stop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", port))  # free again


def test_the_refused_port_is_held_again_after_a_restart(server: Server) -> None:
    server.stop()
    server.start()
    port = urlsplit(refused_url(server)).port
    assert port is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        with pytest.raises(OSError, match="in use") as caught:
            other.bind(("127.0.0.1", port))
        assert caught.value.errno == errno.EADDRINUSE


def test_invoking_an_unreachable_skill_here_is_endpoint_unreachable(
    server: Server, session: dict[str, str]
) -> None:
    url = refused_url(server)
    response = invoke(server, "away", session)
    assert response.status_code == 503
    assert "Retry-After" in response.headers
    error = response.json()["error"]
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert error["details"]["endpoint_url"] == url
    assert "base_url}" not in response.text  # no placeholder left unfilled


def test_no_port_is_held_without_an_unreachable_skill(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    assert server.engine.refused.port is None


def test_execution_is_timed_from_its_start_after_the_delay(serve: Serve) -> None:
    # The delay stands for the network, the execution for the skill: only
    # the execution counts against the skill's timeout.
    server = serve(
        """
        skills:
          - id: cut
            timeout_ms: 300
            invoke: {delay: 400, execution: 2000, json: {ok: true}}
          - id: in-time
            timeout_ms: 300
            invoke: {delay: 400, execution: 200, json: {ok: true}}
        """
    )
    started = time.monotonic()
    cut = requests.post(server.invoke_url("cut"), timeout=10)
    took = time.monotonic() - started
    assert cut.status_code == 504
    assert 300 <= cut.json()["error"]["details"]["elapsed_ms"] < 600
    assert 0.65 <= took < 2.0
    assert requests.post(server.invoke_url("in-time"), timeout=10).status_code == 200


def test_a_client_leaving_a_hang_is_not_recorded_as_a_fault(serve: Serve) -> None:
    server = serve("skills: [{id: silent, invoke: {hang: 5000}}]")
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(server.invoke_url("silent"), timeout=0.3)
    deadline = time.monotonic() + 3
    while not server.state.journal() and time.monotonic() < deadline:
        time.sleep(0.02)
    [entry] = server.state.journal()
    assert entry.client_left is not None
    assert entry.fault is None
