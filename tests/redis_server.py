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
import subprocess
import tempfile
import time
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

    ``password`` sets ``requirepass`` (the URL then carries it). :meth:`stop`
    and :meth:`start` again keep the port, so that a client configured with
    :attr:`url` sees the same Redis go away and come back.
    """

    def __init__(self, *, password: str | None = None) -> None:
        self.program = require_redis()
        self.port = _free_port()
        self.password = password
        self._dir = Path(tempfile.mkdtemp(prefix="mockskill-redis-"))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

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
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                if self.password:
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    sock.recv(64)
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

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
