"""The fifth rule: a retry that ran an operation again.

An attempt can reach the provider, run, and still fail for the consumer: its
answer replaced once it ran (``after:``, "commit then fail"), the connection
cut, the upstream too slow, the consumer gone before the answer, a stream cut after its
``200``. The consumer
cannot see that the operation ran; when it retries, the provider runs it twice.
Behind a ``proxy`` step the journal's ``upstream`` field says which attempts
reached the provider; a scripted skill's entry says it ran (``executed``: a
result, or a step with ``after:``), and a skill that honours the key says it
answered a retry from its first execution instead (``replayed``, not run).
:func:`duplicate_executions` finds the retries that ran an operation again
after such an attempt.

The cure is an idempotency key: the same ``Idempotency-Key`` header value on
every attempt of one operation (the IETF's draft-ietf-httpapi-idempotency-key-header),
which the proxy relays and a provider that honours it (a skill with
``idempotency_key: true``) uses to run the operation once. A retry that sends
the earlier attempt's key is fine. A long-running task's submit sent again for the same
operation (no key and the same body) is ``reinvoked-while-running``'s to judge
(:mod:`.tasks`): whether the first task was still live decides it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine.state import Entry
from .findings import Finding, plural
from .retries import answered, endpoint_of, stream_cut_short
from .tasks import same_task_operation

RULE = "duplicate-execution"

IDEMPOTENCY_KEY = "Idempotency-Key"
"""The request header that names one operation across its attempts."""

UNSAFE_METHODS = frozenset({"POST", "PATCH"})
"""Methods whose requests a provider does not promise to be idempotent (RFC 9110 §9.2.2):
an invoke is a POST. A PUT or DELETE sent twice leaves what one leaves."""


def ran_unseen(entry: Entry) -> bool:
    """Whether *entry* reached the provider, which may have run it, and the consumer did
    not get the provider's own answer to say what happened."""
    upstream = entry.upstream
    if upstream is None:  # scripted: its result is its own answer; after: lost it
        status = entry.status
        seen = (
            entry.fault is None and status is not None and 200 <= status < 300 and answered(entry)
        )
        if entry.stream is not None:
            # A stream ran once its 200 went: the consumer saw its end only when it was not
            # cut short (its result, or an error event: the provider's own answer).
            seen = seen and not stream_cut_short(entry)
        return entry.executed and not seen
    if not upstream.get("reached"):
        return False
    own_answer = (
        upstream.get("error") is None
        and upstream.get("status") is not None
        and entry.fault is None
        and entry.status == upstream["status"]
        and answered(entry)
    )
    return not own_answer


def reached(entry: Entry) -> bool:
    """Whether *entry* ran the operation (or may have: it reached a real provider)."""
    if entry.stream is not None and entry.stream.get("resumed_from") is not None:
        # resumed after Last-Event-ID: the events went on, nothing ran again (a relayed
        # stream: the provider went on after the id asked, never sending it again)
        return False
    upstream = entry.upstream
    if upstream is None:
        return entry.executed
    return bool(upstream.get("reached"))


def key_of(entry: Entry) -> str | None:
    """The attempt's idempotency key, as the journal kept it (None: it sent none)."""
    upstream = entry.upstream
    key = None if upstream is None else upstream.get("idempotency_key")
    if key is None:
        key = entry.idempotency_key
    if key is None and entry.headers is not None:  # a plain step's: in its headers, if kept
        key = next((v for k, v in entry.headers if k.lower() == "idempotency-key"), None)
    return key if isinstance(key, str) else None


def _why(entry: Entry) -> str:
    upstream = entry.upstream or {}
    if upstream.get("error"):
        return f"the upstream {upstream['error']}"
    if entry.fault is not None:
        return f"its answer replaced by the fault {entry.fault}"
    if not answered(entry):
        return "the consumer gone before the answer"
    shown = f"{entry.status} {entry.error_code}" if entry.error_code else str(entry.status)
    if entry.upstream is None:
        return f"the skill ran, its answer replaced by {shown}"
    return f"the provider's {upstream.get('status')} replaced by {shown}"


def duplicate_executions(session: str, chain: Sequence[Entry]) -> list[Finding]:
    """The finding of *chain* (one retry chain) when a retry ran its operation again."""
    if len(chain) < 2 or chain[0].method not in UNSAFE_METHODS:
        return []  # sent once: nothing ran again
    pairs: list[tuple[Entry, Entry]] = []
    unseen: list[Entry] = []  # attempts so far that ran, unseen by the consumer
    for entry in chain:
        if unseen and reached(entry):  # (no attempt ran unseen before: nothing to repeat)
            key = key_of(entry)
            earlier = next(
                (
                    e
                    for e in unseen
                    if (key is None or key_of(e) != key) and not same_task_operation(e, entry)
                ),
                None,
            )
            if earlier is not None:
                pairs.append((earlier, entry))
        if ran_unseen(entry):
            unseen.append(entry)
    if not pairs:
        return []
    n = len(pairs)
    keyed = any(key_of(e) is not None for pair in pairs for e in pair)
    return [
        Finding(
            rule=RULE,
            session=session,
            endpoint=endpoint_of(chain[0]),
            attempts=sorted({e.id for pair in pairs for e in pair}),
            message=f"{n} {plural(n, 'retry', 'retries')} ran the operation on the provider"
            " again after an attempt that had reached it",
            expected=f"a retry of an operation that may have run carries the same {IDEMPOTENCY_KEY}"
            " as the attempt before it, so that the provider runs it once",
            found="; ".join(
                f"#{later.id} reached the provider again"
                + (
                    f" with {IDEMPOTENCY_KEY} {key_of(later)!r}"
                    if key_of(later) is not None
                    else f" without {IDEMPOTENCY_KEY}"
                )
                + f" after #{earlier.id} had reached it ({_why(earlier)}"
                + (
                    f"; its {IDEMPOTENCY_KEY} was {key_of(earlier)!r})"
                    if key_of(earlier) is not None
                    else ")"
                )
                for earlier, later in pairs
            ),
            fix=f"send an {IDEMPOTENCY_KEY} header, one value per operation, the same on every"
            " attempt of it (mockskill relays it; a provider that honours it, as a skill with"
            " idempotency_key: true does, runs the operation once)"
            + ("; keep the value when retrying, do not make a new one" if keyed else ""),
        )
    ]
