"""Playing one step at request time: waits, hangs, timeouts, slow bodies, faults.

The engine has chosen the step and drawn its random values; this module
acts them out on the connection and hands back a Werkzeug response:

1. ``delay``: wait, then go on;
2. ``hang``: hold the connection without a byte, up to its bound;
3. ``execution``: spend that long — unless the skill's ``timeout_ms`` is
   shorter, in which case answer ``EXECUTION_TIMEOUT`` at the timeout, with
   the elapsed time measured, not copied from the script;
4. then answer: a transport ``fault`` done to the raw socket, a ``dribble``
   of the body in timed chunks, or the plain reply.

Every wait watches the connection: when the client gives up (closes), the
wait ends at once, the thread is freed, and :attr:`Connection.left_at`
records when — that is the consumer's real timeout.

A dribbled answer is two moments to the consumer: its status line (with
any ``Retry-After``), on which a client may act at once, and its last byte.
:attr:`Connection.headers_sent` records the first; :meth:`Connection.done`
is called just *before* the byte that completes the answer is written, so
that whoever records the request has it in the journal by the time the
client holds the whole answer (or when the body is abandoned).
"""

from __future__ import annotations

import contextlib
import functools
import random
import select
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from werkzeug.wrappers import Response

from ..protocol import catalog
from ..protocol.catalog import BASE_URL, REFUSED_BASE_URL
from ..scenario.model import Reply, Step
from . import plan as plans
from .faults import FAULTS, take

_BASE = BASE_URL.encode()
_REFUSED = REFUSED_BASE_URL.encode()


class Connection:
    """One request's connection: waits that end early when the client leaves."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.sock: socket.socket | None = environ.get("werkzeug.socket")
        self.left_at: float | None = None
        """Wall-clock time the client was seen to close the connection."""
        self.headers_sent: float | None = None
        """Wall-clock time the status line and headers of a slow body went out."""
        self.on_done: Callable[[], None] | None = None
        """Called once by :meth:`done`: the engine's recording of the request."""
        self._done = False

    @property
    def is_done(self) -> bool:
        return self._done

    def done(self) -> None:
        """The answer is complete (its last byte is about to go) or abandoned; once only."""
        if self._done:
            return
        self._done = True
        if self.on_done is not None:
            self.on_done()

    def wait(self, seconds: float) -> bool:
        """Wait *seconds*; False as soon as the client has closed the connection.

        The request body must have been read already, so that anything the
        socket still has to say is the client's goodbye.
        """
        if seconds <= 0:
            return self.left_at is None
        deadline = time.monotonic() + seconds
        if self.sock is None:  # not Werkzeug's server: no way to watch, just wait
            time.sleep(seconds)
            return True
        while self.left_at is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            try:
                peeked = (
                    self.sock.recv(1, socket.MSG_PEEK) if _readable(self.sock, remaining) else None
                )
            except (OSError, ValueError):
                peeked = b""
            if peeked == b"":
                self.left_at = time.time()
            elif peeked is not None:  # a pipelined request, not a goodbye: just wait
                time.sleep(max(0.0, deadline - time.monotonic()))
                return True
        return False


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether *sock* has something to say (data, or its close) within *timeout* seconds.

    poll(), not select(): select() cannot watch descriptors numbered 1024 or
    more, which a server holding a thousand waiting connections has.
    """
    if not hasattr(select, "poll"):  # pragma: no cover - Windows
        return bool(select.select([sock], [], [], timeout)[0])
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(max(0, int(timeout * 1000) + 1)))


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
        body, headers = reply.body.replace(_BASE, self.base.encode()), reply.headers
        headers = tuple((k, v.replace(BASE_URL, self.base)) for k, v in headers)
        if self.refused is not None:
            body = body.replace(_REFUSED, self.refused.encode())
            headers = tuple((k, v.replace(REFUSED_BASE_URL, self.refused)) for k, v in headers)
        for placeholder, base in self.tls:
            body = body.replace(placeholder.encode(), base.encode())
            headers = tuple((k, v.replace(placeholder, base)) for k, v in headers)
        return Reply(reply.status, headers, body, reply.content_type, reply.error_code, reply.retry)


@functools.lru_cache(maxsize=256)
def _filled(urls: Urls, reply: Reply) -> Reply:
    """*reply* filled in for *urls*, made once per pair: the same filled reply (and so the
    same answer, its head rendered once) serves every request that reached the server
    by the same address. Bounded in count (the model's replies are few, and so are the
    addresses a server is reached by): a client varying its Host only churns it."""
    return urls.fill(reply)


@dataclass
class Played:
    """How a step was played, for the journal."""

    reply: Reply
    delay_ms: float | None = None
    execution_ms: float | None = None
    fault: str | None = None
    """The fault done to the connection (None if the client left first)."""
    timed_out: bool = False


def respond(reply: Reply) -> Response:
    """The plain HTTP response for a filled-in reply."""
    return Response(
        reply.body, status=reply.status, headers=reply.headers, content_type=reply.content_type
    )


class Cut(Response):
    """A response that is never sent: the connection is dealt with, then dropped.

    Raising ConnectionAbortedError from the WSGI call is how Werkzeug's
    server learns that the connection is gone and must not be written to.
    """

    def __init__(self, fault: str | None = None, reply: Reply | None = None, seed: int = 0):
        super().__init__(b"")
        self.fault, self.reply, self.seed = fault, reply, seed

    def __call__(self, environ: Any, start_response: Any) -> Iterable[bytes]:
        sock = environ.get("werkzeug.socket")
        if self.fault is not None and sock is not None and self.reply is not None:
            conn = take(sock)
            # The client may be gone already: then the fault has nothing to
            # break, and the socket must still be closed.
            with contextlib.closing(conn), contextlib.suppress(OSError):
                FAULTS[self.fault](conn, self.reply, random.Random(self.seed))
        raise ConnectionAbortedError(self.fault or "the client left")


def play(
    step: Step,
    connection: Connection,
    urls: Urls,
    *,
    delay_ms: float | None,
    execution_ms: float | None,
    fault_seed: int,
    timeout: tuple[int, int, catalog.Context] | None,
) -> tuple[Response, Played]:
    """Act out *step* on *connection*; the random values are drawn already.

    *timeout* is the skill's ``(timeout_ms, status, context)`` if it has one.
    Execution is timed from when it starts, after any delay or hang: the
    delay stands for the network, the execution for the skill.
    """
    played = Played(step.reply, delay_ms, execution_ms)
    if delay_ms and not connection.wait(delay_ms / 1000):
        return Cut(), played
    if step.hang_ms and not connection.wait(step.hang_ms / 1000):
        return Cut(), played
    reply = step.reply
    if execution_ms is not None:
        started = time.monotonic()
        if timeout is not None and execution_ms > timeout[0]:
            limit, status, context = timeout
            if not connection.wait(limit / 1000):
                return Cut(), played
            elapsed = round((time.monotonic() - started) * 1000)
            details = {"timeout_ms": limit, "elapsed_ms": elapsed}
            reply = Reply.error(
                catalog.render("EXECUTION_TIMEOUT", context, status=status, details=details)
            )
            played.timed_out = True
        elif not connection.wait(execution_ms / 1000):
            return Cut(), played
    reply = urls.fill(reply)
    played.reply = reply
    if step.fault is not None and not played.timed_out:
        played.fault = step.fault
        return Cut(step.fault, reply, fault_seed), played
    if step.dribble is not None and not played.timed_out:
        return _dribbled(reply, step.dribble.chunks, step.dribble.over_ms, connection), played
    return respond(reply), played


def _dribbled(reply: Reply, chunks: int, over_ms: int, connection: Connection) -> Response:
    body = reply.body
    size = -(-len(body) // chunks) or 1
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    pause = over_ms / 1000 / len(pieces)

    def stream() -> Iterator[bytes]:
        try:
            # Taken before the write: a client acting on the status line at once may be
            # answered on another thread before this one runs again.
            connection.headers_sent = time.time()
            if not body:  # the status line and headers are the whole answer
                connection.done()
            # Werkzeug sends the status line and headers now: a slow body, not a slow start.
            yield b""
            for i, piece in enumerate(pieces):
                if not connection.wait(pause):
                    return
                if i == len(pieces) - 1:
                    # Recorded before the last byte leaves, so a client holding the whole
                    # answer finds it in the journal: Werkzeug closes the iterable only
                    # after lingering on the socket, milliseconds after that byte.
                    connection.done()
                yield piece
        finally:
            if connection.left_at is None and not connection.is_done:
                connection.left_at = time.time()  # Werkzeug stopped: a write failed, it is gone
            connection.done()

    response = Response(
        stream(),
        status=reply.status,
        headers=reply.headers,
        content_type=reply.content_type,
    )
    response.headers["Content-Length"] = str(len(body))
    return response


# -- planning, for the event-loop transport ------------------------------------------
#
# The same step, not played but planned: what play() does with threads and sleeps
# above becomes data the transport plays with timers (mockskill.engine.plan).


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


def answer_of(response: Response) -> plans.Answer:
    """The transport's answer for a Werkzeug response (read whole)."""
    # The standard reason phrase, as for every skill answer (Werkzeug's is upper case).
    return plans.Answer(response.status_code, tuple(response.headers.items()), response.get_data())


@dataclass
class Planned:
    """A step's plan, and what the journal needs to know once it is played."""

    plan: plans.Plan
    reply: Reply
    """The reply the plan answers with unless its execution is cut."""
    timed_out: list[Reply]
    """Filled with the ``EXECUTION_TIMEOUT`` reply when the cut answers (at play time)."""


def plan(
    step: Step,
    urls: Urls,
    *,
    delay_ms: float | None,
    execution_ms: float | None,
    fault_seed: int,
    timeout: tuple[int, int, catalog.Context] | None,
) -> Planned:
    """What :func:`play` does, as a plan: waits, the execution's cut, then the answer."""
    reply = urls.fill_kept(step.reply)
    waits: list[plans.Wait] = []
    if delay_ms:
        waits.append(plans.Wait(delay_ms))
    if step.hang_ms:
        waits.append(plans.Wait(step.hang_ms, plans.WaitKind.HANG))
    timed_out: list[Reply] = []
    if execution_ms is not None:
        cut = None
        if timeout is not None and execution_ms > timeout[0]:
            limit, status, context = timeout

            def timed_out_answer(elapsed_ms: float) -> plans.Answer:
                details = {"timeout_ms": limit, "elapsed_ms": round(elapsed_ms)}
                rendered = Reply.error(
                    catalog.render("EXECUTION_TIMEOUT", context, status=status, details=details)
                )
                timed_out.append(urls.fill(rendered))
                return answer(timed_out[-1])

            cut = plans.Cut(limit, timed_out_answer)
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
