"""The rule ``correlation-lost``: retries that lose what tied them to their first attempt.

A consumer that sends an ``Idempotency-Key``, a W3C ``traceparent`` or an
``X-Request-Id`` on an operation's first attempt says "this is one
operation": the provider deduplicates by the key, a trace shows every attempt
under one trace, the logs join on the request id. A retry that drops one of
them, or makes a new one, breaks that: the provider runs the operation
again, the trace splits, the logs no longer tell the attempts belong
together. The usual cause is a header made inside the function a retry
decorator retries (a fresh ``uuid4()`` per call) instead of once per operation.

:func:`correlation_lost` reads each attempt's journalled request headers
(:attr:`Entry.headers <mockskill.engine.entries.Entry.headers>`, looked up in
any case); an attempt whose headers were not kept (None: ``--journal-bodies
off``, an entry of an earlier version) is not judged. A ``traceparent`` is
compared by its trace id alone: a new span per attempt (a new parent id) is
what OpenTelemetry's HTTP instrumentation does, under the same trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.state import Entry
from .findings import Finding, plural
from .retries import endpoint_of

RULE = "correlation-lost"

CORRELATION_HEADERS = ("Idempotency-Key", "traceparent", "X-Request-Id")
"""The headers that name one operation across its attempts, as they are usually written."""


def header(entry: Entry, name: str) -> str | None:
    """*entry*'s request header *name* (any case; repeats joined by ``,``), None when it
    sent none. Only asked of an entry whose headers were kept."""
    assert entry.headers is not None
    wanted = name.lower()
    values = [value for written, value in entry.headers if written.lower() == wanted]
    return ",".join(values) if values else None


def trace_id(traceparent: str) -> str:
    """The trace id of a W3C ``traceparent`` (``00-<trace id>-<parent id>-<flags>``); the
    whole value when it is not one."""
    parts = traceparent.strip().split("-")
    return parts[1].lower() if len(parts) >= 4 and len(parts[1]) == 32 else traceparent


def _same(name: str, first: str, later: str) -> bool:
    if name == "traceparent":
        return trace_id(first) == trace_id(later)
    return first == later


def correlation_lost(session: str, chain: Sequence[Entry]) -> list[Finding]:
    """The finding of *chain* (one retry chain) when a retry dropped or changed a
    correlation header its first attempt carried; none when the first attempt's headers
    were not kept."""
    if len(chain) < 2 or chain[0].headers is None:
        return []
    first = chain[0]
    carried = {name: value for name in CORRELATION_HEADERS if (value := header(first, name))}
    if not carried:
        return []
    lost: list[tuple[Entry, str, str | None]] = []  # (attempt, header, its value there)
    for entry in chain[1:]:
        if entry.headers is None:
            continue  # not kept: nothing to judge
        for name, value in carried.items():
            now = header(entry, name)
            if now is None or not _same(name, value, now):
                lost.append((entry, name, now))
    if not lost:
        return []
    retries = sorted({entry.id for entry, _, _ in lost})
    names = [name for name in CORRELATION_HEADERS if any(n == name for _, n, _ in lost)]
    n = len(retries)
    return [
        Finding(
            rule=RULE,
            session=session,
            endpoint=endpoint_of(first),
            attempts=[first.id, *retries],
            message=f"{n} {plural(n, 'retry', 'retries')} lost the first attempt's"
            f" {' and '.join(names)}",
            expected="every attempt of one operation carries the first attempt's "
            + ", ".join(_kept(name) for name in carried),
            found="; ".join(
                _found(first, entry, name, now, carried[name]) for entry, name, now in lost
            ),
            fix="make the correlation headers once per operation, outside what is retried,"
            " and send the same values on every attempt (e.g. an Idempotency-Key made before"
            " a tenacity-decorated call, not inside it; urllib3's Retry and httpx transports"
            " resend the request's headers as they are); for traceparent, retry inside the"
            " operation's span so that every attempt stays in its trace",
        )
    ]


def _kept(name: str) -> str:
    return "traceparent's trace id" if name == "traceparent" else name


def _found(first: Entry, entry: Entry, name: str, now: str | None, was: str) -> str:
    if now is None:
        return f"#{entry.id} sent no {name} (#{first.id} sent {was!r})"
    if name == "traceparent":
        return f"#{entry.id} sent traceparent {now!r}, of another trace than #{first.id}'s {was!r}"
    return f"#{entry.id} sent {name} {now!r}, #{first.id} sent {was!r}"
