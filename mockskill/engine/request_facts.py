"""What the engine reads off a request for the journal and the answer, beyond matching.

The credential's keyed fingerprint (never the secret), an OAuth2 client's
id, whether a served descriptor is invalid, and the base URL the client reached
this server by.
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING

from ..protocol.validator import validate as validate_descriptor
from . import auth
from .digests import KeyedDigest
from .incoming import Incoming

if TYPE_CHECKING:
    from werkzeug.wrappers import Request

API_KEY = _API_KEY = auth.API_KEY_HEADER.lower()
"""The API key header, as :attr:`Incoming.headers` names it (a credential is in it or in
``authorization``)."""
_HOST = re.compile(
    r"([a-z0-9.-]+|\[[a-f0-9]*:[a-f0-9.:]+])(?::([1-9][0-9]{,4}))?", re.ASCII | re.IGNORECASE
)
"""What Werkzeug accepts as a ``host:port`` (``host_is_trusted``)."""
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


def credential(request: Incoming, digest: KeyedDigest) -> str | None:
    """``KIND hmac-sha256:…`` for the credential *request* carries, its *digest* (keyed per
    server: the same secret reads the same within one server, so the retry audit can tell
    a changed credential from an unchanged one; without the key, a weak token cannot be
    brute-forced back from an exported journal); never the secret itself."""
    headers = request.headers
    if "authorization" not in headers and _API_KEY not in headers:
        return None  # the common case: nothing to hash
    presented = auth.presented(request)
    if presented is None:
        return None
    kind, secret = presented
    return f"{kind} {digest(secret.encode())}"


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


def get_host(scheme: str, host_header: str | None, server: tuple[str, int | None]) -> str:
    """``host:port`` as the client reached this server: Werkzeug's ``get_host`` (the Host
    header, else the server's address; the scheme's default port left out; "" for a
    value of characters no host has), without importing Werkzeug."""
    if host_header is not None:
        host = host_header
    elif server[1] is not None:
        name = server[0]
        if ":" in name and name[0] != "[":
            name = f"[{name}]"  # an IPv6 address, as a Host header writes it
        host = f"{name}:{server[1]}"
    else:
        return ""
    if scheme in {"http", "ws"}:
        host = host.removesuffix(":80")
    elif scheme in {"https", "wss"}:
        host = host.removesuffix(":443")
    match = _HOST.fullmatch(host) if host else None
    if match is None or (match.group(2) and not 1 <= int(match.group(2)) <= 65535):
        return ""
    return host
