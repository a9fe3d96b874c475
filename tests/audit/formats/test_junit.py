"""The report as JUnit XML: valid as CI systems read it, and read back by a JUnit parser.

The schema is Jenkins' (its xunit plugin's ``junit-10.xsd``, vendored under tests/data/
with its MIT licence in its header), checked with xmlschema; the reading is
junitparser's, a parser CI tools and the issue's checker use.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import Failure, JUnitXml, TestCase, TestSuite
from report_sessions import Played, play

from mockskill import Server
from mockskill.audit import report
from mockskill.audit.formats.junit import junit
from mockskill.audit.rules import BY_ID, NO_REQUEST
from mockskill.engine.state import Entry

SCHEMA = Path(__file__).resolve().parents[2] / "data" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(SCHEMA)


@pytest.fixture(scope="module")
def played(bundled: Server) -> Played:
    return play(bundled)


@pytest.fixture(scope="module")
def xml(played: Played, bundled: Server) -> str:
    return junit(played.report, bundled.url)


def suites(text: str) -> dict[str, TestSuite]:
    return {suite.name: suite for suite in JUnitXml.fromstring(text)}


def failures(case: TestCase) -> list[Failure]:
    return [r for r in case.result if isinstance(r, Failure)]


def test_the_document_is_valid_against_jenkins_junit_schema(
    xml: str, schema: xmlschema.XMLSchema
) -> None:
    schema.validate(xml)


def test_a_document_against_the_schema_fails_when_it_breaks_it(
    xml: str, schema: xmlschema.XMLSchema
) -> None:
    """The schema is no formality: a test suite without its counts is refused."""
    root = ET.fromstring(xml)
    suite = root.find("testsuite")
    assert suite is not None
    del suite.attrib["tests"]
    assert not schema.is_valid(ET.tostring(root, encoding="unicode"))


def test_a_session_is_a_suite_a_chain_a_case_a_finding_a_failure(xml: str, played: Played) -> None:
    suite = suites(xml)[played.hammer]
    cases = {case.name: case for case in suite}
    assert list(cases) == [
        "POST /skills/retry-down/invoke (chain 1)",
        "POST /skills/translate/invoke (chain 1)",
    ]
    hammered = cases["POST /skills/retry-down/invoke (chain 1)"]
    assert hammered.classname == played.hammer
    assert [(f.type, f.message) for f in failures(hammered)] == [
        ("retry-too-soon", "retry-too-soon: 3 retries sooner than the advised delay"),
        ("too-many-attempts", "too-many-attempts: 4 attempts where the advice allows 3"),
    ]
    assert cases["POST /skills/translate/invoke (chain 1)"].is_passed
    (session,) = [s for s in played.report["sessions"] if s["session"] == played.hammer]
    finding = session["findings"][0]
    text = failures(hammered)[0].text
    assert f"expected: {finding['expected']}" in text
    assert f"fix:      {finding['fix']}" in text
    assert f"found:    {finding['found']}" in text
    assert BY_ID["retry-too-soon"].help_uri in text
    assert (suite.tests, suite.failures, suite.errors) == (2, 1, 0)


def test_a_task_is_one_case_with_its_polls_and_its_findings(xml: str, played: Played) -> None:
    suite = suites(xml)[played.poller]
    (case,) = list(suite)  # the submit and both polls: one task, no chain of their own
    assert case.name == "task 1 of task-report"
    assert [f.type for f in failures(case)] == ["poll-too-soon"]


def test_a_session_that_made_no_request_fails(xml: str, played: Played) -> None:
    (case,) = list(suites(xml)[played.silent])
    assert case.name == "requests"
    (failure,) = failures(case)
    assert failure.type == NO_REQUEST
    assert "made no request (is the Mockskill-Session header sent?" in failure.message


def test_coverage_and_the_session_s_figures_are_properties(xml: str, played: Played) -> None:
    properties = {p.name: p.value for p in suites(xml)[played.hammer].properties()}
    assert properties["requests"] == "5"
    assert properties["findings"] == "2"
    assert properties["clean"] == "false"
    assert properties["coverage.categories.ENDPOINT_UNREACHABLE"] == "4"
    assert "coverage.categories.AUTH_REQUIRED" not in properties  # met 0 times: missing
    assert "AUTH_REQUIRED" in properties["coverage.missing.categories"].split(", ")
    assert properties["coverage.complete"] == "false"


def test_the_root_holds_the_totals(xml: str, bundled: Server) -> None:
    root = JUnitXml.fromstring(xml)
    assert root.name == f"mockskill retry audit of {bundled.url}"
    assert (root.tests, root.failures, root.errors) == (2 + 1 + 1, 1 + 1 + 1, 0)


def test_case_names_do_not_change_with_the_journal_ids(bundled: Server) -> None:
    """A CI's history follows a test case by name: the same consumer played again (other
    journal ids, other task ids) gives the same names."""
    first, again = play(bundled), play(bundled)
    named = [
        [[c.name for c in suites(junit(p.report))[s]] for s in (p.hammer, p.poller)]
        for p in (first, again)
    ]
    assert named[0] == named[1]


def entry(id: int, session: str, **fields: Any) -> Entry:
    base: dict[str, Any] = {
        "id": id,
        "started": 100.0 + id,
        "finished": 100.5 + id,
        "session": session,
        "method": "POST",
        "path": "/skills/x/invoke",
        "status": 401,
        "endpoint": "invoke",
        "skill": "x",
        "error_code": "AUTH_REQUIRED",
    }
    return Entry(**{**base, **fields})


def test_characters_xml_cannot_carry_are_replaced_not_written(
    schema: xmlschema.XMLSchema,
) -> None:
    """A session name is whatever a consumer sent: markup is escaped, and a control
    character (which XML 1.0 cannot carry at all) is replaced, so the file still parses."""
    name = 'a<b>&"c\x01d'
    entries = [entry(1, name), entry(2, name)]  # AUTH_REQUIRED retried: a finding
    text = junit(report(entries))
    schema.validate(text)
    (suite,) = JUnitXml.fromstring(text)
    assert suite.name == 'a<b>&"c\ufffdd'
    assert [f.type for case in suite for f in failures(case)] == ["non-retryable-retried"]


def test_a_finding_about_no_chain_goes_to_the_session_s_other_requests() -> None:
    """A failed TLS handshake is no attempt of a chain: its finding (retrying a certificate
    that cannot become valid) still fails a case, and the schema's counts still add up."""
    handshake = {
        "tls": ("expired", "certificate_expired", None),
        "status": None,
        "error_code": None,
    }
    handshake["method"] = ""
    entries = [entry(1, "s", **handshake), entry(2, "s", **handshake), entry(3, "s", status=200)]
    (suite,) = JUnitXml.fromstring(junit(report(entries)))
    cases = {case.name: case for case in suite}
    assert [f.type for f in failures(cases["the session's other requests"])] == [
        "non-retryable-retried"
    ]
    assert (suite.tests, suite.failures) == (2, 1)
