"""docs/any-language.md: the test flow driven over HTTP only, from Node.js, really runs;
and so do the one-line verdict gates it shows in Java and TypeScript.

The Node.js script, the Java file and the TypeScript file are the ones the
page shows (checked byte for byte), run against a real server; its curl
commands and its Python block are run by ``test_docs.py``. The TypeScript is
compiled with ``tsc --strict`` from the npm ``typescript`` package, which
these tests install (with Node's types) into a folder of their own outside
the work tree, once. Without ``node`` (and ``npm``) or ``java`` these tests
skip, unless ``MOCKSKILL_REQUIRE_NODE=1`` or ``MOCKSKILL_REQUIRE_JAVA=1``
(CI, which installs a JDK when the machine has none) turns that into a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from mockskill import Server, bundled_path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "any-language.md"
SCRIPT = ROOT / "docs" / "examples" / "flow.mjs"
SCENARIO = ROOT / "docs" / "examples" / "quote.yaml"
JAVA_EXAMPLE = ROOT / "docs" / "examples" / "Verdict.java"
TS_EXAMPLE = ROOT / "docs" / "examples" / "verdict.mts"
NODE = shutil.which("node")
NPM = shutil.which("npm")
JAVA = shutil.which("java")

needs_node = pytest.mark.skipif(
    NODE is None and os.environ.get("MOCKSKILL_REQUIRE_NODE") != "1",
    reason="node is not installed (the page's example is Node.js)",
)
needs_tsc = pytest.mark.skipif(
    (NODE is None or NPM is None) and os.environ.get("MOCKSKILL_REQUIRE_NODE") != "1",
    reason="node and npm are not installed (the TypeScript example is compiled with npm's tsc)",
)
needs_java = pytest.mark.skipif(
    JAVA is None and os.environ.get("MOCKSKILL_REQUIRE_JAVA") != "1",
    reason="java is not installed (the page's Java example runs with the JDK's java)",
)

TYPESCRIPT = ("typescript@5.9.3", "@types/node@20.19.43")
"""What compiles the TypeScript example: pinned, so that a new release cannot fail the docs."""


def run_flow(server: Server) -> subprocess.CompletedProcess[str]:
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    return subprocess.run(
        [NODE, str(SCRIPT), server.url], capture_output=True, text=True, timeout=30
    )


def fenced(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)


def test_the_page_shows_the_script_and_the_scenario_as_they_are() -> None:
    assert SCRIPT.read_text() in fenced("js")
    assert SCENARIO.read_text() in fenced("yaml")


@needs_node
def test_the_node_flow_passes_against_a_real_server_and_cleans_up() -> None:
    with Server() as server:
        before = server.scenario_names
        result = run_flow(server)
        assert result.returncode == 0, result.stderr
        assert "ok: 3 attempts, statuses 503,503,200" in result.stdout
        assert server.scenario_names == before
        assert [e for e in server.journal() if e.session.startswith("node-")] == []


@needs_node
def test_the_node_flow_fails_loudly_when_the_server_is_not_as_expected() -> None:
    # The scenario is already loaded, so loading it again is refused (409):
    # the script must stop there with a non-zero exit and say why.
    with Server([bundled_path(), SCENARIO]) as server:
        result = run_flow(server)
    assert result.returncode != 0
    assert "quote-demo" in result.stderr


# -- the verdict, one line in a test: Java and TypeScript ------------------------------------


@pytest.fixture(scope="module")
def judged() -> Iterator[tuple[Server, str, str]]:
    """A server with a clean session and one whose consumer retried AUTH_REQUIRED unchanged."""
    clean, retried = "any-language-clean", "any-language-retried"
    with Server() as server:
        requests.post(server.invoke_url("translate"), json={}, headers={"Mockskill-Session": clean})
        for _ in range(2):
            requests.post(
                server.invoke_url("auth-required"), headers={"Mockskill-Session": retried}
            )
        yield server, clean, retried


def test_the_page_shows_the_verdict_examples_as_they_are() -> None:
    assert JAVA_EXAMPLE.read_text() in fenced("java")
    assert TS_EXAMPLE.read_text() in fenced("ts")


@needs_java
def test_the_java_verdict_passes_a_clean_session_and_fails_another_saying_why(
    judged: tuple[Server, str, str],
) -> None:
    assert JAVA is not None, "java is required here (MOCKSKILL_REQUIRE_JAVA=1)"
    server, clean, retried = judged
    # `java File.java` compiles in memory: the example runs exactly as the page says.
    ok = subprocess.run(
        [JAVA, str(JAVA_EXAMPLE), server.url, clean], capture_output=True, text=True, timeout=120
    )
    assert (ok.returncode, ok.stdout) == (0, f"ok: session {clean} is clean\n"), ok.stderr
    failed = subprocess.run(
        [JAVA, str(JAVA_EXAMPLE), server.url, retried], capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith("409 ")
    assert "1 finding (non-retryable-retried)" in failed.stderr


def typescript_compiler() -> Path:
    """npm's ``tsc`` (:data:`TYPESCRIPT`), installed once into a folder outside the work tree."""
    assert NPM is not None, "npm is required here (MOCKSKILL_REQUIRE_NODE=1)"
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    folder = home / "mockskill-tests" / "-".join(p.replace("/", "_") for p in TYPESCRIPT)
    tsc = folder / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        # Installed beside it, then renamed: a worker running at the same time never sees
        # half an install, and the first rename wins.
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="install-", dir=folder.parent))
        subprocess.run(
            [
                NPM,
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(staging),
                *TYPESCRIPT,
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        try:
            staging.rename(folder)
        except OSError:  # another worker's install is there already
            shutil.rmtree(staging, ignore_errors=True)
    return tsc


@needs_tsc
def test_the_typescript_verdict_compiles_strict_and_asserts_the_status(
    judged: tuple[Server, str, str], tmp_path: Path
) -> None:
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    tsc = typescript_compiler()
    types = tsc.parent.parent / "@types"
    compiled = subprocess.run(
        [
            NODE,
            str(tsc),
            "--strict",
            "--module",
            "nodenext",
            "--target",
            "es2022",
            "--typeRoots",
            str(types),
            "--types",
            "node",
            "--outDir",
            str(tmp_path),
            str(TS_EXAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    script = tmp_path / "verdict.mjs"
    server, clean, retried = judged

    def run(session: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [NODE, str(script), server.url, session], capture_output=True, text=True, timeout=30
        )

    ok = run(clean)
    assert (ok.returncode, ok.stdout) == (0, f"ok: session {clean} is clean\n"), ok.stderr
    failed = run(retried)
    assert failed.returncode == 1
    assert "409 " in failed.stderr
    assert "1 finding (non-retryable-retried)" in failed.stderr
    mistyped = run(clean + "x")
    assert mistyped.returncode == 1
    assert f"did you mean '{clean}'" in mistyped.stderr
