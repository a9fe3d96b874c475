"""What the engine reads off a request for the journal and the answer, beyond matching.

The credential's keyed fingerprint (never the secret), an OAuth2 client's
id, whether a served descriptor is invalid, the base URL the client reached
this server by, and the skill id a request names.
"""

from __future__ import annotations

import functools
import json
import re

from werkzeug.wrappers import Request

from ..protocol.validator import validate as validate_descriptor
from . import auth
from .matching import Miss, Target

_SAFE_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d+)?$|^\[[0-9A-Fa-f:.]+\](:\d+)?$")


@functools.lru_cache(maxsize=256)
def invalid_descriptor(body: bytes) -> bool:
    """Whether *body*, served as a Skill Descriptor, fails the reference validator.

    Cached: a scenario serves few distinct descriptors, so the hot path
    validates each once (per base URL), not per request.
    """
    try:
        document = json.loads(body)
    except ValueError:
        return True  # not even JSON: no validator can accept it
    return bool(validate_descriptor(document))


def credential(request: Request, key: bytes) -> str | None:
    """``KIND hmac-sha256:…`` for the credential *request* carries (keyed by *key*); never
    the secret itself."""
    headers = request.headers
    if "Authorization" not in headers and auth.API_KEY_HEADER not in headers:
        return None  # the common case: nothing to hash
    presented = auth.presented(request)
    if presented is None:
        return None
    kind, secret = presented
    return f"{kind} {auth.fingerprint(secret, key)}"


def client(request: Request) -> str | None:
    """``client ID`` for the OAuth2 client a token request names (its id is no secret)."""
    basic = auth.basic_credentials(request)
    client_id = basic[0] if basic else request.form.get("client_id")
    return f"client {client_id}" if client_id else None


def skill_id(target: Target | Miss) -> str | None:
    if isinstance(target, Miss):
        return target.skill_id
    return target.skill.id if target.skill else None


def base_url(request: Request) -> str:
    """This server as the client reached it; the socket's address if Host looks forged."""
    host = request.host
    if not _SAFE_HOST.match(host):
        server = request.environ.get("SERVER_NAME", "localhost")
        host = f"{server}:{request.environ.get('SERVER_PORT', '80')}"
    return f"{request.scheme}://{host}"
