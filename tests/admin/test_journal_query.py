"""GET /__admin/journal and /unmatched over the wire: every filter, bad filters, the ring."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
import requests

from mockskill import Server, ServerError
from mockskill.engine.entries import Entry

Serve = Callable[..., Server]


# -- the request journal and the unmatched requests (GET /__admin/journal, /unmatched) ----

JOURNALED = """
    name: journaled
    auth:
      tokens: [{token: very-secret-token, scopes: [skill:invoke]}]
      clients: [{client_id: consumer, client_secret: client-secret, scopes: [skill:invoke]}]
    skills:
      - id: flaky
        invoke:
          end: cycle
          steps:
            - error: ENDPOINT_UNREACHABLE
            - json: {result: ok}
      - id: locked
        requires: true
    routes:
      - path: /orders/<int:order>
        method: GET
        steps:
          - json: {order: found}
"""


def journal(server: Server, **query: object) -> requests.Response:
    return requests.get(f"{server.url}/__admin/journal", params=query, timeout=10)  # type: ignore[arg-type]


def entries(server: Server, **query: object) -> list[dict[str, object]]:
    response = journal(server, **query)
    assert response.status_code == 200, response.text
    return list(response.json()["entries"])


def play(server: Server) -> None:
    """flaky twice (an error, then ok) in session s1; locked refused; one unmatched in s2."""
    s1 = {"Mockskill-Session": "s1"}
    requests.post(server.invoke_url("flaky"), headers=s1, timeout=10)
    requests.post(server.invoke_url("flaky"), headers=s1, timeout=10)
    requests.post(server.invoke_url("locked"), headers=s1, timeout=10)
    requests.delete(f"{server.url}/orders/7", headers={"Mockskill-Session": "s2"}, timeout=10)


def test_the_journal_lists_every_entry_oldest_first_with_size_and_capacity(serve: Serve) -> None:
    server = serve(JOURNALED, journal_size=50)
    play(server)
    body = journal(server).json()
    assert (body["size"], body["capacity"]) == (4, 50)
    assert [e["path"] for e in body["entries"]] == [
        "/skills/flaky/invoke",
        "/skills/flaky/invoke",
        "/skills/locked/invoke",
        "/orders/7",
    ]
    first = body["entries"][0]
    assert first["error_code"] == "ENDPOINT_UNREACHABLE"
    assert set(first["retry"]) == {"suggested_delay_ms", "max_attempts"}
    assert body["entries"][1]["retry"] is None
    assert first["step"] == 0
    assert first["started"] <= first["finished"]


def test_the_journal_over_http_matches_the_server_journal(serve: Serve) -> None:
    server = serve(JOURNALED)
    play(server)
    assert entries(server) == [e.as_json() for e in server.journal()]


@pytest.mark.parametrize(
    ("query", "paths"),
    [
        ({"session": "s2"}, ["/orders/7"]),
        ({"skill": "locked"}, ["/skills/locked/invoke"]),
        ({"endpoint": "unmatched"}, ["/orders/7"]),
        ({"status": 200}, ["/skills/flaky/invoke"]),
        ({"status": 401}, ["/skills/locked/invoke"]),
        ({"error_code": "ENDPOINT_UNREACHABLE"}, ["/skills/flaky/invoke"]),
        ({"limit": 2}, ["/skills/locked/invoke", "/orders/7"]),
        ({"limit": 0}, []),
        ({"session": "s1", "skill": "flaky"}, ["/skills/flaky/invoke"] * 2),
        ({"session": "s1", "endpoint": "invoke", "limit": 1}, ["/skills/locked/invoke"]),
        ({"session": "s2", "skill": "flaky"}, []),
    ],
)
def test_the_journal_filters(serve: Serve, query: dict[str, object], paths: list[str]) -> None:
    server = serve(JOURNALED)
    play(server)
    assert [e["path"] for e in entries(server, **query)] == paths


def test_each_entry_names_its_replica_and_the_listings_filter_on_it(serve: Serve) -> None:
    server = serve(JOURNALED)
    play(server)
    assert {e["replica"] for e in entries(server)} == {None}  # a server's own journal
    for replica, endpoint in (("web-1:7", "invoke"), ("web-2:9", "unmatched")):
        now = time.time()  # as a journal several replicas share holds them
        server.state.record(
            Entry(server.state.next_id(), now, now, "s3", "GET", f"/from/{replica}", 200,
                  endpoint, replica=replica)
        )  # fmt: skip
    assert [e["path"] for e in entries(server, replica="web-1:7")] == ["/from/web-1:7"]
    assert entries(server, replica="web-3:1") == []
    unmatched = requests.get(
        f"{server.url}/__admin/unmatched", params={"replica": "web-2:9"}, timeout=10
    )
    assert [r["path"] for r in unmatched.json()["requests"]] == ["/from/web-2:9"]


def test_the_journal_filters_on_the_start_time(serve: Serve) -> None:
    server = serve(JOURNALED)
    play(server)
    started = [e.started for e in server.journal()]
    assert [e["started"] for e in entries(server, since=started[2])] == started[2:]
    assert [e["started"] for e in entries(server, until=started[1])] == started[:2]
    assert entries(server, since=started[1], until=started[2], session="s1")[0]["step"] == 1
    assert entries(server, since=started[-1] + 60) == []


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"sesion": "s1"}, "sesion"),
        ({"status": "ok"}, "status"),
        ({"status": "42"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"until": "nan"}, "until"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "all"}, "limit"),
        ({"endpoint": "invok"}, "endpoint"),
        ({"session": ["s1", "s2"]}, "session"),
    ],
)
def test_a_bad_filter_is_a_400_naming_the_parameter(
    serve: Serve, query: dict[str, object], parameter: str
) -> None:
    server = serve(JOURNALED)
    response = journal(server, **query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_BAD_REQUEST"
    assert error["details"]["parameter"] == parameter
    assert repr(parameter) in error["message"] or f"{parameter}=" in error["message"]


def test_the_journal_keeps_only_the_newest_entries(serve: Serve) -> None:
    server = serve(JOURNALED, journal_size=3)
    for order in range(5):
        requests.get(f"{server.url}/orders/{order}", timeout=10)
    body = journal(server).json()
    assert (body["size"], body["capacity"]) == (3, 3)
    assert [e["path"] for e in body["entries"]] == ["/orders/2", "/orders/3", "/orders/4"]
    assert [e.path for e in server.journal()] == ["/orders/2", "/orders/3", "/orders/4"]


def test_a_journal_size_below_one_is_refused() -> None:
    with pytest.raises(ServerError, match="journal_size"):
        Server(journal_size=0)


def test_serve_takes_a_journal_size() -> None:
    from click.testing import CliRunner

    from mockskill.cli import cli

    result = CliRunner().invoke(cli, ["serve", "--journal-size", "0"])
    assert result.exit_code == 2
    assert "--journal-size" in result.output
    assert "--journal-size" in CliRunner().invoke(cli, ["serve", "--help"]).output


def test_unmatched_lists_the_requests_nothing_served_with_near_misses(serve: Serve) -> None:
    server = serve(JOURNALED)
    play(server)
    requests.get(f"{server.url}/order/7", timeout=10)
    response = requests.get(f"{server.url}/__admin/unmatched", timeout=10)
    assert response.status_code == 200
    listed = response.json()["requests"]
    assert [(r["method"], r["path"]) for r in listed] == [
        ("DELETE", "/orders/7"),
        ("GET", "/order/7"),
    ]
    assert all(r["endpoint"] == "unmatched" for r in listed)
    assert listed[0]["near_misses"][0] == {
        "route": "GET /orders/<int:order>",
        "reasons": ["method DELETE is not GET"],
    }
    one = requests.get(f"{server.url}/__admin/unmatched", params={"session": "s2"}, timeout=10)
    assert [r["path"] for r in one.json()["requests"]] == ["/orders/7"]
    newest = requests.get(f"{server.url}/__admin/unmatched", params={"limit": 1}, timeout=10)
    assert [r["path"] for r in newest.json()["requests"]] == ["/order/7"]
    refused = requests.get(f"{server.url}/__admin/unmatched", params={"skill": "x"}, timeout=10)
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["parameter"] == "skill"


def test_the_journal_records_a_credential_fingerprint_never_the_secret(serve: Serve) -> None:
    server = serve(JOURNALED)
    bearer = {"Authorization": "Bearer very-secret-token"}
    assert requests.post(server.invoke_url("locked"), headers=bearer, timeout=10).ok
    requests.post(server.invoke_url("locked"), headers={"X-API-Key": "a-key"}, timeout=10)
    requests.post(server.invoke_url("locked"), timeout=10)
    requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=("consumer", "client-secret"),
        timeout=10,
    )
    requests.post(server.invoke_url("locked"), headers=bearer, timeout=10)
    response = journal(server)
    listed = response.json()["entries"]
    credentials = [e["credential"] for e in listed]
    assert credentials[2:4] == [None, "client consumer"]
    assert re.fullmatch(r"bearer hmac-sha256:[0-9a-f]{16}", credentials[0])
    assert re.fullmatch(r"api_key hmac-sha256:[0-9a-f]{16}", credentials[1])
    assert credentials[4] == credentials[0]  # the same secret, the same fingerprint
    for secret in ("very-secret-token", "a-key", "client-secret"):
        assert secret not in response.text
