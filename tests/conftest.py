"""Shared fixtures: real servers on ephemeral ports, built from YAML text."""

from __future__ import annotations

import os
import socket
import textwrap
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis_server import RedisServer

from mockskill import ScenarioError, Server, load_text
from mockskill.scenario.problems import Problem


def problems_in(text: str) -> list[Problem]:
    """The problems of loading *text* as ``s.yaml`` (it must not load)."""
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    return list(caught.value.problems)


def column(text: str, line: int, token: str) -> int:
    """The column (1-based) where *token* first is on *line* of *text*."""
    return text.splitlines()[line - 1].index(token) + 1


def assert_problem(
    problem: Problem, path: str, line: int, column: int, expected: str, found: str, hint: str
) -> None:
    """*problem* is at *path*, *line*:*column*, says *expected* and *found* (their
    beginnings), and has *hint* in its hint (none when *hint* is empty)."""
    assert problem.path == path
    assert (problem.line, problem.column) == (line, column)
    assert problem.expected.startswith(expected)
    assert problem.found.startswith(found)
    if hint:
        assert hint in problem.hint
    else:
        assert problem.hint == ""


FLAKY = """
name: shared
skills:
  - id: flaky-cycle
    invoke:
      end: cycle
      steps:
        - error: ENDPOINT_UNREACHABLE
          times: 2
        - json: {result: ok}
"""
"""503 twice, then 200, cycling: what the shared-store tests count across replicas."""


EVERY_FAILURE = (
    "auth-required",
    "permission-denied",
    "skill-not-found",
    "execution-timeout",
    "endpoint-unreachable",
    "version-incompatible",
    "connection-reset",
    "empty-response",
    "malformed-chunk",
    "random-data",
    "truncated-body",
)
"""Bundled skills that answer each error category but VALIDATION_ERROR (the
``invalid-descriptor`` skill's descriptor stands for that one), then each
transport fault: invoking them all covers every failure."""


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Start a server on port 0 from YAML text; stopped after the test.

    ``serve(yaml_text, seed=None)`` returns the started :class:`Server`.
    """
    servers: list[Server] = []

    def start(text: str | None = None, **kwargs: object) -> Server:
        scenarios = load_text(textwrap.dedent(text), "test.yaml") if text is not None else None
        server = Server(scenarios, **kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def bundled() -> Iterator[Server]:
    """One server on the bundled scenarios, shared by the tests that only read it."""
    with Server() as server:
        yield server


@pytest.fixture
def session() -> dict[str, str]:
    """Headers giving this test its own Mockskill-Session (fresh sequence positions)."""
    return {"Mockskill-Session": f"test-{uuid.uuid4().hex[:12]}"}


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server per test process (each xdist worker has its own)."""
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of an empty Redis: everything is flushed before each test that asks."""
    if not redis_server.ping():  # a test stopped it: bring it back
        redis_server.stop()
        redis_server.start()
    with socket.create_connection(("127.0.0.1", redis_server.port), timeout=5) as sock:
        sock.sendall(b"FLUSHALL\r\n")
        assert sock.recv(64).startswith(b"+OK")
    return redis_server.url


@pytest.fixture
def own_redis() -> Iterator[Callable[..., RedisServer]]:
    """Start private redis-servers (to stop and restart under traffic); closed after."""
    servers: list[RedisServer] = []

    def start(**kwargs: Any) -> RedisServer:
        server = RedisServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


WORKERS_PER_CORE = 2
"""Workers pytest-xdist's ``-n auto`` starts per core: most tests wait on sockets,
subprocesses and clocks (a worker was on a CPU about a quarter of its time), so twice the
cores keeps the cores busy (on 2 cores, the suite in 3:48 rather than 4:53)."""


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # (an inner run may go without xdist)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``'s workers: :data:`WORKERS_PER_CORE` per core this process may run on
    (None: ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says how many, as xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return WORKERS_PER_CORE * (cores or 1)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the package's modules over ~800 lines: a reviewer's hint (one concept each?),
    not a failure (tests/test_layout.py fails only over ~1 200)."""
    from test_layout import REVIEW_LINES, module_lines

    long = {m: n for m, n in module_lines().items() if n > REVIEW_LINES}
    if long:
        terminalreporter.write_sep("-", f"modules over {REVIEW_LINES} lines (review)")
        for module, lines in long.items():
            terminalreporter.write_line(f"{module}: {lines} lines")


FIRST = (
    # The Docker tests build images for minutes, mostly waiting on the engine: under xdist
    # they overlap the rest of the suite instead of being its tail.
    "test_docker.py",
    # Then the slowest files, slowest first (--dist loadfile hands a worker one file at a
    # time, in this order): the last to start are short ones, so that the workers finish
    # together instead of one running a long file alone at the end.
    "test_typescript_package.py",
    "test_pytest_plugin.py",
    "test_stream_consumers.py",
    "test_packaging.py",
    "test_docs.py",
    "test_security.py",
    "test_openapi.py",
    "test_supervisor.py",
    "test_connection.py",
    "test_shared_scenarios.py",
    "test_audit.py",
    "test_consumers.py",
    "test_server.py",
    "test_chaos.py",
    "test_actions.py",
    "test_keep_alive.py",
    "test_browsers.py",
    "test_timers.py",
    "test_framing.py",
    "test_dashboard.py",
    "test_serve.py",
    "test_templating.py",
    "test_verify_routes.py",
    "test_scenario_states.py",
    "test_record_replay.py",
)
"""Files that run first, in this order; the others follow in collection order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {name: place for place, name in enumerate(FIRST)}
    # stable: a file's tests, and the files not named, keep their order
    items.sort(key=lambda item: first.get(item.path.name, len(FIRST)))
