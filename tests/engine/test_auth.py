"""Credentials and scopes, and the mock OAuth2 token endpoint: the flows a consumer drives."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
import requests
from conftest import EVERY_FAILURE

from mockskill import ScenarioError, Server, load_text
from mockskill.engine.digests import KeyedDigest
from mockskill.protocol import catalog
from mockskill.protocol.validator import validate

Serve = Callable[..., Server]

SCENARIO = """
    name: auth
    auth:
      tokens: [{token: static-token, scopes: [skill:invoke]}]
      api_keys: [{key: k-123, scopes: [skill:read]}]
      clients:
        - {client_id: consumer, client_secret: s3cret, scopes: [skill:invoke, skill:admin]}
        - {client_id: reader, client_secret: r, scopes: [skill:read]}
      token_lifetime: {seconds: 1, uses: 3}
    skills:
      - id: protected
        requires: true
      - id: admin-only
        requires: {scopes: [skill:admin]}
      - id: keyed
        requires: {type: api_key, scopes: [skill:read]}
      - id: open
"""


def token(server: Server, client: str = "consumer", secret: str = "s3cret", **form: str) -> str:
    response = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials", **form},
        auth=(client, secret),
        timeout=10,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer"
    return str(body["access_token"])


def invoke(
    server: Server, skill: str, bearer: str | None = None, **headers: str
) -> requests.Response:
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return requests.post(server.invoke_url(skill), headers=headers, timeout=10)


def test_401_then_a_token_then_the_retry_succeeds(serve: Serve) -> None:
    server = serve(SCENARIO)
    refused = invoke(server, "protected")
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert error["code"] == "AUTH_REQUIRED"
    assert error["details"]["required_auth_type"] == "oauth2"
    assert error["details"]["scopes"] == ["skill:invoke"]
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="mockskill", scope="skill:invoke"'
    # the consumer follows the details to the token endpoint, as the chapter intends
    token_url = error["details"]["authorization_url"]
    assert token_url == f"{server.url}/oauth/token"
    issued = requests.post(
        token_url,
        data={
            "grant_type": "client_credentials",
            "client_id": "consumer",
            "client_secret": "s3cret",
        },
        timeout=10,
    ).json()
    assert issued["scope"] == "skill:admin skill:invoke"
    assert issued["expires_in"] == 1
    assert invoke(server, "protected", issued["access_token"]).status_code == 200


def test_an_expired_token_is_refused_and_a_refreshed_one_works(serve: Serve) -> None:
    server = serve(SCENARIO)
    first = token(server)
    assert invoke(server, "protected", first).status_code == 200
    time.sleep(1.2)  # token_lifetime.seconds: 1
    expired = invoke(server, "protected", first)
    assert expired.status_code == 401
    assert 'error="invalid_token"' in expired.headers["WWW-Authenticate"]
    assert expired.json()["error"]["details"]["reason"] == "the token is unknown or expired"
    assert invoke(server, "protected", token(server)).status_code == 200


def test_a_token_lasts_its_number_of_uses(serve: Serve) -> None:
    server = serve(SCENARIO)
    issued = token(server)
    assert [invoke(server, "protected", issued).status_code for _ in range(4)] == [
        200,
        200,
        200,
        401,
    ]


def test_a_missing_scope_is_permission_denied_naming_it(serve: Serve) -> None:
    server = serve(SCENARIO)
    reader = token(server, "reader", "r")
    denied = invoke(server, "protected", reader)
    assert denied.status_code == 403
    details = denied.json()["error"]["details"]
    assert details == {
        "skill_id": "protected",
        "missing_scopes": ["skill:invoke"],
        "granted_scopes": ["skill:read"],
    }
    assert 'error="insufficient_scope"' in denied.headers["WWW-Authenticate"]
    assert invoke(server, "admin-only", token(server)).status_code == 200
    assert invoke(server, "admin-only", "static-token").status_code == 403


def test_static_tokens_and_api_keys_grant_their_scopes(serve: Serve) -> None:
    server = serve(SCENARIO)
    assert invoke(server, "protected", "static-token").status_code == 200
    assert invoke(server, "keyed", **{"X-API-Key": "k-123"}).status_code == 200
    assert invoke(server, "keyed", **{"X-API-Key": "nope"}).status_code == 401
    assert invoke(server, "protected", **{"X-API-Key": "k-123"}).status_code == 403
    assert invoke(server, "open").status_code == 200


def test_a_scope_can_be_asked_for_and_only_granted_ones_are_given(serve: Serve) -> None:
    server = serve(SCENARIO)
    narrow = token(server, scope="skill:invoke")
    assert invoke(server, "protected", narrow).status_code == 200
    assert invoke(server, "admin-only", narrow).status_code == 403
    refused = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials", "scope": "skill:root"},
        auth=("consumer", "s3cret"),
        timeout=10,
    )
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_scope")


@pytest.mark.parametrize(
    ("form", "basic", "status", "error"),
    [
        ({"grant_type": "client_credentials"}, ("consumer", "wrong"), 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, ("nobody", "x"), 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, None, 401, "invalid_client"),
        ({"client_id": "consumer", "client_secret": "s3cret"}, None, 400, "invalid_request"),
        ({"grant_type": "password"}, ("consumer", "s3cret"), 400, "unsupported_grant_type"),
    ],
    ids=["wrong-secret", "unknown-client", "no-client", "no-grant-type", "other-grant"],
)
def test_token_endpoint_errors_follow_rfc_6749(
    serve: Serve,
    form: dict[str, str],
    basic: tuple[str, str] | None,
    status: int,
    error: str,
) -> None:
    server = serve(SCENARIO)
    response = requests.post(f"{server.url}/oauth/token", data=form, auth=basic, timeout=10)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error", "error_description"}
    assert body["error"] == error
    assert response.headers["Cache-Control"] == "no-store"
    if status == 401:
        assert response.headers["WWW-Authenticate"].startswith("Basic ")


def test_the_descriptor_of_a_protected_skill_says_how_to_authenticate(serve: Serve) -> None:
    server = serve(SCENARIO)
    descriptor = requests.get(server.skill_url("protected"), timeout=10).json()
    assert descriptor["auth"] == {
        "type": "oauth2",
        "authorization_url": f"{server.url}/oauth/token",
        "token_url": f"{server.url}/oauth/token",
        "scopes": ["skill:invoke"],
    }
    assert validate(descriptor) == ()
    keyed = requests.get(server.skill_url("keyed"), timeout=10).json()
    assert keyed["auth"] == {"type": "api_key", "header": "X-API-Key", "scopes": ["skill:read"]}


def test_secrets_stay_out_of_the_journal(serve: Serve) -> None:
    server = serve(SCENARIO)
    issued = token(server)
    invoke(server, "protected", issued)
    text = repr(server.state.journal())
    for secret in ("s3cret", issued, "static-token"):
        assert secret not in text
    fingerprint, other_server = KeyedDigest(b"k" * 32), KeyedDigest(b"l" * 32)
    assert fingerprint(b"s3cret") == fingerprint(b"s3cret")
    assert fingerprint(b"s3cret") != fingerprint(b"s3cre7")
    assert fingerprint(b"s3cret") != other_server(b"s3cret")  # keyed
    assert "s3cret" not in fingerprint(b"s3cret")


@pytest.mark.parametrize(
    ("yaml", "path"),
    [
        ("skills: [{id: s, requires: {type: kerberos}}]", "skills[0].requires.type"),
        ("skills: [{id: s, requires: {scopes: read}}]", "skills[0].requires.scopes"),
        ("auth: {clients: [{client_id: c}]}\nskills: [{id: s}]", "auth.clients[0]"),
        ("auth: {token_lifetime: {seconds: 0}}\nskills: [{id: s}]", "auth.token_lifetime.seconds"),
        ("auth: {tokenz: []}\nskills: [{id: s}]", "auth.tokenz"),
        ("routes: [{path: /oauth/token, steps: [{json: 1}]}]", "routes[0].path"),
        ("auth: {tokens: [{token_sha256: abc}]}\nskills: [{id: s}]", "auth.tokens[0].token_sha256"),
        (f"auth: {{tokens: [{{token: t, token_sha256: {'0' * 64}}}]}}", "auth.tokens[0]"),
        ("auth: {api_keys: [{scopes: [a]}]}", "auth.api_keys[0]"),
        ("auth: {api_keys: [{key_sha256: 12}]}", "auth.api_keys[0].key_sha256"),
        ("auth: {clients: [{client_secret_sha256: x}]}", "auth.clients[0]"),
        (
            f"auth: {{clients: [{{client_id: c, client_secret_sha256: {'g' * 64}}}]}}",
            "auth.clients[0].client_secret_sha256",
        ),
    ],
)
def test_bad_credentials_are_load_errors(yaml: str, path: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_text(yaml, "s.yaml")
    assert path in [p.path for p in caught.value.problems]


def test_the_bundled_flow_from_401_to_200(bundled: Server) -> None:
    session = {"Mockskill-Session": "bundled-auth-flow"}
    refused = requests.post(bundled.invoke_url("guarded"), headers=session, timeout=10)
    assert refused.status_code == 401
    issued = requests.post(
        refused.json()["error"]["details"]["authorization_url"],
        data={"grant_type": "client_credentials"},
        auth=("demo-client", "demo-secret"),
        timeout=10,
    ).json()["access_token"]
    headers = {**session, "Authorization": f"Bearer {issued}"}
    assert requests.post(bundled.invoke_url("guarded"), headers=headers, timeout=10).ok
    denied = requests.post(bundled.invoke_url("admin"), headers=headers, timeout=10)
    assert denied.status_code == 403
    keyed = requests.post(
        bundled.invoke_url("keyed"), headers={"X-API-Key": "demo-key"}, timeout=10
    )
    assert keyed.ok
    old = {"Skill-Protocol-Version": "1.4.0"}
    assert requests.post(bundled.invoke_url("next-gen"), headers=old, timeout=10).status_code == 422


# -- the authorization endpoint, and every URL a consumer is handed -----------------------


def test_every_401_sends_the_consumer_to_the_same_token_endpoint(serve: Serve) -> None:
    """A requires: skill's 401 and a forced one: the same authorization_url, where the
    consumer's client-credentials flow gets its token either way."""
    server = serve(SCENARIO)
    session = {"Mockskill-Session": "follows-the-details"}
    required = requests.post(server.invoke_url("protected"), headers=session, timeout=10)
    forced = requests.post(
        server.invoke_url("open"),
        headers={**session, "Mockskill-Error": "AUTH_REQUIRED"},
        timeout=10,
    )
    urls = {r.json()["error"]["details"]["authorization_url"] for r in (required, forced)}
    assert urls == {f"{server.url}/oauth/token"}
    issued = requests.post(
        forced.json()["error"]["details"]["authorization_url"],
        data={"grant_type": "client_credentials"},
        auth=("consumer", "s3cret"),
        headers=session,
        timeout=10,
    )
    assert issued.status_code == 200, issued.text
    bearer = {**session, "Authorization": f"Bearer {issued.json()['access_token']}"}
    assert requests.post(server.invoke_url("protected"), headers=bearer, timeout=10).ok


def test_the_authorization_endpoint_answers_what_the_mock_supports(serve: Serve) -> None:
    server = serve(SCENARIO)
    session = {"Mockskill-Session": "reads-the-metadata"}
    url = f"{server.url}/oauth/authorize"
    answer = requests.get(url, headers=session, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    metadata = answer.json()
    assert metadata["token_endpoint"] == f"{server.url}/oauth/token"
    assert metadata["grant_types_supported"] == ["client_credentials"]
    assert metadata["response_types_supported"] == []  # no interactive flow, said so
    assert "client-credentials grant" in metadata["description"]
    # What it names works: a token from there opens the protected skill.
    token = requests.post(
        metadata["token_endpoint"],
        data={"grant_type": "client_credentials"},
        auth=("consumer", "s3cret"),
        timeout=10,
    ).json()["access_token"]
    assert invoke(server, "protected", token).status_code == 200
    # Journalled as what it is, so a consumer's teardown finds nothing unmatched.
    journal = requests.get(
        f"{server.url}/__admin/journal", params={"session": "reads-the-metadata"}, timeout=10
    ).json()["entries"]
    assert [(e["endpoint"], e["status"]) for e in journal][:1] == [("authorize", 200)]
    assert requests.get(f"{server.url}/__admin/unmatched", timeout=10).json()["requests"] == []


def test_the_authorization_endpoint_refuses_what_it_cannot_do(serve: Serve) -> None:
    server = serve(SCENARIO)
    url = f"{server.url}/oauth/authorize"
    code_flow = requests.get(
        url, params={"response_type": "code", "client_id": "consumer"}, timeout=10
    )
    assert code_flow.status_code == 400
    assert code_flow.json()["error"] == "unsupported_response_type"
    assert code_flow.json()["token_endpoint"] == f"{server.url}/oauth/token"
    posted = requests.post(url, timeout=10)
    assert posted.status_code == 405
    assert posted.headers["Allow"] == "GET, HEAD"
    assert posted.json()["error"] == "invalid_request"


def test_a_scenario_route_at_the_authorization_path_wins(serve: Serve) -> None:
    server = serve("""
        name: own-authorize
        skills: [{id: open}]
        routes: [{path: /oauth/authorize, steps: [{json: {mine: true}}]}]
    """)
    assert requests.get(f"{server.url}/oauth/authorize", timeout=10).json() == {"mine": True}


def _urls_in(value: object) -> list[str]:
    if isinstance(value, str):
        return [value] if value.startswith(("http://", "https://")) else []
    if isinstance(value, dict):
        return [u for v in value.values() for u in _urls_in(v)]
    if isinstance(value, list):
        return [u for v in value for u in _urls_in(v)]
    return []


def test_every_url_in_the_bundled_descriptors_and_error_details_answers(
    bundled: Server, session: dict[str, str]
) -> None:
    """Every URL a consumer is handed, followed with GET, is not a 404.

    URLs on the skill surface (``/skills/...``) are left out: a scenario may
    script a descriptor or an invocation to 404 on purpose. URLs elsewhere
    (the chapter's upgrade guide) are not this server's to answer.
    """
    skills = requests.get(f"{bundled.url}/skills", timeout=10).json()["skills"]
    handed: dict[str, str] = {}  # URL -> where it was handed out

    def collect(where: str, answer: requests.Response, part: str) -> None:
        try:
            body = answer.json()
        except ValueError:
            return  # a scripted non-JSON answer hands out no URL
        if part == "details":
            body = body.get("error", {}).get("details", {}) if isinstance(body, dict) else {}
        for url in _urls_in(body):
            handed.setdefault(url, where)

    for skill in skills:
        sid = skill["id"]
        described = requests.get(skill["descriptor_url"], headers=session, timeout=10)
        collect(f"{sid}'s descriptor", described, "all")
        for code in catalog.SERVED_CODES:
            for url, method in ((skill["descriptor_url"], "GET"), (skill["invoke_url"], "POST")):
                forced = requests.request(
                    method, url, headers={**session, "Mockskill-Error": code}, timeout=10
                )
                collect(f"{code} forced on {method} {sid}", forced, "details")
    for sid in (*EVERY_FAILURE[:6], "guarded", "admin", "keyed", "auth-required"):
        scripted = requests.post(bundled.invoke_url(sid), headers=session, timeout=10)
        assert scripted.status_code >= 400, sid
        collect(f"{sid}'s scripted error", scripted, "details")

    ours = {
        url: where
        for url, where in handed.items()
        if urlsplit(url).netloc == urlsplit(bundled.url).netloc
        and not urlsplit(url).path.startswith("/skills")
    }
    assert f"{bundled.url}/oauth/authorize" in ours  # the default AUTH_REQUIRED details
    assert f"{bundled.url}/oauth/token" in ours  # the protected skills' descriptors
    not_found = {}
    for url, where in sorted(ours.items()):
        answer = requests.get(url, headers=session, timeout=10)
        if answer.status_code == 404:
            not_found[url] = where
    assert not_found == {}
    unmatched = requests.get(
        f"{bundled.url}/__admin/unmatched",
        params={"session": session["Mockskill-Session"]},
        timeout=10,
    ).json()["requests"]
    assert unmatched == []


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_credentials_by_digest_accept_the_secret_the_file_does_not_hold(serve: Serve) -> None:
    # A recorded file holds digests; the consumer presents the credentials themselves.
    server = serve(
        f"""
        name: digests
        auth:
          tokens: [{{token_sha256: "{sha256("tok-recorded").upper()}", scopes: [skill:invoke]}}]
          api_keys: [{{key_sha256: "{sha256("key-recorded")}", scopes: [skill:read]}}]
          clients:
            - {{client_id: rec, client_secret_sha256: "{sha256("sec-recorded")}"}}
        skills:
          - id: bearer
            requires: {{type: bearer}}
          - id: keyed
            requires: {{type: api_key, scopes: [skill:read]}}
        """
    )
    assert invoke(server, "bearer", "tok-recorded").status_code == 200
    refused = invoke(server, "bearer", "tok-other")
    assert refused.status_code == 401
    assert refused.json()["error"]["details"]["reason"] == "the token is unknown or expired"
    # the digest itself is not a credential
    assert invoke(server, "bearer", sha256("tok-recorded")).status_code == 401
    assert invoke(server, "keyed", **{"X-API-Key": "key-recorded"}).status_code == 200
    assert invoke(server, "keyed", **{"X-API-Key": "key-other"}).status_code == 401
    # a token the digested client's secret obtained is accepted like any issued one
    issued = token(server, "rec", "sec-recorded")
    assert invoke(server, "bearer", issued).status_code == 200
    wrong = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=("rec", "sec-other"),
        timeout=10,
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"


@pytest.mark.parametrize(("client", "secret"), [("consumer", "s3crét"), ("cönsumer", "s3cret")])
def test_a_non_ascii_client_credential_is_invalid_client_not_a_500(
    serve: Serve, client: str, secret: str
) -> None:
    # (compared as bytes: str comparison in constant time refuses non-ASCII text)
    server = serve(SCENARIO)
    refused = requests.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "client_credentials", "client_id": client, "client_secret": secret},
        timeout=10,
    )
    assert refused.status_code == 401
    assert refused.json()["error"] == "invalid_client"
