"""What a recorded answer repeats from its request is written as a template (issue 28 item 7).

The unit tests read :func:`templated` on exchanges as a proxy hands them; the
last ones replay a written file against new requests, with a real client.
"""

from __future__ import annotations

from typing import Any

import requests
import yaml
from recording_helpers import exchange, replay  # noqa: F401  (replay: a fixture)

from mockskill.recording import write
from mockskill.recording.echoes import escaped, request_values, templated


def test_the_input_text_echoed_whole_is_read_from_the_request_body() -> None:
    sent = {"input": {"text": "hello there"}}
    answer = {"result": {"text": "hello there", "lang": "en"}}
    step = templated({"json": answer}, exchange("POST", "/skills/echo/invoke", answer, body=sent))
    assert step == {"json": {"result": {"text": "{{request.body/input/text}}", "lang": "en"}}}


def test_a_value_echoed_inside_a_longer_text_is_a_placeholder_there() -> None:
    sent = {"input": {"name": "Ada Lovelace"}}
    step = templated(
        {"text": "Hello, Ada Lovelace! {{not a template}}"},
        exchange("POST", "/skills/greet/invoke", body=sent),
    )
    assert step == {"text": "Hello, {{request.body/input/name}}! \\{{not a template}}"}


def test_query_parameters_and_correlation_headers_are_echoes_too() -> None:
    ex = exchange(
        "GET",
        "/orders?order=ord-1234&format=json",
        headers=(("X-Request-Id", "req-77aa"), ("Accept", "application/json")),
    )
    step = templated(
        {"json": {"order": "ord-1234", "trace": "req-77aa", "type": "application/json"}},
        ex,
    )
    assert step["json"] == {
        "order": "{{request.query.order}}",
        "trace": "{{request.header.X-Request-Id}}",
        "type": "application/json",  # Accept is no request's own value
    }


def test_short_values_and_secrets_are_never_taken_for_echoes() -> None:
    sent = {"lang": "en", "password": "hunter22", "client_secret": "s3cr3t-value"}
    ex = exchange(
        "POST",
        "/login?api_key=k-123456",
        body=sent,
        headers=(("Authorization", "Bearer tok-123456"),),
    )
    assert request_values(ex) == []
    step = templated({"json": {"lang": "en", "echo": "hunter22"}}, ex)
    assert step["json"] == {"lang": "en", "echo": "hunter22"}


def test_a_pointer_escapes_slash_and_tilde_as_rfc_6901_says() -> None:
    ex = exchange("POST", "/x", body={"a/b": {"c~d": "value-1"}})
    assert request_values(ex) == [("value-1", "request.body/a~1b/c~0d")]


def test_a_literal_double_brace_renders_as_itself() -> None:
    assert escaped("no braces") == "no braces"
    assert escaped("{{x}}") == "\\{{x}}"
    assert escaped("\\{{x}}") == "\\\\\\{{x}}"  # the backslash kept, the braces escaped
    assert escaped("{{{{") == "\\{{\\{{"


def test_keys_are_escaped_and_never_templated() -> None:
    ex = exchange("POST", "/x", body={"k": "value-1"})
    step = templated({"json": {"{{value-1}}": "value-1", "n": 5}}, ex)
    assert step["json"] == {"\\{{value-1}}": "{{request.body/k}}", "n": 5}


def test_a_replay_answers_each_new_request_with_its_own_values(replay: Any) -> None:  # noqa: F811
    recorded = [
        exchange(
            "POST",
            "/skills/echo/invoke",
            {"result": {"text": text, "note": "{{literal}}"}},
            body={"input": {"text": text}},
        )
        for text in ("first text", "second text")
    ]
    written = write(recorded, delays=False)
    steps = yaml.safe_load(written.text)["skills"][0]["invoke"]["steps"]
    # Two requests answered alike once their echoes are placeholders: one step.
    assert steps == [
        {
            "json": {"result": {"text": "{{request.body/input/text}}", "note": "\\{{literal}}"}},
            "times": 2,
        }
    ]
    server = replay(written.text)
    got = requests.post(
        server.invoke_url("echo"), json={"input": {"text": "a third one"}}, timeout=10
    )
    assert got.json() == {"result": {"text": "a third one", "note": "{{literal}}"}}
