"""A skill that honours ``Idempotency-Key``: the first execution's answer, again.

A skill with ``idempotency_key: true`` behaves as a provider that follows the
IETF's draft-ietf-httpapi-idempotency-key-header (and Stripe): an invocation
carrying a key it ran before, with the same body, gets that first execution's
answer again (status, headers, body; ``Idempotent-Replayed: true`` added, as
Stripe does) and does not run, nor take a step of its sequence; the same key
with another body is refused with 422, and while the first is still running
(its delay and execution not over) with 409. The answer kept is what the skill
made: a scripted step's result, or with ``after:`` the answer that was lost.

As everything the engine decides, it is data: :func:`keyed` hands out the
store's needs (:class:`~.store.Recall`, then the sequence's Take, then
:class:`~.store.Settle`) and resumes with their answers. The store keeps the
keys per session and skill, bounded (:mod:`.state`; ``mockskill.store`` on Redis).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING

from ..protocol import catalog
from ..protocol.catalog import Retry
from ..scenario.model import Reply, Step
from . import choosing
from .choosing import Keyed
from .entries import shorten
from .pending import Later, Pending
from .store import NeedAnswer, Recall, Recalled, Settle

if TYPE_CHECKING:
    from .choosing import Chosen, Decided
    from .incoming import Incoming
    from .matching import Target

HEADER = "Idempotency-Key"
KEY = HEADER.lower()
"""As :attr:`~.incoming.Incoming.headers` names it."""
REPLAYED_HEADER = "Idempotent-Replayed"
"""Added to a replayed answer (Stripe's name): the consumer can tell it ran once."""
MAX_KEY = 255
"""The longest key served (characters, Stripe's bound); a longer one is refused with 400."""
MAX_ANSWER = 1024 * 1024
"""The largest first answer kept (bytes, body and headers): a key whose answer is larger
is forgotten, so that a retry with it runs again (docs/scenarios.md)."""
RESERVE_MS = 60_000
"""How long a key stays reserved (in flight) if its request is never settled (the store
failed between the two needs): then it is free again."""


def encoded(reply: Reply) -> bytes:
    """*reply* (filled) as the store keeps a first answer: JSON, the body in base64."""
    return json.dumps(
        {
            "status": reply.status,
            "headers": [list(pair) for pair in reply.headers],
            "content_type": reply.content_type,
            "body": base64.b64encode(reply.body).decode(),
        },
        separators=(",", ":"),
    ).encode()


def decoded(answer: bytes) -> Reply:
    """The reply :func:`encoded` kept, marked replayed (:data:`REPLAYED_HEADER`)."""
    data = json.loads(answer)
    headers = tuple((str(k), str(v)) for k, v in data["headers"])
    return Reply(
        int(data["status"]),
        (*headers, (REPLAYED_HEADER, "true")),
        base64.b64decode(data["body"]),
        str(data["content_type"]),
    )


def ran(chosen: Chosen | None) -> Reply | None:
    """The answer *chosen*'s step made when it ran (None: it did not run): a scripted
    result (2xx, no fault, not cut by the skill's timeout), or the one ``after:`` lost."""
    step: Step | None = None if chosen is None else chosen.step
    if step is None or step.proxy is not None:  # a provider behind a proxy keeps its own
        return None
    if step.ran is not None:
        return step.ran
    assert chosen is not None
    if step.task == "submit":  # its answer is the task's 202 (a refusal over the cap: none)
        submitted = chosen.reply
        return submitted if submitted is not None and submitted.status == 202 else None
    cut = (
        chosen.execution_ms is not None
        and chosen.timeout is not None
        and chosen.execution_ms > chosen.timeout[0]
    )
    if step.fault is None and not cut and 200 <= step.reply.status < 300:
        return step.reply
    return None


def keyed(request: Incoming, decided: Decided, digest_key: bytes) -> Later[Decided]:
    """*decided* (a request to a skill that honours the key, carrying one) played as such a
    provider would: the store recalls the key first; a replay, a conflict or a key still
    in flight is answered at once; a new key takes its step, then settles the key."""
    key = request.headers[KEY]
    target: Target = decided.target  # type: ignore[assignment]  # an invoke's Target
    urls = decided.urls
    if not key or len(key) > MAX_KEY:
        decided.reply = urls.fill(_bad_key(target, key))
        return decided
    body = request.body or b""
    digest = hashlib.blake2b(body, key=digest_key[:64], digest_size=16).hexdigest()
    marked = decided.idempotency = Keyed(key, digest)
    session, skill = decided.session, target.skill_id or ""

    def settle(played: Decided) -> Later[Decided]:
        chosen = played.chosen
        answer = ran(chosen)
        kept = None if answer is None else encoded(urls.fill(answer))
        if kept is not None and len(kept) > MAX_ANSWER:
            kept = None  # too large to keep: forgotten, a retry runs again
        marked.executed = answer is not None
        busy = 0.0
        if chosen is not None and chosen.step is not None:
            busy = (chosen.delay_ms or 0) + (chosen.execution_ms or 0) + (chosen.step.hang_ms or 0)
        need = Settle(session, skill, key, digest, kept, round(busy))
        return Pending(need, lambda _: played)

    def recalled(answer: NeedAnswer) -> Later[Decided]:
        assert type(answer) is Recalled  # a Recall is answered a Recalled
        state, kept, wait_ms = answer
        if state == "new":
            take = choosing.take(decided, target, request)
            return Pending(take, decided).then(settle)
        if state == "replay":
            assert kept is not None
            marked.replayed = True
            decided.reply = decoded(kept)
        elif state == "conflict":
            decided.reply = urls.fill(_conflict(target, key))
        else:
            decided.reply = urls.fill(_in_flight(target, key, wait_ms))
        return decided

    return Pending(Recall(session, skill, key, digest, RESERVE_MS), recalled)


def _conflict(target: Target, key: str) -> Reply:
    """422: the key was used with another body (the draft's and Stripe's answer)."""
    message = f"{HEADER} {shorten(key)!r} was used before with another request body"
    details = {
        "idempotency_key": shorten(key),
        "violations": [
            {
                "field": "/",
                "expected": f"the body first sent with this {HEADER}",
                "actual": "another body",
                "message": "Idempotency key reused with a different payload",
            }
        ],
    }
    rendered = catalog.render(
        "VALIDATION_ERROR", target.context, status=422, message=message, details=details
    )
    return Reply.error(rendered)


def _in_flight(target: Target, key: str, wait_ms: int) -> Reply:
    """409: the key's first request is still running (retryable once it is over)."""
    message = f"A request with {HEADER} {shorten(key)!r} is still being processed"
    details = {"idempotency_key": shorten(key), "in_flight": True, "remaining_ms": wait_ms}
    rendered = catalog.render(
        "EXECUTION_TIMEOUT",
        target.context,
        status=409,
        message=message,
        details=details,
        retry=Retry(suggested_delay_ms=max(1, wait_ms), max_attempts=3),
    )
    return Reply.error(rendered)


def _bad_key(target: Target, key: str) -> Reply:
    """400: an empty key, or one over :data:`MAX_KEY` characters."""
    message = f"{HEADER} must be 1 to {MAX_KEY} characters"
    details = {
        "violations": [
            {
                "field": f"header {HEADER}",
                "expected": f"1 to {MAX_KEY} characters",
                "actual": f"{len(key)} characters",
                "message": "Invalid idempotency key",
            }
        ]
    }
    rendered = catalog.render(
        "VALIDATION_ERROR", target.context, status=400, message=message, details=details
    )
    return Reply.error(rendered)
