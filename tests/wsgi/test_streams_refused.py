"""A WSGI server answers a request with one body: a stream step is refused when it is
loaded, positioned, as a transport fault is (mockskill's own server plays it)."""

from __future__ import annotations

import textwrap

import pytest

from mockskill import ScenarioError, create_app, load_text
from mockskill.engine.engine import Engine
from mockskill.engine.state import State

STREAMING = textwrap.dedent(
    """\
    skills:
      - id: plain
        invoke: {json: {result: ok}}
      - id: tokens
        invoke:
          - {json: {result: ok}}
          - stream:
              events: [{data: {text: hi}}]
    """
)


def test_an_engine_without_mockskills_transport_refuses_a_stream_step_where_it_is() -> None:
    with pytest.raises(ScenarioError) as raised:
        Engine(load_text(STREAMING, "streams.yaml"), State(), raw_socket=False)
    [problem] = raised.value.problems
    assert (problem.file, problem.line, problem.path) == ("streams.yaml", 7, "stream")
    assert "a stream of events, which mockskill's own transport plays" in str(raised.value)
    assert "serve with `mockskill serve` or mockskill.Server" in str(raised.value)


def test_a_stream_among_a_random_steps_choices_is_refused_too() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: sometimes
            invoke:
              one_of:
                - {weight: 1, json: {result: ok}}
                - {weight: 1, stream: {events: [{data: a}]}}
        """
    )
    with pytest.raises(ScenarioError, match="a stream of events"):
        Engine(load_text(text, "random.yaml"), State(), raw_socket=False)


def test_the_mounted_apps_admin_refuses_a_stream_and_keeps_serving_what_it_served() -> None:
    client = create_app().test_client()
    answer = client.post("/__admin/scenarios?file=streams.yaml", data=STREAMING)
    assert answer.status_code == 422
    error = answer.get_json()["error"]
    assert error["code"] == "MOCKSKILL_INVALID_SCENARIO"
    [problem] = error["details"]["problems"]
    assert (problem["line"], problem["path"]) == (7, "stream")
    assert client.get("/skills").get_json() == {"skills": []}
    plain = "skills: [{id: plain, invoke: {json: {result: ok}}}]\n"
    assert client.post("/__admin/scenarios", data=plain).status_code == 201
    assert client.post("/skills/plain/invoke").get_json() == {"result": "ok"}


def test_given_the_raw_socket_a_wsgi_mount_answers_a_stream_step_501_saying_why() -> None:
    engine = Engine(load_text(STREAMING, "streams.yaml"), State(), raw_socket=True)
    client = create_app(engine).test_client()
    assert client.post("/skills/tokens/invoke").get_json() == {"result": "ok"}
    answer = client.post("/skills/tokens/invoke")
    assert answer.status_code == 501
    error = answer.get_json()["error"]
    assert error["code"] == "MOCKSKILL_STREAM_UNSUPPORTED"
    assert error["details"] == {"where": "streams.yaml:7:9"}
    assert "only mockskill's own server plays" in error["message"]
    assert [entry.status for entry in engine.state.journal()] == [200, 501]
