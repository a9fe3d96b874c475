"""The ``mockskill`` command: serve, validate, report, verify, check-descriptor, generate,
schema.

Every failure the user can fix ends in a message and an exit code, never a
traceback, and each exit code means one thing in every command (the table in
docs/cli.md's "The command line"): 0 yes (valid, clean, served); 1 no
(invalid scenarios or descriptor, a failed gate, a port that cannot be used);
2 a mistyped command line (click's convention); 3 the thing to check could
not be read (unreachable, an HTTP error, not JSON).
"""

from __future__ import annotations

from pathlib import Path

import click

from .._version import __version__
from ..protocol.validator import validate as validate_descriptor
from ..protocol.validator import validation_error
from .banner import count
from .generate import generate
from .options import MAX_DELAY, PATHS, UNREADABLE, admin_token, load_or_exit
from .record import record
from .serve import serve
from .sources import read_json

__all__ = [
    "UNREADABLE",
    "check_descriptor",
    "cli",
    "generate",
    "main",
    "report",
    "schema",
    "serve",
    "validate",
    "verify",
]
"""The group, its commands (``serve`` is :mod:`.serve`'s, ``record`` :mod:`.record`'s,
``verify`` :mod:`.verify`'s, ``generate`` :mod:`.generate`'s)."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mockskill")
def cli() -> None:
    """A skill provider scripted by YAML scenarios, for testing consumers."""


@cli.command()
@PATHS
@MAX_DELAY
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 on warnings too (for CI), as on problems.",
)
def validate(paths: tuple[Path, ...], max_delay: int, strict: bool) -> None:
    """Check scenario files (the bundled ones if none); print every problem, exit 1 if any
    (3 if a path could not be read: missing, or closed to this process).

    A warning (a skill's scripted JSON error answer that is not in the unified
    error body) is printed, positioned, and fails only with --strict: a provider
    broken on purpose is a scenario too.
    """
    from ..scenario.problems import Problem

    warnings: list[Problem] = []
    scenarios = load_or_exit(paths, max_delay, warnings)
    for warning in sorted(warnings):
        click.echo(f"warning: {warning}", err=True)
    counts = count(len(scenarios.scenarios), "scenario"), count(len(scenarios.skills), "skill")
    said = f" ({count(len(warnings), 'warning')})" if warnings else ""
    if warnings and strict:
        click.echo(f"mockskill: {', '.join(counts)}{said}; --strict fails on warnings", err=True)
        raise SystemExit(1)
    click.echo(f"ok: {', '.join(counts)}{said}")


@cli.command("check-descriptor")
@click.argument("source", metavar="FILE|URL|-")
def check_descriptor(source: str) -> None:
    """Validate a Skill Descriptor; print VALIDATION_ERROR with every violation, exit 1 if any.

    SOURCE is a JSON file, an http(s) URL fetched with GET (HOST:PORT/PATH
    without a scheme is http, as in curl), or - for standard input. Exit
    code 0 valid, 1 invalid, 2 a mistyped command line, 3 could not read
    (no such file, connection refused, an HTTP error, not JSON).
    """
    document = read_json(source)
    violations = validate_descriptor(document)
    if violations:
        from ..protocol import jsonstyle  # this command's and the admin API's, not serve's

        click.echo(jsonstyle.dumps(validation_error(violations)))
        raise SystemExit(1)
    click.echo(f"{source}: a valid Skill Descriptor")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of scenario files (for editors and other tools)."""
    from ..scenario.schema import SCHEMA_PATH  # (resolves its path: this command's alone)

    click.echo(SCHEMA_PATH.read_text(encoding="utf-8"), nl=False)


REPORT_FORMATS = ("text", "json", "junit", "sarif", "github")
"""``mockskill report --format``'s choices: :data:`mockskill.audit.formats.FORMATS`' names
(said here too, so that the command line is built without importing the writers)."""


def report_format(given: str | None, as_json: bool) -> str:
    """The format asked for: ``--format``, or ``--json`` (its older spelling), else text."""
    if as_json and given not in (None, "json"):
        raise click.UsageError(f"--json asks for --format json; --format {given} asks otherwise")
    return "json" if as_json else given or "text"


@cli.command()
@click.argument("url", required=False, default="http://127.0.0.1:8080", envvar="MOCKSKILL_URL")
@click.option(
    "--session",
    "sessions",
    multiple=True,
    metavar="NAME",
    help="Only this session (repeatable); one that sent nothing is reported too.",
)
@click.option("--skill", metavar="ID", default=None, help="Only the requests of this skill.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(REPORT_FORMATS),
    default=None,
    help="text: the table (the default); json: GET /__admin/report's JSON; junit: JUnit"
    " XML; sarif: SARIF 2.1.0; github: GitHub Actions annotations (docs/audit.md).",
)
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--fail-on-findings", is_flag=True, help="Exit 1 if the audit has any finding.")
@click.option(
    "--require-coverage",
    is_flag=True,
    help="Exit 1 unless each session has met all seven categories and all transport faults"
    " (and served and handled every named case of the skills it used).",
)
@click.option(
    "--require",
    "required",
    multiple=True,
    metavar="NAME[,NAME]",
    help="Exit 1 unless each session has met these categories or faults (repeatable);"
    " RATE_LIMITED: a rate-limit answer (429, or a limit's 503); TASK_FAILED,"
    " TASK_FAILED:CATEGORY, TASK_CANCELLED: a task seen to end so; CALLBACK_FAULT,"
    " CALLBACK_FAULT:FAULT: a task's callback served a fault; CASES: every named case"
    " served and handled (case-unexercised, case-mishandled: one of the two).",
)
@admin_token("The server's admin token, if it has one.")
def report(
    url: str,
    sessions: tuple[str, ...],
    skill: str | None,
    output_format: str | None,
    as_json: bool,
    fail_on_findings: bool,
    require_coverage: bool,
    required: tuple[str, ...],
    admin_token: str | None,
) -> None:
    """Print the retry audit and category coverage of the server at URL.

    URL is the server's base URL (else MOCKSKILL_URL, as for the pytest
    plugin; default http://127.0.0.1:8080; HOST:PORT without a scheme is
    http, as in curl). Exit code 0; 1 when a gate asked for fails
    (--fail-on-findings, --require-coverage, --require); 2 for a mistyped
    command line or URL; 3 when no report could be had (docs/audit.md).
    """
    from .report import command  # the audit read from a running server

    raise SystemExit(
        command(
            url,
            sessions=sessions,
            skill=skill,
            output_format=report_format(output_format, as_json),
            fail_on_findings=fail_on_findings,
            require_coverage=require_coverage,
            required=required,
            admin_token=admin_token,
        )
    )


@cli.command()
@click.argument("url", required=False, default="http://127.0.0.1:8080", envvar="MOCKSKILL_URL")
@click.option("--session", metavar="NAME", default=None, help="Only this session's requests.")
@click.option(
    "--when",
    metavar="JSON",
    default=None,
    help='Conditions, as a case\'s when: (\'{"body": {"/input/text": "hello"}}\').',
)
@click.option("--skill", metavar="ID", default=None, help="Only the requests to this skill.")
@click.option("--method", metavar="METHOD", default=None, help="Only requests of this method.")
@click.option("--path", metavar="PATH", default=None, help="Only requests to this path.")
@click.option("--count", type=click.IntRange(min=0), default=None, help="Exactly N requests.")
@click.option("--at-least", type=click.IntRange(min=0), default=None, help="At least N.")
@click.option("--at-most", type=click.IntRange(min=0), default=None, help="At most N.")
@click.option("--json", "as_json", is_flag=True, help="Print the server's answer as JSON.")
@admin_token("The server's admin token, if it has one.")
def verify(
    url: str,
    session: str | None,
    when: str | None,
    skill: str | None,
    method: str | None,
    path: str | None,
    count: int | None,
    at_least: int | None,
    at_most: int | None,
    as_json: bool,
    admin_token: str | None,
) -> None:
    """Check that the server at URL journalled the requests named: at least one by default
    (--count N exactly, --at-least N, --at-most N).

    Exit 0 when it held; 1 when it did not (the closest requests are printed, each
    with the conditions it failed); 2 for a mistyped command line or bad conditions
    (told at their line and column in --when); 3 when the server could not be asked.
    URL is the server's base URL (else MOCKSKILL_URL; default http://127.0.0.1:8080).
    """
    from .verify import command  # the verification, sent to a running server

    raise SystemExit(
        command(
            url,
            session=session,
            when=when,
            skill=skill,
            method=method,
            path=path,
            count=count,
            at_least=at_least,
            at_most=at_most,
            as_json=as_json,
            admin_token=admin_token,
        )
    )


cli.add_command(generate)
cli.add_command(record)
cli.add_command(serve)


def main() -> None:
    """Console entry point."""
    cli(prog_name="mockskill")


if __name__ == "__main__":  # pragma: no cover
    main()
