"""typescript/: the TypeScript package, checked and tested as its CI step would.

In order, on one xdist worker (``--dist loadfile``): ``npm ci`` in typescript/ (its
dependencies as package-lock.json pins them, npm's cache kept inside the folder),
``tsc --noEmit`` (strict), the build (``tsc`` into typescript/dist/), and the package's
own tests with ``node --test``: the admin client, its errors, the matchers, the README's
example and the packed package in a project of its own against a real server (one
``mockskill.Server`` here, and ``mockskill serve`` from this Python where a test needs
its own options), and the
container helper against the image where a Docker engine answers (built here from the
Dockerfile, on ``BASE_IMAGE``; on an engine without a bridge network the helper runs it
on the host's network). Without ``node`` and ``npm`` these tests skip, unless
``MOCKSKILL_REQUIRE_NODE=1`` (CI) turns that into a failure; without an engine the
container tests skip inside, unless ``MOCKSKILL_REQUIRE_DOCKER=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mockskill import Server
from mockskill._version import __version__

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")
REQUIRE_NODE = os.environ.get("MOCKSKILL_REQUIRE_NODE") == "1"

needs_node = pytest.mark.skipif(
    (NODE is None or NPM is None) and not REQUIRE_NODE,
    reason="node and npm are not installed (the TypeScript package's toolchain)",
)
pytestmark = pytest.mark.timeout(600)


def run(*command: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """Runs *command* in typescript/; its output, or a failure that shows it."""
    done = subprocess.run(
        command,
        cwd=PACKAGE,
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


def test_the_package_has_no_runtime_dependency_and_testcontainers_as_an_optional_peer() -> None:
    package = json.loads((PACKAGE / "package.json").read_text())
    assert "dependencies" not in package
    assert package["peerDependenciesMeta"] == {"testcontainers": {"optional": True}}
    assert set(package["devDependencies"]) >= {"typescript", "@types/node", "testcontainers"}


@pytest.fixture(scope="module")
def installed() -> None:
    """``npm ci``: typescript/node_modules as the lock pins it."""
    assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
    assert NPM is not None, "npm is required here (MOCKSKILL_REQUIRE_NODE=1)"
    cache = PACKAGE / ".npm-cache"
    run(NPM, "ci", "--no-audit", "--no-fund", "--cache", str(cache), timeout=300)


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
    built = subprocess.run(
        [*command, "--build-arg", f"BASE_IMAGE={base}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    try:
        yield {"MOCKSKILL_IMAGE": tag, **engine}
    finally:
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


@needs_node
def test_the_package_tests_pass(built: None, image: dict[str, str]) -> None:
    assert NODE is not None
    tests = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.glob("dist/test/*.test.js"))
    assert tests, "the build made no tests"
    # One server for the files' tests that need no option of their own (each has its own
    # sessions and scenario names): a server start each is seconds of CPU on loaded cores.
    # The files run at once (node's default is one per core but one): they mostly wait.
    with Server() as server:
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
        assert "\n# skipped 0\n" in output, output[-6000:]
