"""``mockskill verify``: whether a consumer sent the requests named, for shell scripts.

The conditions (``--when``, a JSON object in the language of a case's
``when:``) are read here first, by the reader ``POST /__admin/verify`` uses,
so that a bad one is told positioned in the text given (exit 2); then the
verification is sent to the running server (:class:`~mockskill.server.remote.RemoteServer`)
and its answer printed: exit 0 when it held, 1 when it did not (with the
closest requests and what each failed), 3 when the server could not be
asked. docs/cli.md documents it.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..engine.verifying import message
from ..protocol import jsonstyle
from ..scenario.verification import BadVerification, document, read_conditions, verification_of
from ..server.remote import RemoteError, RemoteServer, http_url
from .options import UNREADABLE

NOT_HELD = 1
USAGE = 2
"""Exit code of a mistyped command line and of bad conditions (click's convention)."""


def command(
    url: str,
    *,
    session: str | None = None,
    when: str | None = None,
    skill: str | None = None,
    method: str | None = None,
    path: str | None = None,
    count: int | None = None,
    at_least: int | None = None,
    at_most: int | None = None,
    as_json: bool = False,
    admin_token: str | None = None,
) -> int:
    """Verify at the server at *url*, print what it answered; the exit code (the module's)."""
    try:
        url = http_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="URL") from None
    if count is not None and (at_least is not None or at_most is not None):
        raise click.UsageError("give --count alone, or --at-least and/or --at-most")
    try:
        asked = document(
            _conditions(when, method),
            session=session,
            skill=skill,
            method=method,
            path=path,
            count=count,
            at_least=at_least,
            at_most=at_most,
        )
        verification_of(asked, "the command line")
    except BadVerification as exc:
        click.echo(f"mockskill: {exc}", err=True)
        return USAGE
    try:
        server = RemoteServer(url, admin_token=admin_token)
        status, answer = server.ask("POST", "verify", body=asked, answered=(409, 422))
        details: dict[str, Any] = answer["error"]["details"] if status == 409 else answer
        said = message(details)
    except RemoteError as exc:
        click.echo(f"mockskill: {exc}", err=True)
        return UNREADABLE
    except (KeyError, TypeError, AttributeError):
        click.echo(f"mockskill: {url}/__admin/verify answered no verification", err=True)
        return UNREADABLE
    if status == 422:  # (read here first: only a server of another version reads otherwise)
        click.echo(f"mockskill: {answer['error']['message']}", err=True)
        return USAGE
    click.echo(jsonstyle.dumps(answer) if as_json else said)
    return NOT_HELD if status == 409 else 0


def _conditions(when: str | None, method: str | None) -> dict[str, Any] | None:
    """``--when`` checked by the reader of ``when:`` (problems positioned in its text), as the
    JSON value it sends."""
    if when is None:
        return None
    read_conditions(when, "--when", method=method)  # (so: one JSON object)
    conditions: dict[str, Any] = json.loads(when)
    return conditions
