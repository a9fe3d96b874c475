"""Task callbacks from outside: a task skill with ``callback:`` pushes its state changes to
the receiver the invoke names, signed, on time, with the scripted fault, retried after a
non-2xx or a slow answer until its attempts run out; a receiver mockskill may not call is
refused 422 ``TASK_CALLBACK_REFUSED``; every attempt is journalled (docs/tasks.md,
"Callbacks"). Real servers on ephemeral ports, a real receiver (a threading HTTP server).

Each scenario is the YAML a user writes (``task: callback:``, docs/scenarios.md).
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from mockskill import Server, load_text
from mockskill.scenario.model import ScenarioSet

SESSION = "Mockskill-Session"
SECRET = "s3cret"

LIVES = {
    "report": """
      poll_after: 100ms
      cancel: {settle: 0ms}
      life:
        - {status: submitted, for: 100ms}
        - {status: working, for: 200ms}
        - {status: completed, json: {report: done}}
    """,
    "asking": """
      life:
        - {status: working, for: 100ms}
        - {status: input_required, expects: {body: {/answer: {exists: true}}}}
        - {status: completed, json: {answered: true}}
    """,
    "counted": """
      life:
        - {status: working, polls: 1}
        - {status: completed, json: {counted: true}}
    """,
    "long": """
      poll_after: 100ms
      cancel: {settle: 0ms}
      life:
        - {status: working, for: 60s}
        - {status: completed, json: {late: true}}
    """,
    "settling": """
      cancel: {settle: 300ms}
      life:
        - {status: working, for: 100ms}
        - {status: completed, json: {raced: true}}
    """,
}


def with_callback(skill_id: str = "report", **callback: Any) -> ScenarioSet:
    """Skill *skill_id* (of :data:`LIVES`) pushing to the URL its invoke's
    ``X-Callback-Url`` names, with ``callback:`` *callback* (YAML keys; short waits)."""
    given: dict[str, Any] = {
        "url": {"header": "X-Callback-Url"},
        "secret": SECRET,
        "backoff": "50ms",
        "timeout": "500ms",
        **callback,
    }
    text = textwrap.dedent(LIVES[skill_id]).strip().replace("\n", "\n      ")
    return load_text(
        f"""
skills:
  - id: {skill_id}
    task:
      {text}
      callback: {json.dumps(given)}
""",
        "callbacks.yaml",
    )


class Receiver:
    """A receiver of callbacks: every POST kept (its time, headers, body); answered with
    the statuses of :attr:`answers` in turn (then 200), after :attr:`slow` seconds each."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict[str, str], bytes]] = []
        self.answers: list[int] = []
        self.slow: list[float] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.got.append((time.time(), dict(self.headers.items()), body))
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    slow = receiver.slow.pop(0) if receiver.slow else 0.0
                if slow:
                    time.sleep(slow)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        # (shutdown() returns once serve_forever() next looks up: soon, not in half a second)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for _, _, body in self.got]

    def wait(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.got) >= count:
                    break
            time.sleep(0.01)
        return self.bodies()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Server] = []

    def started(scenarios: ScenarioSet, **options: Any) -> Server:
        server = Server(scenarios, **options).start()
        servers.append(server)
        return server

    yield started
    for server in servers:
        server.stop()


def submit(server: Server, url: str, skill: str = "report", session: str = "s") -> Any:
    return requests.post(
        f"{server.url}/skills/{skill}/invoke",
        json={"q": 1},
        headers={SESSION: session, "X-Callback-Url": url},
    )


def callbacks_of(server: Server, session: str = "s") -> list[dict[str, Any]]:
    entries = requests.get(f"{server.url}/__admin/journal", params={"session": session}).json()
    return [e for e in entries["entries"] if e["endpoint"] == "callback"]


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# -- deliveries ------------------------------------------------------------------------------


def test_each_change_is_posted_on_time_signed_with_the_task_as_a_poll_shows_it(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(with_callback())
    answer = submit(server, receiver.url)
    assert answer.status_code == 202
    submitted = time.time()
    task_id = answer.json()["task"]["id"]
    bodies = receiver.wait(2)
    assert [b["task"]["status"] for b in bodies] == ["working", "completed"]
    assert [b["delivery"] for b in bodies] == [
        {"sequence": 0, "attempt": 0},
        {"sequence": 1, "attempt": 0},
    ]
    assert bodies[1]["task"]["result"] == {"report": "done"}
    assert bodies[1]["task"]["status_url"] == answer.headers["Location"]
    for _, headers, body in receiver.got:
        assert headers["Mockskill-Signature"] == signed(body)
        assert headers["Mockskill-Task"] == task_id
        assert headers["Content-Type"] == "application/json"
    # working at 100 ms, completed at 300 ms after the submit, each well within 100 ms
    lateness = [
        at - submitted - due for (at, _, _), due in zip(receiver.got, (0.1, 0.3), strict=True)
    ]
    assert all(-0.05 < late < 0.1 for late in lateness), lateness


def test_on_names_the_statuses_pushed(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(on=["completed"]))
    submit(server, receiver.url)
    bodies = receiver.wait(1)
    time.sleep(0.2)
    assert [b["task"]["status"] for b in receiver.bodies()] == ["completed"]
    assert bodies[0]["delivery"]["sequence"] == 0


def test_no_url_in_the_invoke_means_no_callbacks(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback())
    answer = requests.post(f"{server.url}/skills/report/invoke", headers={SESSION: "s"})
    assert answer.status_code == 202
    time.sleep(0.5)
    assert receiver.got == []


def test_a_url_in_the_body_is_read_by_its_pointer(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(url={"body": "/callback/url"}))
    answer = requests.post(
        f"{server.url}/skills/report/invoke", json={"callback": {"url": receiver.url}}
    )
    assert answer.status_code == 202
    assert [b["task"]["status"] for b in receiver.wait(2)] == ["working", "completed"]


def test_a_change_made_by_input_is_pushed_when_it_is_made(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback("asking"))
    location = submit(server, receiver.url, "asking").headers["Location"]
    # (working is what its 202 said: not a change, not pushed)
    assert [b["task"]["status"] for b in receiver.wait(1)] == ["input_required"]
    before = time.time()
    assert requests.post(location, json={"answer": 42}).status_code == 202
    bodies = receiver.wait(2)
    assert bodies[1]["task"]["status"] == "completed"
    assert receiver.got[1][0] - before < 0.2


def test_a_change_made_by_a_poll_is_pushed_when_the_poll_is_answered(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(with_callback("counted"))
    location = submit(server, receiver.url, "counted").headers["Location"]
    assert requests.get(location).json()["task"]["status"] == "working"  # polls: 1
    time.sleep(0.3)
    assert receiver.got == []  # nothing happens to a task counting polls
    before = time.time()
    assert requests.get(location).json()["task"]["status"] == "completed"
    bodies = receiver.wait(1)
    assert [b["task"]["status"] for b in bodies] == ["completed"]
    assert receiver.got[0][0] - before < 0.2


def test_a_cancel_that_loses_the_race_pushes_the_end_the_life_reached(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(with_callback("settling"))
    location = submit(server, receiver.url, "settling").headers["Location"]
    assert requests.delete(location).json()["task"]["cancelling"] is True
    receiver.wait(1)
    time.sleep(0.5)  # past the settle: the life completed first, and stands
    assert [b["task"]["status"] for b in receiver.bodies()] == ["completed"]


def test_a_cancel_is_pushed_and_the_life_it_stopped_is_not(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback())
    location = submit(server, receiver.url).headers["Location"]
    assert requests.delete(location).status_code == 200  # settle 0: cancelled at once
    time.sleep(0.5)
    assert [b["task"]["status"] for b in receiver.bodies()] == ["cancelled"]


# -- faults ----------------------------------------------------------------------------------


def test_twice_sends_every_change_twice(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="twice"))
    submit(server, receiver.url)
    bodies = receiver.wait(4)
    time.sleep(0.1)
    assert sorted((b["delivery"]["sequence"], b["task"]["status"]) for b in bodies) == [
        (0, "working"),
        (0, "working"),
        (1, "completed"),
        (1, "completed"),
    ]


def test_late_sends_each_late_by_after_the_change(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="late", late_by="400ms"))
    submit(server, receiver.url)
    submitted = time.time()
    receiver.wait(2)
    assert receiver.got[0][0] - submitted >= 0.45  # working at 100 ms, + 400 ms
    entries = callbacks_of(server)
    assert all(e["task"]["late_ms"] >= 390 for e in entries)
    assert {e["task"]["fault"] for e in entries} == {"late"}


def test_out_of_order_sends_the_changes_in_reverse_pairs(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="out_of_order"))
    submit(server, receiver.url)
    bodies = receiver.wait(2)
    assert [b["delivery"]["sequence"] for b in bodies] == [1, 0]
    assert [b["task"]["status"] for b in bodies] == ["completed", "working"]


def test_never_sends_nothing_and_faults_go_to_tasks_in_turn(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault=["never", "none"]))
    submit(server, receiver.url)  # task 0: never
    second = submit(server, receiver.url)  # task 1: none
    bodies = receiver.wait(2)
    time.sleep(0.2)
    assert {b["task"]["id"] for b in receiver.bodies()} == {second.json()["task"]["id"]}
    assert len(bodies) == 2
    # The submits say each task's fault: a never task leaves no delivery to tell it by.
    entries = requests.get(f"{server.url}/__admin/journal", params={"session": "s"}).json()
    submits = [e["task"] for e in entries["entries"] if e["task"]["action"] == "submit"]
    assert [t["callback_fault"] for t in submits] == ["never", "none"]


def test_forged_is_signed_with_a_wrong_key(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="forged"))
    submit(server, receiver.url)
    receiver.wait(2)
    for _, headers, body in receiver.got:
        assert headers["Mockskill-Signature"].startswith("sha256=")
        assert headers["Mockskill-Signature"] != signed(body)
    assert all(e["task"]["forged"] for e in callbacks_of(server))


# -- retries ---------------------------------------------------------------------------------


def test_a_500_is_retried_after_the_backoff(serve: Any, receiver: Receiver) -> None:
    receiver.answers = [500]
    server = serve(with_callback(on=["completed"], backoff="200ms"))
    submit(server, receiver.url)
    bodies = receiver.wait(2)
    assert [b["delivery"] for b in bodies] == [
        {"sequence": 0, "attempt": 0},
        {"sequence": 0, "attempt": 1},
    ]
    assert receiver.got[1][0] - receiver.got[0][0] >= 0.19
    entries = callbacks_of(server)
    assert [(e["status"], e["task"]["acknowledged"]) for e in entries] == [
        (500, False),
        (200, True),
    ]


def test_a_slow_receiver_is_not_acknowledged_and_retried(serve: Any, receiver: Receiver) -> None:
    receiver.slow = [0.6]
    server = serve(with_callback(on=["completed"], timeout="200ms"))
    submit(server, receiver.url)
    bodies = receiver.wait(2)
    assert [b["delivery"]["attempt"] for b in bodies] == [0, 1]
    time.sleep(0.1)
    entries = callbacks_of(server)
    assert [(e["status"], e["task"]["acknowledged"]) for e in entries] == [
        (None, False),
        (200, True),
    ]


def test_attempts_run_out_with_the_backoff_doubling(serve: Any, receiver: Receiver) -> None:
    receiver.answers = [503] * 10
    server = serve(with_callback(on=["completed"], attempts=3, backoff="100ms"))
    submit(server, receiver.url)
    receiver.wait(3)
    time.sleep(0.6)  # a fourth would come 400 ms after the third
    times = [at for at, _, _ in receiver.got]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.09
    assert times[2] - times[1] >= 0.19
    entries = callbacks_of(server)
    assert [e["task"]["attempt"] for e in entries] == [0, 1, 2]
    assert not any(e["task"]["acknowledged"] for e in entries)


def test_a_refused_connection_is_retried(serve: Any) -> None:
    server = serve(with_callback(on=["completed"], attempts=2))
    nobody = "http://127.0.0.1:9/hook"  # (discard: nothing listens in a test run)
    submit(server, nobody)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len(callbacks_of(server)) < 2:
        time.sleep(0.05)
    entries = callbacks_of(server)
    assert [(e["status"], e["task"]["attempt"]) for e in entries] == [(None, 0), (None, 1)]
    assert entries[0]["task"]["receiver"] == "127.0.0.1:9"


# -- hosts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://127.0.0.1/hook", "http:///hook", "http://127.0.0.1/" + "x" * 2100, "not a url"],
)
def test_a_bad_url_is_refused_422_and_no_task_starts(serve: Any, url: str) -> None:
    server = serve(with_callback())
    answer = submit(server, url)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "TASK_CALLBACK_REFUSED"
    assert error["details"]["skill_id"] == "report"
    entries = requests.get(f"{server.url}/__admin/journal").json()["entries"]
    assert [(e["status"], e["task"]["action"], e["task"]["served"]) for e in entries] == [
        (422, "submit", False)
    ]


def test_another_host_is_refused_unless_allowed(serve: Any) -> None:
    refused = serve(with_callback())
    answer = submit(refused, "http://hooks.example.com/in")
    assert answer.status_code == 422
    assert "hooks.example.com is neither loopback" in answer.json()["error"]["details"]["reason"]
    allowed = serve(with_callback(), callback_allow=["hooks.example.com"])
    assert submit(allowed, "http://hooks.example.com/in").status_code == 202


def test_loopback_names_are_allowed_as_written(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(on=["completed"]))
    port = receiver.url.split(":")[2].split("/")[0]
    assert submit(server, f"http://localhost:{port}/hook").status_code == 202
    assert submit(server, f"http://127.0.0.2:{port}/hook").status_code == 202
    assert submit(server, f"http://[::1]:{port}/hook").status_code == 202


# -- the journal -----------------------------------------------------------------------------


def test_each_attempt_is_journalled_in_the_tasks_session(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback())
    task_id = submit(server, receiver.url, session="mine").json()["task"]["id"]
    receiver.wait(2)
    time.sleep(0.1)
    entries = callbacks_of(server, "mine")
    assert len(entries) == 2
    first = entries[0]
    assert first["method"] == "POST"
    assert first["path"] == "/hook"
    assert first["status"] == 200
    assert first["skill"] == "report"
    task = first["task"]
    assert task["id"] == task_id
    assert task["action"] == "callback"
    assert (task["delivery"], task["attempt"], task["pushed"]) == (0, 0, "working")
    assert (task["fault"], task["forged"], task["acknowledged"]) == ("none", False, True)
    assert 0 <= task["late_ms"] < 100
    assert task["receiver"] == receiver.url.split("/")[2]
    assert entries[1]["task"]["pushed"] == "completed"


# -- on the loop, bounded --------------------------------------------------------------------


def test_a_slow_receiver_does_not_hold_up_the_skill_surface(serve: Any, receiver: Receiver) -> None:
    receiver.slow = [1.0, 1.0]
    server = serve(with_callback(timeout="2s"))
    location = submit(server, receiver.url).headers["Location"]
    receiver.wait(1)  # the first delivery is being answered, slowly
    began = time.monotonic()
    assert requests.get(location).status_code == 200
    assert requests.get(f"{server.url}/skills/report").status_code == 200
    assert time.monotonic() - began < 0.5


def test_stopping_the_server_cancels_the_deliveries_left(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="late", late_by="1s"))
    submit(server, receiver.url)
    time.sleep(0.4)  # both changes happened; their deliveries wait a second more
    assert server.courier.pending == 2
    server.stop()
    time.sleep(1.2)
    assert receiver.got == []
    assert server.courier.pending == 0


def test_deliveries_over_the_cap_are_dropped_and_counted(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(fault="twice", on=["completed"]))
    server.courier.max_pending = 1
    submit(server, receiver.url)
    receiver.wait(1)
    time.sleep(0.3)
    assert len(receiver.got) == 1
    assert server.courier.dropped == 1


def test_a_sessions_reset_stops_the_deliveries_planned_for_its_tasks(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(with_callback(fault="late", late_by="400ms"))
    submit(server, receiver.url)
    deadline = time.monotonic() + 3
    while server.courier.pending < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.courier.pending == 2  # both changes happened; their deliveries wait
    server.reset("s")
    time.sleep(0.6)
    assert receiver.got == []
    assert callbacks_of(server) == []


def test_a_task_submitted_after_a_reset_has_its_own_callbacks(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(with_callback(on=["completed"]))
    first = submit(server, receiver.url).json()["task"]["id"]
    server.reset("s")  # the first task forgotten: its completion is never pushed
    time.sleep(0.1)
    submitted = time.time()
    second = submit(server, receiver.url).json()["task"]["id"]
    receiver.wait(1)
    time.sleep(0.3)
    assert [b["task"]["id"] for b in receiver.bodies()] == [second] != [first]
    assert 0.25 < receiver.got[0][0] - submitted < 0.45  # completed, 300 ms after its submit


# -- a shared store --------------------------------------------------------------------------


def test_on_a_shared_store_the_replica_that_took_the_submit_delivers(
    serve: Any, receiver: Receiver, redis_url: str
) -> None:
    took = serve(with_callback(), state=redis_url, replica="a")
    other = serve(with_callback(), state=redis_url, replica="b")
    task_id = submit(took, receiver.url).json()["task"]["id"]
    bodies = receiver.wait(2)
    time.sleep(0.3)
    assert [b["task"]["status"] for b in receiver.bodies()] == ["working", "completed"]
    assert {b["task"]["id"] for b in bodies} == {task_id}
    # The fleet's journal has them, named with the replica that sent them.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len(callbacks_of(other)) < 2:
        time.sleep(0.05)
    entries = callbacks_of(other)
    assert [(e["task"]["pushed"], e["replica"]) for e in entries] == [
        ("working", "a"),
        ("completed", "a"),
    ]


def test_a_cancel_served_by_another_replica_is_pushed_once(
    serve: Any, receiver: Receiver, redis_url: str
) -> None:
    took = serve(with_callback("long", fault="twice"), state=redis_url, replica="a")
    other = serve(with_callback("long", fault="twice"), state=redis_url, replica="b")
    location = submit(took, receiver.url, "long").headers["Location"]
    path = location[location.index("/skills/") :]
    assert requests.delete(other.url + path).status_code == 200  # cancelled at once, on b
    receiver.wait(2)
    time.sleep(0.4)  # (the submitting replica looks again at its next moment: none sends more)
    bodies = receiver.bodies()
    assert sorted((b["delivery"]["sequence"], b["task"]["status"]) for b in bodies) == [
        (0, "cancelled"),
        (0, "cancelled"),  # twice: two copies, each sent by one replica only
    ]
    entries = callbacks_of(took)
    assert len(entries) == 2
    assert {e["replica"] for e in entries} == {"b"}  # the replica that served the cancel


def test_an_input_served_by_another_replica_moves_the_pushed_life_on(
    serve: Any, receiver: Receiver, redis_url: str
) -> None:
    took = serve(with_callback("asking"), state=redis_url, replica="a")
    other = serve(with_callback("asking"), state=redis_url, replica="b")
    location = submit(took, receiver.url, "asking").headers["Location"]
    path = location[location.index("/skills/") :]
    assert [b["task"]["status"] for b in receiver.wait(1)] == ["input_required"]
    assert requests.post(other.url + path, json={"answer": 42}).status_code == 202
    receiver.wait(2)
    time.sleep(0.3)
    assert [b["task"]["status"] for b in receiver.bodies()] == ["input_required", "completed"]
    assert [(e["task"]["pushed"], e["replica"]) for e in callbacks_of(other)] == [
        ("input_required", "a"),
        ("completed", "b"),
    ]


def test_the_journal_lists_the_deliveries_by_their_endpoint(serve: Any, receiver: Receiver) -> None:
    server = serve(with_callback(on=["completed"]))
    submit(server, receiver.url)
    receiver.wait(1)
    time.sleep(0.1)
    listed = requests.get(f"{server.url}/__admin/journal", params={"endpoint": "callback"})
    assert listed.status_code == 200
    assert [e["task"]["pushed"] for e in listed.json()["entries"]] == ["completed"]


# -- a named case's own life (task_life:) ----------------------------------------------------

CASED = f"""
skills:
  - id: report
    task:
      life:
        - {{status: working, for: 50ms}}
        - {{status: completed, json: {{report: done}}}}
      callback: {{url: {{header: X-Callback-Url}}, secret: {SECRET}, backoff: 50ms}}
    invoke:
      cases:
        - name: fails
          when: {{headers: {{x-case: fails}}}}
          task_life:
            life:
              - {{status: working, for: 50ms}}
              - {{status: failed, error: EXECUTION_TIMEOUT}}
          steps: [{{task: submit}}]
        - name: silent
          when: {{headers: {{x-case: silent}}}}
          task_life:
            life: [{{status: working, for: 50ms}}, {{status: cancelled}}]
            callback: {{url: {{header: X-Callback-Url}}, secret: {SECRET}, fault: never}}
          steps: [{{task: submit}}]
      steps: [{{task: submit}}]
"""


def test_a_cases_task_pushes_its_own_life_to_the_skills_callback(
    serve: Any, receiver: Receiver
) -> None:
    server = serve(load_text(CASED, "cased.yaml"))
    answer = requests.post(
        f"{server.url}/skills/report/invoke",
        json={},
        headers={SESSION: "s", "X-Callback-Url": receiver.url, "Mockskill-Case": "fails"},
    )
    assert answer.status_code == 202
    bodies = receiver.wait(1)
    assert [b["task"]["status"] for b in bodies] == ["failed"]
    assert bodies[0]["task"]["error"]["code"] == "EXECUTION_TIMEOUT"
    assert receiver.got[0][1]["Mockskill-Signature"] == signed(receiver.got[0][2])


def test_a_cases_own_callback_replaces_the_skills(serve: Any, receiver: Receiver) -> None:
    server = serve(load_text(CASED, "cased.yaml"))
    headers = {SESSION: "s", "X-Callback-Url": receiver.url, "X-Case": "silent"}
    answer = requests.post(f"{server.url}/skills/report/invoke", json={}, headers=headers)
    status_url = answer.headers["Location"]
    time.sleep(0.2)  # past its life's end: a never fault pushed nothing
    assert requests.get(status_url).json()["task"]["status"] == "cancelled"
    assert receiver.bodies() == []
    submit(server, receiver.url)  # the skill's own task: pushed as the skill says
    assert [b["task"]["status"] for b in receiver.wait(1)] == ["completed"]
