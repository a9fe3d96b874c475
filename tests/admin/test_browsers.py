"""What a web page may not make a browser do to /__admin: over the wire, then in Chromium.

A page on another origin can make its visitor's browser send requests to a
mockskill on that machine, and a page that rebinds its DNS name to 127.0.0.1
can read and write it "same-origin". The first half sends the requests such a
browser sends (with ``requests``, headers set by hand); the second drives a
real headless Chromium (Debian's, through Playwright, as tests/admin/test_dashboard.py
does): an attacker's page served by a second HTTP server on another port (another
origin), and a name mapped to 127.0.0.1 by Chromium's resolver (rebinding).
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import requests
from test_dashboard import CHROMIUM, CHROMIUM_FLAGS

from mockskill import Server
from mockskill.server.remote import RemoteServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

Serve = Callable[..., Server]
SCENARIO = "name: base\nskills: [{id: a}]\n"
EVIL = "http://evil.example"
REBOUND = "rebind.test"
"""A name Chromium resolves to 127.0.0.1 here, as a rebinding attacker's DNS would."""


def two_sessions(server: Server) -> None:
    for session in ("a", "b"):
        requests.post(server.invoke_url("a"), headers={"Mockskill-Session": session}, timeout=10)


def untouched(server: Server) -> bool:
    """Both sessions still journalled, and ``base`` alone loaded, active, as it was."""
    sessions = sorted({e.session for e in server.state.journal()})
    loaded = [(s.name, s.active) for s in server.scenarios]
    skills = [skill.id for skill in server.engine.scenarios.skills]
    return {"a", "b"} <= set(sessions) and loaded == [("base", True)] and skills == ["a"]


@pytest.fixture
def server(serve: Serve) -> Server:
    started = serve(SCENARIO)
    two_sessions(started)
    return started


# -- over the wire: Origin ---------------------------------------------------------------------


def test_a_request_from_another_origin_is_refused_with_403(server: Server) -> None:
    json_type = {"Content-Type": "application/json", "Origin": EVIL}
    write = requests.post(f"{server.url}/__admin/reset?all=true", headers=json_type, timeout=10)
    assert write.status_code == 403
    error = write.json()["error"]
    assert error["code"] == "MOCKSKILL_ADMIN_CROSS_ORIGIN"
    assert "--cors" in error["message"]
    read = requests.get(f"{server.url}/__admin/journal", headers={"Origin": EVIL}, timeout=10)
    assert read.status_code == 403
    null = requests.post(
        f"{server.url}/__admin/reset?all=true", headers={**json_type, "Origin": "null"}, timeout=10
    )
    assert null.status_code == 403  # a sandboxed frame, a file:// page
    assert untouched(server)


def test_the_servers_own_origin_is_served(server: Server) -> None:
    for origin in (f"http://127.0.0.1:{server.port}", f"HTTP://127.0.0.1:{server.port}"):
        headers = {"Content-Type": "application/json", "Origin": origin}
        reset = requests.post(f"{server.url}/__admin/reset?session=a", headers=headers, timeout=10)
        assert reset.status_code == 200, reset.text
    # The same name on another port, or another scheme, is another origin.
    for origin in (f"http://127.0.0.1:{server.port + 1}", f"https://127.0.0.1:{server.port}"):
        headers = {"Content-Type": "application/json", "Origin": origin}
        reset = requests.post(f"{server.url}/__admin/reset?all=true", headers=headers, timeout=10)
        assert reset.status_code == 403, origin


def test_with_cors_pages_of_any_origin_may_use_the_admin(serve: Serve) -> None:
    server = serve(SCENARIO, cors=True)
    headers = {"Content-Type": "application/json", "Origin": EVIL}
    reset = requests.post(f"{server.url}/__admin/reset?all=true", headers=headers, timeout=10)
    assert reset.status_code == 200
    assert reset.headers["Access-Control-Allow-Origin"] == "*"


# -- over the wire: Content-Type -------------------------------------------------------------

WRITES = [
    ("POST", "/reset?all=true", b""),
    ("POST", "/scenarios", b"name: evil\nskills: [{id: evil}]\n"),
    ("PUT", "/scenarios/base", b"skills: [{id: evil}]\n"),
    ("DELETE", "/scenarios/base", b""),
    ("POST", "/scenarios/base/deactivate", b""),
    ("POST", "/recordings/start", b'{"target": "http://127.0.0.1:9"}'),
    ("POST", "/validate", b"{}"),
]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_write_in_a_type_browsers_send_unasked_is_refused_with_415(
    server: Server, method: str, path: str, body: bytes, content_type: str
) -> None:
    """What a form, or a fetch without a preflight, can send cross-origin: even with no Origin."""
    headers = {"Content-Type": content_type}
    response = requests.request(
        method, f"{server.url}/__admin{path}", data=body, headers=headers, timeout=10
    )
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert error["code"] == "MOCKSKILL_UNSUPPORTED_MEDIA_TYPE"
    assert "Content-Type: application/json" in error["message"]
    assert untouched(server)
    assert not server.recording.status()["recording"]


def test_a_write_without_a_type_is_refused_from_a_browser(server: Server) -> None:
    """A browser sends Origin with every POST (the Fetch standard), its own origin's too."""
    own = {"Origin": f"http://127.0.0.1:{server.port}"}
    bare = requests.post(f"{server.url}/__admin/reset?all=true", headers=own, timeout=10)
    assert bare.status_code == 415
    typed = {**own, "Content-Type": "application/json"}
    assert requests.post(f"{server.url}/__admin/reset?session=a", headers=typed, timeout=10).ok


def test_tools_that_send_no_type_and_no_origin_still_work(server: Server) -> None:
    """curl -X POST, urllib (mockskill's own RemoteServer), requests without a body."""
    assert requests.post(f"{server.url}/__admin/reset?session=a", timeout=10).status_code == 200
    RemoteServer(server.url).reset("b")
    assert server.state.journal() == []
    two_sessions(server)
    RemoteServer(server.url).reset()
    assert server.state.journal() == []
    curl = shutil.which("curl")
    if curl is not None:
        two_sessions(server)
        answered = subprocess.run(
            [curl, "-s", "-X", "POST", f"{server.url}/__admin/reset?all=true"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        assert answered.stdout == '{"reset": "all", "session": null}'
    # A body in a type of its own is read, as before.
    loaded = requests.post(
        f"{server.url}/__admin/scenarios",
        data="name: more\nskills: [{id: more}]\n",
        headers={"Content-Type": "application/yaml"},
        timeout=10,
    )
    assert loaded.status_code == 201


def test_reads_need_no_type(server: Server) -> None:
    assert requests.get(f"{server.url}/__admin/journal", timeout=10).status_code == 200


# -- over the wire: Host (DNS rebinding) ---------------------------------------------------


def test_a_loopback_server_answers_its_admin_only_to_loopback_names(server: Server) -> None:
    port = server.port
    for host in ("localhost", "127.0.0.1", "127.1.2.3", "[::1]", "app.localhost", "LOCALHOST."):
        headers = {"Host": f"{host}:{port}"}
        response = requests.get(f"{server.url}/__admin/health", headers=headers, timeout=10)
        assert response.status_code == 200, host
    for host in (REBOUND, "127.0.0.1.evil.example", "0.0.0.0"):
        headers = {"Host": f"{host}:{port}", "Content-Type": "application/json"}
        reset = requests.post(f"{server.url}/__admin/reset?all=true", headers=headers, timeout=10)
        assert reset.status_code == 403, host
        error = reset.json()["error"]
        assert error["code"] == "MOCKSKILL_ADMIN_HOST_REFUSED"
        assert f"--allow-host {host}" in error["message"]
    assert untouched(server)
    # The skill surface answers any name: it is what the mock is for.
    skill = requests.post(server.invoke_url("a"), headers={"Host": REBOUND}, timeout=10)
    assert skill.status_code == 200


def test_allowed_host_names_are_answered(serve: Serve) -> None:
    named = serve(SCENARIO, allow_hosts=["Mock.Test"])
    for host, status in (("mock.test", 200), ("other.test", 403)):
        headers = {"Host": f"{host}:{named.port}"}
        response = requests.get(f"{named.url}/__admin/health", headers=headers, timeout=10)
        assert response.status_code == status, host
    anything = serve(SCENARIO, allow_hosts=["*"])
    response = requests.get(
        f"{anything.url}/__admin/health", headers={"Host": "other.test"}, timeout=10
    )
    assert response.status_code == 200


def test_a_server_on_another_address_leaves_host_names_to_its_token(serve: Serve) -> None:
    """Reached by a name of the network (a container's service name), guarded by its token."""
    exposed = serve(SCENARIO, host="0.0.0.0", admin_token="t0ken")
    headers = {"Host": "mockskill:8080", "Authorization": "Bearer t0ken"}
    response = requests.get(f"{exposed.url}/__admin/health", headers=headers, timeout=10)
    assert response.status_code == 200


# -- in Chromium -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.isfile(CHROMIUM):
        if os.environ.get("MOCKSKILL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MOCKSKILL_REQUIRE_BROWSER=1 but no chromium at {CHROMIUM}")
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # The rebinding attacker's DNS, played by Chromium's resolver.
    flags = [*CHROMIUM_FLAGS, f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"]
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=flags)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


class _Attacker(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>not mockskill</title><iframe name=sink></iframe>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def attacker() -> Iterator[str]:
    """The URL of a page on another origin: a second HTTP server, on another port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    # shutdown() returns once serve_forever() next looks up: soon, not its default half second.
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


# Each is what a page can make its visitor's browser send to a URL of its choice. ADMIN is
# the mockskill's /__admin; each script ends once the request is sent (or refused).
FROM_ANOTHER_ORIGIN = {
    "a bodiless POST": "fetch(ADMIN + '/reset?all=true', {method: 'POST', mode: 'no-cors'})",
    "a text/plain JSON body": (
        "fetch(ADMIN + '/reset', {method: 'POST', mode: 'no-cors',"
        " headers: {'Content-Type': 'text/plain'}, body: '{\"all\": true}'})"
    ),
    "a text/plain scenario": (
        "fetch(ADMIN + '/scenarios', {method: 'POST', mode: 'no-cors',"
        " body: 'name: evil\\nskills: [{id: evil}]\\n'})"
    ),
    "a body without a type": (
        "fetch(ADMIN + '/scenarios', {method: 'POST', mode: 'no-cors',"
        " body: new Blob(['name: evil\\nskills: [{id: evil}]\\n'])})"
    ),
    "a JSON body, after a preflight": (
        "fetch(ADMIN + '/reset', {method: 'POST', headers: {'Content-Type':"
        " 'application/json'}, body: '{\"all\": true}'}).catch(() => null)"
    ),
    "a form": (
        "new Promise((done) => { const sink = document.querySelector('iframe');"
        " sink.onload = done; const form = document.createElement('form');"
        " form.method = 'post'; form.target = 'sink'; form.enctype = 'text/plain';"
        " form.action = ADMIN + '/reset?all=true'; document.body.append(form);"
        " form.submit(); })"
    ),
}


@pytest.mark.parametrize("script", FROM_ANOTHER_ORIGIN.values(), ids=list(FROM_ANOTHER_ORIGIN))
def test_a_page_on_another_origin_changes_nothing(
    server: Server, page: Page, attacker: str, script: str
) -> None:
    page.goto(attacker)
    page.evaluate(f"async (ADMIN) => {{ await {script}; }}", f"{server.url}/__admin")
    assert untouched(server)


def test_a_page_of_an_origin_cors_names_may_use_the_admin(
    serve: Serve, page: Page, attacker: str
) -> None:
    """--cors-origin ORIGIN: the browser's preflight is answered, and the answer is readable."""
    named = serve(SCENARIO, cors=[attacker])
    two_sessions(named)
    page.goto(attacker)
    status = page.evaluate(
        "async (ADMIN) => (await fetch(ADMIN + '/reset?session=a', {method: 'POST',"
        " headers: {'Content-Type': 'application/json'}})).status",
        f"{named.url}/__admin",
    )
    assert status == 200
    assert sorted({e.session for e in named.state.journal()}) == ["b"]


def test_the_dashboards_own_origin_still_writes(server: Server, page: Page) -> None:
    page.goto(f"{server.url}/__admin/")
    page.get_by_text("base").first.wait_for()
    status = page.evaluate(
        "async () => (await fetch('/__admin/reset?session=a', {method: 'POST',"
        " headers: {'Content-Type': 'application/json'}})).status"
    )
    assert status == 200
    assert sorted({e.session for e in server.state.journal()}) == ["b"]


REBOUND_SCRIPT = """async () => {
    const reset = await fetch('/__admin/reset?all=true', {method: 'POST',
        headers: {'Content-Type': 'application/json'}});
    const journal = await fetch('/__admin/journal');
    return [reset.status, journal.status];
}"""


def test_a_rebound_name_cannot_reach_the_admin(server: Server, page: Page) -> None:
    """The page's origin is rebind.test, which now points at 127.0.0.1: same-origin requests."""
    page.goto(f"http://{REBOUND}:{server.port}/skills")
    assert page.evaluate(REBOUND_SCRIPT) == [403, 403]
    assert untouched(server)


def test_a_name_the_user_allows_reaches_the_admin(serve: Serve, page: Page) -> None:
    allowed = serve(SCENARIO, allow_hosts=[REBOUND])
    two_sessions(allowed)
    page.goto(f"http://{REBOUND}:{allowed.port}/skills")
    assert page.evaluate(REBOUND_SCRIPT) == [200, 200]
    # Everything before the reset is gone; Chromium may ask for /favicon.ico after it.
    assert [e.path for e in allowed.state.journal()] in ([], ["/favicon.ico"])
