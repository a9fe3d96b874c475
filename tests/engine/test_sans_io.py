"""The engine plans, the transport plays: planning never sleeps nor touches a socket.

Every step kind that waits or breaks the wire (delays, a hang, an execution
cut by ``timeout_ms``, a dribble, the transport faults, the keep-alive faults)
is planned here with ``time.sleep``, ``asyncio.sleep``, ``select`` and every
socket operation made to fail: the plan comes back at once, and says as data
what the transport is to do.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import select
import socket
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mockskill import Server, load_text
from mockskill.engine.plan import Answer, Outcome, Plan, Stale, WaitKind
from mockskill.server.dispatch import LoopDispatcher
from mockskill.transport import Request

SCENARIO = """
    name: every-wait
    skills:
      - id: delayed
        invoke: {delay: 30000, json: {result: late}}
      - id: long-tail
        invoke: {delay: {lognormal: {median: 20000, sigma: 1.0, cap: 60000}}, json: {result: ok}}
      - id: hung
        invoke: {hang: 30000}
      - id: cut
        timeout_ms: 1000
        invoke: {execution: 30000, json: {result: never}}
      - id: dribbled
        invoke: {dribble: {chunks: 10, over: 30000}, json: {result: slowly}}
      - id: reset
        invoke: {fault: CONNECTION_RESET_BY_PEER, delay: 30000}
      - id: truncated
        invoke: {fault: TRUNCATED_BODY, json: {result: ok}}
      - id: stale
        invoke:
          json: {result: ok}
          keep_alive: {stale_after_ms: 30000, stale: drop_next}
      - id: limited
        invoke:
          json: {result: ok}
          keep_alive: {max_requests: 2}
"""


def forbidden(what: str) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        raise AssertionError(f"the engine called {what} while planning")

    return fail


@pytest.fixture
def surface() -> Iterator[LoopDispatcher]:
    """A server's loop surface, planned in process: no socket carries the request."""
    server = Server(load_text(textwrap.dedent(SCENARIO), "test.yaml"), quiet=True)
    server.engine.open()
    loop = LoopDispatcher(server.engine, server._admin_wsgi)
    yield loop
    loop.close()
    server.engine.close()


@pytest.fixture
def no_io() -> Iterator[None]:
    # No collection runs while the engine plans: sockets an earlier test left to the
    # collector would call the forbidden close from their finalizers. Collecting them first
    # instead costs a full pass over the suite's heap before each test.
    enabled = gc.isenabled()
    gc.disable()
    try:
        with pytest.MonkeyPatch.context() as patch:  # undone before the collector is back
            patch.setattr(time, "sleep", forbidden("time.sleep"))
            patch.setattr(asyncio, "sleep", forbidden("asyncio.sleep"))
            patch.setattr(select, "select", forbidden("select.select"))
            patch.setattr(threading.Event, "wait", forbidden("threading.Event.wait"))
            for name in ("connect", "send", "sendall", "recv", "recv_into", "close", "shutdown"):
                patch.setattr(socket.socket, name, forbidden(f"socket.{name}"))
            patch.setattr(socket, "create_connection", forbidden("socket.create_connection"))
            yield
    finally:
        if enabled:
            gc.enable()


def invoke(skill: str) -> Request:
    return Request(
        method="POST",
        target=f"/skills/{skill}/invoke",
        version="1.1",
        headers=(("Host", "127.0.0.1:8080"), ("Content-Length", "2")),
        body=b"{}",
        peer=("127.0.0.1", 50000),
        local=("127.0.0.1", 8080),
        time=time.time(),
        connection=1,
        index=1,
    )


def planned(surface: LoopDispatcher, skill: str) -> Plan:
    started = time.perf_counter()
    plan = surface.plan(invoke(skill))
    # Seconds of scripted waiting, planned in well under one: nothing was waited for.
    assert time.perf_counter() - started < 0.5
    assert isinstance(plan, Plan)
    return plan


@pytest.mark.usefixtures("no_io")
@pytest.mark.parametrize(
    ("skill", "kind", "ms"),
    [
        ("delayed", WaitKind.DELAY, 30000),
        ("hung", WaitKind.HANG, 30000),
        ("cut", WaitKind.EXECUTION, 30000),
    ],
    ids=["delay", "hang", "execution"],
)
def test_a_wait_is_planned_as_data_not_waited(
    surface: LoopDispatcher, skill: str, kind: WaitKind, ms: float
) -> None:
    plan = planned(surface, skill)
    assert not plan.instant
    (wait,) = plan.waits
    assert (wait.kind, wait.ms) == (kind, ms)


@pytest.mark.usefixtures("no_io")
def test_an_execution_past_the_timeout_is_planned_with_its_cut(surface: LoopDispatcher) -> None:
    (wait,) = planned(surface, "cut").waits
    assert wait.cut is not None
    assert wait.cut.after_ms == 1000


@pytest.mark.usefixtures("no_io")
def test_a_long_tail_delay_is_drawn_when_planned(surface: LoopDispatcher) -> None:
    (wait,) = planned(surface, "long-tail").waits
    assert 0 < wait.ms <= 60000


@pytest.mark.usefixtures("no_io")
def test_a_dribble_is_planned_as_chunks_and_pauses(surface: LoopDispatcher) -> None:
    plan = planned(surface, "dribbled")
    assert plan.dribble is not None
    assert plan.dribble.over_ms == 30000


@pytest.mark.usefixtures("no_io")
@pytest.mark.parametrize(
    ("skill", "fault", "waits"),
    [("reset", "CONNECTION_RESET_BY_PEER", 1), ("truncated", "TRUNCATED_BODY", 0)],
    ids=["reset-after-a-delay", "truncated"],
)
def test_a_transport_fault_is_planned_not_done(
    surface: LoopDispatcher, skill: str, fault: str, waits: int
) -> None:
    plan = planned(surface, skill)
    assert plan.fault is not None
    assert plan.fault == fault
    assert len(plan.waits) == waits


@pytest.mark.usefixtures("no_io")
def test_keep_alive_faults_are_planned_for_the_transport(surface: LoopDispatcher) -> None:
    stale = planned(surface, "stale").keep_alive
    assert stale is not None
    assert (stale.stale_after_ms, stale.stale) == (30000, Stale.DROP_NEXT)
    limited = planned(surface, "limited").keep_alive
    assert limited is not None
    assert limited.max_requests == 2


@pytest.mark.usefixtures("no_io")
def test_a_cut_is_plain_data_that_answers_the_time_measured(surface: LoopDispatcher) -> None:
    """No closure in a plan: the same request planned again is an equal plan, and the
    cut's answer is a value that renders the milliseconds the transport measured."""
    plan = planned(surface, "cut")
    assert planned(surface, "cut") == plan
    (wait,) = plan.waits
    assert wait.cut is not None
    measured = wait.cut.answer
    assert not isinstance(measured, Answer)
    assert not inspect.isfunction(measured)
    answer = measured.answer(1234.4)
    assert answer.status == 504
    error = json.loads(answer.body)["error"]
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["details"] == {"timeout_ms": 1000, "elapsed_ms": 1234}


def test_the_journal_reads_a_cut_from_the_outcome(surface: LoopDispatcher) -> None:
    """What the cut did is derived from the transport's Outcome (its ``cut_ms``), not
    written aside while the plan played: an outcome reported without the cut's answer
    ever being made still journals the timeout."""
    cut_short, served_whole = invoke("cut"), invoke("cut")
    plan = planned(surface, "cut")
    for request in (cut_short, served_whole):
        assert surface.plan(request) == plan
    started = time.time()
    sent = Answer(504, (("Content-Type", "application/json"),), b"{}")
    outcome = Outcome(sent, started, last_byte_at=started, cut=True, cut_ms=1000.0)
    surface.played(cut_short, outcome)
    surface.played(served_whole, Outcome(plan.answer, started, last_byte_at=started))
    cut, served = surface.engine.state.journal()[-2:]
    assert (cut.skill, cut.status, cut.error_code) == ("cut", 504, "EXECUTION_TIMEOUT")
    assert (served.skill, served.status, served.error_code) == ("cut", 200, None)
