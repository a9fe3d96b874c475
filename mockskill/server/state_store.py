"""What a Server keeps its state in, and the shared scenario set it serves.

Owns opening the store a Server is given (an instance, a URL, or nothing:
a new in-memory one), and joining or publishing the scenario set shared on
Redis (:mod:`mockskill.store.scenarios`). ``mockskill.store`` and the Redis
client are imported only here, and only for a shared URL: a server that
shares nothing never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.state import DEFAULT_JOURNAL_SIZE, State
from ..engine.store import Store
from .listening import ServerError

if TYPE_CHECKING:
    from ..admin.registry import Registry
    from ..store.scenarios import SharedScenarios


def open_state(
    state: Store | str | None, seed: int | None, journal_size: int, replica: str | None
) -> Store:
    """The store a Server keeps its state in: *state*, else a new in-memory one.

    A store named by URL is opened here (``memory``, or a shared one: connected
    at once, an unusable one a ServerError naming the masked URL and why), with
    *seed*, *journal_size* and *replica*. A store given brings its own seed and
    journal bound: *seed* and *journal_size*, when given too, must say the same,
    rather than be silently ignored.
    """
    if state is None:
        return State(seed=seed, journal_size=journal_size)
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


def set_moves_state(state: Store, url: str | None) -> bool:
    """Whether the set shared at *url* restarts sequences and outage windows in *state*.

    It does when *state* is kept on that same Redis: each version is written
    with its restarts and outage starts in one step, by the replica that
    writes it. Then no replica starts outage windows when it starts (only
    the one that publishes a set does): a replica joining would otherwise
    move the fleet's windows.
    """
    if url is None or state.replica is None:
        return False
    from ..store.redis import RedisStore

    return isinstance(state, RedisStore) and state.url == url


def share(registry: Registry, url: str, *, joins: bool) -> SharedScenarios:
    """Serve, through *registry*, the scenario set shared on the Redis at *url* (docs/admin.md).

    *joins*: started without scenarios of its own, the server serves the
    stored set rather than publishing the bundled one (which it publishes
    only when nothing is stored). Raises ServerError when Redis cannot be
    reached there.
    """
    from ..engine.store import StoreUnavailable
    from ..store.redis import RedisStore
    from ..store.scenarios import SharedScenarios
    from ..store.url import BadStoreURL

    state = registry.engine.state
    # The state on the same Redis: a version restarts its sequences there in the same
    # step (else a replica hearing of it first could build on the old generations).
    same = isinstance(state, RedisStore) and state.url == url
    keys = (state.keys.gen, state.keys.act) if isinstance(state, RedisStore) else None
    try:
        shared = SharedScenarios(url, state_keys=keys if same else None)
    except BadStoreURL as exc:
        raise ServerError(str(exc).replace("--state", "shared_scenarios", 1)) from None
    try:
        registry.share(shared, publish=not joins)
    except StoreUnavailable as exc:
        shared.stop()
        raise ServerError(
            f'{exc}: is Redis running there? (shared_scenarios="memory" serves alone)'
        ) from None
    except BaseException:
        shared.stop()
        raise
    return shared
