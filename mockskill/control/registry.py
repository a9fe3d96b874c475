"""The scenarios a server has loaded, and every change to them.

A :class:`Registry` owns the loaded scenarios — each a :class:`LoadedScenario`
with its name, origin, whether it is active, and when it was loaded and
activated — and is the only way to change them: add, replace, remove,
activate, deactivate, reload from files. Each change is checked whole first,
then applied at once by handing the engine a new
:class:`~mockskill.scenario.model.ScenarioSet` of the *active* scenarios
(:meth:`Engine.load <mockskill.engine.engine.Engine.load>`). A request sees the
scenarios from before a change or from after it, never a mix; one in flight
finishes on what it started with; a change that is refused changes nothing.

The rules (docs/admin.md):

- scenario names are unique among the loaded scenarios, active or not;
- skill ids and routes (method and path) are unique among the *active*
  ones only: an inactive scenario may share them with an active one, and
  activating it while the other is active is refused (:class:`Conflict`,
  naming the clash) — so a variant can wait, loaded, for its turn;
- an inactive scenario is listed but not served;
- a scenario's sequences restart, in every session, when it starts being
  served (added active, replaced, activated), and so does its outage
  window (the engine restarts the window of any scenario it did not serve).

The server (:class:`~mockskill.server.server.Server`), the admin API
(``/__admin/scenarios``) and the file watcher (:meth:`Registry.watch`, which
the registry runs) all change scenarios through here. What each change does
is planned in :mod:`.changes`; the registry applies the plans (one at a time,
on the newest shared version, into the engine). Shared with other replicas
(:meth:`Registry.share_at`), it writes each change to the set on Redis and
serves the versions the others write (:mod:`.sharing` turns loaded scenarios
into records and back).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.capabilities import check_playable
from ..engine.engine import Engine
from ..engine.matching import sequence_keys
from ..engine.store import Store, StoreUnavailable
from ..scenario.loader import InvalidScenarios, Source, load_any, load_paths
from ..scenario.model import Scenario, ScenarioSet
from ..scenario.problems import ScenarioError
from ..scenario.reader import MAX_DELAY_MS
from . import changes
from .changes import PlannedChange, T
from .clashes import Conflict, with_clashes
from .loaded import LoadedScenario, UnknownScenario
from .watch import DEFAULT_INTERVAL, ReloadResult, Watcher

if TYPE_CHECKING:  # (a shared set's records, and .sharing: imported where a set is shared)
    from ..store.shared_set import Record, Stored
    from .sharing import SharedSet

__all__ = ["CannotShare", "Conflict", "LoadedScenario", "Registry", "UnknownScenario"]

log = logging.getLogger("mockskill.shared")


class CannotShare(Exception):
    """The shared scenario set cannot be served: a bad URL, or a Redis that cannot be reached."""


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
    from ..store.redis import RedisStore  # (only for a shared set: the Redis client)

    return isinstance(state, RedisStore) and state.url == url


class Registry:
    """The loaded scenarios of one engine, and every change to them (thread-safe).

    It starts with the scenarios the engine serves, all active.
    *max_delay_ms* bounds the waits of scenarios :meth:`reload` reads.
    """

    def __init__(self, engine: Engine, *, max_delay_ms: int = MAX_DELAY_MS) -> None:
        self.engine = engine
        self.max_delay_ms = max_delay_ms
        now = time.time()
        # One lock for changes, so that two changes never interleave (each
        # reads the current scenarios, checks, then swaps). The scenarios
        # themselves are an immutable tuple, replaced whole under the lock:
        # readers take it without the lock and always see one whole state,
        # from before a change or from after it.
        self._changes = threading.Lock()
        self._loaded: tuple[LoadedScenario, ...] = tuple(
            LoadedScenario(s, True, now, now) for s in engine.scenarios.scenarios
        )
        self.last_reload: ReloadResult | None = None
        """What the last :meth:`reload` did; ``none`` once watching, None before."""
        self._shared: SharedSet | None = None
        # The stored version served, its records and files digest (when shared).
        self._version = 0
        self._records: tuple[Record, ...] = ()
        self._files = ""
        self._unsent: list[str | Path] | None = None
        """The paths of a reload the shared set could not be reached for."""
        self._added = itertools.count(1)  # names the text :meth:`load` is given: <added N>
        self._watcher: Watcher | None = None
        self.on_swap: Callable[[], None] | None = None
        """Called after each set is served in place of the one before (a load, a removal, an
        activation, a reload, another replica's version), on the thread that changed it:
        ``mockskill serve`` freezes the new set out of the collector's view
        (:mod:`mockskill.server.collector`)."""

    # -- reading --------------------------------------------------------------

    @property
    def scenarios(self) -> tuple[LoadedScenario, ...]:
        """Every loaded scenario, active or not, in order."""
        return self._loaded

    def get(self, name: str) -> LoadedScenario:
        """The loaded scenario *name*; raises :class:`UnknownScenario` (a KeyError)."""
        return changes.find(self._loaded, name)

    # -- changing -------------------------------------------------------------

    def add(
        self, scenarios: ScenarioSet, *, active: bool = True, replace: bool = False
    ) -> tuple[LoadedScenario, ...]:
        """Load *scenarios* (active, or not), beside the loaded ones; return them as loaded.

        A name already loaded is refused (:class:`Conflict`) unless *replace*:
        then the new scenario takes the old one's place. Active ones must not
        serve a skill id or route another active scenario serves.
        """

        with self._changes:
            return self._commit(
                lambda: changes.added(self._loaded, scenarios, active=active, replace=replace)
            )

    def load(
        self,
        sources: Source | Iterable[Source],
        *,
        active: bool = True,
        replace: bool = False,
    ) -> tuple[LoadedScenario, ...]:
        """Read *sources* (YAML text, a dict, a path, a ScenarioSet, or a list) and :meth:`add`
        them. Text without a name is named ``<added N>``. A problem raises ScenarioError
        with every clash the scenarios would have too (:meth:`refused`); nothing changes.
        """
        try:
            new = load_any(
                sources, max_delay_ms=self.max_delay_ms, name=f"<added {next(self._added)}>"
            )
        except ScenarioError as exc:  # with the clashes it would have too: all at once
            raise self.refused(exc, active=active, replace=replace) from None
        return self.add(new, active=active, replace=replace)

    def refused(
        self, exc: ScenarioError, *, active: bool = True, replace: bool = False
    ) -> ScenarioError:
        """*exc* (scenarios :meth:`add` was to load, with problems), with their clashes too.

        What the broken scenarios claim (names, skill ids, routes) is checked
        against the loaded ones as :meth:`add` would check it, so that one
        answer has every problem. Nothing changes.
        """
        return with_clashes(exc, self._loaded, active=active, replace=replace)

    def remove(self, name: str) -> LoadedScenario:
        """Unload scenario *name* (served or not); return it as it was."""

        with self._changes:
            return self._commit(lambda: changes.removed(self._loaded, name))

    def activate(self, name: str) -> LoadedScenario:
        """Serve scenario *name* from the next request on, its sequences and outage restarted.

        Refused (:class:`Conflict`) when an active scenario serves one of its
        skill ids or routes. An active scenario is left as it is.
        """

        with self._changes:
            return self._commit(lambda: changes.activated(self._loaded, name))

    def deactivate(self, name: str) -> LoadedScenario:
        """Stop serving scenario *name* from the next request on; it stays loaded."""

        with self._changes:
            return self._commit(lambda: changes.deactivated(self._loaded, name))

    def reload(self, paths: Iterable[str | Path]) -> ReloadResult:
        """Load the scenarios in *paths* instead of the ones the files gave (see Server.reload).

        A scenario equal to the one loaded under its name is kept as it was
        (positions, outage window, active or not). A changed one is replaced,
        keeping whether it was active; a new one is active. Scenarios
        :meth:`add` loaded at run time are kept, so a file must not take
        their names, nor serve their skill ids or routes while they are
        active. On problems nothing changes and the result says
        ``failed``. The result is kept as :attr:`last_reload`
        (``/__admin/health`` shows it).
        """
        paths = list(paths)

        with self._changes:
            self._unsent = None
            try:
                files = load_paths(paths, max_delay_ms=self.max_delay_ms)
                result = self._commit(lambda: changes.reloaded(self._loaded, files), files=True)
            except InvalidScenarios as exc:
                result = ReloadResult.failed(self._with_file_clashes(exc).problems)
            except ScenarioError as exc:
                result = ReloadResult.failed(exc.problems)
            except StoreUnavailable as exc:  # (a shared set's: only a shared store fails)
                from .sharing import unavailable_problem

                result = ReloadResult.failed([unavailable_problem(exc)])
                self._unsent = paths  # read again once the set can be reached (catch_up)
            self.last_reload = result
            return result

    def watch(
        self,
        paths: Iterable[str | Path],
        *,
        interval: float = DEFAULT_INTERVAL,
        on_reload: Callable[[ReloadResult], object] | None = None,
    ) -> Watcher:
        """:meth:`reload` *paths* whenever a file in them changes, until :meth:`stop_watching`.

        A watcher started before is stopped first. *on_reload* is called with each
        result, on the watcher's thread. From now on the health answer shows
        ``reload`` (``none`` until the first change).
        """
        self.stop_watching()
        paths = list(paths)

        def changed() -> None:
            result = self.reload(paths)
            if on_reload is not None:
                on_reload(result)

        with self._changes:
            if self.last_reload is None:
                self.last_reload = ReloadResult("none")
        watcher = self._watcher = Watcher(paths, changed, interval=interval).start()
        return watcher

    def stop_watching(self) -> None:
        """Stop the watcher :meth:`watch` started, if any (a reload under way finishes)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    def reset(self, session: str | None = None) -> None:
        """Forget positions, draws and journal (all, or *session*'s), on every replica sharing.

        An empty *session* (an unset variable's) is a ValueError, not everything.
        """
        if session is not None and not session.strip():
            raise ValueError(f"reset: {session!r} names no session; reset() resets them all")
        self.engine.state.reset(session)
        if self._shared is not None:
            try:
                self._shared.announce_reset(session)
            except StoreUnavailable as exc:
                message = f"{exc}; this replica was reset, the others were not told"
                raise StoreUnavailable(message) from exc

    # -- sharing with other replicas (mockskill/store/scenarios.py) -----------

    @property
    def shared(self) -> SharedSet | None:
        """The shared scenario set this registry serves, if any."""
        return self._shared

    @property
    def version(self) -> int:
        """The version of the shared set served (0: none, or not shared)."""
        return self._version

    def share(self, shared: SharedSet, *, publish: bool = True) -> None:
        """Serve the scenario set *shared* keeps, and write every change there from now on.

        With nothing stored yet, the scenarios loaded now are published as the
        first version. With a set stored, it is served instead when it came
        from the same files (equal digests: nothing is written) or when not
        *publish* (a replica started without scenario files joins); else the
        loaded scenarios are published as the next version: the files a
        replica is started with are the deployment's truth. Raises
        StoreUnavailable when the set cannot be reached, ScenarioError when a
        loaded scenario cannot be shared (built in Python, with no text).
        """
        from ..store.shared_set import files_digest
        from .sharing import record_of

        with self._changes:
            mine = tuple(record_of(e) for e in self._loaded)
            digest = files_digest(mine)
            while True:
                stored = shared.read()
                if stored is not None and (not publish or stored.files == digest):
                    self._shared = shared
                    self._adopt(stored)
                    return
                # Over another set (a new deployment's files), sequences start afresh.
                served = [e.scenario for e in self._loaded if e.active]
                restart = sequence_keys(served) if stored is not None else set()
                # The publisher starts the outage windows of the set it publishes, in
                # the same step (the engine did not: a replica joining must not move them).
                outages = [s.name for s in served if s.outage]
                version = shared.write(
                    0 if stored is None else stored.version,
                    mine,
                    digest,
                    restart=restart,
                    activate=outages,
                )
                if version is not None:
                    self._shared = shared
                    self._version, self._records, self._files = version, mine, digest
                    if restart and shared.restarts:  # serve on the new generations
                        self._swap(self._loaded, [], activate=False)
                    return

    def share_at(self, url: str, *, joins: bool) -> None:
        """Serve the scenario set shared on the Redis at *url* (docs/admin.md), as :meth:`share`.

        *joins*: started without scenarios of its own, the server serves the
        stored set rather than publishing what it loaded (published only when
        nothing is stored). Raises :class:`CannotShare` for a bad URL, or when
        Redis cannot be reached there. The other replicas' changes are heard
        from :meth:`start_sharing` on.
        """
        from ..store.redis import RedisStore
        from ..store.scenarios import SharedScenarios
        from ..store.url import BadStoreURL

        state = self.engine.state
        # The state on the same Redis: a version restarts its sequences there in the same
        # step (else a replica hearing of it first could build on the old generations).
        same = isinstance(state, RedisStore) and state.url == url
        keys = (state.keys.gen, state.keys.act) if isinstance(state, RedisStore) else None
        try:
            shared = SharedScenarios(url, state_keys=keys if same else None)
        except BadStoreURL as exc:
            raise CannotShare(str(exc).replace("--state", "shared_scenarios", 1)) from None
        try:
            self.share(shared, publish=not joins)
        except StoreUnavailable as exc:
            shared.stop()
            raise CannotShare(
                f'{exc}: is Redis running there? (shared_scenarios="memory" serves alone)'
            ) from None
        except BaseException:
            shared.stop()
            raise

    def start_sharing(self) -> None:
        """Hear the other replicas' versions and resets, from a thread, until :meth:`stop_sharing`
        (nothing when not shared). It catches up at once: what changed since :meth:`share` too."""
        if self._shared is not None:
            self._shared.start(self.catch_up, self.reset_here)

    def stop_sharing(self) -> None:
        """Stop hearing the other replicas, and let go of the shared set's Redis."""
        if self._shared is not None:
            self._shared.stop()

    def catch_up(self) -> bool:
        """Serve the newest stored version if it is not the one served; True if it was not.

        Called by the shared set's listener on every announcement and poll.
        Raises StoreUnavailable when the set cannot be reached.
        """
        shared = self._shared
        if shared is None:
            return False
        same = shared.version() == self._version  # the poll's one round trip
        unsent = self._unsent
        if unsent is not None:  # a reload Redis missed: its files, read again now
            self.reload(unsent)
            return True
        if same:
            return False
        with self._changes:
            return self._catch_up()

    def reset_here(self, session: str | None) -> None:
        """Another replica reset *session* (None: everything): forget what this process keeps.

        A shared state was reset by that replica already; a state of this
        process's own is reset here.
        """
        if self.engine.state.replica is None:
            self.engine.state.reset(session)

    # -- inside ---------------------------------------------------------------

    def _commit(self, plan: Callable[[], PlannedChange[T]], *, files: bool = False) -> T:
        """Apply the change *plan* computes from the loaded scenarios; return what it says.

        Shared, the change is planned on the newest stored version, checked
        whole, then written as the next version; if another replica wrote one
        first, that one is served and the change planned (checked) again on it.
        *files*: the change loads the scenario files (their digest is noted).
        Hold the lock.
        """
        shared = self._shared
        while True:
            try:
                if shared is not None:
                    self._catch_up()
                loaded, restart, result = plan()
                if shared is None or self._published(shared, loaded, restart, files=files):
                    break
            except StoreUnavailable as exc:
                raise StoreUnavailable(
                    f"{exc}; nothing was changed, this replica serves its last good scenarios"
                ) from exc
        if shared is not None and shared.restarts:  # restarted with the version, in one step
            self._swap(loaded, [], activate=False)
        else:
            self._swap(loaded, restart)
        return result

    def _published(
        self,
        shared: SharedSet,
        loaded: tuple[LoadedScenario, ...],
        restart: Sequence[Scenario],
        *,
        files: bool,
    ) -> bool:
        """Write *loaded* as the next version; False if another replica wrote one first."""
        from ..store.shared_set import files_digest
        from .sharing import record_of

        # What only the engine checks, before any other replica is told to serve it.
        served = ScenarioSet(tuple(e.scenario for e in loaded if e.active))
        check_playable(served, raw_socket=self.engine.raw_socket)
        records = tuple(record_of(e) for e in loaded)
        digest = files_digest(records) if files else self._files
        if records == self._records and digest == self._files:
            return True  # nothing to write: another replica wrote this very set
        # As Engine.load would start them: the outage windows of scenarios newly served.
        before = self.engine.scenarios.scenarios
        starting = [
            s.name for s in served.scenarios if s.outage and not any(s is old for old in before)
        ]
        version = shared.write(
            self._version,
            records,
            digest,
            restart=sequence_keys(restart),
            activate=starting,
        )
        if version is None:
            return False
        self._version, self._records, self._files = version, records, digest
        return True

    def _catch_up(self) -> bool:
        """Serve the stored version if it is not the one served (hold the lock)."""
        assert self._shared is not None
        stored = self._shared.read()
        if stored is None:
            # Nothing stored (Redis restarted empty, or flushed): what is served is the set.
            version = self._shared.write(0, self._records, self._files)
            if version is not None:
                self._version = version
                return False
            stored = self._shared.read()
            if stored is None:
                return False
        if stored.version == self._version and stored.records == self._records:
            return False
        self._adopt(stored)
        return True

    def _adopt(self, stored: Stored) -> None:
        """Serve *stored*, another replica's version (hold the lock).

        Its records are read again with the loader; a scenario whose record
        did not change stays the very object. If this replica cannot read or
        play it, the last good set stays served and the problem is logged.
        """
        from .sharing import changed_scenarios, entries_of

        try:
            loaded = entries_of(stored.records, self._loaded, max_delay_ms=self.max_delay_ms)
            # The writer restarted what it changed in its state: shared, that is everyone's;
            # a state of this process's own restarts them here.
            local = self.engine.state.replica is None
            restart = changed_scenarios(self._loaded, loaded) if local else []
            self._swap(loaded, restart, activate=local)  # so are outage windows
        except ScenarioError as exc:
            log.error(
                "shared scenario set version %d cannot be served here; serving the last good"
                " set:\n%s",
                stored.version,
                exc,
            )
        self._version, self._records, self._files = stored.version, stored.records, stored.files

    def _with_file_clashes(self, exc: InvalidScenarios) -> InvalidScenarios:
        """Files that failed to load, with their clashes with run-time scenarios (hold the lock)."""
        return with_clashes(exc, [e for e in self._loaded if e.added], active=True, replace=False)

    def _swap(
        self,
        loaded: tuple[LoadedScenario, ...],
        restart: Sequence[Scenario],
        *,
        activate: bool = True,
    ) -> None:
        """Serve the active ones of *loaded*, *restart*'s sequences afresh (hold the lock).

        The engine checks first and raises ScenarioError if it cannot play
        them; then nothing changed.
        """
        served = ScenarioSet(tuple(e.scenario for e in loaded if e.active))
        # The engine restarts them as it swaps tables: afterwards would let a
        # request matched on the old table take position 0 of the new sequences.
        self.engine.load(served, restart=sequence_keys(restart), activate=activate)
        self._loaded = loaded
        if self.on_swap is not None:
            self.on_swap()
