"""The public API: a short sorted ``__all__`` that names everything exported."""

from __future__ import annotations
import __future__

import importlib
from types import ModuleType

import pytest

import mockskill

LAZY = set(mockskill._HOMES)
"""Exported, and imported on first use (``import mockskill`` imports only the version:
tests/test_startup.py)."""


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(mockskill).items()
        if not name.startswith("_")
        and name != "TYPE_CHECKING"  # typing's, for the lazy names' annotations
        and not isinstance(value, (ModuleType, __future__._Feature))  # submodules, annotations
    }
    assert mockskill.__all__ == sorted(mockskill.__all__)
    assert set(mockskill.__all__) == public | LAZY | {"__version__"}


def test_every_name_in_all_exists() -> None:
    for name in mockskill.__all__:
        assert hasattr(mockskill, name), name
    assert set(mockskill.__all__) <= set(dir(mockskill))


@pytest.mark.parametrize("name", sorted(LAZY))
def test_a_lazy_name_is_the_object_of_its_home_module(name: str) -> None:
    home = importlib.import_module(mockskill._HOMES[name], "mockskill")
    assert getattr(mockskill, name) is getattr(home, name)


def test_a_subpackage_is_reached_from_the_package_as_before() -> None:
    assert mockskill.audit is importlib.import_module("mockskill.audit")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Sever'"):
        mockskill.Sever  # noqa: B018
