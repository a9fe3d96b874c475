"""What a process that only serves keeps out of the cyclic collector's view: its scenario set.

``mockskill serve`` is such a process. Once its scenarios are served, what is alive then —
the modules, the immutable scenario model, the engine's tables — lives as long as that set
does and holds no garbage, yet every full (generation-2) pass of Python's cyclic collector
walks all of it: ~30 000 objects, a pass of tens of milliseconds that holds the loop, and
the heads of the requests that arrive meanwhile (docs/performance.md, issue 31's streams).
So it is frozen (:func:`gc.freeze`, the documented way to leave long-lived objects out of
the collector's passes): a full pass walks what the connections and requests made since.

A frozen object is still freed when nothing refers to it; only garbage in cycles among
frozen objects waits. So before a new set is served the view is given back
(:func:`gc.unfreeze`), what the old set left in cycles is collected, and what is alive then
(the new set) frozen: :meth:`FrozenSet.settle` after every change to the set, which the
registry calls (:attr:`~mockskill.control.registry.Registry.on_swap`). Only the command
line does this: an embedded server (:meth:`Server.start <.server.Server.start>`, the
pytest plugin) shares its process with code that is not mockskill's, whose objects a
freeze would take out of the collector's view too.
"""

from __future__ import annotations

import gc

from ..control.registry import Registry


class FrozenSet:
    """Keeps *registry*'s served set out of the collector's view, from :meth:`start` to
    :meth:`stop` (see the module's docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.settled = 0
        """Times the set was frozen (the start, then once per change)."""

    def start(self) -> None:
        """Freeze what is alive now, and again after every change to the set.

        Not collected first: a start leaves a handful of objects in cycles (6 when
        measured), while a full collection of all that is loaded would add its whole
        pass to the time to the first answer; they wait for the first change."""
        self.registry.on_swap = self.settle
        gc.freeze()
        self.settled += 1

    def settle(self) -> None:
        """Give the collector back what was frozen, collect, and freeze what is alive: the
        set served now (the one before it, in cycles or not, is gone)."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.settled += 1

    def stop(self) -> None:
        """Changes to the set freeze nothing any more; what was frozen is given back."""
        if self.registry.on_swap == self.settle:
            self.registry.on_swap = None
        gc.unfreeze()
