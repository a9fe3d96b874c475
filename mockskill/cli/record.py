"""``mockskill record``: a recording proxy in front of a real provider, written on stop.

It serves a proxy to ``--target`` (the scenario-level ``proxy:`` of an
in-memory scenario) with the server's recording on; Ctrl-C or SIGTERM lets
requests in flight finish (``--grace``), then writes the scenario file
(``--out``) and exits 0. A recording that does not make a valid file exits 1
with every problem, and its exchanges are kept beside the file
(``OUT.exchanges.json``), so nothing is lost. An existing ``--out`` is
replaced only with ``--force``, and a relative one stays under the working
directory (a symbolic link to a folder elsewhere is refused): both said
before anything is served (exit 2), and checked again when the file is
written.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..scenario.loader import SCENARIO_NAME
from ..scenario.model import ScenarioSet
from ..server.server import Server, ServerError
from .options import cannot_start


@click.command()
@click.option(
    "--target",
    required=True,
    metavar="URL",
    help="The provider's base URL (http:// or https://): every request is forwarded to it.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=int, default=8080, show_default=True, help="Port (0 picks a free one)."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=Path("recording.yaml"),
    show_default=True,
    help="The scenario file written when the recording stops.",
)
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option("--no-delay", is_flag=True, help="Leave the measured latencies out of the file.")
@click.option(
    "--grace",
    type=float,
    default=5.0,
    show_default=True,
    help="On Ctrl-C / SIGTERM, seconds requests in flight get to finish, then the file is written.",
)
@click.option("--quiet", is_flag=True, help="Do not log each request.")
@click.option(
    "--admin-token",
    envvar="MOCKSKILL_ADMIN_TOKEN",
    default=None,
    metavar="TOKEN",
    help="Required on /__admin (env MOCKSKILL_ADMIN_TOKEN); needed to bind a non-loopback address.",
)
def record(
    target: str,
    host: str,
    port: int,
    out: Path,
    force: bool,
    no_delay: bool,
    grace: float,
    quiet: bool,
    admin_token: str | None,
) -> None:
    """Record a real provider at --target into a scenario file (--out), served back by
    `mockskill serve`: point the consumer at this server instead of the provider.

    Exit code 0 once the file is written; 1 when the recording does not make a
    valid file or cannot be written (its exchanges are kept in OUT.exchanges.json) or
    the port is in use; 2 for a mistyped command line (a target that is not a
    provider's URL, an --out that exists without --force or leads out of the working
    directory).
    """
    from ..admin.recordings import RecordingRefused, check_out, save
    from ..recording import RecordingError, dump

    try:
        check_out(str(out), force=force)
    except RecordingRefused as exc:
        raise click.BadParameter(exc.message.removeprefix("out: "), param_hint="--out") from None
    name = out.stem if SCENARIO_NAME.fullmatch(out.stem) else "recording"
    try:
        server = Server(
            ScenarioSet(), host=host, port=port, quiet=quiet, grace=grace, admin_token=admin_token
        )
        server.bind()
    except ServerError as exc:
        raise SystemExit(cannot_start(click.get_current_context(), exc)) from None
    try:
        server.recording.start(target, str(out), delays=not no_delay, name=name, force=force)
    except RecordingRefused as exc:
        server.stop()
        hint = "--out" if exc.details.get("key") == "out" else "--target"
        raise click.BadParameter(exc.message.removeprefix("out: "), param_hint=hint) from None
    click.echo(f"mockskill {_version()} recording {target}")
    click.echo(f"  serving at {server.url}: point the consumer here instead of the provider")
    click.echo(f"  writing {out} when stopped (Ctrl-C or SIGTERM)")
    server.serve_forever()
    try:
        stopped = server.recording.stop()
    except (RecordingError, RecordingRefused) as exc:
        said = exc.message if isinstance(exc, RecordingRefused) else str(exc)
        click.echo(f"mockskill: {said}", err=True)
        failed = server.recording.failed
        if failed is not None:  # (the file could not be made or written: nothing is lost)
            kept = out.with_name(out.name + ".exchanges.json")
            try:
                # As they came, secrets included: for the user alone.
                save(str(kept), dump(failed.exchanges()), force=True, mode=0o600)
            except (OSError, RecordingRefused) as error:
                why = error.message if isinstance(error, RecordingRefused) else str(error)
                click.echo(f"mockskill: the exchanges could not be kept: {why}", err=True)
            else:
                click.echo(f"mockskill: the exchanges are kept in {kept}", err=True)
        raise SystemExit(1) from None
    written = stopped.written
    summary = f"wrote {out}: {written.count} exchange{'s' if written.count != 1 else ''}"
    if stopped.dropped:
        summary += f" ({stopped.dropped} dropped past the bound)"
    if written.redacted:
        summary += f"; redacted: {', '.join(written.redacted)}"
    if written.echoed:
        summary += f"; secret values echoed in answers replaced {written.echoed} times"
    click.echo(f"mockskill: {summary}", err=True)
    for note in written.notes:  # what the file could not keep as it came: said, not only written
        click.echo(f"mockskill: note: {note}", err=True)


def _version() -> str:
    from .._version import __version__

    return __version__
