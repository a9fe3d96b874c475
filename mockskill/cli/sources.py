"""Reading a Skill Descriptor (or a skill listing) from a file, a URL or standard input.

For ``check-descriptor`` and ``generate``: :func:`read_source` returns the text, or
raises :class:`Unreadable` saying why in a sentence (an HTTP error with its body), which
the commands turn into exit code 3, never a traceback; :func:`read_json` is both steps
and that exit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .options import UNREADABLE


class Unreadable(Exception):
    """The source could not be read; the message says why (an HTTP error with its body)."""


_ERROR_BODY_SHOWN = 4000  # characters of an HTTP error's body: enough for a unified body


def read_json(source: str, read: Callable[[str], str] | None = None) -> Any:
    """The JSON document *source* holds, read by *read* (default :func:`read_source`) and
    strictly (``NaN`` and ``Infinity`` are no JSON a provider sends); exit 3 with a
    sentence when it cannot be read or is not JSON."""
    from ..protocol import jsonstyle

    try:
        text = (read or read_source)(source)
    except Unreadable as exc:
        click.echo(f"mockskill: cannot read a descriptor from {source}: {exc}", err=True)
        raise SystemExit(UNREADABLE) from None
    try:
        return jsonstyle.loads(text)
    except ValueError as exc:
        click.echo(f"mockskill: {source} is not JSON: {exc}", err=True)
        raise SystemExit(UNREADABLE) from None


def read_source(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    url = source_url(source)
    if url is not None:
        return fetch(url)
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(getattr(exc, "strerror", None) or str(exc)) from None


def source_url(source: str) -> str | None:
    """The http(s) URL *source* names (``HOST:PORT/PATH`` without a scheme is http, as in
    curl, unless a file of that name exists), or ``None`` for a file or ``-``."""
    # Here, not at the top: only check-descriptor and generate read a URL, and
    # urllib.request (http.client, ssl, email) is a good part of what `mockskill serve`
    # would import.
    from ..server.remote import http_url, looks_like_url

    if source == "-" or not (
        "://" in source or (looks_like_url(source) and not Path(source).exists())
    ):
        return None
    try:
        return http_url(source)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE|URL|-") from None


def fetch(url: str) -> str:
    import urllib.error  # check-descriptor and generate only (see read_source)
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        # What the server said is the useful part: a unified error body names
        # the skill, a did-you-mean, the reason.
        shown = exc.read().decode("utf-8", "replace")[:_ERROR_BODY_SHOWN]
        raise Unreadable(f"GET {url} answered {exc.code} {exc.reason}\n{shown}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise Unreadable(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"GET {url} answered a body that is not UTF-8: {exc}") from None
