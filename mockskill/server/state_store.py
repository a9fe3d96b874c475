"""What a Server keeps its state in, and where it shares its scenario set.

Owns opening the store a Server is given (an instance, a URL, or nothing:
a new in-memory one), and reading its arguments for the URL of the scenario
set it shares (serving and sharing that set is :mod:`mockskill.control`'s).
``mockskill.store`` and the Redis client are imported only for a shared URL:
a server that shares nothing never imports them.
"""

from __future__ import annotations

from ..engine.state import DEFAULT_JOURNAL_BYTES, DEFAULT_JOURNAL_SIZE, State
from ..engine.store import Store
from .listening import ServerError


def open_state(
    state: Store | str | None,
    seed: int | None,
    journal_size: int,
    replica: str | None,
    journal_bytes: int = DEFAULT_JOURNAL_BYTES,
) -> Store:
    """The store a Server keeps its state in: *state*, else a new in-memory one.

    A store named by URL is opened here (``memory``, or a shared one: connected
    at once, an unusable one a ServerError naming the masked URL and why), with
    *seed*, *journal_size* and *replica* (a new in-memory one with *journal_bytes*, the most
    its entries keep of what was sent). A store given brings its own seed and
    journal bound: *seed* and *journal_size*, when given too, must say the same,
    rather than be silently ignored.
    """
    if state is None:
        return State(seed=seed, journal_size=journal_size, journal_bytes=journal_bytes)
    if isinstance(state, str):
        # mockskill.store imports the Redis client only for a shared URL.
        from ..store import BadStoreURL, StoreOpenError, open_store

        try:
            return open_store(state, seed=seed, journal_size=journal_size, replica=replica)
        except (BadStoreURL, StoreOpenError) as error:
            raise ServerError(str(error)) from None
    if seed is not None and seed != state.seed:
        raise ServerError(
            f"seed {seed} differs from the given state store's seed {state.seed}: a store"
            " brings its own seed (give it there, or give no seed)"
        )
    if journal_size not in (DEFAULT_JOURNAL_SIZE, state.capacity):
        raise ServerError(
            f"journal_size {journal_size} differs from the given state store's journal"
            f" bound {state.capacity}: a store brings its own (give it there)"
        )
    return state


def shared_url(state: Store | str | None, shared_scenarios: str | None) -> str | None:
    """The URL of the scenario set a Server shares (None: it shares none).

    By default the URL *state* gives, when it names a shared store: one truth.
    """
    if shared_scenarios is None and isinstance(state, str) and state not in ("", "memory"):
        shared_scenarios = state
    return None if shared_scenarios in (None, "memory") else shared_scenarios
