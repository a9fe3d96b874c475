"""The registry's side of a shared scenario set: loaded scenarios to records and back.

A replica that shares its scenarios (:mod:`mockskill.store.scenarios`) keeps
each loaded scenario in the shared set as a
:class:`~mockskill.store.shared_set.Record` — the text it was read from, its
origin name, where it starts, how it is served — and serves a version
another replica wrote by reading each record's text again with the same
loader (:func:`entries_of`). A scenario whose record did not change is kept
as the very object it was (the engine keeps its outage window, and the
registry's reload sees it unchanged); only new or changed ones are read.

Nothing here talks to Redis: :mod:`mockskill.store.shared_set` is plain data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from ..engine.store import StoreUnavailable
from ..scenario.loader import load_text
from ..scenario.model import Scenario, ScenarioSet
from ..scenario.problems import Problem, ScenarioError
from .loaded import LoadedScenario

if TYPE_CHECKING:  # (imported where a record is made: sharing only, not at start-up)
    from ..store.shared_set import Record, Stored


class SharedSet(Protocol):
    """What the registry asks of a shared scenario set (:mod:`mockskill.store.scenarios`).

    Each raises :class:`~mockskill.engine.store.StoreUnavailable` when the set cannot be reached.
    """

    def version(self) -> int:
        """The stored version (0: none)."""
        ...

    def read(self) -> Stored | None:
        """The stored version and its records (None: none)."""
        ...

    restarts: bool
    """Whether :meth:`write` restarts sequences and outage windows in the shared state."""

    def write(
        self,
        read: int,
        records: Sequence[Record],
        files: str,
        *,
        restart: Iterable[str] = (),
        activate: Iterable[str] = (),
    ) -> int | None:
        """Store *records* as the version after *read*; the new version, or None if stale.

        With :attr:`restarts`, sequences *restart* and the outage windows of
        scenarios *activate* start afresh in the same atomic step.
        """
        ...

    def announce_reset(self, session: str | None) -> None:
        """Tell the other replicas that everything (or *session*) was reset."""
        ...

    def start(
        self, on_change: Callable[[], object], on_reset: Callable[[str | None], object]
    ) -> None:
        """Hear new versions (*on_change*) and resets (*on_reset*) from a thread, until
        :meth:`stop`."""
        ...

    def stop(self) -> None:
        """Stop hearing them, and let go of the connection."""
        ...


def unavailable_problem(exc: StoreUnavailable) -> Problem:
    """A reload that could not reach the shared set, as the problem its result shows."""
    return Problem(
        "<shared scenario set>",
        1,
        1,
        "(shared set)",
        "a shared scenario set that can be reached",
        str(exc),
        "nothing was changed: the last good scenarios are served; the files are read again"
        " once it can be reached",
    )


def record_of(entry: LoadedScenario) -> Record:
    """*entry* as the shared set keeps it; ScenarioError if it has no text to share."""
    from ..store.shared_set import Record

    scenario = entry.scenario
    if not scenario.text:
        where = scenario.where
        raise ScenarioError(
            [
                Problem(
                    where.file,
                    where.line,
                    where.column,
                    "(shared set)",
                    "a scenario read from YAML or JSON (a shared set keeps the text it was read"
                    " from, for every replica to read)",
                    f"scenario {scenario.name!r} built in Python, with no text",
                    "give the scenario as YAML text, a dict or a path",
                )
            ]
        )
    return Record(
        scenario.name,
        scenario.file,
        scenario.text,
        scenario.where.line,
        scenario.where.column,
        entry.active,
        entry.loaded,
        entry.activated,
        entry.added,
    )


def entries_of(
    records: Sequence[Record], current: Sequence[LoadedScenario], *, max_delay_ms: int
) -> tuple[LoadedScenario, ...]:
    """The loaded scenarios a stored version holds, reusing *current*'s where nothing changed.

    Raises ScenarioError if a record's text does not read here as it did where
    it was written (another mockskill version, a smaller *max_delay_ms*).
    """
    by_name = {e.name: (record_of_or_none(e), e) for e in current}
    read: dict[tuple[str, str], ScenarioSet] = {}  # a text with several scenarios is read once
    entries: list[LoadedScenario] = []
    for record in records:
        old_record, old = by_name.get(record.name, (None, None))
        if old is not None and old_record == record:
            entries.append(old)  # the very object
            continue
        if old is not None and old_record is not None and old_record.source() == record.source():
            scenario = old.scenario  # served otherwise (active, times), read the same
        else:
            scenario = _read(record, read, max_delay_ms)
        entries.append(
            LoadedScenario(scenario, record.active, record.loaded, record.activated, record.added)
        )
    return tuple(entries)


def record_of_or_none(entry: LoadedScenario) -> Record | None:
    """*entry*'s record, or None for a scenario with no text (never shared, so never equal)."""
    return record_of(entry) if entry.scenario.text else None


def changed_scenarios(
    before: Sequence[LoadedScenario], after: Sequence[LoadedScenario]
) -> list[Scenario]:
    """The served scenarios that start or stop being served between *before* and *after*.

    What a replica restarts when it adopts a version while its state is its
    own (the writer restarted them in its own state only): the ones the writer
    restarted, and at most the deactivated ones besides, which are not served.
    """
    served_before = [e.scenario for e in before if e.active]
    served_after = [e.scenario for e in after if e.active]
    new = [s for s in served_after if not any(s is old for old in served_before)]
    gone = [s for s in served_before if not any(s is kept for kept in served_after)]
    return new + gone


def _read(record: Record, read: dict[tuple[str, str], ScenarioSet], max_delay_ms: int) -> Scenario:
    key = (record.origin, record.text)
    scenarios = read.get(key)
    if scenarios is None:
        scenarios = read[key] = load_text(record.text, record.origin, max_delay_ms=max_delay_ms)
    for scenario in scenarios.scenarios:
        if (scenario.where.line, scenario.where.column) == (record.line, record.column):
            # PUT /__admin/scenarios/NAME may have named it otherwise than its text does
            return scenario if scenario.name == record.name else scenario.renamed(record.name)
    where = f"{record.origin}:{record.line}:{record.column}"
    problem = Problem(
        record.origin,
        record.line,
        record.column,
        "(shared set)",
        f"scenario {record.name!r} at {where}",
        "no scenario starts there",
    )
    raise ScenarioError([problem])
