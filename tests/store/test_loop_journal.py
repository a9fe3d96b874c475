"""Entries recorded on the event loop go out in the loop's own batches (a real Redis).

A skill request's entry is recorded on the loop that served it; it waits in
a queue there, bounded by the journal's capacity, and is sent with the
loop's next write to Redis (no thread). What cannot be kept is counted as
the flusher thread's queue counts it; a reader on another thread (the admin
app's) reads its own writes; a server that stops sends everything first; a
Redis restarted (its scripts gone) is given the append script again.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import requests
from conftest import FLAKY
from redis_server import RedisServer

from mockskill import Server
from mockskill.engine.entries import Entry
from mockskill.store import open_store
from mockskill.store.redis import RedisStore


def entry(store: RedisStore, path: str) -> Entry:
    now = time.time()
    return Entry(store.next_id(), now, now, "alice", "GET", path, 200, "list")


def redis_store(url: str, journal_size: int = 1000) -> RedisStore:
    store = open_store(url, journal_size=journal_size)
    assert isinstance(store, RedisStore)
    return store


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert condition()


def test_records_on_the_loop_go_in_its_batches_not_the_flusher_thread_s(redis_url: str) -> None:
    store = redis_store(redis_url)
    journal = store.journal_store

    async def traffic() -> None:
        for n in range(300):
            store.record(entry(store, f"/{n}"))
        await until(lambda: journal.sent == 300)

    try:
        asyncio.run(traffic())
        (loop,) = journal.loops
        assert (loop.sent, loop.batches) == (300, 2)  # 256 + 44: one turn's records
        assert journal.batches == 2
        assert [e.path for e in store.journal()] == [f"/{n}" for n in range(300)]
        assert journal.lost == journal.trimmed == 0
    finally:
        store.close()


def test_with_redis_stopped_the_loop_holds_the_newest_and_counts_what_it_lets_go(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis()
    store = redis_store(server.url, journal_size=50)
    journal = store.journal_store

    async def traffic() -> None:
        store.record(entry(store, "/before"))
        await until(lambda: journal.sent == 1)
        server.stop()
        took = []
        for n in range(200):  # in one turn: the queue holds the newest 50
            start = time.perf_counter()
            store.record(entry(store, f"/down/{n}"))
            took.append(time.perf_counter() - start)
        assert max(took) < 0.05, "a record waited on Redis"
        assert sorted(took)[100] < 50e-6
        # Let go of as the stream would have trimmed them, until the first failed batch:
        await until(lambda: journal.error is not None)
        assert "Connection" in (journal.error or "")
        assert (journal.trimmed, journal.lost) == (150, 0)  # the newest 50 are held
        for n in range(100):  # Redis known away: the oldest held go
            store.record(entry(store, f"/still-down/{n}"))
        # Lost, but those of a batch written before Redis was known away (it may have taken
        # it): counted once Redis says whether it did.
        assert journal.trimmed == 150
        assert journal.lost in (50, 100)
        assert store.health().lost_entries == journal.lost
        server.start()
        store.record(entry(store, "/after"))  # (one more held: the oldest goes)
        # A reader on another thread: the loop sends what it holds first (no retry wait).
        read = await asyncio.to_thread(store.journal)
        # (a Redis without persistence restarted: what was held is all it has)
        assert [e.path for e in read] == [
            *(f"/still-down/{n}" for n in range(51, 100)),
            "/after",
        ]
        assert journal.error is None
        assert (journal.trimmed, journal.lost, journal.sent) == (150, 101, 51)

    try:
        asyncio.run(traffic())
    finally:
        store.close()


def test_a_reader_on_another_thread_reads_every_entry_the_loop_recorded_before_it(
    redis_url: str,
) -> None:
    store = redis_store(redis_url, journal_size=5000)
    read: list[int] = []

    def reader() -> None:
        read.append(len(store.journal()))

    async def traffic() -> None:
        for n in range(3000):  # some ms of the loop's to encode and send
            store.record(entry(store, f"/{n}"))
        thread = threading.Thread(target=reader)
        thread.start()  # its read goes to Redis before the loop has sent them
        await asyncio.to_thread(thread.join, 30)

    try:
        asyncio.run(traffic())
        assert read == [3000]
    finally:
        store.close()


def test_an_admin_read_right_after_a_skill_request_shows_it(
    serve: Callable[..., Server], redis_url: str
) -> None:
    server = serve(FLAKY, state=redis_url)
    with requests.Session() as http:
        for n in range(30):
            session = {"Mockskill-Session": f"rw-{n}"}
            url = f"{server.url}/skills/flaky-cycle/invoke"
            assert http.post(url, json={}, headers=session, timeout=10).status_code == 503
            journal = http.get(f"{server.url}/__admin/journal", params={"session": f"rw-{n}"})
            assert [e["path"] for e in journal.json()["entries"]] == [
                "/skills/flaky-cycle/invoke"
            ], n


class Clients:
    """8 keep-alive clients sending to *url* until :meth:`stop`; they count the answers got
    (each journalled before its bytes went) and let the connection's end stop them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answered = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client) for _ in range(8)]
        for thread in self._threads:
            thread.start()

    def _client(self) -> None:
        with requests.Session() as http:
            while not self._stop.is_set():
                try:
                    status = http.post(self.url, json={}, timeout=10).status_code
                except requests.RequestException:
                    return  # the server stopped
                with self._lock:
                    self.answered += status in (200, 503)

    def until(self, answered: int) -> None:
        deadline = time.monotonic() + 20
        while self.answered < answered and time.monotonic() < deadline:
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def test_a_server_that_stops_under_traffic_journals_every_request_it_answered(
    serve: Callable[..., Server], redis_url: str
) -> None:
    server = serve(FLAKY, state=redis_url, replica="stopping")
    clients = Clients(f"{server.url}/skills/flaky-cycle/invoke")
    try:
        clients.until(300)
        server.stop()  # requests in flight: their entries queued on the loop as it stops
    finally:
        clients.stop()
    reader = redis_store(redis_url)
    try:
        entries = reader.journal()
        assert {e.replica for e in entries} == {"stopping"}
        assert len(entries) >= clients.answered >= 300
    finally:
        reader.close()


def test_mockskill_serve_stopped_by_sigterm_under_traffic_journals_every_request_first(
    redis_url: str,
) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--state", redis_url]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
    ) as process:
        try:
            assert process.stdout is not None
            base = process.stdout.readline().split(" at ", 1)[1].split()[0]
            clients = Clients(f"{base}/skills/endpoint-unreachable/invoke")
            try:
                clients.until(300)
                process.send_signal(signal.SIGTERM)  # the loop ends without a turn to spare
                output, _ = process.communicate(timeout=30)
            finally:
                clients.stop()
            assert process.returncode == 0, output
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    reader = redis_store(redis_url)
    try:
        entries = reader.journal()
        assert {e.path for e in entries} == {"/skills/endpoint-unreachable/invoke"}
        assert len(entries) >= clients.answered >= 300
    finally:
        reader.close()


def test_what_a_loop_stopped_without_closing_the_store_holds_is_sent_from_its_thread(
    redis_url: str,
) -> None:
    """As ``mockskill serve`` ends its loop (transport.run): the tasks left are cancelled
    and the loop stops, with no turn to send the last records in (and no guard closed)."""
    store = redis_store(redis_url)
    loop = asyncio.new_event_loop()

    async def record() -> None:
        for n in range(100):
            store.record(entry(store, f"/{n}"))

    try:
        loop.run_until_complete(record())  # it stops before its connection to Redis is made
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        (queue,) = store.journal_store.loops
        assert queue.holds()
        assert [e.path for e in store.journal()] == [f"/{n}" for n in range(100)]
        assert store.journal_store.lost == 0
        assert not queue.holds()
    finally:
        store.close()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def test_after_a_redis_restart_under_traffic_the_append_script_is_loaded_again(
    serve: Callable[..., Server], own_redis: Callable[..., RedisServer]
) -> None:
    redis = own_redis()
    server = serve(FLAKY, state=redis.url)
    url = f"{server.url}/skills/flaky-cycle/invoke"
    codes: collections.Counter[int] = collections.Counter()
    stop = threading.Event()

    def client() -> None:
        with requests.Session() as http:
            while not stop.is_set():
                codes[http.post(url, json={}, timeout=10).status_code] += 1

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 20
        while sum(codes.values()) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        redis.stop()
        redis.start()  # empty, its script cache too: NOSCRIPT for the needs and the appends
        served = sum(codes.values())
        while sum(codes.values()) < served + 100 and time.monotonic() < deadline + 20:
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    entries = server.state.journal()
    assert len(entries) >= 100  # what was served since the restart, journalled
    assert isinstance(server.state, RedisStore)
    assert server.state.journal_store.error is None
    session = {"Mockskill-Session": "after-restart"}
    for _ in range(3):
        requests.post(url, json={}, headers=session, timeout=10)
    assert [e.status for e in server.state.journal("after-restart")] == [503, 503, 200]


def test_a_batch_a_frozen_redis_takes_late_is_journalled_once_and_not_counted_lost(
    own_redis: Callable[..., RedisServer],
) -> None:
    """The loop's batch written to a Redis frozen (SIGSTOP) past the timeout is taken when
    it resumes: sent again meanwhile (the script takes its number once), it shows once and
    is not counted lost."""
    server = own_redis()
    store = redis_store(server.url)
    journal = store.journal_store
    pid = server._process.pid  # type: ignore[union-attr]

    async def traffic() -> None:
        store.record(entry(store, "/before"))
        await until(lambda: journal.sent == 1)
        os.kill(pid, signal.SIGSTOP)
        try:
            for n in range(48):
                store.record(entry(store, f"/frozen/{n}"))
            await until(lambda: journal.error is not None, seconds=5)  # timed out: held
            assert journal.lost == 0
            # Sent again (after the retry wait) on a new connection, frozen too:
            await asyncio.sleep(1.5)
        finally:
            os.kill(pid, signal.SIGCONT)
        await until(lambda: journal.sent == 49 and journal.error is None)

    try:
        asyncio.run(traffic())
        paths = [e.path for e in store.journal()]
        assert paths == ["/before", *(f"/frozen/{n}" for n in range(48))]  # each once
        assert journal.lost == 0
        assert store.health().lost_entries == 0
    finally:
        store.close()
