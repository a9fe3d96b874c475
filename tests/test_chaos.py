"""Seeded chaos: random outcomes that replay, honour their odds, and are recorded.

A random step (``one_of``, ``failure_rate``, a drawn delay) draws from a
generator per scenario and session, seeded from the server's seed (or the
scenario's own ``seed:``). So the same seed and the same requests in the same
order give the same outcomes, whatever other sessions do; and every outcome
drawn is in the journal. An outage window answers every request of its
scenario for a while after activation, without moving the sequences.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import Server
from mockskill.engine.state import Entry
from mockskill.scenario.loader import load_text

Serve = Callable[..., Server]

CHAOS = """
    name: chaos
    skills:
      - id: chaos
        invoke:
          steps:
            - one_of:
                - {weight: 2, json: {ok: true}}
                - {weight: 1, error: ENDPOINT_UNREACHABLE}
                - {weight: 1, error: EXECUTION_TIMEOUT}
            - {failure_rate: 0.5, json: {ok: true}}
            - {delay: {uniform: [0, 20]}, json: {ok: true}}
          end: cycle
"""

ODDS = """
    name: odds
    skills:
      - id: weighted
        invoke:
          one_of: [{weight: 3, json: {ok: true}}, {weight: 1, error: ENDPOINT_UNREACHABLE}]
      - id: failing
        invoke: {failure_rate: 0.3, json: {ok: true}}
"""

Outcome = tuple[int | None, int | None, float | None]


def play(server: Server, n: int, session: str = "default", skill: str = "chaos") -> list[int]:
    """*n* invocations of *skill* in *session*, one after another; their statuses."""
    statuses = []
    with requests.Session() as client:
        for _ in range(n):
            response = client.post(
                server.invoke_url(skill), headers={"Mockskill-Session": session}, timeout=10
            )
            statuses.append(response.status_code)
    return statuses


def journal(server: Server, session: str = "default") -> list[Entry]:
    return server.state.journal(session)


def outcomes(server: Server, session: str = "default") -> list[Outcome]:
    """What the journal says was drawn: (status, choice, delay_ms) per request."""
    return [(e.status, e.choice, e.delay_ms) for e in journal(server, session)]


# -- replay ----------------------------------------------------------------------------


def test_the_same_seed_and_requests_replay_the_same_outcomes(serve: Serve) -> None:
    first, second = serve(CHAOS, seed=7), serve(CHAOS, seed=7)
    statuses = play(first, 60)
    assert play(second, 60) == statuses
    assert [e.choice for e in journal(second)] == [e.choice for e in journal(first)]
    assert [e.delay_ms for e in journal(second)] == [e.delay_ms for e in journal(first)]
    # Not a constant sequence: the draws did vary.
    assert {200, 503, 504} <= set(statuses)
    assert len({e.delay_ms for e in journal(first) if e.delay_ms is not None}) > 10


def test_another_seed_draws_other_outcomes(serve: Serve) -> None:
    seven, eight = serve(CHAOS, seed=7), serve(CHAOS, seed=8)
    assert play(seven, 60) != play(eight, 60)
    assert [e.choice for e in journal(seven)] != [e.choice for e in journal(eight)]
    assert [e.delay_ms for e in journal(seven)] != [e.delay_ms for e in journal(eight)]


def test_the_server_reports_its_seed(serve: Serve) -> None:
    server = serve(CHAOS, seed=7)
    assert server.seed == 7
    health = requests.get(f"{server.url}/__admin/health", timeout=10).json()
    assert health["seed"] == 7


def test_a_scenarios_own_seed_wins_over_the_servers(serve: Serve) -> None:
    seeded = CHAOS.replace("    name: chaos\n", "    name: chaos\n    seed: 99\n")
    one, two = serve(seeded, seed=1), serve(seeded, seed=2)
    assert one.engine.scenarios.scenarios[0].seed == 99
    assert play(one, 60) == play(two, 60)
    assert outcomes(one) == outcomes(two)


def test_sessions_draw_from_independent_streams(serve: Serve) -> None:
    alone, shared = serve(CHAOS, seed=7), serve(CHAOS, seed=7)
    play(alone, 30, session="a")
    for _ in range(30):  # the same requests of session a, with b's in between
        play(shared, 1, session="b")
        play(shared, 1, session="a")
    assert outcomes(shared, "a") == outcomes(alone, "a")
    # b has a stream of its own, not a copy of a's.
    assert outcomes(shared, "b") != outcomes(shared, "a")


def test_the_same_session_replays_on_another_server_whatever_came_before(serve: Serve) -> None:
    fresh, busy = serve(CHAOS, seed=7), serve(CHAOS, seed=7)
    play(busy, 25, session="someone-else")
    assert play(busy, 30, session="s") == play(fresh, 30, session="s")
    assert outcomes(busy, "s") == outcomes(fresh, "s")


# -- odds ------------------------------------------------------------------------------


def test_weights_are_honoured(serve: Serve) -> None:
    server = serve(ODDS, seed=7)
    statuses = play(server, 400, skill="weighted")
    share = statuses.count(200) / len(statuses)
    assert 0.65 <= share <= 0.85  # 3:1 is 75 %
    assert set(statuses) == {200, 503}
    choices = [e.choice for e in journal(server)]
    assert choices.count(0) == statuses.count(200)


def test_a_failure_rate_fails_about_that_often(serve: Serve) -> None:
    server = serve(ODDS, seed=7)
    statuses = play(server, 400, skill="failing")
    failures = [s for s in statuses if s != 200]
    assert 0.20 <= len(failures) / len(statuses) <= 0.40  # 30 %
    assert set(failures) == {503}  # the default failure: ENDPOINT_UNREACHABLE
    codes = {e.error_code for e in journal(server) if e.status == 503}
    assert codes == {"ENDPOINT_UNREACHABLE"}


def test_odds_hold_for_any_seed(serve: Serve) -> None:
    for seed in (1, 2, 3):
        server = serve(ODDS, seed=seed)
        statuses = play(server, 100, skill="weighted")
        assert 0.6 <= statuses.count(200) / len(statuses) <= 0.9


# -- the journal -----------------------------------------------------------------------


def test_each_random_outcome_is_recorded_in_the_journal(serve: Serve) -> None:
    server = serve(CHAOS, seed=7)
    statuses = play(server, 30)
    entries = journal(server)
    assert [e.status for e in entries] == statuses
    one_of_status = {0: 200, 1: 503, 2: 504}
    failure_rate_status = {0: 503, 1: 200}  # the failure is the first outcome
    for entry in entries:
        assert entry.step is not None
        if entry.step == 0:  # one_of: which outcome
            assert entry.choice in one_of_status
            assert entry.status == one_of_status[entry.choice]
            assert entry.delay_ms is None
        elif entry.step == 1:  # failure_rate: failed or not
            assert entry.choice in failure_rate_status
            assert entry.status == failure_rate_status[entry.choice]
            assert entry.delay_ms is None
        else:  # a drawn delay
            assert entry.choice is None
            assert entry.delay_ms is not None
            assert 0 <= entry.delay_ms <= 20
            assert entry.finished - entry.started >= entry.delay_ms / 1000 - 0.002
    assert [e.step for e in entries] == [0, 1, 2] * 10


def test_the_journal_records_drawn_delays_inside_outcomes(serve: Serve) -> None:
    server = serve(
        """
        name: nested
        skills:
          - id: mixed
            invoke:
              one_of:
                - {delay: {uniform: [10, 40]}, json: 1}
                - {delay: {lognormal: {median: 20, sigma: 0.5, cap: 60}}, json: 2}
        """,
        seed=3,
    )
    with requests.Session() as client:
        bodies = [client.post(server.invoke_url("mixed"), timeout=10).json() for _ in range(20)]
    entries = journal(server)
    assert [e.choice for e in entries] == [body - 1 for body in bodies]
    for entry in entries:
        assert entry.delay_ms is not None
        if entry.choice == 0:
            assert 10 <= entry.delay_ms <= 40
        else:
            assert 0 < entry.delay_ms <= 60


# -- the seed at start -----------------------------------------------------------------


def first_line(process: subprocess.Popen[str], within: float = 15.0) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=within):
            process.kill()
            pytest.fail(f"mockskill serve printed nothing within {within} s")
    return process.stdout.readline()


def serve_process(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    scenario = tmp_path / "chaos.yaml"
    scenario.write_text(textwrap.dedent(CHAOS), encoding="utf-8")
    command = [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--quiet", *args]
    return subprocess.Popen(
        [*command, str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return process.returncode, err


BANNER = re.compile(r"^mockskill \S+ serving .* at (http://\S+)\s+\(seed (\d+); Ctrl-C stops\)$")


@pytest.mark.parametrize(
    ("args", "wanted"), [(("--seed", "123"), 123), ((), None)], ids=["given", "drawn"]
)
def test_serve_prints_the_seed_at_start(
    tmp_path: Path, args: tuple[str, ...], wanted: int | None
) -> None:
    process = serve_process(tmp_path, *args)
    try:
        line = first_line(process).rstrip("\n")
        match = BANNER.match(line)
        assert match, line
        url, printed = match.group(1), int(match.group(2))
        if wanted is not None:
            assert printed == wanted
        health: dict[str, Any] = requests.get(f"{url}/__admin/health", timeout=10).json()
        assert health["seed"] == printed  # the seed printed is the seed in use
    finally:
        code, err = stop(process)
    assert code == 0
    assert "mockskill stopped." in err


def test_the_printed_seed_replays_the_run(tmp_path: Path, serve: Serve) -> None:
    process = serve_process(tmp_path)
    try:
        match = BANNER.match(first_line(process).rstrip("\n"))
        assert match
        url, seed = match.group(1), int(match.group(2))
        with requests.Session() as client:
            statuses = [client.post(f"{url}/skills/chaos/invoke", timeout=10) for _ in range(30)]
    finally:
        stop(process)
    replay = serve(CHAOS, seed=seed)
    assert play(replay, 30) == [r.status_code for r in statuses]


# -- outage windows --------------------------------------------------------------------

OUTAGE = """
    name: down
    outage: {start: 0, duration: 1000, step: {error: ENDPOINT_UNREACHABLE}}
    skills:
      - id: seq
        invoke:
          steps: [{json: 1}, {json: 2}, {json: 3}]
          end: cycle
    ---
    name: up
    skills:
      - id: other
"""


class Activated:
    """When a server's scenarios were activated, bounded: made between *before* and *after*
    (the Server is built, which activates them, between the two)."""

    def __init__(self, text: str) -> None:
        self.before = time.monotonic()
        self.server = Server(load_text(textwrap.dedent(text), "test.yaml"))
        self.after = time.monotonic()

    def at_most(self) -> float:
        """Seconds since activation, at most (the assertion that the test is in time)."""
        return time.monotonic() - self.before

    def wait_until(self, seconds: float) -> None:
        """Sleep until at least *seconds* have passed since activation."""
        time.sleep(max(0.0, seconds - (time.monotonic() - self.after)))


def test_an_outage_answers_for_the_sequence_without_moving_it() -> None:
    activated = Activated(OUTAGE)
    with activated.server as server, requests.Session() as client:
        assert activated.at_most() < 0.6, "too slow to test inside the window"
        during = [client.post(server.invoke_url("seq"), timeout=10) for _ in range(3)]
        other = client.post(server.invoke_url("other"), timeout=10)
        descriptor = client.get(server.skill_url("seq"), timeout=10)
        assert activated.at_most() < 1.0
        activated.wait_until(1.1)
        after = [client.post(server.invoke_url("seq"), timeout=10) for _ in range(4)]

    assert [r.status_code for r in during] == [503, 503, 503]
    assert {r.json()["error"]["code"] for r in during} == {"ENDPOINT_UNREACHABLE"}
    assert descriptor.status_code == 503  # every endpoint of the scenario is down
    assert other.status_code == 200  # another scenario is not in the outage
    # The window over, the sequence starts from its first step: it was not moved.
    assert [r.json() for r in after] == [1, 2, 3, 1]

    entries = [e for e in journal(server) if e.skill == "seq" and e.endpoint == "invoke"]
    assert [e.outage for e in entries] == [True] * 3 + [False] * 4
    assert [e.position for e in entries] == [None] * 3 + [0, 1, 2, 3]
    assert all(e.error_code == "ENDPOINT_UNREACHABLE" for e in entries[:3])
    assert all(e.status == 503 for e in entries[:3])


def test_an_outage_may_start_later_and_the_sequence_resumes_where_it_was() -> None:
    activated = Activated(
        """
        name: blip
        outage: {start: 500, duration: 500}
        skills:
          - id: seq
            invoke:
              steps: [{json: 1}, {json: 2}, {json: 3}]
              end: cycle
        """
    )
    with activated.server as server, requests.Session() as client:
        before = client.post(server.invoke_url("seq"), timeout=10)
        assert activated.at_most() < 0.5, "too slow to test before the window"
        activated.wait_until(0.6)
        during = [client.post(server.invoke_url("seq"), timeout=10) for _ in range(2)]
        assert activated.at_most() < 1.0
        activated.wait_until(1.1)
        after = client.post(server.invoke_url("seq"), timeout=10)

    assert before.json() == 1
    # No step given: the outage is ENDPOINT_UNREACHABLE.
    assert [r.status_code for r in during] == [503, 503]
    assert {r.json()["error"]["code"] for r in during} == {"ENDPOINT_UNREACHABLE"}
    assert after.json() == 2
    assert [e.outage for e in journal(server)] == [False, True, True, False]


def test_an_outage_step_can_be_any_step(serve: Serve) -> None:
    server = serve(
        """
        name: slowdown
        outage: {duration: 5000, step: {status: 500, text: maintenance}}
        skills:
          - id: a
        """
    )
    response = requests.post(server.invoke_url("a"), timeout=10)
    assert response.status_code == 500
    assert response.text == "maintenance"
    (entry,) = journal(server)
    assert entry.outage
    assert entry.status == 500
