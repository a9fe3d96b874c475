"""One loaded scenario and how it is served (:class:`LoadedScenario`); a name not loaded.

Its own module so that the registry (:mod:`.registry`), the plans of its
changes (:mod:`.changes`) and its shared-set side (:mod:`.sharing`) all build
it without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        (``<added 2>`` for :meth:`Server.add <mockskill.server.server.Server.add>`,
        ``<request body 3>`` or ``?file=`` for the admin API)."""
        return self.scenario.file


class UnknownScenario(KeyError):
    """No scenario of that name is loaded; says which are, and the nearest names."""

    def __init__(self, name: str, loaded: Sequence[str]) -> None:
        self.name = name
        self.loaded = list(loaded)
        import difflib  # a suggestion for a misspelling: not at start-up

        self.suggestions = difflib.get_close_matches(name, self.loaded, n=3, cutoff=0.6)
        message = f"no scenario named {name!r} is loaded"
        if self.suggestions:
            message += f"; did you mean {self.suggestions[0]!r}?"
        message += f" (loaded: {', '.join(repr(n) for n in self.loaded) or 'none'})"
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message  # KeyError would show the repr of the message
