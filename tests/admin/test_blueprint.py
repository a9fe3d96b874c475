"""/__admin over the wire: health, reset, validate.

The journal's filters are in test_journal_query.py, the scenarios in
test_scenarios.py, the report in tests/audit/test_audit.py and
tests/test_cli_report.py.
"""

from __future__ import annotations

from collections.abc import Callable

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
