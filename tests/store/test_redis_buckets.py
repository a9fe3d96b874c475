"""Rate limits' buckets on Redis: one bucket for every replica, on Redis's clock.

What memory answers, Redis answers too (tests/store/test_redis_needs.py); here
what only a shared store shows: several replicas (stores, their loops, another
process) spending one bucket at once admit exactly what it holds, the keys a
bucket leaves in Redis, and their bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from mockskill.engine.store import ADMITTED, NEXT_MS, Bucket, Spent, Store, Take, Taken
from mockskill.store import open_store
from mockskill.store.redis import RedisStore

K = "skill/acme.search/invoke"
TENANT = Bucket(f"herd/{K}/header X-Tenant: acme", 20, 1.0, None)
"""A shared bucket: 20 tokens, one more a second."""


def take(session: str, bucket: Bucket = TENANT) -> Take:
    return Take(session, K, 0, "herd", None, False, bucket)


@pytest.fixture
def stores(redis_url: str) -> Iterator[list[Store]]:
    """Three stores (three replicas) on one empty Redis."""
    opened = [open_store(redis_url, replica=f"replica-{n}") for n in range(3)]
    yield opened
    for store in opened:
        store.close()


def spent_of(answer: object) -> Spent:
    assert isinstance(answer, Taken)
    assert answer.spent is not None
    return answer.spent


def spending_in_a_process(url: str, count: int) -> subprocess.Popen[str]:
    """A separate process that spends *count* tokens of TENANT once told to (a line on
    stdin), after saying it is ready; it prints how many were admitted."""
    code = textwrap.dedent(
        f"""
        import sys
        from mockskill.engine.store import ADMITTED, Bucket, Take
        from mockskill.store import open_store
        store = open_store({url!r}, replica="process")
        need = Take("p", {K!r}, 0, "herd", None, False, Bucket(*{list(TENANT)!r}))
        store.answer(Take("warm", "k", 0, "", None, False))  # connected, scripts loaded
        print("ready", flush=True)
        sys.stdin.readline()
        print(sum(store.answer(need).spent[ADMITTED] for _ in range({count})), flush=True)
        store.close()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def burst(stores: list[Store], process: subprocess.Popen[str], each: int) -> int:
    """*each* requests from every store on its own loop and from *process*, all at once:
    how many were admitted."""
    admitted: list[int] = []
    go = threading.Barrier(len(stores) + 1)

    def spend_on_a_loop(store: Store, n: int) -> None:
        async def spend() -> int:
            answers = await asyncio.gather(
                *(store.answer_async(take(f"c{n}")) for _ in range(each))
            )
            return sum(spent_of(a)[ADMITTED] for a in answers)

        go.wait()
        admitted.append(asyncio.run(spend()))

    threads = [threading.Thread(target=spend_on_a_loop, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    go.wait()
    for thread in threads:
        thread.join(timeout=60)
    admitted.append(int(process.stdout.readline()))
    return sum(admitted)


def test_replicas_spending_one_bucket_at_once_admit_exactly_what_it_holds(
    stores: list[Store], redis_url: str
) -> None:
    processes = [spending_in_a_process(redis_url, 40) for _ in range(2)]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
    start = time.monotonic()
    first = burst(stores, processes[0], 40)  # 160 requests for 20 tokens
    end = time.monotonic()
    time.sleep(2.2)
    again = time.monotonic()
    second = burst(stores, processes[1], 40)
    last = time.monotonic()
    for process in processes:
        process.communicate(timeout=30)
    # The bucket refills a token a second from the first spending (on Redis's clock): the
    # burst admits the 20 it holds and whole tokens refilled meanwhile (none, when it
    # takes under a second); the second the tokens refilled since (2, 2.2 s later).
    assert TENANT.capacity <= first <= TENANT.capacity + math.floor(end - start)
    total = first + second
    assert math.floor(again - end) <= total - TENANT.capacity <= math.floor(last - start)
    if end - start < 1 and last - start < 3:  # as it goes unless the machine stalls
        assert (first, second) == (20, 2)


def test_a_bucket_refills_on_redis_s_clock_for_every_replica(stores: list[Store]) -> None:
    bucket = Bucket("sc/k/client 10.0.0.1", 2, 2.0, None)  # a token every half second
    answers = [spent_of(stores[n].answer(take("s", bucket))) for n in range(3)]
    assert [a[ADMITTED] for a in answers] == [True, True, False]
    assert 0 < answers[2][NEXT_MS] <= 500
    time.sleep(0.6)  # 1.2 tokens, whichever replica asks
    assert [spent_of(s.answer(take("s", bucket)))[ADMITTED] for s in stores[1:]] == [True, False]


def test_a_shared_bucket_is_a_key_that_expires_once_full_again(
    stores: list[Store], redis_url: str
) -> None:
    store = stores[0]
    assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(redis_url)
    quick = Bucket("sc/k/client 10.0.0.2", 3, 10.0, None)  # full 100 ms after a spending
    spent = spent_of(store.answer(take("s", quick)))
    assert spent == (True, 2, 0, 100)
    key = store.keys.bucket + quick.key
    assert 0 < client.pttl(key) <= 100
    time.sleep(0.15)
    assert client.exists(key) == 0  # full again: nothing kept, a fresh bucket is the same
    assert spent_of(store.answer(take("s", quick))) == (True, 2, 0, 100)
    client.close()


def test_a_session_s_bucket_is_kept_with_its_session(stores: list[Store], redis_url: str) -> None:
    store = stores[0]
    assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(redis_url)
    mine = Bucket(f"sc/{K}/session alice", 1, 0.001, "alice")
    assert spent_of(store.answer(take("alice", mine)))[ADMITTED]
    assert not spent_of(stores[1].answer(take("alice", mine)))[ADMITTED]
    fields = client.hkeys(store.keys.session + "alice")
    assert f"b\x1f{mine.key}".encode() in fields
    assert client.exists(store.keys.bucket + mine.key) == 0
    stores[2].reset("alice")
    assert spent_of(store.answer(take("alice", mine)))[ADMITTED]  # forgotten with the session
    client.close()


def test_shared_buckets_are_bounded_the_least_recently_spent_going_first(
    stores: list[Store], redis_url: str
) -> None:
    store = stores[0]
    assert isinstance(store, RedisStore)
    store.encoder.max_buckets = "3"  # (MAX_BUCKETS, made small)
    client = redis.Redis.from_url(redis_url)
    tenants = [Bucket(f"sc/k/header X-Tenant: {n}", 1, 0.001, None) for n in range(5)]
    for tenant in tenants:  # a client sending a new value with every request
        assert spent_of(store.answer(take("s", tenant)))[ADMITTED]
    kept = sorted(key.decode() for key in client.keys(store.keys.bucket + "*"))
    assert kept == [store.keys.bucket + t.key for t in tenants[2:]]
    assert client.zcard(store.keys.buckets) == 3
    # The first was let go: as a fresh bucket, it admits again; the last is still spent.
    assert spent_of(store.answer(take("s", tenants[0])))[ADMITTED]
    assert not spent_of(store.answer(take("s", tenants[4])))[ADMITTED]
    store.reset()
    assert client.keys(store.keys.bucket + "*") == []
    assert client.zcard(store.keys.buckets) == 0
    client.close()


@contextlib.contextmanager
def commands_sent(url: str) -> Iterator[list[str]]:
    """The names of the commands clients send Redis meanwhile (MONITOR), not those scripts
    run."""
    sent: list[str] = []
    client, ender = redis.Redis.from_url(url), redis.Redis.from_url(url)
    ender.ping()  # connected before: its ECHO ends what is watched
    with client.monitor() as monitor:

        def watch() -> None:
            for command in monitor.listen():
                if command["command"] == "ECHO done":
                    return
                if command["client_type"] != "lua":
                    sent.append(command["command"].split()[0])

        watching = threading.Thread(target=watch)
        watching.start()
        yield sent
        ender.echo("done")
        watching.join(timeout=30)
    client.close()
    ender.close()


def test_a_limited_take_is_one_command_on_redis(stores: list[Store], redis_url: str) -> None:
    """The bucket is spent in the Take's own script: no round trip of its own."""

    async def on_a_loop() -> list[str]:
        stores[0].answer(take("warm"))  # the scripts loaded, the connections made
        await stores[1].answer_async(take("warm"))
        with commands_sent(redis_url) as sent:
            for _ in range(10):
                stores[0].answer(take("s"))
            await asyncio.gather(*(stores[1].answer_async(take("s")) for _ in range(10)))
        return sent

    assert asyncio.run(on_a_loop()) == ["EVALSHA"] * 20
