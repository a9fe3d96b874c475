"""The dashboard: a page at ``/__admin/`` that draws what the admin API answers.

This module owns serving its three static files (``mockskill/admin/dashboard/``:
HTML, JS, CSS; no build step, nothing fetched from elsewhere) and saying
which admin paths are those files. The page itself holds no data: it polls
the JSON endpoints (health, scenarios, journal, report) from the browser,
with the admin token when the server has one (docs/dashboard.md).

Because the files carry no data, :func:`is_public` lets them through the
admin token gate in :mod:`mockskill.wsgi.app`, so that the page can load and ask
for the token instead of the browser showing a bare 401.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..protocol.catalog import unified_body

if TYPE_CHECKING:
    from flask import Blueprint, Response

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
"""The dashboard's files (in ``mockskill/admin/dashboard/``) and their content types."""

PAGE = "index.html"
"""The page, served at ``/__admin/``; the other files at ``/__admin/dashboard/NAME``."""
ASSET_PREFIX = "/dashboard/"
LINKED = tuple(name for name in ASSETS if name != PAGE)
"""The files the page links to, served under :data:`ASSET_PREFIX`."""

# Paths relative to the admin prefix: "" is the bare prefix, redirected to "/".
_PUBLIC = frozenset({"", "/", *(ASSET_PREFIX + name for name in LINKED)})

# Everything the page needs comes from this server; nothing may be framed or injected.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        " img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # Revalidate every time (cheap: a 304 by ETag), so that an upgraded
    # server is never drawn by the page of the previous version.
    "Cache-Control": "no-cache",
}


def is_public(path: str, method: str) -> bool:
    """Whether *path* (below the admin prefix) is a dashboard file, asked for with GET or HEAD.

    Those are served without the admin token: they hold no data, and every
    request the page then makes for data carries the token.
    """
    return method in ("GET", "HEAD") and path in _PUBLIC


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    content_type: str
    etag: str


@functools.cache
def _load() -> dict[str, _Asset]:
    """The files, read once, when the page is first asked for: they ship in the package."""
    folder = resources.files("mockskill.admin") / "dashboard"
    assets = {}
    for name, content_type in ASSETS.items():
        body = (folder / name).read_bytes()
        assets[name] = _Asset(body, content_type, hashlib.sha256(body).hexdigest()[:16])
    return assets


def register(bp: Blueprint) -> None:
    """Add the dashboard's routes to the admin blueprint *bp*: ``/`` and ``/dashboard/NAME``."""
    # Flask here, not at the top: mockskill.wsgi.app reads is_public on every admin
    # request, before (and without) the Flask app being built.
    from flask import Response, request

    def serve(name: str) -> Response:
        asset = _load()[name]
        response = Response(asset.body, content_type=asset.content_type)
        response.headers.update(SECURITY_HEADERS)
        response.set_etag(asset.etag)
        response.make_conditional(request)  # a 304 when the browser has this version
        return response

    @bp.get("/")
    def dashboard() -> Response:
        """The page (``/__admin`` redirects here)."""
        return serve(PAGE)

    @bp.get(ASSET_PREFIX + "<name>")
    def dashboard_asset(name: str) -> Response | tuple[dict[str, Any], int]:
        if name not in LINKED:
            message = f"the dashboard has no file {name!r}; it has {', '.join(LINKED)}"
            details = {"name": name, "expected": list(LINKED)}
            return unified_body("MOCKSKILL_HTTP_404", message, details), 404
        return serve(name)
