"""The ``mockskill`` command: validate, check-descriptor, schema, and no tracebacks."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from chapter_example import CHAPTER_VIOLATIONS
from click.testing import CliRunner

from mockskill import Server, __version__, bundled_path
from mockskill.cli import cli

BAD = (Path(__file__).parent.parent / "data" / "bad.yaml").read_text()


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return path


def test_validate_accepts_the_bundled_scenarios() -> None:
    from mockskill import bundled_path

    result = CliRunner().invoke(cli, ["validate", str(bundled_path())])
    assert result.exit_code == 0, result.output
    assert re.match(r"ok: \d+ scenarios, \d+ skills", result.output)


def test_validate_counts_in_the_singular_too(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("name: one\nskills:\n  - id: echo\n")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output == "ok: 1 scenario, 1 skill\n"


def test_validate_prints_every_problem_and_exits_1(bad_file: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(bad_file)])
    assert result.exit_code == 1
    assert f"{bad_file}:5:14: skills[0].invoke.error:" in result.output
    assert "did you mean 'AUTH_REQUIRED'?" in result.output
    assert f"{bad_file}:6:7: skills[0].invoke.tims:" in result.output
    assert "2 problems in 1 file; nothing was loaded." in result.output
    assert "Traceback" not in result.output


def test_max_delay_lowers_the_longest_wait_a_scenario_may_script(tmp_path: Path) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text("skills:\n  - id: s\n    invoke: {delay: 5000, json: 1}\n")
    assert CliRunner().invoke(cli, ["validate", str(path)]).exit_code == 0
    result = CliRunner().invoke(cli, ["validate", "--max-delay", "1000", str(path)])
    assert result.exit_code == 1
    assert "skills[0].invoke.delay: expected a whole number from 0 to 1000 ms" in result.output
    assert "longer delays are refused, not clamped" in result.output


def test_validate_of_a_missing_path_says_so_and_exits_3_as_check_descriptor(
    tmp_path: Path, bad_file: Path
) -> None:
    """docs/cli.md's table: 3 when what was to be checked could not be read."""
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 3
    assert "nothing there" in result.output
    missing_descriptor = CliRunner().invoke(cli, ["check-descriptor", str(tmp_path / "d.json")])
    assert missing_descriptor.exit_code == 3
    # with an invalid file beside it: both said, and still what could not be read
    both = CliRunner().invoke(cli, ["validate", str(bad_file), str(tmp_path / "nope.yaml")])
    assert both.exit_code == 3
    assert "nothing there" in both.output
    assert "did you mean 'AUTH_REQUIRED'?" in both.output


def test_validate_of_an_empty_folder_is_invalid_not_unreadable(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "expected *.yaml files, found none" in result.output


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_validate_refuses_a_fifo_without_hanging_or_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("skills: [{id: good}]\n", encoding="utf-8")
    os.mkfifo(tmp_path / "pipe.yaml")
    result = subprocess.run(
        [sys.executable, "-m", "mockskill", "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 1
    assert f"{tmp_path / 'pipe.yaml'}:1:1: (file): expected a scenario file or folder" in (
        result.stderr
    )
    assert "found a FIFO (named pipe) there" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


NOT_UNIFIED = (
    "skills:\n  - id: s\n    invoke: {status: 400, json: {error: input.lang is required}}\n"
)


def test_validate_warns_about_an_error_answer_outside_the_unified_body(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(NOT_UNIFIED, encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 0  # a provider broken on purpose is a scenario too
    assert f"warning: {path}:3:33: skills[0].invoke.json: expected the unified error body" in (
        result.output
    )
    assert "ok: 1 scenario, 1 skill (1 warning)" in result.output


def test_validate_strict_fails_on_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(NOT_UNIFIED, encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", "--strict", str(path)])
    assert result.exit_code == 1
    assert "warning: " in result.output
    assert "1 scenario, 1 skill (1 warning); --strict fails on warnings" in result.output
    assert CliRunner().invoke(cli, ["validate", "--strict", str(bundled_path())]).exit_code == 0


def test_serve_refuses_an_invalid_file_with_the_same_report(bad_file: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", str(bad_file), "--port", "0"])
    assert result.exit_code == 1
    assert "did you mean 'AUTH_REQUIRED'?" in result.output
    assert "Traceback" not in result.output


def test_schema_prints_the_published_json_schema() -> None:
    from mockskill.scenario.schema import scenario_schema

    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == scenario_schema()


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_check_descriptor_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(
        json.dumps(
            {
                "protocol_version": "1.0.0",
                "id": "translate",
                "name": "Translate",
                "capability_type": "api",
                "endpoint": {"url": "https://skills.example/translate/invoke"},
            }
        )
    )
    result = CliRunner().invoke(cli, ["check-descriptor", str(path)])
    assert result.exit_code == 0, result.output
    assert "a valid Skill Descriptor" in result.output


def test_check_descriptor_lists_every_violation_from_stdin() -> None:
    broken = {
        "protocol_version": "1.0.0",
        "id": "t",
        "name": "T",
        "capability_type": "unknown_type",
        "endpoint": {},
    }
    result = CliRunner().invoke(cli, ["check-descriptor", "-"], input=json.dumps(broken))
    assert result.exit_code == 1
    assert json.loads(result.output)["error"]["details"]["violations"] == CHAPTER_VIOLATIONS


def test_check_descriptor_fetches_a_url(bundled: Server) -> None:
    bad = CliRunner().invoke(cli, ["check-descriptor", bundled.skill_url("invalid-descriptor")])
    assert bad.exit_code == 1
    assert json.loads(bad.output) == {
        "error": {
            "code": "VALIDATION_ERROR",
            "message": "Skill descriptor validation failed",
            "details": {"violations": CHAPTER_VIOLATIONS},
        }
    }
    good = CliRunner().invoke(cli, ["check-descriptor", bundled.skill_url("translate")])
    assert good.exit_code == 0, good.output


def test_check_descriptor_exits_3_when_it_could_not_read(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "nan.json").write_text('{"id": "x", "rate_limit": NaN}')  # Python's, not JSON
    for source, why in [
        (str(tmp_path / "missing.json"), "No such file or directory"),
        (str(tmp_path / "bad.json"), "is not JSON"),
        (str(tmp_path / "nan.json"), "NaN is not JSON"),
    ]:
        result = CliRunner().invoke(cli, ["check-descriptor", source])
        assert result.exit_code == 3, result.output
        assert source in result.stderr
        assert why in result.stderr
        assert "Traceback" not in result.output


def test_check_descriptor_exits_3_on_a_refused_connection() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/skills/translate"
        result = CliRunner().invoke(cli, ["check-descriptor", url])
    assert result.exit_code == 3
    assert f"cannot reach {url}" in result.stderr
    assert "Connection refused" in result.stderr


def test_check_descriptor_shows_the_body_of_an_http_error(bundled: Server) -> None:
    result = CliRunner().invoke(cli, ["check-descriptor", bundled.skill_url("transalte")])
    assert result.exit_code == 3
    assert f"GET {bundled.skill_url('transalte')} answered 404" in result.stderr
    assert '"code": "SKILL_NOT_FOUND"' in result.stderr
    assert '"did_you_mean": ["translate"]' in result.stderr


def test_check_descriptor_takes_a_url_without_a_scheme_as_curl_does(bundled: Server) -> None:
    schemeless = f"localhost:{bundled.port}/skills/translate"
    result = CliRunner().invoke(cli, ["check-descriptor", schemeless])
    assert result.exit_code == 0, result.output
    assert f"{schemeless}: a valid Skill Descriptor" in result.stdout
    invalid = CliRunner().invoke(
        cli, ["check-descriptor", f"localhost:{bundled.port}/skills/invalid-descriptor"]
    )
    assert invalid.exit_code == 1


@pytest.mark.parametrize("args", [[], ["ftp://localhost/descriptor.json"], ["a", "b"]])
def test_check_descriptor_exits_2_on_a_mistyped_command_line(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["check-descriptor", *args])
    assert result.exit_code == 2, result.output


def test_max_delay_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text("skills:\n  - id: s\n    invoke: {delay: 5000, json: 1}\n")
    result = CliRunner().invoke(cli, ["validate", str(path)], env={"MOCKSKILL_MAX_DELAY": "1000"})
    assert result.exit_code == 1
    assert "expected a whole number from 0 to 1000 ms" in result.output
