"""What the engine found of a request before its step: :class:`Decided`.

Made by ``Engine._decide`` (the reply, when it needs no step), completed by
the store's answer to the request's :class:`~.store.Take` (:meth:`Decided.took`),
read by the plan and the journal's record.
"""

from __future__ import annotations

import dataclasses

from ..scenario.model import Reply
from . import choosing
from .actions import Urls
from .choosing import Chosen
from .matching import Miss, RoutingTable, Target


@dataclasses.dataclass(slots=True)
class Decided:
    """What :meth:`Engine._decide` found: a reply, or a target whose step is to play."""

    started: float
    session: str
    table: RoutingTable
    target: Target | Miss
    urls: Urls
    reply: Reply | None
    forced: bool
    """Whether ``Mockskill-Error`` chose the reply."""
    chosen: Chosen | None = None
    """The step to play, once the store answered the :class:`~.store.Take` (reply None)."""

    took = choosing.chosen
    """Resumed with what the :class:`~.store.Take` of its request took: the step chosen
    (:func:`~.choosing.chosen`, as a method: one frame per request)."""
