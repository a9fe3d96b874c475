"""What each change does to the loaded scenarios, planned before anything is applied.

A change of the :class:`~.registry.Registry` — add, remove, activate,
deactivate, reload — is planned here from the loaded scenarios it starts
from, as a function of them alone: it checks the rules of the registry
(docs/admin.md; the clashes are :mod:`.clashes`') and returns what it
:data:`PlannedChange` — the loaded scenarios after it, those whose sequences
restart, and what the change answers — or raises, and nothing changes. The
registry applies a plan: under its lock, on the newest shared version, by
handing the engine the active ones.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TypeVar

from ..scenario.model import Scenario, ScenarioSet
from ..scenario.problems import Problem
from .clashes import Conflict, check_names_free, check_served_once, name_clash
from .loaded import LoadedScenario, UnknownScenario
from .watch import ReloadResult

T = TypeVar("T")
PlannedChange = tuple[tuple[LoadedScenario, ...], Sequence[Scenario], T]
"""What a change plans: the loaded scenarios after it, those to restart, what it answers."""


def find(current: tuple[LoadedScenario, ...], name: str) -> LoadedScenario:
    """The loaded scenario *name*; raises :class:`UnknownScenario` (a KeyError)."""
    for entry in current:
        if entry.name == name:
            return entry
    raise UnknownScenario(name, [e.name for e in current])


def added(
    current: tuple[LoadedScenario, ...],
    scenarios: ScenarioSet,
    *,
    active: bool,
    replace: bool,
) -> PlannedChange[tuple[LoadedScenario, ...]]:
    """*scenarios* loaded (active, or not) beside *current*; they answer, as loaded.

    A name already loaded is refused (:class:`Conflict`) unless *replace*:
    then the new scenario takes the old one's place. Active ones must not
    serve a skill id or route another active scenario serves.
    """
    now = time.time()
    names = {e.name: e for e in current}
    problems: list[Problem] = []
    reasons: list[str] = []
    incoming: dict[str, LoadedScenario] = {}
    for scenario in scenarios.scenarios:
        old = names.get(scenario.name)
        if scenario.name in incoming or (old is not None and not replace):
            name_clash(scenario.name, scenario.where, old, problems, reasons)
        incoming[scenario.name] = LoadedScenario(
            scenario, active, now, now if active else None, added=True
        )
    if problems:
        raise Conflict(problems, reasons)
    loaded = tuple(incoming.get(e.name, e) for e in current) + tuple(
        e for name, e in incoming.items() if name not in names
    )
    replaced = [names[n] for n in incoming if n in names]
    if active:
        others = [e.scenario for e in loaded if e.active and e.name not in incoming]
        check_served_once(list(scenarios.scenarios), others)
    restart = list(scenarios.scenarios) if active else []
    restart += [e.scenario for e in replaced if e.active]
    return loaded, restart, tuple(incoming.values())


def removed(current: tuple[LoadedScenario, ...], name: str) -> PlannedChange[LoadedScenario]:
    """Scenario *name* unloaded (served or not); it answers, as it was."""
    entry = find(current, name)
    loaded = tuple(e for e in current if e is not entry)
    # Positions of a served one restart, so that loading it again starts afresh.
    return loaded, [entry.scenario] if entry.active else [], entry


def activated(current: tuple[LoadedScenario, ...], name: str) -> PlannedChange[LoadedScenario]:
    """Scenario *name* served, its sequences restarted; an active one is left as it is.

    Refused (:class:`Conflict`) when an active scenario serves one of its
    skill ids or routes.
    """
    entry = find(current, name)
    if entry.active:
        return current, [], entry
    others = [e.scenario for e in current if e.active]
    check_served_once([entry.scenario], others)
    new = dataclasses.replace(entry, active=True, activated=time.time())
    return _replaced(current, entry, new), [entry.scenario], new


def deactivated(current: tuple[LoadedScenario, ...], name: str) -> PlannedChange[LoadedScenario]:
    """Scenario *name* no longer served; it stays loaded."""
    entry = find(current, name)
    if not entry.active:
        return current, [], entry
    new = dataclasses.replace(entry, active=False, activated=None)
    return _replaced(current, entry, new), [], new


def reloaded(
    current: tuple[LoadedScenario, ...], files: ScenarioSet
) -> PlannedChange[ReloadResult]:
    """The scenarios the files gave replaced by *files* (see :meth:`.Registry.reload`).

    A scenario equal to the one loaded under its name is kept as it was
    (the very object); a changed one is replaced, keeping whether it was
    active; a new one is active; scenarios added at run time are kept, and
    a file must not take their names, nor serve what they serve while active.
    """
    now = time.time()
    at_run_time = [e for e in current if e.added]
    check_names_free(files, at_run_time)
    old = {e.name: e for e in current if not e.added}
    loaded = []
    for scenario in files.scenarios:
        before = old.get(scenario.name)
        if before is not None and before.scenario == scenario:
            loaded.append(before)  # the very object: the engine keeps its window
        else:
            active = before.active if before is not None else True
            loaded.append(LoadedScenario(scenario, active, now, now if active else None))
    changed = [e for e in loaded if old.get(e.name) is not e]
    names = {e.name for e in loaded}
    gone = [e for e in old.values() if e.name not in names]
    # Only what was or will be served: an inactive scenario may share
    # skill ids (so sequence keys) with a served one.
    restarted = [e.scenario for e in changed + gone if e.active]
    restarted += [old[e.name].scenario for e in changed if e.name in old and old[e.name].active]
    check_served_once(
        [e.scenario for e in loaded if e.active],
        [e.scenario for e in at_run_time if e.active],
    )
    result = ReloadResult(
        "ok",
        now,
        scenarios=tuple(e.name for e in loaded),
        changed=tuple(e.name for e in changed),
        removed=tuple(e.name for e in gone),
        added=tuple(e.name for e in changed if e.name not in old),
    )
    return tuple(loaded + at_run_time), restarted, result


def _replaced(
    current: tuple[LoadedScenario, ...], old: LoadedScenario, new: LoadedScenario
) -> tuple[LoadedScenario, ...]:
    return tuple(new if e is old else e for e in current)
