"""The report as SARIF 2.1.0: valid against the OASIS schema, each finding a result with
its rule's documentation.

The schema is the OASIS TC's ``sarif-schema-2.1.0.json`` (oasis-tcs/sarif-spec, vendored
under tests/data/), checked with jsonschema's draft 4 validator and its format checker
(``helpUri`` and the like must be URIs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from report_sessions import Played, play

from mockskill import Server, __version__
from mockskill.audit.formats.sarif import SkillSource, sarif, sarif_log
from mockskill.audit.rules import CATALOGUE, RULES

SCHEMA = Path(__file__).resolve().parents[2] / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )


@pytest.fixture(scope="module")
def played(bundled: Server) -> Played:
    return play(bundled)


@pytest.fixture(scope="module")
def log(played: Played, bundled: Server) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(sarif(played.report, bundled.url))
    return parsed


def test_the_log_is_valid_against_the_sarif_2_1_0_schema(
    log: dict[str, Any], validator: jsonschema.Draft4Validator
) -> None:
    assert [e.message for e in validator.iter_errors(log)] == []
    assert log["version"] == "2.1.0"


def test_the_schema_refuses_what_sarif_forbids(
    log: dict[str, Any], validator: jsonschema.Draft4Validator
) -> None:
    """The validation is no formality: a level SARIF does not have is refused."""
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert not validator.is_valid(broken)


def test_the_driver_is_mockskill_with_every_rule_and_its_docs(log: dict[str, Any]) -> None:
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("mockskill", __version__)
    assert [r["id"] for r in driver["rules"]] == list(RULES)
    for rule, described in zip(CATALOGUE, driver["rules"], strict=True):
        assert described["shortDescription"]["text"] == rule.title
        assert described["help"]["text"] == rule.fix
        assert described["helpUri"] == rule.help_uri
        assert described["helpUri"].startswith("https://")


def test_each_finding_is_a_result_on_its_rule_at_its_endpoint(
    log: dict[str, Any], played: Played, bundled: Server
) -> None:
    (run,) = log["runs"]
    results = run["results"]
    findings = [f for s in played.report["sessions"] for f in s["findings"]]
    assert [r["ruleId"] for r in results] == [f["rule"] for f in findings]
    rules = run["tool"]["driver"]["rules"]
    for result, finding in zip(results, findings, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == "error"
        assert result["message"]["text"].startswith(finding["message"])
        (location,) = result["locations"][0]["logicalLocations"]
        assert location["name"] == finding["endpoint"]
        assert location["kind"] == "resource"
        assert result["properties"]["attempts"] == finding["attempts"]
        assert result["properties"]["fix"] == finding["fix"]
    (hammered, _, polled) = results
    assert hammered["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == (
        f"POST {bundled.url}/skills/retry-down/invoke"
    )
    assert polled["properties"]["task"]  # a task rule's result names its task


def test_a_session_that_made_no_request_is_a_notification(
    log: dict[str, Any], played: Played
) -> None:
    (invocation,) = log["runs"][0]["invocations"]
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["message"]["text"].startswith(f"session {played.silent!r} made no request")


def test_coverage_is_in_the_run_s_properties(log: dict[str, Any], played: Played) -> None:
    sessions = {s["session"]: s for s in log["runs"][0]["properties"]["sessions"]}
    hammer = sessions[played.hammer]
    assert hammer["coverage"]["categories"]["ENDPOINT_UNREACHABLE"] == 4
    assert (hammer["requests"], hammer["findings"], hammer["clean"]) == (5, 2, False)


def test_a_rule_of_a_newer_server_is_a_result_by_its_id_alone(
    played: Played, validator: jsonschema.Draft4Validator
) -> None:
    """A report served by a newer mockskill may name a rule this one has no entry for."""
    newer = json.loads(json.dumps(played.report))
    newer["sessions"][0]["findings"][0]["rule"] = "a-rule-of-tomorrow"
    log = sarif_log(newer)
    result = log["runs"][0]["results"][0]
    assert result["ruleId"] == "a-rule-of-tomorrow"
    assert "ruleIndex" not in result
    assert validator.is_valid(log)


def test_a_result_is_at_its_skill_s_scenario_file_where_one_is_known(
    played: Played, validator: jsonschema.Draft4Validator
) -> None:
    """Code-scanning views show results located in a file: the caller (the CLI) names
    each skill's scenario file; a result about another endpoint stays logical only."""
    log = sarif_log(played.report, sources={"retry-down": "scenarios/retries.yaml"})
    assert validator.is_valid(log)
    located = {
        r["ruleId"]: r["locations"][0].get("physicalLocation") for r in log["runs"][0]["results"]
    }
    assert located == {
        "retry-too-soon": {"artifactLocation": {"uri": "scenarios/retries.yaml"}},
        "too-many-attempts": {"artifactLocation": {"uri": "scenarios/retries.yaml"}},
        "poll-too-soon": None,  # task-report's file was not named
    }


def test_a_result_is_on_its_skill_s_line_where_the_line_is_known(
    played: Played, validator: jsonschema.Draft4Validator
) -> None:
    """A skill's line (the scenarios listing's ``line``) is the result's region: the line
    code-scanning views annotate."""
    sources = {"retry-down": SkillSource("scenarios/retries.yaml", 12)}
    log = sarif_log(played.report, sources=sources)
    assert [e.message for e in validator.iter_errors(log)] == []
    located = {
        r["ruleId"]: r["locations"][0].get("physicalLocation") for r in log["runs"][0]["results"]
    }
    at_line = {"artifactLocation": {"uri": "scenarios/retries.yaml"}, "region": {"startLine": 12}}
    assert located == {
        "retry-too-soon": at_line,
        "too-many-attempts": at_line,
        "poll-too-soon": None,
    }
    unknown = sarif_log(played.report, sources={"retry-down": SkillSource("r.yaml")})
    assert "region" not in unknown["runs"][0]["results"][0]["locations"][0]["physicalLocation"]


def test_the_schema_refuses_a_line_sarif_does_not_count(
    played: Played, validator: jsonschema.Draft4Validator
) -> None:
    """The region is checked too: SARIF counts lines from 1."""
    log = sarif_log(played.report, sources={"retry-down": SkillSource("r.yaml", 0)})
    assert not validator.is_valid(log)
