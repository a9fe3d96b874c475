"""Every example in the docs runs and shows what really happens.

- ``console`` blocks (README and docs/): each ``$ command`` runs (curl,
  against a fresh server on the bundled scenarios per page, ``localhost:8080``
  swapped for its port), and every line shown under it appears in what it
  printed.
- ``python`` blocks run as they are.
- The problem report shown in the README is what ``mockskill validate`` prints.
- Every option the README's CLI summary names exists.

(``yaml`` blocks are loaded and checked against the JSON Schema in
``test_schema.py``.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str, path: Path = ROOT / "README.md") -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == kind]


def console_steps(block: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected lines), ...]`` from a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip() and steps:
            steps[-1][1].append(line.strip())
    return steps


def test_console_blocks_are_split_into_commands_and_output() -> None:
    sample = "$ echo a\na\n\n$ echo b c\nb c\n"
    assert console_steps(sample) == [("echo a", ["a"]), ("echo b c", ["b c"])]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl")
@pytest.mark.parametrize("doc", [d for d in DOCS if blocks("console", d)], ids=lambda d: d.name)
def test_console_examples_print_what_they_show(doc: Path) -> None:
    steps = [step for block in blocks("console", doc) for step in console_steps(block)]
    assert steps
    with Server() as server:  # a fresh one per page: sessions and sequences start afresh
        here = f"localhost:{server.port}"
        for command, expected in steps:
            result = subprocess.run(
                ["bash", "-c", command.replace("localhost:8080", here)],
                cwd=ROOT,  # commands name files by their paths in the repository
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            for line in expected:
                assert line.replace("localhost:8080", here) in result.stdout, (command, line)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(code, id=f"{doc.name}-{i}")
        for doc in DOCS
        for i, code in enumerate(blocks("python", doc))
    ],
)
def test_python_examples_run(source: str) -> None:
    exec(compile(source, "<docs>", "exec"), {"__name__": "docs_example"})


def test_the_readme_problem_report_is_what_validate_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (report,) = [b for b in blocks("text") if "nothing was loaded" in b]
    shutil.copy(ROOT / "tests" / "data" / "bad.yaml", tmp_path / "bad.yaml")
    monkeypatch.chdir(tmp_path)  # the report names the file as it was given
    result = CliRunner().invoke(cli, ["validate", "bad.yaml"])
    assert result.exit_code == 1
    assert result.output.splitlines() == report.splitlines()


def test_every_option_in_the_readme_cli_summary_exists() -> None:
    (summary,) = [b for b in blocks("text") if b.startswith("mockskill serve")]
    runner = CliRunner()
    for line in summary.splitlines():
        words = line.split()
        if words[0] == "mockskill" and not words[1].startswith("-"):
            command = words[1]
            result = runner.invoke(cli, [command, "--help"])
            assert result.exit_code == 0, command
            help_text = result.output
        for option in re.findall(r"(?<!\w)--[a-z-]+", line):
            if option in ("--version",):
                assert runner.invoke(cli, [option]).exit_code == 0
            else:
                assert option in help_text, (command, option)
