"""A request answered on a WSGI server's thread: waits slept, faults done to the socket.

The event-loop transport asks :meth:`Engine.plan <mockskill.engine.engine.Engine.plan>`
for what to answer and plays the waits with timers; a WSGI server (the app of
:func:`mockskill.create_app`, mounted wherever a user mounts it) calls
:func:`handle` instead, which decides through the same
:meth:`Engine.decide` and then acts the step out here, on the thread, and
hands back a Werkzeug response:

1. ``delay``: wait, then go on;
2. ``hang``: hold the connection without a byte, up to its bound;
3. ``execution``: spend that long — unless the skill's ``timeout_ms`` is
   shorter, in which case answer ``EXECUTION_TIMEOUT`` at the timeout, with
   the elapsed time measured, not copied from the script;
4. then answer: a transport ``fault`` done to the raw socket, a ``dribble``
   of the body in timed chunks, or the plain reply.

Every wait watches the connection: when the client gives up (closes), the
wait ends at once, the thread is freed, and :attr:`ClientConnection.left_at`
records when — that is the consumer's real timeout.

A dribbled answer is two moments to the consumer: its status line (with
any ``Retry-After``), on which a client may act at once, and its last byte.
:attr:`ClientConnection.headers_sent` records the first; :meth:`ClientConnection.done`
is called just *before* the byte that completes the answer is written, so
that whoever records the request has it in the journal by the time the
client holds the whole answer (or when the body is abandoned).

It sleeps and watches the socket, so it is not the engine's (which is sans-IO):
only the WSGI app imports it, so serving on the loop never loads Werkzeug.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ..engine import task_watch
from ..engine.actions import Urls
from ..engine.choosing import Chosen, Decided, request_values
from ..engine.entries import Entry
from ..engine.incoming import Incoming
from ..engine.pending import Pending, answered
from ..engine.proxying import proxy_needs_loop
from ..engine.rendering import RequestValues, rendered
from ..engine.store import StoreUnavailable
from ..engine.streams import stream_needs_loop
from ..protocol import catalog
from ..scenario.model import Reply
from .socket_faults import FAULTS, take

if TYPE_CHECKING:
    from ..engine.engine import Engine


def handle(engine: Engine, request: Request) -> Response:
    """Answer *request* on this thread: waits are slept (a WSGI server's way); the
    store's answers are waited for here too (:meth:`Store.answer`: off the loop).

    The event-loop transport asks :meth:`Engine.plan` instead and plays the waits
    with timers; both decide through :meth:`Engine.decide`.
    """
    incoming = Incoming.of(request)
    try:  # the store answers what deciding needs here: it may raise
        result = engine.decide(incoming)
        decided = answered(result, engine.state) if isinstance(result, Pending) else result
    except StoreUnavailable as exc:
        return respond(engine.unavailable(incoming, exc))
    if not isinstance(decided, Decided):  # answered by mockskill itself, journalled already
        return decided if isinstance(decided, Response) else respond(decided)
    if decided.watch is not None:  # a stream is the loop transport's: the task as a poll sees it
        decided.reply = task_watch.polled(decided.watch)
    reply, chosen = decided.reply_to_send(), decided.chosen
    limited = decided.limited
    added = () if limited is None or not limited.added else limited.headers
    if reply is not None:
        if chosen is not None and chosen.delay_ms:  # (a scripted rate_limited step's)
            connection = ClientConnection(incoming.werkzeug().environ)
            if not connection.wait(chosen.delay_ms / 1000):
                entry = engine.entry(incoming, decided, chosen, None, reply)
                engine.state.record(entry._replace(client_left=connection.left_at))
                return CutResponse()
        response = respond(reply)
        response.headers.extend(added)  # (an admitted request's rate-limit headers)
        code = response.status_code
        engine.state.record(engine.entry(incoming, decided, chosen, code, reply))
        return response
    assert chosen is not None
    assert chosen.step is not None
    if chosen.step.proxy is not None or chosen.step.stream is not None:
        step = chosen.step
        reply = proxy_needs_loop(step) if step.proxy is not None else stream_needs_loop(step)
        engine.state.record(engine.entry(incoming, decided, chosen, reply.status, reply))
        return respond(reply)
    response, played, connection = _play(incoming, decided, chosen, decided.urls)
    response.headers.extend(added)
    status = None if isinstance(response, CutResponse) else response.status_code
    recorded = engine.entry(
        incoming,
        decided,
        chosen,
        status,
        played.reply,
        fault=played.fault,
        client_left=connection.left_at,
    )
    if chosen.step.dribble is None or played.timed_out:
        engine.state.record(recorded)
    else:  # a dribbled body: recorded just before its last byte goes (or when abandoned)
        connection.on_done = lambda: engine.state.record(finished(recorded, connection))
        response.call_on_close(connection.done)  # a body never iterated (HEAD)
    return response


def finished(recorded: Entry, connection: ClientConnection) -> Entry:
    """*recorded* as its dribbled answer ended: when, and whether the client had left."""
    return recorded._replace(
        finished=time.time(),
        client_left=connection.left_at,
        headers_sent=connection.headers_sent,
    )


def _play(
    request: Incoming, decided: Decided, chosen: Chosen, urls: Urls
) -> tuple[Response, Played, ClientConnection]:
    """Play *chosen*'s step on this thread (see :func:`handle`)."""
    step = chosen.step
    assert step is not None
    werkzeug_request = request.werkzeug()
    connection = ClientConnection(werkzeug_request.environ)
    if chosen.delay_ms or chosen.execution_ms or step.hang_ms or step.dribble or step.fault:
        # Read the whole request first: a fault must not strike while the
        # client is still sending, and during a wait a readable socket
        # must mean the client's goodbye.
        werkzeug_request.get_data()
    values = None if step.reply.template is None else request_values(request, decided, chosen)
    response, played = play(chosen, connection, urls, values)
    return response, played, connection


class ClientConnection:
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


class CutResponse(Response):
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
    chosen: Chosen,
    connection: ClientConnection,
    urls: Urls,
    values: RequestValues | None = None,
) -> tuple[Response, Played]:
    """Act out *chosen*'s step on *connection*; its random values are drawn already.

    Its *timeout* is the skill's ``(timeout_ms, status, context)`` if it has one.
    Execution is timed from when it starts, after any delay or hang: the
    delay stands for the network, the execution for the skill.
    """
    step = chosen.step
    assert step is not None
    delay_ms, execution_ms, timeout = chosen.delay_ms, chosen.execution_ms, chosen.timeout
    played = Played(step.reply, delay_ms, execution_ms)
    if delay_ms and not connection.wait(delay_ms / 1000):
        return CutResponse(), played
    if step.hang_ms and not connection.wait(step.hang_ms / 1000):
        return CutResponse(), played
    reply = step.reply
    if execution_ms is not None:
        started = time.monotonic()
        if timeout is not None and execution_ms > timeout[0]:
            limit, status, context = timeout
            if not connection.wait(limit / 1000):
                return CutResponse(), played
            elapsed = round((time.monotonic() - started) * 1000)
            details = {"timeout_ms": limit, "elapsed_ms": elapsed}
            reply = Reply.error(
                catalog.render("EXECUTION_TIMEOUT", context, status=status, details=details)
            )
            played.timed_out = True
        elif not connection.wait(execution_ms / 1000):
            return CutResponse(), played
    reply = urls.fill(reply)
    if values is not None and reply.template is not None:  # (not the timeout's error)
        reply = rendered(reply, values)
    played.reply = reply
    if step.fault is not None and not played.timed_out:
        played.fault = step.fault
        return CutResponse(step.fault, reply, chosen.fault_seed), played
    if step.dribble is not None and not played.timed_out:
        return _dribbled(reply, step.dribble.chunks, step.dribble.over_ms, connection), played
    return respond(reply), played


def _dribbled(reply: Reply, chunks: int, over_ms: int, connection: ClientConnection) -> Response:
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
