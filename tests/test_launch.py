"""``mockskill serve`` runs on the C allocator, in the process it was started as.

A serving process executes itself again with ``PYTHONMALLOC=malloc`` unless
somebody chose an allocator (see :mod:`mockskill.launch`): read from
``/proc/PID/environ``, the environment the process's image was executed with,
of the very process the test started.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
import requests

import mockskill.cli
from mockskill import launch
from mockskill.launch import SERVE_ALLOCATOR, allocator_to_set

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/environ").exists() or os.name != "posix",
    reason="reads /proc/PID/environ (Linux); no exec elsewhere",
)


@contextmanager
def serving(
    command: list[str], stderr: IO[bytes] | None = None, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """*command* + ``serve --port P`` started (environment without PYTHONMALLOC, plus *env*)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"} | env
    process = subprocess.Popen(
        [*command, "serve", "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=environ,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/skills/translate", timeout=5)
                assert answer.json()["id"] == "translate"
                break
            except requests.ConnectionError:
                assert process.poll() is None, "serve exited"
                assert time.monotonic() < deadline, "serve did not answer within 60 s"
                time.sleep(0.02)
        yield process
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def allocator_of(pid: int) -> str | None:
    """The PYTHONMALLOC that process *pid*'s image was executed with."""
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        name, _, value = item.partition(b"=")
        if name == b"PYTHONMALLOC":
            return value.decode()
    return None


CONSOLE_SCRIPT = Path(sys.executable).with_name("mockskill")


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "mockskill"],
        pytest.param(
            [str(CONSOLE_SCRIPT)],
            marks=pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="no console script"),
        ),
    ],
    ids=["python -m mockskill", "console script"],
)
def test_serve_runs_on_the_c_allocator_in_the_process_that_was_started(
    command: list[str],
) -> None:
    with serving(command) as process:
        # The process that answers is the one started (exec, not a child).
        assert allocator_of(process.pid) == SERVE_ALLOCATOR == "malloc"
        assert b"serve" in Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")


def test_an_allocator_the_user_chose_is_kept() -> None:
    with serving([sys.executable, "-m", "mockskill"], PYTHONMALLOC="pymalloc") as process:
        assert allocator_of(process.pid) == "pymalloc"


def test_the_interpreters_own_flags_survive_the_exec(tmp_path: Path) -> None:
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        command = [sys.executable, "-X", "importtime", "-m", "mockskill"]
        with serving(command, stderr=stderr) as process:
            assert allocator_of(process.pid) == SERVE_ALLOCATOR
    # The first image imports no more than the launcher; -X importtime lists the
    # commands' modules, so the image executed again had the flag too.
    assert "mockskill.cli" in log.read_text()


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        (["mockskill", "serve"], {}, "malloc"),
        (["mockskill", "serve", "--port", "0"], {"HOME": "/x"}, "malloc"),
        (["mockskill", "serve"], {"PYTHONMALLOC": "pymalloc"}, None),
        (["mockskill", "serve"], {"PYTHONMALLOC": "malloc"}, None),  # after the exec
        (["mockskill", "validate"], {}, None),
        (["mockskill", "report", "serve"], {}, None),
        (["mockskill"], {}, None),
    ],
)
def test_only_a_serve_that_nobody_chose_an_allocator_for_is_executed_again(
    argv: list[str], environ: dict[str, str], expected: str | None
) -> None:
    assert allocator_to_set(argv, environ) == expected


def test_a_serve_that_may_not_execute_itself_again_serves_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As after setpriv or su: the interpreter's path needs rights the new user lacks.
    def refused(*_: object) -> None:
        raise PermissionError(13, "Permission denied")

    commands: list[list[str]] = []
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    monkeypatch.setattr(sys, "argv", ["mockskill", "serve"])
    monkeypatch.setattr(os, "execve", refused)
    monkeypatch.setattr(mockskill.cli, "main", lambda: commands.append(sys.argv))
    launch.main()
    assert commands == [["mockskill", "serve"]]
    assert "PYTHONMALLOC" not in os.environ  # nothing claims an allocator it does not have


@pytest.mark.parametrize(("command", "serving"), [("serve", True), ("validate", False)])
def test_serve_sets_a_servers_collector_thresholds_before_it_imports_the_commands(
    command: str, serving: bool
) -> None:
    # With PYTHONMALLOC set, no exec: the thresholds, when the commands' module is imported.
    code = (
        "import gc, sys\n"
        "class Seen:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mockskill.cli':\n"
        "            print(list(gc.get_threshold()))\n"
        "sys.meta_path.insert(0, Seen())\n"
        "from mockskill import launch\n"
        "sys.argv = ['mockskill', sys.argv[1], '--help']\n"
        "try:\n"
        "    launch.main()\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONMALLOC": SERVE_ALLOCATOR},
    )
    from mockskill.server_process import MIDDLE_GC_THRESHOLD, YOUNG_GC_THRESHOLD

    thresholds = done.stdout.splitlines()[0]
    old = 10  # Python's own for the old generation, left as it is
    expected = [YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, old] if serving else [700, 10, old]
    assert thresholds == str(expected)
