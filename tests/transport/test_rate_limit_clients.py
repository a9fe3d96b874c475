"""What real clients do with each rate-limit form, against a real server.

The matrix below is the source of truth for the tables in docs/faults.md
("What clients do with a rate limit"), which are read and held to it. Each
skill refuses twice with a scripted ``rate_limited:`` step (one form each,
advising 1.5 s), then answers 200; each client is run in its usual retry
configuration, once against the 429 and once against the 503 of every form,
all at once (threads for requests, httpx and aiohttp; one Node.js process for
got, ky and Node's own fetch). The journal tells how many requests arrived and
how long each retry waited after the answer before it: the cell says both, and
what the client returned or raised at the end.

got and ky come from npm, pinned in tests/node/package-lock.json and installed
into tests/node/node_modules by ``npm ci`` once (again when the lock changes).
Without ``node`` or ``npm`` the Node.js cells skip, unless
``MOCKSKILL_REQUIRE_NODE=1`` (CI) turns that into a failure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from mockskill import Server, load_text

WAIT_MS = 1500  # what every scripted refusal advises
REFUSALS = 2  # then the skill answers 200
STATUSES = (429, 503)

# skill -> (retry_after, headers): one skill per form and status, "<form>-<status>"
FORMS: dict[str, tuple[str, str]] = {
    "seconds": ("seconds", "ietf"),
    "date": ("date", "ietf"),
    "fractional": ("fractional", "ietf"),
    "ms": ("ms", "ietf"),
    "missing": ("missing", "ietf"),
    "malformed": ("malformed", "ietf"),
    "missing-x-ratelimit": ("missing", "x-ratelimit"),
    "missing-x-ratelimit-epoch": ("missing", "x-ratelimit-epoch"),
}
# What each skill sends, as the docs' first column says it (a 1.5 s wait).
SENT: dict[str, str] = {
    "seconds": "`Retry-After: 2`",
    "date": "`Retry-After: <HTTP-date>` (1.5 to 2.5 s ahead), `Date`",
    "fractional": "`Retry-After: 1.5`",
    "ms": "`retry-after-ms: 1500`, `Retry-After: 2`",
    "missing": 'no `Retry-After`; `RateLimit: "default";r=0;t=2`',
    "malformed": "`Retry-After: soon`",
    "missing-x-ratelimit": "no `Retry-After`; `X-RateLimit-Reset: 2`",
    "missing-x-ratelimit-epoch": "no `Retry-After`; `X-RateLimit-Reset: <epoch s>`",
}

SCENARIO = "name: rate-limit-clients\nskills:\n" + "".join(
    f"""\
  - id: {skill}-{status}
    invoke:
      - rate_limited: {{retry_after_ms: {WAIT_MS}, retry_after: {retry_after}, \
headers: {headers}, status: {status}, limit: 10}}
        times: {REFUSALS}
      - json: {{ok: true}}
"""
    for skill, (retry_after, headers) in FORMS.items()
    for status in STATUSES
)

HANG_MS = 3000  # a run whose cell hangs (ky on `soon`) is stopped then, past every advice
ABORT_MS = 10000  # any other run's safety net, never reached when its cell holds
SLACK_MS = 1000  # how late a busy shared machine may be; never why a cell passes


@dataclass(frozen=True)
class Cell:
    """What a client did with a form: each retry's wait and what came out at the end.

    ``waits``: the wait before each retry, a range in ms (the client's own noise, or
    a date's rounding); none: it did not retry. ``outcome``: a status it returned
    (``"refusal"`` for the 429 or 503 itself) or the name of what it raised.
    ``hangs``: it was still waiting when the test stopped it.
    """

    waits: tuple[tuple[int, int], ...]
    outcome: str
    hangs: bool = False

    def text(self) -> str:
        """The cell as docs/faults.md writes it (for the 429)."""
        if self.hangs:
            return "hangs: waits 2^31-1 ms (24.8 days)"
        outcome = f"`{self.outcome}`"
        if self.outcome.isdigit():
            outcome = self.outcome
        elif self.outcome == "refusal":
            outcome = "the 429"
        if not self.waits:
            return f"no retry: {outcome}"
        waits = ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.waits)
        return f"waits {waits} ms, then {outcome}"


def waits(*ranges: int | tuple[int, int]) -> tuple[tuple[int, int], ...]:
    return tuple(r if isinstance(r, tuple) else (r, r) for r in ranges)


DATE = (WAIT_MS, WAIT_MS + 1000)  # a whole second ahead of now + 1.5 s
SECONDS = 2000  # ceil(1.5)
NO_RETRY = Cell((), "refusal")

# client -> skill -> cell, each client in its usual retry configuration (below)
MATRIX: dict[str, dict[str, Cell]] = {
    # Retry(total=3, status_forcelist=[429, 503], backoff_factor=0.25, POST allowed):
    # urllib3 parses whole seconds or an HTTP-date and raises on anything else; its
    # backoff is 0 before the first retry, then 0.25 * 2^(n-1) s.
    "requests": {
        "seconds": Cell(waits(SECONDS, SECONDS), "200"),
        "date": Cell(waits(DATE, DATE), "200"),
        "fractional": Cell((), "requests.exceptions.InvalidHeader"),
        "ms": Cell(waits(SECONDS, SECONDS), "200"),
        "missing": Cell(waits(0, 500), "200"),
        "malformed": Cell((), "requests.exceptions.InvalidHeader"),
        "missing-x-ratelimit": Cell(waits(0, 500), "200"),
        "missing-x-ratelimit-epoch": Cell(waits(0, 500), "200"),
    },
    # httpx retries no status; HTTPTransport(retries=3) retries connecting only.
    "httpx": dict.fromkeys(FORMS, NO_RETRY),
    "aiohttp": dict.fromkeys(FORMS, NO_RETRY),
    # got: retry {limit: 3, methods: ["POST"]}. Retry-After as seconds (fractions
    # too) or a date; otherwise 2^(n-1) s plus up to 100 ms of noise.
    "got": {
        "seconds": Cell(waits(SECONDS, SECONDS), "200"),
        "date": Cell(waits(DATE, DATE), "200"),
        "fractional": Cell(waits(WAIT_MS, WAIT_MS), "200"),
        "ms": Cell(waits(SECONDS, SECONDS), "200"),
        "missing": Cell(waits((1000, 1100), (2000, 2100)), "200"),
        "malformed": Cell(waits((1000, 1100), (2000, 2100)), "200"),
        "missing-x-ratelimit": Cell(waits((1000, 1100), (2000, 2100)), "200"),
        "missing-x-ratelimit-epoch": Cell(waits((1000, 1100), (2000, 2100)), "200"),
    },
    # ky: retry {limit: 3, methods: ["post"]}. Retry-After, else RateLimit-Reset or
    # X-RateLimit-Reset (seconds, or epoch seconds when past 2024); a value it cannot
    # read becomes maxRetryAfter (Infinity): the longest timer, 2^31-1 ms. Without any,
    # 0.3 * 2^(n-1) s.
    "ky": {
        "seconds": Cell(waits(SECONDS, SECONDS), "200"),
        "date": Cell(waits(DATE, DATE), "200"),
        "fractional": Cell(waits(WAIT_MS, WAIT_MS), "200"),
        "ms": Cell(waits(SECONDS, SECONDS), "200"),
        "missing": Cell(waits(300, 600), "200"),
        "malformed": Cell((), "TimeoutError", hangs=True),
        "missing-x-ratelimit": Cell(waits(SECONDS, SECONDS), "200"),
        "missing-x-ratelimit-epoch": Cell(waits(DATE, DATE), "200"),
    },
    "fetch": dict.fromkeys(FORMS, NO_RETRY),
}
PYTHON_CLIENTS = ("requests", "httpx", "aiohttp")
NODE_CLIENTS = ("got", "ky", "fetch")

# Other configurations, each against one form: (client, config, skill) -> cell
OTHERS: dict[tuple[str, str, str], Cell] = {
    # neither retries a POST by default
    ("got", "default", "seconds"): Cell((), "HTTPError"),
    ("ky", "default", "seconds"): Cell((), "HTTPError"),
    # got gives up on a Retry-After over maxRetryAfter; ky waits maxRetryAfter instead
    ("got", "max-retry-after", "seconds"): Cell((), "HTTPError"),
    ("ky", "max-retry-after", "seconds"): Cell(waits(1000, 1000), "200"),
    ("ky", "max-retry-after", "malformed"): Cell(waits(1000, 1000), "200"),
}
CONFIGS = {"default": "defaults", "max-retry-after": "`maxRetryAfter: 1000`"}


@dataclass(frozen=True)
class Run:
    """One client's run against one skill, and what it came to."""

    client: str
    config: str
    skill: str
    session: str
    outcome: str = ""


# -- the Python clients -------------------------------------------------------


def _requests(url: str, session: str) -> str:
    retry = Retry(
        total=3,
        status_forcelist=[429, 503],
        respect_retry_after_header=True,
        backoff_factor=0.25,
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"POST"},
    )
    with requests.Session() as client:
        client.mount("http://", HTTPAdapter(max_retries=retry))
        try:
            answer = client.post(url, json={}, headers={"Mockskill-Session": session}, timeout=10)
        except requests.RequestException as exc:
            return f"{type(exc).__module__}.{type(exc).__name__}"
        return str(answer.status_code)


def _httpx(url: str, session: str) -> str:
    with httpx.Client(transport=httpx.HTTPTransport(retries=3), timeout=10) as client:
        answer = client.post(url, json={}, headers={"Mockskill-Session": session})
    return str(answer.status_code)


def _aiohttp(url: str, session: str) -> str:
    async def post() -> int:
        async with (
            aiohttp.ClientSession() as client,
            client.post(url, json={}, headers={"Mockskill-Session": session}) as answer,
        ):
            await answer.read()
            return answer.status

    return str(asyncio.run(post()))


PYTHON: dict[str, Callable[[str, str], str]] = {
    "requests": _requests,
    "httpx": _httpx,
    "aiohttp": _aiohttp,
}

# -- the Node.js clients ------------------------------------------------------

NODE_DIR = Path(__file__).parents[1] / "node"
NODE = shutil.which("node")
NPM = shutil.which("npm")
REQUIRE_NODE = os.environ.get("MOCKSKILL_REQUIRE_NODE") == "1"


def _install_node_clients() -> str | None:
    """got and ky as tests/node/package-lock.json pins them; the reason if not."""
    if NODE is None or NPM is None:
        return "node and npm are not installed (got, ky and Node's fetch)"
    lock = NODE_DIR / "package-lock.json"
    installed = NODE_DIR / "node_modules" / ".package-lock.json"  # npm writes it last
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return None
    done = subprocess.run(
        [NPM, "ci", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return None if done.returncode == 0 else f"npm ci failed: {done.stderr[-800:]}"


def _node_outcomes(server: Server, runs: list[Run]) -> list[str]:
    """Runs got, ky and fetch (tests/node/clients.mjs), all at once: their outcomes."""
    assert NODE is not None
    jobs = [
        {
            "client": run.client,
            "config": run.config,
            "url": server.invoke_url(run.skill),
            "session": run.session,
            "abortMs": HANG_MS if _expected(run).hangs else ABORT_MS,
        }
        for run in runs
    ]
    done = subprocess.run(
        [NODE, str(NODE_DIR / "clients.mjs")],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=ABORT_MS / 1000 + 30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [_node_outcome(answer) for answer in json.loads(done.stdout)]


def _expected(run: Run) -> Cell:
    form = run.skill.rsplit("-", 1)[0]
    return (
        MATRIX[run.client][form] if run.config == "usual" else OTHERS[run.client, run.config, form]
    )


def _node_outcome(answer: dict[str, object]) -> str:
    return str(answer["error"] if "error" in answer else answer["status"])


# -- running everything at once -----------------------------------------------


@dataclass(frozen=True)
class Measured:
    """Every run's outcome and the waits the journal saw; why Node's were not run."""

    runs: dict[tuple[str, str, str], Run]
    waits: dict[tuple[str, str, str], list[int]]
    node_missing: str | None


@pytest.fixture(scope="module")
def measured() -> Measured:
    node_missing = _install_node_clients()
    planned = [
        Run(client, "usual", f"{skill}-{status}", uuid.uuid4().hex)
        for client in MATRIX
        for skill in FORMS
        for status in STATUSES
    ] + [Run(client, config, f"{skill}-429", uuid.uuid4().hex) for client, config, skill in OTHERS]
    python = [run for run in planned if run.client in PYTHON_CLIENTS]
    node = [run for run in planned if run.client in NODE_CLIENTS and not node_missing]
    outcomes: dict[str, str] = {}

    with Server(load_text(SCENARIO, "rate-limit-clients.yaml")) as server:

        def play(run: Run) -> None:
            outcomes[run.session] = PYTHON[run.client](server.invoke_url(run.skill), run.session)

        threads = [threading.Thread(target=play, args=(run,)) for run in python]
        for thread in threads:
            thread.start()
        if node:  # meanwhile
            sessions = [run.session for run in node]
            outcomes.update(zip(sessions, _node_outcomes(server, node), strict=True))
        for thread in threads:
            thread.join(timeout=ABORT_MS / 1000 + 30)
        done = {
            (run.client, run.config, run.skill): Run(
                run.client, run.config, run.skill, run.session, outcomes[run.session]
            )
            for run in python + node
        }
        gaps = {}
        for key, run in done.items():
            entries = sorted(server.journal(run.session), key=lambda entry: entry.started)
            gaps[key] = [
                round((after.started - before.finished) * 1000)
                for before, after in itertools.pairwise(entries)
            ]
    return Measured(done, gaps, node_missing)


def _assert_cell(measured: Measured, client: str, config: str, skill: str, cell: Cell) -> None:
    if client in NODE_CLIENTS and measured.node_missing:
        if REQUIRE_NODE:
            pytest.fail(f"{measured.node_missing} (MOCKSKILL_REQUIRE_NODE=1)")
        pytest.skip(measured.node_missing)
    key = (client, config, skill)
    status = skill.rsplit("-", 1)[1]
    outcome = status if cell.outcome == "refusal" else cell.outcome
    assert measured.runs[key].outcome == outcome, measured.runs[key]
    seen = measured.waits[key]
    assert len(seen) == len(cell.waits), f"{key}: waits {seen} ms, expected {cell.waits}"
    for wait, (lo, hi) in zip(seen, cell.waits, strict=True):
        assert lo - 50 <= wait <= hi + SLACK_MS, f"{key}: waits {seen} ms, expected {cell.waits}"


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("skill", FORMS)
@pytest.mark.parametrize("client", MATRIX)
def test_a_client_in_its_usual_configuration(
    measured: Measured, client: str, skill: str, status: int
) -> None:
    # the same cell for the 429 and the in-protocol 503: every client here treats them alike
    _assert_cell(measured, client, "usual", f"{skill}-{status}", MATRIX[client][skill])


@pytest.mark.parametrize(("client", "config", "skill"), OTHERS)
def test_a_client_in_another_configuration(
    measured: Measured, client: str, config: str, skill: str
) -> None:
    _assert_cell(measured, client, config, f"{skill}-429", OTHERS[client, config, skill])


# -- the docs' tables ---------------------------------------------------------


def _rows(header: str) -> list[list[str]]:
    """The rows of the table in docs/faults.md under *header*, as lists of cells."""
    page = (Path(__file__).parents[2] / "docs" / "faults.md").read_text()
    assert header in page
    lines = page[page.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]


def test_the_docs_table_says_what_the_matrix_asserts() -> None:
    rows = _rows(
        "| form sent with the 429 | requests + urllib3 `Retry` | httpx | aiohttp | got | ky "
        "| Node.js `fetch` |"
    )
    assert rows == [
        [f"`{skill}`: {SENT[skill]}", *(MATRIX[client][skill].text() for client in MATRIX)]
        for skill in FORMS
    ]


def test_the_docs_table_of_other_configurations_says_what_is_asserted() -> None:
    assert _rows("| client | configuration | form | what it did |") == [
        [client, CONFIGS[config], f"`{skill}`", cell.text()]
        for (client, config, skill), cell in OTHERS.items()
    ]
