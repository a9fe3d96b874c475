"""``mockskill serve``: banner, signals, settings from the environment, --state, --workers."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from redis_server import RedisServer

from mockskill.cli import cli


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_on_a_busy_port_says_so_without_a_traceback() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert f"port {port} is in use" in result.output
    assert "pick another with --port (0: any)" in result.output
    assert "Traceback" not in result.output


def test_a_busy_port_from_the_environment_names_the_variable_as_the_image_sets_it() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve"], env={"MOCKSKILL_PORT": str(port)})
    assert result.exit_code == 1
    assert f"port {port} is in use" in result.output
    assert "pick another with MOCKSKILL_PORT (0: any)" in result.output
    assert "--port" not in result.output
    assert "port=" not in result.output


@pytest.fixture
def served() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``python -m mockskill serve`` on the bundled scenarios, in a real process."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", "--port", str(port), "--seed", "7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/skills", timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.05)
    yield process, port
    if process.poll() is None:
        process.kill()
    process.communicate()


def test_serve_prints_each_skill_url_and_the_seed(
    served: tuple[subprocess.Popen[str], int],
) -> None:
    process, port = served
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=10)
    base = f"http://127.0.0.1:{port}"
    assert f"at {base}" in out
    assert "seed 7" in out
    for skill in ("translate", "flaky", "slow", "auth-required", "invalid-descriptor"):
        assert f"{base}/skills/{skill}\n" in out
        assert f"{base}/skills/{skill}/invoke" in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_serve_stops_cleanly_and_quickly_on_a_signal(
    served: tuple[subprocess.Popen[str], int], sig: signal.Signals
) -> None:
    process, port = served
    assert requests.get(f"http://127.0.0.1:{port}/skills", timeout=5).status_code == 200
    started = time.monotonic()
    process.send_signal(sig)
    _, err = process.communicate(timeout=10)
    elapsed = time.monotonic() - started
    assert process.returncode == 0
    assert "Traceback" not in err
    assert "mockskill stopped." in err
    assert elapsed < 3  # within a second on an idle machine; margin for a noisy one


def test_serve_stops_within_a_second_with_idle_connections_even_ones_that_do_not_read(
    served: tuple[subprocess.Popen[str], int],
) -> None:
    process, port = served
    base = f"http://127.0.0.1:{port}"
    sessions = [requests.Session() for _ in range(5)]
    for session in sessions:  # kept alive, idle
        assert session.get(f"{base}/skills", timeout=5).status_code == 200
    stalled = socket.socket()  # asks for answers it never reads: they wait unsent
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", port))
    # A hundred listings (~0.9 MB): more than the client takes, less than the kernel holds
    # for it, so the server has written every answer and has no exchange in flight.
    stalled.sendall(b"GET /skills HTTP/1.1\r\nHost: x\r\n\r\n" * 100)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the server has written what the client left unread
        journal = requests.get(f"{base}/__admin/journal", timeout=5).json()
        if sum(entry["path"] == "/skills" for entry in journal["entries"]) >= 5 + 100:
            break
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=10)
    elapsed = time.monotonic() - started
    stalled.close()
    for session in sessions:
        session.close()
    assert process.returncode == 0
    assert "mockskill stopped." in err
    assert elapsed < 1.0


# -- serve's settings from the environment (how the Docker image is configured) --


def test_serve_takes_every_setting_from_the_environment(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text("name: one\nskills: [{id: a}]\n")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "b.yaml").write_text("name: two\nskills: [{id: b}]\n")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "MOCKSKILL_SCENARIOS": f"{one}{os.pathsep}{tmp_path / 'two'}",
        "MOCKSKILL_HOST": "127.0.0.1",
        "MOCKSKILL_PORT": str(port),
        "MOCKSKILL_SEED": "31",
        "MOCKSKILL_WATCH": "1",
        "MOCKSKILL_QUIET": "1",
        "MOCKSKILL_CORS": "true",
        "MOCKSKILL_ALLOW_HOSTS": "mock.test other.test",
        "MOCKSKILL_MAX_BODY": "100",
        "MOCKSKILL_JOURNAL_SIZE": "3",
        "MOCKSKILL_ADMIN_TOKEN": "env-token",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    admin = {"Authorization": "Bearer env-token"}
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                health = requests.get(
                    f"{base}/__admin/health", headers=admin, timeout=10
                )  # the first builds the admin app
                break
            except requests.ConnectionError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert health.json()["seed"] == 31
        assert health.json()["scenarios"] == ["one", "two"]
        assert health.json()["reload"]["status"] == "none"  # watching
        assert requests.get(f"{base}/__admin/health", timeout=5).status_code == 401
        for host, status in (("mock.test", 200), ("other.test", 200), ("third.test", 403)):
            named = {**admin, "Host": f"{host}:{port}"}
            answer = requests.get(f"{base}/__admin/health", headers=named, timeout=5)
            assert answer.status_code == status, host
        listing = requests.get(f"{base}/skills", timeout=5)
        assert listing.headers["Access-Control-Allow-Origin"] == "*"
        assert (
            requests.post(f"{base}/skills/a/invoke", data=b"x" * 101, timeout=5).status_code == 413
        )
        for _ in range(4):
            requests.post(f"{base}/skills/b/invoke", timeout=5)
        journal = requests.get(f"{base}/__admin/journal", headers=admin, timeout=5).json()
        assert journal["capacity"] == 3
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    assert f"at {base}" in out
    assert "watching" in out
    assert "POST /skills/b/invoke" not in err  # quiet


def test_the_command_line_wins_over_the_environment() -> None:
    with socket.socket() as first, socket.socket() as second:
        for holder in (first, second):
            holder.bind(("127.0.0.1", 0))
            holder.listen()
        env_port, cli_port = first.getsockname()[1], second.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["serve", "--port", str(cli_port)], env={"MOCKSKILL_PORT": str(env_port)}
        )
    assert result.exit_code == 1
    assert f"port {cli_port} is in use" in result.output


def test_a_host_from_the_environment_needs_a_token_or_insecure_admin() -> None:
    refused = CliRunner().invoke(cli, ["serve"], env={"MOCKSKILL_HOST": "0.0.0.0"})
    assert refused.exit_code == 1
    assert "refusing to serve on 0.0.0.0" in refused.output
    with socket.socket() as holder:  # a busy port: it stops after the warning
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        env = {
            "MOCKSKILL_HOST": "0.0.0.0",
            "MOCKSKILL_INSECURE_ADMIN": "1",
            "MOCKSKILL_PORT": str(holder.getsockname()[1]),
        }
        insecure = CliRunner().invoke(cli, ["serve"], env=env)
    assert insecure.exit_code == 1
    assert "WARNING: --insecure-admin: /__admin on 0.0.0.0 takes no token" in insecure.output
    assert "is in use" in insecure.output


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MOCKSKILL_PORT", "eighty"), ("MOCKSKILL_WATCH", "maybe"), ("MOCKSKILL_SEED", "1.5")],
)
def test_a_bad_value_in_a_variable_names_the_variable(variable: str, value: str) -> None:
    result = CliRunner().invoke(cli, ["serve"], env={variable: value})
    assert result.exit_code == 2
    assert variable in result.output
    assert repr(value) in result.output


def test_watch_from_the_environment_needs_paths() -> None:
    result = CliRunner().invoke(cli, ["serve"], env={"MOCKSKILL_WATCH": "1"})
    assert result.exit_code == 2
    assert "MOCKSKILL_SCENARIOS" in result.output


# -- --state and --workers -----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgres://db/1", "found the scheme 'postgres'"),
        ("redis://", "the URL names no host"),
        ("redis://cache:port/0", "the port is not a number"),
        ("redis://:hunter2-secret@cache:6379/zero", "the database 'zero' is not a number"),
    ],
)
def test_a_state_url_that_names_no_store_is_refused_at_once(url: str, problem: str) -> None:
    for given in (["--state", url], []):  # on the command line, or from MOCKSKILL_STATE
        result = CliRunner().invoke(cli, ["serve", *given], env={"MOCKSKILL_STATE": url})
        assert result.exit_code == 2, result.output
        assert problem in result.output
        assert "--state" in result.output
        assert "hunter2-secret" not in result.output  # masked: redis://:***@cache:6379/zero
        assert "Traceback" not in result.output


def test_more_than_one_worker_without_a_shared_store_is_refused() -> None:
    for env in ({}, {"MOCKSKILL_STATE": "memory"}, {"MOCKSKILL_WORKERS": "3"}):
        args = ["serve"] if "MOCKSKILL_WORKERS" in env else ["serve", "--workers", "2"]
        result = CliRunner().invoke(cli, args, env=env)
        count = env.get("MOCKSKILL_WORKERS", "2")
        assert result.exit_code == 2, result.output
        assert (
            f"--workers {count} needs a shared state store: add --state redis://HOST:PORT/DB"
            " (each worker would otherwise keep its own sequences and journal)"
        ) in " ".join(result.output.split())


def test_serve_help_shows_the_state_and_workers_options() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    text = " ".join(result.output.split())
    for shown in ("--state URL", "MOCKSKILL_STATE", "--workers N", "MOCKSKILL_WORKERS"):
        assert shown in text
    assert "--worker-socket [auto|reuseport|inherit]" in text
    for hidden in ("--ready-fd", "--parent-fd", "--listen-fd", "--worker-index", "--reuse-port"):
        assert hidden not in text  # the supervisor's, not the user's


def test_serve_names_its_store_with_the_password_masked_and_never_shows_it(
    own_redis: Callable[..., RedisServer],
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    redis = own_redis(password=password)
    state = f"redis://:{password}@127.0.0.1:{redis.port}/0"
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--state", state],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    url = re.search(r" at (http://\S+)", first)
    assert url is not None, first
    assert requests.post(f"{url.group(1)}/skills/flaky/invoke", timeout=10).status_code == 503
    health = requests.get(f"{url.group(1)}/__admin/health", timeout=10).text
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    assert process.stderr is not None
    output = first + process.stdout.read() + process.stderr.read()  # past what readline buffered
    process.stdout.close()
    process.stderr.close()
    assert f"state: shared, redis://:***@127.0.0.1:{redis.port}/0" in output
    assert password not in output + health
    # A wrong password: refused at start, named without it.
    wrong = state.replace(password, "not-the-" + password)
    refused = subprocess.run(
        [sys.executable, "-m", "mockskill", "serve", "--port", "0", "--state", wrong],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert f"cannot use the state store redis://:***@127.0.0.1:{redis.port}/0" in refused.stderr
    assert password not in refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_banner_names_a_tls_fault_skills_own_port(tmp_path: Path) -> None:
    scenario = tmp_path / "rotation.yaml"
    scenario.write_text("name: rotation\nskills:\n  - id: billing\n    tls: expired\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", "--port", str(port), str(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # the banner's last line is the skill's invoke URL
            lines.append(line)
            if "/invoke" in line:
                break
        descriptor = requests.get(f"http://127.0.0.1:{port}/skills/billing", timeout=5).json()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    fault_url = descriptor["endpoint"]["url"]
    assert fault_url.startswith("https://127.0.0.1:")
    assert f"POST {fault_url}  (TLS fault: expired)\n" in lines[-1]


def test_serve_masks_the_names_redact_adds_and_cuts_bodies_at_the_limit_given(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "echo.yaml"
    scenario.write_text("name: echo\nskills: [{id: echo}]\n")
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "mockskill", "serve", str(scenario), "--port", str(port)),
            *("--quiet", "--redact", "X-Tenant", "--journal-body-limit", "12"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "MOCKSKILL_REDACT": "pin other"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert process.stdout is not None
        process.stdout.readline()  # serving: it says where
        requests.post(
            f"{base}/skills/echo/invoke?pin=1",
            data=b'{"pin": 1234, "more": "text past the limit"}',
            headers={"X-Tenant": "acme"},
            timeout=5,
        )
        (entry,) = requests.get(f"{base}/__admin/journal", timeout=5).json()["entries"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    assert ["X-Tenant", "***"] in entry["headers"]
    # The command line wins over MOCKSKILL_REDACT: "pin" is not masked.
    assert entry["target"] == "/skills/echo/invoke?pin=1"
    assert (entry["body"], entry["body_size"]) == ('{"pin": 1234', 44)


def test_serve_keeps_digests_alone_with_journal_bodies_off(tmp_path: Path) -> None:
    scenario = tmp_path / "echo.yaml"
    scenario.write_text("name: echo\nskills: [{id: echo}]\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mockskill", "serve", str(scenario), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "MOCKSKILL_JOURNAL_BODIES": "off"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert process.stdout is not None
        process.stdout.readline()
        requests.post(f"{base}/skills/echo/invoke", json={"a": 1}, timeout=5)
        (entry,) = requests.get(f"{base}/__admin/journal", timeout=5).json()["entries"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    assert entry["body_digest"].startswith("hmac-sha256:")
    assert (entry["target"], entry["headers"], entry["body"]) == (None, None, None)
