"""The Redis store answers every need as the in-memory store does.

Each case is a script of calls (needs, restarts, resets, activations); it
runs against a fresh in-memory State and a fresh RedisStore on an empty
Redis, and the two lists of answers must be equal: the shared backend is
the embedded one's semantics, made atomic across processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mockskill.engine.state import State
from mockskill.engine.store import (
    Bucket,
    IssueToken,
    ReadState,
    Recall,
    Recalled,
    SetState,
    Settle,
    Store,
    Take,
    Taken,
    UseToken,
)
from mockskill.store import open_store

K = "skill/acme.search/invoke"
R = "route/shop/0"


def take(session: str = "s", key: str = K, generation: int = 0, **kw: Any) -> Take:
    return Take(
        session,
        key,
        generation,
        kw.get("scenario", "sc"),
        kw.get("outage"),
        kw.get("draws", False),
        kw.get("limit"),
    )


SLOW = 0.001
"""Tokens a second: a thousand seconds a token, so nothing refills during a case."""


def own(session: str = "s", capacity: int = 2) -> Bucket:
    """*session*'s own bucket on K (a limit per session)."""
    return Bucket(f"sc/{K}/session {session}", capacity, SLOW, session)


SHARED = Bucket(f"sc/{K}/header X-Tenant: acme", 3, SLOW, None)


def recall(session: str = "s", key: str = "k1", digest: str = "d1", **kw: Any) -> Recall:
    return Recall(session, kw.get("skill", "pay"), key, digest, kw.get("reserve_ms", 60_000))


def settle(answer: bytes | None, session: str = "s", key: str = "k1", **kw: Any) -> Settle:
    skill, digest = kw.get("skill", "pay"), kw.get("digest", "d1")
    return Settle(session, skill, key, digest, answer, kw.get("busy_ms", 0))


FIRST = b'{"status":201,"headers":[],"content_type":"application/json","body":"e30="}'

Call = tuple[Any, ...]

CASES: dict[str, list[Call]] = {
    "a sequence counts from 0": [("answer", take())] * 5,
    "sessions and keys count apart": [
        ("answer", take("a")),
        ("answer", take("b")),
        ("answer", take("a")),
        ("answer", take("a", R)),
        ("answer", take("b")),
    ],
    "draws count per session and scenario, with or without a position": [
        ("answer", take(draws=True)),
        ("answer", take(draws=True)),
        ("answer", take(draws=True, scenario="other")),
        ("answer", take()),
        ("answer", take("t", draws=True)),
        ("answer", take(draws=True)),
    ],
    "a restart is a new generation; a request on the old one counts on there": [
        ("answer", take()),
        ("answer", take()),
        ("restart", [K]),
        ("answer", take(generation=1)),
        ("answer", take(generation=0)),
        ("answer", take(generation=1)),
        ("restart", [K, R]),
        ("answer", take(generation=2)),
        ("answer", take(key=R, generation=1)),
    ],
    "a reset of keys restarts their positions, of one session or all": [
        ("answer", take("a")),
        ("answer", take("a")),
        ("answer", take("b")),
        ("answer", take("a", R)),
        ("reset", "a", [K]),
        ("answer", take("a")),
        ("answer", take("b")),
        ("answer", take("a", R)),
        ("reset", None, [K, R]),
        ("answer", take("a")),
        ("answer", take("b")),
        ("answer", take("a", R)),
    ],
    "a reset of keys keeps the generation and the draws": [
        ("restart", [K]),
        ("answer", take(generation=1, draws=True)),
        ("reset", None, [K]),
        ("answer", take(generation=1, draws=True)),
        ("restart", [K]),
    ],
    "a session reset forgets its positions and draws, not others'": [
        ("answer", take("a", draws=True)),
        ("answer", take("b", draws=True)),
        ("reset", "a", None),
        ("answer", take("a", draws=True)),
        ("answer", take("b", draws=True)),
    ],
    "a reset of everything forgets positions, draws and tokens": [
        ("answer", take("a", draws=True)),
        ("answer", IssueToken("tok", frozenset({"x"}), None, None)),
        ("reset", None, None),
        ("answer", take("a", draws=True)),
        ("answer", UseToken("tok")),
    ],
    "a token's uses are spent, then it is forgotten": [
        ("answer", IssueToken("tok", frozenset({"read", "write"}), 60, 2)),
        ("answer", UseToken("tok")),
        ("answer", UseToken("tok")),
        ("answer", UseToken("tok")),
        ("answer", IssueToken("tok", frozenset({"read", "write"}), 60, 2)),
        ("answer", UseToken("tok")),
    ],
    "tokens: unknown, no bound, no uses, expired, no scopes": [
        ("answer", UseToken("nobody")),
        ("answer", IssueToken("free", frozenset({"a"}), None, None)),
        *[("answer", UseToken("free"))] * 3,
        ("answer", IssueToken("none", frozenset({"a"}), 60, 0)),
        ("answer", UseToken("none")),
        ("answer", IssueToken("gone", frozenset({"a"}), 0, None)),
        ("answer", UseToken("gone")),
        ("answer", IssueToken("bare", frozenset(), 60, None)),
        ("answer", UseToken("bare")),
    ],
    "in an outage no position is taken; a draw is": [
        ("activate", ["sc"]),
        ("answer", take(outage=(0, 60_000))),
        ("answer", take(outage=(0, 60_000), draws=True)),
        ("answer", take(outage=(60_000, 120_000))),
        ("answer", take()),
        ("answer", take(outage=(0, 1_000), scenario="never-activated")),
    ],
    "sessions beyond the bound: the least recently used is forgotten": [
        ("answer", take("a")),
        ("answer", take("b")),
        ("answer", take("a")),
        ("answer", take("c")),  # b is the least recently used: forgotten
        ("answer", take("b")),
        ("answer", take("a")),  # forgotten in turn when b came back
    ],
    "a scenario state is per session and per scenario, None until a step sets it": [
        ("answer", ReadState("a", "sc")),
        ("answer", SetState("a", "sc", "paid")),
        ("answer", ReadState("a", "sc")),
        ("answer", ReadState("b", "sc")),
        ("answer", ReadState("a", "other")),
        ("answer", SetState("a", "sc", "shipped")),
        ("answer", ReadState("a", "sc")),
    ],
    "a reset of keys keeps the states; of the session or everything, forgets them": [
        ("answer", SetState("a", "sc", "paid")),
        ("answer", SetState("b", "sc", "paid")),
        ("reset", "a", [K]),
        ("answer", ReadState("a", "sc")),
        ("reset", "a", None),
        ("answer", ReadState("a", "sc")),
        ("answer", ReadState("b", "sc")),
        ("reset", None, None),
        ("answer", ReadState("b", "sc")),
    ],
    "a state is kept with the session: beyond the bound, forgotten with it": [
        ("answer", SetState("a", "sc", "paid")),
        ("answer", take("b")),
        ("answer", ReadState("a", "sc")),  # a read does not make a the most recent
        ("answer", take("c")),  # a is the least recently used: forgotten
        ("answer", ReadState("a", "sc")),
    ],
    "an idempotency key: reserved, settled, replayed; another body conflicts": [
        ("answer", recall()),
        ("answer", recall(digest="d2")),
        ("answer", settle(FIRST)),
        ("answer", recall()),
        ("answer", recall(digest="d2")),
        ("answer", settle(b"late", digest="d1")),  # settled already: kept as it was
        ("answer", recall()),
        ("answer", recall(skill="other")),  # per skill
        ("answer", recall("t")),  # per session
    ],
    "a key in flight until its answer is ready; one that did not run is forgotten": [
        ("answer", recall()),
        ("answer", recall()),  # reserved: in flight
        ("answer", settle(FIRST, busy_ms=60_000)),
        ("answer", recall()),  # ran, its answer not ready yet: in flight
        ("answer", recall(key="k2")),
        ("answer", settle(None, key="k2")),  # did not run
        ("answer", recall(key="k2", digest="d2")),  # free again: any body
        ("answer", recall(key="k3", reserve_ms=0)),  # never settled, lapsed at once
        ("answer", recall(key="k3", digest="d3")),
    ],
    "a session reset forgets its idempotency keys, a reset of keys does not": [
        ("answer", recall()),
        ("answer", settle(FIRST)),
        ("reset", "s", [K]),
        ("answer", recall()),
        ("reset", "s", None),
        ("answer", recall()),
    ],
    "a limit admits its capacity, then refuses: a refusal takes no position, no draw": [
        *[("answer", take(limit=own(), draws=True))] * 4,
        ("answer", take(draws=True)),  # no limit: it goes on where the admitted ones left it
        ("answer", take(limit=own(capacity=1), draws=True)),  # one bucket: the key says which
    ],
    "a shared bucket is every session's; a session's bucket is its own": [
        ("answer", take("a", limit=SHARED)),
        ("answer", take("b", limit=SHARED)),
        ("answer", take("a", limit=own("a"))),
        ("answer", take("c", limit=SHARED)),
        ("answer", take("a", limit=SHARED)),
        ("answer", take("b", limit=own("b"))),
        ("answer", take("b", limit=Bucket(f"sc/{R}/client ::1", 1, 0.5, None))),
    ],
    "in an outage a token is spent, then no position is taken": [
        ("activate", ["sc"]),
        *[("answer", take(outage=(0, 60_000), limit=own(capacity=1)))] * 2,
    ],
    "a session reset forgets its own buckets; of keys, none; of everything, all": [
        *[("answer", take("a", limit=own("a")))] * 2,
        *[("answer", take("b", limit=own("b")))] * 2,
        *[("answer", take("a", limit=SHARED))] * 3,
        ("reset", "a", None),
        ("answer", take("a", limit=own("a"))),
        ("answer", take("b", limit=own("b"))),
        ("answer", take("a", limit=SHARED)),
        ("reset", None, [K]),
        ("answer", take("a", limit=own("a"))),
        ("reset", None, None),
        ("answer", take("b", limit=own("b"))),
        ("answer", take("b", limit=SHARED)),
    ],
    "a session's buckets go with it beyond the bound": [
        *[("answer", take("a", limit=own("a")))] * 2,
        ("answer", take("b")),
        ("answer", take("c")),  # a is the least recently used: forgotten
        ("answer", take("a", limit=own("a"))),
    ],
    "tokens beyond the bound: the oldest is forgotten": [
        ("answer", IssueToken("t1", frozenset({"a"}), None, None)),
        ("answer", IssueToken("t2", frozenset({"a"}), None, None)),
        ("answer", IssueToken("t3", frozenset({"a"}), None, None)),
        ("answer", UseToken("t1")),
        ("answer", UseToken("t2")),
        ("answer", UseToken("t3")),
    ],
}


def played(store: Store, calls: list[Call]) -> list[Any]:
    answers: list[Any] = []
    for name, *args in calls:
        if name == "answer":
            answer = store.answer(args[0])
            if isinstance(answer, Recalled) and answer.wait_ms:  # the same to a second
                answer = answer._replace(wait_ms=round(answer.wait_ms / 1000))
            if isinstance(answer, Taken) and answer.spent:  # the waits too (time passes)
                admitted, remaining, next_ms, full_ms = answer.spent
                seconds = (admitted, remaining, round(next_ms / 1000), round(full_ms / 1000))
                answer = answer._replace(spent=seconds)
            answers.append(answer)
        elif name == "restart":
            answers.append(store.restart(args[0]))
        elif name == "reset":
            answers.append(store.reset(args[0], args[1]))
        else:
            answers.append(store.activate(args[0]))
    return answers


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[Store]:
    store = open_store(redis_url, max_sessions=2)
    yield store
    store.close()


@pytest.mark.parametrize("case", list(CASES))
def test_redis_answers_as_memory_does(case: str, redis_store: Store) -> None:
    calls = CASES[case]
    expected = played(State(max_sessions=2), calls)
    assert played(redis_store, calls) == expected


def test_the_cases_say_something() -> None:
    """Each case's answers differ from call to call: equal lists prove equal semantics."""
    for case, calls in CASES.items():
        assert len({repr(a) for a in played(State(max_sessions=2), calls)}) > 1, case
