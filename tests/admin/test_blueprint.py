"""/__admin over the wire: health, reset, validate.

The journal's filters are in test_journal_query.py, the scenarios in
test_scenarios.py, the report in tests/audit/test_audit.py and
tests/cli/test_report.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests

from mockskill import Server, __version__

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
        "state": {"backend": "memory"},
    }


def test_admin_requests_are_not_journaled(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    requests.get(f"{server.url}/__admin/health", timeout=10)
    requests.post(server.invoke_url("a"), timeout=10)
    assert [e.path for e in server.state.journal()] == ["/skills/a/invoke"]


def two_sessions(server: Server) -> None:
    for session in ("a", "b"):
        requests.post(server.invoke_url("a"), headers={"Mockskill-Session": session}, timeout=10)


def sessions_kept(server: Server) -> list[str]:
    return sorted({e.session for e in server.state.journal()})


def test_reset_answers_what_it_reset(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    two_sessions(server)
    one = requests.post(f"{server.url}/__admin/reset?session=a", timeout=10)
    assert one.json() == {"reset": "session", "session": "a"}
    assert sessions_kept(server) == ["b"]
    everything = requests.post(f"{server.url}/__admin/reset?all=true", timeout=10)
    assert everything.json() == {"reset": "all", "session": None}
    assert sessions_kept(server) == []


@pytest.mark.parametrize(
    ("query", "parameter", "hint"),
    [
        ("?sesion=a", "sesion", "did you mean 'session'?"),
        ("?Session=a", "Session", "did you mean 'session'?"),
        ("?session=", "session", "an unset variable?"),
        ("?session=%20", "session", "an unset variable?"),
        ("", "session", "?all=true for everything"),
        ("?all=false", "all", "give all=true"),
        ("?all=1", "all", "give all=true"),
        ("?session=a&all=true", "all", "not both"),
        ("?session=a&session=b", "session", "give it once"),
    ],
)
def test_a_mistyped_reset_wipes_nothing(
    serve: Serve, query: str, parameter: str, hint: str
) -> None:
    """On a shared server, a reset that resets everything by mistake wipes every suite's state."""
    server = serve("skills: [{id: a}]")
    two_sessions(server)
    response = requests.post(f"{server.url}/__admin/reset{query}", timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_BAD_REQUEST"
    assert error["details"]["parameter"] == parameter
    assert hint in error["message"]
    assert sessions_kept(server) == ["a", "b"]


def test_reset_reads_a_json_body(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    two_sessions(server)
    reset = f"{server.url}/__admin/reset"
    one = requests.post(reset, json={"session": "a"}, timeout=10)
    assert one.json() == {"reset": "session", "session": "a"}
    assert sessions_kept(server) == ["b"]
    everything = requests.post(reset, json={"all": True}, timeout=10)
    assert everything.json() == {"reset": "all", "session": None}
    assert sessions_kept(server) == []


@pytest.mark.parametrize(
    ("body", "query", "status"),
    [
        ({"sesion": "a"}, "", 400),
        ({"session": ""}, "", 400),
        ({"all": "yes"}, "", 400),
        (["a"], "", 400),
        ({}, "", 400),
        ({"session": "a"}, "?session=b", 400),
        ("session=a", "", 415),
    ],
)
def test_a_reset_body_is_read_or_refused_never_ignored(
    serve: Serve, body: object, query: str, status: int
) -> None:
    server = serve("skills: [{id: a}]")
    two_sessions(server)
    url = f"{server.url}/__admin/reset{query}"
    if isinstance(body, str):  # a JSON-less body, as YAML (a type the admin takes)
        sent = requests.post(url, data=body, headers={"Content-Type": "text/yaml"}, timeout=10)
    else:
        sent = requests.post(url, json=body, timeout=10)
    assert sent.status_code == status, sent.text
    assert sessions_kept(server) == ["a", "b"]


def test_an_empty_session_name_resets_nothing_from_python_either(serve: Serve) -> None:
    server = serve("skills: [{id: a}]")
    two_sessions(server)
    with pytest.raises(ValueError, match="names no session"):
        server.reset("")
    assert sessions_kept(server) == ["a", "b"]


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
