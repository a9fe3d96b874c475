"""A process that only serves keeps its scenario set out of the cyclic collector's view
(mockskill/server/collector.py): frozen once served, then given back and frozen anew after
each change to the set, so that what the set before it left in cycles is collected; the
command line's server does it, an embedded one does not.

These run in the test worker's own process: each gives the collector everything back.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
from mockskill.control.clashes import Conflict
from mockskill.server.collector import FrozenSet


def frozen_out(obj: object) -> bool:
    """*obj* is out of the collector's view: tracked, yet in none of its generations."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


class Cycle:
    """Garbage only the cyclic collector frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def frozen() -> Iterator[FrozenSet]:
    with Server("name: first\nskills: [{id: one}]\n") as server:
        frozen = FrozenSet(server.registry)
        try:
            yield frozen
        finally:
            frozen.stop()


def test_the_served_set_is_out_of_the_collector_s_view_until_stopped(frozen: FrozenSet) -> None:
    first = frozen.registry.get("first")
    assert not frozen_out(first)
    frozen.start()
    assert frozen_out(first)
    frozen.stop()
    assert not frozen_out(first)
    assert frozen.registry.on_swap is None


def test_a_change_to_the_set_collects_what_was_frozen_and_freezes_the_new_set(
    frozen: FrozenSet,
) -> None:
    junk = Cycle()
    gone = weakref.ref(junk)
    frozen.start()
    del junk
    gc.collect()
    assert gone() is not None  # frozen: a cycle among frozen objects waits
    frozen.registry.load("name: second\nskills: [{id: two}]\n")
    assert gone() is None  # given back, and collected, before the new set is frozen
    assert frozen_out(frozen.registry.get("second"))
    assert frozen.settled == 2


def test_a_set_that_fails_to_load_changes_nothing_and_freezes_nothing_again(
    frozen: FrozenSet,
) -> None:
    frozen.start()
    with pytest.raises(Conflict, match="first"):
        frozen.registry.load("name: first\nskills: [{id: again}]\n")
    assert frozen.settled == 1


def test_mockskill_serve_freezes_its_set_and_an_embedded_server_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[bool] = []

    def serve_forever(self: Server, *, freeze: bool = False) -> None:
        asked.append(freeze)
        self.stop()

    monkeypatch.setattr(Server, "serve_forever", serve_forever)
    result = CliRunner().invoke(cli, ["serve", "--port", "0"], env={})
    assert result.exit_code == 0, result.output
    assert asked == [True]
    with Server("name: embedded\nskills: [{id: one}]\n") as server:
        assert server.registry.on_swap is None
        assert not frozen_out(server.registry.get("embedded"))
