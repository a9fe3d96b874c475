"""A store's URL: which backend it names, and how it is shown without its password.

``memory`` (or nothing) is the embedded default; ``redis://[:PASSWORD@]HOST[:PORT][/DB]``
and ``rediss://...`` (TLS) name a shared Redis. Wherever a URL is printed or
logged it goes through :func:`masked` first.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

MEMORY = "memory"
SHARED_SCHEMES = ("redis", "rediss")


class BadStoreURL(ValueError):
    """A ``--state`` value that names no store this mockskill can use."""


def masked(url: str) -> str:
    """*url* with its password (and a user's, if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def is_shared(url: str | None) -> bool:
    """Whether *url* names a shared store (checked: raises :class:`BadStoreURL`)."""
    return checked(url) != MEMORY


def checked(url: str | None) -> str:
    """*url* as given, ``memory`` for none; :class:`BadStoreURL` says what is wrong."""
    if url is None or url == "" or url == MEMORY:
        return MEMORY
    parts = urlsplit(url)
    if parts.scheme not in SHARED_SCHEMES:
        raise BadStoreURL(
            f"--state {masked(url)!r}: expected 'memory' or a URL redis://HOST:PORT/DB"
            f" (rediss:// for TLS), found the scheme {parts.scheme or 'none'!r}"
        )
    if not parts.hostname:
        raise BadStoreURL(f"--state {masked(url)!r}: the URL names no host (redis://HOST:PORT/DB)")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise BadStoreURL(f"--state {masked(url)!r}: the port is not a number") from None
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise BadStoreURL(f"--state {masked(url)!r}: the database {db!r} is not a number")
    return url
