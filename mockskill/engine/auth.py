"""Credentials: who may invoke a protected skill, and the mock OAuth2 token endpoint.

A scenario declares credentials — static bearer tokens, API keys (sent as
``X-API-Key``), and OAuth2 clients that get tokens from ``POST /oauth/token``
(client-credentials grant, RFC 6749 §4.4) — each granting scopes. A skill
``requires`` scopes. An invocation without valid credentials gets 401
``AUTH_REQUIRED`` (details say how to authenticate, and ``WWW-Authenticate``
says it too); valid credentials without a required scope get 403
``PERMISSION_DENIED`` naming the missing scopes. Issued tokens can expire
after some seconds or some uses, so a consumer's refresh can be exercised.

The token endpoint answers errors in OAuth2's own format (RFC 6749 §5.2),
not the skill protocol's: it is OAuth2 that a consumer talks to there.

Every ``AUTH_REQUIRED`` sends a consumer to the token endpoint
(``authorization_url``): a ``requires:`` skill's, and a forced or scripted
one's alike. ``GET /oauth/authorize`` is for a person (and the bundled
descriptors): the mock has no interactive flow to offer there, so the
endpoint says what it does offer: the token endpoint and its
one grant, client credentials — and refuses an authorization request
(``response_type=...``) as OAuth2 does, ``unsupported_response_type``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..protocol import catalog
from ..protocol.catalog import AUTHORIZE_PATH, TOKEN_PATH
from ..scenario.model import JSON_TYPE, Credentials, Reply, Requirement
from .incoming import Incoming
from .pending import Later, Pending
from .store import IssueToken, NeedAnswer, UseToken

if TYPE_CHECKING:
    from werkzeug.wrappers import Request, Response

GRANT_TYPES = ("client_credentials",)
API_KEY_HEADER = "X-API-Key"


def _sha256(secret: str) -> str:
    """A presented credential's digest, as a scenario's ``token_sha256``/``key_sha256``."""
    import hashlib

    return hashlib.sha256(secret.encode()).hexdigest()


def presented(request: Incoming) -> tuple[str, str] | None:
    """The credential a request carries: ("bearer", token) or ("api_key", key), if any."""
    header = request.header("Authorization") or ""
    if header[:7].lower() == "bearer ":
        return "bearer", header[7:].strip()
    key = request.header(API_KEY_HEADER)
    if key:
        return "api_key", key.strip()
    return None


def check(
    request: Incoming,
    requirement: Requirement,
    credentials: Credentials,
    context: catalog.Context,
) -> Later[Reply | None]:
    """401 or 403 for a caller that may not invoke; None for one that may.

    A bearer token that no scenario declares may be one the token endpoint
    issued: then the store is asked to spend one of its uses (a
    :class:`~.store.UseToken`), and the judgement waits for its answer.
    """
    credential = presented(request)
    if credential is None:
        return _auth_required(
            requirement, context, "no credentials were presented", invalid_token=False
        )
    kind, secret = credential
    if kind == "api_key":
        granted = credentials.api_keys.get(secret)
        if granted is None and credentials.key_digests:
            granted = credentials.key_digests.get(_sha256(secret))
        return _judged(requirement, context, granted, kind)
    granted = credentials.tokens.get(secret)
    if granted is None and credentials.token_digests:
        granted = credentials.token_digests.get(_sha256(secret))
    if granted is not None:
        return _judged(requirement, context, granted, kind)

    def used(scopes: NeedAnswer) -> Reply | None:
        assert scopes is None or isinstance(scopes, frozenset)
        return _judged(requirement, context, scopes, kind)

    return Pending(UseToken(secret), used)


def _judged(
    requirement: Requirement,
    context: catalog.Context,
    granted: frozenset[str] | None,
    kind: str,
) -> Reply | None:
    """401 when the credential of *kind* grants nothing, 403 when not enough; else None."""
    if granted is None:
        problem = (
            "the API key is unknown" if kind == "api_key" else "the token is unknown or expired"
        )
        return _auth_required(requirement, context, problem, invalid_token=True)
    missing = [s for s in requirement.scopes if s not in granted]
    if missing:
        return _permission_denied(requirement, context, missing, granted)
    return None


def _auth_required(
    requirement: Requirement, context: catalog.Context, problem: str, *, invalid_token: bool
) -> Reply:
    scope = " ".join(requirement.scopes)
    challenge = f'Bearer realm="mockskill", scope="{scope}"'
    if invalid_token:  # RFC 6750 §3.1
        challenge += f', error="invalid_token", error_description="{problem}"'
    details = {
        "required_auth_type": requirement.type,
        "authorization_url": f"{catalog.BASE_URL}{TOKEN_PATH}",
        "scopes": list(requirement.scopes),
        "reason": problem,
    }
    rendered = catalog.render(
        "AUTH_REQUIRED", context, details=details, headers={"WWW-Authenticate": challenge}
    )
    return Reply.error(rendered)


def _permission_denied(
    requirement: Requirement,
    context: catalog.Context,
    missing: list[str],
    granted: frozenset[str],
) -> Reply:
    challenge = f'Bearer realm="mockskill", error="insufficient_scope", scope="{" ".join(missing)}"'
    details = {
        "skill_id": context.skill_id,
        "missing_scopes": missing,
        "granted_scopes": sorted(granted),
    }
    rendered = catalog.render(
        "PERMISSION_DENIED", context, details=details, headers={"WWW-Authenticate": challenge}
    )
    return Reply.error(rendered)


def token_endpoint(request: Request, credentials: Credentials) -> Later[Response]:
    """``POST /oauth/token``: the client-credentials grant, with RFC 6749 §5.2 errors.

    A token granted is answered once the store has it (an :class:`~.store.IssueToken`):
    a consumer that uses it at once, on any replica, finds it there."""
    if request.method != "POST":
        return _oauth_error(400, "invalid_request", "the token endpoint takes POST")
    form = request.form
    basic = basic_credentials(request)
    client_id = basic[0] if basic else form.get("client_id")
    client_secret = basic[1] if basic else form.get("client_secret")
    if form.get("grant_type") is None:
        return _oauth_error(400, "invalid_request", "grant_type is missing")
    if not client_id or client_secret is None:
        return _oauth_error(401, "invalid_client", "client authentication failed")
    client = credentials.clients.get(client_id)
    if client is None or not client.accepts(client_secret):
        return _oauth_error(401, "invalid_client", "client authentication failed")
    if form["grant_type"] != "client_credentials":
        return _oauth_error(
            400, "unsupported_grant_type", "only client_credentials is supported here"
        )
    asked = form.get("scope")
    scopes = frozenset(asked.split()) if asked else client.scopes
    if not scopes <= client.scopes:
        extra = " ".join(sorted(scopes - client.scopes))
        return _oauth_error(400, "invalid_scope", f"not granted to this client: {extra}")
    import secrets

    token = secrets.token_urlsafe(24)
    lifetime = credentials.lifetime
    body: dict[str, Any] = {
        "access_token": token,
        "token_type": "Bearer",
        "scope": " ".join(sorted(scopes)),
    }
    if lifetime.seconds is not None:
        body["expires_in"] = lifetime.seconds
    issued = IssueToken(token, scopes, lifetime.seconds, lifetime.uses)
    return Pending(issued, lambda _: _json(200, body))


def authorization_endpoint(request: Request, base_url: str) -> Response:
    """``GET /oauth/authorize``: what this OAuth2 server supports, named honestly.

    The fields follow RFC 8414's server metadata, so a consumer (or a person
    with curl) that followed ``authorization_url`` learns where tokens come
    from. An authorization request proper (``response_type``) is refused with
    RFC 6749 §4.1.2.1's ``unsupported_response_type``: no redirect is made,
    as no client has a registered redirect URI here.
    """
    if request.method not in ("GET", "HEAD"):
        response = _oauth_error(405, "invalid_request", "the authorization endpoint takes GET")
        response.headers["Allow"] = "GET, HEAD"
        return response
    body: dict[str, Any] = {
        "authorization_endpoint": base_url + AUTHORIZE_PATH,
        "token_endpoint": base_url + TOKEN_PATH,
        "grant_types_supported": list(GRANT_TYPES),
        "response_types_supported": [],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "description": (
            "mockskill's mock OAuth2 server has no interactive authorization: get a token"
            f" with the client-credentials grant, POST {base_url}{TOKEN_PATH}"
            " grant_type=client_credentials (client_id and client_secret by HTTP Basic or"
            " in the form), then send it as 'Authorization: Bearer TOKEN'"
        ),
    }
    response_type = request.args.get("response_type")
    if response_type is not None:
        error = {
            "error": "unsupported_response_type",
            "error_description": (
                f"response_type {response_type!r} is not supported here; only the"
                " client-credentials grant is, at the token endpoint"
            ),
        }
        return _json(400, {**error, **body})
    return _json(200, body)


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """``(client_id, client_secret)`` from an HTTP Basic ``Authorization`` header, if any."""
    header = request.headers.get("Authorization", "")
    if header[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, _, client_secret = decoded.partition(":")
    return unquote(client_id), unquote(client_secret)  # RFC 6749 §2.3.1: form-encoded


def _oauth_error(status: int, error: str, description: str) -> Response:
    response = _json(status, {"error": error, "error_description": description})
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="mockskill"'
    return response


def _json(status: int, body: dict[str, Any]) -> Response:
    from werkzeug.wrappers import Response  # the OAuth2 endpoints' only: on first use

    response = Response(json.dumps(body), status=status, content_type=JSON_TYPE)
    response.headers["Cache-Control"] = "no-store"  # RFC 6749 §5.1
    response.headers["Pragma"] = "no-cache"
    return response
