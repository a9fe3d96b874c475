"""Rate limits from outside: a token bucket on a skill or route, refused in 429
``RATE_LIMITED`` or 503 ``ENDPOINT_UNREACHABLE``, every ``Retry-After`` and rate-limit
header form exactly as sent, the keys, scripted ``rate_limited`` steps and the journal
(docs/rate-limits.md). Real servers on ephemeral ports (the event loop's, and the WSGI
player through Werkzeug), real clients (requests, httpx, curl)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import textwrap
import time
import uuid
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest
import requests
from werkzeug.test import Client

from mockskill import Server, create_app, load_text
from mockskill.engine.engine import Engine
from mockskill.engine.state import State
from mockskill.protocol import catalog
from mockskill.scenario.model import ScenarioSet


def load(text: str) -> ScenarioSet:
    return load_text(textwrap.dedent(text), "test.yaml")


def limit(
    capacity: int = 2,
    refill: float = 0.5,
    key: str = "session",
    key_name: str | None = None,
    **answer: Any,
) -> str:
    """A ``rate_limit:`` as YAML (a flow mapping)."""
    keyed = key if key_name is None else f"{{{key}: {key_name}}}"
    more = "".join(f", {name}: {value}" for name, value in answer.items())
    return f"{{capacity: {capacity}, refill: {refill}, key: {keyed}{more}}}"


def scripted(wait_ms: int, stated: int = 10, **answer: Any) -> str:
    """A ``rate_limited:`` step's mapping as YAML."""
    more = "".join(f", {name}: {value}" for name, value in answer.items())
    return f"{{retry_after_ms: {wait_ms}, limit: {stated}{more}}}"


def limited(
    *, skill: str | None = None, route: str | None = None, first: str | None = None
) -> ScenarioSet:
    """Skill ``search`` limited by *skill* (its first invocation a ``rate_limited:`` step
    *first*), skill ``free`` not, route ``/v1/things`` limited by *route*."""
    lines = ["skills:", "  - id: search"]
    if skill is not None:
        lines.append(f"    rate_limit: {skill}")
    if first is not None:
        lines += ["    invoke:", f"      - rate_limited: {first}", "      - json: {ok: true}"]
    lines += ["  - id: free", "routes:", "  - path: /v1/things"]
    if route is not None:
        lines.append(f"    rate_limit: {route}")
    lines += ["    steps:", "      - json: {things: []}"]
    return load_text("\n".join(lines) + "\n", "test.yaml")


@pytest.fixture
def start() -> Any:
    servers: list[Server] = []

    def started(scenarios: ScenarioSet) -> str:
        server = Server(scenarios).start()
        servers.append(server)
        return server.url

    yield started
    for server in servers:
        server.stop()


def fresh() -> dict[str, str]:
    return {"Mockskill-Session": f"rl-{uuid.uuid4().hex[:10]}"}


def journal(url: str, session: str) -> list[dict[str, Any]]:
    entries = requests.get(f"{url}/__admin/journal", params={"session": session}).json()
    found = entries["entries"] if isinstance(entries, dict) else entries
    return sorted((e for e in found if e["session"] == session), key=lambda e: e["id"])


def invoke(url: str, headers: dict[str, str], **kwargs: Any) -> requests.Response:
    return requests.post(f"{url}/skills/search/invoke", headers=headers, **kwargs)


# -- the bucket ---------------------------------------------------------------------


def test_capacity_is_admitted_then_refused_with_a_valid_unified_429(start: Any) -> None:
    url, headers = start(limited(skill=limit(3, 0.5))), fresh()
    admitted = [invoke(url, headers) for _ in range(3)]
    assert [a.status_code for a in admitted] == [200, 200, 200]
    assert [a.headers["RateLimit"] for a in admitted] == [
        f'"default";r={r};t={t}' for r, t in ((2, 2), (1, 4), (0, 6))
    ]
    refused = invoke(url, headers)
    assert refused.status_code == 429
    body = refused.json()
    assert catalog.error_body_problem(body) is None
    error = body["error"]
    assert error["code"] == "RATE_LIMITED"
    assert error["details"] == {"limit": 3, "refill_per_second": 0.5, "key": "session"}
    assert error["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert refused.headers["Retry-After"] == "2"
    assert refused.headers["RateLimit-Policy"] == '"default";q=3;w=6'
    assert refused.headers["RateLimit"] == '"default";r=0;t=6'
    assert requests.post(f"{url}/skills/free/invoke", headers=headers).status_code == 200


def test_the_refill_lets_one_more_in_after_its_time(start: Any) -> None:
    url, headers = start(limited(skill=limit(1, 2, retry_after="ms"))), fresh()
    assert invoke(url, headers).status_code == 200
    refused = invoke(url, headers)
    assert refused.status_code == 429
    assert 0 < refused.json()["error"]["retry"]["suggested_delay_ms"] <= 500
    time.sleep(0.6)  # one token comes every 500 ms
    assert invoke(url, headers).status_code == 200
    assert invoke(url, headers).status_code == 429


def test_a_refused_request_is_not_played_its_sequence_does_not_move(start: Any) -> None:
    text = """
    skills:
      - id: search
        rate_limit: {capacity: 1, refill: 2}
        invoke:
          - json: {n: 1}
          - json: {n: 2}
    """
    url, headers = start(load(text)), fresh()
    assert invoke(url, headers).json() == {"n": 1}
    assert invoke(url, headers).status_code == 429
    time.sleep(0.6)  # one token comes every 500 ms
    assert invoke(url, headers).json() == {"n": 2}


def test_the_in_protocol_refusal_is_a_503_endpoint_unreachable(start: Any) -> None:
    url, headers = start(limited(skill=limit(1, 0.5, status=503))), fresh()
    invoke(url, headers)
    refused = invoke(url, headers)
    assert refused.status_code == 503
    body = refused.json()
    assert catalog.error_body_problem(body) is None
    assert body["error"]["code"] == "ENDPOINT_UNREACHABLE"
    assert body["error"]["details"]["reason"] == "rate limited"
    assert body["error"]["details"]["endpoint_url"] == f"{url}/skills/search/invoke"
    assert body["error"]["retry"] == {"suggested_delay_ms": 2000, "max_attempts": 5}
    assert refused.headers["Retry-After"] == "2"


def test_sessions_have_buckets_of_their_own(start: Any) -> None:
    url = start(limited(skill=limit(1, 0.1)))
    one, two = fresh(), fresh()
    assert invoke(url, one).status_code == 200
    assert invoke(url, one).status_code == 429
    assert invoke(url, two).status_code == 200


def test_a_route_is_limited_too(start: Any) -> None:
    url, headers = start(limited(route=limit(1, 0.1, headers="x-ratelimit"))), fresh()
    first = requests.get(f"{url}/v1/things", headers=headers)
    assert first.status_code == 200
    assert first.headers["X-RateLimit-Remaining"] == "0"
    refused = requests.get(f"{url}/v1/things", headers=headers)
    assert refused.status_code == 429
    assert refused.headers["X-RateLimit-Limit"] == "1"


def test_a_forced_error_and_a_refused_credential_take_no_token(start: Any) -> None:
    url, headers = start(limited(skill=limit(1, 0.1))), fresh()
    forced = invoke(url, {**headers, "Mockskill-Error": "EXECUTION_TIMEOUT"})
    assert forced.status_code == 504
    assert "RateLimit" not in forced.headers
    assert invoke(url, headers).status_code == 200  # the one token was still there


# -- the Retry-After forms, exactly ----------------------------------------------


def refused_with(start: Any, wait_ms: int, **answer: Any) -> requests.Response:
    """A scripted refusal advising *wait_ms*, in *answer*'s forms."""
    url = start(limited(first=scripted(wait_ms, **answer)))
    return invoke(url, fresh())


def test_retry_after_in_seconds_rounds_up(start: Any) -> None:
    answer = refused_with(start, 1500)
    assert answer.headers["Retry-After"] == "2"
    assert answer.json()["error"]["retry"]["suggested_delay_ms"] == 2000


def test_retry_after_as_an_http_date_against_the_date_header_and_the_clock(start: Any) -> None:
    before = time.time()
    answer = refused_with(start, 2500, retry_after="date")
    after = time.time()
    date = parsedate_to_datetime(answer.headers["Date"]).timestamp()
    retry_at = parsedate_to_datetime(answer.headers["Retry-After"]).timestamp()
    assert answer.headers["Retry-After"].endswith(" GMT")
    assert math.floor(before) <= date <= after
    assert date + 2.5 <= retry_at <= date + 4  # ceil(now + 2.5 s), now in [date, date + 1)
    advised = answer.json()["error"]["retry"]["suggested_delay_ms"]
    assert 2500 <= advised <= 3500
    assert before + advised / 1000 <= retry_at + 0.01


@pytest.mark.parametrize(("wait_ms", "sent"), [(1500, "1.5"), (2000, "2.0"), (1234, "1.234")])
def test_retry_after_fractional(start: Any, wait_ms: int, sent: str) -> None:
    answer = refused_with(start, wait_ms, retry_after="fractional")
    assert answer.headers["Retry-After"] == sent
    assert answer.json()["error"]["retry"]["suggested_delay_ms"] == wait_ms


def test_retry_after_ms_comes_with_whole_seconds(start: Any) -> None:
    answer = refused_with(start, 1500, retry_after="ms")
    assert answer.headers["retry-after-ms"] == "1500"
    assert answer.headers["Retry-After"] == "2"
    assert answer.json()["error"]["retry"]["suggested_delay_ms"] == 1500


@pytest.mark.parametrize(("form", "sent"), [("missing", None), ("malformed", "soon")])
def test_missing_and_malformed_retry_after_advise_nothing(
    start: Any, form: str, sent: str | None
) -> None:
    answer = refused_with(start, 1500, retry_after=form)
    assert answer.headers.get("Retry-After") == sent
    assert "retry" not in answer.json()["error"]
    assert catalog.error_body_problem(answer.json()) is None


# -- the rate-limit header forms ------------------------------------------------


def test_the_ietf_form(start: Any) -> None:
    answer = refused_with(start, 1500, headers="ietf")
    assert answer.headers["RateLimit-Policy"] == '"default";q=10;w=2'
    assert answer.headers["RateLimit"] == '"default";r=0;t=2'
    assert "X-RateLimit-Limit" not in answer.headers


def test_the_x_ratelimit_form_with_seconds_left(start: Any) -> None:
    answer = refused_with(start, 2500, headers="x-ratelimit")
    assert answer.headers["X-RateLimit-Limit"] == "10"
    assert answer.headers["X-RateLimit-Remaining"] == "0"
    assert answer.headers["X-RateLimit-Reset"] == "3"
    assert "RateLimit" not in answer.headers


def test_the_x_ratelimit_form_with_epoch_seconds(start: Any) -> None:
    before = time.time()
    answer = refused_with(start, 2500, headers="x-ratelimit-epoch")
    reset = int(answer.headers["X-RateLimit-Reset"])
    assert math.ceil(before + 2.5) <= reset <= math.ceil(time.time() + 2.5)


def test_no_rate_limit_headers(start: Any) -> None:
    answer = refused_with(start, 1500, headers="none")
    assert not [h for h in answer.headers if "ratelimit" in h.lower()]
    assert answer.headers["Retry-After"] == "2"


def test_admitted_answers_carry_the_headers_with_what_is_left(start: Any) -> None:
    url = start(limited(skill=limit(5, 100, headers="x-ratelimit")))
    headers = fresh()
    remaining = [invoke(url, headers).headers["X-RateLimit-Remaining"] for _ in range(3)]
    assert remaining in (["4", "3", "2"], ["4", "4", "3"], ["4", "3", "3"], ["4", "4", "4"])
    assert invoke(url, headers).json() == {"skill": "search", "result": "ok"}


def test_admitted_answers_of_the_none_form_carry_nothing_more(start: Any) -> None:
    url = start(limited(skill=limit(5, 1, headers="none")))
    answer = invoke(url, fresh())
    assert answer.status_code == 200
    assert not [h for h in answer.headers if "ratelimit" in h.lower()]


# -- the scripted step --------------------------------------------------------------


def test_a_scripted_rate_limited_step_twice_then_success(start: Any) -> None:
    text = """
    skills:
      - id: search
        invoke:
          - rate_limited:
              {retry_after_ms: 1500, retry_after: ms, headers: x-ratelimit, status: 503, limit: 10}
            times: 2
          - json: {ok: true}
    """
    url, headers = start(load(text)), fresh()
    answers = [invoke(url, headers) for _ in range(3)]
    assert [a.status_code for a in answers] == [503, 503, 200]
    assert answers[0].json()["error"]["code"] == "ENDPOINT_UNREACHABLE"
    assert answers[1].headers["retry-after-ms"] == "1500"
    assert answers[2].json() == {"ok": True}
    entries = journal(url, headers["Mockskill-Session"])
    assert [e["rate_limit"]["scripted"] for e in entries[:2]] == [True, True]
    assert entries[0]["rate_limit"]["wait_ms"] == 1500
    assert entries[0]["step"] == 0
    assert entries[2].get("rate_limit") is None


# -- the keys ---------------------------------------------------------------------


def test_a_header_key_counts_per_value_and_without_it_in_one_shared_bucket(
    start: Any,
) -> None:
    url = start(limited(skill=limit(1, 0.1, key="header", key_name="x-tenant")))
    acme, other = {"X-Tenant": "acme"}, {"X-Tenant": "other"}
    assert invoke(url, {**fresh(), **acme}).status_code == 200
    assert invoke(url, {**fresh(), **acme}).status_code == 429  # another session, same tenant
    assert invoke(url, {**fresh(), **other}).status_code == 200
    assert invoke(url, fresh()).status_code == 200  # no header: the shared bucket
    shared = fresh()
    assert invoke(url, shared).status_code == 429
    assert journal(url, shared["Mockskill-Session"])[0]["rate_limit"]["key"] == "header x-tenant"


def test_a_body_key_reads_the_pointer_and_a_body_without_it_is_shared(start: Any) -> None:
    url = start(limited(skill=limit(1, 0.1, key="body", key_name="/input/tenant")))

    def post(body: Any) -> int:
        return invoke(url, fresh(), json=body).status_code

    assert post({"input": {"tenant": "a"}}) == 200
    assert post({"input": {"tenant": "a"}}) == 429
    assert post({"input": {"tenant": 7}}) == 200
    assert post({"input": {}}) == 200
    assert invoke(url, fresh(), data=b"not json").status_code == 429  # also no value: shared


def test_a_credential_key_counts_per_credential(start: Any) -> None:
    url = start(limited(skill=limit(1, 0.1, key="credential")))
    one, two = {"Authorization": "Bearer one"}, {"Authorization": "Bearer two"}
    assert invoke(url, {**fresh(), **one}).status_code == 200
    assert invoke(url, {**fresh(), **one}).status_code == 429
    assert invoke(url, {**fresh(), **two}).status_code == 200
    session = fresh()
    invoke(url, {**session, **one})
    key = journal(url, session["Mockskill-Session"])[0]["rate_limit"]["key"]
    assert key.startswith("credential: bearer hmac-sha256:")
    assert "one" not in json.dumps(key)  # a fingerprint, never the secret


def test_a_client_key_counts_per_address(start: Any) -> None:
    url = start(limited(skill=limit(2, 0.1, key="client")))
    assert invoke(url, fresh()).status_code == 200
    assert invoke(url, fresh()).status_code == 200
    answer = invoke(url, fresh())
    assert answer.status_code == 429
    session = fresh()
    invoke(url, session)
    key = journal(url, session["Mockskill-Session"])[0]["rate_limit"]["key"]
    assert key == "client: 127.0.0.1"


def test_a_hostile_key_gets_no_500_and_bounded_keys(start: Any) -> None:
    server_url = start(limited(skill=limit(1, 0.1, key="header", key_name="x-tenant")))
    huge = {**fresh(), "X-Tenant": "t" * 60_000}
    assert invoke(server_url, huge).status_code == 200
    assert invoke(server_url, huge).status_code == 429
    with httpx.Client() as client:
        for n in range(300):
            answer = client.post(
                f"{server_url}/skills/search/invoke", headers={"X-Tenant": f"tenant-{n}"}
            )
            assert answer.status_code == 200
    session = fresh()
    invoke(server_url, {**session, "X-Tenant": "t" * 60_000})
    entry = journal(server_url, session["Mockskill-Session"])[0]
    assert entry["rate_limit"]["key"].startswith("header x-tenant: tttt")
    assert len(entry["rate_limit"]["key"]) < 200


# -- the journal ----------------------------------------------------------------------


def test_the_journal_says_what_the_limit_said(start: Any) -> None:
    url, headers = start(limited(skill=limit(1, 0.5, retry_after="fractional"))), fresh()
    invoke(url, headers)
    invoke(url, headers)
    admitted, refused = journal(url, headers["Mockskill-Session"])
    assert admitted["rate_limit"] == {
        "refused": False,
        "scripted": False,
        "status": 429,
        "retry_after": "fractional",
        "headers": "ietf",
        "limit": 1,
        "remaining": 0,
        "refill": 0.5,
        "wait_ms": None,
        "next_ms": admitted["rate_limit"]["next_ms"],
        "full_ms": admitted["rate_limit"]["full_ms"],
        "retry_after_value": None,
        "key": f"session: {headers['Mockskill-Session']}",
    }
    assert 1900 <= admitted["rate_limit"]["next_ms"] <= 2000
    assert admitted["executed"] is True
    limit_said = refused["rate_limit"]
    assert limit_said["refused"] is True
    assert refused["status"] == 429
    assert refused["error_code"] == "RATE_LIMITED"
    assert refused["executed"] is False
    assert refused["step"] is None
    assert limit_said["wait_ms"] == limit_said["next_ms"]
    assert refused["retry"] == {"suggested_delay_ms": limit_said["wait_ms"], "max_attempts": 5}
    assert limit_said["retry_after_value"] == limits_fractional(limit_said["wait_ms"])


def limits_fractional(wait_ms: int) -> str:
    text = f"{wait_ms / 1000:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


# -- curl, and the WSGI player -------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_sees_the_headers_as_sent(start: Any) -> None:
    url = start(limited(first=scripted(1500, 4, retry_after="fractional", headers="ietf")))
    shown = subprocess.run(
        ["curl", "-s", "-i", "-X", "POST", f"{url}/skills/search/invoke"],
        capture_output=True,
        check=True,
    ).stdout.decode("latin-1")
    head = shown.split("\r\n\r\n", 1)[0].split("\r\n")
    assert head[0] == "HTTP/1.1 429 Too Many Requests"
    assert "Retry-After: 1.5" in head
    assert 'RateLimit-Policy: "default";q=4;w=2' in head
    assert 'RateLimit: "default";r=0;t=2' in head


def test_the_wsgi_player_serves_limits_the_same() -> None:
    engine = Engine(limited(skill=limit(2, 0.5, headers="x-ratelimit", status=503)), State())
    client = Client(create_app(engine))
    answers = [client.post("/skills/search/invoke") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 503]
    assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["1", "0", "0"]
    assert answers[2].headers["Retry-After"] == "2"
    assert answers[2].json["error"]["code"] == "ENDPOINT_UNREACHABLE"
    entries = [e for e in engine.state.journal() if e.endpoint == "invoke"]
    assert [e.rate_limit["refused"] for e in entries if e.rate_limit] == [False, False, True]
    assert entries[2].retry == catalog.Retry(2000, 5)


def test_the_wsgi_player_plays_scripted_steps_too() -> None:
    first = scripted(2500, 3, headers="x-ratelimit-epoch")
    client = Client(create_app(Engine(limited(first=first), State())))
    answer = client.post("/skills/search/invoke")
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "3"
    assert int(answer.headers["X-RateLimit-Reset"]) >= math.ceil(time.time() + 1.5)


def test_an_idempotent_skill_is_limited_and_its_replays_take_no_token(start: Any) -> None:
    text = """
    skills:
      - id: search
        idempotency_key: true
        rate_limit: {capacity: 1, refill: 0.1}
    """
    url, headers = start(load(text)), fresh()
    first = invoke(url, {**headers, "Idempotency-Key": "k1"}, json={"input": {}})
    replay = invoke(url, {**headers, "Idempotency-Key": "k1"}, json={"input": {}})
    refused = invoke(url, {**headers, "Idempotency-Key": "k2"}, json={"input": {}})
    assert [first.status_code, replay.status_code, refused.status_code] == [200, 200, 429]
    entries = journal(url, headers["Mockskill-Session"])
    assert [e["replayed"] for e in entries] == [False, True, False]
    assert [e["executed"] for e in entries] == [True, False, False]
    assert entries[2]["rate_limit"]["refused"] is True


def test_a_scripted_step_drawn_from_one_of(start: Any) -> None:
    text = """
    skills:
      - id: search
        invoke:
          - one_of:
              - rate_limited: {retry_after_ms: 1000, limit: 2, headers: none}
    """
    answer = invoke(start(load(text)), fresh())
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "1"
    assert not [h for h in answer.headers if "ratelimit" in h.lower()]


def test_a_scripted_step_waits_its_delay_and_moves_the_state(start: Any) -> None:
    text = """
    name: tenants
    skills:
      - id: search
        invoke:
          - rate_limited: {retry_after_ms: 1000, retry_after: date}
            delay: {fixed: 300}
            set_state: throttled
    routes:
      - path: /state
        cases:
          - state: throttled
            json: {throttled: true}
        steps:
          - json: {throttled: false}
    """
    url, headers = start(load(text)), fresh()
    before = time.time()
    answer = invoke(url, headers)
    assert time.time() - before >= 0.3
    assert answer.status_code == 429
    date = parsedate_to_datetime(answer.headers["Date"]).timestamp()
    assert date >= math.floor(before + 0.3)  # the clock of the answer, after the delay
    assert requests.get(f"{url}/state", headers=headers).json() == {"throttled": True}


def test_a_request_passed_on_between_cases_spends_one_token(start: Any) -> None:
    text = """
    routes:
      - path: /v1/things
        rate_limit: {capacity: 2, refill: 0.1, headers: x-ratelimit}
        cases:
          - when: {headers: {X-Case: a}}
            steps:
              - json: {case: a}
            end: next
        steps:
          - json: {case: default}
    """
    url, headers = start(load(text)), {**fresh(), "X-Case": "a"}
    first = requests.get(f"{url}/v1/things", headers=headers)
    passed = requests.get(f"{url}/v1/things", headers=headers)  # case a is over: passed on
    assert (first.json(), passed.json()) == ({"case": "a"}, {"case": "default"})
    assert [first.headers["X-RateLimit-Remaining"], passed.headers["X-RateLimit-Remaining"]] == [
        "1",
        "0",
    ]
    entries = journal(url, headers["Mockskill-Session"])
    assert [e["rate_limit"]["remaining"] for e in entries] == [1, 0]


def test_a_refusal_is_journalled_with_the_case_it_matched(start: Any) -> None:
    # The refusals' answers are kept: each case's (and the default's) keeps its own row.
    text = """
    routes:
      - path: /v1/things
        rate_limit: {capacity: 1, refill: 0.01}
        cases:
          - when: {headers: {X-Case: a}}
            steps:
              - json: {case: a}
        steps:
          - json: {case: default}
    """
    url, headers = start(load(text)), fresh()
    statuses = [
        requests.get(f"{url}/v1/things", headers={**headers, "X-Case": "a"}).status_code,
        requests.get(f"{url}/v1/things", headers={**headers, "X-Case": "a"}).status_code,
        requests.get(f"{url}/v1/things", headers=headers).status_code,
        requests.get(f"{url}/v1/things", headers={**headers, "X-Case": "a"}).status_code,
    ]
    assert statuses == [200, 429, 429, 429]
    entries = journal(url, headers["Mockskill-Session"])
    assert [e["case"] for e in entries] == [0, 0, None, 0]
    assert [e["rate_limit"]["refused"] for e in entries] == [False, True, True, True]
