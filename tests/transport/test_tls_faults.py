"""TLS faults, as real clients meet them: the table of docs/tls.md, cell by cell.

One server (module-scoped) serves HTTPS and a skill per TLS fault, each on
a port of its own (its descriptor's ``endpoint.url``). For each client —
requests, httpx, aiohttp, curl, Node's fetch — one test sends every fault's
invocation (one process per client) and compares what it raised, cell by
cell, with the table below; ``test_the_docs_table_is_this_one`` holds
docs/tls.md to the same table. Around it: what the journal records of each
failed handshake (fault, alert, SNI), a handshake that succeeds plays the
skill's sequence, and the client certificate the admin API issues passes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import urllib3.exceptions

from mockskill import Server
from mockskill.scenario.model import TLS_FAULTS

TIMEOUT = 1.0
"""Seconds each client gives a fault (``handshake_hang`` takes all of it)."""
CURL = shutil.which("curl")
NODE = shutil.which("node")
DOC = Path(__file__).resolve().parents[2] / "docs" / "tls.md"

SCENARIO = "name: tls-faults\nskills:\n" + "".join(
    f"  - id: {fault.replace('_', '-')}\n    tls: {fault}\n" for fault in TLS_FAULTS
)

# fault -> (exception class name, a fragment of its message); None: it succeeded (200)
REQUESTS: dict[str, tuple[str, str] | None] = {
    "expired": ("SSLError", "certificate has expired"),
    "not_yet_valid": ("SSLError", "certificate is not yet valid"),
    "wrong_host": ("SSLError", "IP address mismatch"),
    "untrusted": ("SSLError", "unable to get local issuer certificate"),
    "self_signed": ("SSLError", "self-signed certificate"),
    "weak_key": ("SSLError", "EE certificate key too weak"),
    "client_cert_required": ("ConnectionError", "Remote end closed connection without response"),
    "handshake_reset": ("ConnectionError", "Connection reset by peer"),
    "handshake_hang": ("ReadTimeout", "Read timed out"),
    "plain_http": ("SSLError", "wrong version number"),
    "protocol_version": ("SSLError", "EOF occurred in violation of protocol"),
}
HTTPX: dict[str, tuple[str, str] | None] = {
    "expired": ("ConnectError", "certificate has expired"),
    "not_yet_valid": ("ConnectError", "certificate is not yet valid"),
    "wrong_host": ("ConnectError", "IP address mismatch"),
    "untrusted": ("ConnectError", "unable to get local issuer certificate"),
    "self_signed": ("ConnectError", "self-signed certificate"),
    "weak_key": ("ConnectError", "EE certificate key too weak"),
    "client_cert_required": (
        "RemoteProtocolError",
        "Server disconnected without sending a response",
    ),
    "handshake_reset": ("ConnectError", "Connection reset by peer"),
    "handshake_hang": ("ConnectTimeout", "handshake operation timed out"),
    "plain_http": ("ConnectError", "wrong version number"),
    "protocol_version": ("ConnectError", "EOF occurred in violation of protocol"),
}
AIOHTTP: dict[str, tuple[str, str] | None] = {
    "expired": ("ClientConnectorCertificateError", "certificate has expired"),
    "not_yet_valid": ("ClientConnectorCertificateError", "certificate is not yet valid"),
    "wrong_host": ("ClientConnectorCertificateError", "IP address mismatch"),
    "untrusted": ("ClientConnectorCertificateError", "unable to get local issuer certificate"),
    "self_signed": ("ClientConnectorCertificateError", "self-signed certificate"),
    "weak_key": ("ClientConnectorCertificateError", "EE certificate key too weak"),
    "client_cert_required": ("ServerDisconnectedError", "Server disconnected"),
    "handshake_reset": ("ClientConnectorError", "Connection reset by peer"),
    "handshake_hang": ("TimeoutError", ""),
    "plain_http": ("ClientConnectorSSLError", "wrong version number"),
    "protocol_version": ("ClientConnectorError", "Cannot connect to host"),
}
# fault -> (exit code, a fragment of curl's message)
CURL_EXIT: dict[str, tuple[int, str]] = {
    "expired": (60, "certificate has expired"),
    "not_yet_valid": (60, "certificate is not yet valid"),
    "wrong_host": (60, "no alternative certificate subject name matches"),
    "untrusted": (60, "unable to get local issuer certificate"),
    "self_signed": (60, "self-signed certificate"),
    "weak_key": (60, "EE certificate key too weak"),
    "client_cert_required": (52, "Empty reply from server"),
    "handshake_reset": (35, "Connection reset by peer"),
    "handshake_hang": (28, "Connection timed out"),
    "plain_http": (35, "wrong version number"),
    "protocol_version": (35, "legacy sigalg disallowed or unsupported"),
}
# fault -> the error's name and its cause's code (None: it succeeded, 200)
NODE_FETCH: dict[str, str | None] = {
    "expired": "TypeError: fetch failed, CERT_HAS_EXPIRED",
    "not_yet_valid": "TypeError: fetch failed, CERT_NOT_YET_VALID",
    "wrong_host": "TypeError: fetch failed, ERR_TLS_CERT_ALTNAME_INVALID",
    "untrusted": "TypeError: fetch failed, UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "self_signed": "TypeError: fetch failed, DEPTH_ZERO_SELF_SIGNED_CERT",
    "weak_key": None,  # Node's OpenSSL security level takes an RSA-1024 key
    "client_cert_required": "TypeError: fetch failed, UND_ERR_SOCKET",
    "handshake_reset": "TypeError: fetch failed, ECONNRESET",
    "handshake_hang": "TimeoutError: The operation was aborted due to timeout",
    "plain_http": "TypeError: fetch failed, ERR_SSL_WRONG_VERSION_NUMBER",
    "protocol_version": "TypeError: fetch failed, ECONNRESET",
}
RETRY: dict[str, str] = {
    fault: "yes, with backoff" if fault in ("handshake_reset", "handshake_hang") else "no"
    for fault in TLS_FAULTS
}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server(SCENARIO, tls=True) as started:
        yield started


@pytest.fixture(scope="module")
def urls(server: Server) -> dict[str, str]:
    """Each fault's invoke URL, as its skill's descriptor names it."""
    found = {}
    for fault in TLS_FAULTS:
        skill = fault.replace("_", "-")
        descriptor = requests.get(server.skill_url(skill), verify=server.ca_bundle, timeout=5)
        found[fault] = descriptor.json()["endpoint"]["url"]
    return found


def _cell(outcome: tuple[str, str] | None) -> str:
    return "200 (accepted)" if outcome is None else f"`{outcome[0]}`: {outcome[1]}".rstrip(": ")


def test_each_fault_has_a_port_of_its_own(server: Server, urls: dict[str, str]) -> None:
    ports = {url.split("/")[2] for url in urls.values()}
    assert len(ports) == len(TLS_FAULTS)
    assert all(url.startswith("https://127.0.0.1:") for url in urls.values())
    assert server.url.split("/")[2] not in ports


def test_requests_raises(server: Server, urls: dict[str, str]) -> None:
    found: dict[str, tuple[str, str] | None] = {}
    for fault, url in urls.items():
        try:
            requests.post(url, verify=server.ca_bundle, timeout=TIMEOUT)
        except requests.RequestException as exc:
            found[fault] = (type(exc).__name__, _fragment(str(exc), REQUESTS[fault]))
        else:
            found[fault] = None
    assert found == REQUESTS


def test_httpx_raises(server: Server, urls: dict[str, str]) -> None:
    found: dict[str, tuple[str, str] | None] = {}
    with httpx.Client(verify=server.client_context, timeout=TIMEOUT) as client:
        for fault, url in urls.items():
            try:
                client.post(url)
            except httpx.HTTPError as exc:
                found[fault] = (type(exc).__name__, _fragment(str(exc), HTTPX[fault]))
            else:
                found[fault] = None
    assert found == HTTPX


def test_aiohttp_raises(server: Server, urls: dict[str, str]) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    assert server.ca_bundle is not None
    context = ssl.create_default_context(cafile=server.ca_bundle)

    async def each() -> dict[str, tuple[str, str] | None]:
        found: dict[str, tuple[str, str] | None] = {}
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout) as client:
            for fault, url in urls.items():
                try:
                    async with client.post(url, ssl=context) as response:
                        await response.read()
                except (TimeoutError, aiohttp.ClientError) as exc:
                    found[fault] = (type(exc).__name__, _fragment(str(exc), AIOHTTP[fault]))
                else:
                    found[fault] = None
        return found

    assert asyncio.run(each()) == AIOHTTP


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_curl_exits_with(server: Server, urls: dict[str, str]) -> None:
    assert CURL is not None
    assert server.ca_bundle is not None
    found = {}
    for fault, url in urls.items():
        args = [CURL, "-sS", "-X", "POST", "-o", "/dev/null", "--max-time", str(TIMEOUT)]
        done = subprocess.run(
            [*args, "--cacert", server.ca_bundle, url], capture_output=True, text=True, timeout=30
        )
        found[fault] = (done.returncode, _fragment(done.stderr, CURL_EXIT[fault]))
    assert found == CURL_EXIT


NODE_SCRIPT = """
const urls = JSON.parse(process.argv[2]);
(async () => {
  const out = {};
  for (const [fault, url] of Object.entries(urls)) {
    try {
      const r = await fetch(url, {method: 'POST', signal: AbortSignal.timeout(%d)});
      out[fault] = r.status === 200 ? null : 'status ' + r.status;
    } catch (e) {
      out[fault] = e.name + ': ' + e.message + (e.cause && e.cause.code ? ', ' + e.cause.code : '');
    }
  }
  console.log(JSON.stringify(out));
  process.exit(0);  // undici keeps the hung handshake's socket: not waited for
})();
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_fetch_fails_with(server: Server, urls: dict[str, str], tmp_path: Path) -> None:
    assert NODE is not None
    assert server.ca_bundle is not None
    script = tmp_path / "fetch.js"
    script.write_text(NODE_SCRIPT % int(TIMEOUT * 1000))
    done = subprocess.run(
        [NODE, str(script), json.dumps(urls)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "NODE_EXTRA_CA_CERTS": server.ca_bundle},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == NODE_FETCH


def _fragment(message: str, expected: tuple[object, str] | None) -> str:
    """*expected*'s fragment if *message* holds it; else the message (the mismatch shows)."""
    if expected is not None and expected[1] in message:
        return expected[1]
    return message


def test_the_docs_table_is_this_one() -> None:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].strip("`") in TLS_FAULTS:
            rows[cells[0].strip("`")] = cells[1:]
    expected = {
        fault: [
            _cell(REQUESTS[fault]),
            _cell(HTTPX[fault]),
            _cell(AIOHTTP[fault]),
            "200 (accepted)" if NODE_FETCH[fault] is None else f"`{NODE_FETCH[fault]}`",
            f"{CURL_EXIT[fault][0]} ({CURL_EXIT[fault][1]})",
            RETRY[fault],
        ]
        for fault in TLS_FAULTS
    }
    assert rows == expected


# -- the journal, and handshakes that succeed ----------------------------------------------


def test_the_journal_records_each_failed_handshake(server: Server, urls: dict[str, str]) -> None:
    server.reset()
    # By name: a client sends SNI for a host name, never for an address.
    url = urls["untrusted"].replace("127.0.0.1", "localhost")
    with pytest.raises(requests.exceptions.SSLError):
        requests.post(url, verify=server.ca_bundle, timeout=TIMEOUT)
    with pytest.raises(requests.ConnectionError):
        requests.post(urls["handshake_reset"], verify=server.ca_bundle, timeout=TIMEOUT)
    entries = _settled(server, 2)
    untrusted, reset = entries
    assert untrusted.tls == ("untrusted", "unknown_ca", "localhost")
    assert untrusted.skill == "untrusted"
    assert untrusted.status is None
    assert untrusted.path == "/skills/untrusted/invoke"
    assert untrusted.method == ""
    assert untrusted.error_code == "MOCKSKILL_TLS_HANDSHAKE_FAILED"
    assert reset.tls == ("handshake_reset", None, None)
    shown = requests.get(f"{server.url}/__admin/journal", verify=server.ca_bundle).json()
    assert shown["entries"][0]["tls"] == {
        "fault": "untrusted",
        "alert": "unknown_ca",
        "sni": "localhost",
    }


def test_a_retried_permanent_fault_is_a_finding_and_coverage_counts_it(
    server: Server, urls: dict[str, str]
) -> None:
    server.reset()
    for _ in range(3):
        with pytest.raises(requests.exceptions.SSLError):
            requests.post(urls["expired"], verify=server.ca_bundle, timeout=TIMEOUT)
    with pytest.raises(requests.ConnectionError):
        requests.post(urls["handshake_reset"], verify=server.ca_bundle, timeout=TIMEOUT)
    _settled(server, 4)
    [report] = server.report("default")["sessions"]
    assert report["handshakes_failed"] == 4
    assert report["requests"] == 0
    assert report["coverage"]["tls_faults"]["expired"] == 3
    assert report["coverage"]["tls_faults"]["handshake_reset"] == 1
    assert report["chains"] == []
    assert report["timeouts"] == []
    [finding] = report["findings"]
    assert finding["rule"] == "non-retryable-retried"
    assert "expired" in finding["message"]
    assert "certificate_expired" in finding["found"]


def test_a_handshake_that_succeeds_plays_the_skills_sequence(
    server: Server, urls: dict[str, str]
) -> None:
    # A client that does not verify gets through an expired certificate.
    with pytest.warns(urllib3.exceptions.InsecureRequestWarning):
        answer = requests.post(urls["expired"], verify=False, timeout=5)
    assert answer.status_code == 200
    assert answer.json() == {"skill": "expired", "result": "ok"}


def test_the_client_certificate_the_admin_api_issues_passes(
    server: Server, urls: dict[str, str], tmp_path: Path
) -> None:
    issued = requests.post(f"{server.url}/__admin/tls/client-cert", verify=server.ca_bundle)
    assert issued.status_code == 200
    assert issued.headers["Content-Type"] == "application/x-pem-file"
    pem = tmp_path / "client.pem"
    pem.write_bytes(issued.content)
    url = urls["client_cert_required"]
    answer = requests.post(url, verify=server.ca_bundle, cert=str(pem), timeout=5)
    assert answer.status_code == 200
    with httpx.Client(verify=_with_cert(server, pem)) as client:
        assert client.post(url).status_code == 200


def _with_cert(server: Server, pem: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=server.ca_bundle)
    context.load_cert_chain(str(pem))
    return context


def _settled(server: Server, count: int) -> list:  # type: ignore[type-arg]
    """The journal once it holds *count* entries (a failed handshake is journalled a
    moment after the client sees it fail)."""
    deadline = time.monotonic() + 5
    while len(server.journal()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    entries = server.journal()
    assert len(entries) == count, entries
    return entries
