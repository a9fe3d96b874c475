"""/__admin: health and reset, over the wire."""

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
