"""mockskill: a skill provider scripted by YAML scenarios.

Consumers of the skill protocol point at it to meet every failure the
protocol's error chapter defines, on demand. See the README for the tour.
"""

from __future__ import annotations

import typing

from ._version import __version__
from .scenario.loader import bundled_path, load_data, load_paths, load_text
from .scenario.model import ScenarioSet
from .scenario.problems import Problem, ScenarioError
from .server import Server, ServerError

if typing.TYPE_CHECKING:
    from .app import create_app

__all__ = [
    "Problem",
    "ScenarioError",
    "ScenarioSet",
    "Server",
    "ServerError",
    "__version__",
    "bundled_path",
    "create_app",
    "load_data",
    "load_paths",
    "load_text",
]


def __getattr__(name: str) -> object:
    # create_app (the WSGI app, with Flask and Werkzeug) is imported when first asked
    # for: ``import mockskill`` and serving skills load neither (issue 13, start-up).
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module 'mockskill' has no attribute {name!r}")
