"""HTTPS, one flag: ``Server(tls=True)`` and ``mockskill serve --tls``, with real clients.

The local CA's bundle (``server.ca_bundle``) is what requests and httpx
verify against; the descriptors say ``https://``; ``http_port`` serves plain
HTTP beside it; ``/__admin/tls/ca.pem`` is the same CA; a user's own
certificate is served as given, and a certificate without its key is
refused before anything binds. The scenario side (``tls:`` checked at load)
and the WSGI mount's refusal are here too.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import trustme

from mockskill import ScenarioError, Server, load_text
from mockskill.engine.engine import Engine
from mockskill.engine.state import State
from mockskill.server.listening import ServerError
from mockskill.transport.tls_faults import server_name
from mockskill.wsgi.app import create_app

SCENARIO = """\
name: tls
skills:
  - id: echo
  - id: old
    tls: expired
"""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server(SCENARIO, tls=True, http_port=0) as started:
        yield started


def test_requests_and_httpx_verify_against_the_ca_bundle(server: Server) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    assert server.ca_bundle is not None
    assert Path(server.ca_bundle).read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    listed = requests.get(f"{server.url}/skills", verify=server.ca_bundle, timeout=5)
    assert listed.status_code == 200
    with httpx.Client(verify=server.client_context) as client:
        answer = client.post(server.invoke_url("echo"))
    assert answer.json() == {"skill": "echo", "result": "ok"}
    # By name too: localhost is in the certificate.
    by_name = server.url.replace("127.0.0.1", "localhost")
    assert requests.get(f"{by_name}/skills", verify=server.ca_bundle).status_code == 200


def test_a_client_without_the_ca_refuses_the_certificate(server: Server) -> None:
    with pytest.raises(requests.exceptions.SSLError, match="unable to get local issuer"):
        requests.get(f"{server.url}/skills", timeout=5)


def test_descriptors_say_https_over_tls_and_http_over_the_plain_port(server: Server) -> None:
    secure = requests.get(server.skill_url("echo"), verify=server.ca_bundle).json()
    assert secure["endpoint"]["url"] == f"{server.url}/skills/echo/invoke"
    assert server.http_url is not None
    assert server.http_url.startswith("http://127.0.0.1:")
    plain = httpx.get(f"{server.http_url}/skills/echo").json()
    assert plain["endpoint"]["url"] == f"{server.http_url}/skills/echo/invoke"
    # The fault's port is HTTPS whichever way the descriptor was fetched.
    old = httpx.get(f"{server.http_url}/skills/old").json()["endpoint"]["url"]
    assert old.startswith("https://127.0.0.1:")
    assert old.endswith("/skills/old/invoke")


def test_the_admin_api_serves_the_ca_the_bundle_holds(server: Server) -> None:
    assert server.ca_bundle is not None
    answer = requests.get(f"{server.url}/__admin/tls/ca.pem", verify=server.ca_bundle)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/x-pem-file"
    assert answer.content == Path(server.ca_bundle).read_bytes()


def test_the_ca_is_fetched_without_the_admin_token() -> None:
    """As docs/docker.md fetches it: a certificate is public, and the client has nothing yet."""
    with Server(load_text(SCENARIO), tls=True, admin_token="t0ken") as guarded:
        assert guarded.ca_bundle is not None
        with httpx.Client(verify=False) as unverified:  # curl -k, once
            ca = unverified.get(f"{guarded.url}/__admin/tls/ca.pem")
            assert ca.status_code == 200
            assert ca.content == Path(guarded.ca_bundle).read_bytes()
            assert unverified.head(f"{guarded.url}/__admin/tls/ca.pem").status_code == 200
            # The CA's key stays on the server: a client certificate still needs the token.
            client_cert = unverified.post(f"{guarded.url}/__admin/tls/client-cert")
            assert client_cert.status_code == 401


def test_the_admin_surface_knows_it_is_read_over_tls(server: Server) -> None:
    """A page it served is https's origin, and the URLs it answers say https://."""
    assert server.ca_bundle is not None
    own = {"Origin": f"https://127.0.0.1:{server.port}", "Content-Type": "application/json"}
    with httpx.Client(verify=ssl.create_default_context(cafile=server.ca_bundle)) as client:
        reset = client.post(f"{server.url}/__admin/reset?all=true", headers=own)
        assert reset.status_code == 200, reset.text
        plain = {**own, "Origin": f"http://127.0.0.1:{server.port}"}
        assert client.post(f"{server.url}/__admin/reset?all=true", headers=plain).status_code == 403
        listed = client.get(f"{server.url}/__admin/scenarios").json()["scenarios"]
        assert listed[0]["url"].startswith(f"https://127.0.0.1:{server.port}/__admin/")
        assert listed[0]["skills"][0]["invoke_url"].startswith("https://")


def test_a_wsgi_mount_has_no_certificates_and_refuses_tls_faults() -> None:
    client = create_app().test_client()
    answer = client.get("/__admin/tls/ca.pem")
    assert answer.status_code == 404
    assert answer.get_json()["error"]["code"] == "MOCKSKILL_HTTP_404"
    with pytest.raises(ScenarioError, match="needs a port of its own"):
        Engine(load_text(SCENARIO), State())


def test_the_users_own_certificate_is_served(tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    with Server(SCENARIO, tls_cert=cert, tls_key=key) as own:
        assert own.ca_bundle is None
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with httpx.Client(verify=context) as client:
            assert client.get(f"{own.url}/skills").status_code == 200


def test_a_certificate_without_its_key_or_a_bad_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="give both tls_cert and tls_key"):
        Server(SCENARIO, tls_cert=tmp_path / "cert.pem")
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    bad = Server(SCENARIO, tls_cert=tmp_path / "cert.pem", tls_key=tmp_path / "key.pem")
    with pytest.raises(ServerError, match="cannot use the certificate"):
        bad.start()


@pytest.mark.parametrize(
    ("value", "found"),
    [("expird", "did you mean expired?"), (True, "a TLS fault: expired, not_yet_valid")],
)
def test_an_unknown_tls_fault_is_a_positioned_problem(value: object, found: str) -> None:
    text = f"skills:\n  - id: s\n    tls: {str(value).lower()}\n"
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml")
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == ("s.yaml", 3)
    assert found in str(problem)


def test_tls_and_unreachable_together_are_refused() -> None:
    with pytest.raises(ScenarioError, match="tls or unreachable"):
        load_text("skills:\n  - id: s\n    unreachable: true\n    tls: expired\n")


def test_the_sni_name_is_read_off_a_real_client_hello() -> None:
    client = ssl.create_default_context().wrap_bio(
        ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="skills.example.org"
    )
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    hello = outgoing.read()
    assert server_name(hello) == "skills.example.org"
    assert server_name(hello[:40]) is None
    assert server_name(b"GET / HTTP/1.1\r\n\r\n" * 4) is None


def test_serve_tls_prints_the_ca_and_serves_https_within_its_start_budget(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", "--tls", "--port", "0", "--http-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(5)]
        url = lines[0].split(" at ")[1].split()[0]
        assert url.startswith("https://127.0.0.1:")
        assert lines[2].startswith("  TLS: certificate from a local CA: ")
        bundle = lines[2].split(": ", 2)[2].strip()
        assert f"{url}/__admin/tls/ca.pem" in lines[3]
        assert lines[4].startswith("  plain HTTP too: http://127.0.0.1:")
        assert requests.get(f"{url}/skills", verify=bundle, timeout=5).status_code == 200
        assert time.monotonic() - started < 20  # generous: the budget is bench/tls.py's
    finally:
        process.terminate()
        process.communicate(timeout=20)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
        (["--http-port", "0"], "--http-port serves plain HTTP beside --tls"),
        (
            ["--tls", "--workers", "2", "--state", "redis://127.0.0.1:1/0"],
            "each worker would make its own CA",
        ),
    ],
)
def test_serve_refuses_tls_options_that_do_not_go_together(args: list[str], said: str) -> None:
    from click.testing import CliRunner

    from mockskill.cli import cli

    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2
    assert said in result.output
