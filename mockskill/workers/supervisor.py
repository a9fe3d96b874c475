"""``mockskill serve --workers N``: N serving processes on one port, and their supervisor.

Owns both sides of the arrangement. The parent (:class:`Supervisor`) keeps
the port, starts each worker as a child process running the same ``mockskill
serve`` (:mod:`subprocess`: a fresh interpreter, never a fork of a process
with threads), restarts one that dies, and on SIGTERM / Ctrl-C has them all
drain. The workers share nothing in memory: their sequences, tokens and
journal are the shared store's (``--state redis://...``), which is why N > 1
needs one.

How the workers share the port (``--worker-socket``):

- ``reuseport`` (Linux's default, ``auto``): each worker binds a listening
  socket of its own with SO_REUSEPORT and the kernel spreads connections
  among them. The parent holds a bound socket on the port (not listening, so
  it gets no connections) from before the first worker starts until the last
  one stops: port 0 becomes one real port, and a worker restarted finds it
  still reserved.
- ``inherit`` (where SO_REUSEPORT is missing, or asked for): the parent
  listens once and every worker accepts on that same socket, inherited as a
  descriptor (``pass_fds``).

Each worker gets two more descriptors: a pipe it writes one byte to once it
listens (the parent knows it is serving, and that a death after it is not a
failure to start), and the read end of a pipe the parent never writes to,
whose end of file tells a worker its parent is gone (killed without the
chance to stop it), so that no worker outlives it. Workers run in sessions
of their own: Ctrl-C in a terminal reaches the parent only, which passes
each signal on: SIGTERM first (the workers drain), SIGINT for the second
(a worker's second signal cuts what is left, as for ``mockskill serve``
itself; a second SIGTERM could merge with the first), SIGKILL after.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..server.listening import ServerError, listen

BACKOFF_FIRST = 0.5
"""Seconds before the second restart of a worker that died before it served."""
BACKOFF_MAX = 30.0
"""The longest wait between restarts of a worker that keeps dying at once."""


def reuse_port_available() -> bool:
    """Whether this platform lets several sockets listen on one port (SO_REUSEPORT)."""
    if not hasattr(socket, "SO_REUSEPORT"):
        return False
    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except OSError:  # defined but refused (some kernels, some sandboxes)
        return False
    return True


def needs_shared_state(count: int) -> str:
    """What ``--workers N`` without a shared ``--state`` is refused with."""
    return (
        f"--workers {count} needs a shared state store: add --state redis://HOST:PORT/DB"
        " (each worker would otherwise keep its own sequences and journal)"
    )


def exit_status(code: int) -> str:
    """A worker's exit code as a reader wants it: ``code 1``, ``signal SIGKILL``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


@dataclass
class Worker:
    """One worker slot: its process now, and how its last ones fared."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    ready_fd: int | None = None
    """The read end of its ready pipe, until it reported or died."""
    ready: bool = False
    quick_deaths: int = 0
    """Deaths in a row before serving (a bad store URL, a store that is down)."""
    restart_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Supervisor:
    """Runs *count* workers of ``mockskill serve`` on *host*:*port* until SIGTERM or Ctrl-C.

    *arguments* are the command line each worker gets after ``mockskill
    serve`` (its settings travel in *environment*, which keeps secrets out of
    ``ps``); the supervisor adds the worker's own options. *echo* prints a
    line to stderr, *announce* the start line to stdout.
    """

    count: int
    host: str
    port: int
    arguments: Sequence[str]
    environment: Mapping[str, str]
    echo: Callable[[str], None]
    announce: Callable[[str], None]
    worker_socket: str = "auto"
    workers: list[Worker] = field(default_factory=list)
    _sock: socket.socket | None = None
    _parent_r: int | None = None
    _parent_w: int | None = None
    _stopping: bool = False
    _signals: int = 0
    _started: bool = False

    _mode: str | None = None

    @property
    def mode(self) -> str:
        """``reuseport`` or ``inherit``: what ``auto`` comes to on this platform."""
        if self._mode is None:
            chosen = self.worker_socket
            if chosen == "auto":
                chosen = "reuseport" if reuse_port_available() else "inherit"
            self._mode = chosen
        return self._mode

    @property
    def url(self) -> str:
        assert self._sock is not None
        port = self._sock.getsockname()[1]
        host = self.host if ":" not in self.host else f"[{self.host}]"
        host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get(host, host)
        return f"http://{host}:{port}"

    def bind(self) -> None:
        """Reserve the port (ServerError if it cannot be had), before any worker starts."""
        if self.mode == "inherit":
            self._sock = listen(self.host, self.port)
            return
        if not reuse_port_available():
            raise ServerError("--worker-socket reuseport: this platform has no SO_REUSEPORT")
        # First without SO_REUSEPORT: a port anything holds (another supervisor's
        # workers included, which would otherwise share it silently) is refused here.
        with listen(self.host, self.port, listening=False) as probe:
            port = probe.getsockname()[1]
        self._sock = listen(self.host, port, reuse_port=True, listening=False)

    def run(self) -> int:
        """Start the workers, supervise them until stopped; the exit code to leave with."""
        if self._sock is None:
            self.bind()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self._parent_r, self._parent_w = os.pipe()
        previous = {
            sig: signal.signal(sig, _noted)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        }
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            self.workers = [Worker(i) for i in range(1, self.count + 1)]
            for worker in self.workers:
                self._spawn(worker)
            return self._supervise(wake_r)
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._stop_all(signal.SIGKILL)  # none is left unless something went wrong here
            for fd in (wake_r, wake_w, self._parent_r, self._parent_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            for worker in self.workers:
                self._close_ready(worker)
            if self._sock is not None:
                self._sock.close()

    # -- the loop ---------------------------------------------------------------

    def _supervise(self, wake_r: int) -> int:
        while True:
            now = time.monotonic()
            due = [w.restart_at for w in self.workers if w.restart_at is not None]
            timeout = max(0.0, min(due) - now) if due else None
            watched = [wake_r, *(w.ready_fd for w in self.workers if w.ready_fd is not None)]
            readable, _, _ = select.select(watched, [], [], timeout)
            if wake_r in readable:
                for number in _drained(wake_r):
                    if number in (signal.SIGTERM, signal.SIGINT):
                        self._stop()
            for worker in self.workers:
                if worker.ready_fd is not None and worker.ready_fd in readable:
                    self._read_ready(worker)
            code = self._reap()
            if code is not None:
                return code
            if self._stopping and not any(w.alive for w in self.workers):
                self.echo("mockskill: all workers stopped")
                return 0
            if not self._stopping:
                now = time.monotonic()
                for worker in self.workers:
                    if worker.restart_at is not None and worker.restart_at <= now:
                        self._spawn(worker)
                if not self._started and all(w.ready for w in self.workers):
                    self._started = True
                    pids = ", ".join(str(w.process.pid) for w in self.workers if w.process)
                    self.announce(
                        f"mockskill: {self.count} workers serving at {self.url}"
                        f" (pids {pids}; sharing the port by {self.mode}; Ctrl-C stops)"
                    )

    def _read_ready(self, worker: Worker) -> None:
        assert worker.ready_fd is not None
        try:
            data = os.read(worker.ready_fd, 1)
        except OSError:
            data = b""
        self._close_ready(worker)
        if data:
            worker.ready = True
            worker.quick_deaths = 0

    def _reap(self) -> int | None:
        """Note the workers that exited; an exit code when the supervisor must give up."""
        for worker in self.workers:
            process = worker.process
            if process is None or process.poll() is None:
                continue
            code = process.returncode
            worker.process = None
            name = f"worker {worker.index} (pid {process.pid})"
            if worker.ready_fd is not None:  # it may have said "ready" just before dying
                self._read_ready(worker)
            served, worker.ready = worker.ready, False
            if self._stopping:
                if code != 0:
                    self.echo(f"mockskill: {name} exited with {exit_status(code)}")
                continue
            if not self._started and not served:
                # At start, a worker that cannot serve (a store that does not answer, a
                # port it cannot bind) would not do better a second time: its own
                # message is above; stop the others and leave with its code.
                status = exit_status(code)
                self.echo(f"mockskill: {name} exited with {status} before serving; stopping")
                self._stop_all(signal.SIGTERM)
                self._wait_all()
                return code if code > 0 else 1
            self._plan_restart(worker, name, code, served)
        return None

    def _plan_restart(self, worker: Worker, name: str, code: int, served: bool) -> None:
        delay = 0.0
        if not served:
            worker.quick_deaths += 1
            delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (worker.quick_deaths - 1))
        when = f"in {delay:g} s (it died before serving {worker.quick_deaths} times in a row)"
        self.echo(
            f"mockskill: {name} exited with {exit_status(code)};"
            f" restarting it{' ' + when if delay else ''}"
        )
        worker.restart_at = time.monotonic() + delay

    def _stop(self) -> None:
        """A signal: the first has every worker drain, the second cuts them, a third kills."""
        live = [w for w in self.workers if w.alive]
        self._signals += 1
        if self._signals == 1:
            self._stopping = True
            for worker in self.workers:
                worker.restart_at = None
            self.echo(f"mockskill: stopping {len(live)} workers (requests in flight finish)")
            self._stop_all(signal.SIGTERM)
        elif self._signals == 2:
            # SIGINT, not a second SIGTERM: two of one kind sent before the worker
            # took the first are delivered as one, and it would go on draining.
            self.echo("mockskill: stopping the workers now")
            self._stop_all(signal.SIGINT)
        else:
            self._stop_all(signal.SIGKILL)

    def _stop_all(self, sig: signal.Signals) -> None:
        for worker in self.workers:
            if worker.alive:
                assert worker.process is not None
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(sig)

    def _wait_all(self) -> None:
        for worker in self.workers:
            if worker.process is not None:
                worker.process.wait()

    # -- one worker -------------------------------------------------------------

    def _spawn(self, worker: Worker) -> None:
        assert self._sock is not None
        assert self._parent_r is not None
        worker.restart_at = None
        ready_r, ready_w = os.pipe()
        fds = [ready_w, self._parent_r]
        options = ["--worker-index", str(worker.index), "--ready-fd", str(ready_w)]
        options += ["--parent-fd", str(self._parent_r)]
        if self.mode == "inherit":
            fds.append(self._sock.fileno())
            options += ["--listen-fd", str(self._sock.fileno())]
        else:
            options += ["--reuse-port", "--port", str(self._sock.getsockname()[1])]
        command = [sys.executable, "-m", "mockskill", "serve", *self.arguments, *options]
        try:
            worker.process = subprocess.Popen(
                command, env=dict(self.environment), pass_fds=fds, start_new_session=True
            )
        finally:
            os.close(ready_w)
        worker.ready_fd = ready_r

    def _close_ready(self, worker: Worker) -> None:
        if worker.ready_fd is not None:
            with contextlib.suppress(OSError):
                os.close(worker.ready_fd)
            worker.ready_fd = None


def _noted(signum: int, frame: object) -> None:
    """A Python-level handler, so that the signal reaches the wakeup pipe (and nothing else)."""


def _drained(fd: int) -> list[int]:
    """The signal numbers written to the wakeup pipe since it was last read."""
    numbers: list[int] = []
    while True:
        try:
            data = os.read(fd, 512)
        except BlockingIOError:
            return numbers
        if not data:
            return numbers
        numbers.extend(data)


# -- the worker's side ----------------------------------------------------------


def worker_listener(
    host: str, port: int, *, listen_fd: int | None, reuse_port: bool
) -> socket.socket | None:
    """The listening socket a worker serves: inherited, or its own on the shared port."""
    if listen_fd is not None:
        return socket.socket(fileno=listen_fd)
    if reuse_port:
        return listen(host, port, reuse_port=True)
    return None


def log_as_worker(index: int) -> None:
    """Begin each request-log line with the worker that served it (``[worker 2 pid 4711]``)."""
    import logging

    from ..server.access_log import access_log

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"[worker {index} pid {os.getpid()}] %(message)s"))
    access_log.addHandler(handler)


def report_ready(fd: int | None) -> None:
    """Tell the supervisor this worker serves (one byte on its ready pipe)."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, b"1")
    with contextlib.suppress(OSError):
        os.close(fd)


def stop_with_parent(fd: int | None) -> None:
    """SIGTERM this process once the supervisor is gone (end of file on *fd*).

    A signal rather than a call to the server: it works whenever the end
    comes (before the loop runs, SIGTERM's default ends the process; after, it
    drains as a SIGTERM from the supervisor would).
    """
    if fd is None:
        return
    import threading

    def wait() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="mockskill-parent-watch", daemon=True).start()
