"""The server: ephemeral ports, quick start and stop, many clients at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import socket
import statistics
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import Server, ServerError, bundled_path, load_paths, load_text
from mockskill.engine.state import State
from mockskill.engine.store import Need, NeedAnswer, StoreUnavailable
from mockskill.protocol.catalog import error_body_problem
from mockskill.scenario.model import Case, Sequence, Skill

Serve = Callable[..., Server]

SLOW = """
    skills:
      - id: slow
        invoke: {delay: 800, json: {ok: true}}
"""


def test_port_zero_picks_a_free_port_and_url_says_which() -> None:
    with Server() as server:
        port = server.port
        assert port > 0
        assert server.url == f"http://127.0.0.1:{port}"
        assert requests.get(f"{server.url}/skills", timeout=10).status_code == 200
    with pytest.raises(ConnectionError):  # stopped: the port is closed
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_start_and_stop_take_at_most_50_ms_each() -> None:
    # Issue 13: the embedded Server, not only the transport under it (whose own bound is
    # tests/transport/test_lifecycle.py's). Stopped with a kept-alive connection open,
    # as a test's session leaves it; the median of five (one cycle may be descheduled).
    scenarios = load_text("skills: [{id: a}]")
    starts, stops = [], []
    for attempt in range(6):
        server = Server(scenarios, quiet=True)
        started = time.perf_counter()
        server.start()
        start_s = time.perf_counter() - started
        with requests.Session() as session:
            assert session.get(f"{server.url}/skills", timeout=10).status_code == 200
            started = time.perf_counter()
            server.stop()
            stop_s = time.perf_counter() - started
        if attempt:  # the first also imports what serving needs
            starts.append(start_s)
            stops.append(stop_s)
    assert statistics.median(starts) <= 0.05, starts
    assert statistics.median(stops) <= 0.05, stops


def test_a_busy_port_is_a_clear_error_not_an_exit() -> None:
    with Server() as first:
        second = Server(port=first.port)
        with pytest.raises(ServerError, match=rf"port {first.port} is in use") as caught:
            second.start()
        # Said in Python's terms: the argument to change, not a command-line option.
        assert str(caught.value).endswith("pick another with port= (0: any)")
        beside = Server(tls=True, http_port=first.port)
        with pytest.raises(ServerError, match="pick another with http_port= "):
            beside.start()


def test_url_helpers_name_a_skill_and_its_invoke_endpoint() -> None:
    with Server() as server:
        assert server.skill_url("flaky") == f"{server.url}/skills/flaky"
        assert server.invoke_url("flaky") == f"{server.url}/skills/flaky/invoke"


def test_the_seed_is_kept_and_reported() -> None:
    server = Server(seed=1234)
    assert server.seed == 1234
    assert isinstance(Server().seed, int)


def test_stop_lets_a_delayed_request_finish(serve: Serve) -> None:
    """Server.stop drains: a request in flight is answered (saying Connection: close)."""
    server = serve(SLOW)
    answers: list[requests.Response] = []
    thread = threading.Thread(
        target=lambda: answers.append(requests.post(server.invoke_url("slow"), timeout=10)),
        daemon=True,
    )
    thread.start()
    time.sleep(0.2)
    server.stop()
    thread.join(timeout=5)
    assert [a.status_code for a in answers] == [200]
    assert answers[0].headers["Connection"] == "close"


def test_stop_without_grace_does_not_wait_for_delayed_requests(serve: Serve) -> None:
    server = serve(SLOW)
    failures: list[Exception] = []

    def call() -> None:
        try:
            requests.post(server.invoke_url("slow"), timeout=10)
        except requests.ConnectionError as exc:  # cut: the answer never came
            failures.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    server.stop(grace=0)
    assert time.monotonic() - started < 0.4
    thread.join(timeout=5)
    assert len(failures) == 1
    (entry,) = server.journal()
    assert (entry.status, entry.stopped, entry.client_left) == (None, True, None)


@pytest.mark.skipif(
    not Path("/proc/sys/net/core/somaxconn").exists() or shutil.which("ss") is None,
    reason="reads the listen queue's size with Linux's ss",
)
def test_the_listen_queue_is_the_documented_backlog_up_to_the_kernels_cap(
    serve: Serve,
) -> None:
    # A burst of connections (bench/burst_peers.py) that overflows the queue waits a
    # 1 s SYN retry each: the queue asked for is BACKLOG, as nginx's in the bench.
    from mockskill.server.server import BACKLOG
    from mockskill.transport.loop_server import BACKLOG as TRANSPORT_BACKLOG

    server = serve(SLOW)
    cap = int(Path("/proc/sys/net/core/somaxconn").read_text())
    listing = subprocess.run(
        ["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert BACKLOG == TRANSPORT_BACKLOG == 4096
    assert int(listing[2]) == min(BACKLOG, cap)  # Send-Q of a listening socket: its backlog


def test_hundreds_of_simultaneous_connections_are_all_served(serve: Serve) -> None:
    # More than Werkzeug's default backlog of 128 connect at once; each waits
    # 0.8 s, so they are all pending together.
    server = serve(SLOW)
    count = 300
    barrier = threading.Barrier(count)

    def client(_: int) -> int:
        barrier.wait(timeout=30)
        request = (
            b"POST /skills/slow/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        return int(data.split(b" ", 2)[1])

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=count) as pool:
        statuses = list(pool.map(client, range(count)))
    elapsed = time.monotonic() - started
    assert statuses == [200] * count
    # Served concurrently, not one after another (that would be 240 s).
    assert elapsed < 20


def test_more_waiting_connections_than_select_can_watch_are_all_answered(serve: Serve) -> None:
    # Descriptors numbered 1024 and above are beyond select(); a wait that
    # used it took them for clients that had left and cut them.
    server = serve("skills: [{id: wait, invoke: {delay: 1500, json: {ok: true}}}]")
    count = 1100
    request = (
        b"POST /skills/wait/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
        b"Connection: close\r\n\r\n"
    )

    async def one() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request)
        data = await reader.read()
        writer.close()
        await writer.wait_closed()
        return data.split(b"\r\n", 1)[0]  # the status line ("" if cut)

    async def all_of_them() -> list[bytes]:
        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(count))), 60)

    statuses = asyncio.run(all_of_them())
    assert statuses.count(b"HTTP/1.1 200 OK") == count, set(statuses)
    assert not [e for e in server.state.journal() if e.client_left is not None]


# -- the state store ---------------------------------------------------------------


class Awaited(State):
    """A store that answers only when awaited, as a remote one: ``answer()`` on an event
    loop's thread fails the test (it would block the loop on a round trip), and each
    awaited answer yields to the loop first, after the lag the test queued for it."""

    remote = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.awaited: list[str] = []
        self.lags: list[float] = []
        self.blocked: list[str] = []
        self.gate: threading.Event | None = None
        """When set, each answer waits for it (off the loop's thread) before it comes."""
        self.asked = threading.Event()

    def answer(self, need: Need) -> NeedAnswer:
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self.blocked.append(type(need).__name__)
            raise AssertionError("the blocking answer() was called on the event loop")
        return super().answer(need)

    async def answer_async(self, need: Need) -> NeedAnswer:
        self.awaited.append(type(need).__name__)
        self.asked.set()
        await asyncio.sleep(self.lags.pop(0) if self.lags else 0)
        if self.gate is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, 10)
        return State.answer(self, need)


SEQUENCE = """
    name: counted
    auth:
      clients: [{client_id: app, client_secret: s3cret, scopes: [skill:invoke]}]
    skills:
      - id: seq
        invoke:
          steps: [{json: 1}, {json: 2}, {json: 3}]
      - id: guarded
        requires: true
"""


def _responses(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """*count* HTTP/1.1 responses read off *sock* (each sized by Content-Length)."""
    data, answers = b"", []
    while len(answers) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.split(b"\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in lines
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) >= length:
                answers.append((int(lines[0].split()[1]), rest[:length]))
                data = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"the server closed after {len(answers)} answers"
        data += chunk
    return answers


def test_a_server_keeps_its_state_in_the_store_it_is_given() -> None:
    store = State(seed=11, journal_size=50)
    with Server(load_text(SEQUENCE), state=store) as server:
        assert server.state is store
        assert server.seed == 11
        assert requests.post(server.invoke_url("seq"), timeout=10).json() == 1
    assert [e.position for e in store.journal()] == [0]
    assert Server().state.capacity == 10_000  # the default: a new in-memory one


def test_a_seed_or_journal_size_the_given_store_does_not_have_is_refused() -> None:
    store = State(seed=11, journal_size=50)
    with pytest.raises(ServerError, match="seed 12 differs from the given state store's seed 11"):
        Server(state=store, seed=12)
    with pytest.raises(ServerError, match=r"journal_size 60 differs .* journal bound 50"):
        Server(state=store, journal_size=60)
    assert Server(state=store, seed=11, journal_size=50).state is store


def test_a_remote_store_is_awaited_on_the_loop_and_pipelined_answers_keep_their_order() -> None:
    store = Awaited(seed=1)
    # The first request's answer comes last: were the three planned at once, the second
    # would take position 0. The transport plays a connection's requests in turn.
    store.lags = [0.3, 0.0, 0.0]
    with (
        Server(load_text(SEQUENCE), state=store) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock,
    ):
        one = b"POST /skills/seq/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        sock.sendall(one * 3)
        answers = _responses(sock, 3)
    assert answers == [(200, b"1"), (200, b"2"), (200, b"3")]
    assert store.awaited == ["Take"] * 3
    assert store.blocked == []
    assert [e.position for e in server.journal()] == [0, 1, 2]


def test_tokens_issued_and_used_through_an_awaited_store() -> None:
    store = Awaited(seed=1)
    with Server(load_text(SEQUENCE), state=store) as server:
        issued = requests.post(
            f"{server.url}/oauth/token",
            data={"grant_type": "client_credentials"},
            auth=("app", "s3cret"),
            timeout=10,
        )
        assert issued.status_code == 200
        bearer = {"Authorization": f"Bearer {issued.json()['access_token']}"}
        called = requests.post(server.invoke_url("guarded"), headers=bearer, timeout=10)
        assert called.status_code == 200
        refused = requests.post(
            server.invoke_url("guarded"), headers={"Authorization": "Bearer nope"}, timeout=10
        )
        assert refused.status_code == 401
    assert store.awaited == ["IssueToken", "UseToken", "Take", "UseToken"]
    assert store.blocked == []


@pytest.mark.parametrize("remote", [False, True], ids=["inline", "awaited"])
def test_a_store_that_cannot_answer_is_a_503_state_unavailable(remote: bool) -> None:
    class Down(State):
        async def answer_async(self, need: Need) -> NeedAnswer:
            raise StoreUnavailable("redis://store:6379/0: connection refused")

        def answer(self, need: Need) -> NeedAnswer:
            raise StoreUnavailable("redis://store:6379/0: connection refused")

    store = Down(seed=1)
    store.remote = remote
    with Server(load_text(SEQUENCE), state=store) as server:
        response = requests.post(
            server.invoke_url("seq"), headers={"Mockskill-Session": "s1"}, timeout=10
        )
        listing = requests.get(f"{server.url}/skills", timeout=10)  # needs nothing of it
    assert response.status_code == 503
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_STATE_UNAVAILABLE"
    assert "the shared state store could not be reached" in error["message"]
    assert "connection refused" in error["message"]
    assert listing.status_code == 200
    refused = [e for e in store.journal() if e.endpoint == "refused"]
    assert [(e.session, e.status, e.error_code) for e in refused] == [
        ("s1", 503, "MOCKSKILL_STATE_UNAVAILABLE")
    ]


def test_a_client_gone_before_the_store_answered_is_journalled_with_what_it_took() -> None:
    store = Awaited(seed=1)
    store.gate = threading.Event()
    with Server(load_text(SEQUENCE), state=store) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"POST /skills/seq/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert store.asked.wait(10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset: the connection is lost while its plan awaits the store
        time.sleep(0.2)  # the loop sees the reset before the store answers
        store.gate.set()
        deadline = time.monotonic() + 10
        while not server.journal() and time.monotonic() < deadline:
            time.sleep(0.02)
        (gone,) = server.journal()
        assert gone.position == 0  # its step was taken, so it is journalled
        assert gone.client_left is not None
        assert gone.status is None
        assert requests.post(server.invoke_url("seq"), timeout=10).json() == 2


def test_the_request_log_and_the_journal_each_hear_of_every_plain_request_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain step is journalled as planned and its outcome not reported (Plan.journalled),
    unless a request log wants every exchange: then both hear of each, once."""
    caplog.set_level(logging.INFO, logger="mockskill.access")
    for quiet in (True, False):
        caplog.clear()
        with Server(quiet=quiet) as server, requests.Session() as session:
            for n in range(3):
                answer = session.post(server.invoke_url("endpoint-unreachable"), json={"n": n})
                assert answer.status_code == 503
            entries = server.journal()
        assert [e.status for e in entries] == [503, 503, 503]
        assert len({e.body_digest for e in entries}) == 3
        logged = [r.getMessage() for r in caplog.records if r.name == "mockskill.access"]
        assert len(logged) == (0 if quiet else 3)
        assert all('"POST /skills/endpoint-unreachable/invoke HTTP/1.1" 503' in m for m in logged)


# -- the bundled scenarios speak the protocol ----------------------------------------

BASE_INPUT: dict[str, Any] = {"input": {"text": "hello", "lang": "de"}}


def case_request(case: Case) -> dict[str, Any] | None:
    """Body, headers and query of a request that case *case* takes (None: not made here)."""
    body = json.loads(json.dumps(BASE_INPUT))
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    for condition in case.conditions:
        for check in condition.checks:
            if condition.source == "body" and condition.pointer:
                *parents, last = condition.pointer
                owner = body
                for token in parents:
                    owner = owner.setdefault(token, {})
                if check.operator == "absent":
                    owner.pop(last, None)
                elif check.operator in ("equals", "exists"):
                    owner[last] = check.operand if check.operator == "equals" else "x"
                else:
                    return None
            elif condition.source in ("headers", "query") and check.operator == "equals":
                (headers if condition.source == "headers" else query)[condition.name] = str(
                    check.operand
                )
            else:
                return None
    return {"json": body, "headers": headers, "params": query}


ANSWER_WAIT = 3
"""Seconds the test below waits for each answer."""


def answers_in_time(sequence: Sequence) -> bool:
    """Whether a step of *sequence* may answer while the test waits: one that only holds
    the connection for longer has no answer to check, and would cost the wait each time."""
    return any(step.hang_ms is None or step.hang_ms < ANSWER_WAIT * 1000 for step in sequence.steps)


def exchanges(skill: Skill) -> list[tuple[str, str, dict[str, Any]]]:
    """The requests that meet each step and each case of *skill*'s two endpoints."""
    made: list[tuple[str, str, dict[str, Any]]] = []
    for method, suffix, sequence, cases in (
        ("GET", "", skill.describe, skill.describe_cases),
        ("POST", "/invoke", skill.invoke, skill.invoke_cases),
    ):
        plain = {"json": BASE_INPUT} if method == "POST" else {}
        if sequence and answers_in_time(sequence):
            # Every step in turn, then the end; one_of's draws need a few more.
            rounds = 2 + sum(step.times for step in sequence.steps)
            rounds += 6 if any(step.choices for step in sequence.steps) else 0
            made += [(method, suffix, plain)] * rounds
        for case in cases:
            request = case_request(case)
            if request is not None and answers_in_time(case.sequence):
                rounds = 2 + sum(step.times for step in case.sequence.steps)
                made += [(method, suffix, request)] * rounds
    return made


def test_every_bundled_error_answer_is_in_the_unified_body() -> None:
    bundled = load_paths([bundled_path()])
    answers: list[tuple[str, int, Any]] = []

    def play(skill: Skill) -> None:
        with requests.Session() as client:
            client.headers["Mockskill-Session"] = f"unified-{skill.id}"
            for method, suffix, request in exchanges(skill):
                url = f"{server.skill_url(skill.id)}{suffix}"
                try:
                    response = client.request(method, url, timeout=ANSWER_WAIT, **request)
                except requests.RequestException:  # a fault, a hang: no answer to read
                    continue
                if response.status_code >= 400 and "json" in response.headers.get(
                    "Content-Type", ""
                ):
                    answers.append((f"{method} {url}", response.status_code, response.json()))

    with Server(seed=7) as server, ThreadPoolExecutor(len(bundled.skills)) as pool:
        list(pool.map(play, bundled.skills))
        unknown = requests.get(server.skill_url("no-such-skill"), timeout=10)
        answers.append(("GET unknown", unknown.status_code, unknown.json()))
    seen = {code for _, code, _ in answers}
    assert {401, 403, 404, 408, 422, 502, 503, 504} <= seen  # the test met the catalog
    assert 400 in seen  # checks-input's case without input.lang
    wrong = [(where, code, body) for where, code, body in answers if error_body_problem(body)]
    assert wrong == []
