"""mockskill.audit.verdict's gate of one session, pure over entries: session_verdict.

The route (tests/admin/test_verdict_routes.py) reads it over HTTP; here what it
says of a session that sent nothing, and the names its ``required`` takes.
"""

from __future__ import annotations

import pytest

from mockskill.audit import GATE_NAMES, required_names, session_verdict, unknown_session


def test_a_session_that_made_no_request_is_never_clean() -> None:
    verdict = session_verdict("quiet", [])
    assert (verdict["clean"], verdict["requests"], verdict["findings"]) == (False, 0, [])
    assert verdict["detail"] == (
        "session 'quiet' is not clean: it made no request (is the Mockskill-Session header sent?)"
    )


def test_a_session_that_made_no_request_covers_nothing_it_is_asked() -> None:
    verdict = session_verdict("quiet", [], ["RATE_LIMITED", "TASK_FAILED:AUTH_REQUIRED"])
    assert verdict["covered"] == []
    assert verdict["uncovered"] == ["RATE_LIMITED", "TASK_FAILED:AUTH_REQUIRED"]


def test_required_names_split_commas_and_keep_each_once_in_order() -> None:
    assert required_names(["AUTH_REQUIRED, EMPTY_RESPONSE", "AUTH_REQUIRED", ""]) == [
        "AUTH_REQUIRED",
        "EMPTY_RESPONSE",
    ]
    assert required_names(GATE_NAMES) == list(GATE_NAMES)


def test_an_unknown_required_name_is_refused_with_the_closest_one() -> None:
    with pytest.raises(ValueError, match=r"rate-limited \(did you mean 'RATE_LIMITED'\?\)"):
        session_verdict("quiet", [], ["rate-limited"])


def test_an_unknown_session_of_an_empty_journal_says_so() -> None:
    assert unknown_session("ci-7", []) == (
        "the journal has no request of session 'ci-7' (a mistyped name, a session reset, or"
        " requests without the Mockskill-Session header); no session has made a request",
        [],
    )
