"""``rediss://``: the shared store over TLS, as a managed Redis speaks it.

A real redis-server that speaks only TLS, its certificate issued for
127.0.0.1 by a CA made for the test (trustme). The URL's ``ssl_*`` options
reach both of mockskill's connections: redis-py's (admin, the journal's
flusher, the shared set's pub/sub) and the loop's own link (every skill
request's needs). A password travels inside TLS and stays masked; a Redis
that requires client certificates takes ``ssl_certfile``/``ssl_keyfile``;
a certificate the URL does not trust is refused at start, saying why.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

import pytest
import requests
from conftest import FLAKY
from redis_server import RedisServer

from mockskill import Server
from mockskill.store import StoreOpenError, open_store

pytest.importorskip("trustme", reason="the TLS tests make their certificates with trustme")


def statuses(servers: list[Server], count: int) -> list[int]:
    """*count* requests to flaky-cycle, round robin over *servers*, on keep-alive sessions."""
    https = [requests.Session() for _ in servers]
    try:
        return [
            https[n % len(servers)]
            .post(servers[n % len(servers)].invoke_url("flaky-cycle"), json={}, timeout=10)
            .status_code
            for n in range(count)
        ]
    finally:
        for http in https:
            http.close()


def journal_of_both(server: Server, count: int) -> list[str | None]:
    """The replicas named by *server*'s journal once it shows *count* entries (each
    replica's flusher sends its own: another's last entries show a round trip later)."""
    deadline = time.monotonic() + 10
    while len(entries := server.journal()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [entry.replica for entry in entries]


def test_two_replicas_over_tls_with_a_password_share_one_sequence_and_one_journal(
    own_redis: Callable[..., RedisServer], serve: Callable[..., Server]
) -> None:  # (Redis first: it stops after the servers)
    redis = own_redis(tls=True, password="tls-s3cret")
    assert redis.url.startswith("rediss://:tls-s3cret@127.0.0.1:")
    servers = [serve(FLAKY, state=redis.url, replica=name) for name in ("a", "b")]
    assert statuses(servers, 9) == [503, 503, 200] * 3  # one sequence, across both
    assert collections.Counter(journal_of_both(servers[1], 9)) == {"a": 5, "b": 4}
    health = requests.get(f"{servers[0].url}/__admin/health", timeout=10).json()
    assert "tls-s3cret" not in str(health)


def test_a_replica_with_no_scenarios_joins_the_set_over_tls(
    own_redis: Callable[..., RedisServer], serve: Callable[..., Server]
) -> None:  # (Redis first: it stops after the servers)
    redis = own_redis(tls=True)
    publisher = serve(FLAKY, state=redis.url, shared_scenarios=redis.url)
    joiner = serve(None, state=redis.url, shared_scenarios=redis.url)  # the set, over TLS
    assert statuses([publisher, joiner], 6) == [503, 503, 200] * 2


def test_a_redis_that_requires_client_certificates_takes_them_from_the_url(
    own_redis: Callable[..., RedisServer], serve: Callable[..., Server]
) -> None:  # (Redis first: it stops after the servers)
    redis = own_redis(client_certs=True)
    with pytest.raises(StoreOpenError):  # without one, the handshake is refused
        open_store(redis.url)
    url = f"{redis.url}&ssl_certfile={redis.client_cert}&ssl_keyfile={redis.client_key}"
    server = serve(FLAKY, state=url)
    assert statuses([server], 3) == [503, 503, 200]


def test_a_certificate_the_url_does_not_trust_is_refused_at_start(
    own_redis: Callable[..., RedisServer],
) -> None:
    redis = own_redis(tls=True, password="pw")
    untrusted = redis.url.split("?")[0]  # the system's CAs: they never signed this one
    with pytest.raises(StoreOpenError) as refused:
        open_store(untrusted)
    message = str(refused.value)
    assert message.startswith(f"cannot use the state store rediss://:***@127.0.0.1:{redis.port}/0")
    assert "certificate verify failed" in message


def test_ssl_cert_reqs_none_accepts_any_certificate(
    own_redis: Callable[..., RedisServer], serve: Callable[..., Server]
) -> None:  # (Redis first: it stops after the servers)
    redis = own_redis(tls=True)
    url = f"{redis.url.split('?')[0]}?ssl_cert_reqs=none"  # a self-signed Redis, on purpose
    server = serve(FLAKY, state=url)
    assert statuses([server], 3) == [503, 503, 200]


def test_a_plain_redis_url_to_a_tls_redis_is_refused_at_start(
    own_redis: Callable[..., RedisServer],
) -> None:
    redis = own_redis(tls=True)
    with pytest.raises(StoreOpenError) as refused:
        open_store(f"redis://127.0.0.1:{redis.port}/0")
    assert str(refused.value).startswith(
        f"cannot use the state store redis://127.0.0.1:{redis.port}"
    )
