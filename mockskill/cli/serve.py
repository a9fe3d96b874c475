"""``mockskill serve``: the scenarios on a port, until SIGTERM or Ctrl-C.

Every serve setting is an option that can come from the environment too
(``MOCKSKILL_*``); the command checks the combinations (``--watch`` needs
PATHS, ``--tls-cert`` its key, ``--workers`` a shared ``--state``), builds a
:class:`~mockskill.server.server.Server`, prints the banner and serves on this
thread, or supervises ``--workers`` processes (:mod:`mockskill.workers.supervisor`),
each of which runs this command again. Apart from :mod:`mockskill.cli.main`
because it is most of the command line, and the only command that serves.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..engine.builtin_answers import DEFAULT_MAX_BODY
from ..engine.callback_hosts import host_problem
from ..engine.entries import DEFAULT_BODY_LIMIT
from ..engine.state import DEFAULT_JOURNAL_BYTES, DEFAULT_JOURNAL_SIZE
from ..engine.task_skills import DEFAULT_MAX_TASKS
from ..server.listening import ServerError, is_loopback
from ..server.server import DEFAULT_KEEP_ALIVE, Server
from ..store.url import MEMORY, BadStoreURL, checked, is_shared
from ..transport import DEFAULT_GRACE
from .banner import banner, report_reload
from .options import MAX_DELAY, PATH, admin_token, cannot_start, load_or_exit

WORKER_SOCKETS = ("auto", "reuseport", "inherit")
"""How ``--workers`` share the port (``--worker-socket``): see :mod:`mockskill.workers.supervisor`,
which is imported only by a supervisor (``--workers N``, N > 1) and by its workers."""


def _callback_hosts(
    ctx: click.Context, param: click.Parameter, given: tuple[str, ...]
) -> tuple[str, ...]:
    """``--callback-allow``'s hosts, each value split at commas and spaces (the variable
    MOCKSKILL_CALLBACK_ALLOW lists them with commas; ``--workers`` hands them on spaced);
    a value that is no host is a usage error naming it."""
    hosts = tuple(host for value in given for host in value.replace(",", " ").split())
    for host in hosts:
        problem = host_problem(host)
        if problem is not None:
            raise click.BadParameter(problem, ctx=ctx, param=param)
    return hosts


@click.command()
# Every serve setting can come from the environment too (MOCKSKILL_*), so that
# a container is configured the way containers are: the Docker image sets
# some of them (docs/docker.md). A command-line value wins over the variable.
@click.argument(
    "paths",
    nargs=-1,
    type=PATH,
    envvar="MOCKSKILL_SCENARIOS",  # several joined with ':' (os.pathsep)
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="MOCKSKILL_HOST",
    show_envvar=True,
    help="Address to bind.",
)
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="MOCKSKILL_PORT",
    show_envvar=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    envvar="MOCKSKILL_SEED",
    show_envvar=True,
    help="Seed for random outcomes (printed at start when not given).",
)
@MAX_DELAY
@click.option(
    "--quiet",
    is_flag=True,
    envvar="MOCKSKILL_QUIET",
    show_envvar=True,
    help="Do not log each request.",
)
@admin_token(
    "Ask every /__admin request for this token (Authorization: Bearer TOKEN);"
    " needed to bind an address other than loopback."
)
@click.option(
    "--insecure-admin",
    is_flag=True,
    envvar="MOCKSKILL_INSECURE_ADMIN",
    show_envvar=True,
    help="Allow a non-loopback --host without an admin token (anyone can use /__admin).",
)
@click.option(
    "--max-body",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BODY,
    show_default=True,
    metavar="BYTES",
    envvar="MOCKSKILL_MAX_BODY",
    show_envvar=True,
    help="Refuse request bodies longer than this with 413.",
)
@click.option(
    "--cors",
    is_flag=True,
    envvar="MOCKSKILL_CORS",
    show_envvar=True,
    help="Send CORS headers and answer preflight requests; pages of any origin may then"
    " use /__admin too (without it, a request from another origin is refused).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    envvar="MOCKSKILL_CORS_ORIGINS",  # several joined with spaces
    show_envvar=True,
    help="Send CORS headers to pages of this origin only (SCHEME://HOST[:PORT], repeatable),"
    " and let them use /__admin; --cors lets in any origin.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    envvar="MOCKSKILL_ALLOW_HOSTS",  # several joined with spaces
    show_envvar=True,
    help="On a loopback --host, /__admin answers requests addressed to loopback names"
    " (localhost, 127.0.0.1, [::1]) and to this one too (repeatable; * for any), against"
    " DNS rebinding.",
)
@click.option(
    "--journal-size",
    type=click.IntRange(1),
    default=DEFAULT_JOURNAL_SIZE,
    show_default=True,
    metavar="N",
    envvar="MOCKSKILL_JOURNAL_SIZE",
    show_envvar=True,
    help="Keep the newest N requests in the journal (GET /__admin/journal).",
)
@click.option(
    "--journal-bodies",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    envvar="MOCKSKILL_JOURNAL_BODIES",
    show_envvar=True,
    help="Keep each request's target, headers and body in the journal (credentials"
    " masked); off keeps the body's digest alone.",
)
@click.option(
    "--journal-body-limit",
    type=click.IntRange(0),
    default=DEFAULT_BODY_LIMIT,
    show_default=True,
    metavar="BYTES",
    envvar="MOCKSKILL_JOURNAL_BODY_LIMIT",
    show_envvar=True,
    help="Keep at most this many bytes of a request body in its journal entry (the rest"
    " is cut; body_size says how many were sent).",
)
@click.option(
    "--journal-bytes",
    type=click.IntRange(1),
    default=DEFAULT_JOURNAL_BYTES,
    show_default=True,
    metavar="BYTES",
    envvar="MOCKSKILL_JOURNAL_BYTES",
    show_envvar=True,
    help="Keep at most this many bytes of request bodies in the in-memory journal; past"
    " it the oldest entries go first.",
)
@click.option(
    "--max-tasks",
    type=click.IntRange(1),
    default=DEFAULT_MAX_TASKS,
    show_default=True,
    metavar="N",
    envvar="MOCKSKILL_MAX_TASKS",
    show_envvar=True,
    help="Hold at most N live long-running tasks (docs/tasks.md); a task skill's invoke"
    " over it gets 503 ENDPOINT_UNREACHABLE with retry advice.",
)
@click.option(
    "--callback-allow",
    "callback_allow",
    multiple=True,
    metavar="HOST",
    callback=_callback_hosts,
    envvar="MOCKSKILL_CALLBACK_ALLOW",  # several joined with commas (or spaces)
    show_envvar=True,
    help="Let task callbacks go to HOST too (a name or address, compared as written: no"
    " DNS lookup; repeatable); by default they go to loopback hosts only (127.0.0.0/8,"
    " ::1, localhost), and an invoke naming another is refused 422.",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="NAME",
    envvar="MOCKSKILL_REDACT",  # several joined with spaces
    show_envvar=True,
    help="Mask the values of the header, query parameter, form field or JSON key NAME in"
    " the journal too (any case; repeatable), besides the built-in credentials.",
)
@click.option(
    "--grace",
    type=click.FloatRange(0),
    default=DEFAULT_GRACE,
    show_default=True,
    metavar="SECONDS",
    envvar="MOCKSKILL_GRACE",
    show_envvar=True,
    help="On SIGTERM or Ctrl-C, let requests in flight finish for this long (below"
    " docker stop's 10 s), then cut them; a second signal stops at once.",
)
@click.option(
    "--keep-alive",
    type=click.FloatRange(0, min_open=True),
    default=DEFAULT_KEEP_ALIVE,
    show_default=True,
    metavar="SECONDS",
    envvar="MOCKSKILL_KEEP_ALIVE",
    show_envvar=True,
    help="Close idle kept-alive connections after this long (longer than client pools"
    " keep theirs, so that no stale connection happens unscripted).",
)
@click.option(
    "--watch",
    is_flag=True,
    envvar="MOCKSKILL_WATCH",
    show_envvar=True,
    help="Reload PATHS when a file in them changes; an invalid edit keeps the last good"
    " scenarios serving (docs/reload.md).",
)
@click.option(
    "--state",
    default=MEMORY,
    show_default=True,
    metavar="URL",
    envvar="MOCKSKILL_STATE",
    show_envvar=True,
    help="Where sequences, tokens, outage clocks, draws and the journal live: memory (this"
    " process), or a Redis shared by several servers: redis://[:PASSWORD@]HOST:PORT/DB"
    " (rediss:// for TLS; docs/scaling.md).",
)
@click.option(
    "--workers",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    metavar="N",
    envvar="MOCKSKILL_WORKERS",
    show_envvar=True,
    help="Serve the port from N processes, supervised by this one (N > 1 needs a shared --state).",
)
@click.option(
    "--worker-socket",
    type=click.Choice(WORKER_SOCKETS),
    default="auto",
    show_default=True,
    envvar="MOCKSKILL_WORKER_SOCKET",
    show_envvar=True,
    help="How --workers share the port: each its own socket with SO_REUSEPORT, or one"
    " socket the parent listens on, inherited (auto: reuseport where the platform has it).",
)
@click.option(
    "--tls",
    is_flag=True,
    envvar="MOCKSKILL_TLS",
    show_envvar=True,
    help="Serve HTTPS, with a certificate made at start by a local CA (its file is printed;"
    " GET /__admin/tls/ca.pem serves it) for localhost, 127.0.0.1, ::1, --host and --tls-name.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    envvar="MOCKSKILL_TLS_CERT",
    show_envvar=True,
    help="Serve HTTPS with this certificate (chain, PEM) instead; needs --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    envvar="MOCKSKILL_TLS_KEY",
    show_envvar=True,
    help="The private key (PEM) of --tls-cert.",
)
@click.option(
    "--tls-name",
    "tls_names",
    multiple=True,
    metavar="NAME",
    envvar="MOCKSKILL_TLS_NAMES",  # several joined with spaces
    show_envvar=True,
    help="Another name or address the --tls certificate holds (repeatable).",
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=None,
    envvar="MOCKSKILL_HTTP_PORT",
    show_envvar=True,
    help="With --tls, serve plain HTTP on this port too (0: any free port).",
)
# A worker's own settings, given by its supervisor (mockskill/workers/); not for users.
@click.option("--worker-index", type=int, default=None, hidden=True)
@click.option("--ready-fd", type=int, default=None, hidden=True)
@click.option("--parent-fd", type=int, default=None, hidden=True)
@click.option("--listen-fd", type=int, default=None, hidden=True)
@click.option("--reuse-port", is_flag=True, hidden=True)
@click.pass_context
def serve(
    ctx: click.Context,
    paths: tuple[Path, ...],
    host: str,
    port: int,
    seed: int | None,
    max_delay: int,
    quiet: bool,
    admin_token: str | None,
    insecure_admin: bool,
    max_body: int,
    cors: bool,
    cors_origins: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    journal_size: int,
    journal_bodies: str,
    journal_body_limit: int,
    journal_bytes: int,
    max_tasks: int,
    callback_allow: tuple[str, ...],
    redact: tuple[str, ...],
    grace: float,
    keep_alive: float,
    watch: bool,
    state: str,
    workers: int,
    worker_socket: str,
    tls: bool,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_names: tuple[str, ...],
    http_port: int | None,
    worker_index: int | None,
    ready_fd: int | None,
    parent_fd: int | None,
    listen_fd: int | None,
    reuse_port: bool,
) -> None:
    """Serve the scenarios in PATHS (files or folders; the bundled ones if none).

    PATHS may also come from MOCKSKILL_SCENARIOS (several joined with ':'). With a
    shared --state and no PATHS, the set the fleet stored there (the bundled ones if none).
    """
    if watch and not paths:
        raise click.UsageError(
            "--watch reloads the scenario files you name: give their PATHs (or set"
            " MOCKSKILL_SCENARIOS; the bundled scenarios do not change while serving)"
        )
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together: give both")
    if http_port is not None and not (tls or tls_cert):
        raise click.UsageError("--http-port serves plain HTTP beside --tls: give --tls too")
    try:
        shared = is_shared(state)
    except BadStoreURL as exc:
        raise click.UsageError(str(exc)) from None
    if workers > 1:
        if tls and tls_cert is None:
            raise click.UsageError(
                "--tls with --workers: each worker would make its own CA; give the certificate"
                " they all serve with --tls-cert FILE --tls-key FILE"
            )
        from ..workers.supervisor import needs_shared_state
        from .workers import supervise

        if not shared:
            raise click.UsageError(needs_shared_state(workers))
        from ..store import client_missing

        missing = client_missing(state)
        if missing is not None:  # said once here, not by every worker
            raise SystemExit(f"mockskill: {missing}")
        load_or_exit(paths, max_delay)  # one report, not one per worker
        raise SystemExit(supervise(ctx, paths, workers))
    if not is_loopback(host) and admin_token is None and insecure_admin and worker_index is None:
        click.echo(
            f"mockskill: WARNING: --insecure-admin: /__admin on {host} takes no token;"
            " anyone who can reach this port can reset or reconfigure the server."
            " Pass --admin-token TOKEN to protect it.",
            err=True,
        )
    scenarios = load_or_exit(paths, max_delay)
    # A replica given no files joins the set its fleet shares (the bundled one is
    # published only when none is stored); alone, it serves the bundled scenarios.
    joins = shared and not paths
    if worker_index is not None and not quiet:
        from ..workers.supervisor import log_as_worker

        log_as_worker(worker_index)
    try:
        server = Server(
            None if joins else scenarios,
            host=host,
            port=port,
            seed=seed,
            quiet=quiet,
            admin_token=admin_token,
            insecure_admin=insecure_admin,
            max_body_bytes=max_body,
            cors=True if cors else cors_origins,
            allow_hosts=allow_hosts,
            journal_size=journal_size,
            journal_bodies=journal_bodies == "on",
            journal_body_limit=journal_body_limit,
            journal_bytes=journal_bytes,
            max_tasks=max_tasks,
            callback_allow=callback_allow,
            redact=redact,
            grace=grace,
            keep_alive=keep_alive,
            state=checked(state) if shared else None,
            tls=tls,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_names=tls_names,
            http_port=http_port,
        )
        sock = None
        if listen_fd is not None or reuse_port:  # a worker's, given by its supervisor
            from ..workers.supervisor import worker_listener

            sock = worker_listener(host, port, listen_fd=listen_fd, reuse_port=reuse_port)
        server.bind(sock)
    except ServerError as exc:
        raise SystemExit(cannot_start(ctx, exc)) from None
    if worker_index is None or worker_index == 1:
        worker = "" if worker_index is None else f"worker {worker_index}, pid {os.getpid()}; "
        click.echo(banner(server, paths, state, worker, joined=joins))
    else:  # the first worker shows the banner; each other says it serves
        click.echo(f"mockskill: worker {worker_index} (pid {os.getpid()}) serving at {server.url}")
    if watch:
        server.watch(paths, on_reload=lambda result: report_reload(server, result))
        if worker_index in (None, 1):
            click.echo(f"  watching {', '.join(str(p) for p in paths)} for changes")
    if ready_fd is not None or parent_fd is not None:  # a worker's pipes to its supervisor
        from ..workers.supervisor import report_ready, stop_with_parent

        report_ready(ready_fd)
        stop_with_parent(parent_fd)

    # SIGTERM and Ctrl-C drain (the transport's signal handlers); a second one cuts. The
    # process only serves: its scenario set is frozen out of the collector's passes.
    server.serve_forever(freeze=True)
    if worker_index is None:
        click.echo("mockskill stopped.", err=True)
