"""The shared journal: every replica's entries in one capped Redis stream (a real Redis)."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis
import requests
from redis_server import RedisServer

from mockskill.engine.entries import (
    MASK,
    MAX_PATH,
    MAX_SESSION_NAME,
    MAX_TEXT,
    Entry,
    kept,
    redaction,
)
from mockskill.protocol.catalog import Retry
from mockskill.scenario.loader import load_text
from mockskill.server.server import Server
from mockskill.store.journal import RedisJournal, decoded, encoded

PREFIX = "mockskill:test:"


def _client(url: str) -> redis.Redis:
    # As the store configures it: a second at most per command, no retries.
    return redis.Redis.from_url(
        url, socket_timeout=1.0, socket_connect_timeout=1.0, retry_on_timeout=False
    )


@pytest.fixture
def journals(redis_url: str) -> Iterator[Callable[..., RedisJournal]]:
    """Make journals on *redis_url* (one per replica, each its own client); closed after."""
    made: list[RedisJournal] = []

    def make(
        replica: str | None = "a", capacity: int = 100, url: str = redis_url, start: bool = True
    ) -> RedisJournal:
        journal = RedisJournal(_client(url), PREFIX, capacity, replica, start=start)
        made.append(journal)
        return journal

    yield make
    for journal in made:
        journal.close(timeout=2)


_now = itertools.count(1_764_600_000)


def request(session: str = "s", path: str = "/skills", **values: object) -> Entry:
    """What the engine records for a request (its id provisional: the stream numbers it)."""
    started = float(next(_now)) + 0.123456
    fields: dict[str, object] = {"method": "GET", "status": 200, "endpoint": "list", **values}
    finished = started + 0.001
    return Entry(0, started, finished, session, path=path, **fields)  # type: ignore[arg-type]


def test_two_replicas_recording_interleaved_make_one_journal_numbered_in_append_order(
    journals: Callable[..., RedisJournal],
) -> None:
    a, b = journals("replica-a"), journals("replica-b")
    for n in range(20):
        (a if n % 2 else b).record(request(path=f"/{n}"))
        (a if n % 2 else b).flush()  # each lands before the next is recorded: one known order

    for reader in (a, b):
        entries = reader.entries()
        assert [e.path for e in entries] == [f"/{n}" for n in range(20)]
        assert [e.replica for e in entries] == [
            ("replica-b", "replica-a")[n % 2] for n in range(20)
        ]
        ids = [e.id for e in entries]
        assert ids == sorted(set(ids))


def test_ids_are_unique_across_replicas_recording_at_once(
    journals: Callable[..., RedisJournal],
) -> None:
    replicas = [journals(f"r{n}", capacity=10_000) for n in range(3)]

    def hammer(journal: RedisJournal) -> None:
        for n in range(1000):
            journal.record(request(session=journal.replica or "", path=f"/{n}"))

    threads = [threading.Thread(target=hammer, args=(j,)) for j in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for journal in replicas:
        assert journal.flush(timeout=10)

    entries = replicas[0].entries()
    assert len(entries) == 3000
    ids = [e.id for e in entries]
    assert ids == sorted(set(ids))
    for journal in replicas:  # each replica's own entries in the order it recorded them
        mine = [e.path for e in entries if e.replica == journal.replica]
        assert mine == [f"/{n}" for n in range(1000)]
    assert all(j.lost == 0 for j in replicas)


def test_the_bound_holds_exactly_the_newest_entries(journals: Callable[..., RedisJournal]) -> None:
    a, b = journals("a", capacity=40), journals("b", capacity=40)
    for n in range(45):
        a.record(request(path=f"/{n}"))
    a.flush()
    for n in range(45, 90):
        b.record(request(path=f"/{n}"))

    entries = b.entries()
    assert len(entries) == 40
    assert [e.path for e in entries] == [f"/{n}" for n in range(50, 90)]
    assert a.client.xlen(a.stream) == 40
    assert a.lost == b.lost == 0  # beyond the bound, not lost


def test_a_session_s_entries_are_cleared_for_every_replica_and_the_rest_kept(
    journals: Callable[..., RedisJournal],
) -> None:
    a, b = journals("a"), journals("b")
    for n in range(30):
        (a, b)[n % 2].record(request(session=("ci-1", "ci-2", "ci-3")[n % 3], path=f"/{n}"))
    a.flush()
    b.flush()

    def paths(entries: list[Entry]) -> list[int]:  # the two replicas' batches interleave
        return sorted(int(e.path[1:]) for e in entries)

    assert paths(a.entries("ci-2")) == list(range(1, 30, 3))
    assert {e.session for e in b.entries("ci-2")} == {"ci-2"}
    b.clear("ci-2")
    assert a.entries("ci-2") == []
    assert paths(a.entries()) == [n for n in range(30) if n % 3 != 1]
    a.clear()
    assert b.entries() == []


def test_ids_keep_increasing_after_a_clear(journals: Callable[..., RedisJournal]) -> None:
    a = journals()
    a.record(request())
    (before,) = a.entries()
    a.clear()
    a.record(request())
    (after,) = a.entries()
    assert after.id > before.id


def test_what_a_replica_recorded_is_read_back_at_once_and_cleared_with_the_rest(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals()
    for n in range(5):
        a.record(request(path=f"/{n}"))
    assert [e.path for e in a.entries()] == [f"/{n}" for n in range(5)]  # no flush asked for
    for n in range(5):
        a.record(request(path=f"/{n}"))
    a.clear()
    assert a.entries() == []


def test_secrets_are_recorded_masked_as_hidden_when_recorded(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals()
    a.record(request(path="/before/admin-s3cret"))
    a.hide("admin-s3cret")
    a.record(request(path="/after/admin-s3cret", session="admin-s3cret"))
    before, after = a.entries()
    assert before.path == "/before/admin-s3cret"  # hidden after it was recorded, as in memory
    assert (after.path, after.session) == (f"/after/{MASK}", MASK)
    raw = b"".join(v for _, fields in a.client.xrange(a.stream) for v in fields.values())
    assert raw.count(b"admin-s3cret") == 1  # the later one never reached Redis


def test_an_entry_over_the_bounds_is_stored_bounded_and_escaped(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals()
    a.record(request(path="/" + "x" * 60_000, method="P" * 1000, protocol_version="1\n2"))
    (entry,) = a.entries()
    assert entry.path.startswith("/" + "x" * (MAX_PATH - 1) + "...[")
    assert len(entry.path) < MAX_PATH + 40
    assert entry.method.startswith("P" * MAX_TEXT + "...[")
    assert entry.protocol_version == "1%0A2"
    assert max(len(v) for _, f in a.client.xrange(a.stream) for v in f.values()) < 2000


def test_the_stream_shows_what_kept_shows_at_the_edges_of_its_cheap_path(
    journals: Callable[..., RedisJournal],
) -> None:
    """The stream's entries are :func:`kept`'s, whichever texts the cheap test lets through."""
    a = journals(replica=None)
    a.hide("s3cret")
    miss = {"endpoint": "invoke", "skill": "w", "reasons": ["header s3cret"]}
    recorded = [
        request(path="/" + "p" * (MAX_PATH - 1), method="M" * MAX_TEXT),  # exactly at the bounds
        request(path="/" + "p" * MAX_PATH),  # one over
        request(session="s" * (MAX_SESSION_NAME + 1)),
        request(skill="k" * (MAX_TEXT + 1), credential="c" * (MAX_TEXT + 1)),
        request(path="/caf\u00e9/\u202eevil"),  # printable non-ASCII, then a bidi override
        request(path="/a\tb", protocol_version="1\x7f"),  # ASCII controls
        request(path="/x/s3cret"),  # a secret in a field
        request(session="s3c", path="ret/"),  # one across two fields: a false alarm only
        request(credential="bearer s3cret", skill="\u2028"),
        request(near_misses=(miss,)),  # a near miss's reason holding a secret
        request(),  # the plain case
    ]
    for entry in recorded:
        a.record(entry)
    got = a.entries()
    want = [
        kept(entry, ("s3cret",))._replace(id=shown.id)
        for entry, shown in zip(recorded, got, strict=True)
    ]
    assert got == want
    # ... and what kept shows, spelled out (kept's own test of plain texts is the one above):
    assert (got[0].path, got[0].method) == (recorded[0].path, recorded[0].method)
    assert got[2].session.endswith("...[1 more characters]")
    assert got[3].skill.endswith("...[1 more characters]")  # type: ignore[union-attr]
    assert got[3].credential.endswith("...[1 more characters]")  # type: ignore[union-attr]
    assert got[4].path == "/caf\u00e9/%E2%80%AEevil"
    assert (got[5].path, got[5].protocol_version) == ("/a%09b", "1%7F")
    assert (got[8].credential, got[8].skill) == (f"bearer {MASK}", "%E2%80%A8")
    assert (got[7].session, got[7].path) == ("s3c", "ret/")
    assert got[6].path == f"/x/{MASK}"
    assert got[9].near_misses[0]["reasons"] == [f"header {MASK}"]
    assert got[1].path.endswith("...[1 more characters]")  # cut once, when recorded


def every_field() -> Entry:
    """An entry with every field off its default (and floats that need all their digits)."""
    return Entry(
        id=7,
        started=1_764_600_000.123456789,
        finished=1_764_600_000.987654321,
        session="ci-ü-42",
        method="POST",
        path="/skills/weather/invoke",
        status=None,
        endpoint="invoke",
        skill="weather",
        scenario="flaky",
        step=0,
        position=0,
        error_code="RATE_LIMITED",
        retry=Retry(1500, 3),
        forced=True,
        outage=True,
        choice=0,
        delay_ms=0.1 + 0.2,
        execution_ms=0.0,
        fault="reset",
        client_left=1_764_600_001.000001,
        headers_sent=1_764_600_000.5,
        near_misses=({"endpoint": "invoke", "skill": "weather", "reasons": ["method GET"]},),
        credential="bearer hmac-sha256:0123456789abcdef",
        protocol_version="1.2",
        body_digest="hmac-sha256:fedcba",
        invalid_descriptor=True,
        stopped=True,
        replica="host:123",
        case=3,
        upstream={"url": "http://p:9", "reached": True, "status": 200, "error": None, "ms": 1.25},
        tls=("expired", "certificate_expired", "skills.example"),
        target="/skills/weather/invoke?city=K%C3%B6ln",
        headers=(("Content-Type", "application/json"), ("X-Dup", "1"), ("x-dup", "2")),
        body="AAEC",
        body_encoding="base64",
        body_size=70_000,
        executed=True,
        replayed=True,
        idempotency_key="order-42",
        rate_limit={
            "refused": True,
            "scripted": False,
            "status": 429,
            "retry_after": "date",
            "headers": "x-ratelimit-epoch",
            "limit": 5,
            "remaining": 0,
            "refill": 0.5,
            "wait_ms": 2000,
            "next_ms": 1999,
            "full_ms": 9999,
            "retry_after_value": "Fri, 04 Dec 2026 04:05:06 GMT",
            "key": "header X-Tenant: acme-\u00fc",
        },
        connection="[::1]:50123",
        task={
            "id": "czE.0.4f1c2a9b7e",
            "action": "poll",
            "known": True,
            "expired": False,
            "served": True,
            "status": "working",
            "cancelling": False,
            "progress": 40,
            "poll": 3,
            "poll_after_ms": 2000,
            "terminal_at_ms": None,
        },
        stream={
            "format": "sse",
            "events": 40,
            "last_id": "40",
            "ended": "reset",
            "fault": "reset",
            "fault_after": 40,
            "duration_ms": 812,
            "resumed_from": None,
        },
    )


def test_every_field_of_an_entry_round_trips_through_its_encoding() -> None:
    entry = every_field()
    defaults = Entry._field_defaults
    assert [name for name, default in defaults.items() if getattr(entry, name) == default] == []
    assert decoded(7, encoded(entry)) == entry
    assert decoded(b"7", encoded(entry).encode()) == entry
    plain = Entry(1, 1.5, 2.5, "s", "GET", "/", 200, "list")
    assert decoded(1, encoded(plain)) == plain


def test_a_replica_of_another_version_is_read_by_the_names_of_its_fields(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals()
    a.record(request(path="/this-version"))
    a.flush()
    # A version whose entries have a field this one does not know, and lack some it does.
    names = ["started", "finished", "session", "method", "path", "status", "endpoint",
             "retry", "replica", "some_future_field"]  # fmt: skip
    values = [1.5, 2.5, "ci-9", "GET", "/other-version", 429, "invoke", [250, 4], "old:1", 42]
    a.client.hset(a.schemas, "other-version", json.dumps(names))
    fields = {"i": 99, "s": "ci-9", "k": "other-version", "e": json.dumps(values)}
    a.client.xadd(a.stream, fields)  # type: ignore[arg-type]

    mine, theirs = a.entries()
    assert mine.path == "/this-version"
    assert theirs == Entry(
        99, 1.5, 2.5, "ci-9", "GET", "/other-version", 429, "invoke",
        retry=Retry(250, 4), replica="old:1",
    )  # fmt: skip
    assert a.entries("ci-9") == [theirs]


def test_every_field_round_trips_through_redis(journals: Callable[..., RedisJournal]) -> None:
    a = journals(replica=None)
    entry = every_field()
    a.record(entry)
    (read,) = a.entries()
    assert read == entry._replace(id=read.id)  # the stream numbered it


def test_a_connection_recorded_as_read_is_shared_written_out(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals(replica=None)
    a.record(every_field()._replace(connection=("::1", 50123)))  # the peer as the transport read it
    a.record(every_field()._replace(connection=("127.0.0.1", 8)))
    a.record(every_field()._replace(connection=("", 0)))  # not known
    assert [e.connection for e in a.entries()] == ["[::1]:50123", "127.0.0.1:8", None]


def test_with_redis_stopped_records_do_not_block_and_the_newest_held_land_once_it_is_back(
    journals: Callable[..., RedisJournal], own_redis: Callable[..., RedisServer]
) -> None:
    server = own_redis()
    a = journals(capacity=50, url=server.url)
    a.record(request(path="/before"))
    assert a.flush()
    server.stop()

    took = []
    for n in range(200):
        start = time.perf_counter()
        a.record(request(path=f"/down/{n}"))
        took.append(time.perf_counter() - start)
    assert max(took) < 0.05, "a record waited on Redis"
    assert sorted(took)[100] < 50e-6
    assert not a.flush(timeout=10)  # none reached Redis: held (at most the capacity)
    assert "Connection" in (a.error or "")

    server.start()
    a.record(request(path="/after"))  # read at once: the flusher waiting to retry is hurried
    paths = [e.path for e in a.entries()]  # (a Redis without persistence restarted)
    landed = [p for p in paths if p.startswith("/down/")]
    assert paths == [*landed, "/after"]
    assert landed == [f"/down/{n}" for n in range(200 - len(landed), 200)]  # the newest
    assert len(landed) >= 40
    # Let go of: as the stream would have trimmed them (before the first failure), or lost.
    assert len(landed) + a.lost + a.trimmed == 200
    assert a.error is None


def test_a_session_name_that_is_not_valid_utf8_is_kept_read_and_cleared(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals()
    odd = "ci-\udcff"  # a byte no UTF-8 decodes, as a surrogate escape
    a.record(request(session=odd, path="/odd"))
    a.record(request(session="ci-plain", path="/plain"))
    assert [e.path for e in a.entries(odd)] == ["/odd"]
    a.clear(odd)
    assert [e.path for e in a.entries()] == ["/plain"]
    assert a.lost == 0


def test_a_read_decodes_only_what_it_has_not_read_before(
    journals: Callable[..., RedisJournal],
) -> None:
    a = journals(capacity=3000)
    for n in range(2500):  # more than a page of the stream
        a.record(request(path=f"/{n}"))
    first = a.entries()
    a.record(request(path="/new"))
    second = a.entries()
    assert [e.path for e in second] == [*(f"/{n}" for n in range(2500)), "/new"]
    assert all(x is y for x, y in zip(first, second, strict=False))  # the same objects


def _child(journal: RedisJournal, start: bool) -> None:
    """A worker forked from a process that holds *journal*: it records and sends one."""
    if start:
        journal.start()
    journal.record(request(path=f"/child-{os.getpid()}"))
    os._exit(0 if journal.flush(timeout=20) and journal.sent == 1 else 1)


def test_a_forked_worker_sends_its_own_entries_and_not_its_parent_s(
    journals: Callable[..., RedisJournal],
) -> None:
    fork = multiprocessing.get_context("fork")
    sending = journals("sending")  # forked while its flusher runs: the child gets one too
    sending.record(request(path="/sent-before"))
    assert sending.flush()
    waiting = journals("waiting", start=False)  # forked with an entry queued, not sent
    waiting.record(request(path="/queued-at-fork"))
    children = [
        fork.Process(target=_child, args=(sending, False)),
        fork.Process(target=_child, args=(waiting, True)),
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
    assert [child.exitcode for child in children] == [0, 0]
    waiting.start()
    assert waiting.flush()
    paths = sorted(e.path for e in sending.entries())
    pids = [child.pid for child in children]
    assert paths == sorted(["/sent-before", "/queued-at-fork", *(f"/child-{p}" for p in pids)])


def test_a_batch_a_frozen_redis_takes_late_is_journalled_once_and_not_counted_lost(
    journals: Callable[..., RedisJournal], own_redis: Callable[..., RedisServer]
) -> None:
    """Frozen (SIGSTOP) past the socket timeout, Redis takes the batch once it resumes: the
    batch is sent again (the script takes its number once), never counted lost."""
    server = own_redis()
    a = journals(capacity=100, url=server.url)
    a.record(request(path="/before"))
    assert a.flush()
    pid = server._process.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)
    try:
        for n in range(48):
            a.record(request(path=f"/frozen/{n}"))
        assert not a.flush(timeout=10)  # no reply within the timeout: held, not lost
        assert "Timeout" in (a.error or "")
        assert not a.flush(timeout=10)  # sent again on a new connection, frozen too
    finally:
        os.kill(pid, signal.SIGCONT)
    assert a.flush(timeout=10)
    paths = [e.path for e in a.entries()]
    assert paths == ["/before", *(f"/frozen/{n}" for n in range(48))]  # each once
    assert (a.lost, a.sent, a.error) == (0, 49, None)


def test_what_is_held_while_redis_is_away_lands_once_it_is_back(
    journals: Callable[..., RedisJournal], own_redis: Callable[..., RedisServer]
) -> None:
    server = own_redis()
    a = journals(capacity=100, url=server.url)
    server.stop()
    for n in range(30):
        a.record(request(path=f"/away/{n}"))
    assert not a.flush(timeout=10)
    assert a.lost == 0
    server.start()
    assert [e.path for e in a.entries()] == [f"/away/{n}" for n in range(30)]
    assert a.lost == 0


def test_what_a_request_sent_is_shared_decoded_and_masked_never_raw(
    journals: Callable[..., RedisJournal],
) -> None:
    a, b = journals("a"), journals("b")
    a.hide(redaction("X-Tenant"))
    # As the engine records it: the target and headers as read, the body's bytes.
    a.record(
        request(
            method="POST",
            path="/skills/echo/invoke",
            target="/skills/echo/invoke?token=t0k&q=1",
            headers=((b"Authorization", b"Bearer s3cret"), (b"X-Tenant", b"acme")),
            body=b'{"password": "pw-1", "text": "hi"}',
            body_size=34,
        )
    )
    a.record(request(target="/bin", headers=(), body=b"\xff\x00", body_size=2))
    for journal in (a, b):
        sent, binary = journal.entries()
        assert sent.target == f"/skills/echo/invoke?token={MASK}&q=1"
        assert sent.headers == (("Authorization", f"Bearer {MASK}"), ("X-Tenant", MASK))
        assert sent.body == f'{{"password": "{MASK}", "text": "hi"}}'
        assert (sent.body_encoding, sent.body_size) == ("text", 34)
        assert (binary.body, binary.body_encoding) == ("/wA=", "base64")
    raw = b"".join(v for _, fields in a.client.xrange(a.stream) for v in fields.values())
    for secret in (b"t0k", b"s3cret", b"acme", b"pw-1"):
        assert secret not in raw


def test_a_shared_journal_serves_what_another_replica_s_request_sent(redis_url: str) -> None:
    scenario = load_text("name: echo\nskills: [{id: echo}]\n", "echo.yaml")
    with (
        Server(scenario, state=redis_url, replica="one") as one,
        Server(scenario, state=redis_url, replica="two") as two,
    ):
        requests.post(
            f"{one.url}/skills/echo/invoke?x=1",
            json={"input": {"text": "shared"}},
            headers={"X-Trace": "t-9"},
            timeout=10,
        )
        one.state.journal()  # a replica's read sends what it holds first
        (entry,) = requests.get(f"{two.url}/__admin/journal", timeout=10).json()["entries"]
    assert entry["replica"] == "one"
    assert entry["target"] == "/skills/echo/invoke?x=1"
    assert ["X-Trace", "t-9"] in entry["headers"]
    assert json.loads(entry["body"]) == {"input": {"text": "shared"}}
    assert (entry["body_encoding"], entry["body_size"]) == ("text", len(entry["body"]))
