"""What the consumer sent, as an entry records it (raw, cut to bounds) and shows it (decoded,
masked): mockskill/engine/entries.py."""

from __future__ import annotations

import json
import sys
from typing import Any

from mockskill.engine.entries import (
    _STEMS,
    MASK,
    MASKED_FIELDS,
    MAX_HEADER_BYTES,
    MAX_TARGET,
    MAX_TEXT,
    Entry,
    kept,
    packed,
    redaction,
    sent_headers,
    sent_target,
    unpacked,
)


def recorded(**sent: Any) -> Entry:
    """An entry as the engine records one: what the request sent as read."""
    return Entry(1, 1.0, 2.0, "s", "POST", "/x", 200, "invoke", **sent)


def shown_body(body: bytes, hidden: tuple[str, ...] = ()) -> str | None:
    return kept(recorded(target="/x", headers=(), body=body, body_size=len(body)), hidden).body


def test_a_json_body_s_secrets_are_masked_in_its_own_text() -> None:
    body = b'{\n  "client_secret" : "a\\"b",\n  "n": 1, "deep": [{"Refresh_Token": "r"}]\n}'
    assert shown_body(body) == (
        f'{{\n  "client_secret" : "{MASK}",\n  "n": 1, "deep": [{{"Refresh_Token": "{MASK}"}}]\n}}'
    )


def test_a_secret_no_pattern_can_mask_in_place_is_masked_in_the_document_written_anew() -> None:
    # A key written with an escape, and a secret holding an object: the text cannot be
    # masked in place, so the document is written again, its shape kept.
    body = b'{"\\u0070assword": "pw", "access_token": {"v": "t"}, "keep": "\xc3\xa9"}'
    shown = shown_body(body)
    assert shown is not None
    assert json.loads(shown) == {"password": MASK, "access_token": MASK, "keep": "é"}
    assert "pw" not in shown


def test_a_json_body_cut_inside_a_secret_still_hides_it() -> None:
    body = b'{"text": "hi", "password": "hunter2-and-more'
    entry = kept(recorded(target="/x", headers=(), body=body, body_size=10_000), ())
    assert entry.body == f'{{"text": "hi", "password": "{MASK}"'


def test_a_form_body_s_secrets_are_masked_its_other_fields_kept() -> None:
    body = b"grant_type=password&username=u&password=p%26w&client_secret=s"
    assert (
        shown_body(body) == f"grant_type=password&username=u&password={MASK}&client_secret={MASK}"
    )


def test_a_body_without_a_secret_is_shown_as_sent() -> None:
    body = b'{"input": {"text": "the password is in the text, not a key"}}'
    assert shown_body(body) == body.decode()


def test_names_added_by_the_user_mask_headers_query_and_fields() -> None:
    entry = recorded(
        target="/x?PIN=1&q=2",
        headers=((b"X-Pin", b"9"), (b"Accept", b"*/*")),
        body=b'{"pin": "9"}',
        body_size=12,
    )
    shown = kept(entry, (redaction("pin"), redaction(" X-PIN ")))
    assert shown.target == f"/x?PIN={MASK}&q=2"
    assert shown.headers == (("X-Pin", MASK), ("Accept", "*/*"))
    assert shown.body == f'{{"pin": "{MASK}"}}'


def test_a_hidden_secret_is_masked_in_what_was_sent_too() -> None:
    entry = recorded(
        target="/x?t=adm1n", headers=((b"X-Admin", b"adm1n"),), body=b"adm1n", body_size=5
    )
    shown = kept(entry, ("adm1n",))
    assert (shown.target, shown.headers, shown.body) == (
        f"/x?t={MASK}",
        (("X-Admin", MASK),),
        MASK,
    )


def test_odd_bytes_in_a_target_and_headers_are_shown_escaped() -> None:
    entry = recorded(
        target="/caf\xc3\xa9?q=a b",  # UTF-8 é as Latin-1 read it, and a space
        headers=((b"X-Name", "café".encode()), (b"X-Line", b"a\x7fb"), (b"X-Tab", b"a\tb")),
    )
    shown = kept(entry, ())
    assert shown.target == "/caf%C3%A9?q=a%20b"
    # Latin-1, as HTTP reads header bytes; what prints other than it reads, escaped (but a
    # tab, which a header value may hold).
    assert shown.headers == (
        ("X-Name", "caf\xc3\xa9"),
        ("X-Line", "a%7Fb"),
        ("X-Tab", "a\tb"),
    )


def test_headers_over_the_bound_are_cut_each_still_listed() -> None:
    pairs = ((b"A" * 300, b"1"), (b"Big", b"v" * MAX_HEADER_BYTES), (b"After", b"2"))
    size = sum(len(k) + len(v) for k, v in pairs)
    cut = sent_headers(pairs, size)
    assert cut[0] == (b"A" * MAX_TEXT + b"...[%d more bytes]" % (300 - MAX_TEXT), b"1")
    assert cut[1] == (b"Big", b"v" * (MAX_HEADER_BYTES - 1) + b"...[1 more bytes]")
    assert cut[2] == (b"After", b"...[1 more bytes]")
    small = pairs[2:]
    assert sent_headers(small, 7) is small  # within the bound: kept as read, no copy


def test_a_target_over_the_bound_is_cut_marked() -> None:
    long = "/" + "a" * (2 * MAX_TARGET)
    assert sent_target(long) == long[:MAX_TARGET] + f"...[{MAX_TARGET + 1} more characters]"
    assert sent_target("/short") == "/short"


def test_what_was_sent_reads_the_same_after_the_journal_is_packed() -> None:
    entry = recorded(
        target="/x?token=t",
        headers=((b"Authorization", b"Bearer t"),),
        body=b"\x00\x01",
        body_size=2,
    )
    (unpacked_entry,) = unpacked(packed([((), entry)]), 1)
    assert unpacked_entry == kept(entry, ())
    assert unpacked_entry.body == "AAE="
    assert unpacked_entry.body_encoding == "base64"


def test_a_shown_entry_holds_text_and_round_trips_through_json() -> None:
    entry = kept(
        recorded(target="/x", headers=((b"A", b"1"), (b"A", b"2")), body=b"{}", body_size=2),
        (),
    )
    assert Entry.from_json(json.loads(json.dumps(entry.as_json()))) == entry
    assert all(isinstance(v, str) for pair in entry.headers or () for v in pair)
    assert sys.getsizeof(entry.body) < 100


def test_every_built_in_secret_field_holds_a_stem_the_quick_search_looks_for() -> None:
    assert all(any(stem in field for stem in _STEMS) for field in MASKED_FIELDS)
