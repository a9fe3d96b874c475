"""The report as SARIF 2.1.0: the audit where code-scanning views show a tool's results.

One run, its ``tool.driver`` mockskill with its version and every rule of the audit
(:data:`~mockskill.audit.rules.CATALOGUE`: its id, title, when it finds, the fix as
help, ``helpUri`` its section of docs/audit.md). Each finding is a ``result``: its
rule, level ``error``, the finding's message, and the endpoint it is about as a
logical location (a resource, named ``METHOD /path``) and, where the caller knows it
(the journal does not), the scenario file its skill came from and the line the skill
is written on (``region.startLine``; :class:`SkillSource`); the session, the
journal ids, what was found and expected, and the fix go in its properties. A session
that made no request is a tool notification (the report proves nothing of it); each
session's figures and coverage are the run's properties. It validates against the
OASIS SARIF 2.1.0 JSON Schema (tests/data/sarif-schema-2.1.0.json).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..._version import __version__
from ...protocol import jsonstyle
from ..rules import CATALOGUE, RULES, Rule
from ..verdict import silence

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SKILL_PATH = re.compile(r"^\S+ /skills/([^/?]+)")
"""An endpoint of a skill (``POST /skills/ID/invoke``, ``GET /skills/ID/tasks/...``): its id."""
INFORMATION_URI = "https://mockskill.dev/"


class SkillSource(NamedTuple):
    """Where a skill is written: its scenario file (a URI reference: a path relative to the
    project's root, or a ``file:`` URI) and the line its item begins on (None: unknown)."""

    uri: str
    line: int | None = None


Sources = Mapping[str, str | SkillSource]
"""Each skill's (by id) scenario file, or file and line (:class:`SkillSource`)."""


def sarif(report: dict[str, Any], url: str = "", *, sources: Sources | None = None) -> str:
    """*report* (:func:`mockskill.audit.report`'s) as a SARIF 2.1.0 log, one line of JSON.

    *sources*: the scenario file each skill came from (its id to a URI reference: a
    path relative to the project's root, or a ``file:`` URI; or a :class:`SkillSource`,
    with the skill's line), where known: a result about a skill's endpoint is then also
    at that file, on that line (code-scanning views such as GitHub's show only results
    located in a file, and annotate the line).
    """
    return jsonstyle.dumps(sarif_log(report, url, sources=sources))


def sarif_log(
    report: dict[str, Any], url: str = "", *, sources: Sources | None = None
) -> dict[str, Any]:
    """*report* as a SARIF 2.1.0 log, a JSON-ready dict (:func:`sarif`)."""
    index = {rule_id: i for i, rule_id in enumerate(RULES)}
    results = []
    notifications = []
    sessions = []
    for session in report["sessions"]:
        name = session["session"]
        for finding in session["findings"]:
            results.append(_result(finding, index, url, sources or {}))
        if not session["requests"]:
            notifications.append(
                {"level": "error", "message": {"text": f"session {name!r} {silence(session)}"}}
            )
        sessions.append(
            {
                "session": name,
                "requests": session["requests"],
                "clean": session["clean"],
                "findings": len(session["findings"]),
                "coverage": session["coverage"],
            }
        )
    invocation: dict[str, Any] = {
        "executionSuccessful": True,  # the audit ran; its verdict is the results
        "endTimeUtc": _utc(report["generated"]),
    }
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "mockskill",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_json(rule) for rule in CATALOGUE],
            }
        },
        "invocations": [invocation],
        "results": results,
        "properties": {"clean": report["clean"], "policy": report["policy"], "sessions": sessions},
    }
    if url:
        run["originalUriBaseIds"] = {"SERVER": {"uri": url.rstrip("/") + "/"}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def _rule_json(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.when},
        "help": {"text": rule.fix},
        "helpUri": rule.help_uri,
        "defaultConfiguration": {"level": "error"},
    }


def _result(
    finding: Mapping[str, Any], index: Mapping[str, int], url: str, sources: Sources
) -> dict[str, Any]:
    rule = finding["rule"]
    endpoint = finding["endpoint"]
    logical: dict[str, Any] = {"name": endpoint, "kind": "resource"}
    if url and " " in endpoint:
        method, path = endpoint.split(" ", 1)
        logical["fullyQualifiedName"] = f"{method} {url.rstrip('/')}{path}"
    location: dict[str, Any] = {"logicalLocations": [logical]}
    skill = _SKILL_PATH.match(endpoint)
    source = sources.get(skill[1]) if skill else None
    if source is not None:
        uri, line = (source, None) if isinstance(source, str) else source
        physical: dict[str, Any] = {"artifactLocation": {"uri": uri}}
        if line is not None:
            physical["region"] = {"startLine": line}
        location["physicalLocation"] = physical
    result: dict[str, Any] = {
        "ruleId": rule,
        "level": "error",
        "message": {"text": f"{finding['message']} (session {finding['session']!r})"},
        "locations": [location],
        "properties": {
            "session": finding["session"],
            "attempts": finding["attempts"],
            "found": finding["found"],
            "expected": finding["expected"],
            "fix": finding["fix"],
        },
    }
    if rule in index:  # (a rule this version does not know, from a newer server: by id alone)
        result["ruleIndex"] = index[rule]
    if finding.get("task") is not None:
        result["properties"]["task"] = finding["task"]
    return result


def _utc(seconds: float) -> str:
    """*seconds* since the epoch as SARIF's UTC date-time (``2026-12-04T15:30:00.123Z``)."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{int(seconds % 1 * 1000):03d}Z"
