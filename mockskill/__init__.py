"""mockskill: a skill provider scripted by YAML scenarios.

Consumers of the skill protocol point at it to meet every failure the
protocol's error chapter defines, on demand. See the README for the tour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    from .scenario.loader import bundled_path, load_data, load_paths, load_text
    from .scenario.model import ScenarioSet
    from .scenario.problems import Problem, ScenarioError
    from .server.server import Server, ServerError
    from .wsgi.app import create_app

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

_HOMES = {
    "Problem": ".scenario.problems",
    "ScenarioError": ".scenario.problems",
    "ScenarioSet": ".scenario.model",
    "Server": ".server",
    "ServerError": ".server",
    "bundled_path": ".scenario.loader",
    "create_app": ".wsgi.app",
    "load_data": ".scenario.loader",
    "load_paths": ".scenario.loader",
    "load_text": ".scenario.loader",
}
"""Where each public name lives: imported when first asked for (PEP 562)."""


def __getattr__(name: str) -> object:
    # Each public name is imported on its first use, so that a command (or a test
    # suite) that needs only the server does not load the WSGI app's Flask too.
    import importlib

    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home, __name__), name)
    else:  # ``import mockskill`` then ``mockskill.audit``: the subpackage, as before
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
