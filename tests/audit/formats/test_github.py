"""The report as GitHub Actions workflow commands, escaped as the runner reads them."""

from __future__ import annotations

import re

import pytest
from report_sessions import Played, play

from mockskill import Server
from mockskill.audit import report
from mockskill.audit.formats.github import command, escape_data, escape_property, github
from mockskill.audit.table import summary
from mockskill.engine.state import Entry

COMMAND = re.compile(r"^::(?P<name>[a-z]+)(?: (?P<properties>[^:]*))?::(?P<message>.*)$")


def unescape(text: str) -> str:
    """What the runner makes of an escaped value (actions/runner's ActionCommand)."""
    for escaped, plain in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, plain)
    return text


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command line as the runner splits it: name, properties, message."""
    match = COMMAND.match(line)
    assert match, line
    properties = {}
    for pair in (match["properties"] or "").split(","):
        if pair:
            key, value = pair.split("=", 1)
            properties[key] = unescape(value)
    return match["name"], properties, unescape(match["message"])


@pytest.mark.parametrize(
    ("text", "data", "prop"),
    [
        pytest.param("50% of it", "50%25 of it", "50%25 of it", id="percent"),
        pytest.param("a\nb\r\nc", "a%0Ab%0D%0Ac", "a%0Ab%0D%0Ac", id="newlines"),
        pytest.param("at: 1, 2", "at: 1, 2", "at%3A 1%2C 2", id="colon-and-comma"),
        pytest.param("%0A", "%250A", "%250A", id="an-escape-sent-as-text"),
    ],
)
def test_values_are_escaped_as_the_runner_reads_them(text: str, data: str, prop: str) -> None:
    assert escape_data(text) == data
    assert escape_property(text) == prop
    assert unescape(data) == text
    assert unescape(prop) == text


def test_a_command_reads_back_as_given() -> None:
    line = command("error", "line 1\nline 2: 100%", title="rule (a:b,c)")
    assert "\n" not in line
    assert parse(line) == ("error", {"title": "rule (a:b,c)"}, "line 1\nline 2: 100%")


def test_an_error_per_finding_and_per_silent_session_then_a_notice(bundled: Server) -> None:
    played: Played = play(bundled)
    lines = github(played.report, bundled.url).splitlines()
    commands = [parse(line) for line in lines]
    findings = [f for s in played.report["sessions"] for f in s["findings"]]
    errors = [c for c in commands if c[0] == "error"]
    assert [c[1]["title"] for c in errors] == [
        *(f"{f['rule']} ({f['session']})" for f in findings),
        f"no-request ({played.silent})",
    ]
    for (_, _, message), finding in zip(errors, findings, strict=False):
        first, *rest = message.split("\n")
        assert first.startswith(f"{finding['message']} at {finding['endpoint']} (journal #")
        assert f"expected: {finding['expected']}" in rest
        assert f"fix: {finding['fix']}" in rest
    assert "made no request" in errors[-1][2]
    assert commands[-1] == (
        "notice",
        {"title": "mockskill retry audit"},
        summary(played.report),
    )


def test_a_session_name_with_the_separators_stays_in_its_title() -> None:
    name = "ci:42,a%b"
    entries = [
        Entry(
            i,
            100.0 + i,
            100.5 + i,
            name,
            "POST",
            "/skills/x/invoke",
            401,
            "invoke",
            skill="x",
            error_code="AUTH_REQUIRED",
        )
        for i in (1, 2)
    ]
    (error, _) = [parse(line) for line in github(report(entries)).splitlines()]
    assert error[1] == {"title": f"non-retryable-retried ({name})"}
