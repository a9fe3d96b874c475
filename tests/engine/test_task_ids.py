"""Task ids (engine/task_ids.py): ``<session base64url>.<number>.<mac>``, read back only
when this server made them."""

from __future__ import annotations

import base64

import pytest

from mockskill.engine import task_ids
from mockskill.engine.digests import KeyedDigest
from mockskill.engine.entries import MAX_SESSION_NAME
from mockskill.engine.task_ids import MAX_TASK_ID, claimed_session, make, read

OURS = KeyedDigest(b"this server's key")
THEIRS = KeyedDigest(b"another server's key")
SKILL = "reports/report"


@pytest.mark.parametrize(
    "session",
    [
        pytest.param("default", id="default"),
        pytest.param("", id="empty"),
        pytest.param("test_a.py::test[1]", id="pytest-node-id"),
        pytest.param("é/ü ✓", id="non-ascii"),
        pytest.param("s" * MAX_SESSION_NAME, id="longest-ascii"),
        pytest.param("😀" * MAX_SESSION_NAME, id="longest-four-byte"),
    ],
)
@pytest.mark.parametrize("number", [0, 1, 41, 10**14])
def test_an_id_made_here_reads_back_as_its_session_and_number(session: str, number: int) -> None:
    task_id = make(session, number, OURS, SKILL)
    assert len(task_id) <= MAX_TASK_ID
    assert read(task_id, OURS, SKILL) == (session, number)


def test_an_id_is_its_session_in_base64url_its_number_and_ten_hex_digits() -> None:
    encoded, number, mac = make("a session?", 7, OURS, SKILL).split(".")
    assert base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == b"a session?"
    assert "=" not in encoded
    assert number == "7"
    assert len(mac) == 10
    assert set(mac) <= set("0123456789abcdef")


def test_an_id_is_safe_in_a_url_path() -> None:
    task_id = make("?/#%+ é", 3, OURS, SKILL)
    assert set(task_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_another_servers_id_is_not_ours() -> None:
    assert read(make("default", 0, THEIRS, SKILL), OURS, SKILL) is None


def test_an_id_is_ours_at_its_own_skills_status_url_only() -> None:
    task_id = make("default", 0, OURS, SKILL)
    assert read(task_id, OURS, "reports/other") is None
    assert read(task_id, OURS, "other/report") is None


def test_the_session_an_id_claims_is_read_without_its_mac() -> None:
    built = make("mine", 4, THEIRS, SKILL)  # a consumer's own, or another server's
    assert read(built, OURS, SKILL) is None
    assert claimed_session(built) == "mine"
    assert claimed_session("not an id") is None
    assert claimed_session("bWluZQ.4") is None


def test_ids_differ_by_session_and_number() -> None:
    ids = {make(s, n, OURS, SKILL) for s in ("a", "b", "ab") for n in (0, 1, 10)}
    assert len(ids) == 9


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda i: i.replace(".3.", ".4."), id="another-number"),
        pytest.param(lambda i: make_session("other") + i[i.index(".") :], id="another-session"),
        pytest.param(lambda i: i[:-1] + ("0" if i[-1] != "0" else "1"), id="another-mac"),
        pytest.param(lambda i: i.upper(), id="upper-case"),
        pytest.param(lambda i: i.replace(".3.", ".03."), id="leading-zero"),
        pytest.param(lambda i: i.replace(".3.", ".+3."), id="signed"),
        pytest.param(lambda i: i + ".", id="trailing-dot"),
        pytest.param(lambda i: i[: i.rindex(".")], id="no-mac"),
        pytest.param(lambda i: "x" + i, id="longer-session"),
        pytest.param(lambda i: i.replace("ZGVmYXVsdA", "ZGVmYXVsdB"), id="non-canonical-base64"),
        pytest.param(lambda i: i.replace("ZGVmYXVsdA", "ZGVmYXVsdA=="), id="padded"),
        pytest.param(lambda i: "/" + i, id="not-base64url"),
        pytest.param(lambda i: i.replace(".3.", ".3 ."), id="space"),
    ],
)
def test_an_altered_id_is_not_read(change: object) -> None:
    task_id = make("default", 3, OURS, SKILL)
    assert task_id.startswith("ZGVmYXVsdA.")
    altered = change(task_id)  # type: ignore[operator]
    assert altered != task_id
    assert read(altered, OURS, SKILL) is None


def make_session(session: str) -> str:
    return task_ids.make_session(session)


@pytest.mark.parametrize(
    "task_id",
    [
        pytest.param("", id="empty"),
        pytest.param("..", id="dots"),
        pytest.param("abc", id="one-part"),
        pytest.param("a.b.c", id="words"),
        pytest.param("_w8.0.0123456789", id="not-utf-8"),
        pytest.param("A.0.0123456789", id="impossible-base64-length"),
        pytest.param("a.99999999999999999999.0123456789", id="huge-number"),
        pytest.param("%00.0.0123456789", id="percent"),
    ],
)
def test_a_malformed_id_is_not_read(task_id: str) -> None:
    assert read(task_id, OURS, SKILL) is None


class Refuses:
    """Stands for the id's form: a test fails if an id is looked into."""

    def fullmatch(self, text: str) -> None:
        raise AssertionError(f"looked into an id of {len(text)} characters")


def test_an_id_over_the_bound_is_malformed_before_it_is_looked_into(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    longest = make("😀" * MAX_SESSION_NAME, 10**14, OURS, SKILL)
    assert len(longest) == MAX_TASK_ID
    monkeypatch.setattr(task_ids, "_FORM", Refuses())
    assert read("A" * (MAX_TASK_ID + 1), OURS, SKILL) is None
    assert read("A" * 10**6 + ".0.0123456789", OURS, SKILL) is None
    with pytest.raises(AssertionError, match="looked into"):
        read(longest, OURS, SKILL)


def test_a_session_name_over_the_limit_is_not_read_back() -> None:
    too_long = make("s" * (MAX_SESSION_NAME + 1), 0, OURS, SKILL)
    assert read(too_long, OURS, SKILL) is None
