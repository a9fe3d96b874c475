"""What a :class:`~mockskill.server.Server`'s user does to its scenarios and state, from Python.

:class:`ScenarioControl` holds the Server's methods that load, remove,
activate, reload and watch scenario files, reset the state, and read the
journal and the retry audit. Each delegates to the server's
:class:`~mockskill.admin.registry.Registry` (which the admin API shares) or
store: the work is theirs. They are apart from :mod:`mockskill.server.server`, which
binds and serves, because they never touch a socket; Server inherits them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..admin.registry import LoadedScenario, Registry
from ..admin.watch import DEFAULT_INTERVAL, ReloadResult, Watcher
from ..engine.engine import Engine
from ..engine.state import Entry
from ..engine.store import Store
from ..scenario.loader import Source, load_any
from ..scenario.problems import ScenarioError

if TYPE_CHECKING:
    from .. import audit


class ScenarioControl:
    """The scenario and state methods of :class:`~mockskill.server.Server` (see the module)."""

    # Set by Server.__init__:
    engine: Engine
    state: Store
    registry: Registry
    _max_delay_ms: int
    _added: Iterator[int]
    _watcher: Watcher | None

    @property
    def scenario_names(self) -> list[str]:
        """The names of the scenarios served (the active ones), in order."""
        return [s.name for s in self.engine.scenarios.scenarios]

    @property
    def scenarios(self) -> tuple[LoadedScenario, ...]:
        """Every loaded scenario, active or not, in order: name, origin, active, times."""
        return self.registry.scenarios

    def add(
        self,
        scenarios: Source | Iterable[Source],
        *,
        active: bool = True,
        replace: bool = False,
    ) -> tuple[LoadedScenario, ...]:
        """Serve *scenarios* beside the current ones, from the next request on.

        YAML text, a dict, a path or a ScenarioSet (or a list of them),
        checked whole first: a problem, or a scenario name, skill id or route
        that clashes with one served, raises ScenarioError and changes
        nothing. Requests in flight finish on the scenarios they started on.
        With *replace*, a scenario takes the place of the loaded one of its
        name (its sequences restart); with ``active=False`` it is loaded but
        not served until :meth:`activate`, and may then share skill ids and
        routes with served ones. Returns the scenarios as loaded.
        """
        try:
            new = load_any(
                scenarios, max_delay_ms=self._max_delay_ms, name=f"<added {next(self._added)}>"
            )
        except ScenarioError as exc:  # with the clashes it would have too: all at once
            raise self.registry.refused(exc, active=active, replace=replace) from None
        return self.registry.add(new, active=active, replace=replace)

    def remove(self, name: str) -> None:
        """Stop serving scenario *name* (its skills and routes) from the next request on.

        It is unloaded, served or not; an unknown name raises KeyError
        saying which are loaded, with a did-you-mean.
        """
        self.registry.remove(name)

    def activate(self, name: str) -> LoadedScenario:
        """Serve the loaded scenario *name* from the next request on, from its first steps.

        Its sequences and outage window restart. Raises ScenarioError if an
        active scenario serves one of its skill ids or routes (deactivate
        that one first), KeyError if no scenario of that name is loaded.
        """
        return self.registry.activate(name)

    def deactivate(self, name: str) -> LoadedScenario:
        """Stop serving scenario *name* from the next request on; it stays loaded (KeyError)."""
        return self.registry.deactivate(name)

    def reload(self, paths: Iterable[str | Path]) -> ReloadResult:
        """Serve the scenarios in *paths* instead of the ones served, from the next request on.

        The files are loaded whole first. If they have problems, nothing
        changes: the last good scenarios go on being served, and the
        result (also shown by ``/__admin/health``) has status ``failed``
        and every problem. Otherwise they replace the scenarios the files
        gave before; those loaded at run time (:meth:`add`, the admin API)
        stay, so the files must not take their names, nor serve their
        skill ids or routes while they are active. A scenario equal to
        the one served under its name is kept as it was: its sequence
        positions and outage window go on (and it stays inactive if it
        was deactivated). A new or changed scenario's sequences restart,
        for every session. Requests in flight finish on the scenarios
        they started on.
        """
        return self.registry.reload(paths)

    def watch(
        self,
        paths: Iterable[str | Path],
        *,
        interval: float = DEFAULT_INTERVAL,
        on_reload: Callable[[ReloadResult], object] | None = None,
    ) -> Watcher:
        """Reload *paths* (see :meth:`reload`) whenever a file in them changes, until :meth:`stop`.

        The files are polled every *interval* seconds (mockskill/admin/watch.py).
        *on_reload* is called with each result, on the watcher's thread.
        ``/__admin/health`` shows the last result under ``reload`` (status
        ``none`` until the first change).
        """
        self.stop_watching()
        paths = list(paths)

        def changed() -> None:
            result = self.reload(paths)
            if on_reload is not None:
                on_reload(result)

        self.registry.watched()
        self._watcher = Watcher(paths, changed, interval=interval).start()
        return self._watcher

    def stop_watching(self) -> None:
        """Stop the watcher :meth:`watch` started, if any (a reload under way finishes)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    @property
    def last_reload(self) -> ReloadResult | None:
        """What the last :meth:`reload` did (None: never reloaded, nor watching)."""
        return self.registry.last_reload

    def reset(self, session: str | None = None) -> None:
        """Forget positions, random draws and journal: all of them, or one session's.

        Sharing a scenario set (*shared_scenarios*), every replica forgets it too.
        """
        self.registry.reset(session)

    def journal(self, session: str | None = None) -> list[Entry]:
        """The requests answered, oldest first; all of them, or one session's."""
        return self.state.journal(session)

    def report(
        self, session: str | None = None, policy: audit.Policy | None = None
    ) -> dict[str, Any]:
        """The retry audit and category coverage (docs/audit.md): every session's, or *session*'s.

        The same document as ``GET /__admin/report``; pass it to
        :func:`mockskill.audit.assert_clean` to fail a test on findings.
        """
        from .. import audit  # on first use: start-up does not pay for it

        sessions = None if session is None else [session]
        return audit.report(self.state.journal(), policy or audit.Policy(), sessions=sessions)
