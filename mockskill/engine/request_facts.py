"""What the engine reads off a request for the journal and the answer, beyond matching.

The credential's keyed fingerprint (never the secret), an OAuth2 client's
id, whether a served descriptor is invalid, and the base URL the client reached
this server by.
"""

from __future__ import annotations

import functools
import json
import re

from werkzeug.sansio.utils import get_host
from werkzeug.wrappers import Request

from ..protocol.validator import validate as validate_descriptor
from . import auth
from .incoming import Incoming

API_KEY = _API_KEY = auth.API_KEY_HEADER.lower()
"""The API key header, as :attr:`Incoming.headers` names it (a credential is in it or in
``authorization``)."""
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


def credential(request: Incoming, key: bytes) -> str | None:
    """``KIND hmac-sha256:…`` for the credential *request* carries (keyed by *key*); never
    the secret itself."""
    headers = request.headers
    if "authorization" not in headers and _API_KEY not in headers:
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


def base_url(request: Incoming) -> str:
    """This server as the client reached it; the socket's address if Host looks forged."""
    host = get_host(request.scheme, request.header("Host"), request.server)
    if not _SAFE_HOST.match(host):
        name, port = request.server
        host = f"{name}:{80 if port is None else port}"
    return f"{request.scheme}://{host}"
