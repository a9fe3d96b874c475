"""One loaded scenario and how it is served (:class:`LoadedScenario`).

Its own module so that the registry (:mod:`.registry`) and its shared-set side
(:mod:`.sharing`) both build it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scenario.model import Scenario


@dataclass(frozen=True)
class LoadedScenario:
    """One loaded scenario and how it is served; replaced whole on every change."""

    scenario: Scenario
    active: bool
    """Whether it is served (an inactive one is kept, listed, and not served)."""
    loaded: float
    """When it was loaded (or last replaced), in seconds since the epoch."""
    activated: float | None
    """When it was last activated (loaded active counts); None while inactive."""
    added: bool = False
    """Whether it was loaded at run time (:meth:`Registry.add`: ``Server.add``, the
    admin API) rather than from the server's scenario files: a reload of the
    files keeps it."""

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def origin(self) -> str:
        """Where it came from: a file's path, or the name given to text
        (``<added 2>`` for :meth:`Server.add <mockskill.server.Server.add>`,
        ``<request body 3>`` or ``?file=`` for the admin API)."""
        return self.scenario.file
