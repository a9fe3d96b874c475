"""Answers made from the request, on a real server with real clients (issue 28, items 5, 6
and 12): each value a placeholder reads, the types a whole placeholder keeps, ``--seed``
replaying ids, the attacks rendered inert or bounded, and a template that cannot be
rendered answered as mockskill's own labelled 400, journalled, never a 500."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import requests
from werkzeug.test import Client

from mockskill import Server, create_app, load_text
from mockskill.engine.engine import Engine
from mockskill.engine.journalling import MAX_KEPT_PREFIXES
from mockskill.engine.state import State

ECHO = """
name: templating
skills:
  - id: echo
    invoke:
      headers: {X-Trace: '{{request.header.X-Trace | default "none"}}', X-Id: "{{id}}"}
      json:
        result:
          text: "{{request.body/input/text}}"
          id: "{{id}}"
          at: "{{now}}"
          ms: "{{now.epoch_ms}}"
          session: "{{session}}"
          attempt: "{{attempt}}"
          skill: "{{skill.id}}"
          n: "{{request.body/input/n | default 0}}"
          said: "{{session}} said {{request.body/input/text}}"
          roll: "{{random.int 1 1000000}}"
          base: "{base_url}/skills/echo"
routes:
  - path: /orders/<int:id>
    method: GET
    steps:
      - text: "order {{request.path.id}}, expand={{request.query.expand | default \\"no\\"}}"
  - path: /fail
    method: POST
    steps:
      - error: PERMISSION_DENIED
        message: "{{request.header.X-User}} may not do this"
        details: {user: "{{request.header.X-User}}", asked: "{{request.body/what}}"}
"""


def echo(server: Server, payload: object, **headers: str) -> requests.Response:
    return requests.post(server.invoke_url("echo"), json=payload, headers=headers, timeout=10)


def test_every_value_a_placeholder_reads_comes_from_the_request_and_the_run(
    serve: Callable[..., Server],
) -> None:
    server = serve(ECHO)
    before = datetime.now(UTC).timestamp()
    answer = echo(server, {"input": {"text": "hello", "n": 7}}, **{"X-Trace": "t-1"})
    after = datetime.now(UTC).timestamp()
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["text"] == "hello"
    assert uuid.UUID(result["id"]).version == 4
    assert answer.headers["X-Id"] == result["id"]  # one id per answer, body and headers
    assert answer.headers["X-Trace"] == "t-1"
    assert result["n"] == 7  # a whole placeholder keeps its JSON type
    assert (result["session"], result["attempt"], result["skill"]) == ("default", 1, "echo")
    assert result["said"] == "default said hello"
    assert before - 1 <= result["ms"] / 1000 <= after + 1
    at = datetime.fromisoformat(result["at"].replace("Z", "+00:00"))
    assert at.timestamp() == result["ms"] / 1000
    assert 1 <= result["roll"] <= 1_000_000
    assert result["base"] == f"{server.url}/skills/echo"


def test_the_attempt_counts_the_sessions_requests_and_defaults_stand_in(
    serve: Callable[..., Server],
) -> None:
    server = serve(ECHO)
    first = echo(server, {"input": {"text": "a"}}, **{"Mockskill-Session": "s1"}).json()
    second = echo(server, {"input": {"text": "b"}}, **{"Mockskill-Session": "s1"})
    other = echo(server, {"input": {"text": "c"}}, **{"Mockskill-Session": "s2"}).json()
    assert (first["result"]["attempt"], second.json()["result"]["attempt"]) == (1, 2)
    assert (other["result"]["attempt"], other["result"]["session"]) == (1, "s2")
    assert first["result"]["n"] == 0
    assert second.headers["X-Trace"] == "none"
    assert first["result"]["id"] != second.json()["result"]["id"]


def test_a_free_routes_path_variables_and_query(serve: Callable[..., Server]) -> None:
    server = serve(ECHO)
    assert httpx.get(f"{server.url}/orders/42?expand=items").text == "order 42, expand=items"
    assert httpx.get(f"{server.url}/orders/7").text == "order 7, expand=no"


def test_an_errors_message_and_details_are_templates(serve: Callable[..., Server]) -> None:
    server = serve(ECHO)
    answer = requests.post(
        f"{server.url}/fail", json={"what": ["x", 1]}, headers={"X-User": "ann"}, timeout=10
    )
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert error["message"] == "ann may not do this"
    assert error["details"]["user"] == "ann"
    assert error["details"]["asked"] == ["x", 1]


def test_the_same_seed_replays_the_same_ids_and_numbers(serve: Callable[..., Server]) -> None:
    def run(seed: int) -> list[tuple[str, int]]:
        server = serve(ECHO, seed=seed)
        answers = [echo(server, {"input": {"text": "x"}}).json()["result"] for _ in range(3)]
        return [(a["id"], a["roll"]) for a in answers]

    first, again, other = run(11), run(11), run(12)
    assert first == again
    assert len({i for i, _ in first}) == 3
    assert first != other


def test_a_kept_templated_step_draws_the_ids_and_numbers_the_general_path_draws(
    serve: Callable[..., Server],
) -> None:
    # On the loop the step is kept and made per request (the session's draw prefix kept);
    # the WSGI player takes the general path: one seed, one order of sessions, one answer.
    sessions = ("a", "b", "a", "a", "c", "b")
    server = serve(ECHO, seed=21)
    on_loop = [
        echo(server, {"input": {"text": "x"}}, **{"Mockskill-Session": s}).json()["result"]
        for s in sessions
    ]
    client = Client(create_app(Engine(load_text(ECHO, "wsgi.yaml"), State(seed=21))))
    general = [
        json.loads(
            client.post(
                "/skills/echo/invoke",
                json={"input": {"text": "x"}},
                headers={"Mockskill-Session": s},
            ).get_data()
        )["result"]
        for s in sessions
    ]
    assert [(a["id"], a["roll"]) for a in on_loop] == [(a["id"], a["roll"]) for a in general]
    assert len({a["id"] for a in on_loop}) == len(sessions)


def test_a_client_inventing_sessions_grows_no_kept_draw_prefixes(
    serve: Callable[..., Server],
) -> None:
    server = serve("skills:\n  - id: s\n    invoke:\n      json: {id: '{{id}}'}\n")
    with requests.Session() as client:
        for n in range(MAX_KEPT_PREFIXES + 40):
            headers = {"Mockskill-Session": f"s{n}"}
            answer = client.post(server.invoke_url("s"), headers=headers, timeout=10)
            assert uuid.UUID(answer.json()["id"]).version == 4
    kept = [p for _, _, plains in server.engine._plains.values() for p in plains.rendered if p]
    assert kept
    assert all(len(p.prefixes) <= MAX_KEPT_PREFIXES for p in kept)


def test_placeholders_in_what_the_request_sends_are_text_never_read_again(
    serve: Callable[..., Server],
) -> None:
    server = serve(ECHO)
    sent = "{{session}} {{id}} {base_url} \\{{now}}"
    result = echo(server, {"input": {"text": sent}}).json()["result"]
    assert result["text"] == sent
    assert result["said"] == f"default said {sent}"


def test_a_huge_expansion_stops_at_the_bound_as_mockskills_labelled_error(
    serve: Callable[..., Server],
) -> None:
    copies = ", ".join(['"{{request.body}}"'] * 8)
    server = serve(f"skills:\n  - id: big\n    invoke:\n      json: [{copies}]\n")
    body = {"blob": "x" * 200_000}  # 8 copies: 1.6 MB, over the 1 MiB an answer may be
    answer = requests.post(server.invoke_url("big"), json=body, timeout=10)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "MOCKSKILL_TEMPLATE_NOT_RENDERED"
    assert "larger than 1048576 bytes" in error["details"]["why"]
    assert len(answer.content) < 2000
    small = requests.post(server.invoke_url("big"), json={"a": 1}, timeout=10)
    assert small.json() == [{"a": 1}] * 8


def test_a_template_that_cannot_be_rendered_is_a_labelled_400_journalled(
    serve: Callable[..., Server],
) -> None:
    server = serve(ECHO)
    answer = requests.post(
        server.invoke_url("echo"), data=b"not json", headers={"Mockskill-Session": "bad"}
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "MOCKSKILL_TEMPLATE_NOT_RENDERED"
    details = error["details"]
    assert details["made_by"].startswith("mockskill")
    assert (details["scenario"], details["step"]) == ("templating", 1)
    assert details["placeholder"] == "{{request.body/input/text}}"
    assert details["why"] == "the body is not JSON"
    assert re.match(
        r"test\.yaml:\d+:\d+ \(skills\[0\]\.invoke\.json\.result\.text\)", details["at"]
    )
    [entry] = server.journal("bad")
    assert (entry.status, entry.error_code) == (400, "MOCKSKILL_TEMPLATE_NOT_RENDERED")


def test_a_header_that_would_break_the_answer_is_refused_not_sent(
    serve: Callable[..., Server],
) -> None:
    server = serve(
        "skills:\n  - id: h\n    invoke:\n"
        "      headers: {X-Echo: '{{request.body/v}}'}\n      json: {ok: true}\n"
    )
    fine = requests.post(server.invoke_url("h"), json={"v": "plain"}, timeout=10)
    assert fine.headers["X-Echo"] == "plain"
    split = requests.post(server.invoke_url("h"), json={"v": "a\r\nX-Evil: 1"}, timeout=10)
    assert split.status_code == 400
    assert "X-Evil" not in split.headers
    assert split.json()["error"]["details"]["placeholder"] == "{{request.body/v}}"


def test_a_templated_step_is_made_per_request_not_kept(serve: Callable[..., Server]) -> None:
    server = serve("skills:\n  - id: s\n    invoke:\n      json: {session: '{{session}}'}\n")
    for session in ("a", "b", "a"):
        answer = requests.post(
            server.invoke_url("s"), headers={"Mockskill-Session": session}, timeout=10
        )
        assert answer.json() == {"session": session}


def test_the_wsgi_player_renders_templates_too() -> None:
    engine = Engine(load_text(ECHO, "wsgi.yaml"), State(seed=3))
    client = Client(create_app(engine))
    answer = client.post("/skills/echo/invoke", json={"input": {"text": "wsgi"}})
    assert answer.status_code == 200
    result = json.loads(answer.get_data())["result"]
    assert (result["text"], result["attempt"]) == ("wsgi", 1)
    assert answer.headers["X-Id"] == result["id"]
    bad = client.post("/skills/echo/invoke", data=b"{")
    assert bad.status_code == 400
    assert json.loads(bad.get_data())["error"]["code"] == "MOCKSKILL_TEMPLATE_NOT_RENDERED"


def test_a_proxy_steps_after_answer_is_rendered_from_the_request(
    serve: Callable[..., Server],
) -> None:
    upstream = serve("skills:\n  - id: job\n")
    front = serve(
        "skills:\n  - id: job\n    invoke:\n      proxy: " + upstream.url + "\n"
        "      after: {error: EXECUTION_TIMEOUT, message: 'lost {{request.body/job}}'}\n"
    )
    answer = requests.post(front.invoke_url("job"), json={"job": "j-7"}, timeout=10)
    assert answer.status_code == 504
    assert answer.json()["error"]["message"] == "lost j-7"
