"""Watching scenario files: the :class:`Watcher` and what a reload reports.

This module owns noticing that scenario files changed (:class:`Watcher`)
and the record of the last reload (:class:`ReloadResult`, shown by
``/__admin/health``). The registry runs a watcher
(:meth:`~.registry.Registry.watch`) and does the reload itself
(:meth:`~.registry.Registry.reload`); this module never touches a server.

The watcher polls: every *interval* seconds it lists the watched files
(:func:`mockskill.scenario.loader.scenario_files`: files as given, folders searched
for YAML) and compares their ``(path, mtime_ns, size)`` with the last
listing. Polling is portable (no inotify, FSEvents or kqueue to pick
between), needs no ``watchdog`` dependency, and is cheap for the handful of
files a scenario set has: one ``stat`` per file per interval.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..scenario.loader import scenario_files
from ..scenario.problems import Problem

DEFAULT_INTERVAL = 0.5
"""Seconds between two looks at the watched files."""

Snapshot = frozenset[tuple[str, int, int]]


@dataclass(frozen=True)
class ReloadResult:
    """What the last reload did.

    *status* is ``none`` (watching, nothing reloaded yet), ``ok`` (the files
    were loaded and are served) or ``failed`` (they have problems; the last
    good scenarios are still served). *at* is when, in seconds since the
    epoch; *changed* names the scenarios that are new or differ from before
    (their sequence positions restarted), *added* the new ones among them
    (a file or a document that was not there), *removed* those no longer
    served.
    """

    status: Literal["none", "ok", "failed"]
    at: float | None = None
    scenarios: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default=())
    added: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "at": self.at,
            "scenarios": list(self.scenarios),
            "changed": list(self.changed),
            "added": list(self.added),
            "removed": list(self.removed),
            "problems": [p.as_json() for p in self.problems],
        }

    @classmethod
    def failed(cls, problems: Sequence[Problem]) -> ReloadResult:
        return cls("failed", time.time(), problems=tuple(problems))


def snapshot(paths: Iterable[str | Path]) -> Snapshot:
    """What the watched files look like now: ``(path, mtime_ns, size)`` each.

    A path that names nothing (or a file gone between listing and ``stat``)
    is in it as ``(path, -1, -1)``, so that deleting or creating a file is a
    change too.
    """
    paths = list(paths)
    files, problems = scenario_files(paths)
    seen: set[tuple[str, int, int]] = {(p.file, -1, -1) for p in problems}
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            seen.add((str(file), -1, -1))
        else:
            seen.add((str(file), stat.st_mtime_ns, stat.st_size))
    return frozenset(seen)


class Watcher:
    """Call *on_change* whenever the files under *paths* change; polled from a daemon thread.

    The first snapshot is taken by :meth:`start` itself, so an edit made
    right after ``start()`` returns is noticed. :meth:`stop` returns within
    moments (the thread waits on an event, not a sleep). An exception from
    *on_change* is printed and watching goes on.
    """

    def __init__(
        self,
        paths: Iterable[str | Path],
        on_change: Callable[[], object],
        *,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the watch interval must be positive, not {interval}")
        self.paths = tuple(Path(p) for p in paths)
        self.interval = interval
        self._on_change = on_change
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: Snapshot = frozenset()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Watcher:
        if self._thread is not None:
            return self
        self._stopping.clear()
        self._last = snapshot(self.paths)
        self._thread = threading.Thread(target=self._run, name="mockskill:watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; returns once the thread has ended (a reload under way finishes)."""
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def poll(self) -> bool:
        """Look once; call *on_change* (and return True) if the files changed since last time."""
        now = snapshot(self.paths)
        if now == self._last:
            return False
        self._last = now
        self._on_change()
        return True

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                self.poll()
            except Exception:  # keep watching: the next edit may fix it
                traceback.print_exc()
