"""/__admin/scenarios over the wire: list, load, replace, activate, deactivate, remove."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import ScenarioError, Server, load_text

Serve = Callable[..., Server]


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
                "line": 5,  # where its item is written: "  - id: count"
                "column": 5,
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
    "content_type", ["application/yaml", "application/x-yaml", "text/yaml", None]
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
        ("broken.yaml", "name: x\nskills: [{id: x}\n", "text/yaml"),
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


def test_a_broken_body_is_told_its_clashes_with_loaded_scenarios_in_the_same_answer(
    serve: Serve,
) -> None:
    server = serve(COUNTER)
    broken = "name: counter\nskills:\n  - id: count\n    invok: {json: 1}\n"
    response = load(server, broken, file="broken.yaml")
    assert response.status_code == 422
    problems = response.json()["error"]["details"]["problems"]
    assert [(p["line"], p["path"], p["found"]) for p in problems] == [
        (1, "name", "'counter', loaded already (from test.yaml)"),
        (3, "skills[0].id", "'count', served by active scenario 'counter' (from test.yaml)"),
        (4, "skills[0].invok", "unknown key 'invok'"),
    ]
    assert listed(server) == [("counter", True)]
    # Replacing it, only the key is wrong; loaded inactive, no skill clashes either.
    replaced = load(server, broken, file="broken.yaml", replace="true", active="false")
    assert [p["path"] for p in replaced.json()["error"]["details"]["problems"]] == [
        "skills[0].invok"
    ]


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


@pytest.mark.parametrize(
    "label",
    [
        "a.yaml\nb.yaml:1:1: skills: expected nothing, found a forged problem",
        "a.yaml:3:4: all is well",
        "a.yaml:12",
        "a.yaml\r",
        "tab\there.yaml",
        "line\u2028break.yaml",
        "right-to-left\u202e.yaml",
        "x" * 201,
    ],
    ids=["newline", "position", "line-number", "cr", "tab", "u2028", "bidi", "too-long"],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_file_label_that_could_forge_a_report_is_a_400(
    serve: Serve, label: str, method: str
) -> None:
    server = serve(COUNTER)
    path = "/scenarios" if method == "POST" else "/scenarios/extra"
    response = admin(
        server,
        method,
        path,
        data="skills: [{id: x, invok: 1}]",
        headers=YAML,
        params={"file": label},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["details"]["parameter"]) == ("MOCKSKILL_BAD_REQUEST", "file")
    assert "FILE:LINE:COLUMN" in error["message"]
    assert listed(server) == [("counter", True)]


def test_a_plain_file_label_names_the_problems(serve: Serve) -> None:
    server = serve(COUNTER)
    for label in ("scenarios/orders v2.yaml", "C:\\scenarios\\é.yaml", "x" * 200):
        response = load(server, "skills: [{id: x, invok: 1}]", file=label)
        assert response.status_code == 422
        (problem,) = response.json()["error"]["details"]["problems"]
        assert problem["file"] == label


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_json_body_with_nan_or_infinity_is_not_json(serve: Serve, word: str) -> None:
    server = serve(COUNTER)
    headers = {"Content-Type": "application/json"}
    body = '{"name": "NaN is fine in a string",\n "skills": [{"id": "x", "invoke": {"json": %s}}]}'
    response = admin(server, "POST", "/scenarios", data=body % word, headers=headers)
    assert response.status_code == 422
    (problem,) = response.json()["error"]["details"]["problems"]
    assert (problem["path"], problem["expected"]) == ("(JSON syntax)", "valid JSON")
    assert problem["found"] == f"{word}, which is JavaScript, not JSON"
    assert (problem["line"], problem["column"]) == (2, 44)
    assert listed(server) == [("counter", True)]
    validate = admin(server, "POST", "/validate", data=f'{{"version": {word}}}', headers=headers)
    assert validate.status_code == 400
    assert validate.json()["error"]["code"] == "MOCKSKILL_BAD_REQUEST"


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
