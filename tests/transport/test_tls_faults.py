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
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import trustme
import urllib3.exceptions

from mockskill import Server
from mockskill.audit import assert_clean
from mockskill.scenario.model import TLS_FAULTS
from mockskill.transport.tls import authority
from mockskill.transport.tls_faults import RAW_FAULTS, FaultListeners

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
    "client_cert_required": ("SSLError", "tlsv13 alert certificate required"),
    "handshake_reset": ("ConnectionError", "Connection reset by peer"),
    "handshake_hang": ("ReadTimeout", "Read timed out"),
    "plain_http": ("SSLError", "wrong version number"),
    "protocol_version": ("SSLError", "tlsv1 alert protocol version"),
}
HTTPX: dict[str, tuple[str, str] | None] = {
    "expired": ("ConnectError", "certificate has expired"),
    "not_yet_valid": ("ConnectError", "certificate is not yet valid"),
    "wrong_host": ("ConnectError", "IP address mismatch"),
    "untrusted": ("ConnectError", "unable to get local issuer certificate"),
    "self_signed": ("ConnectError", "self-signed certificate"),
    "weak_key": ("ConnectError", "EE certificate key too weak"),
    "client_cert_required": ("ReadError", "tlsv13 alert certificate required"),
    "handshake_reset": ("ConnectError", "Connection reset by peer"),
    "handshake_hang": ("ConnectTimeout", "handshake operation timed out"),
    "plain_http": ("ConnectError", "wrong version number"),
    "protocol_version": ("ConnectError", "tlsv1 alert protocol version"),
}
AIOHTTP: dict[str, tuple[str, str] | None] = {
    "expired": ("ClientConnectorCertificateError", "certificate has expired"),
    "not_yet_valid": ("ClientConnectorCertificateError", "certificate is not yet valid"),
    "wrong_host": ("ClientConnectorCertificateError", "IP address mismatch"),
    "untrusted": ("ClientConnectorCertificateError", "unable to get local issuer certificate"),
    "self_signed": ("ClientConnectorCertificateError", "self-signed certificate"),
    "weak_key": ("ClientConnectorCertificateError", "EE certificate key too weak"),
    "client_cert_required": ("ClientOSError", "tlsv13 alert certificate required"),
    "handshake_reset": ("ClientConnectorError", "Connection reset by peer"),
    "handshake_hang": ("TimeoutError", ""),
    "plain_http": ("ClientConnectorSSLError", "wrong version number"),
    "protocol_version": ("ClientConnectorSSLError", "Cannot connect to host"),
}
# fault -> (exit code, a fragment of curl's message)
CURL_EXIT: dict[str, tuple[int, str]] = {
    "expired": (60, "certificate has expired"),
    "not_yet_valid": (60, "certificate is not yet valid"),
    "wrong_host": (60, "no alternative certificate subject name matches"),
    "untrusted": (60, "unable to get local issuer certificate"),
    "self_signed": (60, "self-signed certificate"),
    "weak_key": (60, "EE certificate key too weak"),
    "client_cert_required": (56, "tlsv13 alert certificate required"),
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
    "protocol_version": "TypeError: fetch failed, ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION",
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


# -- each fault ends as a real server ends it ----------------------------------------------

OPENSSL = shutil.which("openssl")
HANDSHAKE_FAULTS = tuple(f for f in TLS_FAULTS if f not in RAW_FAULTS)
"""The faults done by a real handshake, which ``openssl s_server`` can be set up to do."""


def _s_server_args(fault: str, files: Path) -> list[str]:
    """``openssl s_server``'s options that make it fail a handshake as *fault* does: the
    same kind of certificate from the same CA (or another), the same demand, the same
    protocol versions."""
    ca = authority().ca
    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)
    hosts = ("localhost", "127.0.0.1")
    extra: list[str] = []
    if fault == "expired":
        leaf = ca.issue_cert(*hosts, not_before=now - 30 * day, not_after=now - day)
    elif fault == "not_yet_valid":
        leaf = ca.issue_cert(*hosts, not_before=now + day, not_after=now + 30 * day)
    elif fault == "wrong_host":
        leaf = ca.issue_cert("wrong-host.mockskill.invalid")
    elif fault == "untrusted":
        leaf = trustme.CA().issue_cert(*hosts)
    elif fault == "self_signed":
        other = trustme.CA()
        other.cert_pem.write_to_path(files / "cert.pem")
        other.private_key_pem.write_to_path(files / "key.pem")
        return ["-cert", str(files / "cert.pem"), "-key", str(files / "key.pem")]
    elif fault == "weak_key":
        return [*_weak_leaf(files), "-cipher", "DEFAULT:@SECLEVEL=0"]
    else:
        leaf = ca.issue_cert(*hosts)
        if fault == "client_cert_required":
            ca.cert_pem.write_to_path(files / "ca.pem")
            extra = ["-Verify", "1", "-CAfile", str(files / "ca.pem")]
        else:
            assert fault == "protocol_version"
            extra = ["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"]
    leaf.cert_chain_pems[0].write_to_path(files / "cert.pem")
    leaf.private_key_pem.write_to_path(files / "key.pem")
    return ["-cert", str(files / "cert.pem"), "-key", str(files / "key.pem"), *extra]


def _weak_leaf(files: Path) -> list[str]:
    """An RSA-1024 leaf from the server's CA (trustme makes no key that small)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    ca = authority()
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ca_cert = x509.load_pem_x509_certificate(ca.ca_pem)
    ca_key = serialization.load_pem_private_key(ca.ca.private_key_pem.bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    (files / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (files / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ["-cert", str(files / "cert.pem"), "-key", str(files / "key.pem")]


@contextlib.contextmanager
def _s_server(args: list[str]) -> Iterator[str]:
    """``openssl s_server`` with *args* on an ephemeral port of 127.0.0.1: its URL."""
    assert OPENSSL is not None
    command = [OPENSSL, "s_server", "-accept", "127.0.0.1:0", "-www", *args]
    with subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:  # "ACCEPT 127.0.0.1:PORT" once it listens
                if line.startswith(b"ACCEPT "):
                    yield f"https://{line.split()[1].decode()}"
                    break
            else:
                raise AssertionError(f"openssl s_server did not start: {command}")
        finally:
            process.kill()


def _curl_ending(url: str, ca_bundle: str) -> tuple[int, str]:
    """curl's exit code and message, its URL's port left out."""
    assert CURL is not None
    args = [CURL, "-sS", "-X", "POST", "-o", "/dev/null", "--max-time", "5"]
    done = subprocess.run(
        [*args, "--cacert", ca_bundle, url], capture_output=True, text=True, timeout=30
    )
    port = url.rsplit(":", 1)[1]
    return done.returncode, done.stderr.strip().replace(port, "PORT")


def _python_ending(url: str, ca_bundle: str) -> str:
    """What Python's ssl raises, from the connection to the first read of an answer."""
    host, port = url.split("/")[2].split(":")
    context = ssl.create_default_context(cafile=ca_bundle)
    try:
        with (
            socket.create_connection((host, int(port)), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            tls.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            answer = tls.recv(1)
    except OSError as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
    return f"answered {answer!r}"


@pytest.mark.skipif(OPENSSL is None or CURL is None, reason="needs openssl and curl")
@pytest.mark.parametrize("fault", HANDSHAKE_FAULTS)
def test_the_fault_ends_as_openssl_s_server_ends_it(
    server: Server, urls: dict[str, str], fault: str, tmp_path: Path
) -> None:
    assert server.ca_bundle is not None
    ours = (
        _curl_ending(urls[fault], server.ca_bundle),
        _python_ending(urls[fault], server.ca_bundle),
    )
    with _s_server(_s_server_args(fault, tmp_path)) as url:
        real = (_curl_ending(url, server.ca_bundle), _python_ending(url, server.ca_bundle))
    assert ours == real


# -- each session meets the fault on a port of its own -------------------------------------


def _descriptor_url(server: Server, skill: str, session: str) -> str:
    headers = {"Mockskill-Session": session}
    descriptor = requests.get(
        server.skill_url(skill), headers=headers, verify=server.ca_bundle, timeout=5
    )
    return str(descriptor.json()["endpoint"]["url"])


def _handshakes(server: Server, session: str) -> int:
    [report] = server.report(session)["sessions"]
    return int(report["handshakes_failed"])


def test_two_sessions_that_try_once_each_are_two_consumers_that_did_not_retry(
    server: Server, urls: dict[str, str]
) -> None:
    server.reset()
    first, second = (_descriptor_url(server, "expired", s) for s in ("first", "second"))
    assert len({first, second, urls["expired"]}) == 3
    for url in (first, second):
        with pytest.raises(requests.exceptions.SSLError):
            requests.post(url, verify=server.ca_bundle, timeout=TIMEOUT)
    _settled(server, 4)  # two descriptors, two handshakes
    for session in ("first", "second"):
        assert _handshakes(server, session) == 1
        assert_clean(server.report(session))  # the gate: one attempt each, no retry
    assert server.journal("default") == []


def test_a_session_that_retries_sees_its_own_retries(server: Server) -> None:
    server.reset()
    url = _descriptor_url(server, "expired", "retrier")
    assert _descriptor_url(server, "expired", "retrier") == url  # the same port, kept
    for _ in range(3):
        with pytest.raises(requests.exceptions.SSLError):
            requests.post(url, verify=server.ca_bundle, timeout=TIMEOUT)
    _settled(server, 5)
    assert _handshakes(server, "retrier") == 3
    [report] = server.report("retrier")["sessions"]
    [finding] = report["findings"]
    assert finding["rule"] == "non-retryable-retried"
    assert finding["session"] == "retrier"
    with pytest.raises(AssertionError, match="non-retryable-retried"):
        assert_clean(server.report("retrier"))


def _listeners(**bounds: float) -> FaultListeners:
    listeners = FaultListeners("127.0.0.1", authority, lambda failed: None, **bounds)  # type: ignore[arg-type]
    listeners.hold({"billing": "expired"})
    return listeners


def test_sessions_beyond_the_cap_share_the_skills_port() -> None:
    listeners = _listeners(session_ports=2)
    try:
        shared = listeners.hold({"billing": "expired"})["billing"]
        one, two, three = (listeners.session_ports(s)["billing"] for s in ("a", "b", "c"))
        assert len({shared, one, two}) == 3
        assert three == shared
        assert listeners.session_ports("a")["billing"] == one
    finally:
        listeners.release()


def test_an_idle_sessions_port_is_closed_and_its_slot_freed() -> None:
    listeners = _listeners(session_ports=1, idle_close=0.0)
    try:
        first = listeners.session_ports("a")["billing"]
        second = listeners.session_ports("b")["billing"]  # a's is idle: closed, b has one
        assert second != listeners.hold({"billing": "expired"})["billing"]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", first), timeout=1).close()
    finally:
        listeners.release()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_session_that_only_invokes_opens_no_port() -> None:
    scenario = "name: mixed\nskills:\n  - id: billing\n    tls: expired\n  - id: echo\n"
    with Server(scenario) as server:
        requests.get(server.skill_url("billing"), timeout=5)  # connections and threads made
        before = len(os.listdir("/proc/self/fd"))
        for n in range(20):
            headers = {"Mockskill-Session": f"invoker-{n}"}
            answer = requests.post(server.invoke_url("echo"), headers=headers, timeout=5)
            assert answer.status_code == 200
        # A port each would be 20 more; a connection or two may still be closing.
        assert len(os.listdir("/proc/self/fd")) <= before + 4
        # Its descriptor is what allots one.
        url = _descriptor_url(server, "billing", "invoker-0")
        assert url != f"https://127.0.0.1:{server.tls_fault_ports['billing']}/skills/billing/invoke"
