"""Consumer programs of streams get exactly their findings: directly, through the proxy,
and on three replicas of a shared store.

The programs (``tests/consumers/streams/``) are written as a user writes one: with httpx,
requests or aiohttp (``consumer.py``) or Node's fetch (``consumer.mjs``), each either
correct or with one bug of issue 31's (no idle timeout, no ``Idempotency-Key``, no
``Last-Event-ID``, a non-retryable error event retried, no wait for ``retry:`` or an
error event's advice, a total timeout shorter than the stream). Each is run as a process
against ``streams.yaml`` (the bundled stream scenarios' cases, in ms) in a session of its
own, and the verdict is read as a user reads it, from ``GET /__admin/report``. A
(client, bug) pair per setup, the clients taking turns, keeps the run to seconds.

Through a ``proxy`` step the provider is mockskill serving the same scenario, and the
front's journal grades what it relayed (docs/streams.md, "Through the proxy"): what the
bytes cannot say, that a stream resumes and how long one lasts, the front's ``proxy:``
declares (``streams:``).
Without ``node`` the Node program skips, unless ``MOCKSKILL_REQUIRE_NODE=1`` (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from mockskill import Server, load_text

HERE = Path(__file__).resolve().parent / "consumers" / "streams"
SCENARIO = HERE / "streams.yaml"
NODE = shutil.which("node")
REQUIRE_NODE = os.environ.get("MOCKSKILL_REQUIRE_NODE") == "1"
CLIENTS = ("httpx", "requests", "aiohttp", "node")
BUGS: dict[str, list[tuple[str, str]]] = {
    "none": [],
    "no-idle-timeout": [("stall-not-detected", "stall")],
    "no-key": [("duplicate-execution", "cut"), ("duplicate-execution", "stall")],
    "no-last-event-id": [("resume-ignored", "resumable")],
    "retry-nonretryable": [("non-retryable-retried", "denied")],
    "retry-too-soon": [
        ("retry-too-soon", "cut"),
        ("retry-too-soon", "overload"),
        ("retry-too-soon", "resumable"),
        ("retry-too-soon", "stall"),
    ],
    "gave-up": [("gave-up-despite-progress", "slow")],
}
PROXY_FRONT = """
name: front
proxy: PROVIDER
skills:
  # what the provider's streams promise, which their bytes cannot say
  - {id: resumable, proxy: {url: PROVIDER, streams: {resumable: true}}}
  - {id: slow, proxy: {url: PROVIDER, streams: {expected: 500ms}}}
"""
SETUPS = ("direct", "proxy", "replicas")


def scenario() -> str:
    return SCENARIO.read_text(encoding="utf-8")


@contextmanager
def setup(name: str, redis: str | None) -> Iterator[tuple[list[str], str]]:
    """The URLs the consumers go round, and the one whose report is read."""
    with ExitStack() as stack:
        if name == "direct":
            server = stack.enter_context(Server(load_text(scenario(), "streams.yaml")))
            yield [server.url], server.url
        elif name == "proxy":
            provider = stack.enter_context(Server(load_text(scenario(), "streams.yaml")))
            front = PROXY_FRONT.replace("PROVIDER", provider.url)
            server = stack.enter_context(Server(load_text(front, "front.yaml")))
            yield [server.url], server.url
        else:
            replicas = [
                stack.enter_context(Server(load_text(scenario(), "streams.yaml"), state=redis))
                for _ in range(3)
            ]
            yield [r.url for r in replicas], replicas[0].url


def program(client: str, bug: str, session: str, bases: list[str]) -> list[str]:
    if client == "node":
        assert NODE is not None, "node is required here (MOCKSKILL_REQUIRE_NODE=1)"
        return [NODE, str(HERE / "consumer.mjs"), bug, session, *bases]
    return [sys.executable, str(HERE / "consumer.py"), client, bug, session, *bases]


def findings(report_url: str, session: str) -> list[tuple[str, str]]:
    """The session's findings as (rule, skill)."""
    report = httpx.get(f"{report_url}/__admin/report", params={"session": session}).json()
    (audited,) = report["sessions"]
    return sorted((f["rule"], f["endpoint"].split("/")[2]) for f in audited["findings"])


def pairs(setup_name: str) -> list[tuple[str, str]]:
    """A client for every bug, in turns that differ from one setup to the next."""
    turn = SETUPS.index(setup_name)
    clients = [c for c in CLIENTS if c != "node" or NODE is not None or REQUIRE_NODE]
    return [(clients[(i + turn) % len(clients)], bug) for i, bug in enumerate(BUGS)]


@pytest.mark.parametrize("setup_name", SETUPS)
def test_every_consumer_program_gets_exactly_its_findings(
    setup_name: str, request: pytest.FixtureRequest
) -> None:
    redis = request.getfixturevalue("redis_url") if setup_name == "replicas" else None
    with setup(setup_name, redis) as (bases, report_url):
        runs = [
            (client, bug, f"{client}-{bug}-{uuid.uuid4().hex[:8]}")
            for client, bug in pairs(setup_name)
        ]

        def run(client: str, bug: str, session: str) -> subprocess.CompletedProcess[str]:
            command = program(client, bug, session, bases)
            return subprocess.run(command, capture_output=True, text=True, timeout=60)

        with ThreadPoolExecutor(len(runs)) as pool:
            done = list(pool.map(lambda r: run(*r), runs))
        got = {(client, bug): findings(report_url, session) for client, bug, session in runs}
    for (client, bug, _), result in zip(runs, done, strict=True):
        assert result.returncode == 0, (client, bug, result.stderr)
        assert got[client, bug] == sorted(BUGS[bug]), (client, bug, got[client, bug])
