"""Rate limits as they are answered: which bucket a request spends, and the wire forms.

A limited endpoint (a skill's invoke or a route with ``rate_limit:``) has its request spend
a token of a :class:`~.store.Bucket` first (:func:`bucket`, put on the request's
:class:`~.store.Take`); the store says what it came to (a :data:`~.store.Spent`). This
module turns that into what the consumer sees, per request and without I/O:

- a refusal (:func:`refusal`): 429 ``RATE_LIMITED`` (outside the chapter) or 503
  ``ENDPOINT_UNREACHABLE`` (in-protocol), in the unified body, advising the wait until the
  next token;
- a scripted ``rate_limited:`` step (:func:`scripted`): the same answer, its wait given;
- the rate-limit headers an admitted answer carries (:func:`admitted`), with what is left.

Each says so in the journal (:class:`Limited`, read into ``Entry.rate_limit`` and
``Entry.retry``). The forms are docs/rate-limits.md's: ``Retry-After`` in seconds, as an
HTTP-date (RFC 9110 section 10.2.3), fractional, with ``retry-after-ms``, absent or
malformed; ``RateLimit``/``RateLimit-Policy`` (draft-ietf-httpapi-ratelimit-headers) or
``X-RateLimit-*``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from hashlib import blake2b
from typing import TYPE_CHECKING, Any, NamedTuple

from ..protocol import catalog
from ..protocol.catalog import Retry
from ..scenario.model import JSON_TYPE, RateAnswer, RateLimit, RateLimited, Reply
from . import request_facts
from .conditions import ABSENT, resolve
from .entries import LaterRecord, limit_record, shown_limit_key
from .store import FULL_MS, NEXT_MS, REMAINING, Bucket, Spent
from .wire import Answer

if TYPE_CHECKING:
    from .digests import KeyedDigest
    from .incoming import Incoming

MAX_ATTEMPTS = 5
"""The ``max_attempts`` a rate-limited answer's advice states."""
MAX_KEY_VALUE = 64
"""Characters of a keyed value a bucket's key holds as they are; a longer one is held as
its digest, so that a client sending huge values cannot make huge keys."""
MAX_BODY_KEYED = 64 * 1024
"""Bytes of a body a ``{body: /pointer}`` key parses at most; a longer body falls in the
shared bucket (parsing megabytes for a key would let a client make the server work)."""
_new = tuple.__new__
"""Limited's fields, positionally: tuple.__new__ skips the NamedTuple's keyword __new__."""
POLICY = '"default"'
"""The IETF draft's policy name (a structured-field string): one policy per endpoint."""


class Limited(NamedTuple):
    """What a rate limit said of one request: the rate-limit headers its answer carries,
    whether they are still to be added (an admitted request's: its step's answer does not
    hold them) and the journal's account (``Entry.rate_limit``). A NamedTuple: one is made
    per request of a limited endpoint."""

    headers: tuple[tuple[str, str], ...]
    added: bool
    record: dict[str, Any] | LaterRecord
    """A bucket's is its parts, made a dict when the journal entry is shown."""


# -- the bucket a request spends ------------------------------------------------


def bucket(limit: RateLimit, endpoint: str, value: str | None) -> Bucket:
    """The bucket of *endpoint* (its scenario and endpoint: a skill's invoke, a route)
    under *limit* that a request counted by *value* spends (:func:`key_value`; None: the
    endpoint's one shared bucket, for the requests without one)."""
    kind = limit.key
    held = "-" if value is None else "=" + _bounded(value)
    key = f"rate/{endpoint}/{kind}{held}"  # (the endpoint is length-prefixed: unambiguous)
    return Bucket(key, limit.capacity, limit.refill, value if kind == "session" else None)


def key_value(
    limit: RateLimit, session: str, request: Incoming, credentials: KeyedDigest
) -> str | None:
    """The value *request* is counted by under *limit* (None: it has none, the shared
    bucket): the session, a credential's keyed fingerprint (never the secret), the client's
    address, a header's value, or the body's JSON value at the pointer (serialised)."""
    kind = limit.key
    if kind == "session":
        return session
    if kind == "credential":
        return request_facts.credential(request, credentials)
    if kind == "client":
        return request.client_address()
    if kind == "header":
        assert limit.key_name is not None
        return request.headers.get(limit.key_name)
    assert kind == "body"
    assert limit.key_name is not None
    return _body_value(request.body, limit.key_name)


def _body_value(body: bytes, pointer: str) -> str | None:
    """The JSON value at *pointer* in *body*, serialised; None when the body is not JSON (or
    too long to read for a key) or has no value there."""
    if not body or len(body) > MAX_BODY_KEYED:
        return None
    try:
        document = json.loads(body)
    except ValueError:  # (UnicodeDecodeError and RecursionError's kin included)
        return None
    except RecursionError:
        return None
    tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:])
    found = resolve(document, tokens)
    if found is ABSENT:
        return None
    return found if isinstance(found, str) else json.dumps(found, sort_keys=True)


def _bounded(value: str) -> str:
    """*value* as a bucket's key holds it: itself if short, else its digest."""
    if len(value) <= MAX_KEY_VALUE:
        return value
    digest = blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"#{digest}"


def shown_key(limit: RateLimit, value: str | None) -> str:
    """The journal's ``key``: its kind, the header's name or the pointer, and the value
    (bounded and printable), as ``session: s1``, ``header x-tenant: acme``; without the
    value (``header x-tenant``): the shared bucket (:func:`~.entries.shown_limit_key`)."""
    return shown_limit_key(_kind(limit), value)


def _kind(limit: RateLimit) -> str:
    """What *limit* counts by, as the journal's key names it (``header x-tenant``)."""
    return limit.key if limit.key_name is None else f"{limit.key} {limit.key_name}"


# -- the forms on the wire --------------------------------------------------------


def http_date(seconds: int) -> str:
    """*seconds* (epoch) as an IMF-fixdate (RFC 9110 section 5.6.7)."""
    return formatdate(seconds, usegmt=True)


def fractional(wait_ms: int) -> str:
    """*wait_ms* as decimal seconds: one to three decimals, always a point (``2.0``)."""
    text = f"{wait_ms // 1000}.{wait_ms % 1000:03d}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def retry_after(
    form: str, wait_ms: int, now: float
) -> tuple[list[tuple[str, str]], int | None, str | None]:
    """The headers that advise a wait of *wait_ms* in *form*, answered at *now*; the advice
    they state in milliseconds (None: none); and the ``Retry-After`` sent
    (``retry-after-ms``'s for the ``ms`` form; None: none)."""
    if form == "seconds":
        seconds = catalog.retry_after_seconds(wait_ms)
        value = str(seconds)
        return [("Retry-After", value)], seconds * 1000, value
    if form == "date":
        at = math.ceil(now + wait_ms / 1000)
        value = http_date(at)
        sent = [("Date", http_date(math.floor(now))), ("Retry-After", value)]
        return sent, math.ceil((at - now) * 1000), value
    if form == "fractional":
        value = fractional(wait_ms)
        return [("Retry-After", value)], wait_ms, value
    if form == "ms":
        value = str(wait_ms)
        whole = str(catalog.retry_after_seconds(wait_ms))
        return [("retry-after-ms", value), ("Retry-After", whole)], wait_ms, value
    if form == "malformed":
        return [("Retry-After", "soon")], None, "soon"
    assert form == "missing"
    return [], None, None


def rate_headers(
    form: str, limit: int, window_s: int, remaining: int, full_ms: int, now: float
) -> list[tuple[str, str]]:
    """The rate-limit headers in *form*: a *limit* of requests per *window_s* seconds,
    *remaining* of them left, the bucket full again in *full_ms*."""
    fixed = fixed_headers(form, limit, window_s)
    return [*fixed, *varying_headers(form, remaining, full_ms, now)]


def fixed_headers(form: str, limit: int, window_s: int) -> tuple[tuple[str, str], ...]:
    """The rate-limit headers in *form* that are the same on every answer (first)."""
    if form == "ietf":
        return (("RateLimit-Policy", f"{POLICY};q={limit};w={window_s}"),)
    if form == "none":
        return ()
    return (("X-RateLimit-Limit", str(limit)),)


def varying_headers(
    form: str, remaining: int, full_ms: int, now: float
) -> tuple[tuple[str, str], ...]:
    """The rate-limit headers in *form* that say what is left (after the fixed ones)."""
    if form == "x-ratelimit-epoch":
        return stated_headers(form, remaining, math.ceil(now + full_ms / 1000))
    return stated_headers(form, remaining, catalog.retry_after_seconds(full_ms))


def stated_headers(form: str, remaining: int, reset: int) -> tuple[tuple[str, str], ...]:
    """:func:`varying_headers` of *remaining* tokens and the *reset* they state (seconds, or
    epoch seconds for ``x-ratelimit-epoch``: :meth:`Policy.reset`)."""
    if form == "ietf":
        return (("RateLimit", f"{POLICY};r={remaining};t={reset}"),)
    if form == "none":
        return ()
    assert form in ("x-ratelimit", "x-ratelimit-epoch")
    return (("X-RateLimit-Remaining", str(remaining)), ("X-RateLimit-Reset", str(reset)))


def window(limit: RateLimit) -> int:
    """The IETF policy's window of a bucket: the seconds its capacity takes to refill."""
    return max(1, math.ceil(limit.capacity / limit.refill))


class Policy:
    """A limit as its answers state it, the part the same on every answer made once (at
    load, per endpoint: ``Target.policy``): its fixed rate-limit headers, and the journal's
    record of an admitted request and of a refusal but for what varies
    (:data:`~.entries.LaterRecord`)."""

    __slots__ = ("admitted", "fixed", "form", "limit", "refused", "reset_now", "retry_after")

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.form = limit.answer.headers
        self.retry_after = limit.answer.retry_after
        self.fixed = fixed_headers(self.form, limit.capacity, window(limit))
        self.reset_now: Callable[[int], int] = catalog.retry_after_seconds
        """:meth:`reset` now: the seconds to full, read off *full_ms* with no clock, but
        for ``x-ratelimit-epoch``, an epoch time."""
        if self.form == "x-ratelimit-epoch":
            self.reset_now = self._reset_at_the_clock
        nothing: Spent = (True, 0, 0, 0)  # (the varying fields, set when shown)
        answer, kind = limit.answer, _kind(limit)
        self.admitted = _record(
            answer, False, False, limit.capacity, nothing, limit.refill, None, None, kind
        )
        """``Entry.rate_limit`` of an admitted request, but its spent fields and the value
        its key counts (:data:`~.entries.LaterRecord`)."""
        self.refused = {**self.admitted, "refused": True}
        """The same of a refusal, but its spent fields, advice and value."""

    def stated(self, spent: Spent, now: float) -> tuple[object, int]:
        """The values a refusal's headers and advice (:func:`refusal_headers`) state for
        *spent* at *now*, unformatted: two refusals with the same have the same answer (so
        it is kept per value, ``choosing.refused``). The ``Retry-After`` form's (seconds,
        milliseconds, the dates and the advice to the millisecond, or nothing) and the
        reset (:meth:`reset`)."""
        form, wait_ms = self.retry_after, spent[NEXT_MS]  # (the wait advised)
        advice: object = None  # (missing, malformed: the same on every refusal)
        if form == "seconds":
            advice = catalog.retry_after_seconds(wait_ms)
        elif form == "fractional" or form == "ms":
            advice = wait_ms
        elif form == "date":
            at = math.ceil(now + wait_ms / 1000)
            advice = (math.floor(now), at, math.ceil((at - now) * 1000))
        return advice, self.reset(spent[FULL_MS], now)

    def reset(self, full_ms: int, now: float) -> int:
        """The reset its varying headers state for a bucket full in *full_ms* at *now*:
        seconds, or epoch seconds (``x-ratelimit-epoch``)."""
        if self.form == "x-ratelimit-epoch":
            return math.ceil(now + full_ms / 1000)
        return catalog.retry_after_seconds(full_ms)

    def _reset_at_the_clock(self, full_ms: int) -> int:
        """:meth:`reset` at the time of the call (``x-ratelimit-epoch``'s :attr:`reset_now`)."""
        return self.reset(full_ms, time.time())


# -- the answers ----------------------------------------------------------------


def admitted(policy: Policy, spent: Spent, value: str | None, now: float) -> Limited:
    """An admitted request's rate-limit headers (none for the ``none`` form), to add to its
    step's answer, and its journal record (*value*: what its bucket counts, :func:`key_value`)."""
    _, remaining, next_ms, full_ms = spent
    record = (policy.admitted, value, remaining, next_ms, full_ms)  # a LaterRecord
    form = policy.form
    if form == "none":  # (nothing to add: the step's kept answer is sent as it is)
        return _new(Limited, ((), False, record))
    varying = varying_headers(form, remaining, full_ms, now)
    return _new(Limited, (policy.fixed + varying, True, record))


def with_headers(answer: Answer, headers: tuple[tuple[str, str], ...]) -> Answer:
    """*answer* with the rate-limit *headers* added (made for one request)."""
    return Answer(answer.status, answer.headers + headers, answer.body, answer.reason)


class LimitedHead:
    """A kept answer's head with room for an admitted request's rate-limit headers: its
    status line, its headers and the limit's fixed ones (:class:`Policy`) rendered once,
    the few varying header bytes added per request (:meth:`answering`), the body kept."""

    __slots__ = ("answer", "fixed", "head")

    def __init__(self, answer: Answer, policy: Policy) -> None:
        self.answer = answer
        self.fixed = len(policy.fixed)
        head = answer.head(close=False)
        fixed = "".join(f"{k}: {v}\r\n" for k, v in policy.fixed).encode("latin-1")
        # Up to its Content-Length line, which the rate-limit headers go before.
        self.head = head[: head.rindex(b"Content-Length: ")] + fixed if answer.has_body else None

    def answering(self, headers: tuple[tuple[str, str], ...]) -> Answer:
        """The kept answer with *headers* added (:attr:`Limited.headers`: the fixed first)."""
        kept, head = self.answer, self.head
        if head is None:  # (no body, no Content-Length: rare, made whole)
            return with_headers(kept, headers)
        lines = "".join([f"{k}: {v}\r\n" for k, v in headers[self.fixed :]]).encode("latin-1")
        return Answer.framed(
            kept.status, kept.headers + headers, kept.body, head + lines + b"Content-Length: "
        )


class Advised(NamedTuple):
    """What a refusal's answer states (:func:`refusal_headers`): all that varies between two
    refusals, so their reply (:func:`refusal_reply`) can be kept per value."""

    headers: tuple[tuple[str, str], ...]
    advice_ms: int | None
    """The advice the headers state (None: none)."""
    value: str | None
    """The ``Retry-After`` sent (``retry-after-ms``'s for the ``ms`` form; None: none)."""


def refusal_headers(policy: Policy, spent: Spent, now: float) -> Advised:
    """The headers of the answer to a request *policy*'s limit refused (*spent*: no token)
    at *now*: its wait is the next token's."""
    form = policy.form
    _, _, next_ms, full_ms = spent
    headers, advice_ms, value = retry_after(policy.retry_after, next_ms, now)
    varying = varying_headers(form, 0, full_ms, now) if form != "none" else ()
    return _new(Advised, ((*headers, *policy.fixed, *varying), advice_ms, value))


def refusal_reply(limit: RateLimit, context: catalog.Context, advised: Advised) -> Reply:
    """The refusal's reply stating *advised*."""
    details = {"limit": limit.capacity, "refill_per_second": limit.refill, "key": limit.key}
    return _answer(limit.answer, context, advised.headers, advised.advice_ms, details, None)


def refused_record(policy: Policy, advised: Advised) -> dict[str, Any]:
    """The journal's record of a refusal stating *advised*, but its spent fields and the
    value its key counts (:data:`~.entries.LaterRecord`)."""
    return {**policy.refused, "wait_ms": advised.advice_ms, "retry_after_value": advised.value}


def refusal(
    limit: RateLimit, spent: Spent, value: str | None, context: catalog.Context, now: float
) -> tuple[Reply, Limited]:
    """The answer to a request *limit* refused (*spent*: no token) at *now*, and what the
    journal says of it, *value* what its bucket counts (made whole: the engine keeps the
    replies, ``choosing.refused``)."""
    policy = Policy(limit)
    advised = refusal_headers(policy, spent, now)
    kept = refused_record(policy, advised)
    _, remaining, next_ms, full_ms = spent
    record = limit_record((kept, value, remaining, next_ms, full_ms))
    return refusal_reply(limit, context, advised), Limited(advised.headers, False, record)


def scripted(step: RateLimited, context: catalog.Context, now: float) -> tuple[Reply, Limited]:
    """The answer of a scripted ``rate_limited:`` step at *now* (no bucket: its wait given,
    nothing remaining)."""
    answer, wait_ms = step.answer, step.wait_ms
    headers, advice_ms, value = retry_after(answer.retry_after, wait_ms, now)
    scripted_window = catalog.retry_after_seconds(wait_ms) or 1
    headers += rate_headers(answer.headers, step.limit, scripted_window, 0, wait_ms, now)
    details = {"limit": step.limit, "refill_per_second": None, "key": "scripted"}
    message = f"Rate limit exceeded (a scripted answer): a limit of {step.limit}"
    reply = _answer(answer, context, headers, advice_ms, details, message)
    spent: Spent = (False, 0, wait_ms, wait_ms)
    record = _record(answer, True, True, step.limit, spent, None, advice_ms, value, None)
    return reply, _new(Limited, (reply.headers, False, record))


def _answer(
    answer: RateAnswer,
    context: catalog.Context,
    headers: Iterable[tuple[str, str]],
    advice_ms: int | None,
    details: dict[str, Any],
    message: str | None,
) -> Reply:
    """The refusal's reply in the unified body: 429 ``RATE_LIMITED`` or 503
    ``ENDPOINT_UNREACHABLE``, with *headers* (the forms: the body's own ``Retry-After`` is
    not sent, the form says what is)."""
    advice = None if advice_ms is None else Retry(advice_ms, MAX_ATTEMPTS)
    if answer.status == 429:
        rendered = catalog.render(
            "RATE_LIMITED", context, message=message, details=details, retry=advice
        )
    else:
        rendered = catalog.render(
            "ENDPOINT_UNREACHABLE",
            context,
            status=503,
            details={"reason": "rate limited"},
            retry=advice,
        )
    return Reply.make(
        rendered.status,
        rendered.body.encode(),
        JSON_TYPE,
        tuple(headers),
        error_code=rendered.code,
        retry=advice,
    )


def _record(
    answer: RateAnswer,
    refused: bool,
    is_scripted: bool,
    limit: int,
    spent: Spent,
    refill: float | None,
    wait_ms: int | None,
    value: str | None,
    key: str | None,
) -> dict[str, Any]:
    """``Entry.rate_limit``: every key its docstring lists, JSON values."""
    return {
        "refused": refused,
        "scripted": is_scripted,
        "status": answer.status,
        "retry_after": answer.retry_after,
        "headers": answer.headers,
        "limit": limit,
        "remaining": spent[REMAINING],
        "refill": refill,
        "wait_ms": wait_ms,
        "next_ms": spent[NEXT_MS],
        "full_ms": spent[FULL_MS],
        "retry_after_value": value,
        "key": key,
    }
