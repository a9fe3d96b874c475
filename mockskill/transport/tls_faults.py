"""The TLS faults' listeners: a port per skill with ``tls: FAULT``, whose handshake fails.

A TLS fault comes before any HTTP request, so it belongs to the endpoint the
consumer connects to: each skill with ``tls:`` gets a port of its own (held,
like ``unreachable``'s, for as long as the scenario is served), named in its
descriptor's ``endpoint.url``. :class:`FaultListeners` holds them all for one
server and runs them on its loop (a :class:`~.server.Companion` of the main
listener); the engine asks it for the ports (:meth:`FaultListeners.hold`,
the :class:`~mockskill.engine.named_ports.TLSPorts` interface) and never does the I/O.

A failed handshake carries no ``Mockskill-Session`` header, so a port shared by
every consumer could not tell them apart. A session that asks for the skill's
descriptor is allotted a port of its own per skill (:meth:`FaultListeners.session_ports`,
opened when it first asks, closed after :data:`IDLE_CLOSE` seconds unused): its
handshakes are journalled in that session. At most :data:`SESSION_PORTS` such
ports are open at once; beyond, a session is named the shared port, whose
handshakes are journalled in the default session (as without a session).

Each accepted connection is first looked at without reading it
(``MSG_PEEK``): the ClientHello's server name (SNI) is read off it, then

- ``handshake_reset``: the connection is reset (RST) once the ClientHello is in;
- ``handshake_hang``: nothing is answered until the client gives up (or the server stops);
- ``plain_http``: a plain HTTP ``400`` is answered on the TLS port;
- every other fault (the rest of ``scenario.kinds.TLS_FAULTS``) is a real handshake with the
  fault's certificate or context; one that succeeds (a client that does not
  verify, a valid client certificate for ``client_cert_required``) is served
  as every HTTPS connection is: the skill's usual sequence plays.

A handshake this side refuses (``client_cert_required`` without a good client
certificate, ``protocol_version``) ends as ``openssl s_server`` ends it: the
alert OpenSSL wrote (``tls.RefusedHandshake``) is sent before the close.

Every handshake that fails is reported to *on_failed* (the journal): the fault,
the alert the client sent when it sent one, the SNI name offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..scenario import kinds
from .connection import Connection
from .handler import Handler
from .reading import Limits
from .shared import Shared

if TYPE_CHECKING:
    from .tls import Authority

log = logging.getLogger("mockskill.transport")

RAW_FAULTS = tuple(f.name for f in kinds.TLS_FAULTS if f.raw)
"""The TLS faults done to the raw connection (no handshake)."""

LINGER = 2.0
"""Seconds a failed handshake's connection is read (and dropped) before it is closed."""

SESSION_PORTS = 256
"""At most this many ports allotted to sessions are open at once (all skills together):
a client inventing session names cannot make the server open more sockets."""

IDLE_CLOSE = 300.0
"""Seconds a session's port is kept unused (no request of the session naming it, no
connection); then the next allotment closes it, and the session's next request allots
another."""

HELLO_TIMEOUT = 10.0
"""Seconds a connection may take to send its ClientHello before it is closed."""

PLAIN_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 52\r\n"
    b"Connection: close\r\n\r\nmockskill plain_http: this port speaks plain HTTP.\r\n"
)


@dataclass(frozen=True)
class Failed:
    """A handshake that failed on a fault's port, for the journal."""

    skill: str
    fault: str
    started: float
    finished: float
    alert: str | None
    """The TLS alert the client sent (``unknown_ca``, ``bad_certificate``, ...), if any."""
    sni: str | None
    """The server name the ClientHello offered (None: none, or no ClientHello)."""
    session: str | None = None
    """The session whose port it was (None: the skill's shared port)."""


class FaultListeners:
    """The TLS faults' ports of one server (module doc): held, served, stopped."""

    def __init__(
        self,
        host: str,
        authority: Callable[[], Authority],
        on_failed: Callable[[Failed], None],
        names: tuple[str, ...] = (),
        *,
        session_ports: int = SESSION_PORTS,
        idle_close: float = IDLE_CLOSE,
    ) -> None:
        self.host = host
        self._authority = authority
        self._handler: Callable[[], Handler] | None = None
        self._limits = Limits()
        self._on_failed = on_failed
        self._names = (host, *names)
        self._lock = threading.Lock()
        self._held: dict[str, _Listener] = {}
        self._sessions: dict[tuple[str, str], _Listener] = {}
        """The ports allotted to sessions, by (session, skill)."""
        self._max_sessions, self._idle_close = session_ports, idle_close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shared: Shared | None = None

    # -- the engine's side (any thread) ---------------------------------------------------

    def hold(self, faults: Mapping[str, str]) -> dict[str, int]:
        """Hold a port for each skill of *faults* (skill id -> fault); let go of the others."""
        with self._lock:
            for skill in [s for s, held in self._held.items() if faults.get(s) != held.fault]:
                self._let_go(self._held.pop(skill))
            for key in [k for k, held in self._sessions.items() if faults.get(k[1]) != held.fault]:
                self._let_go(self._sessions.pop(key))
            for skill, fault in faults.items():
                if skill not in self._held:
                    listener = _Listener(self, skill, fault, _listening(self.host))
                    self._held[skill] = listener
                    if self._loop is not None:
                        self._loop.call_soon_threadsafe(listener.start)
            return {skill: listener.port for skill, listener in self._held.items()}

    def session_ports(self, session: str, allot: bool = True) -> dict[str, int]:
        """The port of each held skill for *session*: its own, opened on the first ask
        (*allot*; else only one it has); the shared one when :data:`SESSION_PORTS` are
        open (or the port cannot be had)."""
        now = time.monotonic()
        with self._lock:
            ports = {}
            for skill, shared in self._held.items():
                listener = self._sessions.get((session, skill))
                if listener is None and allot:  # the idle ones closed first, to make room
                    idle = [k for k, s in self._sessions.items() if s.idle(now, self._idle_close)]
                    for key in idle:
                        self._let_go(self._sessions.pop(key))
                    if len(self._sessions) < self._max_sessions:
                        listener = self._session_listener(session, shared)
                ports[skill] = shared.port if listener is None else listener.use(now)
            return ports

    def _session_listener(self, session: str, shared: _Listener) -> _Listener | None:
        try:
            sock = _listening(self.host)
        except OSError as exc:  # out of ports or descriptors: the shared port serves
            log.warning("cannot open a %s port for session %r: %s", shared.fault, session, exc)
            return None
        listener = _Listener(self, shared.skill, shared.fault, sock, session)
        self._sessions[(session, shared.skill)] = listener
        if self._loop is not None:
            self._loop.call_soon_threadsafe(listener.start)
        return listener

    def ports(self) -> dict[str, int]:
        """The shared port of each held skill."""
        with self._lock:
            return {skill: listener.port for skill, listener in self._held.items()}

    def release(self) -> None:
        """Let go of every port."""
        with self._lock:
            for listener in (*self._held.values(), *self._sessions.values()):
                self._let_go(listener)
            self._held.clear()
            self._sessions.clear()

    def _let_go(self, listener: _Listener) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(listener.close)
        else:
            listener.close()

    @property
    def ca_pem(self) -> bytes:
        return self._authority().ca_pem

    def client_certificate(self) -> bytes:
        return self._authority().client_certificate()

    # -- the loop's side (a Companion of the main listener) -------------------------------

    def serve(self, handler: Callable[[], Handler], limits: Limits) -> None:
        """What serves a connection whose handshake succeeds (made on the first start)."""
        self._handler, self._limits = handler, limits

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._handler is not None, "serve() first"
        with self._lock:
            self._loop = loop
            for listener in (*self._held.values(), *self._sessions.values()):
                listener.start()

    def _connections(self) -> Shared:
        """What the connections whose handshake succeeded share; made on the first (a server
        without TLS faults makes no second handler)."""
        if self._shared is None:
            assert self._handler is not None
            assert self._loop is not None
            self._shared = Shared(self._handler(), self._limits, self._loop)
        return self._shared

    async def stop(self, grace: float = 0.0) -> bool:
        with self._lock:
            listeners = [*self._held.values(), *self._sessions.values()]
            shared = self._shared
            self._loop, self._shared = None, None
        for listener in listeners:
            listener.close()
        if shared is None:
            return True
        drained = await shared.drain(grace) if grace > 0 else False
        await shared.cut()
        return drained

    def hurry(self) -> None:
        if self._shared is not None:
            self._shared.hurry()

    def connection(self) -> Connection:
        return Connection(self._connections())

    def context(self, fault: str) -> ssl.SSLContext:
        return self._authority().fault_context(fault, self._names)

    def failed(self, failed: Failed) -> None:
        try:
            self._on_failed(failed)
        except Exception:  # the journal's problem, not the connection's
            log.exception("could not journal a failed TLS handshake")


class _Listener:
    """One skill's fault port: shared, or one session's (*session*)."""

    def __init__(
        self,
        owner: FaultListeners,
        skill: str,
        fault: str,
        sock: socket.socket,
        session: str | None = None,
    ) -> None:
        self.owner, self.skill, self.fault, self.session = owner, skill, fault, session
        self.used = time.monotonic()
        """When it was last named to its session or connected to (a session's port)."""
        self.sock: socket.socket | None = sock
        sock.setblocking(False)
        self.port = int(sock.getsockname()[1])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: set[socket.socket] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def use(self, now: float) -> int:
        self.used = now
        return self.port

    def idle(self, now: float, after: float) -> bool:
        """Whether unused for *after* seconds, with no connection open."""
        return now - self.used >= after and not self._open and not self._tasks

    def start(self) -> None:
        if self.sock is None or self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close()
        for conn in list(self._open):
            self._drop(conn)
        for task in list(self._tasks):
            task.cancel()

    def _accept(self) -> None:
        assert self.sock is not None
        assert self._loop is not None
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:
            log.warning("cannot accept on the %s port: %s", self.fault, exc)
            return
        conn.setblocking(False)
        self._open.add(conn)
        self.used = time.monotonic()
        started = time.time()
        loop = self._loop
        deadline = loop.call_later(HELLO_TIMEOUT, self._drop, conn)
        loop.add_reader(conn.fileno(), self._hello, conn, started, deadline)

    def _hello(self, conn: socket.socket, started: float, deadline: asyncio.TimerHandle) -> None:
        """The ClientHello is in (or the client left): the fault is done."""
        assert self._loop is not None
        try:
            data = conn.recv(16384, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        self._loop.remove_reader(conn.fileno())
        deadline.cancel()
        if not data:  # gone before saying anything
            self._drop(conn)
            return
        sni = server_name(data)
        fault = self.fault
        # Each ending is journalled before the client can see it: a client that moves on
        # (and reads or resets the journal) at once finds it there.
        if fault == "handshake_reset":
            self._failed(started, None, sni)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._drop(conn)
        elif fault == "handshake_hang":
            self._loop.add_reader(conn.fileno(), self._hanging, conn, started, sni)
        elif fault == "plain_http":
            self._failed(started, None, sni)
            with contextlib.suppress(OSError):
                conn.recv(16384)
                conn.send(PLAIN_ANSWER)
            self._drop(conn)
        else:
            self._open.discard(conn)
            task = self._loop.create_task(self._handshake(conn, started, sni))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _hanging(self, conn: socket.socket, started: float, sni: str | None) -> None:
        """The hanging connection has something to say: its close means the client gave up."""
        if _peer_closed(conn):
            self._drop(conn)
            self._failed(started, None, sni)

    async def _handshake(self, conn: socket.socket, started: float, sni: str | None) -> None:
        assert self._loop is not None
        # A second descriptor of the connection, so that the loop's close of a failed one
        # closes nothing yet: the close is this module's, lingering (see _linger).
        spare = conn.dup()
        try:
            await self._loop.connect_accepted_socket(
                self.owner.connection,
                conn,
                ssl=self.owner.context(self.fault),
                ssl_handshake_timeout=HELLO_TIMEOUT,
            )
        except asyncio.CancelledError:
            conn.close()
            spare.close()
            raise
        except (TimeoutError, OSError) as exc:
            conn.close()
            self._failed(started, alert_of(exc), sni)  # journalled before the client learns
            from .tls import RefusedHandshake  # loaded: it made the fault's context

            if isinstance(exc, RefusedHandshake) and exc.alert:
                with contextlib.suppress(OSError):  # a few bytes: the socket buffer takes them
                    spare.send(exc.alert)
            self._linger(spare)
        except Exception:  # not the client's doing: said, and the connection let go
            log.exception("the %s handshake failed on mockskill's side", self.fault)
            conn.close()
            spare.close()
        else:
            spare.close()  # the connection is the loop's transport's now

    def _linger(self, conn: socket.socket) -> None:
        """Close a failed handshake's connection as a FIN, whatever the client sent after.

        Closed at once with the client's next bytes unread (under TLS 1.3 a client
        sends its request before it learns that its certificate was refused), the kernel
        would reset the connection instead: the client would see a reset or a close,
        by a race. So the server's side is shut, what arrives is read and dropped until
        the client closes (or :data:`LINGER` seconds pass), then the socket is closed.
        """
        assert self._loop is not None
        conn.setblocking(False)
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()
            return
        self._open.add(conn)
        self._loop.add_reader(conn.fileno(), self._drain, conn)
        self._loop.call_later(LINGER, self._drop, conn)

    def _drain(self, conn: socket.socket) -> None:
        if _peer_closed(conn):
            self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._open.discard(conn)
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(conn.fileno())
        with contextlib.suppress(OSError):
            conn.close()

    def _failed(self, started: float, alert: str | None, sni: str | None) -> None:
        failed = Failed(self.skill, self.fault, started, time.time(), alert, sni, self.session)
        self.owner.failed(failed)


def _listening(host: str) -> socket.socket:
    """A socket listening on a free port of *host*."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host.strip("[]"), 0))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def alert_of(exc: BaseException) -> str | None:
    """The TLS alert the client sent, as the handshake's error names it (None: no alert).

    OpenSSL reports a received alert as ``SSLV3_ALERT_BAD_CERTIFICATE``,
    ``TLSV1_ALERT_UNKNOWN_CA``, ...: the part after ``ALERT_``, lowered.
    """
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and "_ALERT_" in reason:
        return reason.split("_ALERT_", 1)[1].lower()
    return None


def server_name(hello: bytes) -> str | None:
    """The SNI host name of a TLS ClientHello record (None: none, or not a ClientHello)."""
    try:
        if len(hello) < 43 or hello[0] != 0x16 or hello[5] != 0x01:
            return None
        at = 9 + 2 + 32  # record header, handshake header, version, random
        at += 1 + hello[at]  # session id
        (ciphers,) = struct.unpack_from("!H", hello, at)
        at += 2 + ciphers
        at += 1 + hello[at]  # compression methods
        (extensions,) = struct.unpack_from("!H", hello, at)
        at += 2
        end = min(len(hello), at + extensions)
        while at + 4 <= end:
            kind, length = struct.unpack_from("!HH", hello, at)
            at += 4
            if kind == 0:  # server_name: list length, then (type, length, name)
                name_type, (name_length,) = hello[at + 2], struct.unpack_from("!H", hello, at + 3)
                if name_type == 0:
                    return hello[at + 5 : at + 5 + name_length].decode("ascii", "replace")
                return None
            at += length
    except (IndexError, struct.error):
        return None
    return None


def _peer_closed(conn: socket.socket) -> bool:
    """Read and drop what *conn* has; whether the client has closed it (or it failed)."""
    try:
        return not conn.recv(65536)
    except (BlockingIOError, InterruptedError):
        return False  # woken with nothing to read after all
    except OSError:
        return True
