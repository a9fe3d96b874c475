"""The relay to a real provider: what goes upstream, what comes back, and how it fails.

A mockskill server whose free routes forward (``proxy:``) to a plain Flask
provider, to a port where nothing listens, to a name that does not resolve,
and to sockets that reset; real clients (requests, httpx, curl) in front.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
from upstreams import Misbehaving, Provider, free_port

import mockskill
from mockskill.engine.plan import Upstream

trustme = pytest.importorskip(
    "trustme", reason="the TLS tests make their certificates with trustme"
)


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    made = Provider()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def resetting() -> Iterator[Misbehaving]:
    made = Misbehaving("reset")
    yield made
    made.stop()


@pytest.fixture(scope="module")
def cut_mid_body() -> Iterator[Misbehaving]:
    made = Misbehaving("head_then_reset")
    yield made
    made.stop()


@pytest.fixture(scope="module")
def keeps_alive() -> Iterator[Misbehaving]:
    made = Misbehaving("keep_alive")
    yield made
    made.stop()


@pytest.fixture(scope="module")
def proxy(
    provider: Provider, resetting: Misbehaving, cut_mid_body: Misbehaving, keeps_alive: Misbehaving
) -> Iterator[mockskill.Server]:
    text = f"""
name: relay
routes:
  - {{path: /echo, method: [GET, POST, PUT, DELETE], proxy: {provider.url}}}
  - {{path: /stream, proxy: {provider.url}}}
  - {{path: /slow, proxy: {{url: {provider.url}, timeout_ms: 300}}}}
  - {{path: /gone, proxy: "http://127.0.0.1:{free_port()}"}}
  - {{path: /nowhere, proxy: "http://no-such-host.invalid"}}
  - {{path: /reset, proxy: {resetting.url}}}
  - {{path: /cut, proxy: {cut_mid_body.url}}}
  - {{path: /kept, proxy: {keeps_alive.url}}}
"""
    with mockskill.Server(text) as server:
        yield server


def last(server: mockskill.Server, path: str) -> mockskill.Entry:
    return [e for e in server.journal() if e.path == path][-1]


# -- what goes upstream --------------------------------------------------------


def test_method_path_query_headers_and_body_are_relayed(
    proxy: mockskill.Server, provider: Provider
) -> None:
    response = requests.post(
        f"{proxy.url}/echo?q=1&q=2&x=%20y",
        data=b"the body",
        headers={
            "X-Custom": "kept",
            "Idempotency-Key": "order-42",
            "Connection": "keep-alive, X-Hop",
            "X-Hop": "named in Connection: dropped",
            "Keep-Alive": "timeout=9",
            "X-Forwarded-For": "10.0.0.1",
        },
        timeout=10,
    )
    assert response.status_code == 200
    seen = response.json()
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/echo", "q=1&q=2&x=%20y")
    assert seen["body"] == "the body"
    port = provider.url.rsplit(":", 1)[1]
    assert provider.header(seen, "Host") == [f"127.0.0.1:{port}"]
    assert provider.header(seen, "X-Custom") == ["kept"]
    assert provider.header(seen, "Idempotency-Key") == ["order-42"]
    assert provider.header(seen, "X-Hop") == []
    assert provider.header(seen, "Keep-Alive") == []
    assert provider.header(seen, "X-Forwarded-For") == ["10.0.0.1, 127.0.0.1"]
    assert provider.header(seen, "X-Forwarded-Host") == [proxy.url.split("//")[1]]
    assert provider.header(seen, "X-Forwarded-Proto") == ["http"]
    assert provider.header(seen, "Content-Length") == ["8"]


def test_the_answer_keeps_its_status_headers_and_length_without_hop_by_hop_ones(
    proxy: mockskill.Server,
) -> None:
    with httpx.Client() as client:
        response = client.delete(f"{proxy.url}/echo")
    assert response.status_code == 200
    assert response.headers["X-Upstream"] == "yes"
    assert "X-Secret-Hop" not in response.headers  # named in the upstream's Connection
    assert "Keep-Alive" not in response.headers
    assert response.headers["Content-Length"] == str(len(response.content))
    assert response.json()["method"] == "DELETE"


def test_the_consumer_connection_is_kept_alive(proxy: mockskill.Server, provider: Provider) -> None:
    with requests.Session() as session:
        ports = set()
        for _ in range(3):
            response = session.get(f"{proxy.url}/echo", timeout=10, stream=True)
            ports.add(response.raw._connection.sock.getsockname()[1])  # type: ignore[union-attr]
            response.content  # noqa: B018 - read whole, so the connection goes back
    assert len(ports) == 1
    entries = [e for e in proxy.journal() if e.path == "/echo"][-3:]
    assert all(e.upstream and e.upstream["reached"] for e in entries)


def test_the_upstream_connection_is_pooled_and_reused(
    proxy: mockskill.Server, keeps_alive: Misbehaving
) -> None:
    before = keeps_alive.connections
    for _ in range(5):
        response = requests.get(f"{proxy.url}/kept", timeout=10)
        assert (response.status_code, response.content) == (200, b"ok")
    assert keeps_alive.connections - before <= 1


def test_curl_gets_the_relayed_answer(proxy: mockskill.Server) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    out = subprocess.run(
        [curl, "-s", "-i", "-X", "PUT", "--data", "x=1", f"{proxy.url}/echo"],
        capture_output=True,
        timeout=20,
        check=True,
    ).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b'"method":"PUT"' in body.replace(b" ", b"")


# -- streaming -----------------------------------------------------------------


def test_the_body_is_streamed_the_first_chunk_before_the_upstream_finished(
    proxy: mockskill.Server, provider: Provider
) -> None:
    provider.release.clear()
    try:
        with requests.get(f"{proxy.url}/stream", stream=True, timeout=10) as response:
            assert response.status_code == 200
            assert response.headers["Transfer-Encoding"] == "chunked"
            chunks = response.iter_content(chunk_size=None)
            assert next(chunks) == b"first\n"  # the upstream is still holding its second
            assert not provider.release.is_set()
            provider.release.set()
            assert b"".join(chunks) == b"second\n"
    finally:
        provider.release.set()
    entry = last(proxy, "/stream")
    assert entry.status == 200
    assert entry.upstream is not None
    assert entry.upstream["status"] == 200


# -- failures ------------------------------------------------------------------


def error_of(response: requests.Response) -> dict[str, object]:
    error = response.json()["error"]
    assert isinstance(error, dict)
    return error


def test_a_refused_connection_is_endpoint_unreachable_503(proxy: mockskill.Server) -> None:
    response = requests.get(f"{proxy.url}/gone", timeout=10)
    assert response.status_code == 503
    error = error_of(response)
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert "refused" in str(error["details"]["reason"])  # type: ignore[index]
    assert response.headers["Retry-After"]
    entry = last(proxy, "/gone")
    assert entry.error_code == "ENDPOINT_UNREACHABLE"
    assert entry.upstream is not None
    assert entry.upstream["reached"] is False
    assert "refused" in entry.upstream["error"]


def test_a_name_that_does_not_resolve_is_endpoint_unreachable_503(proxy: mockskill.Server) -> None:
    response = requests.get(f"{proxy.url}/nowhere", timeout=30)
    assert response.status_code == 503
    assert "resolved" in str(error_of(response)["details"]["reason"])  # type: ignore[index]


def test_a_reset_before_an_answer_is_endpoint_unreachable_502(proxy: mockskill.Server) -> None:
    response = requests.get(f"{proxy.url}/reset", timeout=10)
    assert response.status_code == 502
    error = error_of(response)
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert "reset" in str(error["details"]["reason"])  # type: ignore[index]
    entry = last(proxy, "/reset")
    assert entry.upstream is not None
    assert entry.upstream["reached"] is True  # it was sent: the provider may have run it


def test_an_upstream_too_slow_is_execution_timeout_504(
    proxy: mockskill.Server, provider: Provider
) -> None:
    provider.release.clear()
    try:
        started = time.monotonic()
        response = requests.get(f"{proxy.url}/slow", timeout=10)
        elapsed = time.monotonic() - started
    finally:
        provider.release.set()
    assert response.status_code == 504
    error = error_of(response)
    assert error["code"] == "EXECUTION_TIMEOUT"
    assert error["details"]["timeout_ms"] == 300  # type: ignore[index]
    assert 0.25 < elapsed < 5
    entry = last(proxy, "/slow")
    assert entry.upstream is not None
    assert entry.upstream["reached"] is True
    assert entry.upstream["status"] is None


def test_a_reset_after_the_head_was_relayed_cuts_the_consumer(proxy: mockskill.Server) -> None:
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        requests.get(f"{proxy.url}/cut", timeout=10).content  # noqa: B018
    deadline = time.monotonic() + 5
    while not [e for e in proxy.journal() if e.path == "/cut"] and time.monotonic() < deadline:
        time.sleep(0.01)
    entry = last(proxy, "/cut")
    assert entry.status is None
    assert entry.upstream is not None
    assert entry.upstream["status"] == 200
    assert entry.upstream["error"]


# -- TLS -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Provider, Path]]:
    authority = trustme.CA()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    ca = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    made = Provider(server_context)
    yield made, ca
    made.stop()


@pytest.fixture(scope="module")
def tls_proxy(tls_provider: tuple[Provider, Path]) -> Iterator[mockskill.Server]:
    provider, ca = tls_provider
    text = f"""
name: tls
skills:
  - {{id: trusted, proxy: {{url: {provider.url}, verify: {ca}}}}}
  - {{id: strict, proxy: {provider.url}}}
  - {{id: lax, proxy: {{url: {provider.url}, verify: false}}}}
"""
    with mockskill.Server(text) as server:
        yield server


def test_tls_verified_against_a_ca_file(tls_proxy: mockskill.Server) -> None:
    response = requests.get(f"{tls_proxy.url}/skills/trusted", timeout=10)
    assert response.status_code == 200
    assert response.json()["id"] == "trusted"


def test_tls_is_verified_by_default(tls_proxy: mockskill.Server) -> None:
    response = requests.get(f"{tls_proxy.url}/skills/strict", timeout=10)
    assert response.status_code == 502
    error = error_of(response)
    assert error["code"] == "ENDPOINT_UNREACHABLE"
    assert "TLS" in str(error["details"]["reason"])  # type: ignore[index]


def test_tls_verification_can_be_turned_off(tls_proxy: mockskill.Server) -> None:
    response = requests.get(f"{tls_proxy.url}/skills/lax", timeout=10)
    assert response.status_code == 200


def test_a_head_request_is_relayed_without_a_body_and_the_connection_goes_on(
    proxy: mockskill.Server,
) -> None:
    with requests.Session() as session:
        head = session.head(f"{proxy.url}/echo", timeout=10)
        assert head.status_code == 200
        assert head.content == b""
        assert int(head.headers["Content-Length"]) > 0  # the GET's length, as HEAD says
        assert session.get(f"{proxy.url}/echo", timeout=10).json()["method"] == "GET"


def test_a_relay_that_fails_inside_mockskill_cuts_the_consumer_and_is_journalled(
    proxy: mockskill.Server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Upstream, "answer_head", staticmethod(broken))
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{proxy.url}/echo?broken", timeout=10)
    monkeypatch.undo()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
        e.upstream and "a bug" in (e.upstream["error"] or "") for e in proxy.journal()
    ):
        time.sleep(0.01)
    entry = last(proxy, "/echo")
    assert entry.upstream is not None
    assert "mockskill failed: a bug" in entry.upstream["error"]
    assert "relaying" in caplog.text
