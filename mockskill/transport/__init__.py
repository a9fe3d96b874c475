"""The transport: one asyncio event loop that parses HTTP/1.1 and plays plans.

It does the I/O and decides nothing: a :class:`~.handler.Handler` turns each
parsed :class:`~.handler.Request` into a :class:`~mockskill.engine.plan.Plan`
(what to answer, and how: waits, cuts, dribbles, faults, streams, keep-alive
behaviour), the transport plays it with loop timers and reports an
:class:`~mockskill.engine.plan.Outcome`. The plan type is the engine's
(which produces it); the transport imports it, and of the rest only the
proxy's bounds (``engine/proxying``) and a scenario's ``proxy:`` target.

It may import ``engine/`` (the plan), ``scenario/`` and ``protocol/``; nothing
below it imports it, and the faces (``server/``, ``cli/``) serve
through it.

| module | owns |
|---|---|
| :mod:`.handler` | request, refusal, outcome; the handler interface, its fallback; routes |
| :mod:`.connection` | one connection: the asyncio callbacks, plans played in order, closing |
| :mod:`.reading` | the connection's reader: bytes to request or refusal events, limits |
| :mod:`.rules` | RFC 9112's other rules: codings, ``Host``, versions; an upgrade's body |
| :mod:`.waiting` | the connection's waits, which end when the client leaves or the server stops |
| :mod:`.timers` | what is due, by the millisecond, on one loop timer, however many waits |
| :mod:`.streaming` | a stream of events played: head, pieces on time, heartbeats, the ending |
| :mod:`.relaying` | a proxy plan's relay: the request sent upstream, the answer handed on |
| :mod:`.upstream` | the HTTP/1.1 client to real providers: a keep-alive pool on the loop |
| :mod:`.courier` | task callbacks sent: a loop timer per task, POSTs through the pool, retries |
| :mod:`.task_watches` | watched tasks followed: records read again, the next events played |
| :mod:`.shared` | what one server's connections share: timeouts sweep, drain, cut, trim |
| :mod:`.faults` | the five transport faults, done to an asyncio transport |
| :mod:`.ports` | binding: a host's address family and socket address; the refused port |
| :mod:`.tls` | certificates and TLS contexts: the local CA, what each TLS fault serves |
| :mod:`.tls_faults` | the TLS faults' listeners: a port per ``tls: FAULT`` skill |
| :mod:`.loop_server` | binding, the background-thread server, the main-thread run, the drain |
| :mod:`.wsgi` | a handler running a WSGI app in a thread pool off the loop |
"""

from __future__ import annotations

from ..engine.plan import (
    Answer,
    Cut,
    Dribble,
    Fault,
    KeepAlive,
    Outcome,
    Plan,
    Stale,
    Wait,
    WaitKind,
)
from .handler import Handler, Refusal, Request, Routes
from .loop_server import DEFAULT_GRACE, LoopServer, ThreadedServer, new_loop, run
from .reading import Limits
from .wsgi import WSGIHandler

__all__ = [
    "DEFAULT_GRACE",
    "Answer",
    "Cut",
    "Dribble",
    "Fault",
    "Handler",
    "KeepAlive",
    "Limits",
    "LoopServer",
    "Outcome",
    "Plan",
    "Refusal",
    "Request",
    "Routes",
    "Stale",
    "ThreadedServer",
    "WSGIHandler",
    "Wait",
    "WaitKind",
    "new_loop",
    "run",
]
