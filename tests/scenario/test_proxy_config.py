"""Reading ``proxy:``: a step, a skill, a route, a scenario; what each becomes, and each problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import trustme
from conftest import assert_problem

from mockskill import ScenarioError, load_text
from mockskill.scenario.problems import Problem


def skill_yaml(invoke: str) -> str:
    """One skill whose ``invoke:`` is *invoke*; the invoke block starts on line 4."""
    return "skills:\n  - id: s\n    invoke:\n" + textwrap.indent(textwrap.dedent(invoke), "      ")


def problems_in(text: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    return list(caught.value.problems)


def test_a_proxy_step_reads_its_url_as_a_base() -> None:
    [skill] = load_text(skill_yaml("- proxy: http://Provider.example:9000/\n")).skills
    assert skill.invoke is not None
    proxy = skill.invoke.steps[0].proxy
    assert proxy is not None
    assert (proxy.url, proxy.scheme, proxy.host, proxy.port) == (
        "http://provider.example:9000",
        "http",
        "provider.example",
        9000,
    )
    assert (proxy.verify, proxy.timeout_ms, proxy.after) == (True, 30_000, None)


def test_a_proxy_mapping_reads_verify_a_ca_file_timeout_and_after(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(trustme.CA().cert_pem.bytes())
    text = skill_yaml(
        f"""\
        - proxy: {{url: https://p, verify: {ca}, timeout_ms: 250}}
          delay: 10
          times: 2
          after: {{error: EXECUTION_TIMEOUT, status: 408}}
        """
    )
    [skill] = load_text(text).skills
    assert skill.invoke is not None
    step = skill.invoke.steps[0]
    assert step.proxy is not None
    assert (step.proxy.url, step.proxy.verify, step.proxy.timeout_ms) == (
        "https://p:443",
        str(ca),
        250,
    )
    assert step.times == 2
    assert step.delay is not None
    assert step.proxy.after is not None
    assert (step.proxy.after.reply.status, step.proxy.after.reply.error_code) == (
        408,
        "EXECUTION_TIMEOUT",
    )


def test_a_proxy_mapping_reads_what_the_providers_streams_promise() -> None:
    text = skill_yaml(
        """\
        - proxy: {url: http://p, streams: {resumable: true, idle_bound: 2s, expected: 5s}}
          after: {error: EXECUTION_TIMEOUT}
        """
    )
    [skill] = load_text(text).skills
    assert skill.invoke is not None
    proxy = skill.invoke.steps[0].proxy
    assert proxy is not None
    assert proxy.streams is not None
    assert (proxy.streams.resumable, proxy.streams.idle_bound_ms) == (True, 2000)
    assert proxy.streams.expected_ms == 5000
    assert proxy.after is not None  # (after: kept beside it)
    [plain] = load_text(skill_yaml("- proxy: {url: http://p, streams: {}}\n")).skills
    assert plain.invoke is not None
    declared = plain.invoke.steps[0].proxy
    assert declared is not None
    assert declared.streams is not None
    assert (declared.streams.resumable, declared.streams.expected_ms) == (False, None)


def test_a_skill_proxy_is_both_endpoints_default_and_a_written_endpoint_wins() -> None:
    text = "skills:\n  - id: s\n    proxy: http://p:1\n    invoke: {json: {scripted: 1}}\n"
    [skill] = load_text(text).skills
    assert skill.describe is not None
    assert skill.invoke is not None
    assert skill.describe.steps[0].proxy is not None
    assert skill.invoke.steps[0].proxy is None


def test_a_route_and_a_scenario_proxy() -> None:
    scenarios = load_text("proxy: http://p:2\nroutes:\n  - {path: /x, proxy: http://q:3}\n")
    [scenario] = scenarios.scenarios
    assert scenario.proxy is not None
    assert scenario.proxy.steps[0].proxy is not None
    assert scenario.proxy.steps[0].proxy.url == "http://p:2"
    [route] = scenarios.routes
    assert route.sequence is not None
    assert route.sequence.steps[0].proxy is not None
    assert route.sequence.steps[0].proxy.url == "http://q:3"


@pytest.mark.parametrize(
    ("invoke", "path", "line", "column", "expected", "found", "hint"),
    [
        (
            "- proxy: http://p/v1\n",
            "skills[0].invoke[0].proxy",
            4,
            16,
            "an absolute http:// or https:// URL",
            "'http://p/v1' (a string), with a path",
            "",
        ),
        (
            "- proxy: http://p?x=1\n",
            "skills[0].invoke[0].proxy",
            4,
            16,
            "an absolute http:// or https:// URL",
            "'http://p?x=1' (a string), with a query",
            "",
        ),
        (
            "- proxy: ftp://p\n",
            "skills[0].invoke[0].proxy",
            4,
            16,
            "an absolute http:// or https:// URL",
            "'ftp://p'",
            "",
        ),
        (
            "- proxy: {url: 'https://p', verify: missing.pem}\n",
            "skills[0].invoke[0].proxy.verify",
            4,
            43,
            "the path of a CA certificates file (PEM) that exists",
            "'missing.pem', which is not a file",
            "relative path",
        ),
        (
            "- proxy: {url: 'http://p', verify: false}\n",
            "skills[0].invoke[0].proxy.verify",
            4,
            42,
            "verify only beside an https:// url",
            "false",
            "",
        ),
        (
            "- error: ENDPOINT_UNREACHABLE\n  after: {error: EXECUTION_TIMEOUT}\n",
            "skills[0].invoke[0].error",
            4,
            9,
            "the answer the skill made beside after",
            "an error",
            "put the error in after:",
        ),
        (
            "- proxy: http://p\n  text: hello\n",
            "skills[0].invoke[0].text",
            5,
            9,
            "only delay, times and after beside proxy",
            "text as well",
            "relayed",
        ),
        (
            "- proxy: {url: 'http://p', streams: {resumable: yes please}}\n",
            "skills[0].invoke[0].proxy.streams.resumable",
            4,
            55,
            "true or false",
            "'yes please'",
            "",
        ),
        (
            "- proxy: {url: 'http://p', streams: {expected: 5}}\n",
            "skills[0].invoke[0].proxy.streams.expected",
            4,
            54,
            "a duration with its unit",
            "5",
            "write the unit: 5ms or 5s",
        ),
        (
            "- proxy: {url: 'http://p', streams: {cadence: 1s}}\n",
            "skills[0].invoke[0].proxy.streams.cadence",
            4,
            44,
            "a known key",
            "unknown key 'cadence'",
            "allowed here: resumable, idle_bound, expected",
        ),
        (
            "- proxy: http://p\n  after: {json: 1}\n",
            "skills[0].invoke[0].after.json",
            5,
            17,
            "a known key",
            "unknown key 'json'",
            "allowed here: error, status",
        ),
    ],
)
def test_each_proxy_problem_is_positioned(
    invoke: str, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(skill_yaml(invoke))
    assert_problem(problem, path, line, column, expected, found, hint)


def test_a_route_cannot_both_proxy_and_play_steps() -> None:
    [problem] = problems_in("routes:\n  - {path: /x, proxy: 'http://p', steps: [json: 1]}\n")
    assert_problem(problem, "routes[0].proxy", 2, 16, "proxy or steps", "both", "forwards")


@pytest.mark.parametrize(
    "content", [b"not a certificate\n", b"", b"-----BEGIN CERTIFICATE-----\nAAAA\n"]
)
def test_a_verify_file_that_holds_no_certificate_is_a_load_problem(
    tmp_path: Path, content: bytes
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(content)  # served, every proxied request failed its TLS set-up instead
    [problem] = problems_in(skill_yaml(f"- proxy: {{url: 'https://p', verify: {ca}}}\n"))
    assert (problem.line, problem.path) == (4, "skills[0].invoke[0].proxy.verify")
    assert problem.expected == "the path of a CA certificates file (PEM)"
    assert problem.found.startswith(f"{str(ca)!r}, which holds no certificate")
    assert problem.hint.startswith("ssl says: ")
