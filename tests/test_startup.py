"""Start-up loads only what serving skills needs (issue 13: start -> first answer <= 250 ms).

Werkzeug is not imported by serving skills at all (its package imports its
development server and test client: ~100 ms): free routes are matched by
mockskill.scenario.routes, the WSGI path (mockskill.wsgi.app,
mockskill.wsgi.player) is imported by the WSGI app alone, and the few
answers that read a Werkzeug request (the OAuth2 endpoints' forms, query
conditions) import it when first asked. Flask (with Jinja, itsdangerous,
blinker), the admin blueprint, the retry audit and ``urllib.request`` are
imported on first use: the admin app is
built on the first ``/__admin`` request, the audit on the first report,
``urllib.request`` by ``check-descriptor`` alone, the words for YAML syntax
errors (``scenario.syntax``) when a file has one. Each test runs a fresh
interpreter and reads which modules it imported, so that a top-level import
added anywhere on the way cannot silently bring the cost back.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

LAZY = (
    "werkzeug",
    "mockskill.wsgi.app",
    "mockskill.wsgi.player",
    "difflib",  # the suggestions for a misspelling or a miss, on the first one
    "mockskill.store.shared_set",  # a shared scenario set's records, with --shared only
    "mockskill.control.sharing",  # the registry's side of a shared set: when a set is shared
    "flask",
    "jinja2",
    "itsdangerous",
    "blinker",
    "urllib.request",
    "mockskill.admin.blueprint",
    "mockskill.admin.dashboard",
    "mockskill.admin.scenario_routes",
    "mockskill.admin.report_routes",
    "mockskill.admin.json_provider",
    "mockskill.audit",
    "mockskill.cli.report",
    "mockskill.cli.verify",
    "mockskill.engine.verifying",  # verify: the admin API's, Server.verify's, on first use
    "mockskill.scenario.verification",
    "mockskill.server.remote",
    "mockskill.scenario.syntax",
    "re2",  # RE2, for a scenario's `matches:` (the bundled scenarios have none)
    "trustme",  # only with TLS: its import (cryptography's) is most of --tls's start-up
    "cryptography",
    "ctypes",  # malloc_trim's, looked up on the first trim (ctypes.util runs ldconfig -p)
    "mockskill.workers.supervisor",  # --workers N: the supervisor, and its workers (given fds)
    "mockskill.transport.tls",  # the local CA's certificates: with --tls or a skill's TLS fault
    "mockskill.scenario.schema",  # the scenario schema's path: `mockskill schema` only
    "mockskill.protocol.jsonstyle",  # JSON output: check-descriptor's, report's, the admin API's
)
"""Modules that neither ``import mockskill`` nor serving skills may load."""


def imported_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running *code*."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def imported_by_command(*args: str) -> set[str]:
    """The modules ``python -m mockskill ARGS`` imports (what ``-X importtime`` lists)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mockskill", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # the first is the heading


def loaded(modules: set[str]) -> list[str]:
    return sorted(name for name in LAZY if name in modules)


def test_importing_mockskill_loads_nothing_but_its_version() -> None:
    modules = imported_by("import mockskill")
    assert sorted(m for m in modules if m.startswith("mockskill")) == [
        "mockskill",
        "mockskill._version",
    ]


def test_the_public_face_loads_no_flask_audit_or_urllib() -> None:
    modules = imported_by("from mockskill import Server, ScenarioSet, load_paths")
    assert "mockskill.server.server" in modules  # asked for, imported
    assert loaded(modules) == []


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"]])
def test_the_command_line_loads_no_flask_audit_or_urllib(args: list[str]) -> None:
    modules = imported_by_command(*args)
    assert "mockskill.cli.main" in modules
    assert loaded(modules) == []


def test_a_serving_server_loads_flask_on_the_first_admin_request() -> None:
    code = textwrap.dedent(
        """
        import json, sys, urllib.request
        client = set(sys.modules)  # this script's own client (urllib.request, hashlib, ...)
        from mockskill import Server
        with Server() as server:
            with urllib.request.urlopen(server.skill_url("translate"), timeout=30) as answer:
                assert json.load(answer)["id"] == "translate"
            before = sorted(m for m in sys.modules if m not in client)
            with urllib.request.urlopen(server.url + "/__admin/health", timeout=30) as answer:
                health = json.load(answer)
        print(json.dumps({"before": before, "health": health}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded(set(result["before"])) == []
    assert result["health"]["status"] == "ok"  # and then the admin app was there


def test_serve_answers_its_first_request_without_werkzeug_or_flask(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port for the server to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "importtime.txt"
    command = [sys.executable, "-X", "importtime", "-m", "mockskill", "serve"]
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [*command, "--port", str(port), "--quiet"], stdout=subprocess.DEVNULL, stderr=stderr
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    url = f"http://127.0.0.1:{port}/skills/translate"
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        assert json.load(answer)["id"] == "translate"
                    break
                except (urllib.error.URLError, ConnectionError):
                    assert time.monotonic() < deadline, "serve did not answer within 60 s"
                    time.sleep(0.02)
            # Read at once: what serve imported up to (and just after) its first answer.
            lines = log.read_text().splitlines()
        finally:
            server.terminate()
            server.wait(timeout=30)
    modules = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    assert "mockskill.server.dispatch" in modules  # the loop's surface answered
    assert loaded(modules) == []
    # A str host name makes getaddrinfo import the idna codec: the port is bound by bytes.
    assert "encodings.idna" not in modules
    # The TLS authority's folder (tempfile, and shutil with bz2 and lzma to remove it at
    # exit): with --tls only. (Not in LAZY: click's help and urllib.request import them.)
    assert {"shutil", "tempfile"} & modules == set()
