"""A poll answered with the task as it stands is planned on a kept path and journalled as
it is planned (engine.Engine's poll landing, journalling.PolledTasks): what it answers and
journals is what the general path (the WSGI player's) gives the same poll."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest
from werkzeug.wrappers import Request

from mockskill import Server, load_text
from mockskill.engine.entries import Entry
from mockskill.engine.plan import Outcome, Plan
from mockskill.server.dispatch import LoopDispatcher
from mockskill.transport import Request as TransportRequest
from mockskill.transport.wsgi import environ as wsgi_environ
from mockskill.wsgi.player import handle

TASKS = """
    name: polled
    skills:
      - id: report
        task:
          poll_after: 2s
          life:
            - {status: submitted, polls: 1}
            - {status: working, polls: 2, progress: [10, 60], poll_after: 3s}
            - {status: completed, json: {report: "{base_url}/done"}}
      - id: failing
        task:
          life:
            - {status: working, polls: 1}
            - {status: failed, error: EXECUTION_TIMEOUT}
      - id: scripted
        task:
          life:
            - {status: working, for: 1h}
            - {status: completed}
          polls:
            - {error: ENDPOINT_UNREACHABLE, times: 1}
            - {task: status}
      - id: called
        task:
          callback: {url: {header: X-Callback-Url}, secret: s3cret}
          life:
            - {status: working, for: 1h}
            - {status: completed}
"""

Surface = Callable[[str], tuple[Server, LoopDispatcher]]


@pytest.fixture
def surface() -> Iterator[Surface]:
    made: list[tuple[Server, LoopDispatcher]] = []

    def make(text: str) -> tuple[Server, LoopDispatcher]:
        server = Server(load_text(textwrap.dedent(text), "test.yaml"), quiet=True)
        server.engine.open()
        made.append((server, LoopDispatcher(server.engine, server._admin_wsgi)))
        return made[-1]

    yield make
    for server, loop in made:
        loop.close()
        server.engine.close()


def transport_request(
    target: str, session: str, *, method: str = "GET", body: bytes = b""
) -> TransportRequest:
    return TransportRequest(
        method=method,
        target=target,
        version="1.1",
        headers=(("Host", "127.0.0.1:8080"), ("Mockskill-Session", session)),
        body=body,
        peer=("127.0.0.1", 50000),
        local=("127.0.0.1", 8080),
        time=time.time(),
        connection=1,
        index=1,
    )


def submitted(loop: LoopDispatcher, skill: str, session: str) -> str:
    """A task of *skill* submitted in *session*: its status path."""
    request = transport_request(f"/skills/{skill}/invoke", session, method="POST")
    plan = loop.plan(request)
    assert isinstance(plan, Plan)
    now = time.time()
    loop.played(request, Outcome(plan.answer, now, now, now))
    url: str = json.loads(plan.answer.body)["task"]["status_url"]
    return url.removeprefix("http://127.0.0.1:8080")


def alike(entry: Entry) -> Entry:
    """*entry* but its id, times, session and what names its task (each session polls its
    own task), its headers as the WSGI path keeps none as written."""
    task = None if entry.task is None else {**entry.task, "id": "", "terminal_at_ms": 0}
    path = entry.path.rsplit("/", 1)[0]
    return entry._replace(
        id=0, started=0.0, finished=0.0, session="", path=path, task=task, target="", headers=()
    )


def shown(body: bytes) -> object:
    """A poll's body but what differs per task (its id, status URL, created_at)."""
    read = json.loads(body)
    for key in ("id", "status_url", "created_at"):
        read.get("task", {}).pop(key, None)
    return read


@pytest.mark.parametrize(
    ("skill", "polls"),
    [("report", 5), ("failing", 3), ("scripted", 3), ("called", 2)],
)
def test_a_poll_planned_answers_and_is_journalled_as_the_general_path_does(
    surface: Surface, skill: str, polls: int
) -> None:
    # Every state of a life by poll count (progress, Retry-After, the outcome, a failed
    # task's error code), a polls: script (its error step, then task: status) and a task
    # with callbacks (the general path: the courier is told of each poll).
    server, loop = surface(TASKS)
    planned_path, handled_path = submitted(loop, skill, "planned"), submitted(loop, skill, "h")
    kept = []
    for _ in range(polls):
        before = len(server.state.journal())
        request = transport_request(planned_path, "planned")
        plan = loop.plan(request)
        assert isinstance(plan, Plan)
        kept.append(len(server.state.journal()) - before == 1)  # journalled as planned
        now = time.time()
        loop.played(request, Outcome(plan.answer, now, now, now))
        handled = handle(server.engine, Request(wsgi_environ(transport_request(handled_path, "h"))))
        assert plan.answer.status == handled.status_code
        assert shown(plan.answer.body) == shown(handled.get_data())
        sent = {k: v for k, v in plan.answer.headers if k != "Location"}
        assert sent == {k: v for k, v in handled.headers.items() if k != "Content-Length"}
    journal = server.state.journal()
    planned = [alike(e) for e in journal if e.session == "planned" and e.endpoint == "task"]
    general = [alike(e) for e in journal if e.session == "h" and e.endpoint == "task"]
    assert planned == general
    assert [e.task["poll"] for e in planned if e.task] == list(range(polls))
    expected = {
        "report": [True] * 5,
        "failing": [True] * 3,
        "scripted": [False, True, True],  # its error step is played as on any endpoint
        "called": [False, False],
    }
    assert kept == expected[skill]
