"""A proxy step planned: what goes upstream, how the answer comes back, and its journalling.

The engine decides everything about a proxied request and does none of its
I/O: :class:`Upstream` (the plan's :attr:`~.plan.Plan.upstream`) says where
to connect, how to verify TLS and how long to wait, and carries the
functions the transport calls to make the request's head
(:meth:`Upstream.request_head`: hop-by-hop headers removed, ``Host``
rewritten, ``X-Forwarded-*`` added), the answer's head
(:meth:`Upstream.answer_head`), a descriptor's or the list's body rewritten to
point back at mockskill (:attr:`Upstream.rewrite`), and the unified error
answered when the upstream cannot be reached or is too slow
(:attr:`Upstream.failed`). The transport (``mockskill.transport.relaying``)
plays it and reports a :class:`Relayed` on the :class:`~.plan.Outcome`;
:class:`Proxying` journals it (the entry's ``upstream``) and hands the
exchange to the :class:`~.exchange.Recorder` when a recording is on.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol import catalog
from ..protocol.catalog import Retry
from ..scenario.model import JSON_TYPE, Reply, Step
from . import plan as plans
from .actions import answer
from .choosing import request_values
from .exchange import Exchange, Recorder
from .plan import Relayed, Upstream
from .rendering import rendered

if TYPE_CHECKING:
    from .choosing import Chosen, Decided
    from .incoming import Incoming
    from .journalling import Journalling
    from .store import Store

MAX_REWRITTEN = 1024 * 1024
"""The longest descriptor or list buffered to rewrite its URLs; a longer one is relayed as is."""
MAX_RECORDED = 1024 * 1024
"""The most of an upstream's body kept for a recording (past it: ``truncated``)."""
MAX_GRADED = 64 * 1024
"""The most of an upstream's error answer kept to read its code (the audit grades it)."""
IDEMPOTENCY_KEY = "Idempotency-Key"
"""Relayed unchanged, like every end-to-end header: the audit recognises it on retries."""
# Compiled by re (and kept in its cache) on the first proxied request, not at import.
_LISTING = r"^/skills/?$"
_DESCRIPTOR = r"^/skills/[^/]+/?$"


def upstream_for(
    step: Step,
    request: Incoming,
    decided: Decided,
    chosen: Chosen,
    recording: bool,
    scripted: Reply | None = None,
) -> Upstream:
    """The :class:`Upstream` of *step* (a proxy step) for *request*; *scripted* is the
    list of the skills the scenarios script, which a proxied list of skills is given."""
    proxy = step.proxy
    assert proxy is not None
    urls = decided.urls
    target = decided.target
    context = getattr(target, "context", catalog.Context())
    failures: list[Reply] = []

    def failed(kind: str, reason: str, ms: float) -> plans.Answer:
        details: dict[str, Any] = {"upstream": proxy.url, "reason": reason}
        if kind == "timeout":
            details.update(timeout_ms=proxy.timeout_ms, elapsed_ms=round(ms))
            rendered = catalog.render("EXECUTION_TIMEOUT", context, status=504, details=details)
        else:
            # 503 when nothing could be connected to (the category's default), 502 when
            # something answered wrongly or dropped the exchange (a bad gateway).
            status = 503 if kind == "refused" else 502
            details["endpoint_url"] = proxy.url + request.path
            rendered = catalog.render(
                "ENDPOINT_UNREACHABLE", context, status=status, details=details
            )
        reply = urls.fill(Reply.error(rendered))
        failures.append(reply)
        return answer(reply)

    after = after_fault = None
    if proxy.after is not None:
        if proxy.after.fault is not None:
            after_fault = plans.Fault(proxy.after.fault)
        reply = urls.fill_kept(proxy.after.reply)
        if reply.template is not None:  # a commit-then-fail answer made from the request
            reply = rendered(reply, request_values(request, decided, chosen))
        after = answer(reply)
    rewrite = None
    if request.method in ("GET", "HEAD"):
        if re.match(_LISTING, request.path):
            own = [] if scripted is None else json.loads(urls.fill(scripted).body)["skills"]
            rewrite = _rewriter(urls.base, functools.partial(_listing, scripted=own))
        elif re.match(_DESCRIPTOR, request.path):
            rewrite = _rewriter(urls.base, _descriptor)
    return Upstream(
        proxy,
        urls.base,
        request.scheme,
        failed,
        after,
        after_fault,
        chosen.fault_seed,
        rewrite,
        MAX_RECORDED if recording else 0,
        failures,
        request.header("last-event-id"),
    )


def _origin(url: str, base: str) -> str:
    """*url* on *base*'s origin (its path and query kept)."""
    match = re.match(r"^https?://[^/?#]*", url)
    return base + url[match.end() :] if match else url


def _descriptor(document: Any, base: str) -> bool:
    endpoint = document.get("endpoint") if isinstance(document, dict) else None
    if isinstance(endpoint, dict) and isinstance(endpoint.get("url"), str):
        endpoint["url"] = _origin(endpoint["url"], base)
        return True
    return False


def _listing(document: Any, base: str, scripted: list[dict[str, Any]]) -> bool:
    """The provider's list of skills, its URLs on mockskill, with the skills the scenarios
    script in it: each in place of the provider's skill of its id, or added at the end (a
    consumer that discovers skills finds the scripted ones too; they answer as scripted)."""
    skills = document.get("skills") if isinstance(document, dict) else None
    if not isinstance(skills, list):
        return False
    changed = False
    for item in skills:
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if isinstance(value, str) and re.match(r"^https?://", value):
                item[key], changed = _origin(value, base), True
    if scripted:
        ids = {item["id"] for item in scripted}
        kept = [i for i in skills if not (isinstance(i, dict) and i.get("id") in ids)]
        skills[:] = kept + scripted
        changed = True
    return changed


def _rewriter(base: str, change: Callable[[Any, str], bool]) -> Callable[[bytes], bytes]:
    def rewrite(body: bytes) -> bytes:
        try:
            document = json.loads(body)
        except ValueError:
            return body  # not JSON: relayed as it came
        return json.dumps(document).encode() if change(document, base) else body

    return rewrite


def served(relayed: Relayed | None, upstream: Upstream, fallback: Reply) -> Reply:
    """The reply the journal says was answered: the upstream's (its error code and retry
    advice read from a unified body), the failure answered instead, or *fallback*."""
    if relayed is None:
        return fallback
    if upstream.failures:
        return upstream.failures[-1]
    if upstream.after is not None and relayed.status is not None:
        return fallback  # commit then fail: the step's after: answered
    if relayed.status is None:
        return fallback
    body = relayed.sent_body if relayed.sent_body is not None else relayed.body
    code, retry = _error_of(body) if relayed.status >= 400 else (None, None)
    kind = next((v for k, v in relayed.response_headers if k.lower() == "content-type"), JSON_TYPE)
    return Reply(relayed.status, (), body, kind, code, retry)


def _error_of(body: bytes) -> tuple[str | None, Retry | None]:
    try:
        error = json.loads(body).get("error")
        code = error.get("code")
        advice = error.get("retry")
    except (ValueError, AttributeError):
        return None, None
    retry = None
    if isinstance(advice, dict):
        try:
            retry = Retry(int(advice["suggested_delay_ms"]), int(advice["max_attempts"]))
        except (KeyError, TypeError, ValueError):
            retry = None
    return (code if isinstance(code, str) and code in catalog.CATEGORIES else None), retry


class Proxying:
    """The engine's part of a proxied request: its plan, and its journalling once played.

    :attr:`recorder` (None: no recording) is set and unset while serving (the
    recording's admin API): read once per request, when it is planned.
    """

    def __init__(self, journalling: Journalling, state: Store) -> None:
        self._entry = journalling.outcome_entry
        self._state = state
        self.recorder: Recorder | None = None

    def plan(
        self, request: Incoming, decided: Decided, chosen: Chosen, scripted: Reply | None = None
    ) -> tuple[plans.Plan, Callable[[plans.Outcome], None]]:
        step = chosen.step
        assert step is not None
        assert step.proxy is not None
        recorder = self.recorder
        upstream = upstream_for(step, request, decided, chosen, recorder is not None, scripted)
        waits = (plans.Wait(chosen.delay_ms),) if chosen.delay_ms else ()
        plan = plans.Plan(plans.Answer(502), waits=waits, upstream=upstream)
        url = step.proxy.url
        declared = step.proxy.streams  # what the provider's streams promise, if said

        def record(outcome: plans.Outcome) -> None:
            relayed = outcome.upstream
            shown = served(relayed, upstream, step.reply)
            cut = relayed is not None and relayed.cut
            recorded = self._entry(request, decided, chosen, shown, outcome, cut=cut)
            key = request.header("idempotency-key")
            journal = (
                # not played upstream: a client gone, a stop, during a delay
                plans.upstream_journal(url, key) if relayed is None else relayed.journal(url, key)
            )
            reached = bool(journal.get("reached"))  # it may have run on the provider
            stream = None if relayed is None else relayed.stream
            if stream is not None and stream.error_data is not None and not upstream.failures:
                # a stream the provider ended with an error event: that error's answer
                code, retry = _error_of(stream.error_data)
                if code is not None:
                    recorded = recorded._replace(error_code=code, retry=retry)
            self._state.record(
                recorded._replace(
                    upstream=journal,
                    executed=reached,
                    stream=None if stream is None else stream.record(declared),
                )
            )
            if recorder is not None and relayed is not None and relayed.status is not None:
                recorder.add(
                    Exchange(
                        decided.started,
                        decided.session,
                        request.method,
                        relayed.target,
                        relayed.headers,
                        request.body,
                        url,
                        relayed.status,
                        relayed.response_headers,
                        relayed.body,
                        relayed.truncated,
                        relayed.ms,
                        None if stream is None else stream.taken(),
                    )
                )

        return plan, record


def proxy_needs_loop(step: Step) -> Reply:
    """The WSGI path's answer to a proxy step: 501, proxying is the event-loop server's."""
    assert step.proxy is not None
    message = (
        f"this step forwards to {step.proxy.url}, which only mockskill's own server does"
        " (mockskill serve, mockskill.Server); a WSGI server mounting the app cannot proxy"
    )
    details = {"upstream": step.proxy.url, "where": str(step.where)}
    return Reply.error(catalog.tool_error(501, "MOCKSKILL_PROXY_UNSUPPORTED", message, details))
