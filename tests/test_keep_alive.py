"""Faults only keep-alive makes possible, scripted in YAML, met by real client pools.

``keep_alive:`` on a step (docs/faults.md, "Keep-alive faults"): each cell of
the table there is asserted here — what requests, httpx, aiohttp and Node's
built-in fetch do on the next request of their pool, and how many connections
the server accepted for it — and the table is read and held to what was seen.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import requests

from mockskill import Server, load_text

aiohttp = pytest.importorskip("aiohttp")

FAULTS = {
    "close_after": "{close_after: true}",
    "stale": "{stale_after_ms: 200}",
    "drop_next": "{stale_after_ms: 200, stale: drop_next}",
    "max_requests": "{max_requests: 1}",
}
PAUSE = 0.4
"""Seconds between a pool's two requests (none after the second): past the stale time,
and time to see a close."""

NODE_FETCH = """
const [url, pause] = [process.argv[2], Number(process.argv[3])];
async function one() {
  try { const r = await fetch(url, {method: "POST"}); await r.text(); return "ok"; }
  catch (e) { return e.name + ": " + e.message + " " + (e.cause && e.cause.code); }
}
(async () => {
  const first = await one();
  await new Promise(r => setTimeout(r, pause));
  console.log(JSON.stringify([first, await one()]));
})();
"""


def _wrapped(exc: requests.RequestException) -> BaseException | None:
    """What requests wraps: urllib3's ``ProtocolError(message, cause)``, its cause."""
    protocol_error = exc.args[0] if exc.args else None
    args = getattr(protocol_error, "args", ())
    return args[1] if len(args) > 1 and isinstance(args[1], BaseException) else None


def with_requests(url: str) -> list[str]:
    outcomes = []
    with requests.Session() as session:
        for request in range(2):
            time.sleep(PAUSE if request else 0)
            try:
                session.post(url, timeout=5).raise_for_status()
                outcomes.append("ok")
            except requests.RequestException as exc:
                outcomes.append(f"{type(exc).__name__}({type(_wrapped(exc)).__name__})")
    return outcomes


def with_httpx(url: str) -> list[str]:
    outcomes = []
    with httpx.Client() as client:
        for request in range(2):
            time.sleep(PAUSE if request else 0)
            try:
                client.post(url, timeout=5).raise_for_status()
                outcomes.append("ok")
            except httpx.HTTPError as exc:
                outcomes.append(type(exc).__name__)
    return outcomes


def with_aiohttp(url: str) -> list[str]:
    async def both() -> list[str]:
        outcomes = []
        async with aiohttp.ClientSession() as session:
            for request in range(2):
                await asyncio.sleep(PAUSE if request else 0)
                try:
                    async with session.post(url) as response:
                        await response.read()
                        outcomes.append("ok")
                except aiohttp.ClientError as exc:
                    outcomes.append(type(exc).__name__)
        return outcomes

    return asyncio.run(both())


@pytest.fixture(scope="module")
def node_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    script = tmp_path_factory.mktemp("node") / "fetch.js"
    script.write_text(NODE_FETCH)
    return script


CLIENTS: dict[str, Callable[[str], list[str]]] = {
    "requests": with_requests,
    "httpx": with_httpx,
    "aiohttp": with_aiohttp,
}

# What the next pooled request meets (the table in docs/faults.md).
EXPECTED = {
    ("close_after", "requests"): "ok",
    ("close_after", "httpx"): "ok",
    ("close_after", "aiohttp"): "ok",
    ("close_after", "node"): "ok",
    ("stale", "requests"): "ok",
    ("stale", "httpx"): "ok",
    ("stale", "aiohttp"): "ok",
    ("stale", "node"): "ok",
    ("max_requests", "requests"): "ok",
    ("max_requests", "httpx"): "ok",
    ("max_requests", "aiohttp"): "ok",
    ("max_requests", "node"): "ok",
    ("drop_next", "requests"): "ConnectionError(RemoteDisconnected)",
    ("drop_next", "httpx"): "RemoteProtocolError",
    ("drop_next", "aiohttp"): "ServerDisconnectedError",
    ("drop_next", "node"): "TypeError: fetch failed UND_ERR_SOCKET",
}
RECONNECTS = {"ok": 2}
"""Connections the server accepted for the two requests: a silent reconnect is a second."""


def _scenario(fault: str) -> str:
    return f"skills:\n  - id: k\n    invoke: {{json: {{ok: true}}, keep_alive: {FAULTS[fault]}}}\n"


@pytest.fixture(params=FAULTS, ids=FAULTS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Server]]:
    fault = str(request.param)
    with Server(load_text(_scenario(fault), "keep.yaml")) as started:
        yield fault, started


def accepted(server: Server) -> int:
    assert server._transport is not None
    return server._transport.accepted


@pytest.mark.parametrize("client", CLIENTS, ids=CLIENTS)
def test_a_pool_meets_each_keep_alive_fault_as_documented(
    server: tuple[str, Server], client: str
) -> None:
    fault, served = server
    before = accepted(served)
    first, second = CLIENTS[client](served.invoke_url("k"))
    assert first == "ok"
    assert second == EXPECTED[(fault, client)]
    assert accepted(served) - before == RECONNECTS.get(second, 1)


def test_node_fetch_meets_each_keep_alive_fault_as_documented(
    server: tuple[str, Server], node_script: Path
) -> None:
    fault, served = server
    before = accepted(served)
    result = subprocess.run(
        ["node", str(node_script), served.invoke_url("k"), str(int(PAUSE * 1000))],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    first, second = json.loads(result.stdout)
    assert first == "ok"
    assert second == EXPECTED[(fault, "node")]
    # A silent reconnect is a second connection; a dropped request is not retried on one.
    assert accepted(served) - before == RECONNECTS.get(second, 1)


def test_the_journal_shows_the_dropped_request() -> None:
    with Server(load_text(_scenario("drop_next"), "keep.yaml")) as served:
        with_requests(served.invoke_url("k"))
        first, dropped = served.journal()
    assert (first.endpoint, first.status) == ("invoke", 200)
    assert (dropped.endpoint, dropped.status) == ("refused", None)
    assert dropped.error_code == "MOCKSKILL_CONNECTION_STALE"
    assert dropped.path == "/skills/k/invoke"


# -- the table in docs/faults.md says what the tests above assert ------------------

DOC_ROWS = {
    "close_after": "`close_after`",
    "stale": "`stale_after_ms`",
    "max_requests": "`max_requests`",
    "drop_next": "`stale: drop_next`",
}
DOC_CELLS = {
    "ok": "reconnects silently",
    "ConnectionError(RemoteDisconnected)": "`requests.ConnectionError` (`RemoteDisconnected`)",
    "RemoteProtocolError": "`httpx.RemoteProtocolError`",
    "ServerDisconnectedError": "`aiohttp.ServerDisconnectedError`",
    "TypeError: fetch failed UND_ERR_SOCKET": "`TypeError: fetch failed`, cause `UND_ERR_SOCKET`",
}


def test_the_docs_table_holds_what_each_pool_was_seen_to_meet() -> None:
    page = (Path(__file__).parents[1] / "docs" / "faults.md").read_text()
    header = "| `keep_alive:` | requests | httpx | aiohttp | Node.js `fetch` |"
    assert header in page
    table = page[page.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    rows = {cells[0]: cells[1:] for cells in (line.strip("|").split(" | ") for line in table)}
    rows = {name.strip(): [c.strip() for c in cells] for name, cells in rows.items()}
    assert rows == {
        DOC_ROWS[fault]: [DOC_CELLS[EXPECTED[(fault, c)]] for c in (*CLIENTS, "node")]
        for fault in FAULTS
    }
