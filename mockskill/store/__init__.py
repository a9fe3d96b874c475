"""Shared stores: the state of several mockskill processes on one Redis.

Owns the Redis backend of the state interface (:mod:`mockskill.engine.store`)
and what it needs: the URL (``url``), the store (``redis``; ``startup_errors`` what
it raises at start), the engine's needs as commands (``commands``) and the Lua
``scripts`` that make each one atomic step, one connection on the event
loop (``link``) and the needs of a loop turn in one write (``batching``),
the shared journal (``journal``, ``stream_entries``, ``loop_journal``), and
the shared scenario set (``scenarios``; its records as data, ``shared_set``).
It may import ``engine``, ``scenario`` and ``protocol``; only the faces and the
admin app import it, and only when ``--state`` names a shared store, so that
the embedded default never imports the Redis client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.state import DEFAULT_JOURNAL_SIZE, DEFAULT_MAX_SESSIONS, State
from .startup_errors import StoreOpenError
from .url import BadStoreURL, checked, is_shared, masked

if TYPE_CHECKING:
    from ..engine.store import Store

__all__ = [
    "BadStoreURL",
    "StoreOpenError",
    "checked",
    "client_missing",
    "is_shared",
    "masked",
    "open_store",
]


def client_missing(url: str) -> str | None:
    """Why the shared store *url* cannot be used from this Python: its client is not
    installed (None: it is). Asked without importing it: a supervisor checks once for its
    workers, which would each say so."""
    import importlib.util

    try:
        found = importlib.util.find_spec("redis")
    except ImportError:  # (a finder that refuses it)
        found = None
    return _not_installed(url, "redis") if found is None else None


def _not_installed(url: str, module: str) -> str:
    return (
        f"cannot use the state store {masked(url)}: the Redis client is not installed"
        f" ({module}): pip install 'mockskill[redis]'"
    )


def open_store(
    url: str | None,
    *,
    seed: int | None = None,
    journal_size: int = DEFAULT_JOURNAL_SIZE,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    replica: str | None = None,
    namespace: str = "",
) -> Store:
    """The store *url* names, ready: ``memory`` (or None) the embedded one, else a shared one.

    A Redis URL is connected to at once (PING, scripts loaded, the seed agreed
    on): unreachable or refused, :class:`StoreOpenError` says which (URL masked)
    and why; a URL no store can use is a :class:`BadStoreURL`. *replica* names
    this process in the shared journal (default ``hostname:pid``). The Redis
    client is imported only here, only for a shared URL.
    """
    if not is_shared(url):
        return State(seed=seed, journal_size=journal_size, max_sessions=max_sessions)
    assert url is not None
    try:
        from .redis import open_redis
    except ModuleNotFoundError as missing:
        raise StoreOpenError(_not_installed(url, str(missing.name))) from None

    return open_redis(
        url,
        seed=seed,
        journal_size=journal_size,
        max_sessions=max_sessions,
        replica=replica,
        namespace=namespace,
    )
