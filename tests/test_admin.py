"""/__admin over the wire: health, reset, validate, the journal, unmatched requests, scenarios."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import ScenarioError, Server, ServerError, __version__, load_text
from mockskill.auth import fingerprint

Serve = Callable[..., Server]


def test_health_names_the_version_seed_and_what_is_served(serve: Serve) -> None:
    server = serve("name: demo\nskills: [{id: a}, {id: b}]", seed=99)
    health = requests.get(f"{server.url}/__admin/health", timeout=10).json()
    assert health == {
        "status": "ok",
        "version": __version__,
        "seed": 99,
        "scenarios": ["demo"],
        "skills": 2,
    }


def test_admin_requests_are_not_journaled(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    requests.get(f"{server.url}/__admin/health", timeout=10)
    requests.post(server.invoke_url("a"), timeout=10)
    assert [e.path for e in server.state.journal()] == ["/skills/a/invoke"]


def test_reset_answers_what_it_reset(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    everything = requests.post(f"{server.url}/__admin/reset", timeout=10)
    assert everything.json() == {"reset": "all", "session": None}
    one = requests.post(f"{server.url}/__admin/reset?session=x", timeout=10)
    assert one.json() == {"reset": "session", "session": "x"}


def test_validate_lists_every_violation_of_a_descriptor(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    descriptor = requests.get(server.skill_url("a"), timeout=10).json()
    ok = requests.post(f"{server.url}/__admin/validate", json=descriptor, timeout=10)
    assert (ok.status_code, ok.json()) == (200, {"valid": True})
    del descriptor["name"]
    descriptor["capability_type"] = "unknown_type"
    bad = requests.post(f"{server.url}/__admin/validate", json=descriptor, timeout=10)
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [v["field"] for v in error["details"]["violations"]] == ["/name", "/capability_type"]


def test_validate_refuses_a_body_that_is_not_json(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    response = requests.post(f"{server.url}/__admin/validate", data="{nope", timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"


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
    response = journal(server)
    listed = response.json()["entries"]
    assert [e["credential"] for e in listed] == [
        f"bearer {fingerprint('very-secret-token')}",
        f"api_key {fingerprint('a-key')}",
        None,
        "client consumer",
    ]
    for secret in ("very-secret-token", "a-key", "client-secret"):
        assert secret not in response.text


# -- the loaded scenarios: /__admin/scenarios ------------------------------------------------

YAML = {"Content-Type": "application/yaml"}
COUNTER = """
name: counter
description: counts
skills:
  - id: count
    invoke: [{json: {n: 1}}, {json: {n: 2}}, {json: {n: 3}}]
routes:
  - {path: /ping, method: [GET, POST], steps: [{json: pong}]}
"""
BAD = """\
name: orders
skills:
  - id: orders
    invok: {json: 1}
  - id: other
    invoke: {error: ENDPOINT_UNREACHABL}
routes:
  - {path: status, steps: [{json: 1}]}
"""


def admin(server: Server, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(method, f"{server.url}/__admin{path}", timeout=10, **kwargs)


def load(server: Server, text: str, **params: str) -> requests.Response:
    return admin(server, "POST", "/scenarios", data=text, headers=YAML, params=params)


def listed(server: Server) -> list[tuple[str, bool]]:
    body = admin(server, "GET", "/scenarios").json()
    return [(s["name"], s["active"]) for s in body["scenarios"]]


def skills(server: Server) -> list[str]:
    return [s["id"] for s in requests.get(f"{server.url}/skills", timeout=10).json()["skills"]]


def count(server: Server, session: str = "default") -> Any:
    headers = {"Mockskill-Session": session}
    response = requests.post(server.invoke_url("count"), headers=headers, timeout=10)
    return response.json()["n"] if response.ok else response.status_code


def test_the_scenarios_are_listed_with_origin_skills_routes_and_times(serve: Serve) -> None:
    started = time.time()
    server = serve(COUNTER)
    (one,) = admin(server, "GET", "/scenarios").json()["scenarios"]
    assert one == {
        "name": "counter",
        "description": "counts",
        "active": True,
        "origin": "test.yaml",
        "loaded": one["loaded"],
        "activated": one["loaded"],
        "skills": [
            {
                "id": "count",
                "name": "Count",
                "descriptor_url": f"{server.url}/skills/count",
                "invoke_url": f"{server.url}/skills/count/invoke",
            }
        ],
        "routes": [{"methods": ["GET", "POST"], "path": "/ping"}],
        "url": f"{server.url}/__admin/scenarios/counter",
    }
    assert started - 60 < one["loaded"] <= time.time()
    assert admin(server, "GET", "/scenarios/counter").json() == one


def test_an_unknown_scenario_is_a_404_with_did_you_mean(serve: Serve) -> None:
    server = serve(COUNTER)
    for method, path in [
        ("GET", "/scenarios/countre"),
        ("DELETE", "/scenarios/countre"),
        ("POST", "/scenarios/countre/activate"),
        ("POST", "/scenarios/countre/deactivate"),
    ]:
        response = admin(server, method, path)
        assert response.status_code == 404, (method, path)
        error = response.json()["error"]
        assert error["code"] == "MOCKSKILL_SCENARIO_NOT_FOUND"
        assert error["details"] == {
            "name": "countre",
            "did_you_mean": ["counter"],
            "loaded": ["counter"],
        }
        assert "did you mean 'counter'?" in error["message"]


def test_a_yaml_body_is_loaded_served_and_located(serve: Serve) -> None:
    server = serve("name: base\nskills: [{id: base}]")
    response = load(server, COUNTER)
    assert response.status_code == 201, response.text
    (loaded,) = response.json()["scenarios"]
    assert response.headers["Location"] == f"{server.url}/__admin/scenarios/counter"
    assert (loaded["name"], loaded["active"], loaded["origin"]) == (
        "counter",
        True,
        "<request body 1>",
    )
    assert admin(server, "GET", "/scenarios/counter").json() == loaded
    assert skills(server) == ["base", "count"]
    assert [count(server), count(server)] == [1, 2]
    assert requests.post(f"{server.url}/ping", timeout=10).json() == "pong"


@pytest.mark.parametrize(
    "content_type", ["application/yaml", "application/x-yaml", "text/yaml", "text/plain", None]
)
def test_each_yaml_type_and_none_reads_yaml(serve: Serve, content_type: str | None) -> None:
    server = serve("name: base\nskills: [{id: base}]")
    headers = {"Content-Type": content_type} if content_type else {}
    text = "name: a\nskills: [{id: a}]\n---\nname: b\nroutes: [{path: /b, steps: [{json: 1}]}]\n"
    response = admin(server, "POST", "/scenarios", data=text.encode(), headers=headers)
    assert response.status_code == 201, response.text
    assert [s["name"] for s in response.json()["scenarios"]] == ["a", "b"]
    assert response.headers["Location"].endswith("/__admin/scenarios/a")  # the first


def test_a_json_body_is_loaded(serve: Serve) -> None:
    server = serve("name: base\nskills: [{id: base}]")
    scenario = {"name": "orders", "skills": [{"id": "orders", "invoke": {"json": {"ok": 1}}}]}
    response = admin(server, "POST", "/scenarios", json=scenario, params={"file": "orders.json"})
    assert response.status_code == 201, response.text
    assert response.json()["scenarios"][0]["origin"] == "orders.json"
    assert requests.post(server.invoke_url("orders"), timeout=10).json() == {"ok": 1}


def test_a_body_without_a_name_is_named_after_its_file(serve: Serve) -> None:
    server = serve("name: base\nskills: [{id: base}]")
    named = load(server, "skills: [{id: lookup}]\n", file="scenarios/lookup.yaml")
    assert named.json()["scenarios"][0]["name"] == "lookup"
    unnamed = load(server, "skills: [{id: another}]\n")
    assert unnamed.json()["scenarios"][0]["name"] == "request-body-1"


def _cli_report(name: str, text: str) -> list[str]:
    """What `mockskill validate NAME` prints for *text* saved as NAME (in the current folder)."""
    from click.testing import CliRunner

    from mockskill.cli import cli

    Path(name).write_text(text)
    result = CliRunner().invoke(cli, ["validate", name])
    assert result.exit_code == 1
    return result.stderr.splitlines()


@pytest.mark.parametrize(
    ("name", "text", "content_type"),
    [
        ("bad.yaml", BAD, "application/yaml"),
        ("bad.json", '{"name": "x",\n "skills": [{"id": "x", "invoke": {"eror": 1}}]}', None),
        ("broken.yaml", "name: x\nskills: [{id: x}\n", "text/plain"),
    ],
)
def test_a_refused_body_lists_exactly_the_problems_validate_prints(
    serve: Serve,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    text: str,
    content_type: str | None,
) -> None:
    server = serve(COUNTER)
    headers = {"Content-Type": content_type or "application/json"}
    response = admin(
        server, "POST", "/scenarios", data=text, headers=headers, params={"file": name}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_INVALID_SCENARIO"
    monkeypatch.chdir(tmp_path)  # the report names the file as it was given
    printed = _cli_report(name, text)
    assert error["message"].splitlines() == printed
    problems = error["details"]["problems"]
    assert [p["text"] for p in problems] == printed[:-1]
    with pytest.raises(ScenarioError) as loader:
        load_text(text, name)
    assert problems == [p.as_json() for p in loader.value.problems]
    assert listed(server) == [("counter", True)]  # nothing changed


def test_every_field_of_a_problem_is_there(serve: Serve) -> None:
    server = serve(COUNTER)
    problems = load(server, BAD, file="bad.yaml").json()["error"]["details"]["problems"]
    by_path = {p["path"]: p for p in problems}
    assert by_path["skills[0].invok"] == {
        "file": "bad.yaml",
        "line": 4,
        "column": 5,
        "path": "skills[0].invok",
        "expected": by_path["skills[0].invok"]["expected"],
        "found": "unknown key 'invok'",
        "hint": "did you mean 'invoke'?",
        "text": by_path["skills[0].invok"]["text"],
    }
    assert "did you mean 'ENDPOINT_UNREACHABLE'?" in by_path["skills[1].invoke.error"]["hint"]
    assert set(by_path) >= {"skills[0].invok", "skills[1].invoke.error", "routes[0].path"}


def test_bodies_that_are_not_utf8_or_not_json_are_problems_too(serve: Serve) -> None:
    server = serve(COUNTER)
    latin1 = admin(server, "POST", "/scenarios", data="name: caf\xe9".encode("latin-1"))
    (problem,) = latin1.json()["error"]["details"]["problems"]
    assert (latin1.status_code, problem["expected"]) == (422, "UTF-8 text")
    headers = {"Content-Type": "application/json"}
    yaml_as_json = admin(server, "POST", "/scenarios", data="name: x\n", headers=headers)
    (problem,) = yaml_as_json.json()["error"]["details"]["problems"]
    assert (yaml_as_json.status_code, problem["path"]) == (422, "(JSON syntax)")
    assert (problem["line"], problem["column"]) == (1, 1)


def test_a_body_of_another_type_is_a_415(serve: Serve) -> None:
    server = serve(COUNTER)
    for content_type in ("application/xml", "application/x-www-form-urlencoded"):
        response = admin(
            server, "POST", "/scenarios", data="a=1", headers={"Content-Type": content_type}
        )
        assert response.status_code == 415
        error = response.json()["error"]
        assert error["code"] == "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE"
        assert error["details"]["expected"][0] == "application/yaml"
        assert "Content-Type: application/yaml" in error["message"]


def test_a_name_already_loaded_is_a_409_unless_replaced(serve: Serve) -> None:
    server = serve(COUNTER)
    assert [count(server), count(server)] == [1, 2]
    clash = load(server, COUNTER.replace("{n: 1}", "{n: 10}"))
    assert clash.status_code == 409
    error = clash.json()["error"]
    assert error["code"] == "MOCKSKILL_SCENARIO_CONFLICT"
    assert error["message"] == (
        "a scenario named 'counter' is loaded already (from test.yaml); nothing was changed"
    )
    assert error["details"]["problems"][0]["path"] == "name"
    assert count(server) == 3  # nothing changed
    replaced = load(server, COUNTER.replace("{n: 1}", "{n: 10}"), replace="true")
    assert replaced.status_code == 201
    assert listed(server) == [("counter", True)]
    assert count(server) == 10  # restarted, on the new steps


def test_a_skill_id_an_active_scenario_serves_is_a_409_unless_loaded_inactive(
    serve: Serve,
) -> None:
    server = serve(COUNTER)
    variant = COUNTER.replace("name: counter", "name: variant").replace("{n: 1}", "{n: 100}")
    clash = load(server, variant)
    assert clash.status_code == 409
    assert clash.json()["error"]["message"].startswith(
        "skill id 'count' is served by active scenario 'counter'; route 'GET /ping' is served"
    )
    inactive = load(server, variant, active="false")
    assert inactive.status_code == 201
    loaded = inactive.json()["scenarios"][0]
    assert (loaded["active"], loaded["activated"]) == (False, None)
    assert listed(server) == [("counter", True), ("variant", False)]
    assert count(server) == 1


def test_activate_and_deactivate_change_what_is_listed_and_served(serve: Serve) -> None:
    server = serve(COUNTER)
    variant = COUNTER.replace("name: counter", "name: variant").replace("{n: 1}", "{n: 100}")
    load(server, variant, active="false")
    refused = admin(server, "POST", "/scenarios/variant/activate")
    assert refused.status_code == 409
    assert "deactivate or remove 'counter' first" in refused.text
    off = admin(server, "POST", "/scenarios/counter/deactivate")
    assert (off.status_code, off.json()["active"], off.json()["activated"]) == (200, False, None)
    assert skills(server) == []
    assert count(server) == 404
    assert requests.get(f"{server.url}/ping", timeout=10).status_code == 404
    on = admin(server, "POST", "/scenarios/variant/activate")
    assert (on.status_code, on.json()["active"]) == (200, True)
    assert skills(server) == ["count"]
    assert count(server) == 100
    health = admin(server, "GET", "/health").json()
    assert health["scenarios"] == ["variant"]


def test_delete_unloads_a_scenario(serve: Serve) -> None:
    server = serve(COUNTER)
    load(server, "name: extra\nskills: [{id: extra}]\n")
    removed = admin(server, "DELETE", "/scenarios/extra")
    assert (removed.status_code, removed.json()["name"]) == (200, "extra")
    assert listed(server) == [("counter", True)]
    assert skills(server) == ["count"]
    assert admin(server, "DELETE", "/scenarios/extra").status_code == 404


def test_put_loads_or_replaces_one_scenario_by_name(serve: Serve) -> None:
    server = serve(COUNTER)
    created = admin(server, "PUT", "/scenarios/lookup", data="skills: [{id: lookup}]", headers=YAML)
    assert created.status_code == 201, created.text
    assert created.headers["Location"] == f"{server.url}/__admin/scenarios/lookup"
    assert created.json()["name"] == "lookup"  # named by its URL
    assert requests.get(server.skill_url("lookup"), timeout=10).json()["id"] == "lookup"
    assert count(server) == 1
    text = COUNTER.replace("{n: 1}", "{n: 7}")
    replaced = admin(server, "PUT", "/scenarios/counter", data=text, headers=YAML)
    assert replaced.status_code == 200
    assert "Location" not in replaced.headers
    assert count(server) == 7
    assert listed(server) == [("counter", True), ("lookup", True)]


def test_put_refuses_another_name_several_scenarios_and_a_bad_url_name(serve: Serve) -> None:
    server = serve(COUNTER)
    other = admin(server, "PUT", "/scenarios/lookup", data="name: other\nskills: [{id: a}]\n")
    assert other.status_code == 422
    (problem,) = other.json()["error"]["details"]["problems"]
    assert (problem["path"], problem["line"], problem["column"]) == ("name", 1, 7)
    assert "'lookup'" in problem["expected"]
    two = "name: a\nskills: [{id: a}]\n---\nname: b\nskills: [{id: b}]\n"
    several = admin(server, "PUT", "/scenarios/a", data=two)
    assert several.status_code == 422
    assert "2 scenarios" in several.json()["error"]["message"]
    bad = admin(server, "PUT", "/scenarios/-x", data="skills: [{id: a}]\n")
    assert bad.status_code == 400
    assert bad.json()["error"]["details"]["parameter"] == "name"
    assert listed(server) == [("counter", True)]


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"activ": "false"}, "activ"),
        ({"active": "no"}, "active"),
        ({"replace": "1"}, "replace"),
        ({"file": ["a", "b"]}, "file"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(
    serve: Serve, params: dict[str, object], parameter: str
) -> None:
    server = serve(COUNTER)
    response = admin(server, "POST", "/scenarios", data="name: x\nskills: [{id: x}]", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["details"]["parameter"]) == ("MOCKSKILL_BAD_REQUEST", parameter)
    assert listed(server) == [("counter", True)]
    if parameter == "activ":
        assert "did you mean 'active'?" in error["message"]


def test_a_request_in_flight_finishes_on_the_scenario_it_started_on(serve: Serve) -> None:
    server = serve("name: slow\nskills: [{id: slow, invoke: {delay: 800, json: old}}]\n")
    answers: queue.Queue[Any] = queue.Queue()
    thread = threading.Thread(
        target=lambda: answers.put(requests.post(server.invoke_url("slow"), timeout=10).json())
    )
    thread.start()
    time.sleep(0.2)  # it is in its delay
    new = "name: slow\nskills: [{id: slow, invoke: {json: new}}]\n"
    assert admin(server, "PUT", "/scenarios/slow", data=new, headers=YAML).status_code == 200
    assert requests.post(server.invoke_url("slow"), timeout=10).json() == "new"
    assert admin(server, "DELETE", "/scenarios/slow").status_code == 200
    thread.join(timeout=10)
    assert answers.get(timeout=1) == "old"


def test_scenario_changes_need_the_admin_token_when_there_is_one(serve: Serve) -> None:
    server = serve(COUNTER, admin_token="s3cret")
    text = "name: extra\nskills: [{id: extra}]\n"
    refused = admin(server, "POST", "/scenarios", data=text, headers=YAML)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "MOCKSKILL_ADMIN_TOKEN_REQUIRED"
    assert admin(server, "POST", "/scenarios/counter/deactivate").status_code == 401
    assert [e.name for e in server.scenarios if e.active] == ["counter"]
    bearer = {**YAML, "Authorization": "Bearer s3cret"}
    assert admin(server, "POST", "/scenarios", data=text, headers=bearer).status_code == 201
    header = {"Mockskill-Admin-Token": "s3cret"}
    assert admin(server, "DELETE", "/scenarios/extra", headers=header).status_code == 200
    assert admin(server, "GET", "/scenarios", headers=header).json()["scenarios"][0]["name"] == (
        "counter"
    )
