"""Secrets out of a recorded file, and what a replay accepts instead (``access``, ``secrets``)."""

from __future__ import annotations

from typing import Any

import requests
import yaml
from recording_helpers import JSON, exchange, replay

from mockskill.recording import write

__all__ = ["replay"]  # the fixture, used by name


BEARER = "eyJ-the-consumers-real-token"
KEY = "ak_live_0123456789"
CLIENT_SECRET = "client-secret-value"
ISSUED = "at_issued_by_the_provider"


def test_secrets_never_reach_the_file_and_replay_accepts_the_consumers(replay: Any) -> None:
    written = write(
        [
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(
                    ("Authorization", f"Bearer {BEARER}"),
                    ("Proxy-Authorization", "Basic cHJveHktc2VjcmV0"),
                    ("Cookie", "sid=cookie-value"),
                ),
                response_headers=(*JSON, ("Set-Cookie", "sid=set-cookie-value")),
            ),
            exchange(
                "POST", "/skills/keyed/invoke", {"result": "keyed"}, headers=(("X-API-Key", KEY),)
            ),
            exchange(
                "POST",
                "/login/token",
                {"access_token": ISSUED, "token_type": "Bearer", "scope": "skill:invoke"},
                body=f"grant_type=client_credentials&client_id=me&client_secret={CLIENT_SECRET}".encode(),
                headers=(("Content-Type", "application/x-www-form-urlencoded"),),
            ),
            exchange(
                "POST",
                "/skills/issued/invoke",
                {"result": "issued"},
                headers=(("Authorization", f"Bearer {ISSUED}"),),
            ),
        ],
        delays=False,
    )
    secrets = (BEARER, KEY, CLIENT_SECRET, ISSUED, "cookie-value", "set-cookie-value")
    for secret in (*secrets, "cHJveHktc2VjcmV0"):
        assert secret not in written.text
    header = [line for line in written.text.splitlines() if line.startswith("#")]
    for name in (
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "X-API-Key",
        "client_secret",
        "access_token",
    ):
        assert any(name in line for line in header), name
    assert set(written.redacted) >= {"header Authorization", "body field client_secret"}
    skills = {s["id"]: s for s in yaml.safe_load(written.text)["skills"]}
    assert skills["guarded"]["requires"] == {"type": "bearer", "scopes": ["skill:invoke"]}
    assert skills["keyed"]["requires"]["type"] == "api_key"
    server = replay(written.text)

    def invoke(skill: str, **headers: str) -> requests.Response:
        return requests.post(server.invoke_url(skill), headers=headers, timeout=10)

    assert invoke("guarded", Authorization=f"Bearer {BEARER}").json() == {"result": "ok"}
    assert invoke("guarded", Authorization="Bearer someone-else").status_code == 401
    assert invoke("guarded").status_code == 401
    assert invoke("keyed", **{"X-API-Key": KEY}).json() == {"result": "keyed"}
    assert invoke("keyed", **{"X-API-Key": "nope"}).status_code == 401
    # the token route hands out a stand-in, which the replay accepts where the real one was
    handed = requests.post(
        f"{server.url}/login/token",
        data={"grant_type": "client_credentials", "client_id": "me", "client_secret": "any"},
        timeout=10,
    ).json()["access_token"]
    assert handed != ISSUED
    assert invoke("issued", Authorization=f"Bearer {handed}").json() == {"result": "issued"}


def test_an_oauth_token_endpoint_is_mockskills_own_on_replay(replay: Any) -> None:
    written = write(
        [
            exchange(
                "POST",
                "/oauth/token",
                {"access_token": ISSUED, "token_type": "Bearer", "scope": "skill:invoke"},
                body=b"grant_type=client_credentials",
                headers=(("Authorization", "Basic bWU6Y2xpZW50LXNlY3JldC12YWx1ZQ=="),),  # me:...
            ),
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(("Authorization", f"Bearer {ISSUED}"),),
            ),
        ],
        delays=False,
    )
    assert CLIENT_SECRET not in written.text
    assert ISSUED not in written.text
    data = yaml.safe_load(written.text)
    assert [c["client_id"] for c in data["auth"]["clients"]] == ["me"]
    assert "tokens" not in data["auth"]  # the replay issues its own
    assert data["skills"][0]["requires"]["type"] == "oauth2"
    server = replay(written.text)
    issued = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=("me", CLIENT_SECRET),
        timeout=10,
    ).json()["access_token"]
    invoked = requests.post(
        server.invoke_url("guarded"), headers={"Authorization": f"Bearer {issued}"}, timeout=10
    )
    assert invoked.json() == {"result": "ok"}


def test_a_refused_invocation_is_the_replays_own_refusal_not_a_step(replay: Any) -> None:
    # The consumer first called without its token (the provider said 401), then with it.
    refused = {"error": {"code": "AUTH_REQUIRED", "message": "no token"}}
    written = write(
        [
            exchange("POST", "/skills/guarded/invoke", refused, status=401),
            exchange(
                "POST",
                "/skills/guarded/invoke",
                {"result": "ok"},
                headers=(("Authorization", f"Bearer {BEARER}"),),
            ),
        ],
        delays=False,
    )
    skill = yaml.safe_load(written.text)["skills"][0]
    assert skill["invoke"] == {"steps": [{"json": {"result": "ok"}}]}
    server = replay(written.text)
    url = server.invoke_url("guarded")
    assert requests.post(url, timeout=10).status_code == 401  # mockskill's own, not a step
    answered = requests.post(url, headers={"Authorization": f"Bearer {BEARER}"}, timeout=10)
    assert answered.json() == {"result": "ok"}


def test_a_secret_in_the_query_is_no_condition_and_named_in_the_header() -> None:
    written = write(
        [
            exchange("GET", "/feed?access_token=query-secret-1&page=1", {"page": 1}),
            exchange("GET", "/feed?access_token=query-secret-2&page=2", {"page": 2}),
        ],
        delays=False,
    )
    assert "query-secret" not in written.text
    assert "query parameter access_token" in written.redacted
    cases = yaml.safe_load(written.text)["routes"][0]["cases"]
    assert [c["when"] for c in cases] == [{"query": {"page": "1"}}, {"query": {"page": "2"}}]
