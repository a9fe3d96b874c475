"""A scripted reply: rendered once, with the ``{base_url}`` placeholders it holds marked."""

from __future__ import annotations

import json

import pytest

from mockskill.protocol.catalog import BASE_URL, Retry, render
from mockskill.scenario.reply import JSON_TYPE, TEXT_TYPE, Reply


@pytest.mark.parametrize(
    ("body", "headers", "templated"),
    [
        pytest.param(b'{"ok": true}', {}, False, id="plain"),
        pytest.param(f'{{"url": "{BASE_URL}/x"}}'.encode(), {}, True, id="in-body"),
        pytest.param(b"{}", {"Location": f"{BASE_URL}/skills/x"}, True, id="in-header"),
        pytest.param(b"{}", (("Link", f"<{BASE_URL}/a>"),), True, id="in-header-pairs"),
        pytest.param(b"{base}", {"X-Url": "{baseurl}"}, False, id="look-alikes"),
    ],
)
def test_make_detects_the_base_url_placeholder(
    body: bytes, headers: dict[str, str], templated: bool
) -> None:
    assert Reply.make(200, body, JSON_TYPE, headers).templated is templated


def test_make_takes_headers_as_a_mapping_or_as_pairs() -> None:
    from_mapping = Reply.make(200, b"", TEXT_TYPE, {"A": "1", "B": "2"})
    from_pairs = Reply.make(200, b"", TEXT_TYPE, (("A", "1"), ("B", "2")))
    assert from_mapping.headers == from_pairs.headers == (("A", "1"), ("B", "2"))


def test_json_reply_serialises_the_value() -> None:
    reply = Reply.json(201, {"result": "ok"})
    assert reply.status == 201
    assert reply.content_type == JSON_TYPE
    assert json.loads(reply.body) == {"result": "ok"}
    assert reply.error_code is None
    assert reply.retry is None


def test_error_reply_keeps_code_status_headers_and_advice() -> None:
    reply = Reply.error(render("EXECUTION_TIMEOUT", status=408))
    assert reply.status == 408
    assert reply.error_code == "EXECUTION_TIMEOUT"
    assert reply.retry == Retry(5000, 3)
    assert ("Retry-After", "5") in reply.headers
    assert reply.content_type == JSON_TYPE
    assert json.loads(reply.body)["error"]["code"] == "EXECUTION_TIMEOUT"


def test_error_reply_with_placeholder_urls_is_templated() -> None:
    reply = Reply.error(render("AUTH_REQUIRED"))
    assert reply.templated
