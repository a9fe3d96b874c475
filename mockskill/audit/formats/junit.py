"""The report as JUnit XML: the audit where CI systems show test results.

A session is a ``<testsuite>``, its coverage ``<properties>``; each retry chain of it,
or each task (its polls, cancel and callbacks together), a ``<testcase>``; each
finding a ``<failure>`` of the test case it is about (its type the rule, its message
the rule and the finding's message, its text where, what was found, what was expected,
the fix and the rule's docs). A ``<testsuites>`` root holds the totals. Test cases are
named by endpoint (or skill) and their number among its chains, not by journal ids, so
that a CI's history follows a test case from one run to the next.

The shape is the one Jenkins' xunit plugin validates (its ``junit-10.xsd``, which the
tests hold it to) and GitLab, Azure Pipelines and CircleCI read.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

from ..rules import NO_REQUEST
from ..verdict import aligned, finding_parts, silence

# Characters XML 1.0 cannot carry even escaped (ElementTree writes them as they are,
# making a file no parser reads): a session name or a header value may hold one.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def junit(report: dict[str, Any], url: str = "") -> str:
    """*report* (:func:`mockskill.audit.report`'s) as a JUnit XML document."""
    root = ET.Element(
        "testsuites", name=_clean(f"mockskill retry audit{' of ' + url if url else ''}")
    )
    tests = failures = 0
    took = 0.0
    for session in report["sessions"]:
        suite = _suite(session, report["generated"])
        root.append(suite)
        tests += int(suite.get("tests", 0))
        failures += int(suite.get("failures", 0))
        took += float(suite.get("time", 0))
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("time", _seconds(took))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


class _Case:
    """A test case in the making: its name, its journal entries' span, its findings."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start: float | None = None
        self.end: float | None = None
        self.findings: list[dict[str, Any]] = []

    def spans(self, start: float | None, end: float | None) -> None:
        if start is not None:
            self.start = start if self.start is None else min(self.start, start)
        end = end if end is not None else start
        if end is not None:
            self.end = end if self.end is None else max(self.end, end)

    @property
    def seconds(self) -> float:
        if self.start is None or self.end is None:
            return 0.0
        return max(0.0, self.end - self.start)


def _suite(session: dict[str, Any], generated: float) -> ET.Element:
    name = session["session"]
    cases = _cases(session)
    suite = ET.Element("testsuite", name=_clean(name))
    properties = ET.SubElement(suite, "properties")
    for key, value in _properties(session):
        ET.SubElement(properties, "property", name=key, value=_clean(value))
    failed = 0
    for case in cases:
        element = ET.SubElement(
            suite,
            "testcase",
            name=_clean(case.name),
            classname=_clean(name),
            time=_seconds(case.seconds),
        )
        if case.findings:
            failed += 1
        for finding in case.findings:
            failure = ET.SubElement(
                element,
                "failure",
                type=_clean(finding["rule"]),
                message=_clean(f"{finding['rule']}: {finding['message']}"),
            )
            failure.text = _clean(_failure_text(finding))
    starts = [c.start for c in cases if c.start is not None]
    ends = [c.end for c in cases if c.end is not None]
    began = min(starts) if starts else generated
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failed))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    suite.set("time", _seconds(max(ends) - began if ends else 0.0))
    suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(began)))
    return suite


def _cases(session: dict[str, Any]) -> list[_Case]:
    """The session's test cases: its tasks, its chains not wholly a task's, and one for the
    findings about neither (a failed TLS handshake's) or for a session with no request."""
    cases: list[_Case] = []
    by_entry: dict[int, _Case] = {}  # journal id -> the case it is part of
    by_task: dict[str, _Case] = {}
    numbered: dict[str, int] = {}
    task_of: dict[int, _Case] = {}
    for task in session.get("tasks", ()):
        skill = task.get("skill") or "?"
        numbered[skill] = numbered.get(skill, 0) + 1
        case = _Case(f"task {numbered[skill]} of {skill}")
        case.spans(task.get("started"), task.get("finished"))
        by_task[task["id"]] = case
        cases.append(case)
        for part in (*task.get("marks", ()), *task.get("deliveries", ())):
            task_of[part["id"]] = case
            by_entry[part["id"]] = case
    numbered = {}
    for chain in session["chains"]:
        attempts = chain["attempts"]
        owners = {task_of.get(a["id"]) for a in attempts}
        if len(owners) == 1 and None not in owners:
            continue  # all of it a task's polls (or its submit): the task's case has them
        endpoint = chain["endpoint"]
        numbered[endpoint] = numbered.get(endpoint, 0) + 1
        case = _Case(f"{endpoint} (chain {numbered[endpoint]})")
        for attempt in attempts:
            case.spans(attempt["started"], attempt["finished"])
            by_entry.setdefault(attempt["id"], case)
        cases.append(case)
    rest: _Case | None = None
    for finding in session["findings"]:
        owner = by_task.get(finding.get("task") or "") or next(
            (by_entry[a] for a in finding["attempts"] if a in by_entry), None
        )
        if owner is None:
            if rest is None:
                rest = _Case("the session's other requests")
                cases.append(rest)
            owner = rest
        owner.findings.append(finding)
    if not session["requests"]:
        case = _Case("requests")
        case.findings.append(
            {
                "rule": NO_REQUEST,
                "message": silence(session),
                "session": session["session"],
                "endpoint": "",
                "attempts": [],
            }
        )
        cases.append(case)
    return cases


def _failure_text(finding: dict[str, Any]) -> str:
    if finding["rule"] == NO_REQUEST:
        return (
            "a session that made no request proves nothing: send Mockskill-Session with"
            " every request, under the name the report asks for"
        )
    return "\n".join(aligned(finding_parts(finding, docs=True)))


def _properties(session: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """The session's figures and coverage as ``(name, value)``."""
    yield "requests", str(session["requests"])
    yield "handshakes_failed", str(session.get("handshakes_failed", 0))
    yield "findings", str(len(session["findings"]))
    yield "clean", _value(session["clean"])
    if session.get("did_you_mean"):
        yield "did_you_mean", ", ".join(session["did_you_mean"])
    yield from _flat("coverage", session["coverage"])


def _flat(prefix: str, value: Any) -> Iterable[tuple[str, str]]:
    """Nested keys dotted; counts of nothing left out (the ``missing`` lists name those)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _flat(f"{prefix}.{key}", item)
    elif value != 0 or isinstance(value, bool):
        yield prefix, _value(value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def _clean(text: str) -> str:
    """*text* with the characters XML cannot carry replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)
