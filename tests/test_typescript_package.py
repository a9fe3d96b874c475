"""typescript/: the TypeScript package, checked and tested as its CI step would.

In order, on one xdist worker (``--dist loadfile``): ``npm ci`` in typescript/ (its
dependencies as package-lock.json pins them, npm's cache kept inside the folder),
``tsc --noEmit`` (strict), the build (``tsc`` into typescript/dist/), and the package's
own tests with ``node --test``: the admin client, its errors, the matchers, the README's
example and the packed package in a project of its own against a real server (one
``mockskill.Server`` here, and ``mockskill serve`` from this Python where a test needs
its own options); the matchers under the real Vitest and Jest (typescript/test/runners/,
a project of their own with its own lock, installed alongside the package's own); and the
container helper against the image where a Docker engine answers (built here from the
Dockerfile, on ``BASE_IMAGE``; on an engine without a bridge network the helper runs it
on the host's network). Without ``node`` and ``npm`` these tests skip, unless
``MOCKSKILL_REQUIRE_NODE=1`` (CI) turns that into a failure; without an engine the
container tests skip inside, unless ``MOCKSKILL_REQUIRE_DOCKER=1``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import docker_images
import pytest

from mockskill import Server
from mockskill._version import __version__

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "typescript"
RUNNERS = PACKAGE / "test" / "runners"
CACHE = PACKAGE / ".npm-cache"
NODE = shutil.which("node")
NPM = shutil.which("npm")
REQUIRE_NODE = os.environ.get("MOCKSKILL_REQUIRE_NODE") == "1"

needs_node = pytest.mark.skipif(
    (NODE is None or NPM is None) and not REQUIRE_NODE,
    reason="node and npm are not installed (the TypeScript package's toolchain)",
)
pytestmark = pytest.mark.timeout(600)


def run(
    *command: str, timeout: float, env: dict[str, str] | None = None, cwd: Path = PACKAGE
) -> str:
    """Runs *command* in *cwd* (typescript/); its output, or a failure that shows it."""
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output[-6000:]}"
    return output


def test_the_package_is_versioned_with_the_python_package() -> None:
    package = json.loads((PACKAGE / "package.json").read_text())
    lock = json.loads((PACKAGE / "package-lock.json").read_text())
    assert package["version"] == __version__
    assert lock["version"] == lock["packages"][""]["version"] == __version__
    # The runners' project links the package, and its lock records the version linked.
    runners_lock = json.loads((RUNNERS / "package-lock.json").read_text())
    assert runners_lock["packages"]["../.."]["version"] == __version__


def test_the_package_has_no_runtime_dependency_and_testcontainers_as_an_optional_peer() -> None:
    package = json.loads((PACKAGE / "package.json").read_text())
    assert "dependencies" not in package
    assert package["peerDependenciesMeta"] == {"testcontainers": {"optional": True}}
    assert set(package["devDependencies"]) >= {"typescript", "@types/node", "testcontainers"}


@pytest.fixture(scope="module")
def runners_install() -> Iterator[tuple[subprocess.Popen[bytes], IO[str]]]:
    """``npm ci`` of the runners' project, started first and left running.

    It needs nothing of the package's own install (the package is a link to ../..), and
    most of its time is download and disk: it overlaps the package's install and tests.
    """
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    assert NPM is not None, "npm is required here (MOCKSKILL_REQUIRE_NODE=1)"
    command = [NPM, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--cache", str(CACHE)]
    with (
        tempfile.TemporaryFile("w+") as log,
        subprocess.Popen(command, cwd=RUNNERS, stdout=log, stderr=subprocess.STDOUT) as install,
    ):
        yield install, log
        if install.poll() is None:
            install.kill()


@pytest.fixture(scope="module")
def installed(runners_install: object) -> None:
    """``npm ci``: typescript/node_modules as the lock pins it."""
    assert NPM is not None
    run(NPM, "ci", "--no-audit", "--no-fund", "--cache", str(CACHE), timeout=300)


@needs_node
def test_tsc_strict_finds_nothing(installed: None) -> None:
    run(NPM, "run", "--silent", "check", timeout=120)


@pytest.fixture(scope="module")
def built(installed: None) -> None:
    """``tsc``: typescript/dist, the package and its tests."""
    shutil.rmtree(PACKAGE / "dist", ignore_errors=True)
    run(NPM, "run", "--silent", "build", timeout=120)


@pytest.fixture(scope="module")
def image() -> Iterator[dict[str, str]]:
    """The environment for the container tests: MOCKSKILL_IMAGE where an engine answers."""
    engine = _engine_environment()
    if engine is None:
        yield {}
        return
    tag = f"mockskill-ts-test:{uuid.uuid4().hex[:10]}"
    base = os.environ.get("BASE_IMAGE", "python:3.12-slim")
    command = ["docker", "build", "--quiet", "--network", "host", "--tag", tag, str(ROOT)]
    with docker_images.using():  # tests/test_docker.py may build from this one's layers
        built = subprocess.run(
            [*command, "--build-arg", f"BASE_IMAGE={base}"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert built.returncode == 0, built.stdout + built.stderr
        yield {"MOCKSKILL_IMAGE": tag, **engine}
    with docker_images.removing():
        subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=60, check=False)


def _engine_environment() -> dict[str, str] | None:
    """What Testcontainers needs for the engine ``docker`` reaches; None when none answers."""
    if shutil.which("docker") is None:
        return None
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
        if info.returncode != 0:
            return None
        bridge = subprocess.run(
            ["docker", "network", "inspect", "bridge"], capture_output=True, timeout=30, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    if bridge.returncode == 0:
        return {}
    # No bridge (the private engine): Testcontainers, which runs in a container here, looks
    # for the bridge's gateway unless told the host; the container shares this one's network.
    return {"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1"}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One server for every test here that needs no option of its own (each has its own
    sessions and scenario names): a server start each is seconds of CPU on loaded cores."""
    with Server() as running:
        yield running


@needs_node
def test_the_package_tests_pass(built: None, image: dict[str, str], server: Server) -> None:
    assert NODE is not None
    tests = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.glob("dist/test/*.test.js"))
    assert tests, "the build made no tests"
    # The files run at once (node's default is one per core but one): they mostly wait.
    env = {**os.environ, "MOCKSKILL_PYTHON": sys.executable, "MOCKSKILL_URL": server.url}
    output = run(
        NODE,
        "--test",
        "--test-concurrency=8",
        "--test-reporter=tap",
        *tests,
        timeout=300,
        env={**env, **image},
    )
    assert "\n# fail 0\n" in output, output[-6000:]
    if image:
        # With an engine, only the mapped-port test may skip: where the engine has no bridge.
        skipped = [line for line in output.splitlines() if "# SKIP" in line]
        assert all("no bridge network" in line for line in skipped), output[-6000:]


@pytest.fixture(scope="module")
def runners(runners_install: tuple[subprocess.Popen[bytes], IO[str]], built: None) -> None:
    """typescript/test/runners installed, and its tests compiled by strict tsc against the
    package's declarations for both runners (``mockskill/vitest``, ``mockskill/jest``)."""
    install, log = runners_install
    install.wait(timeout=300)
    log.seek(0)
    assert install.returncode == 0, f"npm ci in {RUNNERS} failed:\n{log.read()[-6000:]}"
    shutil.rmtree(RUNNERS / "dist", ignore_errors=True)
    run(
        NODE or "node",
        str(PACKAGE / "node_modules/typescript/bin/tsc"),
        "-p",
        ".",
        cwd=RUNNERS,
        timeout=120,
    )


@needs_node
def test_the_matchers_pass_under_vitest(runners: None, server: Server) -> None:
    output = run(
        NODE or "node",
        "node_modules/vitest/vitest.mjs",
        "run",
        "--root",
        "vitest",
        cwd=RUNNERS,
        timeout=120,
        env={**os.environ, "MOCKSKILL_URL": server.url, "NO_COLOR": "1"},
    )
    assert re.search(r"Tests +(\d+) passed \(\1\)", output), output[-6000:]  # all, none skipped


@needs_node
def test_the_matchers_pass_under_jest(runners: None, server: Server) -> None:
    output = run(
        NODE or "node",
        "--experimental-vm-modules",  # the compiled test is an ES module, as the package is
        "node_modules/jest/bin/jest.js",
        "--ci",
        cwd=RUNNERS,
        timeout=120,
        env={**os.environ, "MOCKSKILL_URL": server.url},
    )
    assert re.search(r"Tests: +(\d+) passed, \1 total", output), output[-6000:]
