"""docs/any-language.md: the test flow driven over HTTP only, from Node.js, really runs.

The Node.js script is the one the page shows (checked byte for byte), run
against a real server; its curl commands are run by ``test_docs.py``.
Without ``node`` these tests skip, unless ``MOCKSKILL_REQUIRE_NODE=1`` (CI)
turns that into a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mockskill import Server, bundled_path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "any-language.md"
SCRIPT = ROOT / "docs" / "examples" / "flow.mjs"
SCENARIO = ROOT / "docs" / "examples" / "quote.yaml"
NODE = shutil.which("node")

needs_node = pytest.mark.skipif(
    NODE is None and os.environ.get("MOCKSKILL_REQUIRE_NODE") != "1",
    reason="node is not installed (the page's example is Node.js)",
)


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
