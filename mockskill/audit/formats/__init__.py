"""The report in the forms CI systems read, besides the table and the JSON.

Each writer is a pure function of a report (:func:`mockskill.audit.report`'s dict, as
``GET /__admin/report`` serves it) and the server's URL to text: no I/O, so that
``mockskill report --format`` and the pytest plugin's ``--mockskill-junit`` print and
write the same. :data:`FORMATS` names them all, the table and the JSON included:

- ``junit`` — JUnit XML: a session a test suite, a retry chain or a task a test case, a
  finding a failure, coverage as properties;
- ``sarif`` — SARIF 2.1.0: the rules with their docs, a finding a result;
- ``github`` — GitHub Actions annotations: an error per finding, a notice summing up.

Like all of the audit, it may import :mod:`mockskill.engine`, :mod:`mockskill.scenario`
and :mod:`mockskill.protocol`, and the audit's own modules; the faces call it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol import jsonstyle
from ..table import table
from . import github, junit, sarif

Writer = Callable[[dict[str, Any], str], str]
"""A report and the server's URL ("" when unknown) to the text of a format."""


def _json(report: dict[str, Any], url: str = "") -> str:
    return jsonstyle.dumps(report)


FORMATS: dict[str, Writer] = {
    "text": table,
    "json": _json,
    "junit": junit.junit,
    "sarif": sarif.sarif,
    "github": github.github,
}
"""Every format of ``mockskill report --format``, by name; ``text`` (the table) first."""

__all__ = ["FORMATS", "Writer"]
