"""The public API: a short sorted ``__all__`` that names everything exported."""

from __future__ import annotations
import __future__

from types import ModuleType

import mockskill

LAZY = {"create_app"}
"""Exported, and imported on first use (the WSGI app, with Werkzeug: tests/test_startup.py)."""


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(mockskill).items()
        if not name.startswith("_")
        and not isinstance(value, (ModuleType, __future__._Feature))  # submodules, annotations
    }
    assert mockskill.__all__ == sorted(mockskill.__all__)
    assert set(mockskill.__all__) == public | LAZY | {"__version__"}


def test_every_name_in_all_exists() -> None:
    for name in mockskill.__all__:
        assert hasattr(mockskill, name), name
