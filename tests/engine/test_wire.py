"""An answer's bytes: its head rendered once with the transport's framing, or refused."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from mockskill.engine.wire import Answer


def test_a_head_carries_the_length_and_the_close_when_asked() -> None:
    answer = Answer(201, (("X-A", "1"),), b"body")
    assert answer.head(close=False) == (
        b"HTTP/1.1 201 Created\r\nX-A: 1\r\nContent-Length: 4\r\n\r\n"
    )
    assert answer.head(close=True).endswith(b"Content-Length: 4\r\nConnection: close\r\n\r\n")


def test_a_head_is_rendered_once() -> None:
    answer = Answer(200, (), b"x")
    assert answer.head(close=False) is answer.head(close=False)


def test_a_custom_reason_and_an_unknown_status() -> None:
    assert Answer(200, reason="Fine").head(close=False).startswith(b"HTTP/1.1 200 Fine\r\n")
    assert Answer(599).head(close=False).startswith(b"HTTP/1.1 599 Unknown\r\n")


def test_every_status_has_its_standard_phrase() -> None:
    # 200's is written out (http's enum is no part of start-up): the same as the others'.
    assert [Answer(s).phrase for s in HTTPStatus] == [s.phrase for s in HTTPStatus]


@pytest.mark.parametrize("status", [100, 204, 304])
def test_statuses_without_a_body_have_no_length(status: int) -> None:
    assert b"Content-Length" not in Answer(status, (), b"x").head(close=False)


@pytest.mark.parametrize(
    "header",
    [("X-A", "a\r\nInjected: 1"), ("X-A\r\nB", "v"), ("X:A", "v"), ("X-A", "a\nb")],
    ids=["crlf-in-value", "crlf-in-name", "colon-in-name", "lf-in-value"],
)
def test_a_header_that_would_break_the_framing_is_refused(header: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="would break the framing"):
        Answer(200, (header,))


def test_an_answer_renders_its_bytes_once_per_close_flag() -> None:
    answer = Answer(200, (("Content-Type", "text/plain"),), b"hello")
    assert answer.wire(close=False) == answer.head(close=False) + b"hello"
    assert answer.wire(close=True) == answer.head(close=True) + b"hello"
    assert b"Connection: close" in answer.wire(close=True)
    assert b"Connection" not in answer.wire(close=False)
    assert answer.wire(close=False) is answer.wire(close=False)  # kept, not re-joined
    assert answer.head(close=True) is answer.head(close=True)


def test_an_answer_without_a_body_sends_only_its_head() -> None:
    answer = Answer(204, (), b"ignored")
    assert answer.wire(close=False) == answer.head(close=False)
    assert answer.wire(close=False).endswith(b"\r\n\r\n")
