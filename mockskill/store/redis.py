"""The Redis store: one truth for every replica, each need one atomic script.

:class:`RedisStore` implements :class:`~mockskill.engine.store.Store` on a
Redis server (``--state redis://...``). Each need is one Lua script
(:mod:`.scripts`), run by ``EVALSHA``: off the loop (the WSGI face, admin
threads) with a blocking client, one command per need; on the loop with an
asyncio client, the needs of one loop turn in one pipeline
(:mod:`.batching`). The journal is the shared stream of :mod:`.journal`;
its entries recorded on a loop go out in that loop's batches
(:mod:`.loop_journal`), the others from the journal's flusher thread.

Failures are a state, not a loss: a command that cannot be answered
(Redis unreachable, a reply later than :data:`SOCKET_TIMEOUT`) raises
:class:`~mockskill.engine.store.StoreUnavailable`, and :meth:`RedisStore.health`
says ``degraded`` with the reason while Redis does not answer (it asks Redis
itself, a PING bounded by :data:`HEALTH_TIMEOUT`, so that it tells a Redis gone
or frozen, and back, with no traffic).

Sessions are bounded as in memory (the least recently used beyond
``max_sessions`` is forgotten) and, so that a fleet gone leaves nothing
behind for ever, each session's keys expire when unused for
:data:`SESSION_TTL` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import secrets
import socket
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..engine.entries import Entry
from ..engine.state import DEFAULT_JOURNAL_SIZE, DEFAULT_MAX_SESSIONS
from ..engine.store import Health, Need, NeedAnswer, StoreUnavailable
from . import scripts
from .batching import Batcher
from .commands import Encoder, Keys, decoded
from .journal import RedisJournal
from .loop_journal import LoopJournal
from .startup_errors import StoreOpenError
from .stream_entries import APPEND, APPEND_SHA
from .url import checked, masked

if TYPE_CHECKING:
    import redis.asyncio

PREFIX = "mockskill:"
SOCKET_TIMEOUT = 1.0
"""Seconds a command may take before Redis counts as unavailable (not a hang)."""
HEALTH_TIMEOUT = 0.5
"""Seconds health's PING may take: a readiness probe hears of a frozen Redis at once."""
SESSION_TTL = 7 * 24 * 3600
"""Seconds a session's positions and draws are kept in Redis when it is not used."""
_ERRORS = (redis.RedisError, OSError)


def open_redis(
    url: str,
    *,
    seed: int | None = None,
    journal_size: int = DEFAULT_JOURNAL_SIZE,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    replica: str | None = None,
    namespace: str = "",
    session_ttl: int = SESSION_TTL,
) -> RedisStore:
    """A :class:`RedisStore` on *url*, connected and its scripts loaded; else StoreOpenError."""
    url = checked(url)
    if journal_size < 1:
        raise ValueError(f"journal_size must be at least 1, not {journal_size}")
    store = RedisStore(
        url,
        journal_size=journal_size,
        max_sessions=max_sessions,
        replica=replica,
        namespace=namespace,
        session_ttl=session_ttl,
    )
    try:
        store.connect(seed)
    except _ERRORS as error:
        store.close()
        raise StoreOpenError(
            f"cannot use the state store {masked(url)}: {store.reason(error)}"
        ) from None
    return store


class RedisStore:
    """Sequence positions, tokens, outage clocks, draws and the journal of every replica."""

    remote = True

    def __init__(
        self,
        url: str,
        *,
        journal_size: int,
        max_sessions: int,
        replica: str | None,
        namespace: str,
        session_ttl: int,
    ) -> None:
        self.url = url
        self.masked_url = masked(url)
        self.replica: str | None = replica or f"{socket.gethostname()}:{os.getpid()}"
        self.max_sessions = max_sessions
        self.seed = 0
        self.digest_key = b""
        self.keys = Keys(PREFIX + (f"{namespace}:" if namespace else ""))
        self.shas = {
            name: hashlib.sha1(source.encode()).hexdigest()
            for name, source in scripts.SCRIPTS.items()
        }
        self._sources = {self.shas[name]: source for name, source in scripts.SCRIPTS.items()}
        self._sources[APPEND_SHA] = APPEND  # the journal's, sent on the loop's connection too
        self.encoder = Encoder(self.keys, self.shas, max_sessions, session_ttl * 1000)
        # No retries: a command sent again after a lost reply could take a position twice.
        self.client = redis.Redis.from_url(url, **self._options())
        self._execute: Callable[..., Any] = self.client.execute_command  # (untyped in redis-py)
        # Health's own connection, with a shorter bound than the needs' (a probe's answer).
        self._health_client = redis.Redis.from_url(
            url,
            socket_timeout=HEALTH_TIMEOUT,
            socket_connect_timeout=HEALTH_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )
        self.journal_store = RedisJournal(self.client, self.keys.prefix, journal_size, self.replica)
        self._batchers: dict[asyncio.AbstractEventLoop, Batcher] = {}
        self._loop_journals: dict[asyncio.AbstractEventLoop, LoopJournal] = {}
        self._guards: list[AsyncGenerator[None, None]] = []
        self._failure: str | None = None

    def _options(self) -> dict[str, Any]:
        return {
            "socket_timeout": SOCKET_TIMEOUT,
            "socket_connect_timeout": SOCKET_TIMEOUT,
            "retry": Retry(NoBackoff(), 0),
        }

    def connect(self, seed: int | None) -> None:
        """PING, load the scripts, and agree on the seed (the explicit one wins and is kept)."""
        self.client.ping()
        for name, source in scripts.SCRIPTS.items():
            assert self.client.script_load(source) == self.shas[name]
        if seed is None:
            self.client.set(self.keys.seed, random.SystemRandom().randrange(2**32), nx=True)
            seed = int(self.client.get(self.keys.seed))  # type: ignore[arg-type]
        else:
            self.client.set(self.keys.seed, seed)
        self.seed = seed
        # The journal's digest key, the first replica's: the audit knows a retry that
        # another replica served for the same request by its body's digest.
        self.client.set(self.keys.digest_key, secrets.token_bytes(32), nx=True)
        self.digest_key = self.client.get(self.keys.digest_key)  # type: ignore[assignment]

    def reason(self, error: BaseException) -> str:
        """What *error* says, with its kind, for a person (never the URL's password)."""
        text = str(error) or type(error).__name__
        password = self.client.connection_pool.connection_kwargs.get("password")
        if password:
            text = text.replace(str(password), "***")
        return f"{text} ({type(error).__name__})" if str(error) else text

    # -- answering needs -------------------------------------------------------------------

    def answer(self, need: Need) -> NeedAnswer:
        """Answer *need* now with one EVALSHA (blocking: off the loop only)."""
        command = self.encoder.command(need)
        try:
            try:
                reply = self._execute(*command)
            except redis.exceptions.NoScriptError:  # Redis restarted: load them again
                self._load_scripts()
                reply = self._execute(*command)
        except _ERRORS as error:
            raise self._unavailable(error) from None
        self._seen(None)
        return decoded(need, reply)

    async def answer_async(self, need: Need) -> NeedAnswer:
        """Answer *need* in the pipeline of this loop turn (see :mod:`.batching`)."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._on_loop(loop).batcher
        return decoded(need, await batcher.send(self.encoder.packed(need)))

    def _on_loop(self, loop: asyncio.AbstractEventLoop) -> LoopJournal:
        """The running *loop*'s batcher and journal queue, made (the server runs one loop).

        The batcher's guard is started here, at once, so that the loop's end
        (``shutdown_asyncgens``) sends what is queued and closes the connection.
        """
        batcher = self._batchers[loop] = Batcher(
            self.url, SOCKET_TIMEOUT, self._sources, self.reason, self._seen
        )
        journal = self._loop_journals[loop] = LoopJournal(self.journal_store, batcher)
        guard = batcher.guard()
        self._guards.append(guard)
        with contextlib.suppress(StopIteration):  # it stops at its yield: it is started
            guard.asend(None).send(None)
        return journal

    def _load_scripts(self) -> None:
        for source in scripts.SCRIPTS.values():
            self.client.script_load(source)

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        reason = self.reason(error)
        self._seen(reason)
        return StoreUnavailable(reason)

    def _seen(self, failure: str | None) -> None:
        """Note how the last command went (None: answered)."""
        self._failure = failure

    def _run(self, name: str, keys: list[str], args: Iterable[str | int]) -> Any:
        """Script *name*'s reply (blocking), or StoreUnavailable."""
        command = ("EVALSHA", self.shas[name], len(keys), *keys, *args)
        try:
            try:
                reply = self._execute(*command)
            except redis.exceptions.NoScriptError:
                self._load_scripts()
                reply = self._execute(*command)
        except _ERRORS as error:
            raise self._unavailable(error) from None
        self._seen(None)
        return reply

    # -- what every replica shares ----------------------------------------------------------

    def restart(self, keys: Iterable[str]) -> dict[str, int]:
        """Restart sequences *keys* everywhere (a new generation each); every generation."""
        reply = self._run("restart", [self.keys.gen], sorted(set(keys)))
        pairs = iter(reply)
        return {key.decode(): int(value) for key, value in zip(pairs, pairs, strict=True)}

    def activate(self, names: Iterable[str]) -> None:
        """Scenarios *names* start now (Redis's clock): their outage windows count from it."""
        names = list(names)
        if names:
            self._run("activate", [self.keys.act], names)

    def reset(self, session: str | None = None, keys: Iterable[str] | None = None) -> None:
        """Forget what was played, as the in-memory store does, for every replica.

        Everything: positions, draws, tokens, rate limits' buckets, long-running tasks (not
        their count: a task number is never handed out again) and the journal; a session:
        its positions, draws, buckets, tasks and journal entries; *keys*: those sequences'
        positions (of *session*, or of every session). Generations and activations stay.
        """
        k = self.keys
        tasks = [k.tasks]
        if keys is not None:
            one = "" if session is None else "=" + session
            self._run("reset_keys", [k.sessions], [k.session, one, *set(keys)])
        elif session is None:
            self._run(
                "reset_all", [k.sessions, k.tokens, k.buckets], [k.session, k.token, k.bucket]
            )
            self._run("reset_tasks", tasks, [k.task, k.task_held, ""])
            self._journal_call(lambda: self.journal_store.clear())
        else:
            try:
                pipe = self.client.pipeline(transaction=True)
                pipe.delete(k.session + session)
                pipe.zrem(k.sessions, session)
                pipe.execute()
            except _ERRORS as error:
                raise self._unavailable(error) from None
            self._run("reset_tasks", tasks, [k.task, k.task_held, "=" + session])
            self._journal_call(lambda: self.journal_store.clear(session))

    def _journal_call(self, call: Any) -> Any:
        try:
            return call()
        except _ERRORS as error:
            raise self._unavailable(error) from None

    # -- the journal (the shared stream's) -----------------------------------------------------

    @property
    def capacity(self) -> int:
        return self.journal_store.capacity

    def next_id(self) -> int:
        return self.journal_store.next_id()

    def record(self, entry: Entry) -> None:
        """Queue *entry*: on a loop in the loop's queue (sent with its batches), elsewhere
        in the journal's (sent by its flusher thread)."""
        loop = _running_loop()
        if loop is None:
            self.journal_store.record(entry)
            return
        journal = self._loop_journals.get(loop)
        if journal is None:
            journal = self._on_loop(loop)
        journal.record(entry)

    def journal(self, session: str | None = None) -> list[Entry]:
        return self._journal_call(lambda: self.journal_store.entries(session))  # type: ignore[no-any-return]

    def hide(self, secret: str) -> None:
        self.journal_store.hide(secret)

    def compact(self, budget: int = 0) -> bool:
        """Nothing to pack: the journal is Redis's."""
        return True

    # -- health ----------------------------------------------------------------------------

    def health(self) -> Health:
        """``ok`` while Redis answers a PING within :data:`HEALTH_TIMEOUT`, else ``degraded``
        with why.

        It asks Redis each time (blocking, off the loop: the admin app's thread),
        not only after a request failed: a store gone or frozen while no request
        came is seen at once, and so is its return.
        """
        journal = self.journal_store
        try:
            self._health_client.ping()
        except _ERRORS as error:
            self._failure = self.reason(error)
        else:
            self._failure = None
        backend = self.masked_url
        if self._failure is not None:
            return Health("degraded", self._failure, journal.lost, backend)
        return Health("ok", None, journal.lost, backend)

    def close(self) -> None:
        """Send what the journal holds, and let go of the connections.

        Each loop still running sends its queue and closes its connection first;
        what a loop stopped without that holds is sent by the journal's flusher.
        """
        batchers: dict[asyncio.AbstractEventLoop, Batcher] = self.__dict__.get("_batchers", {})
        here = _running_loop()
        for loop, batcher in list(batchers.items()):
            if loop.is_closed() or not loop.is_running():
                continue  # its connection closed with it (Batcher.guard), its queue is sent below
            if here is loop:
                loop.create_task(batcher.close())
            else:
                with contextlib.suppress(Exception):  # a loop stopping meanwhile: nothing to wait
                    done = asyncio.run_coroutine_threadsafe(batcher.close(), loop)
                    done.result(3 * SOCKET_TIMEOUT)  # (a connection made, its batches answered)
        journal = self.__dict__.get("journal_store")
        if journal is not None:
            journal.close()
        batchers.clear()
        self.__dict__.get("_loop_journals", {}).clear()
        self.client.close()
        if "_health_client" in self.__dict__:
            self._health_client.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
