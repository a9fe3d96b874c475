"""Scenario states (WireMock's scenario states): the names a step moves a session into
(``set_state:``) and a case requires (``state:``), read and checked at load.

A state belongs to one scenario and one session: each scenario is its own
state machine, every session starts in :data:`~.model.INITIAL_STATE`. The
names a document's steps set and its cases require are collected on its
:class:`~.reader.Reader` as they are read; :func:`check` then refuses a
required state that no step of the scenario sets (it could never hold),
with a did-you-mean for a near name. Where the state lives while serving is
the store's (``mockskill.engine.store``'s ``ReadState``/``SetState``).
"""

from __future__ import annotations

from typing import Any

from .model import INITIAL_STATE
from .problems import Path, describe, did_you_mean
from .reader import Reader

MAX_STATE_NAME = 100
"""The longest state name: it is a key in the store, per session."""


def read_name(r: Reader, value: Any, path: Path) -> str | None:
    """A state's name at *path*: a non-empty line of text (None, with a problem, if not)."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_STATE_NAME
        or not value.isprintable()
    ):
        r.bad(
            path,
            f"a state's name (printable text, 1 to {MAX_STATE_NAME} characters)",
            describe(value),
        )
        return None
    return value


def setting(r: Reader, raw: dict[str, Any], path: Path) -> str | None:
    """A step's ``set_state`` (None: none, or wrong and reported), noted on *r*."""
    if "set_state" not in raw:
        return None
    name = read_name(r, raw["set_state"], (*path, "set_state"))
    if name is not None:
        r.states_set.add(name)
    return name


def requiring(r: Reader, raw: dict[str, Any], path: Path) -> str | None:
    """A case's ``state`` (None: none, or wrong and reported), noted on *r* for :func:`check`."""
    if "state" not in raw:
        return None
    where = (*path, "state")
    name = read_name(r, raw["state"], where)
    if name is not None:
        r.states_required.append((where, name))
    return name


def check(r: Reader) -> None:
    """Refuse each state a case of *r*'s scenario requires that none of its steps sets
    (the initial state aside): no session could ever be in it."""
    reachable = r.states_set | {INITIAL_STATE}
    for where, name in r.states_required:
        if name not in reachable:
            hint = did_you_mean(name, sorted(reachable))
            if not hint:
                known = ", ".join(sorted(r.states_set)) or "none"
                hint = (
                    f"the states its steps set (set_state:): {known}; {INITIAL_STATE} is the first"
                )
            r.bad(
                where,
                f"a state a step of this scenario sets (set_state: {name})",
                f"{name!r}, which no step sets",
                hint,
            )
