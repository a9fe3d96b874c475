"""Three ``mockskill serve --state redis://...`` replicas share long-running tasks.

Real processes on ephemeral ports and a real Redis, each request sent to the
next replica in turn (round robin, as a load balancer does): a task submitted
on one is polled, given input and cancelled on the others, and every answer is
the one a single in-memory server gives for the same requests (its statuses,
progress, cancellations, inputs and refusals). The shared journal holds every
step whichever replica served it, and the audit report judges the task whole.
A task's callbacks are pushed once per delivery, whichever replica served the
request that changed it.
"""

from __future__ import annotations

import http.server
import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import test_serve_shared
from test_serve_shared import Serve

serve = test_serve_shared.serve
"""``serve(*args)``: a ``mockskill serve`` process (the fixture of tests/test_serve_shared.py)."""

TASKS = """\
name: shared-tasks
skills:
  - id: report
    task:
      poll_after: 100ms
      life:
        - {status: working, polls: 3, progress: [10, 40, 80]}
        - {status: input_required, expects: {body: {/answer: {exists: true}}}}
        - {status: working, polls: 2}
        - {status: completed, json: {report: done}}
  - id: long
    task:
      poll_after: 100ms
      cancel: {allowed: [working], settle: 300ms}
      life:
        - {status: working, for: 60s, progress: [50]}
        - {status: completed, json: {late: true}}
"""
SESSION = "shared-tasks"
PAUSE = 0.12
"""Seconds between requests: past the 100 ms ``Retry-After`` (the audit's poll-too-soon)."""

Send = Callable[[str, str, Any], requests.Response]


def round_robin(bases: list[str]) -> Send:
    """Sends each request to the next of *bases*: ``send(method, path, json)``."""
    replicas = itertools.cycle(bases)

    def send(method: str, path: str, body: Any = None) -> requests.Response:
        time.sleep(PAUSE)
        headers = {"Mockskill-Session": SESSION} if path.endswith("/invoke") else {}
        return requests.request(
            method, next(replicas) + path, json=body, headers=headers, timeout=10
        )

    return send


def path_of(answer: requests.Response) -> str:
    """The status URL's path (its host is the replica that answered the submit)."""
    location = answer.headers["Location"]
    return location[location.index("/skills/") :]


def seen(answer: requests.Response) -> tuple[Any, ...]:
    """What an answer says of its task, without what differs between servers (the id,
    URLs, times)."""
    body = answer.json()
    task = body.get("task")
    if task is None:
        return (answer.status_code, body["error"]["code"])
    return (
        answer.status_code,
        task["status"],
        task.get("progress"),
        task.get("cancelling", False),
        task.get("result"),
        "Retry-After" in answer.headers,
    )


def test_a_task_lives_the_same_across_three_replicas_as_in_one_memory_server(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    files = tmp_path / "tasks.yaml"
    files.write_text(TASKS, encoding="utf-8")
    replicas = [serve("--state", redis_url, str(files)) for _ in range(3)]
    alone = serve(str(files))

    shared = played(round_robin(replicas))
    expected = played(round_robin([alone]))

    assert shared == expected
    entries = journal(replicas[0])
    assert [steps(e) for e in entries] == [steps(e) for e in journal(alone)] == JOURNALLED
    served_by = [e["replica"] for e in entries]  # each request went to the next replica
    assert len(set(served_by)) == 3
    assert served_by == [served_by[i % 3] for i in range(len(served_by))]
    report = requests.get(
        f"{replicas[2]}/__admin/report", params={"session": SESSION}, timeout=10
    ).json()
    (reported,) = report["sessions"]
    assert reported["requests"] == len(JOURNALLED)
    assert reported["findings"] == []
    assert reported["coverage"]["tasks"]["cancelled"] == 1


def journal(base: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{base}/__admin/journal", params={"session": SESSION}, timeout=10)
    entries: list[dict[str, Any]] = answer.json()["entries"]
    return entries


def steps(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What an entry says of its request on a task: the action, the task's status after it
    (None: not known), the answer's status code, and whether it was cancelling."""
    task = entry["task"]
    return (task["action"], task["status"], entry["status"], task["cancelling"])


def played(send: Send) -> list[tuple[Any, ...]]:
    """A consumer's requests on two tasks, each on the next server: what each answer said."""
    answers = []
    submitted = send("POST", "/skills/report/invoke", {"input": {}})
    report = path_of(submitted)
    answers.append(seen(submitted))
    answers += [seen(send("GET", report)) for _ in range(3)]
    answers.append(seen(send("POST", report, {"answer": 42})))
    answers.append(seen(send("GET", report)))
    answers.append(seen(send("POST", report, {"question": "?"})))
    answers.append(seen(send("POST", report, {"answer": 42})))
    answers += [seen(send("GET", report)) for _ in range(3)]
    answers.append(seen(send("DELETE", report)))

    submitted = send("POST", "/skills/long/invoke", {"input": {"n": 2}})
    long = path_of(submitted)
    answers.append(seen(submitted))
    answers.append(seen(send("GET", long)))
    answers.append(seen(send("DELETE", long)))
    answers.append(seen(send("GET", long)))  # cancelling
    time.sleep(0.3)
    answers.append(seen(send("GET", long)))  # cancelled, settled
    answers.append(seen(send("DELETE", long)))
    return answers


EXPECTED = [
    (202, "working", 10, False, None, True),  # no poll yet: the first phase's first value
    (200, "working", 10, False, None, True),
    (200, "working", 40, False, None, True),
    (200, "working", 80, False, None, True),
    (409, "TASK_NOT_AWAITING_INPUT"),
    (200, "input_required", None, False, None, True),
    (422, "TASK_INPUT_INVALID"),
    (202, "working", None, False, None, True),
    (200, "working", None, False, None, True),
    (200, "working", None, False, None, True),
    (200, "completed", None, False, {"report": "done"}, False),
    (409, "TASK_FINISHED"),
    (202, "working", 50, False, None, True),
    (200, "working", 50, False, None, True),
    (202, "working", 50, True, None, True),
    (200, "working", 50, True, None, True),
    (200, "cancelled", 50, False, None, False),
    (409, "TASK_FINISHED"),
]
JOURNALLED = [
    ("submit", "working", 202, False),
    ("poll", "working", 200, False),
    ("poll", "working", 200, False),
    ("poll", "working", 200, False),
    ("input", "working", 409, False),
    ("poll", "input_required", 200, False),
    ("input", "input_required", 422, False),  # (its expects: not met)
    ("input", "working", 202, False),
    ("poll", "working", 200, False),
    ("poll", "working", 200, False),
    ("poll", "completed", 200, False),
    ("cancel", "completed", 409, False),
    ("submit", "working", 202, False),
    ("poll", "working", 200, False),
    ("cancel", "working", 202, True),
    ("poll", "working", 200, True),
    ("poll", "cancelled", 200, False),
    ("cancel", "cancelled", 409, False),
]


def test_the_live_task_cap_counts_every_replicas_tasks(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    files = tmp_path / "tasks.yaml"
    files.write_text(TASKS, encoding="utf-8")
    replicas = [serve("--state", redis_url, "--max-tasks", "2", str(files)) for _ in range(3)]
    send = round_robin(replicas)
    statuses = [send("POST", "/skills/long/invoke", {"input": {}}).status_code for _ in range(3)]
    assert statuses == [202, 202, 503]
    requests.post(f"{replicas[1]}/__admin/reset", json={"session": SESSION}, timeout=10)
    assert send("POST", "/skills/long/invoke", {"input": {}}).status_code == 202


def test_the_audit_judges_a_task_whole_whichever_replica_served_each_poll(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    """An impatient consumer (polls with no wait, never to the end) is judged on three
    replicas as on one server: its polls too soon and its abandoned task are named."""
    files = tmp_path / "tasks.yaml"
    files.write_text(TASKS, encoding="utf-8")
    replicas = [serve("--state", redis_url, str(files)) for _ in range(3)]
    alone = serve(str(files))

    def impatient(bases: list[str]) -> list[str]:
        replicas = itertools.cycle(bases)
        headers = {"Mockskill-Session": SESSION}
        submitted = requests.post(
            f"{next(replicas)}/skills/long/invoke", json={}, headers=headers, timeout=10
        )
        path = path_of(submitted)
        for _ in range(4):
            assert requests.get(next(replicas) + path, timeout=10).status_code == 200
        time.sleep(0.3)
        report = requests.get(
            f"{bases[-1]}/__admin/report",
            params={"session": SESSION, "abandoned_ms": 50},
            timeout=10,
        ).json()
        return sorted(f["rule"] for f in report["sessions"][0]["findings"])

    rules = impatient(replicas)
    assert rules == impatient([alone])
    assert "poll-too-soon" in rules
    assert "task-abandoned" in rules


PUSHED = """\
name: shared-tasks
skills:
  - id: pushed
    task:
      poll_after: 100ms
      cancel: {allowed: [working], settle: 300ms}
      life:
        - {status: working, polls: 2}
        - {status: input_required, expects: {body: {/answer: {exists: true}}}}
        - {status: working, for: 60s}
        - {status: completed, json: {pushed: true}}
      callback:
        url: {header: X-Callback-Url}
        secret: s3cret
        backoff: 50ms
        fault: twice
"""


class Receiver:
    """Keeps each delivery's body; answers 200."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        # (shutdown() returns once serve_forever() next looks up: soon, not in half a second)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()


def test_callbacks_are_pushed_once_per_delivery_whichever_replica_changed_the_task(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    """The task's changes are made on three replicas in turn (a poll, an input, a cancel);
    each is pushed as ``twice`` scripts it — two copies — and never once more, though every
    replica that served the task follows it."""
    files = tmp_path / "pushed.yaml"
    files.write_text(PUSHED, encoding="utf-8")
    replicas = [serve("--state", redis_url, str(files)) for _ in range(3)]
    receiver = Receiver()
    try:
        send = round_robin(replicas)
        submitted = requests.post(
            f"{replicas[0]}/skills/pushed/invoke",
            json={"input": {}},
            headers={"Mockskill-Session": SESSION, "X-Callback-Url": receiver.url},
            timeout=10,
        )
        assert submitted.status_code == 202
        path = path_of(submitted)
        statuses = [send("GET", path).json()["task"]["status"] for _ in range(3)]
        assert statuses == ["working", "working", "input_required"]
        assert send("POST", path, {"answer": 42}).status_code == 202
        assert send("DELETE", path).json()["task"]["cancelling"] is True
        time.sleep(0.5)  # past the settle
        assert send("GET", path).json()["task"]["status"] == "cancelled"
        deadline = time.monotonic() + 5
        while len(receiver.bodies) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # (any delivery sent more than once would be here by now)
        pushed = sorted((b["delivery"]["sequence"], b["task"]["status"]) for b in receiver.bodies)
        assert pushed == [
            (0, "input_required"),
            (0, "input_required"),
            (1, "working"),
            (1, "working"),
            (2, "cancelled"),
            (2, "cancelled"),
        ]
        assert {b["delivery"]["attempt"] for b in receiver.bodies} == {0}
        callbacks = [e for e in journal(replicas[1]) if e["endpoint"] == "callback"]
        assert sorted(e["task"]["delivery"] for e in callbacks) == [0, 0, 1, 1, 2, 2]
        assert all(e["task"]["acknowledged"] for e in callbacks)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def test_a_task_a_named_case_submitted_lives_its_cases_life_on_every_replica(
    serve: Serve, redis_url: str, tmp_path: Path
) -> None:
    """A failure pack's task cases (each its own ``task_life:``) on two replicas: a task
    submitted on one is polled on the other by the life its case gave it."""
    examples = Path(__file__).resolve().parent.parent / "docs" / "examples"
    pack = tmp_path / "report-failures.yaml"
    pack.write_text((examples / "report-failures.yaml").read_text(), encoding="utf-8")
    replicas = itertools.cycle([serve("--state", redis_url, str(pack)) for _ in range(2)])

    def walk(case: str) -> list[Any]:
        headers = {"Mockskill-Session": SESSION, "Mockskill-Case": case}
        answer = requests.post(
            next(replicas) + "/skills/report/invoke", json={}, headers=headers, timeout=10
        )
        path, lived = path_of(answer), [answer.json()["task"]["status"]]
        for _ in range(4):
            time.sleep(PAUSE)
            answer = requests.get(next(replicas) + path, timeout=10)
            lived.append(seen(answer)[1])
            if lived[-1] in ("failed", "cancelled", "TASK_EXPIRED"):
                break
        return lived

    assert walk("task-failed") == ["submitted", "submitted", "working", "failed"]
    assert walk("task-cancelled") == ["submitted", "submitted", "working", "cancelled"]
    assert walk("task-gone") == ["submitted", "submitted", "TASK_EXPIRED"]
    assert walk("ok") == ["submitted", "submitted", "working", "working", "completed"]
