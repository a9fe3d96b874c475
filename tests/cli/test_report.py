"""``mockskill report [URL]``: the audit on a terminal, and its exit codes, against real servers."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner, Result
from conftest import EVERY_FAILURE

from mockskill import Server
from mockskill.cli import cli
from mockskill.cli.report import scenario_sources

Serve = Callable[..., Server]

SCENARIO = """
    name: cli
    skills:
      - id: down
        invoke: {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 300, max_attempts: 2}}
      - id: locked
        invoke: {error: AUTH_REQUIRED}
      - id: fine
      - id: limited        # one at once, then one a second
        rate_limit: {capacity: 1, refill: 1}
"""


@pytest.fixture
def server(serve: Serve) -> Server:
    return serve(SCENARIO)


def new_session() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def play(server: Server, session: str, *skills: str) -> list[int]:
    headers = {"Mockskill-Session": session}
    return [
        requests.post(server.invoke_url(skill), headers=headers, timeout=10).status_code
        for skill in skills
    ]


def report(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["report", *args], env=env)


def test_the_table_shows_coverage_retries_and_findings(server: Server) -> None:
    session = new_session()
    assert play(server, session, "down", "down", "down", "locked", "fine") == [503] * 3 + [401, 200]
    result = report(server.url, "--session", session)
    assert result.exit_code == 0, result.output  # findings fail only when asked to
    out = result.stdout
    ids = [e.id for e in server.state.journal(session)]
    assert f"mockskill retry audit of {server.url}" in out
    assert f"session '{session}': 5 requests, 1 retried chain, 2 findings" in out
    assert "coverage: 2 of 7 categories, 0 of 5 transport faults" in out
    assert "met:     AUTH_REQUIRED x1, ENDPOINT_UNREACHABLE x3" in out
    assert "missing: VALIDATION_ERROR, PERMISSION_DENIED" in out
    assert "POST /skills/down/invoke" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("      ")]
    by_id = {int(r[0]): r for r in rows if r[0].isdigit()}
    assert by_id[ids[0]][2:5] == ["503", "ENDPOINT_UNREACHABLE", "-"]
    assert by_id[ids[1]][-1] == "1:retry-too-soon"  # owed 300 ms, waited a few
    assert by_id[ids[1]][-2] == "300"
    assert by_id[ids[2]][-2:] == ["1:retry-too-soon", "2:too-many-attempts"]
    assert "1. retry-too-soon: 2 retries sooner than the advised delay" in out
    assert "2. too-many-attempts: 3 attempts where the advice allows 2" in out
    for label in ("at:", "found:", "expected:", "fix:"):
        assert sum(line.strip().startswith(label) for line in out.splitlines()) == 2
    assert out.rstrip().endswith("1 session, 2 findings; coverage complete in 0 of 1")


def test_fail_on_findings_exits_1_only_with_findings(server: Server) -> None:
    bad, good = new_session(), new_session()
    play(server, bad, "locked", "locked")
    play(server, good, "locked", "fine")
    failed = report(server.url, "--session", bad, "--fail-on-findings")
    assert failed.exit_code == 1
    assert "mockskill: 1 finding (--fail-on-findings)" in failed.stderr
    assert "non-retryable-retried" in failed.stdout
    passed = report(server.url, "--session", good, "--fail-on-findings")
    assert passed.exit_code == 0, passed.output
    assert f"session '{good}': 2 requests, 0 retried chains, clean" in passed.stdout


def test_require_coverage_exits_1_until_everything_was_met(server: Server, bundled: Server) -> None:
    session = new_session()
    play(server, session, "locked")
    partial = report(server.url, "--session", session, "--require-coverage")
    assert partial.exit_code == 1
    assert f"session '{session}' has not met VALIDATION_ERROR, PERMISSION_DENIED" in partial.stderr
    assert "TRUNCATED_BODY" in partial.stderr
    # The bundled scenarios have a skill for every category and fault: walk them all.
    walker = new_session()
    headers = {"Mockskill-Session": walker, "Skill-Protocol-Version": "1.0.0"}
    requests.get(bundled.skill_url("invalid-descriptor"), headers=headers, timeout=10)
    for skill in EVERY_FAILURE:  # the transport faults raise: what a consumer meets
        with contextlib.suppress(requests.RequestException):
            _ = requests.post(bundled.invoke_url(skill), headers=headers, timeout=10).content
    complete = report(bundled.url, "--session", walker, "--require-coverage")
    assert complete.exit_code == 0, complete.output
    assert "coverage: 7 of 7 categories, 5 of 5 transport faults (complete)" in complete.stdout


def test_require_names_the_categories_and_faults_a_gate_needs(server: Server) -> None:
    session = new_session()
    play(server, session, "locked", "down")
    met = report(
        server.url, "--session", session, "--require", "AUTH_REQUIRED,ENDPOINT_UNREACHABLE"
    )
    assert met.exit_code == 0, met.output
    unmet = report(
        server.url,
        "--session",
        session,
        "--require",
        "AUTH_REQUIRED",
        "--require",
        "EMPTY_RESPONSE",
    )
    assert unmet.exit_code == 1
    assert f"session '{session}' has not met EMPTY_RESPONSE" in unmet.stderr
    typo = report(server.url, "--require", "AUTH_REQUIRD")
    assert typo.exit_code == 2
    assert "not a category or a transport fault: AUTH_REQUIRD" in typo.output


def test_require_rate_limited_asks_for_a_rate_limit_answer(server: Server) -> None:
    limited, plain = new_session(), new_session()
    assert play(server, limited, "limited", "limited") == [200, 429]
    assert play(server, plain, "limited") == [200]
    met = report(server.url, "--session", limited, "--require", "RATE_LIMITED")
    assert met.exit_code == 0, met.output
    assert "rate-limit answers: RATE_LIMITED x1" in met.stdout
    unmet = report(server.url, "--session", plain, "--require", "RATE_LIMITED")
    assert unmet.exit_code == 1
    assert f"session '{plain}' has not met RATE_LIMITED" in unmet.stderr
    typo = report(server.url, "--require", "rate-limited")
    assert typo.exit_code == 2
    assert "did you mean 'RATE_LIMITED'?" in typo.output


def test_a_gate_on_a_session_that_sent_nothing_fails(server: Server) -> None:
    result = report(server.url, "--session", "nobody", "--require", "AUTH_REQUIRED")
    assert result.exit_code == 1
    assert "session 'nobody': 0 requests" in result.stdout


def test_the_table_does_not_call_a_session_that_sent_nothing_clean(server: Server) -> None:
    # Without a gate the exit code is 0: the table itself must not show it green.
    result = report(server.url, "--session", "nobody")
    assert result.exit_code == 0
    assert "session 'nobody': 0 requests, 0 retried chains, nothing to audit" in result.stdout
    assert "clean" not in result.stdout


def test_without_a_gate_a_session_that_sent_nothing_gets_the_gates_did_you_mean(
    server: Server,
) -> None:
    session = new_session()
    play(server, session, "fine")
    mistyped = session[:-1] + "x"
    result = report(server.url, "--session", mistyped)
    assert result.exit_code == 0
    said = f"made no request (is the Mockskill-Session header sent? did you mean {session!r}?)"
    assert f"session {mistyped!r}: 0 requests, 0 retried chains, nothing to audit\n  {said}" in (
        result.stdout
    )
    gated = report(server.url, "--session", mistyped, "--fail-on-findings")
    assert f"session {mistyped!r} {said}" in gated.stderr


def test_require_names_the_category_it_takes_a_misspelling_for(server: Server) -> None:
    result = report(server.url, "--require", "AUTH_REQIRED,EMPTY_RESPONSE,auth_requird")
    assert result.exit_code == 2
    assert "AUTH_REQIRED (did you mean 'AUTH_REQUIRED'?)" in result.stderr
    assert "auth_requird (did you mean 'AUTH_REQUIRED'?)" in result.stderr


def test_fail_on_findings_fails_on_a_session_that_sent_nothing(server: Server) -> None:
    session = new_session()
    play(server, session, "fine")
    mistyped = report(server.url, "--session", session[:-1] + "x", "--fail-on-findings")
    assert mistyped.exit_code == 1
    assert f"session {session[:-1] + 'x'!r} made no request" in mistyped.stderr
    assert "is the Mockskill-Session header sent?" in mistyped.stderr
    assert f"did you mean {session!r}?" in mistyped.stderr
    assert report(server.url, "--session", session, "--fail-on-findings").exit_code == 0


def test_fail_on_findings_fails_on_a_server_that_recorded_nothing(serve: Serve) -> None:
    result = report(serve(SCENARIO).url, "--fail-on-findings")
    assert result.exit_code == 1
    assert "mockskill: no session made a request" in result.stderr


def test_json_prints_the_admin_report(server: Server) -> None:
    session = new_session()
    play(server, session, "locked", "locked")
    result = report(server.url, "--session", session, "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    served = requests.get(
        f"{server.url}/__admin/report", params={"session": session}, timeout=10
    ).json()
    assert {**printed, "generated": 0} == {**served, "generated": 0}
    assert printed["sessions"][0]["findings"][0]["rule"] == "non-retryable-retried"


def test_a_server_that_cannot_be_reached_exits_3() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        result = report(f"http://127.0.0.1:{port}")
    assert result.exit_code == 3
    assert f"mockskill: cannot reach http://127.0.0.1:{port}/__admin/report" in result.stderr


def test_the_admin_token_is_sent_from_the_option_or_the_environment(serve: Serve) -> None:
    server = serve(SCENARIO, admin_token="sesame")
    refused = report(server.url)
    assert refused.exit_code == 3
    assert "answered 401" in refused.stderr
    assert refused.stderr.endswith(
        "the server asks for its admin token, and none was given;"
        " give it with --admin-token or MOCKSKILL_ADMIN_TOKEN\n"
    )
    wrong = report(server.url, "--admin-token", "open")
    assert wrong.exit_code == 3
    assert wrong.stderr.endswith(
        "answered 401: the server refused the admin token given (not its token);"
        " check --admin-token or MOCKSKILL_ADMIN_TOKEN\n"
    )
    assert "none was given" not in wrong.stderr
    assert report(server.url, "--admin-token", "sesame").exit_code == 0
    assert report(server.url, env={"MOCKSKILL_ADMIN_TOKEN": "sesame"}).exit_code == 0


def test_the_command_in_a_real_process_exits_1_on_findings(server: Server) -> None:
    session = new_session()
    play(server, session, "down", "down")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mockskill",
            "report",
            server.url,
            "--session",
            session,
            "--fail-on-findings",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "retry-too-soon" in done.stdout
    assert "mockskill: 1 finding (--fail-on-findings)" in done.stderr


def test_the_url_may_come_without_a_scheme_as_curl_takes_it(server: Server) -> None:
    result = report(f"localhost:{server.port}")
    assert result.exit_code == 0, result.output
    assert f"mockskill retry audit of http://localhost:{server.port}" in result.stdout


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:8080", "localhost:99999", "http://"])
def test_a_url_that_is_not_http_is_a_usage_error(url: str) -> None:
    result = report(url)
    assert result.exit_code == 2, result.output
    assert "expected an http(s) URL" in result.output


def test_a_mistyped_option_is_a_usage_error(server: Server) -> None:
    assert report(server.url, "--fail-on-finding").exit_code == 2


def test_the_url_comes_from_mockskill_url_as_for_the_pytest_plugin(server: Server) -> None:
    session = new_session()
    play(server, session, "down", "down")
    result = report("--session", session, "--fail-on-findings", env={"MOCKSKILL_URL": server.url})
    assert result.exit_code == 1, result.output
    assert f"mockskill retry audit of {server.url}" in result.stdout
    assert "retry-too-soon" in result.stdout


def test_the_url_defaults_to_the_default_port_of_serve() -> None:
    result = CliRunner().invoke(cli, ["report", "--help"])
    assert result.exit_code == 0
    assert "http://127.0.0.1:8080" in result.output


# -- --format: the report as CI systems read it -----------------------------------------

FORMATS = ("text", "json", "junit", "sarif", "github")


def test_the_command_line_offers_every_format_there_is() -> None:
    from mockskill.audit.formats import FORMATS as WRITERS
    from mockskill.cli.main import REPORT_FORMATS

    assert REPORT_FORMATS == FORMATS == tuple(WRITERS)


@pytest.mark.parametrize("form", FORMATS)
def test_the_gates_hold_in_every_format(server: Server, form: str) -> None:
    bad, good = new_session(), new_session()
    play(server, bad, "locked", "locked")
    play(server, good, "fine")
    failed = report(server.url, "--session", bad, "--format", form, "--fail-on-findings")
    assert failed.exit_code == 1
    assert "mockskill: 1 finding (--fail-on-findings)" in failed.stderr
    assert "non-retryable-retried" in failed.stdout
    passed = report(server.url, "--session", good, "--format", form, "--fail-on-findings")
    assert passed.exit_code == 0, passed.output
    unmet = report(server.url, "--session", good, "--format", form, "--require", "AUTH_REQUIRED")
    assert unmet.exit_code == 1
    assert f"session '{good}' has not met AUTH_REQUIRED" in unmet.stderr
    silent = report(server.url, "--session", "nobody", "--format", form, "--fail-on-findings")
    assert silent.exit_code == 1
    assert "session 'nobody' made no request" in silent.stderr


@pytest.mark.parametrize(
    ("form", "starts"),
    [
        ("junit", "<?xml version='1.0' encoding='utf-8'?>\n<testsuites "),
        (
            "sarif",
            '{"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0"',
        ),
        ("github", "::error title=non-retryable-retried ("),
    ],
)
def test_each_format_prints_the_report_alone_on_standard_output(
    server: Server, form: str, starts: str
) -> None:
    session = new_session()
    play(server, session, "locked", "locked")
    result = report(server.url, "--session", session, "--format", form, "--fail-on-findings")
    assert result.stdout.startswith(starts), result.stdout
    assert "mockskill:" not in result.stdout  # the gate's words go to standard error


def test_an_unknown_format_is_a_usage_error_naming_the_formats(server: Server) -> None:
    result = report(server.url, "--format", "xunit")
    assert result.exit_code == 2
    assert "'xunit' is not one of 'text', 'json', 'junit', 'sarif', 'github'" in result.stderr


def test_json_is_the_older_spelling_of_format_json(server: Server) -> None:
    session = new_session()
    play(server, session, "fine")
    older = report(server.url, "--session", session, "--json")
    newer = report(server.url, "--session", session, "--format", "json")
    assert json.loads(older.stdout)["sessions"][0]["requests"] == 1
    assert {**json.loads(older.stdout), "generated": 0} == {
        **json.loads(newer.stdout),
        "generated": 0,
    }
    both = report(server.url, "--json", "--format", "json")
    assert both.exit_code == 0
    clash = report(server.url, "--json", "--format", "junit")
    assert clash.exit_code == 2
    assert "--json asks for --format json; --format junit asks otherwise" in clash.stderr


def test_sarif_locates_each_result_at_its_skill_s_scenario_file(bundled: Server) -> None:
    session = new_session()
    play(bundled, session, "auth-required", "auth-required")
    result = report(bundled.url, "--session", session, "--format", "sarif")
    (finding,) = json.loads(result.stdout)["runs"][0]["results"]
    physical = finding["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"].endswith("scenarios/catalog.yaml")
    written = (Path(__file__).resolve().parents[2] / "scenarios" / "catalog.yaml").read_text()
    line = written.splitlines().index("  - id: auth-required") + 1
    assert physical["region"] == {"startLine": line}


def test_scenario_files_are_named_from_the_current_folder_or_as_file_uris(
    bundled: Server, server: Server, tmp_path: Path
) -> None:
    root = Path(__file__).resolve().parents[2]
    here = scenario_sources(bundled.url, here=root)["auth-required"]
    assert here.uri == "scenarios/catalog.yaml"
    elsewhere = scenario_sources(bundled.url, here=tmp_path)["auth-required"]
    assert elsewhere.uri == (root / "scenarios" / "catalog.yaml").as_uri()
    assert here.line == elsewhere.line
    assert here.line is not None
    written = (root / "scenarios" / "catalog.yaml").read_text().splitlines()
    assert written[here.line - 1] == "  - id: auth-required"
    assert scenario_sources(server.url) == {}  # loaded from text: no file to point at
