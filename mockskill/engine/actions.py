"""A step's answer, planned: the placeholders filled, the waits, the cut, the answer.

The engine has chosen the step and drawn its random values; :func:`plan`
makes them data the event-loop transport plays with timers
(:mod:`mockskill.engine.plan`): waits (``delay``, ``hang``, ``execution``,
cut by the skill's ``timeout_ms`` into ``EXECUTION_TIMEOUT``), then the
answer, a transport fault, or a dribble of the body. The same step played
on a WSGI server's thread, with sleeps and the raw socket, is
:mod:`mockskill.wsgi.player`'s (which alone imports Werkzeug).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, REFUSED_BASE_URL
from ..scenario.model import Reply, Step
from . import plan as plans
from .rendering import RequestValues, rendered

if TYPE_CHECKING:
    from werkzeug.wrappers import Response

_BASE = BASE_URL.encode()
_REFUSED = REFUSED_BASE_URL.encode()


@dataclass(frozen=True)
class Urls:
    """What the placeholders in replies stand for, for this request."""

    base: str
    refused: str | None = None
    tls: tuple[tuple[str, str], ...] = ()
    """Each TLS fault skill's placeholder (``{tls_base_url:ID}``) and its port's base URL."""

    def fill_kept(self, reply: Reply) -> Reply:
        """:meth:`fill` for a reply of the model (made at load time): the filled reply is
        kept for the next request by the same address (see :func:`_filled`)."""
        if not reply.templated:
            return reply
        return _filled(self, reply)

    def fill(self, reply: Reply) -> Reply:
        if not reply.templated:
            return reply
        body, headers = reply.body, reply.headers
        if not reply.verbatim:  # (bytes a step sends as they are: only its headers)
            body = body.replace(_BASE, self.base.encode())
        headers = tuple((k, v.replace(BASE_URL, self.base)) for k, v in headers)
        if self.refused is not None:
            body = body if reply.verbatim else body.replace(_REFUSED, self.refused.encode())
            headers = tuple((k, v.replace(REFUSED_BASE_URL, self.refused)) for k, v in headers)
        for placeholder, base in self.tls:
            body = body if reply.verbatim else body.replace(placeholder.encode(), base.encode())
            headers = tuple((k, v.replace(placeholder, base)) for k, v in headers)
        template = reply.template
        if template is not None:  # its literal text only: never what a request puts in it
            template = template.filled(self.fill_text)
        return Reply(
            reply.status,
            headers,
            body,
            reply.content_type,
            reply.error_code,
            reply.retry,
            template=template,
        )

    def fill_text(self, text: str) -> str:
        """*text* with the placeholders filled in (a template's literal text)."""
        text = text.replace(BASE_URL, self.base)
        if self.refused is not None:
            text = text.replace(REFUSED_BASE_URL, self.refused)
        for placeholder, base in self.tls:
            text = text.replace(placeholder, base)
        return text


MAX_FILLED = 256
"""Filled replies :func:`_filled` keeps (the model's replies are few, and so are the
addresses a server is reached by: a client varying its Host only churns them)."""
MAX_FILLED_BYTES = 16 * 1024 * 1024
"""Bytes of filled replies (bodies and headers) :func:`_filled` keeps: each is a copy of
a model's reply for one address, which a large reply would otherwise multiply."""


class _Kept:
    """The filled replies kept, and what they weigh; replaced whole, never evicted one by
    one (an assignment is atomic, and the engine plans on threads too)."""

    __slots__ = ("bytes", "replies")

    def __init__(self) -> None:
        self.replies: dict[tuple[Urls, Reply], Reply] = {}
        self.bytes = 0


_kept = _Kept()


def _filled(urls: Urls, reply: Reply) -> Reply:
    """*reply* filled in for *urls*, made once per pair: the same filled reply (and so the
    same answer, its head rendered once) serves every request that reached the server
    by the same address. Bounded in count and in bytes (:data:`MAX_FILLED_BYTES`)."""
    global _kept
    kept = _kept
    key = (urls, reply)
    filled = kept.replies.get(key)
    if filled is None:
        filled = urls.fill(reply)
        size = len(filled.body) + sum(len(k) + len(v) for k, v in filled.headers)
        if len(kept.replies) >= MAX_FILLED or kept.bytes + size > MAX_FILLED_BYTES:
            kept = _kept = _Kept()
        kept.replies[key] = filled
        kept.bytes += size
    return filled


def answer(reply: Reply) -> plans.Answer:
    """The transport's answer for a filled-in reply (its Content-Type last, as Werkzeug's).

    Made once per reply and kept on it, so that its status line and headers render
    once: the model's replies (made at load time) and the filled ones (once per
    address) are answered from the same object every time; a reply made for one
    request (a miss, a refusal) takes its answer with it when it goes.
    """
    made: plans.Answer | None = reply.__dict__.get("_answer")
    if made is None:
        made = plans.Answer(
            reply.status, (*reply.headers, ("Content-Type", reply.content_type)), reply.body
        )
        object.__setattr__(reply, "_answer", made)  # a cache, not a field: frozen stays true
    return made


def answer_of(response: Response | Reply) -> plans.Answer:
    """The transport's answer for a Werkzeug response (read whole), or for a reply."""
    if isinstance(response, Reply):
        return answer(response)
    # The standard reason phrase, as for every skill answer (Werkzeug's is upper case).
    return plans.Answer(response.status_code, tuple(response.headers.items()), response.get_data())


@dataclass(frozen=True)
class TimedOut:
    """The ``EXECUTION_TIMEOUT`` a skill's ``timeout_ms`` cuts an execution into, as data
    (a :class:`~.plan.Measured`): its body reports the milliseconds measured at play time."""

    limit_ms: int
    status: int
    context: catalog.Context
    urls: Urls

    def reply(self, elapsed_ms: float) -> Reply:
        """The reply when the cut ends the wait after *elapsed_ms*; the same for the same
        time, so the journal shows what was sent (read back from the outcome's ``cut_ms``)."""
        details = {"timeout_ms": self.limit_ms, "elapsed_ms": round(elapsed_ms)}
        rendered = catalog.render(
            "EXECUTION_TIMEOUT", self.context, status=self.status, details=details
        )
        return self.urls.fill(Reply.error(rendered))

    def answer(self, elapsed_ms: float) -> plans.Answer:
        return answer(self.reply(elapsed_ms))


@dataclass
class Planned:
    """A step's plan, and what the journal needs to know once it is played."""

    plan: plans.Plan
    reply: Reply
    """The reply the plan answers with unless its execution is cut."""
    timed_out: TimedOut | None
    """The cut's answer when the execution may be cut (see :meth:`TimedOut.reply`)."""


def plan(
    step: Step,
    urls: Urls,
    *,
    delay_ms: float | None,
    execution_ms: float | None,
    fault_seed: int,
    timeout: tuple[int, int, catalog.Context] | None,
    values: RequestValues | None = None,
) -> Planned:
    """What :func:`play` does, as a plan: waits, the execution's cut, then the answer
    (a templated reply made from *values*, the request's)."""
    reply = urls.fill_kept(step.reply)
    if values is not None and reply.template is not None:
        reply = rendered(reply, values)
    waits: list[plans.Wait] = []
    if delay_ms:
        waits.append(plans.Wait(delay_ms))
    if step.hang_ms:
        waits.append(plans.Wait(step.hang_ms, plans.WaitKind.HANG))
    timed_out = None
    if execution_ms is not None:
        cut = None
        if timeout is not None and execution_ms > timeout[0]:
            timed_out = TimedOut(*timeout, urls)
            cut = plans.Cut(timed_out.limit_ms, timed_out)
        waits.append(plans.Wait(execution_ms, plans.WaitKind.EXECUTION, cut))
    fault = plans.Fault(step.fault) if step.fault is not None else None
    dribble = None
    if step.dribble is not None:
        dribble = plans.Dribble(step.dribble.chunks, step.dribble.over_ms)
    keep_alive = None
    if step.keep_alive is not None:
        scripted = step.keep_alive
        keep_alive = plans.KeepAlive(
            stale_after_ms=scripted.stale_after_ms,
            stale=plans.Stale(scripted.stale),
            close_after=scripted.close_after,
            max_requests=scripted.max_requests,
        )
    return Planned(
        plans.Plan(
            answer(reply),
            waits=tuple(waits),
            dribble=dribble,
            fault=fault,
            fault_seed=fault_seed,
            keep_alive=keep_alive,
        ),
        reply,
        timed_out,
    )
