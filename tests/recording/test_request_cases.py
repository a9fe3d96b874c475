"""Requests of one endpoint told apart: cases, their conditions, and sessions (``telling``)."""

from __future__ import annotations

from typing import Any

import requests
import yaml
from recording_helpers import JSON, UNREACHABLE, exchange, replay

from mockskill.recording import write, writer

__all__ = ["replay"]  # the fixture, used by name


def test_requests_that_differed_become_cases_that_tell_them_apart(replay: Any) -> None:
    path = "/skills/checks-input/invoke"
    boom = {"input": {"text": "boom", "lang": "de"}}
    hello = {"input": {"text": "hello", "lang": "de"}}
    nolang = {"input": {"text": "hello"}}
    written = write(
        [
            exchange("POST", path, {"result": "hallo"}, body=hello),
            exchange("POST", path, UNREACHABLE, status=503, body=boom),
            exchange("POST", path, {"error": "lang"}, status=400, body=nolang),
            exchange("POST", path, {"result": "hallo again"}, body=hello),
        ],
        delays=False,
    )
    cases = yaml.safe_load(written.text)["skills"][0]["invoke"]["cases"]
    assert len(cases) == 3
    for case in cases:  # pointers into the body, not whole bodies, tell these apart
        assert set(case["when"]) == {"body"}
        assert "" not in case["when"]["body"]
    server = replay(written.text)
    url = server.invoke_url("checks-input")

    def post(body: Any) -> requests.Response:
        return requests.post(url, json=body, timeout=10)

    assert post(boom).status_code == 503
    assert post(nolang).json() == {"error": "lang"}
    # each case keeps its own sequence: the boom in between did not move hello's
    assert post(hello).json() == {"result": "hallo"}
    assert post(hello).json() == {"result": "hallo again"}
    unseen = post({"input": {"text": "new", "lang": "fr"}})
    assert unseen.status_code == 404  # nothing recorded for it: a near miss says why
    assert "near_misses" in unseen.json()["error"]["details"]


def test_query_headers_and_raw_bodies_tell_requests_apart(replay: Any) -> None:
    written = write(
        [
            exchange("GET", "/orders?id=1", {"order": 1}),
            exchange("GET", "/orders?id=2", {"order": 2}),
            exchange("GET", "/orders", {"orders": []}),
            exchange(
                "POST", "/notes", text=b"one", body=b"plain one", headers=(("X-Tenant", "a"),)
            ),
            exchange(
                "POST", "/notes", text=b"two", body=b"plain one", headers=(("X-Tenant", "b"),)
            ),
            exchange(
                "POST", "/notes", text=b"three", body=b"plain two", headers=(("X-Tenant", "b"),)
            ),
        ],
        delays=False,
    )
    routes = yaml.safe_load(written.text)["routes"]
    assert [(r["path"], r.get("method", "GET")) for r in routes] == [
        ("/orders", "GET"),
        ("/notes", "POST"),
    ]
    server = replay(written.text)
    base = server.url
    assert requests.get(f"{base}/orders?id=2", timeout=10).json() == {"order": 2}
    assert requests.get(f"{base}/orders", timeout=10).json() == {"orders": []}
    assert requests.get(f"{base}/orders?id=1", timeout=10).json() == {"order": 1}

    def note(body: bytes, tenant: str) -> str:
        return requests.post(
            f"{base}/notes", data=body, headers={"X-Tenant": tenant}, timeout=10
        ).text

    assert note(b"plain two", "b") == "three"
    assert note(b"plain one", "b") == "two"
    assert note(b"plain one", "a") == "one"


def test_requests_no_condition_tells_apart_share_one_sequence(replay: Any) -> None:
    # 1 and 1.0 are one JSON value to a condition: the two bodies cannot be told apart.
    path = "/skills/numbers/invoke"
    written = write(
        [
            exchange("POST", path, {"n": "first"}, body=b'{"n": 1}'),
            exchange("POST", path, {"n": "second"}, body=b'{"n": 1.0}'),
        ],
        delays=False,
    )
    invoke = yaml.safe_load(written.text)["skills"][0]["invoke"]
    assert invoke == {"steps": [{"json": {"n": "first"}}, {"json": {"n": "second"}}]}


def test_an_endpoint_of_many_different_requests_plays_them_in_order() -> None:
    many = [
        exchange("POST", "/skills/ids/invoke", {"i": i}, body={"request_id": i})
        for i in range(writer.MAX_CASES + 1)
    ]
    written = write(many, delays=False)
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    assert [s["json"]["i"] for s in steps] == list(range(writer.MAX_CASES + 1))
    assert f"more than {writer.MAX_CASES} different requests" in written.text


def test_sessions_that_saw_the_same_answers_share_one_sequence(replay: Any) -> None:
    # Two consumers ran at once, each in its own session: their requests interleave.
    answers = [(503, UNREACHABLE), (503, UNREACHABLE), (200, {"result": "ok"})]
    retry = (*JSON, ("Retry-After", "2"))
    exchanges = [
        exchange(
            "POST",
            "/skills/flaky/invoke",
            answer,
            status=status,
            session=session,
            response_headers=retry if status == 503 else JSON,
        )
        for status, answer in answers
        for session in ("one", "two")
    ]
    written = write(exchanges, delays=False)
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    assert [(s.get("error"), s.get("times", 1)) for s in steps] == [
        ("ENDPOINT_UNREACHABLE", 2),
        (None, 1),
    ]
    server = replay(written.text)
    for session in ("one", "two", "a-new-one"):  # each session replays the run afresh
        headers = {"Mockskill-Session": session}
        got = [
            requests.post(server.invoke_url("flaky"), headers=headers, timeout=10).status_code
            for _ in range(3)
        ]
        assert got == [503, 503, 200], session


def test_sessions_that_saw_different_answers_are_told_apart_by_session(replay: Any) -> None:
    exchanges = [
        exchange("GET", "/quota", {"left": 10}, session="default"),
        exchange("GET", "/quota", {"left": 0}, status=429, session="spent"),
        exchange("GET", "/quota", {"left": 9}, session="default"),
    ]
    written = write(exchanges, delays=False)
    cases = yaml.safe_load(written.text)["routes"][0]["cases"]
    whens = [c["when"]["headers"]["mockskill-session"] for c in cases]
    assert sorted(map(str, whens)) == sorted(["spent", str({"absent": True})])
    server = replay(written.text)
    url = f"{server.url}/quota"
    spent = requests.get(url, headers={"Mockskill-Session": "spent"}, timeout=10)
    assert (spent.status_code, spent.json()) == (429, {"left": 0})
    assert [requests.get(url, timeout=10).json()["left"] for _ in range(2)] == [10, 9]
    # a session the recording never saw gets the first session's answers
    other = {"Mockskill-Session": "another-run"}
    assert requests.get(url, headers=other, timeout=10).json() == {"left": 10}
