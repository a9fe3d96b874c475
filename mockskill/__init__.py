"""mockskill: a skill provider scripted by YAML scenarios.

Consumers of the skill protocol point at it to meet every failure the
protocol's error chapter defines, on demand. See the README for the tour.
"""

from __future__ import annotations

from ._version import __version__
from .app import create_app
from .scenario.loader import bundled_path, load_data, load_paths, load_text
from .scenario.model import ScenarioSet
from .scenario.problems import Problem, ScenarioError
from .server import Server, ServerError

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
