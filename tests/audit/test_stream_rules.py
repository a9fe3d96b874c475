"""How a consumer recovers from a stream that went wrong, graded on hand-made journals.

Each streamed request journals ``Entry.stream`` (entries.py's docstring). The three stream
rules (``resume-ignored``, ``stall-not-detected``, ``gave-up-despite-progress``) read it;
a stream cut short is a failed attempt of its chain (with its ``retry:`` as advice) and a
stream ending in an error event carries that error's code and advice, so the retry rules
(``retry-too-soon``, ``non-retryable-retried``, ``duplicate-execution``) grade re-issues
of streams as they grade retries. The re-request's ``Last-Event-ID`` is read from
``Entry.stream["asked_from"]`` (journalled by the resuming engine), else from its headers.
Times are seconds from an arbitrary origin, binary fractions where a test stands on a bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from mockskill.audit import RULES, Policy, coverage, report
from mockskill.engine.entries import Entry
from mockskill.protocol.catalog import Retry

T0 = 1_000_000.0
DEFAULT = Policy()
BEARER = "bearer hmac-sha256:aa"


class Journal:
    """One session's streamed invokes, made in order: ids count up."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def stream(
        self,
        at: float,
        took: float,
        *,
        ended: str = "complete",
        events: int = 60,
        last_id: str | None = "60",
        stalled: float | None = 0.0,
        idle_bound_ms: int = 1000,
        expected_ms: int = 2000,
        resumable: bool = False,
        retry_ms: int | None = None,
        asked: str | None = None,
        sent_ids: list[str] | None = None,
        fault: str | None = None,
        fault_after: int | None = None,
        key: str | None = "k1",
        skill: str = "tokens",
        **fields: Any,
    ) -> Entry:
        """An invoke started *at* seconds from :data:`T0` answered with a stream that lasted
        *took* (the client leaving at its end when *ended* is ``client_left`` or it left a
        stall), its bytes stopped *stalled* seconds before the end."""
        record: dict[str, Any] = {
            "format": "sse",
            "events": events,
            "last_id": last_id,
            "ended": ended,
            "fault": fault,
            "fault_after": fault_after,
            "duration_ms": round(took * 1000),
            "resumed_from": None,
            "resumable": resumable,
            "retry_ms": retry_ms,
            "idle_bound_ms": idle_bound_ms,
            "expected_ms": expected_ms,
            "stalled_ms": None if stalled is None else round(stalled * 1000),
        }
        if asked is not None:
            record["asked_from"] = asked
        if sent_ids is not None:
            record["sent_ids"] = sent_ids
        left = fields.pop("client_left", None)
        if ended == "client_left" and left is None:
            left = T0 + at + took
        headers = (("Idempotency-Key", key),) if key is not None else ()
        fields.setdefault("credential", BEARER)
        entry = Entry(
            len(self.entries) + 1,
            T0 + at,
            T0 + at + took,
            "s",
            "POST",
            f"/skills/{skill}/invoke",
            200,
            "invoke",
            skill=skill,
            headers_sent=T0 + at,
            client_left=left,
            body_digest="hmac-sha256:body",
            executed=True,
            headers=fields.pop("headers", headers),
            stream=record,
            **fields,
        )
        self.entries.append(entry)
        return entry

    def findings(self, policy: Policy = DEFAULT) -> list[dict[str, Any]]:
        (session,) = report(self.entries, policy, now=T0 + 3600)["sessions"]
        findings: list[dict[str, Any]] = session["findings"]
        return findings

    def rules(self) -> list[str]:
        return [f["rule"] for f in self.findings()]


def ids(count: int) -> list[str]:
    return [str(n) for n in range(1, count + 1)]


def test_the_stream_rules_are_the_last_three() -> None:
    assert RULES[-3:] == ("resume-ignored", "stall-not-detected", "gave-up-despite-progress")


# -- resume-ignored ----------------------------------------------------------------------


def cut_resumable(journal: Journal, **fields: Any) -> Entry:
    """A resumable stream reset after event 40 (ids 1..40 sent)."""
    fields.setdefault("sent_ids", ids(40))
    return journal.stream(0, 0.8, ended="reset", events=40, last_id="40", resumable=True, **fields)


def test_a_cut_resumable_stream_re_requested_without_last_event_id_is_resume_ignored() -> None:
    journal = Journal()
    cut_resumable(journal)
    journal.stream(2, 0.5, asked=None)
    (found,) = journal.findings()
    assert found["rule"] == "resume-ignored"
    assert found["attempts"] == [1, 2]
    assert (
        found["message"] == "a resumable stream re-requested without Last-Event-ID (1 re-request)"
    )
    assert found["found"] == (
        "#2 after #1 (reset after 40 events, the last id '40'): no Last-Event-ID"
    )
    assert "Last-Event-ID" in found["fix"]


def test_resuming_after_the_last_id_or_an_earlier_one_it_was_sent_is_right() -> None:
    for asked in ("40", "38"):  # (a reset may lose the last events the client had not read)
        journal = Journal()
        cut_resumable(journal)
        journal.stream(2, 0.5, asked=asked)
        assert journal.rules() == [], asked


def test_an_id_the_stream_never_sent_is_resume_ignored_too() -> None:
    journal = Journal()
    cut_resumable(journal)
    journal.stream(2, 0.5, asked="41")
    (found,) = journal.findings()
    assert found["rule"] == "resume-ignored"
    assert found["message"] == (
        "a resumable stream re-requested without a Last-Event-ID it was sent (1 re-request)"
    )
    assert found["found"].endswith("Last-Event-ID '41', never sent")


@pytest.mark.parametrize(
    "asked",
    [
        "60",  # the last id the second attempt was sent
        "30",  # sent by the first attempt: a legitimate resume
    ],
)
def test_ids_of_an_earlier_attempt_count_as_sent(asked: str) -> None:
    journal = Journal()
    cut_resumable(journal)
    journal.stream(
        2,
        0.5,
        ended="reset",
        events=20,
        last_id="60",
        resumable=True,
        asked="40",
        sent_ids=[str(n) for n in range(41, 61)],
    )
    journal.stream(5, 0.5, asked=asked)
    assert journal.rules() == []


def test_when_the_ids_kept_were_cut_to_their_bound_no_id_is_called_never_sent() -> None:
    journal = Journal()
    cut_resumable(journal, sent_ids=[str(n) for n in range(1001, 2025)])  # 1024: the bound
    journal.stream(2, 0.5, asked="7")
    assert journal.rules() == []


def test_an_earlier_attempt_whose_ids_were_not_kept_may_have_sent_the_id() -> None:
    journal = Journal()
    journal.stream(0, 0.5, events=20, last_id="20", error_code="ENDPOINT_UNREACHABLE")
    journal.stream(2.5, 0.8, ended="reset", events=5, last_id="5", resumable=True,
                   sent_ids=ids(5))  # fmt: skip
    journal.stream(6, 0.5, asked="15")  # the first attempt's (its ids not kept)
    assert journal.rules() == []


def test_the_header_is_read_when_the_stream_did_not_journal_asked_from() -> None:
    journal = Journal()
    cut_resumable(journal)
    journal.stream(2, 0.5, headers=(("Idempotency-Key", "k1"), ("last-event-id", "40")))
    assert journal.rules() == []
    journal = Journal()
    cut_resumable(journal)
    journal.stream(2, 0.5, headers=(("Idempotency-Key", "k1"), ("Accept", "text/event-stream")))
    assert journal.rules() == ["resume-ignored"]


def test_a_re_request_whose_headers_were_not_kept_is_not_judged() -> None:
    journal = Journal()
    cut_resumable(journal)
    # --journal-bodies off (its key known as a skill honouring it journals it), no asked_from
    journal.stream(2, 0.5, headers=None, idempotency_key="k1")
    assert journal.rules() == []


@pytest.mark.parametrize(
    "first",
    [
        {"resumable": False},  # starting over is all it offers
        {"resumable": True, "last_id": None},  # cut before any id: nothing to resume after
    ],
)
def test_a_plain_re_request_is_right_when_there_is_nothing_to_resume(first: dict[str, Any]) -> None:
    journal = Journal()
    journal.stream(0, 0.8, ended="reset", events=40, **{"last_id": "40", **first})
    journal.stream(2, 0.5)
    assert journal.rules() == []


def test_a_request_after_a_whole_resumable_stream_is_a_new_one() -> None:
    journal = Journal()
    journal.stream(0, 1.2, resumable=True)
    journal.stream(2, 0.5)
    assert journal.rules() == []


# -- stall-not-detected ------------------------------------------------------------------


def stalled(journal: Journal, took: float, silent: float, *, left: bool = True) -> Entry:
    """A stream that stalled after event 10, held *took* seconds, its bytes stopped for
    the last *silent* of them; the consumer left at its end (else the server closed it)."""
    return journal.stream(
        0,
        took,
        ended="stall",
        events=10,
        last_id="10",
        stalled=silent,
        fault="stall",
        fault_after=10,
        client_left=T0 + took if left else None,
    )


def test_a_stall_held_past_the_idle_bound_is_stall_not_detected() -> None:
    journal = Journal()
    stalled(journal, 4, 3)
    (found,) = [f for f in journal.findings() if f["rule"] == "stall-not-detected"]
    assert found["attempts"] == [1]
    assert found["message"] == "1 stalled stream held open past the idle bound"
    assert found["found"] == (
        "#1: no byte for 3000 ms after event 10 (idle bound 1000 ms), then the consumer left"
    )
    assert "read (idle) timeout" in found["fix"]


def test_a_stall_held_until_the_server_closed_it_is_stall_not_detected() -> None:
    journal = Journal()
    stalled(journal, 6, 5, left=False)
    (found,) = journal.findings()  # the re-request that never came is no retry to judge
    assert found["rule"] == "stall-not-detected"
    assert found["found"].endswith("then the server closed it")


def test_leaving_within_the_idle_bound_and_its_slack_detected_the_stall() -> None:
    journal = Journal()
    stalled(journal, 2.25, 1.25)
    assert journal.rules() == []  # 1250 ms: the bound, 1000 ms, and the slack, 250 ms
    assert [f["rule"] for f in journal.findings(Policy(idle_slack_ms=100))] == [
        "stall-not-detected"
    ]


# -- gave-up-despite-progress ------------------------------------------------------------


def test_leaving_a_stream_still_delivering_before_its_expected_end_is_giving_up() -> None:
    journal = Journal()
    journal.stream(0, 0.5, ended="client_left", events=25, last_id="25", stalled=0.02)
    (found,) = [f for f in journal.findings() if f["rule"] == "gave-up-despite-progress"]
    assert found["attempts"] == [1]
    assert found["found"] == (
        "#1 left after 500 ms (expected 2000 ms), at event 25, 20 ms after the last byte"
    )
    assert "timeout that every event or heartbeat resets" in found["fix"]


@pytest.mark.parametrize(
    ("took", "fields"),
    [
        (2.0, {}),  # it stayed the expected time (the script ran longer)
        (0.5, {"fault": "bad_utf8", "fault_after": 20, "events": 21}),  # a broken event: a reason
        (0.5, {"stalled": 0.75, "idle_bound_ms": 500}),  # its bytes had stopped past the bound
    ],
)
def test_leaving_is_no_giving_up_when_it_had_a_reason(took: float, fields: dict[str, Any]) -> None:
    journal = Journal()
    journal.stream(0, took, ended="client_left", **{"stalled": 0.02, **fields})
    assert "gave-up-despite-progress" not in journal.rules()


def test_each_chain_gets_its_own_finding_naming_its_endpoint() -> None:
    journal = Journal()
    journal.stream(0, 0.5, ended="client_left", events=25, last_id="25", stalled=0.02)
    journal.stream(1, 0.5, ended="client_left", stalled=0.02, skill="slow")
    stalled(journal, 6, 5)
    found = [(f["rule"], f["endpoint"], f["attempts"]) for f in journal.findings()]
    assert found == [
        ("gave-up-despite-progress", "POST /skills/tokens/invoke", [1]),
        ("gave-up-despite-progress", "POST /skills/slow/invoke", [2]),
        ("stall-not-detected", "POST /skills/tokens/invoke", [3]),
    ]


def test_a_client_gone_before_the_head_left_no_stream() -> None:
    journal = Journal()
    journal.stream(0, 0.1, ended="client_left", events=0, last_id=None, stalled=None)
    assert "gave-up-despite-progress" not in journal.rules()


# -- the retry rules on streams ----------------------------------------------------------


def test_a_reconnect_sooner_than_the_streams_retry_field_is_retry_too_soon() -> None:
    journal = Journal()
    journal.stream(0, 0.5, ended="close", events=40, last_id="40", retry_ms=2000)
    journal.stream(0.625, 1)
    (found,) = journal.findings()
    assert found["rule"] == "retry-too-soon"
    assert found["attempts"] == [1, 2]
    assert found["expected"].startswith(
        "wait at least error.retry.suggested_delay_ms (2000 ms; the stream's retry: 2000)"
    )
    assert "its last retry: field" in found["fix"]
    patient = Journal()
    patient.stream(0, 0.5, ended="close", events=40, last_id="40", retry_ms=2000)
    patient.stream(2.5, 1)
    assert patient.rules() == []


def test_an_error_events_advice_is_an_error_answers() -> None:
    journal = Journal()
    journal.stream(0, 0.5, error_code="ENDPOINT_UNREACHABLE", retry=Retry(3000, 5))
    journal.stream(1, 1)
    (found,) = journal.findings()
    assert found["rule"] == "retry-too-soon"
    assert found["expected"].startswith(
        "wait at least error.retry.suggested_delay_ms (3000 ms; its error event's error.retry)"
    )


def test_a_non_retryable_error_event_re_issued_unchanged_is_non_retryable_retried() -> None:
    journal = Journal()
    journal.stream(0, 0.5, error_code="PERMISSION_DENIED", key=None)
    journal.stream(2, 1, key=None)  # (an error event is the provider's answer: seen, no rerun)
    (found,) = journal.findings()
    assert found["rule"] == "non-retryable-retried"
    assert found["message"] == "PERMISSION_DENIED retried unchanged (1 retry)"
    changed = Journal()
    changed.stream(0, 0.5, error_code="PERMISSION_DENIED")
    changed.stream(2, 1, credential="bearer hmac-sha256:bb")  # a token with the scope
    assert changed.rules() == []


def test_a_cut_post_stream_re_issued_without_its_key_ran_twice() -> None:
    journal = Journal()
    journal.stream(0, 0.8, ended="reset", events=40, last_id="40", key=None)
    journal.stream(2, 1.2, key=None)
    (found,) = journal.findings()
    assert found["rule"] == "duplicate-execution"
    assert found["found"] == (
        "#2 reached the provider again without Idempotency-Key after #1 had reached it"
        " (the skill ran, its answer replaced by 200)"
    )
    keyed = Journal()
    keyed.stream(0, 0.8, ended="reset", events=40, last_id="40", key="k1")
    keyed.stream(2, 1.2, key="k1")
    assert keyed.rules() == []


def test_a_resumed_stream_ran_nothing_again() -> None:
    journal = Journal()
    cut_resumable(journal)
    resumed = journal.stream(2, 0.5, asked="40", events=20)
    journal.entries[-1] = resumed._replace(stream={**(resumed.stream or {}), "resumed_from": "40"})
    assert journal.rules() == []


# -- relayed streams (a proxy step's: what the provider sent) ----------------------------


def relayed(journal: Journal, at: float, took: float, **fields: Any) -> Entry:
    """A stream relayed from a provider (the entry's ``upstream``), as a proxy journals it:
    no fault, no expected duration, no word on resuming."""
    key = fields.get("key", "k1")
    upstream = {"url": "http://provider", "reached": True, "status": 200, "error": None}
    if fields.get("ended") == "upstream_cut":
        upstream["error"] = "the upstream reset the connection"
    entry = journal.stream(at, took, upstream={**upstream, "idempotency_key": key}, **fields)
    record = {k: v for k, v in (entry.stream or {}).items() if k != "resumable"}
    journal.entries[-1] = entry._replace(stream={**record, "expected_ms": None})
    return journal.entries[-1]


def test_a_relayed_stream_held_until_the_provider_cut_it_is_stall_not_detected() -> None:
    journal = Journal()
    relayed(journal, 0, 6, ended="upstream_cut", events=10, last_id="10", stalled=5)
    assert journal.rules() == ["stall-not-detected"]
    cut_at_once = Journal()
    relayed(cut_at_once, 0, 0.5, ended="upstream_cut", events=10, last_id="10", stalled=0.01)
    assert cut_at_once.rules() == []


def test_a_relayed_stream_the_provider_resumed_ran_nothing_again() -> None:
    for resumed_from, rules in ((None, ["duplicate-execution"]), ("40", [])):
        journal = Journal()
        relayed(journal, 0, 0.8, ended="upstream_cut", events=40, last_id="40", key=None)
        again = relayed(journal, 2, 0.5, events=21, asked="40", key=None)
        stream = {**(again.stream or {}), "resumed_from": resumed_from}
        journal.entries[-1] = again._replace(stream=stream)
        assert journal.rules() == rules, resumed_from


def test_error_events_count_by_category_as_error_answers() -> None:
    journal = Journal()
    journal.stream(0, 0.5, error_code="PERMISSION_DENIED")
    journal.stream(1, 0.5, error_code="ENDPOINT_UNREACHABLE", retry=Retry(100, 5))
    journal.stream(2, 0.5)
    counted = coverage(journal.entries)["categories"]
    assert (counted["PERMISSION_DENIED"], counted["ENDPOINT_UNREACHABLE"]) == (1, 1)
    assert sum(counted.values()) == 2
