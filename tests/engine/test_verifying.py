"""Verifying the journal: entries counted against a verification, and the near misses.

Entries are made by hand with the fields the journal keeps of what was sent
(``target``, ``headers``, ``body``): the conditions are the language of a
case's ``when:``, read by the scenario reader and tested by the engine's own
``meets``/``failed``, so a journal entry is read as the request it was.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mockskill.engine.conditions import misses
from mockskill.engine.entries import Entry
from mockskill.engine.incoming import Incoming
from mockskill.engine.verifying import (
    NEAR_MISSES,
    Recorded,
    message,
    selected,
    verify,
)
from mockskill.scenario.loader import load_text
from mockskill.scenario.verification import read_verification, verification_of


def sent(
    id: int,
    body: Any = None,
    *,
    session: str = "S",
    method: str = "POST",
    path: str = "/skills/echo/invoke",
    query: str = "",
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),),
    skill: str | None = "echo",
    **fields: Any,
) -> Entry:
    """A journal entry of a request as sent: *body* a JSON value (or text as it is)."""
    text = None if body is None else body if isinstance(body, str) else json.dumps(body)
    return Entry(
        id,
        1.0,
        1.0,
        session,
        method,
        path,
        200,
        "invoke",
        skill=skill,
        target=path + (f"?{query}" if query else ""),
        headers=headers,
        body=text,
        body_encoding=None if text is None else "text",
        body_size=None if text is None else len(text.encode()),
        body_digest=None if text is None else "hmac-sha256:0",
        **fields,
    )


def asked(**document: Any) -> Any:
    return verification_of(document)


HELLO = {"input": {"text": "hello"}}


def test_a_body_condition_counts_the_requests_that_sent_it() -> None:
    entries = [sent(1, HELLO), sent(2, {"input": {"text": "hola"}}), sent(3, HELLO)]
    verified = verify(asked(when={"body": {"/input/text": "hello"}}), entries)
    assert verified.held
    assert [e.id for e in verified.matched] == [1, 3]
    assert verified.near_misses == ()  # none shown when it held


def test_the_count_is_at_least_one_unless_told() -> None:
    entries = [sent(1, HELLO), sent(2, HELLO)]
    assert verify(asked(), entries).held
    assert not verify(asked(), []).held
    assert not verify(asked(count=1), entries).held
    assert verify(asked(count={"equals": 2}), entries).held
    assert verify(asked(count={"at_most": 2}), entries).held
    assert not verify(asked(count={"at_most": 1}), entries).held
    assert verify(asked(count={"at_least": 1, "at_most": 3}), entries).held
    assert verify(asked(count=0), []).held


def test_a_verification_that_did_not_hold_shows_each_close_request_and_what_it_failed() -> None:
    entries = [
        sent(1, {"input": {"text": "hola"}}),
        sent(2, {"input": {"text": "hello"}}, skill="other", path="/skills/other/invoke"),
        sent(3, {"input": {"text": "hola"}}, query="lang=fr"),
    ]
    verification = asked(
        skill="echo", when={"body": {"/input/text": "hello"}, "query": {"lang": "en"}}
    )
    verified = verify(verification, entries)
    assert not verified.held
    # fewest failed conditions first; the newest first among equals
    hola = "body /input/text equals 'hello': found \"hola\""
    absent = "query parameter lang equals 'en': it is absent"
    assert [(m.entry.id, m.failed) for m in verified.near_misses] == [
        (3, (hola, "query parameter lang equals 'en': found \"fr\"")),
        (2, ("skill equals 'echo': found 'other'", absent)),
        (1, (hola, absent)),
    ]


def test_near_misses_are_the_closest_few() -> None:
    entries = [sent(n, {"input": {"text": "x"}}, method="PUT") for n in range(1, 10)]
    entries.append(sent(10, {"input": {"text": "x"}}))  # one condition failed, not two
    verified = verify(asked(method="POST", when={"body": {"/input/text": "y"}}), entries)
    assert len(verified.near_misses) == NEAR_MISSES
    assert [m.entry.id for m in verified.near_misses] == [10, 9, 8, 7, 6]


def test_too_many_is_said_with_the_matching_requests_and_no_near_misses() -> None:
    entries = [sent(1, HELLO), sent(2, HELLO)]
    verified = verify(asked(count=1), entries)
    assert not verified.held
    assert verified.near_misses == ()
    said = verified.message
    assert said.startswith("verify did not hold: expected exactly 1 request; found 2")
    assert "matched #1 POST /skills/echo/invoke" in said
    assert "matched #2 POST" in said


def test_only_the_session_named_is_read() -> None:
    entries = [sent(1, HELLO, session="A"), sent(2, HELLO, session="B")]
    verified = verify(asked(session="B"), entries)
    assert [e.id for e in verified.matched] == [2]
    assert verified.read == 1


def test_method_path_and_skill_narrow_the_requests() -> None:
    entries = [
        sent(1, method="GET", path="/orders/1", skill=None),
        sent(2, HELLO),
        sent(3, method="get", path="/orders/2", skill=None),
    ]
    assert [e.id for e in verify(asked(method="get"), entries).matched] == [1, 3]
    assert [e.id for e in verify(asked(path="/orders/2"), entries).matched] == [3]
    assert [e.id for e in verify(asked(skill="echo"), entries).matched] == [2]


def test_headers_are_read_in_any_case_and_repeated_ones_joined() -> None:
    headers = (("X-Trace", "a"), ("x-trace", "b"), ("Idempotency-Key", "k-1"))
    entry = sent(1, HELLO, headers=headers)
    assert verify(asked(when={"headers": {"idempotency-key": "k-1"}}), [entry]).held
    assert verify(asked(when={"headers": {"X-TRACE": "a,b"}}), [entry]).held
    assert verify(asked(when={"headers": {"x-missing": {"absent": True}}}), [entry]).held


def test_the_query_is_read_from_the_target_as_sent() -> None:
    entry = sent(1, query="q=caf%C3%A9&tag=a&tag=b&empty=")
    assert verify(asked(when={"query": {"q": "café"}}), [entry]).held
    assert verify(asked(when={"query": {"tag": "b"}}), [entry]).held
    assert verify(asked(when={"query": {"empty": ""}}), [entry]).held


def test_a_raw_body_condition_reads_the_text_kept() -> None:
    entry = sent(1, "plain words")
    assert verify(asked(when={"raw_body": {"contains": "words"}}), [entry]).held
    assert not verify(asked(when={"body": {"": {"exists": True}}}), [entry]).held


def test_a_cut_body_is_read_as_unreadable_and_said_so() -> None:
    kept = '{"input": {"text": "hel'
    entry = sent(1, kept)._replace(body_size=70_000)
    verified = verify(asked(when={"body": {"/input/text": "hello"}}), [entry])
    assert verified.near_misses[0].failed == (
        "body /input/text: the journal kept only part of its 70000 bytes",
    )
    raw = verify(asked(when={"raw_body": {"contains": "hel"}}), [entry])
    assert not raw.held  # a part is not the body: no test on it can be told
    assert "kept only part" in raw.near_misses[0].failed[0]


def test_a_body_whose_secrets_were_masked_is_still_read() -> None:
    shown = json.dumps({"password": "***", "user": "ann"})
    entry = sent(1, shown)._replace(body_size=len(shown) + 10)  # the secret was longer
    assert verify(asked(when={"body": {"/user": "ann"}}), [entry]).held


def test_a_base64_body_is_unreadable_and_said_so() -> None:
    entry = sent(1)._replace(body="3q2+7w==", body_encoding="base64", body_size=4)
    verified = verify(asked(when={"body": {"/a": 1}}), [entry])
    assert verified.near_misses[0].failed == (
        "body /a: the journal kept it as base64 (not UTF-8 text)",
    )


def test_what_the_journal_did_not_keep_cannot_hold_and_is_said() -> None:
    entry = sent(1)._replace(
        headers=None, target=None, body=None, body_encoding=None, body_digest="hmac-sha256:1"
    )
    verification = asked(
        when={"headers": {"x-a": {"absent": True}}, "query": {"a": "1"}, "body": {"/a": 1}}
    )
    verified = verify(verification, [entry])
    assert verified.near_misses[0].failed == (
        "header x-a: the journal did not keep its headers",
        "query parameter a: the journal did not keep its target",
        "body /a: the journal did not keep its body",
    )


def test_a_request_without_a_body_reads_as_an_empty_one() -> None:
    entry = sent(1, method="GET")
    verified = verify(asked(when={"body": {"/a": 1}}), [entry])
    assert verified.near_misses[0].failed == ("body /a: the body is empty",)


def test_a_journal_entry_is_read_as_the_request_it_was() -> None:
    """The same case, tried on a served request and on its journal entry, says the same."""
    scenarios = load_text(
        """
        name: m
        skills:
          - id: echo
            invoke:
              cases:
                - when:
                    headers: {x-mode: fast}
                    query: {lang: en}
                    body: {/input/text: {matches: "^hel"}}
                  json: {}
        """.replace("\n        ", "\n"),
        "m.yaml",
    )
    cases = scenarios.skills[0].invoke_cases
    body = b'{"input": {"text": "goodbye"}}'
    incoming = Incoming(
        "POST",
        "/skills/echo/invoke",
        {"x-mode": "slow", "content-type": "application/json"},
        body,
        ("localhost", 80),
        0.0,
        werkzeug=lambda: _werkzeug("/skills/echo/invoke", "lang=fr", body),
    )
    entry = sent(1, body.decode(), headers=(("X-Mode", "slow"),), query="lang=fr")
    assert misses(cases, incoming) == misses(cases, Recorded(entry))
    assert misses(cases, Recorded(entry))[0]["reasons"] == [
        "header x-mode equals 'fast': found \"slow\"",
        "query parameter lang equals 'en': found \"fr\"",
        "body /input/text matches '^hel': found \"goodbye\"",
    ]


def _werkzeug(path: str, query: str, body: bytes) -> Any:
    from werkzeug.test import EnvironBuilder

    return EnvironBuilder(path=path, query_string=query, method="POST", data=body).get_request()


def test_the_message_names_what_was_wanted_and_the_closest_requests() -> None:
    verification = read_verification(
        '{"session": "S", "skill": "echo", "when": {"body": {"/input/text": "hello"}}}'
    )
    verified = verify(verification, [sent(7, {"input": {"text": "hola"}})])
    assert verified.message == "\n".join(
        [
            "verify did not hold: expected at least 1 request to skill 'echo' of session 'S'"
            " where body /input/text equals 'hello'; found 0",
            "closest requests (fewest failed conditions first):",
            "  #7 POST /skills/echo/invoke (skill 'echo', 200)",
            "    body /input/text equals 'hello': found \"hola\"",
        ]
    )
    # the answer's JSON says the same (what RemoteServer and the command line print)
    assert message(verified.as_json()) == verified.message


def test_an_empty_journal_is_said_so() -> None:
    said = verify(asked(session="S"), []).message
    assert said.endswith("no other request to compare: 0 read in the journal")


def test_the_answer_holds_the_newest_matching_entries() -> None:
    entries = [sent(n, HELLO) for n in range(1, 31)]
    answer = verify(asked(), entries).as_json()
    assert answer["count"] == 30
    assert [e["id"] for e in answer["entries"]] == list(range(11, 31))


def test_selected_filters_as_the_requests_listing_does() -> None:
    entries = [sent(1, method="GET", path="/a", skill=None), sent(2, HELLO), sent(3, HELLO)]
    assert [e.id for e in selected(entries, method="get")] == [1]
    assert [e.id for e in selected(entries, skill="echo", limit=1)] == [3]
    assert [e.id for e in selected(entries, path="/a")] == [1]
    assert selected(entries, limit=0) == []
    with pytest.raises(ValueError, match="at least 0"):
        selected(entries, limit=-1)


def test_a_value_written_with_escapes_is_read_as_json_reads_it() -> None:
    """The body's text is searched before it is parsed only where that cannot be wrong:
    a value written with escapes is the value it stands for."""
    escaped = sent(1, '{"input": {"text": "h\\u0065llo", "q": "say \\"hi\\""}}')
    assert verify(asked(when={"body": {"/input/text": "hello"}}), [escaped]).held
    assert verify(asked(when={"body": {"/input/q": 'say "hi"'}}), [escaped]).held
    assert verify(asked(when={"body": {"/input/text": {"contains": "ell"}}}), [escaped]).held
    plain = sent(2, {"input": {"text": "hello", "tags": ["a", "b"]}})
    assert verify(asked(when={"body": {"/input/tags": {"contains": "b"}}}), [plain]).held
    assert not verify(asked(when={"body": {"/input/tags": {"contains": "c"}}}), [plain]).held
    assert verify(asked(when={"body": {"/input": {"contains": "tags"}}}), [plain]).held


def test_requests_sending_the_same_body_are_each_counted() -> None:
    entries = [sent(n, HELLO, headers=(("X-N", str(n)),)) for n in range(1, 5)]
    verification = asked(when={"body": {"/input/text": "hello"}, "headers": {"x-n": "3"}})
    verified = verify(verification, entries)
    assert [e.id for e in verified.matched] == [3]
    other = verify(asked(when={"body": {"/input/text": "hola"}}, count=0), entries)
    assert other.held


def test_a_header_value_is_found_whatever_the_other_headers_hold() -> None:
    headers = (("Accept", "a/b"), ("X-Tag", "one"), ("x-tag", "two"), ("X-Key", "k-1"))
    entry = sent(1, headers=headers)
    assert verify(asked(when={"headers": {"x-tag": "one,two"}}), [entry]).held
    assert verify(asked(when={"headers": {"x-tag": {"contains": "ne,tw"}}}), [entry]).held
    assert verify(asked(when={"headers": {"x-tag": {"contains": "two"}}}), [entry]).held
    # a value another header holds is not this one's
    missed = verify(asked(when={"headers": {"x-tag": "k-1"}}), [entry])
    assert missed.near_misses[0].failed == ("header x-tag equals 'k-1': found \"one,two\"",)
