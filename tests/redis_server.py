"""A real ``redis-server`` for the tests: started on a free port, stopped after.

The shared state backend is tested against Redis itself, never a fake: its
Lua scripts, streams and pub/sub are what the tests prove. Without a
``redis-server`` on the PATH the tests that need one skip with a reason
that says how to install it, unless ``MOCKSKILL_REQUIRE_REDIS=1`` (CI) makes
that skip a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server")
REQUIRED = os.environ.get("MOCKSKILL_REQUIRE_REDIS") == "1"
HOW_TO = (
    "these tests start a real redis-server: install it (Debian/Ubuntu: apt-get install"
    " redis-server; macOS: brew install redis); MOCKSKILL_REQUIRE_REDIS=1 turns this skip"
    " into a failure"
)


def require_redis() -> str:
    """The redis-server program; skip the test without one (fail when it is required)."""
    if REDIS_SERVER is None:
        if REQUIRED:
            pytest.fail("redis-server is not on the PATH; MOCKSKILL_REQUIRE_REDIS=1 requires it")
        pytest.skip(HOW_TO)
    return REDIS_SERVER


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process on 127.0.0.1, no persistence; restartable on its port.

    ``password`` sets ``requirepass`` (the URL then carries it). ``tls``: it
    speaks TLS only, with a certificate for 127.0.0.1 from a CA made for it
    (trustme), :attr:`ca` the CA's PEM file; ``client_certs`` makes it require
    a client certificate from that CA too (:attr:`client_cert`, :attr:`client_key`).
    :meth:`stop` and :meth:`start` again keep the port, so that a client
    configured with :attr:`url` sees the same Redis go away and come back.
    """

    def __init__(
        self, *, password: str | None = None, tls: bool = False, client_certs: bool = False
    ) -> None:
        self.program = require_redis()
        self.port = _free_port()
        self.password = password
        self.tls = tls or client_certs
        self.client_certs = client_certs
        self._dir = Path(tempfile.mkdtemp(prefix="mockskill-redis-"))
        self._process: subprocess.Popen[bytes] | None = None
        if self.tls:
            self._make_certificates()

    @property
    def url(self) -> str:
        """Its URL: ``redis://``, or ``rediss://`` trusting :attr:`ca` (``ssl_ca_certs``)."""
        auth = f":{self.password}@" if self.password else ""
        if not self.tls:
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.ca}"

    def _make_certificates(self) -> None:
        import trustme  # a test extra: only the TLS tests need it

        authority = trustme.CA()
        self.ca = self._dir / "ca.pem"
        authority.cert_pem.write_to_path(str(self.ca))
        issued = authority.issue_cert("127.0.0.1", "localhost")
        self.cert, self.key = self._dir / "redis.pem", self._dir / "redis.key"
        issued.cert_chain_pems[0].write_to_path(str(self.cert))
        issued.private_key_pem.write_to_path(str(self.key))
        client = authority.issue_cert("mockskill-client")
        self.client_cert, self.client_key = self._dir / "client.pem", self._dir / "client.key"
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        client.private_key_pem.write_to_path(str(self.client_key))

    def start(self) -> RedisServer:
        """Start it (again) and wait until it answers PING."""
        assert self._process is None, "already running"
        args = [
            self.program,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
            "--logfile", str(self._dir / "redis.log"),
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        if self.tls:  # TLS only: the plain port closed, the TLS one on the port
            args[1:3] = ["--port", "0", "--tls-port", str(self.port)]
            args += [
                "--tls-cert-file", str(self.cert),
                "--tls-key-file", str(self.key),
                "--tls-ca-cert-file", str(self.ca),
                "--tls-auth-clients", "yes" if self.client_certs else "no",
            ]  # fmt: skip
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode() if self._process.stderr else ""
                raise RuntimeError(f"redis-server exited at start: {err}{self._log()}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within 10 s")

    def ping(self) -> bool:
        """Whether it answers PING now (a raw socket: no client library needed)."""
        try:
            with self._connected() as sock:
                if self.password:
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    sock.recv(64)
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    @contextlib.contextmanager
    def _connected(self) -> Iterator[socket.socket]:
        """A socket to it (TLS when it speaks TLS, with the client certificate)."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.ca))
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
            sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
        with sock:
            yield sock

    def command(self, *words: str) -> bytes:
        """One command's raw reply (first 64 bytes), e.g. ``FLUSHALL``."""
        with self._connected() as sock:
            if self.password:
                sock.sendall(f"AUTH {self.password}\r\n".encode())
                sock.recv(64)
            sock.sendall(" ".join(words).encode() + b"\r\n")
            return sock.recv(64)

    def stop(self) -> None:
        """Stop it (it can be started again on the same port)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _log(self) -> str:
        with contextlib.suppress(OSError):
            return (self._dir / "redis.log").read_text(errors="replace")[-2000:]
        return ""
