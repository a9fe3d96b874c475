"""The report as GitHub Actions workflow commands: annotations on the job's summary.

An ``::error`` line per finding (its title the rule and the session, its message the
finding's message at its endpoint and journal ids, then what was found and expected,
the fix and the rule's docs), one per session that made no request, and a
``::notice`` with the summary line of the table. Values are escaped as the Actions
runner reads them: ``%``, CR and LF in a message; those and ``:`` and ``,`` in a
property (the title).
"""

from __future__ import annotations

from typing import Any

from ..rules import NO_REQUEST
from ..table import summary
from ..verdict import finding_parts, silence


def github(report: dict[str, Any], url: str = "") -> str:
    """*report* (:func:`mockskill.audit.report`'s) as workflow command lines (*url*, the
    server's, is not in them: a job's annotations need no address on the runner)."""
    lines = []
    for session in report["sessions"]:
        name = session["session"]
        for finding in session["findings"]:
            lines.append(command("error", _message(finding), title=f"{finding['rule']} ({name})"))
        if not session["requests"]:
            said = f"session {name!r} {silence(session)}"
            lines.append(command("error", said, title=f"{NO_REQUEST} ({name})"))
    lines.append(command("notice", summary(report), title="mockskill retry audit"))
    return "\n".join(lines)


def command(name: str, message: str, **properties: str) -> str:
    """One workflow command: ``::name key=value,...::message``, every part escaped."""
    given = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{name}{' ' + given if given else ''}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A command's message as the runner reads it back (``%``, CR, LF escaped)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value: as a message, and ``:`` and ``,`` besides."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _message(finding: dict[str, Any]) -> str:
    (_, where), *rest = finding_parts(finding, docs=True)
    lines = [f"{finding['message']} at {where}", *(f"{label}: {text}" for label, text in rest)]
    return "\n".join(lines)
