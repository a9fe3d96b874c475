"""``mockskill generate``: the pack it writes, its stability, and what it does with bad input."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from chapter_example import CHAPTER_VIOLATIONS
from click.testing import CliRunner

from mockskill import Server, load_text
from mockskill.cli import cli
from mockskill.protocol.validator import validate, validation_error

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "docs" / "examples"
DESCRIPTOR = EXAMPLES / "translate.descriptor.json"
TRANSLATE: dict[str, Any] = json.loads(DESCRIPTOR.read_text())


def _generate(tmp_path: Path, descriptor: Any, name: str = "skill.json") -> tuple[Any, Path]:
    source = tmp_path / name
    source.write_text(json.dumps(descriptor))
    out = tmp_path / "pack.yaml"
    result = CliRunner().invoke(cli, ["generate", str(source), "--out", str(out)])
    return result, out


def _case_names(text: str) -> list[str]:
    (skill,) = load_text(text).skills
    return [c.name or "" for c in (*skill.describe_cases, *skill.invoke_cases)]


@pytest.mark.parametrize("skill", ["translate", "report"])
def test_the_bundled_examples_are_what_generate_makes(skill: str) -> None:
    result = CliRunner().invoke(cli, ["generate", str(EXAMPLES / f"{skill}.descriptor.json")])
    assert result.exit_code == 0, result.output
    assert result.stdout == (EXAMPLES / f"{skill}-failures.yaml").read_text()


def test_the_same_descriptor_gives_the_same_bytes(tmp_path: Path) -> None:
    first, out = _generate(tmp_path, TRANSLATE)
    assert first.exit_code == 0, first.output
    written = out.read_bytes()
    out.unlink()
    again, _ = _generate(tmp_path, TRANSLATE)
    assert again.exit_code == 0
    assert out.read_bytes() == written
    assert "wrote" in first.stderr
    assert "22 named cases" in first.stderr


def test_the_pack_loads_and_says_what_each_case_is_for(tmp_path: Path) -> None:
    result, out = _generate(tmp_path, TRANSLATE)
    assert result.exit_code == 0
    text = out.read_text()
    validated = CliRunner().invoke(cli, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("- name: "):
            assert lines[i - 1].lstrip().startswith("# "), line  # each case's comment


def test_auth_cases_only_where_auth_is_declared(tmp_path: Path) -> None:
    result, out = _generate(tmp_path, TRANSLATE)
    assert result.exit_code == 0
    names = _case_names(out.read_text())
    assert {"AUTH_REQUIRED", "PERMISSION_DENIED"} <= set(names)
    for auth in (None, {"type": "none"}):
        plain = {k: v for k, v in TRANSLATE.items() if k != "auth"}
        if auth is not None:
            plain["auth"] = auth
        result, out = _generate(tmp_path, plain)
        assert result.exit_code == 0
        names = _case_names(out.read_text())
        assert "AUTH_REQUIRED" not in names
        assert "PERMISSION_DENIED" not in names


def test_every_descriptor_has_the_protocol_cases_and_the_faults_but_nothing_undeclared(
    tmp_path: Path,
) -> None:
    result, out = _generate(tmp_path, TRANSLATE)
    assert result.exit_code == 0
    names = _case_names(out.read_text())
    assert names[:1] == ["SKILL_NOT_FOUND"]
    assert [n for n in names if n.startswith("invalid-descriptor-")] == [
        "invalid-descriptor-missing-protocol_version",
        "invalid-descriptor-wrong-enum-capability_type",
        "invalid-descriptor-wrong-type-protocol_version-number",
        "invalid-descriptor-malformed-uri-endpoint-url",
        "invalid-descriptor-bad-protocol-version-major-only",
        "invalid-descriptor-nested-auth-missing-type",
        "invalid-descriptor-several-chapter-example",
        "invalid-descriptor-not-an-object-null",
    ]
    assert [n for n in names if not n.startswith("invalid-descriptor-")][1:] == [
        "ok",
        "AUTH_REQUIRED",
        "PERMISSION_DENIED",
        "EXECUTION_TIMEOUT-408",
        "EXECUTION_TIMEOUT-504",
        "ENDPOINT_UNREACHABLE-502",
        "ENDPOINT_UNREACHABLE-503",
        "VERSION_INCOMPATIBLE",
        "fault-CONNECTION_RESET_BY_PEER",
        "fault-EMPTY_RESPONSE",
        "fault-MALFORMED_RESPONSE_CHUNK",
        "fault-RANDOM_DATA_THEN_CLOSE",
        "fault-TRUNCATED_BODY",
    ]  # no rate limit, task or stream: this descriptor declares none


def test_declared_rate_limits_tasks_and_streams_add_their_cases(tmp_path: Path) -> None:
    declared = json.loads(json.dumps(TRANSLATE))
    declared["rate_limit"] = {"per_minute": 60}
    declared["endpoint"]["streaming"] = "ndjson"
    result, out = _generate(tmp_path, declared)
    assert result.exit_code == 0, result.output
    names = _case_names(out.read_text())
    assert {"RATE_LIMITED-429", "RATE_LIMITED-503", "stream-reset", "stream-error-event"} <= set(
        names
    )
    tasked = {**TRANSLATE, "capability_type": "task"}
    result, out = _generate(tmp_path, tasked)
    assert result.exit_code == 0, result.output
    lives = ["task-submit-lost", "task-failed", "task-cancelled", "task-input-required"]
    names = _case_names(out.read_text())
    assert names[names.index("task-submit-lost") :][:5] == [*lives, "task-gone"]


def test_each_task_case_but_the_lost_202_has_a_life_of_its_own(tmp_path: Path) -> None:
    result, out = _generate(tmp_path, json.loads((EXAMPLES / "report.descriptor.json").read_text()))
    assert result.exit_code == 0, result.output
    (skill,) = load_text(out.read_text()).skills
    assert skill.task is not None
    assert [p.status for p in skill.task.life] == ["submitted", "working", "completed"]
    ends = {
        case.name: case.task.life[-1].status for case in skill.invoke_cases if case.task is not None
    }
    assert ends == {
        "task-failed": "failed",
        "task-cancelled": "cancelled",
        "task-input-required": "completed",
        "task-gone": "completed",
    }
    lives = {c.name: c.task for c in skill.invoke_cases if c.task is not None}
    assert "input_required" in [p.status for p in lives["task-input-required"].life]
    assert lives["task-gone"].ttl_ms == 1


@pytest.mark.parametrize(
    ("rate_limit", "declared"),
    [(0, True), (0.0, True), ("", True), ({}, True), (None, False), (False, False)],
)
def test_any_rate_limit_but_null_or_false_is_declared(
    tmp_path: Path, rate_limit: Any, declared: bool
) -> None:
    result, out = _generate(tmp_path, {**TRANSLATE, "rate_limit": rate_limit})
    assert result.exit_code == 0, result.output
    assert ("RATE_LIMITED-429" in _case_names(out.read_text())) is declared


def test_strings_yaml_would_misread_are_served_as_the_descriptor_has_them(
    tmp_path: Path,
) -> None:
    # NEL, LS and PS are line breaks inside a YAML string; DEL, C1 controls and U+FFFE
    # are not printable in YAML: JSON leaves each as it is, so the pack escapes them
    odd = "a\x85b\u2028c\u2029d\x7fe\x80f\x9fg\ufffeh"
    descriptor = {**TRANSLATE, "description": odd, "x_vendor": {odd: [odd], "plain": "yes"}}
    result, out = _generate(tmp_path, descriptor)
    assert result.exit_code == 0, result.output
    (skill,) = load_text(out.read_text(encoding="utf-8")).skills
    served = json.loads(skill.descriptor)
    assert served["description"] == odd
    assert served["x_vendor"] == {odd: [odd], "plain": "yes"}


def test_numbers_are_served_as_numbers_whatever_json_spelled_them(tmp_path: Path) -> None:
    # JSON spells 1e-05 without a point, which YAML 1.1 would read back as a string
    numbers = [1e-05, 1e300, -2.5e-300, 2.5, -0.0, 0, 12345678901234567890, -7]
    result, out = _generate(tmp_path, {**TRANSLATE, "x_vendor": {"numbers": numbers}})
    assert result.exit_code == 0, result.output
    (skill,) = load_text(out.read_text(encoding="utf-8")).skills
    served = json.loads(skill.descriptor)["x_vendor"]["numbers"]
    assert served == numbers
    assert [type(n) for n in served] == [type(n) for n in numbers]


def test_an_invalid_descriptor_prints_its_violations_and_writes_nothing(tmp_path: Path) -> None:
    broken = {**TRANSLATE, "capability_type": "unknown_type", "endpoint": {"method": "POST"}}
    result, out = _generate(tmp_path, broken)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == validation_error(validate(broken))
    assert json.loads(result.stdout)["error"]["details"]["violations"] == CHAPTER_VIOLATIONS
    assert "has an invalid descriptor; nothing was written" in result.stderr
    assert not out.exists()


def test_an_unreachable_url_exits_3_with_a_sentence(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port on which nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/skills"
    out = tmp_path / "pack.yaml"
    result = CliRunner().invoke(cli, ["generate", url, "--out", str(out)])
    assert result.exit_code == 3
    assert f"cannot read a descriptor from {url}: cannot reach {url}" in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "No such file"),
        ("{not", "is not JSON"),
        ('{"id": "x", "rate_limit": NaN}', "NaN is not JSON"),
        ('{"id": "x", "rate_limit": -Infinity}', "-Infinity is not JSON"),
    ],
)
def test_an_unreadable_file_exits_3(tmp_path: Path, content: str | None, why: str) -> None:
    source = tmp_path / "d.json"
    if content is not None:
        source.write_text(content)
    result = CliRunner().invoke(cli, ["generate", str(source)])
    assert result.exit_code == 3
    assert why in result.stderr


def test_a_skills_listing_url_gives_a_pack_of_every_skill_listed() -> None:
    scenario = "name: two\nskills:\n  - id: alpha\n  - id: beta\n    descriptor: {version: 3.0.0}\n"
    with Server(scenario) as server:
        result = CliRunner().invoke(cli, ["generate", f"{server.url}/skills"])
    assert result.exit_code == 0, result.output
    pack = load_text(result.stdout)
    assert [s.id for s in pack.skills] == ["alpha", "beta"]
    assert pack.scenarios[0].name == "failure-pack"
    beta = json.loads(pack.skills[1].descriptor)
    assert beta["version"] == "3.0.0"


def test_a_listing_url_without_a_scheme_is_read_and_named_whole() -> None:
    # (HOST:PORT/PATH is http, as in curl: the pack's first comment names it as given)
    with Server("name: one\nskills:\n  - id: alpha\n") as server:
        source = server.url.removeprefix("http://") + "/skills"
        result = CliRunner().invoke(cli, ["generate", source])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"# A failure pack for skill 'alpha', written by `mockskill generate {source}`."
    )


def test_a_listing_file_with_relative_descriptor_urls_exits_3_with_a_sentence(
    tmp_path: Path,
) -> None:
    # (relative to the URL a listing was read from, which a file or stdin has not)
    result, out = _generate(tmp_path, {"skills": [{"descriptor_url": "/skills/alpha"}]})
    assert result.exit_code == 3
    assert "names descriptor_url '/skills/alpha', relative" in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()
    result, out = _generate(tmp_path, {"skills": [{"descriptor_url": "http://[::1/skills/a"}]})
    assert result.exit_code == 3
    assert "names 'http://[::1/skills/a': Invalid IPv6 URL" in result.stderr


def test_a_listing_with_an_invalid_descriptor_names_it(tmp_path: Path) -> None:
    scenario = "name: two\nskills:\n  - id: alpha\n  - id: broken\n    descriptor: {id: null}\n"
    with Server(scenario) as server:
        result = CliRunner().invoke(cli, ["generate", f"{server.url}/skills"])
        url = server.url
    assert result.exit_code == 1
    assert f"{url}/skills/broken:" in result.stderr
    assert json.loads(result.stdout)["error"]["details"]["violations"][0]["field"] == "/id"


def test_a_valid_descriptor_mockskill_cannot_serve_says_why_and_writes_nothing(
    tmp_path: Path,
) -> None:
    # (the protocol allows any string as an id; a URL path segment of mockskill's does not)
    result, out = _generate(tmp_path, {**TRANSLATE, "id": "-my skill/1"})
    assert result.exit_code == 1
    assert "the pack for" in result.stderr
    assert "skills[0].id: expected a name of letters, digits and . _ ~ -" in result.stderr
    assert "1 problem in 1 file" in result.stderr, "the id, not the name made from it too"
    assert not out.exists()
    # its positions are the pack's, which is not written: not the --out file's
    assert "<the pack for skill.json>:" in result.stderr
    assert str(out) not in result.stderr


def test_a_lone_surrogate_no_utf_8_can_carry_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    # JSON's "\ud800" escape reads as a lone surrogate: YAML (and UTF-8) has no such character
    result, out = _generate(tmp_path, {**TRANSLATE, "description": "a\ud800b"})
    assert result.exit_code == 1
    assert "would not load" in result.stderr
    assert "\\ud800-\\udfff are no characters on their own" in result.stderr
    assert not out.exists()


def test_the_bundled_pack_matches_the_scenario_schema() -> None:
    # (an editor checking the pack with the published schema finds nothing to say)
    import jsonschema
    import yaml

    from mockskill.scenario.schema import scenario_schema

    for pack in ("translate-failures.yaml", "report-failures.yaml"):
        document = yaml.safe_load((EXAMPLES / pack).read_text())
        jsonschema.validate(document, scenario_schema())
