"""The pytest plugin, run on test modules of its own with pytester (also under xdist)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpcore  # noqa: F401  (shared with in-process inner runs: see below)
import pytest
import requests  # imported once here: in-process inner runs then share it
import trustme  # noqa: F401  (and so is the local CA's key maker: see below)
import xmlschema
from junitparser import Failure, JUnitXml, TestSuite
from redis_server import RedisServer

# The admin app's modules (Flask among them) are imported here too: a server of this
# process builds its admin app on its first /__admin request, which may come from an
# in-process inner run; pytester then drops the modules first imported during that run,
# and a later run's Flask is a new module whose request context the app never pushes
# ("Working outside of request context", when this file runs alone). Likewise the TLS
# modules: cryptography's compiled core keeps the classes of its first import, and a
# curve of a second import of its Python modules is not one of them ("curve must be an
# EllipticCurve instance" in a later HTTPS server's local CA, in this process).
# And httpcore (imported at the top): httpx imports it on its first request and maps its
# errors by the classes of that import; an inner run that imported it first would leave
# this process's httpx mapping the classes of a dropped module, and a later
# httpx.ReadError would come out as httpcore's own (docs/pytest.md's stream test reads
# with httpx).
import mockskill.admin.blueprint
import mockskill.transport.tls  # noqa: F401
from mockskill import Server

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
# Inner runs: plugins of this machine that would get in the way stay out, and so do the
# ones only this project's own tests bring (schemathesis, hypothesis, and anyio's with httpx:
# pytest rewrites the asserts of all of a plugin's package, which costs an inner run seconds,
# in each xdist worker; a user's project would not have them).
QUIET = (
    *("-p", "no:benchmark", "-p", "no:randomly", "-p", "no:cacheprovider"),
    *("-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:anyio"),
)

HEADER = """
import pytest
import requests
"""


@pytest.fixture(autouse=True)
def _no_remote_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs start their own server unless a test says otherwise, whatever the shell says."""
    monkeypatch.delenv("MOCKSKILL_URL", raising=False)
    monkeypatch.delenv("MOCKSKILL_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("MOCKSKILL_STATE", raising=False)


def module(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=module(body))
    return pytester.runpytest(*QUIET, *args)


def test_a_test_gets_its_own_session_of_the_bundled_server(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_flaky(mockskill, mockskill_server):
            assert mockskill.server is mockskill_server
            assert mockskill.headers == {"Mockskill-Session": mockskill.name}
            assert mockskill.url == mockskill_server.url
            assert mockskill.skill_url("flaky") == mockskill.url + "/skills/flaky"
            statuses = [
                requests.post(mockskill.invoke_url("flaky"), headers=mockskill.headers).status_code
                for _ in range(3)
            ]
            assert statuses == [503, 503, 200]
            assert [e.status for e in mockskill.journal()] == [503, 503, 200]
            assert {e.session for e in mockskill.journal()} == {mockskill.name}
            mockskill.reset()
            assert mockskill.journal() == []
            again = requests.post(mockskill.invoke_url("flaky"), headers=mockskill.headers)
            assert again.status_code == 503
        """,
    )
    result.assert_outcomes(passed=1)


def test_each_test_sees_sequences_from_their_start(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        names = []

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_flaky(mockskill, n):
            names.append(mockskill.name)
            statuses = [
                requests.post(mockskill.invoke_url("flaky"), headers=mockskill.headers).status_code
                for _ in range(3)
            ]
            assert statuses == [503, 503, 200]
            assert len(mockskill.journal()) == 3
            assert len(set(names)) == len(names)
            assert "test_flaky" in mockskill.name
        """,
    )
    result.assert_outcomes(passed=3)


def test_an_unmatched_request_fails_a_passing_test_with_its_near_misses(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_typo(mockskill):
            requests.get(mockskill.invoke_url("flaky"), headers=mockskill.headers)

        def test_other_sessions_do_not_count(mockskill):
            requests.get(mockskill.url + "/nowhere", headers={"Mockskill-Session": "someone"})
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_typo _*",
            "mockskill: 1 request of session 'test_inner.py-test_typo-*' went wrong:",
            "  GET /skills/flaky/invoke matched nothing (404)",
            "    near miss POST /skills/<id>/invoke: method GET is not POST",
            "  (a request the test means to match nothing, to test SKILL_NOT_FOUND handling say?"
            " call mockskill.allow_unmatched() in the test, or mark it"
            " @pytest.mark.mockskill(allow_unmatched=True))",
            "FAILED test_inner.py::test_typo - mockskill: 1 request*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_on_a_server_of_its_own_every_unmatched_request_fails_the_test(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        OWN = "name: own\\nskills:\\n  - id: echo\\n"

        @pytest.mark.mockskill(scenarios=OWN)
        def test_without_the_header(mockskill):
            assert requests.post(mockskill.invoke_url("echo")).status_code == 200
            assert requests.post(mockskill.invoke_url("flaky")).status_code == 404

        @pytest.mark.mockskill(scenarios=OWN)
        def test_in_another_session(mockskill):
            requests.get(mockskill.url + "/nowhere", headers={"Mockskill-Session": "other"})
        """,
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_without_the_header _*",
            "mockskill: 1 request of session 'test_inner.py-test_without_the_header-*' went wrong:",
            "  POST /skills/flaky/invoke matched nothing (404), sent without a Mockskill-Session"
            " header",
            "*call mockskill.allow_unmatched() in the test*",
            "*_ test_in_another_session _*",
            "  GET /nowhere matched nothing (404), of session 'other'",
        ]
    )


def test_on_the_run_s_server_a_request_without_the_header_counts_for_the_test_that_sent_it(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_sends_one_without_the_header(mockskill):
            requests.get(mockskill.url + "/nowhere")

        def test_after_it_is_not_blamed(mockskill):
            assert requests.get(mockskill.skill_url("flaky")).status_code == 200
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_sends_one_without_the_header _*",
            "  GET /nowhere matched nothing (404), sent without a Mockskill-Session header",
            "FAILED test_inner.py::test_sends_one_without_the_header - mockskill: 1 req*",
        ]
    )


def test_a_test_that_means_its_unmatched_requests_says_so(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_by_the_session(mockskill):
            mockskill.allow_unmatched()
            nope = mockskill.skill_url("nope")
            assert requests.get(nope, headers=mockskill.headers).status_code == 404
            assert requests.get(nope).status_code == 404
            assert mockskill.problems() == []

        OWN = "name: own\\nskills:\\n  - id: echo\\n"

        @pytest.mark.mockskill(scenarios=OWN, allow_unmatched=True)
        def test_by_the_marker(mockskill):
            assert requests.get(mockskill.skill_url("nope")).status_code == 404

        @pytest.mark.mockskill(allow_unmatched=True)
        def test_refusals_still_fail(mockskill):
            headers = {**mockskill.headers, "Mockskill-Error": "NO_SUCH"}
            requests.post(mockskill.invoke_url("flaky"), headers=headers)
        """,
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_inner.py::test_refusals_still_fail - *"])


def test_an_exhausted_sequence_fails_the_test_unless_the_marker_says_not_to_check(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        SCENARIO = (
            "name: once\\nskills:\\n  - id: once\\n"
            "    invoke: {end: fail, steps: [{json: {}}]}\\n"
        )

        @pytest.mark.mockskill(scenarios=SCENARIO)
        def test_twice(mockskill):
            for _ in range(2):
                requests.post(mockskill.invoke_url("once"), headers=mockskill.headers)

        @pytest.mark.mockskill(scenarios=SCENARIO, check=False)
        def test_twice_on_purpose(mockskill):
            for _ in range(2):
                requests.post(mockskill.invoke_url("once"), headers=mockskill.headers)
            assert len(mockskill.problems()) == 1
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["  POST /skills/once/invoke was answered 500 MOCKSKILL_SEQUENCE_EXHAUSTED"]
    )


def test_a_failing_test_keeps_its_failure_and_shows_the_problems_beside_it(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_broken(mockskill):
            requests.delete(mockskill.skill_url("flaky"), headers=mockskill.headers)
            assert 1 + 1 == 3, "the test's own failure"
        """,
    )
    result.assert_outcomes(failed=1)  # once, and no error at teardown
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: the test's own failure",
            "*- mockskill -*",
            "  DELETE /skills/flaky matched nothing (404)",
            "    near miss GET /skills/<id>: method DELETE is not GET",
            "FAILED test_inner.py::test_broken - AssertionError: the test's own failure",
        ]
    )


def test_requests_from_a_later_fixture_teardown_are_checked_too(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        @pytest.fixture
        def cleanup(mockskill):
            yield
            requests.get(mockskill.url + "/after", headers=mockskill.headers)

        def test_fine(cleanup):
            pass
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_fine*", "  GET /after matched nothing*"]
    )


def test_the_marker_serves_its_own_scenarios_on_a_server_of_its_own(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", more="name: more\nskills:\n  - id: more\n")
    result = run(
        pytester,
        """
        own = []

        @pytest.mark.mockskill(scenarios=["name: own\\nskills:\\n  - id: echo\\n", "more.yaml"])
        def test_own(mockskill, mockskill_server):
            own.append(mockskill.server)
            assert mockskill.server is not mockskill_server
            assert requests.post(mockskill.invoke_url("echo")).status_code == 200
            assert requests.get(mockskill.skill_url("more")).status_code == 200
            assert requests.get(mockskill.skill_url("flaky")).status_code == 404
            mockskill.reset()

        def test_stopped_after_the_test():
            with pytest.raises(Exception, match="not started"):
                own[0].url
        """,
    )
    result.assert_outcomes(passed=2)


def test_a_bad_scenario_in_the_marker_is_a_readable_setup_error(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        BAD = "name: bad\\nskills:\\n  - id: echo\\n    invoke: {eror: AUTH_REQUIRED}\\n"

        @pytest.mark.mockskill(scenarios=BAD)
        def test_bad(mockskill):
            pass

        @pytest.mark.mockskill(scenarios=["missing.yaml"])
        def test_missing(mockskill):
            pass

        @pytest.mark.mockskill("missing.yaml")
        def test_positional(mockskill):
            pass
        """,
    )
    result.assert_outcomes(errors=3)
    output = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.mockskill: the scenarios cannot be served:",
            "mark.mockskill scenarios[[]0[]]:4:*: skills[[]0[]].invoke.eror: *"
            "did you mean 'error'?",
            "1 problem in 1 file; nothing was loaded.",
        ]
    )
    assert re.search(r"missing\.yaml:1:1: \(file\): expected a scenario file", output)
    assert (
        "takes only keyword arguments scenarios, check, allow_unmatched; found 'missing.yaml'"
        in output
    )
    assert "Traceback" not in output
    assert "During handling" not in output


def test_scenarios_from_the_command_line_and_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", cli="name: cli\nskills:\n  - id: from-cli\n")
    pytester.mkdir("conf")
    pytester.path.joinpath("conf", "ini.yaml").write_text("name: ini\nskills:\n  - id: from-ini\n")
    pytester.makeini("[pytest]\nmockskill_scenarios =\n    conf/ini.yaml\n")
    body = """
        def test_which(mockskill, request):
            served = [s["id"] for s in requests.get(mockskill.url + "/skills").json()["skills"]]
            assert served == [request.config.getoption("expected")]
        """
    pytester.makeconftest("def pytest_addoption(parser):\n    parser.addoption('--expected')\n")
    pytester.makepyfile(test_inner=module(body))
    pytester.runpytest(*QUIET, "--expected", "from-ini").assert_outcomes(passed=1)
    result = pytester.runpytest(
        *QUIET, "--mockskill-scenarios", "cli.yaml", "--expected", "from-cli"
    )
    result.assert_outcomes(passed=1)


def test_a_bad_configured_scenario_stops_the_run_with_its_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", bad="name: bad\nskills:\n  - id: echo\n    tims: 2\n")
    pytester.makepyfile(test_inner=module("def test_never(mockskill): pass\n"))
    result = pytester.runpytest(*QUIET, "--mockskill-scenarios", "bad.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --mockskill-scenarios: the scenarios cannot be served:",
            "bad.yaml:4:5: skills[[]0[]].tims: expected a known key, found unknown key 'tims'*",
            "1 problem in 1 file; nothing was loaded.",
        ]
    )


def test_the_marker_passes_strict_markers(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        @pytest.mark.mockskill(check=False)
        def test_marked(mockskill):
            requests.get(mockskill.url + "/nowhere", headers=mockskill.headers)
        """,
        "--strict-markers",
    )
    result.assert_outcomes(passed=1)
    assert "mockskill(scenarios=" in pytester.runpytest(*QUIET, "--markers").stdout.str()


PARALLEL = """
import concurrent.futures

@pytest.mark.parametrize("n", range(8))
def test_flaky(mockskill, n):
    def attempt(_):
        return requests.post(
            mockskill.invoke_url("flaky-cycle"), headers=mockskill.headers
        ).status_code
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        statuses = sorted(pool.map(attempt, range(3 * (n + 1))))
    assert statuses == sorted([503, 503, 200] * (n + 1))
    journal = mockskill.journal()
    assert len(journal) == 3 * (n + 1)
    assert {e.session for e in journal} == {mockskill.name}
    assert len(mockskill.server.state.journal()) >= len(journal)
"""

HEADERLESS = """
import time

@pytest.mark.parametrize("n", range(6))
def test_headerless(mockskill, n):
    for _ in range(10):  # the workers' tests run at the same time
        path = "/nowhere" if n == 0 else "/skills/flaky"
        requests.get(mockskill.url + path)
        time.sleep(0.02)
"""


@dataclass(frozen=True)
class XdistRun:
    stdout: str
    state: str
    """Where the servers kept their state: memory (each its own), or redis (shared)."""
    junit: str
    """The run's ``--mockskill-junit`` file."""

    def outcomes(self, file: str) -> dict[str, int]:
        """How many of *file*'s tests passed, failed, ... (from the ``-rA`` summary)."""
        found = re.findall(rf"^([A-Z]+) {re.escape(file)}\b", self.stdout, re.MULTILINE)
        return dict(Counter(found))


@pytest.fixture(scope="module", params=["memory", "redis"])
def xdist_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> XdistRun:
    """One inner run under xdist, two workers, of both modules above, with the state in
    memory or in Redis: each test below checks its own module's outcomes in it (a run
    starts three interpreters, so the modules share one)."""
    state = "memory"
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        assert redis.command("FLUSHALL").startswith(b"+OK")
        state = redis.url
    folder = tmp_path_factory.mktemp("xdist")
    (folder / "test_parallel.py").write_text(module(PARALLEL))
    (folder / "test_headerless.py").write_text(module(HEADERLESS))
    # As pytester's own subprocess runs: no options nor remote server from this shell.
    hidden = {"PYTEST_ADDOPTS", "MOCKSKILL_URL", "MOCKSKILL_ADMIN_TOKEN", "MOCKSKILL_STATE"}
    env = {name: value for name, value in os.environ.items() if name not in hidden}
    command = [sys.executable, "-m", "pytest", *QUIET, "-rA", "-n", "2"]
    command += ["--basetemp", str(folder / "temp"), "--mockskill-state", state]
    command += ["--mockskill-junit", "audit.xml"]
    done = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert "2 workers" in done.stdout, done.stdout + done.stderr
    return XdistRun(done.stdout, request.param, (folder / "audit.xml").read_text())


def test_under_xdist_parallel_tests_share_a_server_without_seeing_each_other(
    xdist_run: XdistRun,
) -> None:
    assert xdist_run.outcomes("test_parallel.py") == {"PASSED": 8}, xdist_run.stdout


def test_under_xdist_a_request_without_the_header_counts_only_for_its_worker_s_test(
    xdist_run: XdistRun,
) -> None:
    """Each worker owns its server: another worker's requests without the header, at the
    same time, never count for a test; on a shared store neither (its journal holds them)."""
    assert xdist_run.outcomes("test_headerless.py") == {"PASSED": 5, "FAILED": 1}, xdist_run.stdout
    assert re.search(
        r"^FAILED test_headerless\.py::test_headerless\[0\] - mockskill", xdist_run.stdout, re.M
    ), xdist_run.stdout


def test_an_expectation_never_met_fails_the_test_and_the_next_test_starts_without_it(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_expects_an_order(mockskill):
            mockskill.expect("/orders", method="POST", body={"/id": 1}).respond_with_json({})
            requests.post(mockskill.url + "/orders", json={"id": 2}, headers=mockskill.headers)

        def test_starts_without_it(mockskill):
            mockskill.allow_unmatched()
            answer = requests.post(mockskill.url + "/orders", json={"id": 1})
            assert answer.status_code == 404
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_expects_an_order _*",
            "mockskill: 1 request of session 'test_inner.py-test_expects_an_order-*' went wrong:",
            "  POST /orders matched nothing (404)",
            "    near miss POST /orders, case 1: body /id equals 1: found 2",
            "*",
            "mockskill: 1 expectation was never met:",
            '  POST /orders when {"body": {"/id": 1}}',
            "FAILED test_inner.py::test_expects_an_order - *",
        ]
    )


def test_expectations_as_pytest_httpserver_users_write_them(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_once_then_always_then_checked(mockskill):
            mockskill.expect_oneshot_request("/skills/pay/invoke").respond_with_error(
                "EXECUTION_TIMEOUT"
            )
            mockskill.expect_request("/skills/pay/invoke").respond_with_json({"paid": True})
            statuses = [
                requests.post(mockskill.invoke_url("pay"), headers=mockskill.headers).status_code
                for _ in range(2)
            ]
            assert statuses == [504, 200]
            mockskill.check_assertions()

        def test_out_of_order_is_a_miss(mockskill):
            mockskill.expect_ordered_request("/a").respond_with_data("a")
            mockskill.expect_ordered_request("/b").respond_with_data("b")
            assert requests.get(mockskill.url + "/b", headers=mockskill.headers).status_code == 404
            assert requests.get(mockskill.url + "/a", headers=mockskill.headers).text == "a"
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_out_of_order_is_a_miss _*",
            "  GET /b matched nothing (404)",
            "    near miss GET /b, case 1: the session's state is 'Started',"
            " not 'ordered 1 met: GET /a'",
            "*",
            "mockskill: 1 expectation was never met:",
            "  GET /b (ordered)",
        ]
    )


def test_the_example_in_the_docs_runs_as_shown(pytester: pytest.Pytester) -> None:
    text = (ROOT / "docs" / "pytest.md").read_text()
    examples = re.findall(r"^```py\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    pytester.makepyfile(**{f"test_example{i}": example for i, example in enumerate(examples)})
    result = pytester.runpytest(*QUIET, "--strict-markers")
    result.assert_outcomes(passed=sum(e.count("\ndef test_") for e in examples))


def test_verify_fails_the_test_at_its_line_with_the_near_misses(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_sends_the_text(mockskill):
            requests.post(
                mockskill.invoke_url("translate"),
                json={"input": {"text": "Hello, world"}},
                headers=mockskill.headers,
            )
            assert len(mockskill.requests(skill="translate")) == 1
            mockskill.verify({"body": {"/input/text": "Hello world"}}, skill="translate")
        """,
    )
    result.assert_outcomes(failed=1)
    text = (ROOT / "docs" / "pytest.md").read_text()
    (shown,) = [b for b in re.findall(r"^```text\n(.*?)^```", text, re.M | re.S) if "verify(" in b]
    # The lines docs/pytest.md shows, but for what changes from run to run: the session, ids.
    patterns = [re.sub(r"'test_client\.py-[^']*'|#\d+", "*", line) for line in shown.splitlines()]
    result.stdout.fnmatch_lines(patterns)
    assert "pytest_plugin.py" not in result.stdout.str()


# -- sharing one running server (--mockskill-url) -------------------------------------------

SHARED_FLAKY = """
names = []

@pytest.mark.parametrize("n", range({count}))
def test_flaky(mockskill, mockskill_server, n):
    assert type(mockskill_server).__name__ == "RemoteServer"
    assert mockskill.server is mockskill_server
    assert mockskill.url == {url!r}
    statuses = [
        requests.post(mockskill.invoke_url("flaky"), headers=mockskill.headers).status_code
        for _ in range(3)
    ]
    assert statuses == [503, 503, 200]
    journal = mockskill.journal()
    assert [(e.status, e.error_code, e.session) for e in journal] == [
        (503, "ENDPOINT_UNREACHABLE", mockskill.name),
        (503, "ENDPOINT_UNREACHABLE", mockskill.name),
        (200, None, mockskill.name),
    ]
    assert journal[0].retry.max_attempts >= 1
    (audited,) = mockskill.report()["sessions"]
    assert audited["session"] == mockskill.name
"""


@pytest.fixture
def outer() -> Iterator[Server]:
    """A server of the outer test, on the bundled scenarios, for inner runs to share."""
    with Server() as server:
        yield server


def sessions_of(server: Server) -> dict[str, list[int | None]]:
    """The statuses answered to each test session, in order."""
    seen: dict[str, list[int | None]] = {}
    for entry in server.journal():
        seen.setdefault(entry.session, []).append(entry.status)
    return seen


def test_expectations_on_a_server_running_elsewhere_are_refused_saying_why(
    pytester: pytest.Pytester, outer: Server
) -> None:
    result = run(
        pytester,
        """
        def test_expect(mockskill):
            with pytest.raises(TypeError, match="need a mockskill.Server of this process"):
                mockskill.expect("/orders")
        """,
        "--mockskill-url",
        outer.url,
    )
    result.assert_outcomes(passed=1)
    assert not any(name.startswith("expectations-") for name in outer.scenario_names)


def test_inner_tests_share_a_running_server_each_from_its_own_start(
    pytester: pytest.Pytester, outer: Server
) -> None:
    result = run(
        pytester, SHARED_FLAKY.format(count=3, url=outer.url), "--mockskill-url", outer.url
    )
    result.assert_outcomes(passed=3)
    seen = sessions_of(outer)
    assert len(seen) == 3
    assert all(re.fullmatch(r"test_inner\.py-test_flaky-\d-[0-9a-f]{8}", n) for n in seen)
    assert list(seen.values()) == [[503, 503, 200]] * 3


def test_mockskill_junit_on_a_running_server_holds_the_run_s_sessions_alone(
    pytester: pytest.Pytester, outer: Server
) -> None:
    """A server others use too: its other sessions are not the run's to report."""
    requests.post(outer.invoke_url("flaky"), headers={"Mockskill-Session": "someone-else"})
    result = run(
        pytester,
        SHARED_FLAKY.format(count=2, url=outer.url),
        *("--mockskill-url", outer.url, "--mockskill-junit", "audit.xml"),
    )
    result.assert_outcomes(passed=2)
    suites = list(JUnitXml.fromfile(str(pytester.path / "audit.xml")))
    assert sorted(s.name for s in suites) == sorted(sessions_of(outer).keys() - {"someone-else"})
    assert len(suites) == 2


def test_under_xdist_the_workers_share_one_running_server(
    pytester: pytest.Pytester, outer: Server
) -> None:
    pytester.makepyfile(test_inner=module(SHARED_FLAKY.format(count=6, url=outer.url)))
    result = pytester.runpytest_subprocess(
        *QUIET, "-n", "2", "--mockskill-url", outer.url, timeout=120
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*2 workers*"])
    seen = sessions_of(outer)
    assert sorted(n.split("-")[2] for n in seen) == [str(i) for i in range(6)]
    assert list(seen.values()) == [[503, 503, 200]] * 6


def test_the_check_fails_a_test_on_the_shared_server_too(
    pytester: pytest.Pytester, outer: Server
) -> None:
    result = run(
        pytester,
        """
        def test_typo(mockskill):
            requests.get(mockskill.invoke_url("flaky"), headers=mockskill.headers)

        def test_reset_forgets(mockskill):
            requests.get(mockskill.url + "/nowhere", headers=mockskill.headers)
            assert [e.endpoint for e in mockskill.problems()] == ["unmatched"]
            mockskill.reset()

        @pytest.mark.mockskill(scenarios="name: own\\nskills:\\n  - id: echo\\n")
        def test_the_marker_still_starts_a_server_of_its_own(mockskill, mockskill_server):
            assert type(mockskill.server).__name__ == "Server"
            assert mockskill.url != mockskill_server.url
            assert requests.post(mockskill.invoke_url("echo")).status_code == 200
        """,
        "--mockskill-url",
        outer.url,
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "mockskill: 1 request of session 'test_inner.py-test_typo-*' went wrong:",
            "  GET /skills/flaky/invoke matched nothing (404)",
            "    near miss POST /skills/<id>/invoke: method GET is not POST",
            "FAILED test_inner.py::test_typo - mockskill: 1 request*",
        ]
    )
    assert [e.path for e in outer.journal()] == ["/skills/flaky/invoke"]  # reset forgot one


def test_an_unreachable_server_fails_the_tests_that_use_it_naming_url_and_error(
    pytester: pytest.Pytester,
) -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, then let go
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = run(
        pytester,
        """
        def test_one(mockskill):
            pass

        def test_two(mockskill_server):
            pass

        def test_without():
            pass
        """,
        "--mockskill-url",
        url,
    )
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            f"*mockskill: the server at {url} (--mockskill-url or MOCKSKILL_URL) cannot be used: "
            f"cannot reach {url}/__admin/health: *Connection refused*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "During handling" not in result.stdout.str()


def test_the_environment_names_the_server_and_the_option_wins(
    pytester: pytest.Pytester, outer: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCKSKILL_URL", outer.url)
    run(pytester, SHARED_FLAKY.format(count=2, url=outer.url)).assert_outcomes(passed=2)
    assert len(sessions_of(outer)) == 2
    with Server() as other:
        body = SHARED_FLAKY.format(count=2, url=other.url)
        run(pytester, body, "--mockskill-url", other.url).assert_outcomes(passed=2)
        assert len(sessions_of(other)) == 2
    assert len(sessions_of(outer)) == 2


def test_the_admin_token_is_sent_to_a_server_that_asks_for_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Server(admin_token="s3cret") as guarded:
        pytester.makepyfile(test_inner=module(SHARED_FLAKY.format(count=2, url=guarded.url)))
        without = pytester.runpytest(*QUIET, "--mockskill-url", guarded.url)
        without.assert_outcomes(errors=2)
        without.stdout.fnmatch_lines(
            [
                f"*the server at {guarded.url} (--mockskill-url or MOCKSKILL_URL) cannot be used: "
                "GET */__admin/health answered 401: *; give it with --mockskill-admin-token or "
                "MOCKSKILL_ADMIN_TOKEN"
            ]
        )
        args = ("--mockskill-url", guarded.url)
        pytester.runpytest(*QUIET, *args, "--mockskill-admin-token", "s3cret").assert_outcomes(
            passed=2
        )
        monkeypatch.setenv("MOCKSKILL_ADMIN_TOKEN", "s3cret")
        pytester.runpytest(*QUIET, *args).assert_outcomes(passed=2)
        assert len(sessions_of(guarded)) == 4
        # Without the token, the server's admin API refuses: the runs above did send it.
        assert requests.get(guarded.url + "/__admin/health").status_code == 401


# -- the retry audit -----------------------------------------------------------------------


def test_assert_clean_audit_passes_a_consumer_that_backs_off(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import time

        def test_backs_off(mockskill):
            statuses = []
            for wait in (0, 0.2, 0.4):  # the advice is 200 ms: initial * 2^(n-1)
                time.sleep(wait)
                response = requests.post(
                    mockskill.invoke_url("retry-recovers"), headers=mockskill.headers
                )
                statuses.append(response.status_code)
            assert statuses == [503, 503, 200]
            report = mockskill.assert_clean_audit(require_coverage=["ENDPOINT_UNREACHABLE"])
            (session,) = report["sessions"]
            assert session["session"] == mockskill.name
            assert session["clean"] is True
            assert len(session["chains"][0]["attempts"]) == 3
        """,
    )
    result.assert_outcomes(passed=1)


def test_assert_clean_audit_fails_with_every_finding_spelt_out(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_hammers(mockskill):
            for _ in range(2):
                requests.post(mockskill.invoke_url("auth-required"), headers=mockskill.headers)
            mockskill.assert_clean_audit()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "    def test_hammers(mockskill):",
            ">       mockskill.assert_clean_audit()",  # the test's own line, not the plugin's
            "E       AssertionError: mockskill retry audit: 1 finding in session 'test_inner.py-"
            "test_hammers-*':",
            "E         1. non-retryable-retried: AUTH_REQUIRED retried unchanged (1 retry)",
            "E            at:       POST /skills/auth-required/invoke (journal #*, #*)",
            "E            found:    #* * ms after #* (401 AUTH_REQUIRED), with the same credential"
            " (none)",
            "E            expected: AUTH_REQUIRED is not retryable: retry only with new*",
            "E            fix:      stop retrying on AUTH_REQUIRED: credentials must be supplied*",
        ]
    )
    assert "pytest_plugin.py" not in result.stdout.str()


def test_assert_clean_audit_fails_a_test_that_sent_nothing_to_its_session(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_forgot_the_header(mockskill):
            requests.post(mockskill.invoke_url("translate"))  # no Mockskill-Session
            mockskill.assert_clean_audit()
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E       AssertionError: mockskill retry audit: session '*' made no request*"]
    )


def test_the_audit_example_in_the_docs_fails_as_shown(pytester: pytest.Pytester) -> None:
    text = (ROOT / "docs" / "audit.md").read_text()
    (example,) = re.findall(r"^```py\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    (shown,) = [
        b
        for b in re.findall(r"^```text\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
        if b.startswith(">")
    ]
    pytester.makepyfile(test_client=example)
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1)
    # The same lines, but for what changes from run to run: session suffix, ids, timings.
    patterns = [re.sub(r"-[0-9a-f]{8}'|#\d+|\d+ ms", "*", line) for line in shown.splitlines()]
    result.stdout.fnmatch_lines([p.replace("[", "[[]") for p in patterns])


def test_under_xdist_mockskill_junit_holds_every_worker_s_sessions(xdist_run: XdistRun) -> None:
    """The controller writes the file, from the sessions each worker sends it: the eight
    parallel tests' sessions, and the requests sent without a session (to the server of
    the worker that ran them; on a shared store, another server's too, so not swept)."""
    xmlschema.XMLSchema(JUNIT_SCHEMA).validate(xdist_run.junit)
    suites = list(JUnitXml.fromstring(xdist_run.junit))

    def requests_of(suite: TestSuite) -> int:
        return int({p.name: p.value for p in suite.properties()}["requests"])

    parallel = [s for s in suites if s.name.startswith("test_parallel.py-test_flaky-")]
    assert sorted(requests_of(s) for s in parallel) == [3 * (n + 1) for n in range(8)]
    headerless = [s for s in suites if s.name == "default"]
    if xdist_run.state == "memory":
        assert sum(requests_of(s) for s in headerless) == 6 * 10
    else:
        assert headerless == []
    assert len(suites) == len(parallel) + len(headerless)


# -- --mockskill-junit: the run's audit as JUnit XML -------------------------------

JUNIT_SCHEMA = ROOT / "tests" / "data" / "junit-10.xsd"

AUDITED = """
OWN = '''
name: own
skills:
  - id: locked
    invoke: {error: AUTH_REQUIRED}
'''

def test_hammers(mockskill):
    for _ in range(2):
        requests.post(mockskill.invoke_url("auth-required"), headers=mockskill.headers)

def test_backs_off(mockskill):
    requests.post(mockskill.invoke_url("translate"), headers=mockskill.headers)

def test_sends_nothing(mockskill):
    pass

@pytest.mark.mockskill(scenarios=[OWN])
def test_on_a_server_of_its_own(mockskill):
    requests.post(mockskill.invoke_url("locked"), headers=mockskill.headers)

def test_names_a_session_itself(mockskill_server):
    requests.post(mockskill_server.invoke_url("translate"), headers={"Mockskill-Session": "mine"})
"""


def test_mockskill_junit_writes_every_session_the_run_served(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=module(AUDITED))
    result = pytester.runpytest(*QUIET, "--mockskill-junit", "reports/audit.xml")
    result.assert_outcomes(passed=5)
    path = pytester.path / "reports" / "audit.xml"
    result.stdout.fnmatch_lines([f"*mockskill audit of 4 sessions (JUnit XML): {path}*"])
    xmlschema.XMLSchema(JUNIT_SCHEMA).validate(path.read_text())
    suites = {
        re.sub(r"^test_inner\.py-(.*)-[0-9a-f]{8}$", r"\1", suite.name): suite
        for suite in JUnitXml.fromfile(str(path))
    }
    failed = {
        name: [r.type for case in suite for r in case.result if isinstance(r, Failure)]
        for name, suite in suites.items()
    }
    # test_sends_nothing's session made no request: no server served it
    assert failed == {
        "test_hammers": ["non-retryable-retried"],
        "test_backs_off": [],
        "test_on_a_server_of_its_own": [],  # one request: nothing retried
        "mine": [],
    }
    own = "test_on_a_server_of_its_own"
    (case,) = list(suites[own])
    assert case.name == "POST /skills/locked/invoke (chain 1)"


def test_without_mockskill_junit_no_file_is_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=module(AUDITED))
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=5)
    assert not list(pytester.path.rglob("*.xml"))
    assert "JUnit XML" not in result.stdout.str()


# -- the state store -------------------------------------------------------------


STATE_CHECK = """
    def test_state(mockskill, mockskill_server):
        health = requests.get(mockskill.url + "/__admin/health").json()
        assert health["state"]["backend"] == "redis"
        answer = requests.post(mockskill.invoke_url("flaky"), headers=mockskill.headers)
        assert answer.status_code == 503
        print("SESSION", mockskill.name)
    """


@pytest.mark.parametrize("source", ["option", "environment", "ini"])
def test_the_fixture_server_keeps_its_state_in_the_store_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, redis_url: str, source: str
) -> None:
    args: list[str] = ["-s"]
    if source == "option":
        args += ["--mockskill-state", redis_url]
    elif source == "environment":
        monkeypatch.setenv("MOCKSKILL_STATE", redis_url)
    else:
        pytester.makeini(f"[pytest]\nmockskill_state = {redis_url}\n")
    result = run(pytester, STATE_CHECK, *args)
    result.assert_outcomes(passed=1)
    (session,) = re.findall(r"SESSION (\S+)", result.stdout.str())
    # Another server on the same store sees the request: it was kept there, not in memory.
    with Server(state=redis_url) as other:
        assert [(e.path, e.status) for e in other.journal(session)] == [
            ("/skills/flaky/invoke", 503)
        ]


def test_the_option_wins_over_the_environment_and_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    monkeypatch.setenv("MOCKSKILL_STATE", "memory")
    pytester.makeini("[pytest]\nmockskill_state = memory\n")
    run(pytester, STATE_CHECK, "--mockskill-state", redis_url).assert_outcomes(passed=1)
    monkeypatch.setenv("MOCKSKILL_STATE", redis_url)  # the environment over the ini
    run(pytester, STATE_CHECK).assert_outcomes(passed=1)


def test_a_state_url_no_store_can_use_stops_the_run_with_the_password_masked(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=module("def test_never(mockskill): pass\n"))
    result = pytester.runpytest(*QUIET, "--mockskill-state", "redis://:s3cret-pw@cache:6379/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: mockskill: --state 'redis://:***@cache:6379/x': the database 'x' is not a number"]
    )
    assert "s3cret-pw" not in result.stdout.str() + result.stderr.str()


def test_a_store_that_does_not_answer_fails_the_tests_that_need_the_server(
    pytester: pytest.Pytester,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        nowhere = f"redis://127.0.0.1:{holder.getsockname()[1]}/0"
    body = """
        def test_needs_it(mockskill):
            pass

        def test_does_not():
            pass
        """
    result = run(pytester, body, "--mockskill-state", nowhere)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [f"*mockskill: the mockskill_server fixture cannot start: *{nowhere}*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_mockskill_tls_serves_the_fixtures_over_https_with_their_ca_bundle(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_https(mockskill, mockskill_server):
            assert mockskill.url.startswith("https://")
            assert mockskill.ca_bundle == mockskill_server.ca_bundle is not None
            answer = requests.post(
                mockskill.invoke_url("translate"),
                json={"text": "hi"},
                headers=mockskill.headers,
                verify=mockskill.ca_bundle,
            )
            assert answer.status_code == 200
            assert [e.status for e in mockskill.journal()] == [200]
        """,
        "--mockskill-tls",
    )
    result.assert_outcomes(passed=1)


def test_the_ini_settings_say_what_the_journal_keeps_and_masks(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        "[pytest]\nmockskill_redact =\n    X-Tenant\n    pin\nmockskill_journal_body_limit = 4\n"
    )
    result = run(
        pytester,
        """
        def test_sent(mockskill):
            requests.post(
                mockskill.invoke_url("translate") + "?pin=1",
                json={"text": "hello"},
                headers={**mockskill.headers, "X-Tenant": "acme"},
                timeout=10,
            )
            (entry,) = mockskill.journal()
            assert entry.target.endswith("?pin=***")
            assert ("X-Tenant", "***") in entry.headers
            assert (entry.body, entry.body_size) == ('{"te', 17)
        """,
    )
    result.assert_outcomes(passed=1)


def test_journal_bodies_off_in_the_ini_keeps_digests_alone(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmockskill_journal_bodies = false\n")
    result = run(
        pytester,
        """
        def test_sent(mockskill):
            requests.post(
                mockskill.invoke_url("translate"), json={"text": "hi"},
                headers=mockskill.headers, timeout=10,
            )
            (entry,) = mockskill.journal()
            assert (entry.target, entry.headers, entry.body) == (None, None, None)
            assert entry.body_digest.startswith("hmac-sha256:")
        """,
    )
    result.assert_outcomes(passed=1)
