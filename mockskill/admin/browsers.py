"""What a web page may not make a browser do to ``/__admin`` (docs/security.md, "Browsers").

A page on another origin can make its visitor's browser send requests to a
mockskill on that machine. Three checks, run before the admin app sees a
request, keep such a request from changing anything:

- **Host** (a loopback server only): a page that rebinds its own DNS name to
  127.0.0.1 talks to mockskill "same-origin", under its own name. So on a
  loopback bind the admin answers only requests addressed to a loopback name
  (``localhost``, ``*.localhost``, ``127.x.x.x``, ``[::1]``) or to a name the
  user allowed (``--allow-host``); ``*`` allows any.
- **Origin**: a request a browser sends from another origin says so in
  ``Origin``; it is refused unless it is the server's own (the scheme and
  ``Host`` the request came to) or CORS allows it (``--cors``: any origin;
  ``--cors-origin ORIGIN``: the origins named).
- **Content type**: a browser sends a cross-origin write without asking first
  (a preflight, which mockskill answers only with ``--cors``) only with a
  form's or ``text/plain``'s type, or with none. So a state-changing request
  (any method but GET, HEAD, OPTIONS) must say JSON or YAML; one that gives no
  type is taken only without an ``Origin``, which a browser always sends with
  such a method (the Fetch standard) and curl, urllib or requests do not.

Each check is a function of the WSGI environ that gives the refusal to send,
or None; :mod:`mockskill.wsgi.app` renders it in the unified error body.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.plan import Answer

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing on ``/__admin`` (a browser may send them anywhere)."""
BODY_TYPES = (
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
    "application/json",
)
"""What a state-changing admin request may say it sends (or ``+json``/``+yaml`` types)."""
ANY_HOST = "*"
Origin = tuple[str, str, int]
"""An origin compared: scheme, host name, port (made explicit)."""
Cors = bool | frozenset[Origin]
"""Whom CORS lets in: nobody (False), any origin (True), or the origins named."""


@dataclass(frozen=True, slots=True)
class BrowserRefusal:
    """An admin request refused before the admin app sees it."""

    status: int
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def host_names(names: Iterable[str]) -> frozenset[str]:
    """The names of *names* as :func:`refuse_host` compares them (lower case, no final dot)."""
    return frozenset(_name(n) for n in names if n.strip())


def is_loopback_name(name: str) -> bool:
    """Whether a browser reaches *name* (a Host header's name) only on this machine."""
    name = _name(name)
    if name == "localhost" or name.endswith(".localhost"):
        return True  # RFC 6761: browsers resolve these to loopback themselves, never by DNS
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_host(environ: WSGIEnvironment, allowed: frozenset[str] | None) -> BrowserRefusal | None:
    """403 unless the request's Host is loopback or *allowed* (None: any Host is)."""
    if allowed is None or ANY_HOST in allowed:
        return None
    host = environ.get("HTTP_HOST")
    if host is None:
        return None  # HTTP/1.0 without Host: not a browser, which always sends it
    name = _name(_without_port(host))
    if is_loopback_name(name) or name in allowed:
        return None
    return BrowserRefusal(
        403,
        "MOCKSKILL_ADMIN_HOST_REFUSED",
        f"this server listens on a loopback address, and its admin surface answers only"
        f" requests addressed to a loopback name (localhost, 127.0.0.1, [::1]), not to"
        f" {name!r}: a web page that points its own name at 127.0.0.1 (DNS rebinding) would"
        f" otherwise reach it. Pass --allow-host {name} (MOCKSKILL_ALLOW_HOSTS;"
        f" Server(allow_hosts=[...])) if you address it by that name",
        {"host": name, "allowed": ["localhost", "127.0.0.1", "[::1]", *sorted(allowed)]},
    )


def cors_origins(cors: bool | Iterable[str]) -> Cors:
    """*cors* as the checks read it; ValueError names a text that is not an origin."""
    if isinstance(cors, bool):
        return cors
    named: set[Origin] = set()
    for text in (cors,) if isinstance(cors, str) else cors:
        if text.strip() == "*":
            return True
        origin = _origin(text.strip().rstrip("/"))
        if origin is None:
            raise ValueError(
                f"{text!r} is not an origin: give SCHEME://HOST[:PORT], e.g. http://localhost:3000"
            )
        named.add(origin)
    return frozenset(named)


def allows(cors: Cors, origin: str | None) -> bool:
    """Whether CORS lets a page of *origin* (an ``Origin`` header) in."""
    if isinstance(cors, bool):
        return cors
    return origin is not None and _origin(origin) in cors


def origin_text(origin: Origin) -> str:
    """*origin* as a browser writes it (the default port left out)."""
    scheme, name, port = origin
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{name}" + ("" if port == default else f":{port}")


def refuse_origin(environ: WSGIEnvironment, cors: Cors) -> BrowserRefusal | None:
    """403 for a request from a page on another origin, unless CORS lets it in."""
    origin = environ.get("HTTP_ORIGIN")
    if origin is None or allows(cors, origin):
        return None
    own = _own_origin(environ)
    if own is not None and _origin(origin) == own:
        return None
    return BrowserRefusal(
        403,
        "MOCKSKILL_ADMIN_CROSS_ORIGIN",
        f"the admin surface does not take requests from a page on another origin"
        f" ({origin}): any web page could otherwise reset or reconfigure this server."
        f" Start it with --cors-origin {origin} (Server(cors=[{origin!r}])) to let that"
        f" origin's pages use it, or --cors for any origin's",
        {"origin": origin},
    )


def refuse_content_type(environ: WSGIEnvironment) -> BrowserRefusal | None:
    """415 for a state-changing request a browser could send cross-origin without asking."""
    method = environ.get("REQUEST_METHOD", "GET")
    if method in SAFE_METHODS:
        return None
    content_type = environ.get("CONTENT_TYPE", "")
    mimetype = content_type.partition(";")[0].strip().lower()
    if mimetype:
        if mimetype in BODY_TYPES or mimetype.endswith(("+json", "+yaml")):
            return None
    elif "HTTP_ORIGIN" not in environ:
        return None  # not a browser: curl -X POST, urllib, requests without a body
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    found = f"Content-Type {mimetype}" if mimetype else "no Content-Type"
    return BrowserRefusal(
        415,
        "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE",
        f"{method} {path} changes the server, so it takes JSON or YAML, not {found}: a web"
        f" page can make a browser send that to any server without asking. Send"
        f" Content-Type: application/json, or Content-Type: application/yaml for a YAML"
        f" body (curl: -H 'Content-Type: application/json'), with or without a body",
        {"content_type": content_type or None, "expected": list(BODY_TYPES)},
    )


def _without_port(host: str) -> str:
    host = host.strip()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def _name(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _origin(text: str) -> Origin | None:
    """``scheme://host[:port]`` as (scheme, name, port), the port made explicit."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep or not rest or "/" in rest:
        return None
    scheme = scheme.lower()
    default = {"http": 80, "https": 443}.get(scheme)
    name = _name(_without_port(rest))
    port_text = rest[len(_without_port(rest)) :].lstrip(":")
    if port_text:
        if not port_text.isdigit():
            return None
        return scheme, name, int(port_text)
    if default is None:
        return None
    return scheme, name, default


def _own_origin(environ: WSGIEnvironment) -> Origin | None:
    """The origin of a page this server served: the scheme and Host the request came to."""
    host = environ.get("HTTP_HOST")
    if not host:
        return None
    return _origin(f"{environ.get('wsgi.url_scheme', 'http')}://{host}")


# -- what both faces answer browsers with (the loop's dispatcher and the WSGI app) --

ADMIN_PREFIX = "/__admin"
"""Where the admin surface lives; every other path is a skill's or a scenario's."""
ADMIN_TOKEN_HEADER = "Mockskill-Admin-Token"
CORS_ALLOW_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
CORS_ALLOW_HEADERS = (
    "Authorization, Content-Type, X-API-Key, Mockskill-Session, Mockskill-Error,"
    " Mockskill-Case, Skill-Protocol-Version, Mockskill-Admin-Token"
)
ANY_ORIGIN = (("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "*"))


def allowed_origin(cors: Cors, origin: str | None) -> str | None:
    """What ``Access-Control-Allow-Origin`` says to a request from *origin* (None: nothing)."""
    if cors is True:
        return "*"
    return origin if origin is not None and allows(cors, origin) else None


def cors_headers(allowed: str) -> tuple[tuple[str, str], ...]:
    """The CORS headers of an answer to a request whose origin is let in as *allowed*."""
    if allowed == "*":
        return ANY_ORIGIN
    # Named origins: the answer depends on the request's Origin, so caches must know.
    return (
        ("Access-Control-Allow-Origin", allowed),
        ("Access-Control-Expose-Headers", "*"),
        ("Vary", "Origin"),
    )


def preflight(allowed: str = "*") -> Answer:
    """The answer to a CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``)."""
    vary = () if allowed == "*" else (("Vary", "Origin"),)
    return Answer(
        204,
        (
            ("Content-Type", "text/plain; charset=utf-8"),  # (Werkzeug's default, as it was)
            ("Access-Control-Allow-Origin", allowed),
            ("Access-Control-Allow-Methods", CORS_ALLOW_METHODS),
            ("Access-Control-Allow-Headers", CORS_ALLOW_HEADERS),
            ("Access-Control-Max-Age", "600"),
            *vary,
        ),
    )
