"""Redis failing is a state the store shows, not a hang nor a silent loss; it recovers by itself.

At start an unusable Redis is refused with the URL (password masked) and
the cause. While serving, a need that cannot be answered raises
StoreUnavailable (within the socket timeout, also when Redis hangs), health
says ``degraded`` with the reason, and once Redis is back the store answers
again and health says ``ok``, with no one telling it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import requests
from redis_server import RedisServer

from mockskill import Server
from mockskill.engine.entries import Entry
from mockskill.engine.store import IssueToken, StoreUnavailable, Take, Taken, UseToken
from mockskill.store import StoreOpenError, open_store
from mockskill.store.redis import SOCKET_TIMEOUT, RedisStore

STEP = Take("alice", "k", 0, "", None, False)


def test_the_password_and_database_in_the_url_are_used_on_and_off_the_loop(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis(password="s3cret-pw")
    url = server.url.removesuffix("/0") + "/3"
    store = open_store(url)
    try:
        assert store.answer(STEP) == Taken(0, -1)
        assert asyncio.run(store.answer_async(STEP)) == Taken(1, -1)
        other = open_store(server.url)  # database 0: another set of sequences
        assert other.answer(STEP) == Taken(0, -1)
        other.close()
    finally:
        store.close()


def test_a_wrong_password_is_refused_at_start_naming_the_masked_url(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis(password="s3cret-pw")
    wrong = server.url.replace("s3cret-pw", "not-the-pw")
    with pytest.raises(StoreOpenError) as refused:
        open_store(wrong)
    text = str(refused.value)
    assert f"redis://:***@127.0.0.1:{server.port}/0" in text
    assert "not-the-pw" not in text
    assert "invalid" in text.lower()
    assert "AuthenticationError" in text


def test_a_missing_password_is_refused_at_start(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis(password="s3cret-pw")
    with pytest.raises(StoreOpenError, match=r"authenticated.*AuthenticationError"):
        open_store(f"redis://127.0.0.1:{server.port}/0")


def test_an_unreachable_redis_is_refused_at_start(own_redis: Callable[..., RedisServer]) -> None:
    server = own_redis(password="pw")
    server.stop()
    with pytest.raises(StoreOpenError) as refused:
        open_store(server.url)
    assert str(refused.value).startswith(
        f"cannot use the state store redis://:***@127.0.0.1:{server.port}/0: "
    )
    assert "Connection refused" in str(refused.value)


def test_a_tls_url_to_a_plain_redis_is_refused_at_start(redis_url: str) -> None:
    """A rediss:// URL to a Redis without TLS fails at the handshake (tests/store/
    test_redis_tls.py has a TLS Redis)."""
    with pytest.raises(StoreOpenError) as refused:
        open_store(redis_url.replace("redis://", "rediss://"))
    assert str(refused.value).startswith("cannot use the state store rediss://127.0.0.1:")


def test_redis_stopped_makes_needs_unavailable_and_health_degraded_until_it_returns(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis()
    store = open_store(server.url)
    try:
        assert store.answer(STEP) == Taken(0, -1)
        assert store.health().status == "ok"
        server.stop()
        with pytest.raises(StoreUnavailable, match="Connection refused"):
            store.answer(STEP)
        store.record(Entry(store.next_id(), 1.0, 2.0, "alice", "GET", "/", 200, "list"))
        assert isinstance(store, RedisStore)
        assert not store.journal_store.flush(timeout=10)  # not sent: held until Redis is back
        health = store.health()
        assert health.status == "degraded"
        assert health.reason is not None
        assert "Connection refused" in health.reason
        assert health.lost_entries == 0
        with pytest.raises(StoreUnavailable):
            store.journal()
        server.start()  # empty (no persistence), its scripts gone too
        health = store.health()  # no traffic needed: health asks Redis
        assert (health.status, health.reason, health.lost_entries) == ("ok", None, 0)
        assert store.answer(STEP) == Taken(0, -1)
        store.record(Entry(store.next_id(), 3.0, 4.0, "alice", "GET", "/", 200, "list"))
        assert [e.started for e in store.journal()] == [1.0, 3.0]  # what was held, then sent
        store.answer(IssueToken("t", frozenset({"a"}), None, 1))
        assert store.answer(UseToken("t")) == frozenset({"a"})
    finally:
        store.close()


def test_on_the_loop_a_batch_fails_as_a_whole_and_the_next_one_recovers(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis()
    store = open_store(server.url)

    async def traffic() -> None:
        await store.answer_async(STEP)
        server.stop()
        results = await asyncio.gather(
            *(store.answer_async(STEP) for _ in range(10)), return_exceptions=True
        )
        assert all(isinstance(r, StoreUnavailable) for r in results)
        assert store.health().status == "degraded"
        server.start()  # its script cache is empty: NOSCRIPT, loaded again, sent again
        answers = await asyncio.gather(*(store.answer_async(STEP) for _ in range(10)))
        assert sorted(a.position for a in answers if isinstance(a, Taken)) == list(range(10))
        assert store.health().status == "ok"

    try:
        asyncio.run(traffic())
    finally:
        store.close()


def test_a_hung_redis_is_unavailable_within_the_socket_timeout(
    own_redis: Callable[..., RedisServer],
) -> None:
    server = own_redis()
    store = open_store(server.url)
    assert isinstance(store, RedisStore)
    pid = server._process.pid  # type: ignore[union-attr]
    try:
        assert store.answer(STEP) == Taken(0, -1)
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Timeout"):
            store.answer(STEP)

        async def on_the_loop() -> None:
            with pytest.raises(StoreUnavailable, match="Timeout"):
                await store.answer_async(STEP)

        asyncio.run(on_the_loop())
        assert time.monotonic() - started < 4 * SOCKET_TIMEOUT + 2
    finally:
        os.kill(pid, signal.SIGCONT)
        store.close()


def test_without_the_redis_client_a_shared_url_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from mockskill.store import StoreOpenError, open_store\n"
        "try:\n"
        "    open_store('redis://:pw@cache:6379/0')\n"
        "except StoreOpenError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == (
        "cannot use the state store redis://:***@cache:6379/0: the Redis client is not"
        " installed (redis): pip install 'mockskill[redis]'"
    )


def _health_turns(base: str, status: str, within: float) -> float:
    """Seconds until ``/__admin/health`` says *status* (polled, no skill traffic); fails after
    *within*."""
    started = time.monotonic()
    while True:
        said = requests.get(f"{base}/__admin/health", timeout=10).json()
        took = time.monotonic() - started
        if said["status"] == status and said["state"]["status"] == status:
            return took
        assert took < within, f"health still says {said['status']!r} after {took:.2f} s"
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_health_says_degraded_within_a_second_or_so_of_redis_going_without_traffic(
    own_redis: Callable[..., RedisServer], how: str
) -> None:
    """A readiness probe must not keep routing to a replica whose store is gone (killed) or
    frozen (SIGSTOP): health says so by itself, and ``ok`` again once Redis is back."""
    redis_server = own_redis()
    with Server(state=redis_server.url, quiet=True) as server:
        base = server.url
        assert _health_turns(base, "ok", within=5) < 5
        pid = redis_server._process.pid  # type: ignore[union-attr]
        if how == "killed":
            redis_server.stop()
        else:
            os.kill(pid, signal.SIGSTOP)
        try:
            took = _health_turns(base, "degraded", within=1.5)
            said = requests.get(f"{base}/__admin/health", timeout=10).json()
            assert said["state"]["reason"]
            assert set(said["state"]) == {
                "backend", "url", "replica", "status", "reason", "lost_entries",
            }  # fmt: skip
        finally:
            if how == "killed":
                redis_server.start()
            else:
                os.kill(pid, signal.SIGCONT)
        assert took < 1.5
        _health_turns(base, "ok", within=3)
