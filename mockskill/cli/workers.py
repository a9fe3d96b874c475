"""``mockskill serve --workers N`` as a command: checks said once, then the supervisor runs.

The supervisor itself (:mod:`mockskill.workers`) knows nothing of click; this
module turns the ``serve`` command's settings into its workers' environment and
its failures into the command's messages.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..server.listening import ServerError, exposed_without_token, is_loopback
from ..workers.supervisor import Supervisor
from .options import cannot_start


def supervise(ctx: click.Context, paths: tuple[Path, ...], count: int) -> int:
    """Run *count* workers of the ``serve`` command of *ctx*; the exit code to leave with.

    Each worker is that ``serve`` with the same settings, given in its
    environment (MOCKSKILL_*: the admin token and the store's password stay
    out of the process list), and the supervisor's own options. What one
    check can say for all (the scenarios, an exposed admin surface, the
    port) is checked here, once.
    """
    params = ctx.params
    host, token = params["host"], params["admin_token"]
    if not is_loopback(host) and token is None:
        if not params["insecure_admin"]:
            raise SystemExit(f"mockskill: {exposed_without_token(host)}")
        click.echo(
            f"mockskill: WARNING: --insecure-admin: /__admin on {host} takes no token;"
            " anyone who can reach this port can reset or reconfigure the server."
            " Pass --admin-token TOKEN to protect it.",
            err=True,
        )
    environment = dict(os.environ)
    environment.pop("MOCKSKILL_SCENARIOS", None)  # the paths are arguments
    for param in ctx.command.params:
        if not isinstance(param.envvar, str) or param.name in (None, "paths"):
            continue
        value = 1 if param.name == "workers" else params.get(param.name)
        if value is None or value == ():
            environment.pop(param.envvar, None)
        elif isinstance(value, tuple):  # a repeatable option: its variable takes them spaced
            environment[param.envvar] = " ".join(map(str, value))
        elif isinstance(value, bool):
            environment[param.envvar] = "1" if value else "0"
        else:
            environment[param.envvar] = str(value)
    supervisor = Supervisor(
        count=count,
        host=host,
        port=params["port"],
        arguments=[str(p) for p in paths],
        environment=environment,
        echo=lambda line: click.echo(line, err=True),
        announce=click.echo,
        worker_socket=params["worker_socket"],
    )
    try:
        supervisor.bind()
    except ServerError as exc:
        raise SystemExit(cannot_start(ctx, exc)) from None
    code = supervisor.run()
    if code == 0:
        click.echo("mockskill stopped.", err=True)
    return code
