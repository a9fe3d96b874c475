"""The dashboard at /__admin/: its files over HTTP, and the page in a real headless Chromium.

The browser is Debian's chromium (``/usr/bin/chromium``, or ``MOCKSKILL_CHROMIUM``) driven
by Playwright; no browser is downloaded. Without it the browser tests skip, unless
``MOCKSKILL_REQUIRE_BROWSER=1`` (CI) makes that a failure. The page's screenshot is saved
to ``test-artifacts/dashboard.png`` (the folder: ``MOCKSKILL_ARTIFACTS``).
"""

from __future__ import annotations

import itertools
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from mockskill import Server
from mockskill.admin.dashboard import ASSETS, LINKED
from mockskill.engine.entries import Entry
from mockskill.protocol.catalog import Retry

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("MOCKSKILL_CHROMIUM", "/usr/bin/chromium")
# Flags for a closed network and a shared machine: no sandbox (containers), no GPU, and
# none of the background traffic (updates, sync, QUIC probes) that would only time out.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DELAY_MS = 200
"""The retry advice of the scenario below: short, so that a correct retry is quick."""
RETRYING = f"""
name: retry-demo
description: Unreachable twice, then answers.
skills:
  - id: flaky
    invoke:
      - error: ENDPOINT_UNREACHABLE
        times: 2
        retry: {{suggested_delay_ms: {DELAY_MS}}}
      - json: {{result: ok}}
  - id: echo
"""
TOKEN = "dashboard-token"
WAIT_MS = 8000
"""How long the page may take to show something (it polls every second; the machine is shared)."""


def artifacts() -> Path:
    folder = Path(os.environ.get("MOCKSKILL_ARTIFACTS", ROOT / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# -- the files, over HTTP --------------------------------------------------------------------


def test_the_page_and_its_files_are_served_with_their_types(bundled: Server) -> None:
    page = requests.get(f"{bundled.url}/__admin/", timeout=10)
    assert page.status_code == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    linked = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert set(linked) == {"data:,", "dashboard/dashboard.css", "dashboard/dashboard.js"}
    for name in LINKED:
        content_type = ASSETS[name]
        response = requests.get(f"{bundled.url}/__admin/dashboard/{name}", timeout=10)
        assert response.status_code == 200, name
        assert response.headers["Content-Type"] == content_type
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["Cache-Control"] == "no-cache"
        again = requests.get(
            f"{bundled.url}/__admin/dashboard/{name}",
            headers={"If-None-Match": response.headers["ETag"]},
            timeout=10,
        )
        assert again.status_code == 304
        assert again.content == b""


def test_nothing_is_fetched_from_elsewhere(bundled: Server) -> None:
    """No CDN, no web font: the only absolute URL in the files is the SVG namespace."""
    for path in ("", *(f"dashboard/{name}" for name in LINKED)):
        text = requests.get(f"{bundled.url}/__admin/{path}", timeout=10).text
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"')]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (path, urls)
        assert "@import" not in text
        assert "@font-face" not in text


def test_the_bare_prefix_redirects_to_the_page(bundled: Server) -> None:
    response = requests.get(f"{bundled.url}/__admin", allow_redirects=False, timeout=10)
    assert response.status_code == 308
    assert response.headers["Location"].endswith("/__admin/")


def test_an_unknown_file_is_a_404_naming_the_files(bundled: Server) -> None:
    for name in ("app.js", "index.html"):  # the page is at /__admin/ only
        response = requests.get(f"{bundled.url}/__admin/dashboard/{name}", timeout=10)
        assert response.status_code == 404
        error = response.json()["error"]
        assert f"{name!r}" in error["message"]
        assert error["details"]["expected"] == ["dashboard.js", "dashboard.css"]


# -- the page, in Chromium -------------------------------------------------------------------


def _no_browser() -> str | None:
    if not Path(CHROMIUM).is_file():
        return f"no chromium at {CHROMIUM} (apt-get install chromium, or set MOCKSKILL_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = _no_browser()
    if reason is not None:
        if os.environ.get("MOCKSKILL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MOCKSKILL_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


class Console:
    """What the page said on its console, and the errors it threw."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._message)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _message(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


def invoke(server: Server, skill: str, session: str) -> int:
    headers = {"Mockskill-Session": session}
    return requests.post(server.invoke_url(skill), headers=headers, timeout=10).status_code


def retry_too_soon_then_right(server: Server, session: str) -> None:
    """A consumer's retries: the first one far too soon, the second after the backoff."""
    assert invoke(server, "flaky", session) == 503
    assert invoke(server, "flaky", session) == 503  # at once: the protocol asked 200 ms
    time.sleep(3 * DELAY_MS / 1000)  # 600 ms: more than the 400 ms owed before the 2nd retry
    assert invoke(server, "flaky", session) == 200


def marks(page: Page, selector: str) -> list[dict[str, Any]]:
    """Each SVG element *selector* matches in the timeline: its class and geometry."""
    found: list[dict[str, Any]] = page.eval_on_selector_all(
        f"#timeline {selector}",
        """nodes => nodes.map(n => ({
            cls: n.getAttribute("class"), id: n.dataset.id || n.dataset.for,
            x: Number(n.getAttribute("cx") || n.getAttribute("x1")),
        }))""",
    )
    return found


def test_the_page_shows_scenarios_journal_and_a_sessions_timeline(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    retry_too_soon_then_right(server, session)
    console = Console(page)

    page.goto(f"{server.url}/__admin")
    assert page.url == f"{server.url}/__admin/"
    page.wait_for_selector("#scenarios li:has-text('retry-demo')")
    page.wait_for_selector("#status.live")
    rows = page.locator(f"#journal tbody tr[data-session='{session}']")
    page.wait_for_function("n => document.querySelectorAll('#journal tbody tr').length >= n", arg=3)
    assert rows.count() == 3

    page.click(f"#sessions li[data-session='{session}']")
    assert page.url.endswith(f"#session={session}")
    page.wait_for_selector("#timeline circle.attempt")
    attempts = marks(page, "circle.attempt")
    journal_ids = [str(entry.id) for entry in server.journal(session)]
    assert [mark["id"] for mark in attempts] == journal_ids  # one mark per attempt, in order
    xs = [mark["x"] for mark in attempts]
    assert xs == sorted(xs)
    expected = marks(page, "line.expected")
    assert [mark["id"] for mark in expected] == journal_ids[1:]  # one per retry
    # The first retry came before the earliest time the protocol allows; the second after.
    assert attempts[1]["x"] < expected[0]["x"]
    assert attempts[2]["x"] > expected[1]["x"]
    # The too-soon retry is marked, and the finding says why.
    flagged = [mark["id"] for mark in attempts if "finding" in mark["cls"].split()]
    assert journal_ids[1] in flagged
    assert journal_ids[2] not in flagged
    finding = page.locator("#findings li[data-rule='retry-too-soon']")
    assert finding.count() == 1
    assert "retry-too-soon" in finding.inner_text()
    coverage = page.locator("#coverage .chip[data-name='ENDPOINT_UNREACHABLE'] b")
    assert coverage.inner_text() == "2"
    assert page.locator("#coverage .chip").count() >= 7

    # Live: requests made after the page loaded appear without a reload.
    later = f"dash-later-{uuid.uuid4().hex[:8]}"
    assert invoke(server, "echo", later) == 200
    assert invoke(server, "flaky", session) == 200
    page.wait_for_selector(f"#journal tbody tr[data-session='{later}']")
    page.wait_for_selector(f"#sessions li[data-session='{later}'] .badge.good")  # the audit's
    page.wait_for_function(
        "n => document.querySelectorAll('#timeline circle.attempt').length === n", arg=4
    )
    assert rows.count() == 4

    page.screenshot(path=str(artifacts() / "dashboard.png"), full_page=True)
    assert console.errors == []


def test_with_an_admin_token_the_page_asks_for_it(serve: Callable[..., Server], page: Page) -> None:
    server = serve(RETRYING, admin_token=TOKEN)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    assert invoke(server, "echo", session) == 200
    console = Console(page)

    page.goto(f"{server.url}/__admin/")
    page.wait_for_selector("#token-dialog:not([hidden])")
    assert page.locator("#journal tbody tr").count() == 0  # nothing was read without it
    page.fill("#token", "not-the-token")
    page.click("#token-form button")
    page.wait_for_selector("#token-error:not([hidden])")
    assert "refused" in page.inner_text("#token-error")
    assert page.evaluate("sessionStorage.getItem('mockskill-admin-token')") is None

    page.fill("#token", TOKEN)
    page.click("#token-form button")
    page.wait_for_selector("#token-dialog", state="hidden")
    page.wait_for_selector(f"#journal tbody tr[data-session='{session}']")
    page.wait_for_selector("#scenarios li:has-text('retry-demo')")
    assert page.evaluate("sessionStorage.getItem('mockskill-admin-token')") == TOKEN

    # The 401s that made the page ask are the only errors it logged.
    assert console.errors
    assert all("status of 401" in error for error in console.errors), console.errors


def test_the_journal_names_the_replica_only_when_more_than_one_served(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    alone = f"dash-{uuid.uuid4().hex[:8]}"
    assert invoke(server, "echo", alone) == 200
    console = Console(page)

    page.goto(f"{server.url}/__admin/")
    page.wait_for_selector(f"#journal tbody tr[data-session='{alone}']")
    assert not page.locator("#journal th.replica").is_visible()  # one server: no column
    assert not page.locator(f"#journal tr[data-session='{alone}'] td.replica").is_visible()

    # Entries as a journal shared by two replicas holds them (--state redis://...).
    shared = f"dash-shared-{uuid.uuid4().hex[:8]}"
    for replica in ("replica-a:101", "replica-b:202"):
        now = time.time()
        server.state.record(
            Entry(server.state.next_id(), now, now + 0.002, shared, "POST",
                  "/skills/echo/invoke", 200, "invoke", skill="echo", replica=replica)
        )  # fmt: skip
    page.wait_for_selector("#journal.replicas th.replica")
    assert page.locator("#journal th.replica").is_visible()
    cells = page.locator(f"#journal tbody tr[data-session='{shared}'] td.replica")
    assert cells.all_inner_texts() == ["replica-b:202", "replica-a:101"]  # newest first
    assert page.locator(f"#journal tr[data-session='{alone}'] td.replica").inner_text() == ""
    assert console.errors == []


STUBBORN = """
name: stubborn-demo
skills:
  - id: stubborn
    invoke:
      - error: ENDPOINT_UNREACHABLE
        times: 5
        retry: {suggested_delay_ms: 150}
      - json: {result: ok}
  - id: echo
"""


def overlaps(boxes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The pairs of *boxes* (``{text, x, y, width, height}``) whose areas intersect."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if (
                a["x"] < b["x"] + b["width"]
                and b["x"] < a["x"] + a["width"]
                and a["y"] < b["y"] + b["height"]
                and b["y"] < a["y"] + a["height"]
            ):
                found.append((a["text"], b["text"]))
    return found


def test_single_attempts_fold_into_one_row_and_no_labels_overlap(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(STUBBORN)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    for _ in range(4):
        assert invoke(server, "echo", session) == 200  # four chains of one attempt
    # Retried at once, every time: each wait the protocol asks for (150, 300, 600, 1200,
    # 2400 ms) overlaps the ones before it, and so would their labels.
    statuses = [invoke(server, "stubborn", session) for _ in range(6)]
    assert statuses == [503] * 5 + [200]
    for _ in range(2):
        assert invoke(server, "echo", session) == 200
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    page.wait_for_selector("#timeline .singles")
    # One compact row for the six single-attempt chains; a plot for the one that retried.
    assert page.locator("#timeline .singles").count() == 1
    singles = page.locator("#timeline .singles .single")
    assert singles.count() == 6
    assert page.locator("#timeline .chain-plot").count() == 1
    # Every attempt still has its mark, the single ones in the compact row.
    ids = sorted(m["id"] for m in marks(page, "circle.attempt"))
    assert ids == sorted(str(entry.id) for entry in server.journal(session))
    assert "6 single-attempt chains" in page.inner_text("#timeline .singles")

    plots = page.eval_on_selector_all(
        "#timeline svg.chain-plot",
        """svgs => svgs.map(svg => [...svg.querySelectorAll("text")].map(t => {
            const b = t.getBBox();
            return {text: t.textContent, x: b.x, y: b.y, width: b.width, height: b.height};
        }))""",
    )
    labels = [box for plot in plots for box in plot]
    assert [b["text"] for b in labels if b["text"].startswith("wait")], "no wait label drawn"
    for plot in plots:
        assert overlaps(plot) == []
    chips = page.eval_on_selector_all(
        "#timeline .singles .single",
        """nodes => nodes.map(n => {
            const b = n.getBoundingClientRect();
            return {text: n.textContent, x: b.x, y: b.y, width: b.width, height: b.height};
        })""",
    )
    assert overlaps(chips) == []
    page.screenshot(path=str(artifacts() / "dashboard-timeline.png"), full_page=True)
    assert console.errors == []


def test_attempts_milliseconds_apart_are_distinct_marks_with_their_own_labels(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    # A chain over five seconds whose first retry came 2 ms after the first attempt: at
    # the plot's scale the two are a fraction of a pixel apart.
    start = time.time() - 10
    for offset, status, code in (
        (0.0, 503, "ENDPOINT_UNREACHABLE"),
        (0.002, 503, "ENDPOINT_UNREACHABLE"),
        (5.0, 200, None),
    ):
        server.state.record(
            Entry(server.state.next_id(), start + offset, start + offset + 0.001, session,
                  "POST", "/skills/flaky/invoke", status, "invoke", skill="flaky",
                  error_code=code)
        )  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    page.wait_for_selector("#timeline .chain-plot circle.attempt")
    drawn = page.eval_on_selector_all(
        "#timeline svg.chain-plot circle.attempt",
        """nodes => nodes.map(n => {
            const b = n.getBoundingClientRect();
            return {text: n.dataset.id, x: b.x, y: b.y, width: b.width, height: b.height};
        })""",
    )
    assert len(drawn) == 3
    assert overlaps(drawn) == []  # three marks, none hiding another
    labels = page.eval_on_selector_all(
        "#timeline svg.chain-plot text.mark-label",
        """nodes => nodes.map(n => {
            const b = n.getBoundingClientRect();
            return {text: n.textContent, x: b.x, y: b.y, width: b.width, height: b.height};
        })""",
    )
    # Each its own label (the retry 2 ms later is a finding: too soon).
    assert sorted(label["text"].split()[0] for label in labels) == ["200", "503", "503"]
    assert overlaps(labels) == []
    assert overlaps(labels + drawn) == []  # and none over a mark
    page.screenshot(path=str(artifacts() / "dashboard-close-marks.png"), full_page=True)
    assert console.errors == []


def test_a_retry_that_lost_its_idempotency_key_shows_as_correlation_lost(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    # A chain whose retry made a new key (entries with the request headers the journal keeps).
    start = time.time() - 10
    ids = []
    for offset, status, code, key in (
        (0.0, 503, "ENDPOINT_UNREACHABLE", "op-1"),
        (1.0, 200, None, "op-2"),
    ):
        ids.append(server.state.next_id())
        server.state.record(
            Entry(ids[-1], start + offset, start + offset + 0.001, session, "POST",
                  "/skills/flaky/invoke", status, "invoke", skill="flaky", error_code=code,
                  headers=(("Content-Type", "application/json"), ("Idempotency-Key", key)))
        )  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    finding = page.locator("#findings li[data-rule='correlation-lost']")
    finding.wait_for(timeout=WAIT_MS)
    text = finding.inner_text()
    assert "1 retry lost the first attempt's Idempotency-Key" in text
    assert f"#{ids[1]} sent Idempotency-Key 'op-2', #{ids[0]} sent 'op-1'" in text
    assert "outside what is retried" in text  # the fix
    flagged = [m["id"] for m in marks(page, "circle.attempt") if "finding" in m["cls"].split()]
    assert flagged == [str(i) for i in ids]
    assert console.errors == []


def test_a_herd_and_a_limits_answers_show_as_retry_herd_and_their_coverage_row(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    # Three chains refused together with Retry-After: 1, each retrying 1003 ms later (no
    # jitter): entries as the journal holds a limit's answers.
    start = time.time() - 10
    refusals, retries = [], []
    for n in range(3):
        at = start + n * 0.001
        refusals.append(server.state.next_id())
        server.state.record(
            Entry(refusals[-1], at, at + 0.001, session, "POST", "/skills/flaky/invoke", 429,
                  "invoke", skill="flaky", error_code="RATE_LIMITED", retry=Retry(1000, 5),
                  body_digest=f"hmac-sha256:item-{n}",
                  rate_limit={"refused": True, "scripted": False, "status": 429,
                              "retry_after": "seconds", "headers": "ietf", "limit": 2,
                              "remaining": 0, "refill": 1.0, "wait_ms": 1000,
                              "next_ms": 1000 - n, "full_ms": 2000, "retry_after_value": "1",
                              "key": f"session: {session}"})
        )  # fmt: skip
    for n in range(3):
        at = start + n * 0.001 + 0.001 + 1.003
        retries.append(server.state.next_id())
        server.state.record(
            Entry(retries[-1], at, at + 0.001, session, "POST", "/skills/flaky/invoke", 200,
                  "invoke", skill="flaky", body_digest=f"hmac-sha256:item-{n}")
        )  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    finding = page.locator("#findings li[data-rule='retry-herd']")
    finding.wait_for(timeout=WAIT_MS)
    text = finding.inner_text()
    assert "3 chains retried in lockstep after the same advice (Retry-After: 1)" in text
    assert "jitter" in text  # the fix
    flagged = [m["id"] for m in marks(page, "circle.attempt") if "finding" in m["cls"].split()]
    assert sorted(flagged, key=int) == [str(i) for i in sorted(refusals + retries)]
    limited = page.locator("#coverage .chip[data-name='429 RATE_LIMITED'] b")
    assert limited.inner_text() == "3"
    page.screenshot(path=str(artifacts() / "dashboard-herd.png"), full_page=True)
    assert console.errors == []


def test_a_tasks_findings_show_with_their_fixes_and_its_end_in_a_coverage_row(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(RETRYING)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    # A task polled 100 ms after a 202 that advised 1 s, served failed, then polled twice
    # more; and a poll of an id mockskill never handed out: entries as the journal holds
    # them (Entry.task).
    start = time.time() - 10
    base = {
        "known": True,
        "expired": False,
        "served": True,
        "cancelling": False,
        "progress": None,
        "poll": None,
        "terminal_at_ms": None,
    }
    steps: list[tuple[float, str, str, int, str | None, dict[str, Any]]] = [
        (0.0, "POST", "/skills/flaky/invoke", 202, None,
         {"id": "t1", "action": "submit", "status": "submitted", "poll_after_ms": 1000,
          "operation": "key:k1", "settles_at_ms": None}),
        (0.1, "GET", "/skills/flaky/tasks/t1", 200, None,
         {"id": "t1", "action": "poll", "status": "working", "poll_after_ms": 1000}),
        (1.2, "GET", "/skills/flaky/tasks/t1", 200, "EXECUTION_TIMEOUT",
         {"id": "t1", "action": "poll", "status": "failed", "poll_after_ms": None}),
        (1.3, "GET", "/skills/flaky/tasks/t1", 200, "EXECUTION_TIMEOUT",
         {"id": "t1", "action": "poll", "status": "failed", "poll_after_ms": None}),
        (1.4, "GET", "/skills/flaky/tasks/t1", 200, "EXECUTION_TIMEOUT",
         {"id": "t1", "action": "poll", "status": "failed", "poll_after_ms": None}),
        (1.5, "GET", "/skills/flaky/tasks/guessed", 404, "TASK_NOT_FOUND",
         {"id": "guessed", "action": "poll", "status": None, "poll_after_ms": None,
          "known": False, "served": False}),
    ]  # fmt: skip
    ids = []
    for offset, method, path, status, code, task in steps:
        ids.append(server.state.next_id())
        server.state.record(
            Entry(ids[-1], start + offset, start + offset + 0.001, session, method, path,
                  status, "task" if "/tasks/" in path else "invoke", skill="flaky",
                  error_code=code, task={**base, **task})
        )  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    expected = {
        "poll-too-soon": ("1 poll of task t1 sooner than the Retry-After", "sleep the Retry-After"),
        "poll-after-terminal": (
            "1 poll of task t1 after it was served failed",
            "end the poll loop",
        ),
        "status-url-ignored": ("never handed out ('guessed')", "follow Location"),
    }
    for rule, (message, fix) in expected.items():
        finding = page.locator(f"#findings li[data-rule='{rule}']")
        finding.wait_for(timeout=WAIT_MS)
        text = finding.inner_text()
        assert message in text, rule
        assert fix in text, rule
    failed = page.locator("#coverage .chip[data-name='failed EXECUTION_TIMEOUT'] b")
    assert failed.inner_text() == "1"
    page.screenshot(path=str(artifacts() / "dashboard-tasks.png"), full_page=True)
    assert console.errors == []


# -- the task timeline ------------------------------------------------------------------------

POLL_AFTER_MS = 200
TASKS = f"""
name: task-demo
description: The bundled task-report's life, in short times.
skills:
  - id: task-report
    task:
      poll_after: {POLL_AFTER_MS}ms
      life:
        - {{status: submitted, for: 300ms}}
        - {{status: working, for: 600ms, progress: [10, 40, 80]}}
        - {{status: completed, json: {{report: done}}}}
"""


def poll_to_the_end(server: Server, session: str) -> str:
    """A consumer that polls once at once (too soon), then as told, until the task ends;
    the task's id."""
    submitted = requests.post(
        server.invoke_url("task-report"), headers={"Mockskill-Session": session}, timeout=10
    )
    assert submitted.status_code == 202
    location = submitted.headers["Location"]
    answer = requests.get(location, timeout=10).json()["task"]  # no wait at all: too soon
    while answer["status"] not in ("completed", "failed", "cancelled"):
        time.sleep(answer["poll_after_ms"] / 1000 + 0.02)
        answer = requests.get(location, timeout=10).json()["task"]
    assert answer["status"] == "completed"
    ident: str = answer["id"]
    return ident


def cancel_early(server: Server, session: str) -> str:
    """A consumer that polls once as told, then cancels; the task's id."""
    submitted = requests.post(
        server.invoke_url("task-report"), headers={"Mockskill-Session": session}, timeout=10
    )
    location = submitted.headers["Location"]
    time.sleep(submitted.json()["task"]["poll_after_ms"] / 1000 + 0.02)
    assert requests.get(location, timeout=10).status_code == 200
    cancelled = requests.delete(location, timeout=10)
    assert cancelled.status_code == 200
    assert cancelled.json()["task"]["status"] == "cancelled"
    ident: str = submitted.json()["task"]["id"]
    return ident


def task_row(page: Page, ident: str, selector: str, script: str) -> Any:
    return page.eval_on_selector_all(f"#tasks [data-task='{ident}'] {selector}", script)


def test_each_task_is_a_row_of_its_polls_bands_cancel_callbacks_and_findings(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(TASKS)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    polled = poll_to_the_end(server, session)
    cancelled = cancel_early(server, session)
    # Callbacks of the polled task as the courier journals them (entries of endpoint
    # callback): the working change acknowledged, the completed one answered 500 then
    # acknowledged on its retry.
    now = time.time()
    deliveries = [(0, 0, "working", 204), (1, 0, "completed", 500), (1, 1, "completed", 204)]
    delivery_ids = []
    for n, (delivery, attempt, pushed, status) in enumerate(deliveries):
        delivery_ids.append(server.state.next_id())
        task = {
            "id": polled,
            "action": "callback",
            "delivery": delivery,
            "attempt": attempt,
            "pushed": pushed,
            "fault": "none",
            "forged": False,
            "acknowledged": status == 204,
            "late_ms": 0,
            "receiver": "127.0.0.1:9",
        }
        server.state.record(
            Entry(delivery_ids[-1], now - 1 + 0.25 * n, now - 1 + 0.25 * n + 0.01, session,
                  "POST", "/hook", status, "callback", skill="task-report", task=task)
        )  # fmt: skip
    journal = server.journal(session)
    requests_of = {
        ident: [str(e.id) for e in journal if e.task and e.task["id"] == ident and
                e.endpoint != "callback"]
        for ident in (polled, cancelled)
    }  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    page.wait_for_selector(f"#tasks [data-task='{cancelled}'] rect.task-mark.cancel")
    rows = page.eval_on_selector_all("#tasks .task", "rows => rows.map(r => r.dataset.task)")
    assert rows == [polled, cancelled]  # in the order they were submitted

    # The polled task: a mark per request, in order of time; its statuses as bands in turn.
    ids = task_row(page, polled, ".task-mark", "ms => ms.map(m => m.dataset.id)")
    assert ids == requests_of[polled]
    xs = task_row(
        page, polled, "circle.task-mark", "ms => ms.map(m => Number(m.getAttribute('cx')))"
    )
    assert xs == sorted(xs)
    bands = task_row(page, polled, "rect.band", "bs => bs.map(b => b.dataset.status)")
    assert bands == ["submitted", "working", "completed"]
    # Its too-soon poll (and the 202 it was owed the wait of) ringed, named on the row.
    ringed = task_row(page, polled, ".task-mark.finding", "ms => ms.map(m => m.dataset.id)")
    assert ringed == requests_of[polled][:2]
    head = page.locator(f"#tasks [data-task='{polled}'] .chain-head").inner_text()
    assert "poll-too-soon" in head
    assert "callback-not-acknowledged" in head
    # Its callbacks: acknowledged filled, the refused one hollow and ringed (its finding).
    callbacks = task_row(
        page, polled, "path.callback",
        "ps => ps.map(p => [p.dataset.id, p.getAttribute('class')])",
    )  # fmt: skip
    assert [i for i, _ in callbacks] == [str(i) for i in delivery_ids]
    assert [c.split()[1] for _, c in callbacks] == ["acked", "unacked", "acked"]
    assert "finding" in callbacks[1][1].split()
    finding = page.locator("#findings li[data-rule='callback-not-acknowledged']")
    assert "1 delivery of task" in finding.inner_text()

    # The cancelled task: its cancel a square, its last band cancelled, nothing found.
    actions = task_row(page, cancelled, ".task-mark", "ms => ms.map(m => m.dataset.action)")
    assert actions == ["submit", "poll", "cancel"]
    bands = task_row(page, cancelled, "rect.band", "bs => bs.map(b => b.dataset.status)")
    assert bands[-1] == "cancelled"
    assert task_row(page, cancelled, ".finding", "ms => ms.length") == 0
    cancelled_chip = page.locator("#coverage .chip[data-name='cancelled'] b")
    assert cancelled_chip.inner_text() == "1"

    page.screenshot(path=str(artifacts() / "dashboard-task-timeline.png"), full_page=True)
    assert console.errors == []


# -- the stream timeline ----------------------------------------------------------------------

STREAMS = """
name: stream-demo
description: A stream cut after event 4 then whole, one that stalls, one a client leaves.
skills:
  - id: cut
    invoke:
      - stream:
          events: &tokens
            - {repeat: 6, rate: 100/s, event: token, data: {text: tok}, id_from: 1}
          end: &result {event: result, data: {answer: 42}}
          fault: {after: 4, kind: reset}
      - stream: {events: *tokens, end: *result}
  - id: stall
    invoke:
      stream:
        events: [{repeat: 5, rate: 100/s, event: progress, data: {step: 1}, id_from: 1}]
        end: *result
        fault: {after: 2, kind: stall}
  - id: slow
    invoke:
      stream:
        events: [{repeat: 100, rate: 50/s, event: token, data: {text: tok}, id_from: 1}]
        end: *result
"""


def consume_streams(server: Server, session: str) -> None:
    """A consumer's streams: cut after event 4 and re-issued (whole), a stall it leaves at
    its read timeout, and a slow stream it leaves after event 3."""
    headers = {"Mockskill-Session": session}
    cut = server.invoke_url("cut")
    with (
        pytest.raises(requests.exceptions.ChunkedEncodingError),
        requests.post(cut, headers=headers, stream=True, timeout=5) as answer,
    ):
        for _ in answer.iter_lines():
            pass
    whole = requests.post(cut, headers=headers, timeout=5)
    assert b"event: result" in whole.content
    with pytest.raises(requests.exceptions.ConnectionError):  # a read timeout, mid-body
        requests.post(server.invoke_url("stall"), headers=headers, timeout=(5, 0.3))
    with requests.post(server.invoke_url("slow"), headers=headers, stream=True, timeout=5) as left:
        lines = left.iter_lines()
        while next(lines) != b"id: 3":
            pass
    deadline = time.monotonic() + 5  # each attempt is journalled when its stream ends
    while len(server.journal(session)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)


def stream_marks(page: Page, selector: str) -> list[dict[str, Any]]:
    """Each element *selector* matches in the stream timeline's plot: its journal id, how its
    attempt ended, its class, where it starts and ends (x)."""
    found: list[dict[str, Any]] = page.eval_on_selector_all(
        f"#streams .stream-plot {selector}",
        """nodes => nodes.map(n => { const box = n.getBBox(); return {
            id: n.dataset.id, ended: n.dataset.ended, events: n.dataset.events,
            cls: n.getAttribute("class"), x0: box.x, x1: box.x + box.width,
            title: (n.querySelector("title") || {}).textContent || "",
        }; })""",
    )
    return found


def test_each_stream_attempt_is_a_bar_its_events_and_where_it_broke(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(STREAMS)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    consume_streams(server, session)
    journal = server.journal(session)
    assert [e.stream and e.stream["ended"] for e in journal] == [
        "reset", "complete", "stall", "client_left",
    ]  # fmt: skip
    ids = [str(e.id) for e in journal]
    # The stream rules (resume-ignored, ...) are the audit's; the page rings whatever finding
    # names an attempt's entry. Here the real report, with one such finding added last (after
    # any the rules found) on the cut attempt and its re-issue, as the report lists a rule's.
    planted = {
        "rule": "resume-ignored", "session": session, "endpoint": "POST /skills/cut/invoke",
        "attempts": [journal[0].id, journal[1].id],
        "message": "1 re-issue of a cut stream without Last-Event-ID",
        "expected": "Last-Event-ID: 4", "found": "no Last-Event-ID", "fix": "send Last-Event-ID",
    }  # fmt: skip

    number: dict[str, int] = {}  # the planted finding's number in the report (1-based)

    def with_finding(route: Any) -> None:
        answer = route.fetch()
        report = answer.json()
        for listed in report["sessions"]:
            if listed["session"] == session:
                listed["findings"].append(planted)
                number["planted"] = len(listed["findings"])
                for row in listed["streams"]:
                    if row["id"] in planted["attempts"]:
                        row["findings"].append(number["planted"])
        route.fulfill(response=answer, json=report)

    page.route(re.compile(r".*/__admin/report\?session=.*"), with_finding)
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    page.wait_for_function(
        "() => document.querySelectorAll('#streams .stream-plot .stream-bar').length === 4"
    )
    bars = stream_marks(page, "rect.stream-bar")
    # A bar an attempt, in order of time, each with the events it sent and how it ended.
    assert [b["id"] for b in bars] == ids
    assert [b["ended"] for b in bars] == ["reset", "complete", "stall", "client_left"]
    assert [b["events"] for b in bars[:3]] == ["4", "7", "2"]  # the whole one: 6 and its result
    assert 3 <= int(bars[3]["events"]) < 20
    # The re-issue starts after the cut attempt broke; each later attempt after the one before.
    assert all(a["x1"] <= b["x0"] for a, b in itertools.pairwise(bars))
    # Where each broke: a cross at its bar's end; the whole one's end a cap.
    breaks = stream_marks(page, "path.stream-break")
    assert [b["id"] for b in breaks] == [ids[0], ids[2], ids[3]]
    for mark in breaks:
        bar = next(b for b in bars if b["id"] == mark["id"])
        assert mark["x0"] < bar["x1"] < mark["x1"]
    assert "e-reset" in breaks[0]["cls"].split()
    assert "reset after event 4" in breaks[0]["title"]
    assert "scripted: stall after event 2" in breaks[1]["title"]
    assert f"client left after event {bars[3]['events']}" in breaks[2]["title"]
    assert [e["id"] for e in stream_marks(page, "line.stream-end")] == [ids[1]]
    # The finding on the cut stream and its re-issue rings both, and names it on their labels.
    ringed = [b["id"] for b in bars if "finding" in b["cls"].split()]
    assert ringed[:2] == ids[:2]
    labels = page.eval_on_selector_all(
        "#streams text.stream-label", "ts => ts.map(t => t.textContent)"
    )
    flagged = {label.split(" ⚑")[0]: label.split(" ⚑")[1].split(",") for label in labels[:2]}
    assert str(number["planted"]) in flagged["cut #1 · 4 events · last id 4 · reset after event 4"]
    assert str(number["planted"]) in flagged["cut #2 · 7 events · last id 6 · complete"]
    page.hover(f"#findings li[data-finding='{number['planted']}']")
    lit = page.eval_on_selector_all("#streams .hl", "ns => [...new Set(ns.map(n => n.dataset.id))]")
    assert lit == ids[:2]

    page.screenshot(path=str(artifacts() / "dashboard-streams.png"), full_page=True)
    assert console.errors == []


def test_a_stall_past_its_idle_bound_a_client_leaving_early_and_an_error_end_are_drawn(
    serve: Callable[..., Server], page: Page
) -> None:
    server = serve(STREAMS)
    session = f"dash-{uuid.uuid4().hex[:8]}"
    # Stream attempts as the journal holds them (Entry.stream, with what the audit's rules
    # read: the bytes' stalled time, the scenario's idle bound and expected duration): a
    # stall held 2.5 s past its last byte (idle bound 500 ms), a client that left after
    # 400 ms of a stream expected to run 2 s, an error end, and a resumed attempt.
    start = time.time() - 10
    base = {"format": "sse", "fault": None, "fault_after": None, "resumed_from": None,
            "asked_from": None, "resumable": False, "retry_ms": None, "idle_bound_ms": 500,
            "expected_ms": 1000, "stalled_ms": 0}  # fmt: skip
    attempts: list[tuple[float, float, str, dict[str, Any], str | None]] = [
        (0.0, 3.0, "stall", {"events": 10, "last_id": "10", "ended": "stall", "fault": "stall",
                             "fault_after": 10, "stalled_ms": 2500}, None),
        (3.2, 0.4, "slow", {"events": 20, "last_id": "20", "ended": "client_left",
                            "expected_ms": 2000}, None),
        (3.8, 0.4, "overload", {"events": 21, "last_id": "20", "ended": "complete"},
         "ENDPOINT_UNREACHABLE"),
        (4.4, 0.6, "cut", {"events": 31, "last_id": "60", "ended": "complete",
                           "resumed_from": "30", "asked_from": "30"}, None),
    ]  # fmt: skip
    ids = []
    for at, took, skill, record, code in attempts:
        ids.append(str(server.state.next_id()))
        head, end = start + at + 0.002, start + at + 0.002 + took
        left = end if record["ended"] in ("stall", "client_left") else None
        server.state.record(
            Entry(int(ids[-1]), start + at, end, session, "POST", f"/skills/{skill}/invoke",
                  200, "invoke", skill=skill, error_code=code, client_left=left,
                  headers_sent=head, executed=True,
                  stream={**base, **record, "duration_ms": took * 1000})
        )  # fmt: skip
    console = Console(page)

    page.goto(f"{server.url}/__admin/#session={session}")
    page.wait_for_function(
        "() => document.querySelectorAll('#streams .stream-plot .stream-bar').length === 4"
    )
    bars = {b["id"]: b for b in stream_marks(page, "rect.stream-bar")}
    stall, slow, overload, resumed = (bars[i] for i in ids)
    # The stall: its last 2.5 s of 3 without a byte, and the idle bound run out 500 ms in.
    [stalled] = stream_marks(page, "rect.stream-stalled")
    width = stall["x1"] - stall["x0"]
    assert stalled["x0"] == pytest.approx(stall["x1"] - width * 2.5 / 3, abs=1)
    assert stalled["x1"] == pytest.approx(stall["x1"], abs=1)
    [bound] = stream_marks(page, "line.stream-idle-bound")
    assert bound["x0"] == pytest.approx(stalled["x0"] + width * 0.5 / 3, abs=1)
    # The client that left: where the stream was expected to end, past its bar.
    [expected] = stream_marks(page, "line.stream-expected")
    assert expected["x0"] == pytest.approx(slow["x0"] + (slow["x1"] - slow["x0"]) * 5, abs=1)
    # The error end: a red cap, named on its label; the resumed attempt says after what.
    assert [e["cls"] for e in stream_marks(page, "line.stream-end")] == [
        "stream-end error", "stream-end",
    ]  # fmt: skip
    labels = page.eval_on_selector_all(
        "#streams text.stream-label", "ts => ts.map(t => t.textContent)"
    )
    assert labels[2] == "overload #1 · 21 events · last id 20 · error event ENDPOINT_UNREACHABLE"
    assert labels[3] == "cut #1 · resumed after id 30 · 31 events · last id 60 · complete"
    assert "the request's Last-Event-ID: 30" in resumed["title"]
    assert overload["ended"] == "complete"

    page.screenshot(path=str(artifacts() / "dashboard-stream-rules.png"), full_page=True)
    assert console.errors == []
