"""Real servers sharing one Redis serve one truth; a Redis gone is a 503 of mockskill's own.

Three :class:`~mockskill.Server` s (three replicas) on one Redis, real HTTP
clients spread round robin over them: "503 twice, then 200, cycling" holds
exactly across them. With Redis stopped, a skill request gets 503
``MOCKSKILL_STATE_UNAVAILABLE`` in the unified body and ``/__admin/health``
says ``degraded``; with Redis back, both recover by themselves.
"""

from __future__ import annotations

import collections
import concurrent.futures
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import requests
from conftest import FLAKY
from redis_server import RedisServer

from mockskill import Server


def invoke(server: Server, session: str = "default") -> requests.Response:
    return requests.post(
        f"{server.url}/skills/flaky-cycle/invoke",
        json={},
        headers={"Mockskill-Session": session},
        timeout=10,
    )


def test_three_servers_on_one_redis_fail_twice_then_succeed_exactly(
    serve: Callable[..., Server], redis_url: str
) -> None:
    servers = [serve(FLAKY, state=redis_url, replica=f"replica-{n}") for n in range(3)]
    sessions = [requests.Session() for _ in range(30)]  # 30 clients, keep-alive each

    def client(n: int) -> list[int]:
        http = sessions[n]
        statuses = []
        for i in range(10):  # request i of client n goes to server (n + i) % 3
            server = servers[(n + i) % 3]
            answer = http.post(f"{server.url}/skills/flaky-cycle/invoke", json={}, timeout=10)
            statuses.append(answer.status_code)
        return statuses

    with concurrent.futures.ThreadPoolExecutor(30) as pool:
        statuses = [s for run in pool.map(client, range(30)) for s in run]
    for http in sessions:
        http.close()
    assert collections.Counter(statuses) == {503: 200, 200: 100}
    # one journal: each replica shows all 300 (another replica's last entries show once
    # its flusher sent them: a batch's round trip), each naming the replica that served it
    for server in servers:
        deadline = time.monotonic() + 10
        while len(entries := server.journal()) < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(entries) == 300
        assert collections.Counter(e.replica for e in entries) == {
            s.state.replica: 100 for s in servers
        }


def test_a_stopped_redis_is_a_503_of_mockskills_own_and_service_resumes(
    serve: Callable[..., Server], own_redis: Callable[..., RedisServer]
) -> None:
    redis = own_redis(password="pw-e2e")
    server = serve(FLAKY, state=redis.url)
    assert invoke(server).status_code == 503  # the first scripted failure
    redis.stop()
    refused = invoke(server)
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "MOCKSKILL_STATE_UNAVAILABLE"
    assert "pw-e2e" not in refused.text
    health = requests.get(f"{server.url}/__admin/health", timeout=10).json()
    assert health["status"] == "degraded"
    assert health["state"]["backend"] == "redis"
    assert health["state"]["url"] == f"redis://:***@127.0.0.1:{redis.port}/0"
    assert "Connection refused" in health["state"]["reason"]
    assert health["state"]["lost_entries"] == 0  # its journal entry is held, not lost
    redis.start()  # empty: the sequence starts afresh
    health = requests.get(f"{server.url}/__admin/health", timeout=10).json()
    assert health["status"] == "ok"
    assert "reason" not in health["state"]
    assert [invoke(server).status_code for _ in range(3)] == [503, 503, 200]
    # The refused request's entry, held while Redis was away, landed once it was back:
    journal = requests.get(f"{server.url}/__admin/journal", timeout=10).json()["entries"]
    assert [e["status"] for e in journal] == [503, 503, 503, 200]
    assert health["state"]["lost_entries"] == 0


def test_the_embedded_default_never_imports_redis() -> None:
    code = textwrap.dedent(
        """
        import sys
        import requests
        from mockskill import Server
        server = Server().start()
        requests.post(server.url + "/skills/flaky/invoke", json={}, timeout=10)
        requests.get(server.url + "/__admin/health", timeout=10)
        server.stop()
        loaded = sorted(m for m in sys.modules if m == "redis" or m.startswith("redis."))
        print(loaded)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_redis_stopped_and_started_under_traffic_never_breaks_a_request(
    serve: Callable[..., Server], own_redis: Callable[..., RedisServer]
) -> None:
    """Clients keep sending while Redis goes away and comes back: every answer is the
    scripted one or mockskill's own 503, never a 500 or a hang; after, service resumes."""
    redis = own_redis()
    server = serve(FLAKY, state=redis.url)
    codes: collections.Counter[str] = collections.Counter()
    stop = threading.Event()

    def client() -> None:
        with requests.Session() as http:
            while not stop.is_set():
                answer = http.post(f"{server.url}/skills/flaky-cycle/invoke", json={}, timeout=10)
                body = answer.json()
                codes[body["error"]["code"] if "error" in body else str(answer.status_code)] += 1

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()

    def until(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 20
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.01)

    until(lambda: codes["200"] >= 5)
    redis.stop()
    until(lambda: codes["MOCKSKILL_STATE_UNAVAILABLE"] >= 20)
    redis.start()
    served = codes["200"]
    until(lambda: codes["200"] >= served + 5)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert set(codes) == {"ENDPOINT_UNREACHABLE", "200", "MOCKSKILL_STATE_UNAVAILABLE"}
    assert requests.get(f"{server.url}/__admin/health", timeout=10).json()["status"] == "ok"
    # the sequence counts on (Redis came back empty: from its start)
    statuses = [invoke(server, "after").status_code for _ in range(3)]
    assert statuses == [503, 503, 200]


RECOVERS = """
name: chains
skills:
  - id: recovers
    invoke:
      - error: ENDPOINT_UNREACHABLE
        retry: {suggested_delay_ms: 100, max_attempts: 4}
        times: 2
      - json: {result: ok}
  - id: hasty
    invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 300, max_attempts: 5}}
"""


def consume(servers: list[Server], session: str) -> None:
    """One consumer: each skill invoked until it succeeds or thrice, every attempt (its
    retries) sent to the next replica: "recovers" retried after the advice, backing off;
    "hasty" too soon, and sooner the second time (waits far from the audit's margins)."""
    turn = 0
    for skill, waits in (("recovers", (0.15, 0.3)), ("hasty", (0.05, 0.0))):
        for attempt in range(3):
            server = servers[turn % len(servers)]
            turn += 1
            answer = requests.post(
                f"{server.url}/skills/{skill}/invoke",
                json={},
                headers={"Mockskill-Session": session},
                timeout=10,
            )
            if answer.status_code == 200 or attempt == 2:
                break
            time.sleep(waits[attempt])


def graded(server: Server, session: str) -> dict[str, object]:
    """*server*'s report of *session*: its chains (skill, attempts' statuses) and findings."""
    body = requests.get(f"{server.url}/__admin/report", params={"session": session}, timeout=10)
    (report,) = body.json()["sessions"]
    chains = [(c["skill"], [a["status"] for a in c["attempts"]]) for c in report["chains"]]
    return {
        "requests": report["requests"],
        "chains": chains,
        "findings": sorted(f["rule"] for f in report["findings"]),
    }


def test_retries_alternating_between_replicas_make_one_chain_graded_once_on_every_replica(
    serve: Callable[..., Server], redis_url: str
) -> None:
    replicas = [serve(RECOVERS, state=redis_url, replica=f"replica-{n}") for n in range(3)]
    alone = serve(RECOVERS)  # the same consumer against one in-memory server: the grading
    consume([alone], "consumer")
    consume(replicas, "consumer")
    for server in replicas:
        server.state.journal()  # this replica's own entries sent (a read flushes them)
    expected = graded(alone, "consumer")
    assert expected["chains"] == [("recovers", [503, 503, 200]), ("hasty", [503, 503, 503])]
    assert expected["findings"]  # the hasty retries are found, once each
    deadline = time.monotonic() + 10
    for server in replicas:  # any replica: the other replicas' entries land within a flush
        while graded(server, "consumer")["requests"] < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert graded(server, "consumer") == expected
    served = collections.Counter(e.replica for e in replicas[0].journal("consumer"))
    assert served == {f"replica-{n}": 2 for n in range(3)}
