"""The HTTP server: mockskill's scenarios on the event-loop transport.

A :class:`Server` binds its port here (so that a busy port raises
:class:`ServerError` with a hint instead of exiting the process), then
serves through :mod:`mockskill.transport`: one asyncio loop (uvloop's when
installed) that parses HTTP/1.1 with keep-alive and plays each request's
plan — delays, hangs, dribbles, faults — with timers, no thread per
connection or wait. Skill requests are planned by the engine on the loop;
``/__admin`` runs the Flask app in a small thread pool
(:class:`~mockskill.server.dispatch.LoopDispatcher`).

It serves from a background thread (:meth:`Server.start`, for test
suites) or the calling one (:meth:`Server.serve_forever`, for the CLI,
which drains on SIGTERM / Ctrl-C). Stopping stops accepting at once and
lets requests in flight finish for up to :attr:`Server.grace` seconds.

Which scenarios are loaded and served, and every change to them (add,
remove, activate, reload, watch, share with replicas …), is
:mod:`mockskill.control`'s: a Server builds one
:class:`~mockskill.control.registry.Registry` around its engine, shares it with
the admin API, and its scenario methods delegate to it, a line each. Its HTTPS
is a :class:`~mockskill.server.https.ServerTLS` it owns, and delegates to.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .. import transport
from ..admin.browsers import Cors, cors_origins
from ..control.registry import CannotShare, LoadedScenario, Registry, set_moves_state
from ..control.watch import DEFAULT_INTERVAL, ReloadResult, Watcher
from ..engine.builtin_answers import DEFAULT_MAX_BODY
from ..engine.callback_hosts import CallbackHosts
from ..engine.engine import Engine
from ..engine.entries import DEFAULT_BODY_LIMIT, redaction
from ..engine.plan import Outcome
from ..engine.state import DEFAULT_JOURNAL_BYTES, DEFAULT_JOURNAL_SIZE, Entry
from ..engine.store import Store
from ..engine.task_skills import DEFAULT_MAX_TASKS
from ..scenario.loader import Scenarios, Source, load_any
from ..scenario.reader import MAX_DELAY_MS
from ..transport import DEFAULT_GRACE, Limits, Refusal, ThreadedServer
from ..transport import Request as TransportRequest
from ..transport.courier import Courier
from ..transport.ports import RefusedPort
from ..transport.task_watches import TaskWatches
from ..transport.tls_faults import Failed
from .access_log import access_log, log_request, log_to_stderr, masked
from .collector import FrozenSet
from .dispatch import LoopDispatcher
from .expectations import Expectations, Expecting
from .https import ServerTLS, journal_handshake
from .listening import (
    BACKLOG,
    ServerError,
    exposed_without_token,
    is_loopback,
    listen,
    raise_fd_limit,
)
from .state_store import open_state, shared_url

if TYPE_CHECKING:
    import ssl
    from wsgiref.types import StartResponse, WSGIEnvironment

    from flask import Flask

    from .. import audit
    from ..admin.recordings import Recordings

__all__ = [
    "BACKLOG",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "Server",
    "ServerError",
    "access_log",
    "exposed_without_token",
    "is_loopback",
    "listen",
    "masked",
]
"""The face: the Server, and what its neighbours own that callers name from here."""

DEFAULT_KEEP_ALIVE = Limits.keep_alive
"""Seconds an idle kept-alive connection stays open (see :class:`mockskill.transport.Limits`)."""
DEFAULT_HEADER_TIMEOUT = Limits.header_timeout
"""Seconds a request head may take (slowloris → 408)."""


class Server(Expecting):
    """mockskill on a port, served from a background thread.

    ``scenarios`` is a :class:`~mockskill.scenario.model.ScenarioSet`, YAML text, a
    path, one scenario as a dict, a list of any of these (served together),
    or None for the bundled scenarios. Port 0 picks a free port; :attr:`url`
    tells which. Use as a context manager, or call :meth:`start` and
    :meth:`stop`.

    Safe defaults (docs/security.md): it listens on 127.0.0.1; any other
    address needs *admin_token* (asked of every ``/__admin`` request) or
    *insecure_admin*; bodies over *max_body_bytes* are refused with 413;
    CORS headers are sent only with *cors* (True: for any origin; origins, as
    ``["http://localhost:3000"]``: for those), and ``/__admin`` refuses a request
    from a page on another origin it does not let in; on a loopback *host*, ``/__admin``
    answers only requests addressed to a loopback name or one of *allow_hosts*
    (``"*"``: any), against DNS rebinding. (``mockskill serve
    --insecure-admin`` prints a warning; this class trusts its caller.)
    The request journal keeps the newest *journal_size* entries, each with what its
    request sent (target, headers, and body up to *journal_body_limit* bytes; not with
    *journal_bodies* False; at most *journal_bytes* of bodies in all, the oldest going
    first), credentials masked and the values of the headers, query parameters and form
    or JSON fields named in *redact* too (docs/admin.md). Task skills hold at most
    *max_tasks* live tasks (docs/tasks.md; over it their invokes get 503 with retry advice);
    their callbacks go to loopback hosts and to those of *callback_allow* only (names or
    addresses, compared as written: no DNS lookup decides).

    *state* is where sequence positions, tokens, outage clocks, draws and the
    journal live: by default a new in-memory :class:`~mockskill.engine.state.State`
    made from *seed* and *journal_size*; or a :class:`~mockskill.engine.store.Store`
    (a shared one, for several processes serving one truth), which brings its
    own seed and journal bound; or a store's URL (``"redis://HOST:PORT/DB"``,
    ``"memory"``): the Server opens it with *seed*, *journal_size* and *replica*
    (the name of this process in a shared journal; ``hostname:pid`` by default)
    and closes it when it stops (it is not started again after). :attr:`state`
    is that store.

    *shared_scenarios* (a ``redis://`` URL; by default the URL *state* gives,
    when it names a shared store; ``"memory"``: none) serves the scenario set
    kept there, shared with every server given the same URL: a change on one
    is served by all within about a second, and a reset reaches them all
    (docs/admin.md, "One set for every replica"). Started with *scenarios*,
    the server publishes them unless the stored set came from the same ones;
    started without (None), it joins the stored set. A Redis it cannot reach
    raises ServerError.
    """

    def __init__(
        self,
        scenarios: Scenarios = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
        quiet: bool = True,
        max_delay_ms: int = MAX_DELAY_MS,
        admin_token: str | None = None,
        insecure_admin: bool = False,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        cors: bool | Iterable[str] = False,
        allow_hosts: Iterable[str] = (),
        journal_size: int = DEFAULT_JOURNAL_SIZE,
        grace: float = DEFAULT_GRACE,
        keep_alive: float = DEFAULT_KEEP_ALIVE,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        state: Store | str | None = None,
        replica: str | None = None,
        shared_scenarios: str | None = None,
        tls: bool = False,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        tls_names: Iterable[str] = (),
        http_port: int | None = None,
        journal_bodies: bool = True,
        journal_body_limit: int = DEFAULT_BODY_LIMIT,
        redact: Iterable[str] = (),
        journal_bytes: int = DEFAULT_JOURNAL_BYTES,
        max_tasks: int = DEFAULT_MAX_TASKS,
        callback_allow: Iterable[str] = (),
    ) -> None:
        if admin_token is not None and not admin_token.strip():
            raise ServerError("the admin token is empty; give one of at least one character")
        if not is_loopback(host) and admin_token is None and not insecure_admin:
            raise ServerError(exposed_without_token(host))
        given = cors if isinstance(cors, bool) else tuple(cors)  # (read twice: an iterator once)
        try:
            self.cors: Cors = cors_origins(given)
            """Whom CORS lets in: nobody, any origin (True), or the origins named."""
        except ValueError as exc:
            raise ServerError(f"cors: {exc}") from None
        self._cors_given = given
        if max_body_bytes < 1:
            raise ServerError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
        if journal_size < 1:
            raise ServerError(f"journal_size must be at least 1, not {journal_size}")
        if journal_bytes < 1:
            raise ServerError(f"journal_bytes must be at least 1, not {journal_bytes}")
        if journal_body_limit < 0:
            raise ServerError(f"journal_body_limit must be at least 0, not {journal_body_limit}")
        if max_tasks < 1:
            raise ServerError(f"max_tasks must be at least 1, not {max_tasks}")
        hosts = (callback_allow,) if isinstance(callback_allow, str) else callback_allow
        try:
            self.callback_hosts = CallbackHosts.of(hosts)
            """Where task callbacks may go besides loopback (``callback_allow``)."""
        except ValueError as exc:
            raise ServerError(f"callback_allow: {exc}") from None
        names = (redact,) if isinstance(redact, str) else tuple(redact)
        if any(not name.strip() for name in names):
            raise ServerError("redact: a name to mask is empty; give a header or field name")
        if (tls_cert is None) != (tls_key is None):
            raise ServerError("a certificate needs its key: give both tls_cert and tls_key")
        self.host = host
        self.tls = tls or tls_cert is not None
        """Whether the port serves HTTPS (docs/tls.md)."""
        self._https = ServerTLS(
            host,
            on=self.tls,
            files=None if tls_cert is None else (str(tls_cert), str(tls_key)),
            names=tls_names,
            journal=self._journal_handshake,
        )
        self._http_port = http_port
        self._http_sock: socket.socket | None = None
        self.state: Store = open_state(state, seed, journal_size, replica, journal_bytes)
        self._owns_state = isinstance(state, str)
        """Whether the Server opened its store (from a URL): it closes it when it stops."""
        self._state_closed = False
        shares = shared_url(state, shared_scenarios)
        # Sharing a set that moves this state's outage windows, the replica that publishes
        # a set starts them with it; starting them here too would move the fleet's.
        self.engine = Engine(
            load_any(scenarios, max_delay_ms=max_delay_ms),
            self.state,
            raw_socket=True,
            refused=RefusedPort(host),
            activate=not set_moves_state(self.state, shares),
            tls=self._https.faults,
            journal_bodies=journal_bodies,
            journal_body_limit=journal_body_limit,
            max_tasks=max_tasks,
            callback_hosts=self.callback_hosts,
        )
        self.courier = Courier(self.state)
        """Sends task callbacks (docs/tasks.md, "Callbacks"), on the serving loop."""
        self.engine.on_callback = self.courier.notice
        self.watches = TaskWatches(self.state)
        """Follows the tasks watched as streams (docs/tasks.md, "Watching a task")."""
        self.engine.on_task_touched = self.watches.touched
        for name in names:  # masked in the journal from the first request on
            self.state.hide(redaction(name))
        self.registry = Registry(self.engine, max_delay_ms=max_delay_ms)
        """The loaded scenarios and every change to them (shared with ``/__admin/scenarios``)."""
        self.expectations = Expectations(self)
        """What :meth:`expect` added, as scenarios of the registry (docs/pytest.md)."""
        if shares is not None:
            try:
                self.registry.share_at(shares, joins=scenarios is None)
            except BaseException as exc:
                if self._owns_state:
                    self.state.close()
                if isinstance(exc, CannotShare):
                    raise ServerError(str(exc)) from None
                raise
        if admin_token is not None:
            # Now, not when the admin app is built (create_app does it too): a skill
            # request may carry the token in its path before any /__admin request.
            self.state.hide(admin_token)
        self._app: Flask | None = None
        self._app_lock = threading.Lock()
        self.max_body_bytes = max_body_bytes
        # On a loopback bind, /__admin answers loopback Host names and these alone
        # (DNS rebinding: mockskill/admin/browsers.py); elsewhere the token guards it.
        names = (allow_hosts,) if isinstance(allow_hosts, str) else tuple(allow_hosts)
        self._admin_hosts = names if is_loopback(host) else None
        self._admin_token = admin_token
        self._port = port
        self._quiet = quiet
        self.grace = grace
        """Seconds requests in flight get to finish when the server stops."""
        self.keep_alive = keep_alive
        self.header_timeout = header_timeout
        self._sock: socket.socket | None = None
        self._dispatcher: LoopDispatcher | None = None
        self._surfaces: list[LoopDispatcher] = []
        self._transport: transport.LoopServer | None = None
        self._threaded: ThreadedServer | None = None

    @property
    def app(self) -> Flask:
        """The Flask app of ``/__admin`` (a WSGI app that can be mounted elsewhere too).

        Built on first use — the first ``/__admin`` request, in the admin
        thread pool, or reading this — not at start: importing Flask and
        building the blueprint is most of what start-up would otherwise cost
        beyond the skill dispatcher.
        """
        if self._app is not None:
            return self._app
        from ..wsgi.app import COMPILING, create_app  # Flask and Werkzeug: on first use only

        with self._app_lock, COMPILING:
            if self._app is None:
                self._app = create_app(
                    registry=self.registry,
                    admin_token=self._admin_token,
                    max_body_bytes=self.max_body_bytes,
                    cors=self._cors_given,
                    admin_hosts=self._admin_hosts,
                )
            return self._app

    @property
    def recording(self) -> Recordings:
        """This server's recording (``start(target, out)``, ``stop()``, ``status()``): what
        its proxies forward, turned into a scenario file (docs/scenarios.md, "Record and
        replay")."""
        from ..admin.recordings import recordings_of  # (the recording stage: on first use)

        return recordings_of(self.registry)

    def _admin_wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Any:
        """The admin app as WSGI, built on the first request it gets."""
        return self.app.wsgi_app(environ, start_response)

    @property
    def port(self) -> int:
        if self._sock is None:
            raise ServerError("the server is not started; call start() or use it in a with block")
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:54321`` (``https://`` with TLS; no trailing
        slash)."""
        return f"{'https' if self.tls else 'http'}://{self._url_host}:{self.port}"

    @property
    def http_url(self) -> str | None:
        """The plain-HTTP base URL beside HTTPS (*http_port*), or None."""
        if self._http_sock is None:
            return None
        return f"http://{self._url_host}:{self._http_sock.getsockname()[1]}"

    @property
    def _url_host(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
        return host

    @property
    def seed(self) -> int:
        return self.state.seed

    def skill_url(self, skill_id: str) -> str:
        return f"{self.url}/skills/{skill_id}"

    def invoke_url(self, skill_id: str) -> str:
        return f"{self.url}/skills/{skill_id}/invoke"

    @property
    def admin_required(self) -> bool:
        """Whether ``/__admin`` asks for a token (the token itself is not exposed)."""
        return self._admin_token is not None

    # -- HTTPS (docs/tls.md): the ServerTLS this server owns --------------------

    @property
    def tls_fault_ports(self) -> dict[str, int]:
        """The port of each skill with a TLS fault (skill id -> port), as a descriptor
        fetched without a ``Mockskill-Session`` header names it (docs/tls.md)."""
        return self._https.fault_ports()

    @property
    def ca_bundle(self) -> str | None:
        """The path of the CA certificate (PEM) that signs this server's certificate, for
        ``requests.get(url, verify=server.ca_bundle)``; None without TLS, or with the
        user's own certificate (*tls_cert*)."""
        return self._https.ca_bundle()

    @property
    def client_context(self) -> ssl.SSLContext | None:
        """A client TLS context that trusts :attr:`ca_bundle` (None when that is None):
        ``httpx.Client(verify=server.client_context)`` (httpx 0.28 deprecates a path)."""
        return self._https.client_context()

    def client_certificate(self) -> bytes:
        """A client certificate (PEM: key, then certificate) from the server's CA: what a
        ``tls: client_cert_required`` skill accepts (``POST /__admin/tls/client-cert``)."""
        return self._https.client_certificate()

    # -- scenarios and state: the registry's (mockskill/control/) and the store's -------

    @property
    def scenario_names(self) -> list[str]:
        """The names of the scenarios served (the active ones), in order."""
        return [s.name for s in self.engine.scenarios.scenarios]

    @property
    def scenarios(self) -> tuple[LoadedScenario, ...]:
        """Every loaded scenario, active or not, in order: name, origin, active, times."""
        return self.registry.scenarios

    def add(
        self,
        scenarios: Source | Iterable[Source],
        *,
        active: bool = True,
        replace: bool = False,
    ) -> tuple[LoadedScenario, ...]:
        """Serve *scenarios* beside the current ones, from the next request on.

        YAML text, a dict, a path or a ScenarioSet (or a list of them),
        checked whole first: a problem, or a scenario name, skill id or route
        that clashes with one served, raises ScenarioError and changes
        nothing. Requests in flight finish on the scenarios they started on.
        With *replace*, a scenario takes the place of the loaded one of its
        name (its sequences restart); with ``active=False`` it is loaded but
        not served until :meth:`activate`, and may then share skill ids and
        routes with served ones. Returns the scenarios as loaded.
        """
        return self.registry.load(scenarios, active=active, replace=replace)

    def remove(self, name: str) -> None:
        """Stop serving scenario *name* (its skills and routes) from the next request on.

        It is unloaded, served or not; an unknown name raises KeyError
        saying which are loaded, with a did-you-mean.
        """
        self.registry.remove(name)

    def activate(self, name: str) -> LoadedScenario:
        """Serve the loaded scenario *name* from the next request on, from its first steps.

        Its sequences and outage window restart. Raises ScenarioError if an
        active scenario serves one of its skill ids or routes (deactivate
        that one first), KeyError if no scenario of that name is loaded.
        """
        return self.registry.activate(name)

    def deactivate(self, name: str) -> LoadedScenario:
        """Stop serving scenario *name* from the next request on; it stays loaded (KeyError)."""
        return self.registry.deactivate(name)

    def reload(self, paths: Iterable[str | Path]) -> ReloadResult:
        """Serve the scenarios in *paths* instead of the ones served, from the next request on.

        The files are loaded whole first. If they have problems, nothing
        changes: the last good scenarios go on being served, and the
        result (also shown by ``/__admin/health``) has status ``failed``
        and every problem. Otherwise they replace the scenarios the files
        gave before; those loaded at run time (:meth:`add`, the admin API)
        stay, so the files must not take their names, nor serve their
        skill ids or routes while they are active. A scenario equal to
        the one served under its name is kept as it was: its sequence
        positions and outage window go on (and it stays inactive if it
        was deactivated). A new or changed scenario's sequences restart,
        for every session. Requests in flight finish on the scenarios
        they started on.
        """
        return self.registry.reload(paths)

    def watch(
        self,
        paths: Iterable[str | Path],
        *,
        interval: float = DEFAULT_INTERVAL,
        on_reload: Callable[[ReloadResult], object] | None = None,
    ) -> Watcher:
        """Reload *paths* (see :meth:`reload`) whenever a file in them changes, until :meth:`stop`.

        The files are polled every *interval* seconds (mockskill/control/watch.py).
        *on_reload* is called with each result, on the watcher's thread.
        ``/__admin/health`` shows the last result under ``reload`` (status
        ``none`` until the first change).
        """
        return self.registry.watch(paths, interval=interval, on_reload=on_reload)

    def stop_watching(self) -> None:
        """Stop the watcher :meth:`watch` started, if any (a reload under way finishes)."""
        self.registry.stop_watching()

    @property
    def last_reload(self) -> ReloadResult | None:
        """What the last :meth:`reload` did (None: never reloaded, nor watching)."""
        return self.registry.last_reload

    def reset(self, session: str | None = None) -> None:
        """Forget positions, random draws and journal: all of them, or one session's.

        Sharing a scenario set (*shared_scenarios*), every replica forgets it too.
        """
        self.registry.reset(session)

    def journal(self, session: str | None = None) -> list[Entry]:
        """The requests answered, oldest first; all of them, or one session's."""
        return self.state.journal(session)

    def requests(
        self,
        session: str | None = None,
        *,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """The requests the journal holds, oldest first, as ``GET /__admin/requests`` lists
        them: all of them, or those of *session*, *skill*, *method* and *path* (the newest
        *limit*). Each has what was sent: ``target``, ``headers``, ``body``."""
        from ..engine.verifying import selected  # on first use: serving never needs it

        journal = self.state.journal(session)
        return selected(journal, skill=skill, method=method, path=path, limit=limit)

    def verify(
        self,
        when: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        count: int | None = None,
        at_least: int | None = None,
        at_most: int | None = None,
    ) -> list[Entry]:
        """Assert that the consumer sent the requests named, as ``POST /__admin/verify``
        does (docs/python.md): *when* holds conditions in the language of a case's
        ``when:`` (``{"body": {"/input/text": "hello"}}``); *count* exactly, or *at_least*
        and/or *at_most* (at least 1 by default). Returns the matching entries; raises
        AssertionError naming the closest requests and what each failed when the count is
        not the one wanted, and BadVerification (a ScenarioError) when a condition is bad.
        """
        __tracebackhide__ = True  # (pytest) a failure points at the caller's line
        from ..engine.verifying import verify
        from ..scenario.verification import document, verification_of

        asked = document(
            when,
            session=session,
            skill=skill,
            method=method,
            path=path,
            count=count,
            at_least=at_least,
            at_most=at_most,
        )
        verification = verification_of(asked)
        verified = verify(verification, self.state.journal(verification.session))
        if not verified.held:
            raise AssertionError(verified.message)
        return list(verified.matched)

    def report(
        self, session: str | None = None, policy: audit.Policy | None = None
    ) -> dict[str, Any]:
        """The retry audit and category coverage (docs/audit.md): every session's, or *session*'s.

        The same document as ``GET /__admin/report``; pass it to
        :func:`mockskill.audit.assert_clean` to fail a test on findings.
        """
        from .. import audit  # on first use: start-up does not pay for it

        sessions = None if session is None else [session]
        named = audit.named_cases(self.engine.scenarios.skills)
        return audit.report(
            self.state.journal(), policy or audit.Policy(), sessions=sessions, named=named
        )

    def verdict(
        self,
        session: str,
        require: str | Iterable[str] = (),
        policy: audit.Policy | None = None,
    ) -> dict[str, Any]:
        """*session*'s verdict, as ``GET /__admin/verdict`` judges it (docs/python.md):
        ``clean`` when it made a request, the audit has no finding, and it met every name
        *require* gives (``--require``'s names, a list or comma-separated), with ``detail``
        saying why not in one line, ``findings``, ``covered`` and ``uncovered``. Raises
        LookupError, naming the closest sessions, for a session the journal has no request
        of, and ValueError for a *require* name no gate knows."""
        from .. import audit  # on first use: start-up does not pay for it

        entries = self.state.journal(session)
        required = [require] if isinstance(require, str) else list(require)
        if not entries:
            audit.required_names(required)  # a bad name is said first, as over HTTP
            raise LookupError(audit.unknown_session(session, self.state.journal())[0])
        named = audit.named_cases(self.engine.scenarios.skills)
        return audit.session_verdict(
            session, entries, required, policy or audit.Policy(), named=named
        )

    # -- serving ---------------------------------------------------------------

    def bind(self, sock: socket.socket | None = None) -> None:
        """Listen on the port (without serving yet); raise ServerError if it cannot.

        *sock*: serve this listening socket instead (a ``--workers`` worker's,
        inherited from its supervisor or bound with SO_REUSEPORT).
        """
        if self._transport is not None:
            return
        if self._state_closed:
            raise ServerError(
                "this Server closed the store it opened when it stopped: make another"
            )
        raise_fd_limit()
        context = self._https.context()  # before the port: a bad certificate binds nothing
        if sock is None:
            sock = listen(self.host, self._port)
        http_sock = None
        if self._http_port is not None:
            try:
                http_sock = listen(self.host, self._http_port, parameter="http_port")
            except ServerError:
                sock.close()
                raise
        self.engine.open()
        dispatcher = self._new_dispatcher()
        if context is not None:  # the engine's URLs say https:// for requests read on it
            self.engine.secure_ports.add(int(sock.getsockname()[1]))
        limits = Limits(
            max_body=self.max_body_bytes,
            keep_alive=self.keep_alive,
            header_timeout=self.header_timeout,
        )
        self._sock, self._dispatcher = sock, dispatcher
        self._transport = transport.LoopServer(
            dispatcher,
            self.host,
            limits=limits,
            sock=sock,
            before_trim=self.state.compact,
            tls=context,
        )
        # The TLS faults' ports serve HTTPS once their handshake succeeds.
        self._https.faults.serve(lambda: dispatcher, limits)
        self._transport.companions.append(self._https.faults)
        self._transport.companions.append(self.courier)
        self._transport.companions.append(self.watches)
        self._transport.watches = self.watches
        if http_sock is not None:
            self._http_sock = http_sock
            plain = transport.LoopServer(dispatcher, self.host, limits=limits, sock=http_sock)
            plain.watches = self.watches
            self._transport.companions.append(plain)
        self.registry.start_sharing()

    def serve_forever(self, *, freeze: bool = False) -> None:
        """Serve on this thread until SIGTERM / Ctrl-C or :meth:`shutdown`, then drain.

        The first signal stops accepting and lets requests in flight finish
        for up to :attr:`grace` seconds; a second one stops at once. *freeze*: the
        process does nothing but serve (``mockskill serve``): the scenario set served is
        kept out of the cyclic collector's view, again after each change to it
        (:mod:`.collector`).
        """
        self.bind()
        assert self._transport is not None
        frozen = FrozenSet(self.registry) if freeze else None
        try:
            if frozen is not None:
                frozen.start()
            transport.run(self._transport, grace=self.grace)
        finally:
            if frozen is not None:
                frozen.stop()
            self.stop_watching()
            self._closed()

    def shutdown(self) -> None:
        """Ask :meth:`serve_forever` to drain and return; safe from any thread."""
        if self._transport is not None:
            self._transport.request_stop()

    def start(self) -> Server:
        """Serve from a daemon thread; returns once the port accepts connections."""
        if self._threaded is not None:
            return self
        self.bind()
        assert self._dispatcher is not None
        self._threaded = ThreadedServer(self._dispatcher, server=self._transport).start()
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop watching and accepting at once; requests in flight finish for up to
        *grace* seconds (:attr:`grace` by default), then what is left is cut."""
        self.stop_watching()
        threaded = self._threaded
        if threaded is None:
            if self._transport is not None and self._sock is not None:
                self._closed()  # bound, never started
            return
        threaded.stop(self.grace if grace is None else grace)
        self._threaded = None
        self._closed()

    def _new_dispatcher(self) -> LoopDispatcher:
        dispatcher = LoopDispatcher(
            self.engine,
            self._admin_wsgi,
            max_body_bytes=self.max_body_bytes,
            cors=self._cors_given,
        )
        self._surfaces.append(dispatcher)
        if not self._quiet:
            log_to_stderr()
            dispatcher.on_played = self._log_request
        return dispatcher

    def _closed(self) -> None:
        if self._sock is not None:
            self._sock.close()
        if self._http_sock is not None:
            self._http_sock.close()
            self._http_sock = None
        for dispatcher in self._surfaces:
            dispatcher.close()
        self._surfaces.clear()
        self.engine.close()
        self.registry.stop_sharing()
        self._transport = self._sock = self._dispatcher = None
        if self._owns_state:
            self.state.close()  # its journal sent, its connections let go
            self._state_closed = True

    def _journal_handshake(self, failed: Failed) -> None:
        journal_handshake(self.engine, failed)

    def _log_request(self, exchange: TransportRequest | Refusal, outcome: Outcome) -> None:
        log_request(exchange, outcome, self._admin_token)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
