"""Scenario paths the server's user cannot read: one positioned problem each, with the fix.

The command runs as a user that is not the files' owner, as it does in the
Docker image (uid 10001 reading a host folder): as root, the test runs it
as uid 10001; as anyone else, as itself on files it made unreadable.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

if not hasattr(os, "getuid"):
    pytest.skip("file modes and uids are POSIX's", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
AS_ROOT = os.getuid() == 0
UID = 10001 if AS_ROOT else os.getuid()
SCENARIO = "name: {name}\nskills: [{{id: {name}}}]\n"


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder the other user can reach (pytest's own tmp folders are closed to others)."""
    path = Path(tempfile.mkdtemp(prefix="mockskill-access-"))
    path.chmod(0o755)
    yield path
    for folder, _dirs, _files in os.walk(path):
        Path(folder).chmod(0o755)  # so that it can be removed
    shutil.rmtree(path)


def scenarios(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.yaml").write_text(SCENARIO.format(name=name))
    return folder


@functools.cache
def _runs_as_the_other_user(drop: tuple[str, ...]) -> bool:
    """Whether the user *drop* switches to can start this interpreter (a pyenv build
    under root's home, with its shared library there too, cannot be)."""
    probe = [*drop, sys.executable, "-c", "pass"]
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


def mockskill(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m mockskill ARGS`` as a user that owns none of the files."""
    command = [sys.executable, "-m", "mockskill", *map(str, args)]
    if AS_ROOT:
        setpriv = shutil.which("setpriv")  # util-linux
        if setpriv is None:
            pytest.skip("running as root, and setpriv (util-linux) is missing to drop to uid 10001")
        drop = [setpriv, f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
        if not _runs_as_the_other_user(tuple(drop)):
            closed = f"{sys.executable}: its files are closed to others"
            pytest.skip(f"uid {UID} cannot run this interpreter ({closed})")
        command = [*drop, *command]
    # The other user reads this checkout's package, not an installed one.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, cwd="/", env=env, check=False
    )


def expect_refused(result: subprocess.CompletedProcess[str], path: Path, kind: str) -> str:
    # 3: what was to be checked could not be read (docs/cli.md's table of exit codes).
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Invalid value" not in result.stderr  # not click's usage error (exit 2)
    assert "Traceback" not in result.stderr
    first = (
        f"{path}:1:1: ({kind}): expected a {kind} uid {UID} (the user mockskill runs as) can read"
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"{path}:")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(first), lines[0]
    chmod = f"chmod -R a+rX {path}" if kind == "folder" else f"chmod a+r {path}"
    assert f"make it readable by uid {UID}: {chmod}" in lines[0]
    assert "docker run --user " in lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["validate", "serve"])
def test_a_folder_the_user_cannot_read_is_a_problem_naming_uid_and_fix(
    place: Path, command: str
) -> None:
    folder = scenarios(place / "mounted", "one")
    folder.chmod(0o700 if AS_ROOT else 0o000)
    args = ["--port", "0"] if command == "serve" else []
    line = expect_refused(mockskill(command, *args, folder), folder, "folder")
    owner = folder.stat()
    assert f"(owner uid {owner.st_uid}, mode d" in line
    assert f"docker run --user {owner.st_uid}:{owner.st_gid}" in line


def test_a_file_the_user_cannot_read_is_a_problem_naming_uid_and_fix(place: Path) -> None:
    file = scenarios(place, "one") / "one.yaml"
    file.chmod(0o600 if AS_ROOT else 0o000)
    expect_refused(mockskill("validate", file), file, "file")


def test_unreadable_parts_of_a_folder_are_reported_not_skipped(place: Path) -> None:
    folder = scenarios(place / "mounted", "one")
    hidden = scenarios(folder / "sub", "two")
    hidden.chmod(0o700 if AS_ROOT else 0o000)
    secret = folder / "secret.yaml"
    secret.write_text(SCENARIO.format(name="three"))
    secret.chmod(0o600 if AS_ROOT else 0o000)
    result = mockskill("validate", folder)
    expect_refused(result, hidden, "folder")
    expect_refused(result, secret, "file")
    assert result.stderr.splitlines()[-1] == "2 problems in 2 files; nothing was loaded."


def test_a_path_below_a_closed_folder_says_so(place: Path) -> None:
    file = scenarios(place / "closed", "one") / "one.yaml"
    file.parent.chmod(0o700 if AS_ROOT else 0o000)
    line = expect_refused(mockskill("validate", file), file, "file")
    assert "found permission denied on a folder above it" in line


def test_readable_paths_still_load(place: Path) -> None:
    folder = scenarios(place / "mounted", "one")
    scenarios(folder / "sub", "two")
    result = mockskill("validate", folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 2 scenarios, 2 skills"), result.stdout
