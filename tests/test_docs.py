"""Every example in the docs runs and shows what really happens.

- ``console`` blocks (README and docs/): each ``$ command`` runs (curl,
  against a fresh server on the bundled scenarios per page, ``localhost:8080``
  swapped for its port), and every line shown under it appears in what it
  printed.
- ``python`` blocks run as they are.
- The problem report shown in docs/scenarios.md is what ``mockskill validate`` prints.
- Every option docs/cli.md's summary names exists.
- The README's two commands (serve it, test it) are what ``.ci/run`` and
  the docs use, and the serve command works as written in a fresh checkout.

(``yaml`` blocks are loaded and checked against the JSON Schema in
``test_schema.py``.)
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
from mockskill.engine.state import Entry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs"
DOCS = [ROOT / "README.md", *sorted(DOC.glob("*.md"))]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str, path: Path = ROOT / "README.md") -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == kind]


def console_steps(block: str) -> list[tuple[str, list[str]]]:
    """``[(command, lines it shows), ...]`` from a console block (blank lines left out)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip() and steps:
            steps[-1][1].append(line.rstrip())
    return steps


EXCERPT = "..."
"""A line of its own in shown output: lines of the real output are left out here."""


def shows(shown: list[str], printed: str) -> bool:
    """Whether *printed* is what *shown* shows: all of it, or an excerpt marked with ``...``.

    Without the mark the lines (blank ones aside) are the output's, exactly.
    With it, each run of lines between marks is a run of the output's, in
    order; a run at either end without a mark there is the output's start or end.
    """
    got = [line.rstrip() for line in printed.splitlines() if line.strip()]
    if EXCERPT not in (line.strip() for line in shown):
        return got == shown
    runs: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == EXCERPT:
            runs.append([])
        else:
            runs[-1].append(line)
    if runs[0] and got[: len(runs[0])] != runs[0]:
        return False
    if runs[-1] and got[len(got) - len(runs[-1]) :] != runs[-1]:
        return False
    at = 0
    for run in runs:
        while at + len(run) <= len(got) and got[at : at + len(run)] != run:
            at += 1
        if at + len(run) > len(got):
            return False
        at += len(run)
    return True


def test_console_blocks_are_split_into_commands_and_output() -> None:
    sample = "$ echo a\n  a\n\n$ echo b c\nb c\n"
    assert console_steps(sample) == [("echo a", ["  a"]), ("echo b c", ["b c"])]


def test_shown_output_is_all_of_it_or_a_marked_excerpt() -> None:
    printed = "one\ntwo\n  three\nfour\n"
    assert shows(["one", "two", "  three", "four"], printed)
    assert not shows(["one", "  three", "four"], printed)  # a line left out, unmarked
    assert not shows(["one", "two", "three", "four"], printed)  # indentation is shown as it is
    assert shows(["one", "...", "four"], printed)
    assert shows(["...", "two", "  three", "..."], printed)
    assert not shows(["...", "two", "four", "..."], printed)  # a run is a run
    assert not shows(["two", "..."], printed)  # no mark at the start: the output's start
    assert not shows(["...", "three", "..."], printed)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl")
@pytest.mark.parametrize("doc", [d for d in DOCS if blocks("console", d)], ids=lambda d: d.name)
def test_console_examples_print_what_they_show(doc: Path) -> None:
    steps = [step for block in blocks("console", doc) for step in console_steps(block)]
    assert steps
    # `mockskill` in an example is the one of the environment running the
    # tests (.venv/bin/mockskill with the README's test command).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
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
                env=env,
            )
            shown = [line.replace("localhost:8080", here) for line in expected]
            assert shows(shown, result.stdout), (command, result.stdout)


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


def test_the_problem_report_shown_is_what_validate_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (report,) = [b for b in blocks("text", DOC / "scenarios.md") if "nothing was loaded" in b]
    shutil.copy(ROOT / "tests" / "data" / "bad.yaml", tmp_path / "bad.yaml")
    monkeypatch.chdir(tmp_path)  # the report names the file as it was given
    result = CliRunner().invoke(cli, ["validate", "bad.yaml"])
    assert result.exit_code == 1
    assert result.output.splitlines() == report.splitlines()


def test_every_option_in_the_cli_summary_exists() -> None:
    (summary,) = [b for b in blocks("text", DOC / "cli.md") if b.startswith("mockskill serve")]
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


# -- the README's two commands --------------------------------------------------------


def readme_commands() -> tuple[str, str]:
    """The README's first two ``sh`` blocks: how to serve it, how to test it."""
    serve, test = blocks("sh")[:2]
    assert len(serve.splitlines()) == len(test.splitlines()) == 1
    return serve.strip(), test.strip()


def test_the_readme_commands_make_and_use_a_virtual_environment() -> None:
    serve, test = readme_commands()
    for command in (serve, test):
        # Debian and Ubuntu refuse `pip install` into the system's Python.
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install ")
        assert not re.search(r"(?<![/\w])(pip|python3? -m pip) install", command)
    assert serve.endswith(" && .venv/bin/mockskill serve")
    assert test.endswith(" && .venv/bin/python -m pytest -n auto")
    assert "After cloning, in the checkout" in (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command_and_its_linters_from_that_environment() -> None:
    _, test = readme_commands()
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    calls = [line for line in lines if line == test or line.startswith(test + " ||")]
    assert len(calls) == 1, f".ci/run does not run the README's test command: {test}"
    linters = [line for line in lines if re.search(r"\b(ruff|mypy)\b", line)]
    linters = [line for line in linters if not line.startswith(("#", "echo"))]
    assert len(linters) == 3
    assert all(line.startswith(".venv/bin/python -m ") for line in linters), linters


def test_every_doc_installs_mockskill_with_the_readme_commands() -> None:
    serve, test = readme_commands()
    installs = [
        (doc.name, line.strip())
        for doc in DOCS
        for line in doc.read_text().splitlines()
        if re.search(r"pip install (-e )?['\"]?\.(\[|\s|$|['\"])", line)
    ]
    assert installs
    assert all(line in (serve, test) for _, line in installs), installs


@pytest.mark.timeout(600)
def test_the_readme_serve_command_works_as_written_in_a_fresh_checkout(tmp_path: Path) -> None:
    serve, _ = readme_commands()
    # Run only a command that installs into its own environment: anything else
    # would install into the Python running the tests.
    assert serve.startswith("python3 -m venv .venv && .venv/bin/pip install ")
    checkout = tmp_path / "mockskill"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the work tree is not in a clone
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MOCKSKILL_PORT": str(port), "MOCKSKILL_QUIET": "1"}
    env.pop("VIRTUAL_ENV", None)
    process = subprocess.Popen(
        ["bash", "-c", serve],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # the command's children go with it at the end
    )
    try:
        deadline = time.monotonic() + 540  # a fresh environment installs Flask & co.
        while True:
            try:
                response = requests.get(f"http://127.0.0.1:{port}/skills/translate", timeout=2)
                break
            except requests.ConnectionError:
                assert process.poll() is None, process.communicate()[0].decode()
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert response.status_code == 200
        assert response.json()["id"] == "translate"
        assert (checkout / ".venv" / "bin" / "mockskill").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
            os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=30)


# -- the Python API as the docs show it -----------------------------------------------


def test_the_server_signature_shown_lists_every_parameter() -> None:
    parts: list[str] = []
    for parameter in inspect.signature(Server).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        default = parameter.default
        shown = f'"{default}"' if isinstance(default, str) else repr(default)
        parts.append(f"{parameter.name}={shown}")
    page = " ".join((DOC / "python.md").read_text().split())
    assert f"`Server({', '.join(parts)})`" in page


def test_the_docs_read_the_journal_one_way() -> None:
    # server.journal(session) is the public way; server.state is the inside.
    for doc in DOCS:
        assert ".state." not in doc.read_text(), doc.name


def test_the_journal_entry_table_lists_every_field_an_entry_has() -> None:
    text = (ROOT / "docs" / "admin.md").read_text()
    table = text[text.index("### What an entry holds") :].split("\n\n")[1]
    documented = {
        name
        for row in table.splitlines()[2:]
        for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])
    }
    assert documented == set(Entry._fields)
