"""The pytest plugin: a mockskill server for a test run, and a session of it per test.

It owns the fixtures ``mockskill_server`` (one :class:`~mockskill.server.server.Server`
for the whole run, per xdist worker; or, given ``--mockskill-url`` or
``MOCKSKILL_URL``, a :class:`~mockskill.server.remote.RemoteServer` on a server
already running, shared by every worker and suite) and ``mockskill`` (a
:class:`MockskillSession`: the test's own ``Mockskill-Session``, so that tests
sharing the server never see each other's sequence positions or journal
entries), the ``mockskill`` marker (scenarios of a test's own, served by a
server of its own), the ``--mockskill-scenarios``, ``--mockskill-url``,
``--mockskill-admin-token`` and ``--mockskill-state`` options, the
``mockskill_scenarios`` and ``mockskill_state`` ini settings, and the check
after each test: requests that matched nothing, or that mockskill itself
refused (``MOCKSKILL_*`` errors, such as an exhausted sequence), fail a test
that passed, and are shown beside the failure of a test that failed already.
The requests checked are the test's session's; on a server of the test's own
(the marker's), every request; on the run's server when this process runs it,
also those sent without a ``Mockskill-Session`` while the test ran (they are
the test's: no other test of this process runs meanwhile, and under xdist
each worker has its own server). A test that means its unmatched requests
says so (:meth:`MockskillSession.allow_unmatched`, or the marker's
``allow_unmatched=True``).
A session can also be audited: :meth:`MockskillSession.assert_clean_audit`
fails the test with every finding of the retry audit (docs/audit.md), and
:meth:`MockskillSession.verify` fails it unless the consumer sent what the test
names (``/__admin/verify``), showing the closest requests it did send.
A test scripts skills and routes of its own with :meth:`MockskillSession.expect`
(:mod:`mockskill.server.expectations`): one never met fails it, and they are
cleared after it. ``--mockskill-junit=PATH`` writes the audit of every session the
run's servers served (each test's, on a marker's server too, and the other sessions
of the run's own server; under xdist, every worker's) as one JUnit XML file at the
end (:class:`AuditLog`, :mod:`mockskill.audit.formats.junit`).

It is registered as the ``pytest11`` entry point ``mockskill``; no server
starts until a test asks for one of its fixtures.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pytest

from . import audit
from .engine.entries import DEFAULT_BODY_LIMIT
from .engine.state import DEFAULT_SESSION
from .scenario.loader import bundled_path, load_any, load_paths
from .scenario.problems import ScenarioError
from .server.remote import RemoteError, RemoteServer
from .server.server import Server, ServerError
from .store.url import MEMORY, BadStoreURL, checked, is_shared

if TYPE_CHECKING:
    from .engine.state import Entry
    from .scenario.model import ScenarioSet
    from .server.expectations import Expectation, Expectations

SESSION_HEADER = "Mockskill-Session"
MARKER_KEYS = ("scenarios", "check", "allow_unmatched")
_MAX_NAME = 100
URL_ENV = "MOCKSKILL_URL"
TOKEN_ENV = "MOCKSKILL_ADMIN_TOKEN"
STATE_ENV = "MOCKSKILL_STATE"

Checks = Literal["session", "server", "local"]
"""Which requests a session's check reads (:class:`MockskillSession`)."""

_scenarios_key = pytest.StashKey["ScenarioSet | None"]()
_state_key = pytest.StashKey[str]()
_session_key = pytest.StashKey["MockskillSession"]()
_reports_key = pytest.StashKey[dict[str, pytest.TestReport]]()
_audit_key = pytest.StashKey["AuditLog"]()
_WORKER_AUDIT = "mockskill_audit"
"""The key of an xdist worker's sessions in the output it sends its controller."""


class SessionServer(Protocol):
    """What a :class:`MockskillSession` uses of its server: a Server, or a RemoteServer."""

    @property
    def url(self) -> str: ...

    def skill_url(self, skill_id: str) -> str: ...

    def invoke_url(self, skill_id: str) -> str: ...

    def journal(self, session: str | None = None) -> list[Entry]: ...

    def reset(self, session: str | None = None) -> None: ...

    def requests(
        self,
        session: str | None = None,
        *,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        limit: int | None = None,
    ) -> list[Entry]: ...

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
    ) -> list[Entry]: ...

    def report(
        self, session: str | None = None, policy: audit.Policy | None = None
    ) -> dict[str, Any]: ...


class MockskillSession:
    """One test's session of a mockskill server.

    Send :attr:`headers` with every request (or at least
    ``Mockskill-Session: <name>``): sequences then start afresh for this
    test, and :meth:`journal` holds this test's requests and nobody else's.

    *checks* says which requests the check after the test reads: ``"session"``
    this session's, ``"server"`` every request (a server of the test's own),
    ``"local"`` this session's and those without a ``Mockskill-Session`` the
    server (this process's own, *replica* in its journal) took since.
    """

    def __init__(
        self,
        server: SessionServer,
        name: str,
        *,
        check: bool = True,
        checks: Checks = "session",
        replica: str | None = None,
        allow_unmatched: bool = False,
    ) -> None:
        self.server = server
        self.name = name
        self.check = check
        """Whether server-side problems of this session fail the test."""
        self.unmatched_allowed = allow_unmatched
        """Whether requests that matched nothing are meant (:meth:`allow_unmatched`)."""
        self._checks = checks
        self._replica = replica
        self._start = 0
        """The id of the last journal entry before this session (or its reset)."""
        if checks == "local":  # what the server took before this test is not its
            self._start = self._last_id()
        self._checked = self._start
        """The id of the last journal entry already checked."""

    @property
    def headers(self) -> dict[str, str]:
        """``{"Mockskill-Session": name}``, a fresh dict to add to."""
        return {SESSION_HEADER: self.name}

    @property
    def url(self) -> str:
        return self.server.url

    def skill_url(self, skill_id: str) -> str:
        return self.server.skill_url(skill_id)

    def invoke_url(self, skill_id: str) -> str:
        return self.server.invoke_url(skill_id)

    def journal(self) -> list[Entry]:
        """This session's requests, oldest first."""
        return self.server.journal(self.name)

    def requests(
        self,
        *,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """This session's requests, oldest first, each with what was sent (``target``,
        ``headers``, ``body``): those of *skill*, *method*, *path*; the newest *limit*."""
        return self.server.requests(self.name, skill=skill, method=method, path=path, limit=limit)

    def verify(
        self,
        when: Mapping[str, Any] | None = None,
        *,
        skill: str | None = None,
        method: str | None = None,
        path: str | None = None,
        count: int | None = None,
        at_least: int | None = None,
        at_most: int | None = None,
    ) -> list[Entry]:
        """Fail the test unless this session sent the requests named (docs/pytest.md):
        *when* as a case's ``when:``, *count* exactly or *at_least*/*at_most* (at least 1
        by default). The failure shows the closest requests and what each failed; the
        matching entries are returned."""
        __tracebackhide__ = True  # the failure points at the test's line
        return self.server.verify(
            when,
            session=self.name,
            skill=skill,
            method=method,
            path=path,
            count=count,
            at_least=at_least,
            at_most=at_most,
        )

    @property
    def ca_bundle(self) -> str | None:
        """The CA certificate file of a server that serves HTTPS (``--mockskill-tls``), for
        ``verify=``; None otherwise."""
        return getattr(self.server, "ca_bundle", None)

    def reset(self) -> None:
        """Start this session afresh: positions, random draws and journal entries (what the
        check reads: the requests before do not count either)."""
        self.server.reset(self.name)
        self._start = self._checked = max(self._checked, self._last_id())

    def allow_unmatched(self) -> None:
        """Requests that match nothing do not fail this test: it means them (a consumer's
        handling of ``SKILL_NOT_FOUND``, say). Refusals (``MOCKSKILL_*``) still do."""
        self.unmatched_allowed = True

    def report(self, policy: audit.Policy | None = None) -> dict[str, Any]:
        """This session's retry audit and category coverage (docs/audit.md)."""
        return self.server.report(self.name, policy)

    def assert_clean_audit(
        self,
        *,
        require_coverage: bool | Iterable[str] = False,
        policy: audit.Policy | None = None,
    ) -> dict[str, Any]:
        """Fail unless this session's consumer retried as the protocol asks; the report if so.

        The failure names every finding: the rule, the attempts with their
        timings, what was expected and how to fix it. *require_coverage*:
        also require every category and transport fault (True), or those
        named, to have been met. A session without a request fails too.
        """
        __tracebackhide__ = True  # the failure points at the test's line
        report = self.report(policy)
        audit.assert_clean(report, require_coverage=require_coverage)
        return report

    def expect(self, path: str, **conditions: Any) -> Expectation:
        """Expect a request on this test's server, answered as a ``respond_with_*`` says
        (:meth:`mockskill.Server.expect`); one never met fails the test; cleared after it."""
        return self._expectations().expect(path, **conditions)

    def expect_request(self, path: str, **conditions: Any) -> Expectation:
        """pytest-httpserver's name for :meth:`expect`."""
        return self._expectations().expect(path, **conditions)

    def expect_oneshot_request(self, path: str, **conditions: Any) -> Expectation:
        """:meth:`expect` with ``once=True``: one request only."""
        return self._expectations().expect(path, once=True, **conditions)

    def expect_ordered_request(self, path: str, **conditions: Any) -> Expectation:
        """:meth:`expect` with ``ordered=True``: once, after the ordered ones before it."""
        return self._expectations().expect(path, ordered=True, **conditions)

    def check_expectations(self) -> None:
        """Raise AssertionError, with near misses, if an expectation was not met as asked
        (the plugin calls it after the test too); pytest-httpserver: ``check_assertions``."""
        __tracebackhide__ = True
        self._expectations().check()

    check_assertions = check_expectations

    def _expectations(self) -> Expectations:
        expectations: Expectations | None = getattr(self.server, "expectations", None)
        if expectations is None:
            raise TypeError(
                f"expectations need a mockskill.Server of this process, not {self.server!r} "
                "(a server running elsewhere serves its own scenarios: script them there)"
            )
        return expectations

    def problems(self) -> list[Entry]:
        """The entries that fail the test (of those the check reads): nothing matched (but
        when :meth:`allow_unmatched`), or mockskill refused."""
        return [e for e in self._checked_entries() if e.id > self._start and self._fails(e)]

    def _fails(self, entry: Entry) -> bool:
        if self.unmatched_allowed and entry.endpoint == "unmatched":
            return False
        return is_problem(entry)

    def _checked_entries(self) -> list[Entry]:
        """The journal entries the check reads (see the class), oldest first."""
        if self._checks == "server":
            return self.server.journal()
        entries = list(self.journal())
        if self._checks == "local":
            replica = self._replica  # (a shared store's journal holds other servers' too)
            strays = self.server.journal(DEFAULT_SESSION)
            entries += [e for e in strays if e.replica == replica and e.id > self._start]
            entries.sort(key=lambda e: e.id)
        return entries

    def _last_id(self) -> int:
        return max((e.id for e in self._checked_entries()), default=0)

    def _unchecked_problems(self) -> list[Entry]:
        entries = [e for e in self._checked_entries() if e.id > self._checked]
        if entries:
            self._checked = max(self._checked, entries[-1].id)
        return [e for e in entries if self._fails(e)] if self.check else []

    def __repr__(self) -> str:
        return f"<MockskillSession {self.name!r} at {self.url}>"


def is_problem(entry: Entry) -> bool:
    """Whether a request went wrong on the server's side (not a scripted error)."""
    return entry.endpoint == "unmatched" or (entry.error_code or "").startswith("MOCKSKILL_")


ALLOW_UNMATCHED = (
    "  (a request the test means to match nothing, to test SKILL_NOT_FOUND handling say?"
    " call mockskill.allow_unmatched() in the test, or mark it"
    " @pytest.mark.mockskill(allow_unmatched=True))"
)
"""The way out a failure names when a request matched nothing."""


def format_problems(entries: Sequence[Entry], session: str) -> str:
    """A readable list of problem entries, with near misses for unmatched requests (and
    the session of those not of *session*), and how to say an unmatched one is meant."""
    noun = "request" if len(entries) == 1 else "requests"
    lines = [f"mockskill: {len(entries)} {noun} of session {session!r} went wrong:"]
    for entry in entries:
        if entry.session == session:
            whose = ""
        elif entry.session == DEFAULT_SESSION:
            whose = ", sent without a Mockskill-Session header"
        else:
            whose = f", of session {entry.session!r}"
        if entry.endpoint == "unmatched":
            lines.append(f"  {entry.method} {entry.path} matched nothing ({entry.status}){whose}")
            for miss in entry.near_misses:
                reasons = "; ".join(str(r) for r in miss.get("reasons", ()))
                lines.append(f"    near miss {miss.get('route')}: {reasons}")
        else:
            lines.append(
                f"  {entry.method} {entry.path} was answered {entry.status}"
                f" {entry.error_code}{whose}"
            )
    if any(entry.endpoint == "unmatched" for entry in entries):
        lines.append(ALLOW_UNMATCHED)
    return "\n".join(lines)


def session_name(nodeid: str) -> str:
    """A session name for a test: its node id in URL-safe characters, and a unique suffix."""
    readable = re.sub(r"[^A-Za-z0-9._~-]+", "-", nodeid).strip("-")[-_MAX_NAME:].lstrip("-")
    return f"{readable or 'test'}-{uuid.uuid4().hex[:8]}"


def load_scenarios(items: Iterable[str | Path], base: Path, label: str) -> ScenarioSet:
    """Paths (relative to *base*) and YAML texts (with a newline) as one checked set.

    Raises :class:`ScenarioError` listing every problem of every item.
    """
    resolved: list[str | Path] = []
    for item in items:
        if isinstance(item, str) and "\n" in item:
            resolved.append(item)
            continue
        path = Path(item)
        if not path.is_absolute() and base != Path.cwd():
            path = base / path  # else as given, so that problems name it as given
        resolved.append(path)
    return load_any(resolved, name=label)


class AuditLog:
    """The audit of the sessions a run's servers served, for ``--mockskill-junit``.

    A test's session is added when the test ends (a marker's server stops then), the
    other sessions of the run's own server when it stops; an xdist worker sends its
    sessions to the controller, which writes them all in one file. Sessions are told
    apart by server and name (two workers' servers each have a ``default``). Sessions
    that made no request are left out: no server served them (a test that takes the
    fixture and sends nothing is no failure of the audit's).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sessions: dict[tuple[str, str], dict[str, Any]] = {}
        """Each session's report, by the URL of its server and its name."""

    def add(self, server: str, report: Mapping[str, Any], *, replace: bool = True) -> None:
        """The sessions of *report* (``GET /__admin/report``'s, of the server at *server*)
        that made a request; *replace*: over what was added of them before (else it stays)."""
        for session in report["sessions"]:
            key = (server, session["session"])
            if session["requests"] and (replace or key not in self.sessions):
                self.sessions[key] = session

    def sent(self) -> str:
        """What an xdist worker sends its controller (:meth:`receive` reads it)."""
        return json.dumps([[server, name, s] for (server, name), s in self.sessions.items()])

    def receive(self, sent: str) -> None:
        for server, name, session in json.loads(sent):
            self.sessions[(server, name)] = session

    def report(self) -> dict[str, Any]:
        """The sessions added, as one report."""
        sessions = list(self.sessions.values())
        return {
            "clean": bool(sessions) and all(s["clean"] for s in sessions),
            "generated": time.time(),
            "policy": audit.Policy().as_json(),
            "sessions": sessions,
        }

    def write(self) -> None:
        from .audit.formats.junit import junit  # (only a run that asks for it pays for it)

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(junit(self.report()) + "\n", encoding="utf-8")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mockskill", "mockskill (a scripted skill provider)")
    group.addoption(
        "--mockskill-scenarios",
        action="append",
        dest="mockskill_scenarios",
        metavar="PATH",
        default=None,
        help="scenario file or folder for the mockskill_server fixture (repeatable; "
        "default: the ini setting mockskill_scenarios, else the bundled scenarios)",
    )
    group.addoption(
        "--mockskill-url",
        dest="mockskill_url",
        metavar="URL",
        default=None,
        help=f"use the mockskill server already running at URL instead of starting one "
        f"(default: the environment variable {URL_ENV}); its own scenarios are served",
    )
    group.addoption(
        "--mockskill-admin-token",
        dest="mockskill_admin_token",
        metavar="TOKEN",
        default=None,
        help=f"the admin token of the server at --mockskill-url (default: {TOKEN_ENV})",
    )
    group.addoption(
        "--mockskill-state",
        dest="mockskill_state",
        metavar="URL",
        default=None,
        help=f"where the mockskill_server fixture keeps sequences, tokens and the journal: "
        f"memory, or redis://HOST:PORT/DB shared with other servers (default: "
        f"{STATE_ENV}, else the ini setting mockskill_state, else memory); a marker's own "
        f"server keeps its state in memory",
    )
    group.addoption(
        "--mockskill-tls",
        dest="mockskill_tls",
        action="store_true",
        default=None,
        help="the mockskill fixtures' servers serve HTTPS, with a certificate from a local CA "
        "(mockskill_server.ca_bundle, mockskill.ca_bundle: pass it as verify=); default: the "
        "ini setting mockskill_tls",
    )
    group.addoption(
        "--mockskill-junit",
        dest="mockskill_junit",
        metavar="PATH",
        default=None,
        help="write the retry audit of every session the run's mockskill servers served, "
        "as JUnit XML, to PATH at the end of the run (a session a test suite, a retry chain "
        "or a task a test case, a finding a failure; docs/pytest.md)",
    )
    parser.addini(
        "mockskill_tls",
        type="bool",
        default=False,
        help="the mockskill fixtures' servers serve HTTPS (see --mockskill-tls)",
    )
    parser.addini(
        "mockskill_scenarios",
        type="linelist",
        default=[],
        help="scenario files or folders (relative to rootdir) for the mockskill_server fixture",
    )
    parser.addini(
        "mockskill_state",
        default="",
        help="the mockskill_server fixture's state store: memory, or redis://HOST:PORT/DB",
    )
    parser.addini(
        "mockskill_journal_bodies",
        type="bool",
        default=True,
        help="the fixtures' servers keep each request's target, headers and body in the "
        "journal (credentials masked); false keeps the body's digest alone",
    )
    parser.addini(
        "mockskill_journal_body_limit",
        default=str(DEFAULT_BODY_LIMIT),
        help="the most bytes of a request body a journal entry keeps (the rest is cut)",
    )
    parser.addini(
        "mockskill_redact",
        type="linelist",
        default=[],
        help="names of headers, query parameters, form fields or JSON keys whose values the "
        "journal masks too, besides the built-in credentials",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mockskill(scenarios=[...], check=True, allow_unmatched=False): serve this test from "
        "a server of its own on these scenarios (paths relative to the test file, or YAML "
        "text); check=False: server-side problems do not fail the test; "
        "allow_unmatched=True: requests that match nothing do not",
    )
    # The state URL and configured scenarios are checked now, so that a bad one
    # stops the run at once with its problem report (and not once per test).
    config.stash[_state_key] = state_url(config)
    junit_path: str | None = config.getoption("mockskill_junit", None)
    if junit_path:
        config.stash[_audit_key] = AuditLog(config.invocation_params.dir / junit_path)
    given: list[str] | None = config.getoption("mockskill_scenarios", None)
    if given:
        base, items, label = config.invocation_params.dir, given, "--mockskill-scenarios"
    else:
        base, items = config.rootpath, config.getini("mockskill_scenarios")
        label = "mockskill_scenarios (ini)"
    if not items:
        config.stash[_scenarios_key] = None
        return
    try:
        config.stash[_scenarios_key] = load_scenarios(items, base, label)
    except ScenarioError as exc:
        raise pytest.UsageError(f"{label}: the scenarios cannot be served:\n{exc}") from None


def state_url(config: pytest.Config) -> str:
    """The fixture server's store: ``--mockskill-state``, MOCKSKILL_STATE, the ini setting.

    Checked (:func:`mockskill.store.url.checked`): a URL no store can use
    stops the run with what is wrong (its password masked).
    """
    given = (
        config.getoption("mockskill_state", None)
        or os.environ.get(STATE_ENV)
        or config.getini("mockskill_state")
        or MEMORY
    )
    try:
        return checked(given)
    except BadStoreURL as exc:
        raise pytest.UsageError(f"mockskill: {exc}") from None


def tls_wanted(config: pytest.Config) -> bool:
    """Whether the fixtures' servers serve HTTPS: ``--mockskill-tls``, else the ini setting."""
    given = config.getoption("mockskill_tls", None)
    return bool(given) if given is not None else bool(config.getini("mockskill_tls"))


def journal_options(config: pytest.Config) -> dict[str, Any]:
    """The fixtures' servers' journal settings (``Server`` arguments), from the ini file."""
    limit = str(config.getini("mockskill_journal_body_limit")).strip()
    if not limit.isdigit():
        raise pytest.UsageError(
            f"mockskill_journal_body_limit (ini): a number of bytes (0 or more), not {limit!r}"
        )
    return {
        "journal_bodies": bool(config.getini("mockskill_journal_bodies")),
        "journal_body_limit": int(limit),
        "redact": tuple(config.getini("mockskill_redact")),
    }


def remote_server(config: pytest.Config) -> RemoteServer | None:
    """The server of ``--mockskill-url`` (else ``MOCKSKILL_URL``), checked; None if neither.

    Fails the test asking for it when the server cannot be used, naming the
    URL and why.
    """
    url = config.getoption("mockskill_url", None) or os.environ.get(URL_ENV) or None
    if url is None:
        return None
    token = config.getoption("mockskill_admin_token", None) or os.environ.get(TOKEN_ENV) or None
    try:
        remote = RemoteServer(url, admin_token=token)
        remote.health()
    except RemoteError as exc:
        message = f"mockskill: the server at {url} (--mockskill-url or {URL_ENV}) cannot be used: "
        message += str(exc)
        if exc.token_refused:
            message += f"; check --mockskill-admin-token or {TOKEN_ENV}"
        elif exc.status == 401:
            message += f"; give it with --mockskill-admin-token or {TOKEN_ENV}"
        failure = message
    else:
        return remote
    pytest.fail(failure, pytrace=False)  # outside the handler: no "during handling" chain


@pytest.fixture(scope="session")
def mockskill_server(
    pytestconfig: pytest.Config,
) -> Generator[Server | RemoteServer, None, None]:
    """One mockskill server for the run: the configured scenarios, else the bundled ones.

    With ``--mockskill-url`` (or ``MOCKSKILL_URL``): the server running
    there, as a :class:`~mockskill.server.remote.RemoteServer`; nothing is started.
    """
    remote = remote_server(pytestconfig)
    if remote is not None:
        yield remote
        return
    scenarios = pytestconfig.stash.get(_scenarios_key, None)
    state = pytestconfig.stash.get(_state_key, MEMORY)
    try:
        server = Server(
            scenarios if scenarios is not None else load_paths([bundled_path()]),
            state=state if is_shared(state) else None,
            tls=tls_wanted(pytestconfig),
            **journal_options(pytestconfig),
        )
    except ServerError as exc:  # the store cannot be reached: said once, plainly
        failure = f"mockskill: the mockskill_server fixture cannot start: {exc}"
    else:
        failure = ""
    if failure:
        pytest.fail(failure, pytrace=False)
    server.start()
    try:
        yield server
    finally:
        log = pytestconfig.stash.get(_audit_key, None)
        if log is not None and not is_shared(state):
            # Its other sessions (requests sent with a session of a test's own naming, or
            # none): a shared store's journal holds other servers' sessions too.
            log.add(server.url, server.report(), replace=False)
        server.stop()


@pytest.fixture
def mockskill(request: pytest.FixtureRequest) -> Generator[MockskillSession, None, None]:
    """This test's own session of the shared server (or of its marker's own server)."""
    item = request.node
    marker = item.get_closest_marker("mockskill")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if marker is not None and (marker.args or unknown):
        pytest.fail(
            f"@pytest.mark.mockskill takes only keyword arguments {', '.join(MARKER_KEYS)}; "
            f"found {', '.join([repr(a) for a in marker.args] + unknown)}",
            pytrace=False,
        )
    own: Server | None = None
    server: SessionServer
    checks: Checks
    replica: str | None = None
    if kwargs.get("scenarios") is not None:
        items = kwargs["scenarios"]
        if isinstance(items, (str, Path)):
            items = [items]
        try:
            own = Server(
                load_scenarios(items, item.path.parent, "mark.mockskill scenarios"),
                tls=tls_wanted(request.config),
                **journal_options(request.config),
            )
        except ScenarioError as exc:
            report = str(exc)  # failed outside the handler: no "during handling" chain
        else:
            report = ""
        if own is None:
            pytest.fail(
                f"@pytest.mark.mockskill: the scenarios cannot be served:\n{report}", pytrace=False
            )
        own.start()
        server = own
        checks = "server"  # every request it takes is this test's
    else:
        server = request.getfixturevalue("mockskill_server")
        if isinstance(server, Server):  # this process's: what it takes meanwhile is the test's
            checks, replica = "local", server.state.replica
        else:  # a server others use too: only the session is the test's for sure
            checks = "session"
    session = MockskillSession(
        server,
        session_name(item.nodeid),
        check=bool(kwargs.get("check", True)),
        checks=checks,
        replica=replica,
        allow_unmatched=bool(kwargs.get("allow_unmatched", False)),
    )
    item.stash[_session_key] = session
    try:
        yield session
        # Requests after the call (from other fixtures' teardown) are checked here.
        late = session._unchecked_problems()
        text = format_problems(late, session.name) if late else ""
        unmet = _unmet_expectations(server) if session.check else ""
        text = "\n".join(t for t in (text, unmet) if t)
        if text:
            reports = item.stash.get(_reports_key, {})
            if all(r.passed for r in reports.values()) and "call" in reports:
                pytest.fail(text, pytrace=False)
            item.add_report_section("teardown", "mockskill", text)
    finally:
        expectations: Expectations | None = getattr(server, "expectations", None)
        if expectations is not None:
            expectations.clear()  # the next test starts without this one's
        log = request.config.stash.get(_audit_key, None)
        try:
            if log is not None:
                log.add(server.url, server.report() if own is not None else session.report())
        finally:
            if own is not None:
                own.stop()


def _unmet_expectations(server: SessionServer) -> str:
    """What :meth:`MockskillSession.check_expectations` would raise ("" when it holds); the
    requests that matched nothing are failed by the check of problems already."""
    expectations: Expectations | None = getattr(server, "expectations", None)
    if expectations is None:
        return ""
    try:
        expectations.check(misses=False)
    except AssertionError as exc:
        return str(exc)
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_reports_key, {})[report.when] = report
    session = item.stash.get(_session_key, None)
    if session is None or report.when != "call":
        return report
    problems = session._unchecked_problems()
    if not problems:
        return report
    text = format_problems(problems, session.name)
    if report.passed and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = text
    else:  # the test's own outcome stands; the problems are shown beside it
        report.sections.append(("mockskill", text))
    return report


@pytest.hookimpl(trylast=True)  # after the run's server (a session fixture) has stopped
def pytest_sessionfinish(session: pytest.Session) -> None:
    log = session.config.stash.get(_audit_key, None)
    if log is None:
        return
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its controller writes the file
        workeroutput[_WORKER_AUDIT] = log.sent()
    else:
        log.write()


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run without xdist has no such hook
def pytest_testnodedown(node: Any, error: object) -> None:
    log = node.config.stash.get(_audit_key, None)
    sent = getattr(node, "workeroutput", {}).get(_WORKER_AUDIT)
    if log is not None and sent:
        log.receive(sent)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    log = config.stash.get(_audit_key, None)
    if log is not None and not hasattr(config, "workerinput"):
        n = len(log.sessions)
        terminalreporter.write_sep(
            "-", f"mockskill audit of {n} session{'' if n == 1 else 's'} (JUnit XML): {log.path}"
        )
