"""The rules of streams: how a consumer recovers from a stream that went wrong (docs/streams.md).

Every request answered with a stream journals :attr:`Entry.stream
<mockskill.engine.entries.Entry.stream>`: the events sent, the last id, how it ended, for
how long, how long its bytes had stopped at the end (``stalled_ms``), the scenario's idle
bound and expected duration, whether it is resumable, the ``Last-Event-ID`` a re-request
asked to resume after (``asked_from``, else its header). A stream cut short is a failed
attempt of its retry chain (:func:`~.retries.stream_cut`; not a task's watch the consumer
left: docs/tasks.md, "Watching a task"), and one ending in an error event
carries that code and its advice as an error answer does, so ``retry-too-soon`` (the SSE
``retry:`` field, an error event's advice), ``non-retryable-retried`` (an error event such
as ``PERMISSION_DENIED`` re-issued unchanged) and ``duplicate-execution`` (a cut POST stream
re-issued without its ``Idempotency-Key``) grade streams as they grade answers. The three
rules of this module read what only a stream can get wrong:

- ``resume-ignored``: a resumable stream, cut short after sending an id, re-requested
  without ``Last-Event-ID``, or with an id it was never sent (not a task's watch, whose
  every start sends the task as it is: docs/tasks.md, "Watching a task");
- ``stall-not-detected``: the consumer held a stream whose bytes had stopped longer than
  the scenario's idle bound (it has no idle timeout);
- ``gave-up-despite-progress``: the consumer left a stream that was still delivering
  (its last byte within the idle bound), sooner than its declared expected duration.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import Entry
from ..engine.streams import MAX_SENT_IDS
from ..scenario.streams import REPLACING_FAULTS
from .correlation import header
from .findings import Finding, plural
from .policy import Policy
from .retries import acted_on, endpoint_of

RESUME_IGNORED = "resume-ignored"
STALL_NOT_DETECTED = "stall-not-detected"
GAVE_UP_DESPITE_PROGRESS = "gave-up-despite-progress"

LAST_EVENT_ID = "Last-Event-ID"
"""The request header a resuming consumer sends (WHATWG's EventSource does)."""

HELD_ENDINGS = frozenset({"stall", "client_left", "upstream_cut"})
"""Endings of a stream the consumer was still holding open when it ended: the server's
stall ran its time out, the consumer left (during a stall, or not), or a relayed stream's
provider failed or fell silent past the proxy's ``timeout_ms`` (docs/streams.md)."""


def info(entry: Entry) -> dict[str, Any]:
    """What *entry*'s stream did (:attr:`Entry.stream`; empty: it was no stream)."""
    return entry.stream or {}


def cut_short(entry: Entry) -> bool:
    """Whether *entry* was a stream that did not end with all its events."""
    return entry.stream is not None and entry.stream.get("ended") != "complete"


UNKNOWN = object()
"""What :func:`asked_from` returns when the journal cannot say (no ``asked_from``, and the
request's headers not kept: ``--journal-bodies off``)."""


def asked_from(entry: Entry) -> str | object | None:
    """The ``Last-Event-ID`` *entry* asked to resume after (None: it sent none): as the
    stream journalled it (``asked_from``), else as its headers kept it; :data:`UNKNOWN`
    when neither was kept (nothing to judge)."""
    stream = info(entry)
    if "asked_from" in stream:
        asked = stream.get("asked_from")
        return asked if isinstance(asked, str) else None
    if entry.headers is None:
        return UNKNOWN
    return header(entry, LAST_EVENT_ID)


def stream_findings(
    session: str, entries: Iterable[Entry], chains: Sequence[Sequence[Entry]], policy: Policy
) -> list[Finding]:
    """The stream rules' findings on one session's *entries* (its requests) and their retry
    *chains* (a re-request of a cut stream is its chain's next attempt): each rule's once
    per chain, as every rule's (docs/audit.md), naming the chain's endpoint."""
    if not any(e.stream is not None for e in entries):
        return []
    findings: list[Finding] = []
    for chain in chains:
        streamed = [e for e in chain if e.stream is not None]
        if not streamed:
            continue
        for found in (
            resume_ignored(session, chain),
            stall_not_detected(session, streamed, policy),
            gave_up_despite_progress(session, streamed, policy),
        ):
            if found is not None:
                findings.append(found)
    return findings


# -- resume-ignored ---------------------------------------------------------------------


def resume_ignored(session: str, chain: Sequence[Entry]) -> Finding | None:
    """The re-requests of *chain* that followed a resumable stream cut short after it had
    sent an id, without ``Last-Event-ID`` or with an id no attempt was sent."""
    sent: set[str] = set()  # ids the attempts so far were sent, as far as the journal knows
    complete = True  # every attempt so far listed them all (no list cut to its bound)
    ignored: list[tuple[Entry, Entry, str | None]] = []  # (cut attempt, re-request, asked)
    for before, entry in itertools.pairwise(chain):
        stream = info(before)
        ids = stream.get("sent_ids")
        if isinstance(ids, list):
            sent.update(str(i) for i in ids)
            complete = complete and len(ids) < MAX_SENT_IDS
        elif stream.get("events"):
            complete = False  # an attempt whose ids were not kept (only its last is known)
        if isinstance(stream.get("last_id"), str):
            sent.add(stream["last_id"])
        # A task's watch starts again with the task as it is: nothing is lost without the id.
        watch = stream.get("watch") is not None
        resumable = bool(stream.get("resumable")) and cut_short(before) and not watch
        if not resumable or stream.get("last_id") is None or acted_on(before, entry) is None:
            continue
        asked = asked_from(entry)
        if asked is UNKNOWN:
            continue
        if asked is None or (isinstance(asked, str) and complete and asked not in sent):
            ignored.append((before, entry, asked if isinstance(asked, str) else None))
    if not ignored:
        return None
    n = len(ignored)
    without = [e for _, e, asked in ignored if asked is None]
    steps = [
        f"#{entry.id} after #{before.id} ({_ending(before)} after {info(before).get('events')}"
        f" events, the last id {info(before).get('last_id')!r}): "
        + ("no Last-Event-ID" if asked is None else f"Last-Event-ID {asked!r}, never sent")
        for before, entry, asked in ignored
    ]
    what = "without Last-Event-ID" if len(without) == n else "without a Last-Event-ID it was sent"
    return Finding(
        rule=RESUME_IGNORED,
        session=session,
        endpoint=endpoint_of(ignored[0][1]),
        attempts=sorted({e.id for pair in ignored for e in pair[:2]}),
        message=f"a resumable stream re-requested {what} ({n}"
        f" {plural(n, 're-request', 're-requests')})",
        expected="a resumable stream cut short is re-requested with Last-Event-ID: the id of"
        " the last event received, so that it continues after it (the events are not sent"
        " twice, the operation does not start over)",
        found="; ".join(steps),
        fix="keep the id of the last event received (SSE's id: field, an NDJSON line's id)"
        " and send it as the Last-Event-ID header when reconnecting (EventSource does;"
        " with httpx, requests or fetch, set it yourself); never send an id the stream did"
        " not send",
    )


def _ending(entry: Entry) -> str:
    ended = info(entry).get("ended")
    return {"client_left": "left by the consumer", "stall": "stalled"}.get(str(ended), str(ended))


# -- stall-not-detected -----------------------------------------------------------------


def stall_not_detected(session: str, streamed: Sequence[Entry], policy: Policy) -> Finding | None:
    """Streams the consumer held open with their bytes stopped longer than their idle bound
    (and :attr:`~.policy.Policy.idle_slack_ms`): left late, or not at all until the server
    ended the stall."""
    held: list[tuple[Entry, int, int]] = []  # (stream, stalled ms, idle bound ms)
    for entry in streamed:
        stream = info(entry)
        stalled, bound = stream.get("stalled_ms"), stream.get("idle_bound_ms")
        if stream.get("ended") not in HELD_ENDINGS or stalled is None or bound is None:
            continue
        if stalled > bound + policy.idle_slack_ms:
            held.append((entry, int(stalled), int(bound)))
    if not held:
        return None
    n = len(held)
    steps = [
        f"#{entry.id}: no byte for {stalled} ms after event {info(entry).get('events')}"
        f" (idle bound {bound} ms), then "
        + ("the consumer left" if entry.client_left is not None else "the server closed it")
        for entry, stalled, bound in held
    ]
    return Finding(
        rule=STALL_NOT_DETECTED,
        session=session,
        endpoint=endpoint_of(held[0][0]),
        attempts=[entry.id for entry, _, _ in held],
        message=f"{n} stalled {plural(n, 'stream', 'streams')} held open past the idle bound",
        expected="leave a stream whose bytes (events or heartbeats) stop for longer than the"
        f" scenario's idle bound (stream.idle_bound_ms; slack {policy.idle_slack_ms:.0f} ms),"
        " then re-request it",
        found="; ".join(steps),
        fix="set a read (idle) timeout on the stream, not only a connect timeout: httpx"
        " Timeout(read=...), requests' timeout=(connect, read), aiohttp"
        " ClientTimeout(sock_read=...), fetch with an AbortController reset on every chunk;"
        " a few heartbeat intervals is a good value; on the timeout, close and re-request"
        " (with Last-Event-ID when the stream is resumable)",
    )


# -- gave-up-despite-progress -----------------------------------------------------------


def gave_up_despite_progress(
    session: str, streamed: Sequence[Entry], policy: Policy
) -> Finding | None:
    """Streams the consumer left while they were still delivering (the last byte within the
    idle bound), sooner than their expected duration, no bad event having been sent."""
    left: list[tuple[Entry, int, int, int]] = []  # (stream, after ms, expected ms, stalled ms)
    for entry in streamed:
        stream = info(entry)
        stalled, bound = stream.get("stalled_ms"), stream.get("idle_bound_ms")
        expected, duration = stream.get("expected_ms"), stream.get("duration_ms")
        if stream.get("ended") != "client_left" or _bad_event_sent(stream):
            continue  # not left by the consumer, or left after a broken event: a reason
        if stalled is None or bound is None or expected is None or duration is None:
            continue  # no head went: nothing was delivering
        if stalled <= bound and duration < policy.least(float(expected)):
            left.append((entry, int(duration), int(expected), int(stalled)))
    if not left:
        return None
    n = len(left)
    steps = [
        f"#{entry.id} left after {after} ms (expected {expected} ms), at event"
        f" {info(entry).get('events')}, {stalled} ms after the last byte"
        for entry, after, expected, stalled in left
    ]
    return Finding(
        rule=GAVE_UP_DESPITE_PROGRESS,
        session=session,
        endpoint=endpoint_of(left[0][0]),
        attempts=[entry.id for entry, _, _, _ in left],
        message=f"{n} {plural(n, 'stream', 'streams')} left while still delivering, before"
        " the expected duration",
        expected="stay on a stream while its events or heartbeats keep coming within its"
        " cadence (the idle bound, stream.idle_bound_ms), until its end or its expected"
        f" duration (stream.expected_ms; {policy.tolerance_text()})",
        found="; ".join(steps),
        fix="time a stream by its progress, not by its length: an idle (read) timeout that"
        " every event or heartbeat resets, no total timeout shorter than the stream (httpx:"
        " Timeout(None, read=...); requests: timeout=(connect, read); aiohttp:"
        " ClientTimeout(total=None, sock_read=...))",
    )


def _bad_event_sent(stream: dict[str, Any]) -> bool:
    """Whether the stream's scripted bad event (malformed, a repeated or lower id) was sent."""
    after = stream.get("fault_after")
    return (
        stream.get("fault") in REPLACING_FAULTS
        and after is not None
        and int(stream.get("events") or 0) > int(after)
    )
