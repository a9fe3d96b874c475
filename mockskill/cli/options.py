"""What the ``mockskill`` commands share: the PATHS argument, ``--max-delay``,
``--admin-token``, loading scenarios or exiting 1 with every problem, and a
server that cannot start said in the command line's terms.

Apart from :mod:`mockskill.cli.main` (the group and the small commands) so that
:mod:`mockskill.cli.serve` can use them too without importing the group.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ..scenario.loader import bundled_path, cannot_read, load_paths
from ..scenario.model import ScenarioSet
from ..scenario.problems import Problem, ScenarioError
from ..scenario.reader import MAX_DELAY_MS
from ..server.listening import PortInUse, ServerError

F = TypeVar("F", bound=Callable[..., Any])

# readable=False: whether a path can be read is the loader's to say, positioned and with
# the fix (mockskill.scenario.path_access), not click's "Invalid value for '[PATHS]...'" (exit 2).
PATH = click.Path(path_type=Path, readable=False)
PATHS = click.argument("paths", nargs=-1, type=PATH)
MAX_DELAY = click.option(
    "--max-delay",
    type=click.IntRange(1),
    default=MAX_DELAY_MS,
    show_default=True,
    metavar="MS",
    envvar="MOCKSKILL_MAX_DELAY",
    show_envvar=True,
    help="Longest wait a step may script (delay, hang, execution); longer ones are refused.",
)


def admin_token(text: str) -> Callable[[F], F]:
    """``--admin-token`` (or MOCKSKILL_ADMIN_TOKEN): what serve asks for, and report sends."""
    return click.option(
        "--admin-token",
        metavar="TOKEN",
        envvar="MOCKSKILL_ADMIN_TOKEN",
        show_envvar=True,
        default=None,
        help=text,
    )


UNREADABLE = 3
"""Exit code when what was to be checked could not be read (docs/cli.md's table)."""


def load_or_exit(
    paths: tuple[Path, ...], max_delay_ms: int, warnings: list[Problem] | None = None
) -> ScenarioSet:
    """The scenarios in *paths* (the bundled ones if none), or every problem and exit 1 (3
    when a path could not be read at all: missing, or closed to this process).

    *warnings*, if given, receives the loader's warnings (``validate`` prints them)."""
    try:
        return load_paths(paths or [bundled_path()], max_delay_ms=max_delay_ms, warnings=warnings)
    except ScenarioError as exc:
        click.echo(str(exc), err=True)
        unread = any(cannot_read(problem) for problem in exc.problems)
        raise SystemExit(UNREADABLE if unread else 1) from None


def cannot_start(ctx: click.Context, error: ServerError) -> str:
    """What a command says when its server cannot start: a port in use names the option
    that gave the port, or its environment variable when that did (the Docker image
    sets ``MOCKSKILL_PORT``), not the Python argument."""
    if isinstance(error, PortInUse):
        option = "--" + error.parameter.replace("_", "-")
        if ctx.get_parameter_source(error.parameter) is ParameterSource.ENVIRONMENT:
            option = f"MOCKSKILL_{error.parameter.upper()}"
        error = error.advised(option)
    return f"mockskill: {error}"
