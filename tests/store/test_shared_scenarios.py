"""One set of scenarios for every replica: real servers sharing a set on a real Redis.

Each test starts two or three :class:`~mockskill.Server` s on one Redis
(``shared_scenarios=URL``), changes the set on one of them over
``/__admin/scenarios`` (or from Python, or by editing watched files), and
watches the others serve the change: within about a second, through the
announcement or the one-second catch-up poll (docs/admin.md, "One set for
every replica"). Their state (positions, journal) is each server's own here:
sharing the set is separate from sharing the state.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests

from mockskill import ScenarioError, Server, load_text
from mockskill.engine.store import StoreUnavailable
from mockskill.server import ServerError
from mockskill.store.scenarios import SharedScenarios

Replica = Callable[..., Server]
YAML = {"Content-Type": "application/yaml"}
CONVERGED = 5.0
"""Seconds a change may take to reach another replica here (the promise is ~1 s, usually
milliseconds; the margin is for two loaded cores)."""

COUNTER = """\
name: counter
skills:
  - id: count
    invoke: [{json: {n: 1}}, {json: {n: 2}}, {json: {n: 3}}]
"""
ORDERS = """\
name: orders
skills:
  - id: orders
    invoke: {json: {orders: []}}
"""
ORDERS_DOWN = """\
name: orders-down
skills:
  - id: orders
    invoke: {error: ENDPOINT_UNREACHABLE}
"""


@pytest.fixture
def replica(redis_url: str) -> Iterator[Replica]:
    """``replica(text=None, **kwargs)``: a started Server sharing the set on *redis_url*."""
    servers: list[Server] = []

    def start(text: str | None = None, **kwargs: Any) -> Server:
        kwargs.setdefault("shared_scenarios", redis_url)
        scenarios = kwargs.pop("scenarios", None)
        if text is not None:
            scenarios = load_text(text, "test.yaml")
        server = Server(scenarios, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def admin(server: Server, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(method, f"{server.url}/__admin{path}", timeout=10, **kwargs)


def post(server: Server, text: str, **params: str) -> requests.Response:
    return admin(server, "POST", "/scenarios", data=text, headers=YAML, params=params)


def listed(server: Server) -> list[tuple[str, bool]]:
    body = admin(server, "GET", "/scenarios").json()
    return [(s["name"], s["active"]) for s in body["scenarios"]]


def invoke(server: Server, skill: str) -> requests.Response:
    return requests.post(server.invoke_url(skill), json={}, timeout=10)


def code(response: requests.Response) -> str:
    return str(response.json()["error"]["code"])


def is_down(server: Server) -> bool:
    """Whether *server* serves ``orders-down``'s answer for skill ``orders``."""
    body = invoke(server, "orders").json()
    return bool(body.get("error", {}).get("code") == "ENDPOINT_UNREACHABLE")


def until(check: Callable[[], bool], within: float = CONVERGED) -> float:
    """Seconds until *check* holds (polled); fails the test after *within*."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > within:
            pytest.fail(f"not converged within {within} s")
        time.sleep(0.01)
    return time.monotonic() - start


def stored_version(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        raw = client.hget("mockskill:scenarios", "version")
        return int(raw) if raw is not None else 0
    finally:
        client.close()


# -- a change on one replica, served by all ---------------------------------------------------


def test_a_scenario_loaded_on_one_replica_is_served_by_the_others_within_a_second(
    replica: Replica,
) -> None:
    a = replica(COUNTER)
    b, c = replica(), replica()  # started without files: they join the set stored
    assert listed(b) == listed(c) == [("counter", True)]

    assert post(a, ORDERS).status_code == 201

    took = until(lambda: invoke(b, "orders").status_code == 200)
    until(lambda: invoke(c, "orders").status_code == 200)
    assert invoke(b, "orders").json() == {"orders": []}
    assert took < CONVERGED
    assert listed(a) == listed(b) == listed(c) == [("counter", True), ("orders", True)]
    # what each lists was read from the same text, with the same origin and times
    a_view, b_view = (admin(s, "GET", "/scenarios/orders").json() for s in (a, b))
    for key in ("origin", "loaded", "activated", "active", "description"):
        assert a_view[key] == b_view[key]


def test_a_scenario_removed_on_one_replica_is_gone_from_the_others(replica: Replica) -> None:
    a = replica(COUNTER)
    b = replica()
    assert post(a, ORDERS).status_code == 201
    until(lambda: invoke(b, "orders").status_code == 200)

    assert admin(b, "DELETE", "/scenarios/orders").status_code == 200

    until(lambda: invoke(a, "orders").status_code == 404)
    assert listed(a) == listed(b) == [("counter", True)]


def test_activating_and_deactivating_on_one_replica_switches_every_replica(
    replica: Replica,
) -> None:
    a = replica(ORDERS)
    b = replica()
    assert post(b, ORDERS_DOWN, active="false").status_code == 201
    until(lambda: ("orders-down", False) in listed(a))

    assert admin(a, "POST", "/scenarios/orders/deactivate").status_code == 200
    assert admin(a, "POST", "/scenarios/orders-down/activate").status_code == 200

    until(lambda: is_down(b))
    assert listed(b) == [("orders", False), ("orders-down", True)]
    assert is_down(a)


def test_a_sequence_changed_elsewhere_restarts_and_one_left_alone_goes_on(
    replica: Replica,
) -> None:
    a = replica(COUNTER)
    b = replica()
    assert [invoke(b, "count").json()["n"] for _ in range(2)] == [1, 2]

    # A change that leaves the counter as it was: B's counter goes on where it was.
    assert post(a, ORDERS).status_code == 201
    until(lambda: invoke(b, "orders").status_code == 200)
    assert invoke(b, "count").json() == {"n": 3}

    # Replacing the counter restarts its sequence on B too (each replica's own state here).
    changed = COUNTER.replace("{n: 1}", "{n: 10}")
    assert post(a, changed, replace="true").status_code == 201
    until(lambda: b.registry.version == a.registry.version)
    assert invoke(b, "count").json() == {"n": 10}


def test_a_replaced_scenario_keeps_the_name_it_was_put_under_on_every_replica(
    replica: Replica,
) -> None:
    a = replica(COUNTER)
    b = replica()
    text = "skills:\n  - id: renamed\n    invoke: {json: {put: true}}\n"
    response = admin(a, "PUT", "/scenarios/given-name", data=text, headers=YAML)
    assert response.status_code == 201

    until(lambda: invoke(b, "renamed").status_code == 200)
    assert listed(b) == [("counter", True), ("given-name", True)]


# -- a refused change changes nothing anywhere --------------------------------------------------


def test_a_refused_change_changes_nothing_on_any_replica(replica: Replica, redis_url: str) -> None:
    a = replica(ORDERS)
    b = replica()
    version = stored_version(redis_url)

    invalid = post(a, "name: broken\nskills:\n  - id: x\n    invok: {json: 1}\n")
    clash = post(a, ORDERS_DOWN)  # serves skill id 'orders', which 'orders' serves
    unknown = admin(a, "POST", "/scenarios/nothing/activate")

    assert (invalid.status_code, code(invalid)) == (422, "MOCKSKILL_INVALID_SCENARIO")
    assert (clash.status_code, code(clash)) == (409, "MOCKSKILL_SCENARIO_CONFLICT")
    assert unknown.status_code == 404
    assert stored_version(redis_url) == version
    time.sleep(1.5)  # past one catch-up poll: nothing arrives on B either
    assert listed(a) == listed(b) == [("orders", True)]


def test_a_change_planned_on_a_stale_set_is_checked_again_on_the_newer_one(
    replica: Replica, redis_url: str
) -> None:
    a = replica(ORDERS)
    b = replica()
    b.stop()  # B hears nothing now (its listener is stopped)
    assert post(a, COUNTER).status_code == 201
    version = stored_version(redis_url)
    assert [e.name for e in b.scenarios] == ["orders"]  # B has not heard of it

    # B's change is planned again on the stored set, where the name is taken.
    with pytest.raises(ScenarioError, match="'counter', loaded already"):
        b.add(COUNTER.replace("id: count", "id: other"))

    assert stored_version(redis_url) == version
    assert [e.name for e in b.scenarios] == ["orders", "counter"]


def test_changes_made_at_once_on_two_replicas_are_all_kept(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER)
    b = replica()
    failures: list[str] = []

    def load_many(server: Server, prefix: str) -> None:
        for i in range(8):
            text = f"name: {prefix}-{i}\nskills:\n  - id: {prefix}-{i}\n    invoke: {{json: 1}}\n"
            response = post(server, text)
            if response.status_code != 201:
                failures.append(response.text)

    threads = [threading.Thread(target=load_many, args=(s, p)) for s, p in ((a, "a"), (b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert stored_version(redis_url) == 1 + 16  # one version each: none lost, none twice
    expected = {"counter"} | {f"{p}-{i}" for p in "ab" for i in range(8)}
    until(lambda: {name for name, _ in listed(a)} == {name for name, _ in listed(b)} == expected)


# -- catching up: missed announcements, late replicas, restarts -------------------------------


def test_a_replica_whose_subscription_was_cut_catches_up(replica: Replica, redis_url: str) -> None:
    a = replica(COUNTER)
    b = replica()
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.client_kill_filter(_type="pubsub") >= 2
        # Announced while nobody listens (the listeners are reconnecting, or not yet).
        assert post(a, ORDERS).status_code == 201
    finally:
        client.close()
    until(lambda: invoke(b, "orders").status_code == 200)


def test_a_version_written_without_announcement_is_caught_up_by_the_poll(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER)
    b = replica()
    # A change another process wrote whose message was lost: rewritten set, no PUBLISH.
    client = redis.Redis.from_url(redis_url)
    try:
        stored = client.hgetall("mockskill:scenarios")
        version = int(stored[b"version"])
        changed = stored[b"set"].replace(b"{n: 1}", b"{n: 100}")
        client.hset("mockskill:scenarios", mapping={"version": version + 1, "set": changed})
    finally:
        client.close()

    took = until(lambda: invoke(b, "count").json() == {"n": 100})
    until(lambda: invoke(a, "count").json() == {"n": 100})
    assert took < CONVERGED


def test_a_replica_started_later_serves_the_set_as_it_is_now(replica: Replica) -> None:
    a = replica(COUNTER)
    assert post(a, ORDERS).status_code == 201
    assert admin(a, "POST", "/scenarios/counter/deactivate").status_code == 200

    late = replica()  # no files: joins

    assert listed(late) == [("counter", False), ("orders", True)]
    assert invoke(late, "orders").status_code == 200
    assert invoke(late, "count").status_code == 404


def test_replicas_started_from_the_same_files_publish_one_version(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER)
    assert stored_version(redis_url) == 1
    assert post(a, ORDERS).status_code == 201  # a run-time change, version 2

    b = replica(COUNTER)  # the same files: the stored set (with its change) is served

    assert stored_version(redis_url) == 2
    assert listed(b) == [("counter", True), ("orders", True)]


def test_a_replica_started_from_other_files_publishes_them_for_everyone(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER)
    assert post(a, ORDERS).status_code == 201

    b = replica(ORDERS_DOWN)  # a new deployment's files are the truth

    assert stored_version(redis_url) == 3
    until(lambda: listed(a) == [("orders-down", True)])
    assert listed(b) == [("orders-down", True)]
    assert is_down(a)


def test_replicas_watching_the_same_files_converge_with_one_version(
    replica: Replica, redis_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "counter.yaml").write_text(COUNTER)
    a = replica(scenarios=folder)
    b = replica(scenarios=folder)
    assert stored_version(redis_url) == 1
    results: list[str] = []
    for server in (a, b):
        server.watch([folder], interval=0.05, on_reload=lambda r: results.append(r.status))

    (folder / "counter.yaml").write_text(COUNTER.replace("{n: 1}", "{n: 7}"))

    until(lambda: invoke(a, "count").json() == {"n": 7})
    until(lambda: invoke(b, "count").json() == {"n": 7})
    until(lambda: len(results) == 2)
    time.sleep(1.5)  # past a catch-up poll: no second version comes
    assert results == ["ok", "ok"]
    assert stored_version(redis_url) == 2
    assert a.registry.version == b.registry.version == 2


def test_a_replica_with_a_different_max_delay_keeps_its_last_good_set(
    replica: Replica, caplog: pytest.LogCaptureFixture
) -> None:
    a = replica(COUNTER)
    b = replica(COUNTER, max_delay_ms=100)
    slow = "name: slow\nskills:\n  - id: slow\n    invoke: {json: 1, delay: 200}\n"

    assert post(a, slow).status_code == 201

    until(lambda: b.registry.version == a.registry.version)
    assert listed(b) == [("counter", True)]
    assert "cannot be served here" in caplog.text


# -- reset, everywhere --------------------------------------------------------------------------


def test_a_reset_on_one_replica_resets_every_replica(replica: Replica) -> None:
    a = replica(COUNTER)
    b = replica()
    assert [invoke(s, "count").json()["n"] for s in (a, a, b, b)] == [1, 2, 1, 2]

    assert admin(a, "POST", "/reset?all=true").status_code == 200

    until(lambda: b.journal() == [])
    assert [invoke(s, "count").json()["n"] for s in (a, b)] == [1, 1]


def test_a_reset_of_one_session_reaches_every_replica(replica: Replica) -> None:
    a = replica(COUNTER)
    b = replica()
    for session in ("one", "two"):
        headers = {"Mockskill-Session": session}
        response = requests.post(b.invoke_url("count"), json={}, headers=headers, timeout=10)
        assert response.json() == {"n": 1}

    a.reset("one")

    until(lambda: {e.session for e in b.journal()} == {"two"})


# -- Redis down: a clear answer, the last good set served ---------------------------------------


def test_with_redis_down_a_change_is_refused_clearly_and_every_replica_serves_on(
    own_redis: Callable[..., Any],
) -> None:
    store = own_redis()
    a = Server(load_text(COUNTER, "test.yaml"), shared_scenarios=store.url).start()
    b = Server(shared_scenarios=store.url).start()
    try:
        store.stop()

        refused = post(a, ORDERS)
        with pytest.raises(StoreUnavailable) as from_python:
            a.remove("counter")
        reset = admin(b, "POST", "/reset?all=true")
        health = admin(a, "GET", "/health").json()

        assert refused.status_code == 503
        body = refused.json()["error"]
        assert body["code"] == "MOCKSKILL_STATE_UNAVAILABLE"
        assert "cannot be reached" in body["message"]
        assert "nothing was changed" in body["message"]
        assert store.url.split("@")[-1].split("/")[0] in body["message"]
        assert "cannot be reached" in str(from_python.value)
        assert reset.status_code == 503
        assert "the others were not told" in reset.json()["error"]["message"]
        assert health["status"] == "ok"  # serving: the last good set
        for server in (a, b):
            assert listed(server) == [("counter", True)]
            assert invoke(server, "count").status_code == 200

        store.start()  # empty: the replicas publish what they serve again

        until(lambda: stored_version(store.url) >= 1)
        assert post(a, ORDERS).status_code == 201
        until(lambda: invoke(b, "orders").status_code == 200)
    finally:
        a.stop()
        b.stop()


def test_a_reload_with_redis_down_fails_says_why_and_is_made_once_redis_is_back(
    own_redis: Callable[..., Any], tmp_path: Path
) -> None:
    store = own_redis()
    (tmp_path / "counter.yaml").write_text(COUNTER)
    a = Server(tmp_path, shared_scenarios=store.url).start()
    b = Server(shared_scenarios=store.url).start()
    try:
        store.stop()
        (tmp_path / "counter.yaml").write_text(COUNTER.replace("{n: 1}", "{n: 7}"))

        result = a.reload([tmp_path])

        assert result.status == "failed"
        assert "cannot be reached" in result.problems[0].found
        assert invoke(a, "count").json() == {"n": 1}

        store.start()  # the files are read again, and the change reaches every replica

        until(lambda: a.last_reload is not None and a.last_reload.ok)
        assert invoke(a, "count").json() == {"n": 7}
        until(lambda: b.registry.version == a.registry.version)
        assert invoke(b, "count").json() == {"n": 7}
    finally:
        a.stop()
        b.stop()


def test_a_server_cannot_start_sharing_a_set_it_cannot_reach(own_redis: Callable[..., Any]) -> None:
    store = own_redis()
    store.stop()
    with pytest.raises(ServerError, match=r"cannot be reached.*is Redis running there"):
        Server(load_text(COUNTER, "test.yaml"), shared_scenarios=store.url)
    with pytest.raises(ServerError, match="expected 'memory' or a URL"):
        Server(shared_scenarios="http://cache:6379")


def test_a_server_that_shares_nothing_never_imports_the_redis_client() -> None:
    program = (
        "import sys, mockskill\n"
        "s = mockskill.Server().start()\n"
        "s.add('name: x\\nroutes: [{path: /x, steps: [{json: 1}]}]\\n')\n"
        "s.reset(); s.stop()\n"
        "assert 'redis' not in sys.modules, 'redis imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()


# -- with the state shared too (Server(state=URL) shares the set on the same Redis) -------------

OUTAGE = """\
name: short-outage
outage:
  start: 0
  duration: 1500
  step: {error: ENDPOINT_UNREACHABLE}
skills:
  - id: recovering
    invoke: {json: {result: ok}}
"""


def test_a_shared_state_shares_the_scenario_set_on_the_same_redis(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER, shared_scenarios=None, state=redis_url)
    b = replica(shared_scenarios=None, state=redis_url)

    assert post(a, ORDERS).status_code == 201

    until(lambda: invoke(b, "orders").status_code == 200)
    assert admin(b, "GET", "/health").json()["scenario_set"] == {"version": 2}


def test_with_a_shared_state_a_sequence_changed_elsewhere_restarts_once(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER, state=redis_url)
    b = replica(state=redis_url)
    assert [invoke(s, "count").json()["n"] for s in (a, b)] == [1, 2]  # one sequence

    assert post(a, COUNTER.replace("{n: 1}", "{n: 10}"), replace="true").status_code == 201
    assert invoke(a, "count").json() == {"n": 10}  # restarted by A, in the shared state
    until(lambda: b.registry.version == a.registry.version)

    assert invoke(b, "count").json() == {"n": 2}  # B did not restart it again


def test_with_a_shared_state_a_reset_on_one_replica_is_everyones_once(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER, state=redis_url)
    b = replica(state=redis_url)
    assert [invoke(s, "count").json()["n"] for s in (a, b)] == [1, 2]

    assert admin(a, "POST", "/reset?all=true").status_code == 200
    assert invoke(a, "count").json() == {"n": 1}
    # An announcement that reaches B late (here: after A's request, on purpose) must not
    # reset the shared state again: the replica that announced it reset it already.
    client = redis.Redis.from_url(redis_url)
    try:
        heard = client.publish("mockskill:scenarios:resets", '{"from": "c", "session": null}')
    finally:
        client.close()
    assert heard == 2
    time.sleep(0.5)

    assert invoke(b, "count").json() == {"n": 2}
    assert [e.path for e in b.journal()] == ["/skills/count/invoke"] * 2  # both replicas'


def test_with_a_shared_state_a_replica_joining_later_leaves_outage_windows_alone(
    replica: Replica, redis_url: str
) -> None:
    a = replica(OUTAGE, state=redis_url)
    assert invoke(a, "recovering").status_code != 200  # in the window
    until(lambda: invoke(a, "recovering").status_code == 200)  # after it

    b = replica(state=redis_url)  # joins the stored set: the window is not started again

    assert invoke(b, "recovering").status_code == 200
    assert invoke(a, "recovering").status_code == 200


def test_a_version_restarts_its_sequences_in_the_state_in_the_same_step(redis_url: str) -> None:
    # What a replica hearing of a version must find done: the writer's restarts (else it
    # would build its table on the old generations and serve other positions than A's).
    shared = SharedScenarios(redis_url, state_keys=("mockskill:gen", "mockskill:act"))
    client = redis.Redis.from_url(redis_url)
    pubsub = client.pubsub()  # type: ignore[no-untyped-call]
    try:
        pubsub.subscribe(shared.channel)
        assert pubsub.get_message(timeout=5)["type"] == "subscribe"

        assert shared.write(0, (), "", restart=["k1", "k2"], activate=["outage"]) == 1
        heard = pubsub.get_message(timeout=5)
        generations = client.hgetall("mockskill:gen")
        activated = client.hgetall("mockskill:act")
        lost = shared.write(0, (), "", restart=["k1"], activate=["other"])  # stale: read 0

        assert heard is not None
        assert heard["data"] == b"1"
        assert generations == {b"k1": b"1", b"k2": b"1"}
        assert list(activated) == [b"outage"]
        assert lost is None
        assert client.hgetall("mockskill:gen") == generations  # a lost write restarts nothing
        assert list(client.hgetall("mockskill:act")) == [b"outage"]
    finally:
        pubsub.close()
        client.close()
        shared.stop()


def test_with_a_shared_state_a_new_deployments_files_restart_their_sequences(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER, state=redis_url)
    assert [invoke(a, "count").json()["n"] for _ in range(2)] == [1, 2]

    b = replica(COUNTER.replace("{n: 1}", "{n: 10}"), state=redis_url)  # other files

    assert invoke(b, "count").json() == {"n": 10}
    until(lambda: a.registry.version == b.registry.version)
    assert invoke(a, "count").json() == {"n": 2}


def test_with_a_shared_state_a_replica_started_from_the_same_files_leaves_outage_windows_alone(
    replica: Replica, redis_url: str
) -> None:
    a = replica(OUTAGE, state=redis_url)  # publishes the set: its window starts
    assert invoke(a, "recovering").status_code != 200  # in the window
    until(lambda: invoke(a, "recovering").status_code == 200)  # after it

    b = replica(OUTAGE, state=redis_url)  # the same files: joins version 1, starts nothing

    assert b.registry.version == a.registry.version == 1
    assert invoke(b, "recovering").status_code == 200
    assert invoke(a, "recovering").status_code == 200


def test_with_a_shared_state_a_new_deployments_files_start_their_outage_windows(
    replica: Replica, redis_url: str
) -> None:
    a = replica(COUNTER, state=redis_url)
    assert invoke(a, "count").status_code == 200

    b = replica(OUTAGE, state=redis_url)  # other files: published over A's, window started

    assert invoke(b, "recovering").status_code != 200
    until(lambda: a.registry.version == b.registry.version)
    assert invoke(a, "recovering").status_code != 200  # the one window, everyone's
    until(lambda: invoke(a, "recovering").status_code == 200)
