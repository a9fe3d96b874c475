"""The shared scenario set on Redis: versions written compare-and-set, published, caught up.

Owns the Redis side of one set of scenarios for every replica: a hash
``PREFIX:scenarios`` holding the ``version`` (a counter), the ``set`` (the
records of that version, :mod:`.shared_set`) and the ``files`` digest. A
version is written only on top of the version the writer read (one Lua
script: compare, write, ``PUBLISH`` the new number), so two replicas that
change the set at once cannot both win: the loser is told, re-reads and
tries its change again. Every replica's :class:`SharedScenarios` listens on
the channel from a daemon thread and also polls the version every
:data:`POLL_INTERVAL` seconds (and whenever its subscription is (re)made), so
a message it missed — a dropped subscription, a Redis restart, a replica
started later — is caught up within about a second. Resets are announced on
a second channel. What a replica does with a new version is the registry's
(:mod:`mockskill.control.sharing`); this module only moves versions.

It talks to Redis through the synchronous redis-py client: the set changes
on admin requests and from threads, never on the event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from ..engine.store import StoreUnavailable
from .shared_set import BadVersion, Record, Stored, decode, encode
from .url import checked, masked

POLL_INTERVAL = 1.0
"""Seconds between two looks at the stored version (the catch-up for missed messages)."""
TIMEOUT = 2.0
"""Seconds a Redis round trip may take before the set counts as unreachable."""
log = logging.getLogger("mockskill.shared")

# KEYS: the set's hash, the state's generations hash, the state's activations hash.
# ARGV: the version the writer read, the set, the files digest, the channel, how many
# sequence keys follow, those keys (restarted: a new generation each), then the names of
# the scenarios whose outage windows start now (Redis's clock, in ms, as the state's).
# Returns {1, new version} when written, {0, stored version} when another write came first.
_WRITE = """
local stored = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if stored ~= tonumber(ARGV[1]) then
  return {0, stored}
end
local version = stored + 1
redis.call('HSET', KEYS[1], 'version', version, 'set', ARGV[2], 'files', ARGV[3])
local count = tonumber(ARGV[5])
for i = 6, 5 + count do
  redis.call('HINCRBY', KEYS[2], ARGV[i], 1)
end
if #ARGV > 5 + count then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for i = 6 + count, #ARGV do
    redis.call('HSET', KEYS[3], ARGV[i], now)
  end
end
redis.call('PUBLISH', ARGV[4], version)
return {1, version}
"""


class SharedScenarios:
    """The scenario set kept on the Redis at *url*, under keys starting with *prefix*.

    :meth:`read` and :meth:`write` are the versions; :meth:`start` listens
    for new ones (calling *on_change* on its thread, with no argument: the
    listener reads the version itself) and for resets (*on_reset* with the
    session, None for all). Every failure to reach Redis raises
    :class:`~mockskill.engine.store.StoreUnavailable` with a message that
    names the URL without its password.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "mockskill",
        poll_interval: float = POLL_INTERVAL,
        state_keys: tuple[str, str] | None = None,
    ) -> None:
        self.url = checked(url)
        self.state_keys = state_keys
        """The generations and activations hashes of a state kept on this same Redis
        (:mod:`.redis`): a version's restarts are made with it, in the same step."""
        self.restarts = state_keys is not None
        """Whether :meth:`write` restarts sequences and outage windows with the version."""
        self.shown = masked(self.url)
        self.key = f"{prefix}:scenarios"
        self.channel = f"{prefix}:scenarios:versions"
        self.reset_channel = f"{prefix}:scenarios:resets"
        self.poll_interval = poll_interval
        self.replica = uuid.uuid4().hex[:12]
        """Names this process's announcements, so that it does not act on its own."""
        self._wake = f"{prefix}:scenarios:wake:{self.replica}"  # stop() ends a wait at once
        self._client: redis.Redis = redis.Redis.from_url(
            self.url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
        )
        self._write = self._client.register_script(_WRITE)
        # Typed in redis-py 8, untyped before: held as what it is used as.
        self._pubsub: Callable[[], Any] = self._client.pubsub
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()
        """Set while the listener's subscription stands (cleared when it is lost)."""

    # -- versions ---------------------------------------------------------------

    def version(self) -> int:
        """The stored version (0: no set stored)."""
        raw = self._call(lambda: self._client.hget(self.key, "version"))
        return int(raw) if raw is not None else 0

    def read(self) -> Stored | None:
        """The stored version and its records; None when no set is stored.

        Raises :class:`~.shared_set.BadVersion` for a set this mockskill cannot read.
        """
        raw: dict[bytes, bytes] = self._call(lambda: self._client.hgetall(self.key))
        if not raw or b"version" not in raw:
            return None
        try:
            records = decode(raw.get(b"set", b"").decode("utf-8", "surrogatepass"))
        except BadVersion as exc:  # answered like an unreachable set: nothing changes here
            raise StoreUnavailable(f"the shared scenario set at {self.shown}: {exc}") from None
        return Stored(int(raw[b"version"]), records, raw.get(b"files", b"").decode())

    def write(
        self,
        read: int,
        records: Sequence[Record],
        files: str,
        *,
        restart: Iterable[str] = (),
        activate: Iterable[str] = (),
    ) -> int | None:
        """Store *records* as the version after *read* and announce it; None if *read* is stale.

        Stale: another replica wrote a version since; read it and try again.
        With :attr:`restarts`, sequences *restart* get a new generation and
        scenarios *activate* start their outage windows in the shared state,
        in the same atomic step: a replica that hears of the version finds them
        restarted, and a write that lost restarted nothing.
        """
        keys = sorted(set(restart)) if self.restarts else []
        names = sorted(set(activate)) if self.restarts else []
        gens, acts = self.state_keys or (self.key, self.key)  # unused without a state here
        args: list[str | int] = [read, encode(records), files, self.channel, len(keys)]
        args += [*keys, *names]
        written, version = self._call(lambda: self._write(keys=[self.key, gens, acts], args=args))
        return int(version) if written else None

    def announce_reset(self, session: str | None) -> None:
        """Tell the other replicas that everything (or *session*) was reset."""
        message = json.dumps({"from": self.replica, "session": session})
        self._call(lambda: self._client.publish(self.reset_channel, message))

    # -- listening --------------------------------------------------------------

    def start(
        self, on_change: Callable[[], object], on_reset: Callable[[str | None], object]
    ) -> None:
        """Listen from a daemon thread until :meth:`stop` (started once)."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._listen, args=(on_change, on_reset), name="mockskill:shared", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (returns within about :data:`POLL_INTERVAL`) and let go of Redis."""
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None:
            with contextlib.suppress(redis.RedisError, OSError):  # else: the wait times out
                self._client.publish(self._wake, "stop")
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.poll_interval + TIMEOUT + 1)
        self._client.close()

    def _listen(
        self, on_change: Callable[[], object], on_reset: Callable[[str | None], object]
    ) -> None:
        pubsub: Any = None
        down = False
        due = 0.0  # when to look at the version next: at once, at (re)connect
        while not self._stopping.is_set():
            try:
                if pubsub is None:
                    pubsub = self._pubsub()
                    pubsub.subscribe(self.channel, self.reset_channel, self._wake)
                wait = max(0.0, min(self.poll_interval, due - time.monotonic()))
                message = pubsub.get_message(timeout=wait)
                if message is not None:
                    kind, channel = message["type"], message["channel"].decode()
                    if kind == "subscribe":  # (re)subscribed: anything may have been missed
                        if down:
                            log.warning("shared scenario set %s: reached again", self.shown)
                        down = False
                        self.connected.set()
                        due = 0.0
                    elif kind == "message" and channel == self.channel:
                        on_change()
                    elif kind == "message" and channel == self.reset_channel:
                        said = json.loads(message["data"])
                        if said.get("from") != self.replica:
                            on_reset(said.get("session"))
                if time.monotonic() >= due:
                    due = time.monotonic() + self.poll_interval
                    on_change()
            except (redis.RedisError, OSError, StoreUnavailable) as exc:
                if pubsub is not None:
                    _close_quietly(pubsub)
                    pubsub = None
                if self.connected.is_set() or not down:  # once an outage, not once a second
                    log.warning("shared scenario set %s: %s; retrying", self.shown, exc)
                down = True
                self.connected.clear()
                due = 0.0
                self._stopping.wait(self.poll_interval)
            except Exception:  # a bug in a callback must not end the catching up
                log.exception("shared scenario set %s: listener", self.shown)
                self._stopping.wait(self.poll_interval)
        self.connected.clear()
        if pubsub is not None:
            _close_quietly(pubsub)

    def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(
                f"the shared scenario set at {self.shown} cannot be reached"
                f" ({type(exc).__name__}: {exc})"
            ) from exc


def _close_quietly(pubsub: Any) -> None:
    with contextlib.suppress(redis.RedisError, OSError):
        pubsub.close()
