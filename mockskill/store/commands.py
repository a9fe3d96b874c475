"""The engine's needs as Redis commands, and Redis's replies as their answers.

Pure: no client, no I/O. Both faces of the Redis store (the blocking one off
the loop and the pipelined one on it) send the same ``EVALSHA`` for a need
and read its reply the same way, so that they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..engine.state import MAX_BUCKETS
from ..engine.store import (
    MAX_TASK_EVENTS,
    Claim,
    IssueToken,
    Need,
    NeedAnswer,
    ReadState,
    Recall,
    Recalled,
    SetState,
    Settle,
    Spent,
    Submit,
    Submitted,
    Take,
    Taken,
    TaskEvent,
    TaskRecord,
    Touch,
    UseToken,
)

SEP = "\x1f"
"""Between the parts of a hash field (the unit separator: no sequence key holds it)."""
PACKED_TAKES = 4096
"""Takes kept encoded (:meth:`Encoder.packed`): a session's steps repeat the same bytes."""
_new = tuple.__new__
"""A Taken's fields, positionally: tuple.__new__ skips the NamedTuple's keyword __new__ (one
is decoded per request)."""
MAX_KEYS_PER_SESSION = 256
"""``Idempotency-Key``s a session holds on Redis (every skill's); past it a new key is not
remembered (a retry with it runs again) until the session is reset or expires."""


class Keys:
    """The names of the store's keys under one prefix (see :mod:`.scripts`)."""

    __slots__ = (
        "act",
        "bucket",
        "buckets",
        "clock",
        "digest_key",
        "gen",
        "prefix",
        "seed",
        "session",
        "sessions",
        "task",
        "task_held",
        "task_number",
        "tasks",
        "token",
        "tokens",
    )

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.session = prefix + "s:"
        self.sessions = prefix + "sessions"
        self.token = prefix + "t:"
        self.tokens = prefix + "tokens"
        self.gen = prefix + "gen"
        self.act = prefix + "act"
        self.seed = prefix + "seed"
        self.digest_key = prefix + "digest-key"
        self.clock = prefix + "clock"
        self.bucket = prefix + "b:"
        self.buckets = prefix + "buckets"
        self.task = prefix + "task:"
        self.tasks = prefix + "tasks"
        self.task_held = prefix + "task-held:"
        self.task_number = prefix + "task-number"


class Encoder:
    """Builds each need's ``EVALSHA`` arguments for one store (its keys and bounds)."""

    def __init__(self, keys: Keys, shas: dict[str, str], max_sessions: int, ttl_ms: int) -> None:
        self.keys = keys
        self.shas = shas
        self.max_sessions = str(max_sessions)
        self.ttl_ms = str(ttl_ms)
        self.max_buckets = str(MAX_BUCKETS)
        self._packed: dict[Take, bytes] = {}
        self._touch_head: tuple[bytes, bytes, bytes, bytes, bytes] | None = None

    def packed(self, need: Need) -> bytes:
        """:meth:`command` in RESP, for the pipeline; a Take asked again is not encoded again,
        a Touch (a poll: each of a different task) is written from its parts."""
        if type(need) is Touch:
            return self.packed_touch(need)
        if type(need) is not Take:
            return packed(self.command(need))
        data = self._packed.get(need)
        if data is None:
            data = packed(self.command(need))
            if len(self._packed) >= PACKED_TAKES:
                self._packed.clear()  # bounded: new sessions at every request only miss
            self._packed[need] = data
        return data

    def packed_touch(self, need: Touch) -> bytes:
        """``packed(self.command(need))`` for a Touch, the parts every Touch shares written
        once (tests/store/test_redis_tasks.py holds the two equal)."""
        head = self._touch_head
        if head is None:
            keys = self.keys
            head = self._touch_head = (
                b"*13\r\n" + _bulk(b"EVALSHA") + _bulk(self.shas["touch"].encode()) + _bulk(b"3"),
                keys.task.encode(),
                _bulk(keys.tasks.encode()),
                keys.task_held.encode(),
                _bulk(str(MAX_TASK_EVENTS).encode()),
            )
        start, task_prefix, tasks, held_prefix, max_events = head
        session = need.session.encode()
        number = b"%d" % need.number
        member = session + b"\x1f" + number
        fits = b",".join(b"%d" % f for f in need.fits) if need.fits else b""
        return b"".join(
            (
                start,
                _bulk(task_prefix + member),
                tasks,
                _bulk(held_prefix + session),
                _bulk(member),
                _bulk(number),
                _bulk(need.action.encode()),
                _bulk(b"%d" % need.keep_ms),
                _bulk(need.skill.encode()),
                _bulk(fits),
                max_events,
            )
        )

    def command(self, need: Need) -> tuple[str | int | bytes, ...]:
        """The ``EVALSHA`` that answers *need*: its script's digest, keys and arguments."""
        keys = self.keys
        if type(need) is Take:
            outage, limit = need.outage, need.limit
            session_keys = (keys.session + need.session, keys.sessions, keys.act, keys.clock)
            args = (
                need.session,
                f"p{SEP}{need.key}{SEP}{need.generation}",
                f"d{SEP}{need.scenario}" if need.draws else "",
                need.scenario,
                "" if outage is None else _ms(outage[0]),
                "" if outage is None else _ms(outage[1]),
                self.max_sessions,
                self.ttl_ms,
                keys.session,
            )
            if limit is None:
                return ("EVALSHA", self.shas["take"], 4, *session_keys, *args)
            # A session's bucket is a field of its session's hash (it goes with it); any
            # other is a key of its own (see .scripts).
            if limit.session is None:
                holder, field = keys.bucket + limit.key, ""
            else:
                holder, field = keys.session + limit.session, f"b{SEP}{limit.key}"
            return (
                "EVALSHA",
                self.shas["take"],
                6,
                *session_keys,
                holder,
                keys.buckets,
                *args,
                limit.capacity,
                repr(float(limit.refill)),
                field,
                limit.key,
                self.max_buckets,
                keys.bucket,
            )
        if type(need) is UseToken:
            return (
                "EVALSHA",
                self.shas["use_token"],
                2,
                keys.token + need.token,
                keys.tokens,
                need.token,
            )
        if type(need) is ReadState:
            return (
                "EVALSHA",
                self.shas["read_state"],
                1,
                keys.session + need.session,
                f"s{SEP}{need.scenario}",
            )
        if type(need) is SetState:
            return (
                "EVALSHA",
                self.shas["set_state"],
                3,
                keys.session + need.session,
                keys.sessions,
                keys.clock,
                need.session,
                f"s{SEP}{need.scenario}",
                need.state,
                self.max_sessions,
                self.ttl_ms,
                keys.session,
            )
        if type(need) is Recall:
            return (
                "EVALSHA",
                self.shas["recall"],
                3,
                keys.session + need.session,
                keys.sessions,
                keys.clock,
                need.session,
                f"i{SEP}{need.skill}{SEP}{need.key}",
                need.digest,
                need.reserve_ms,
                MAX_KEYS_PER_SESSION,
                self.max_sessions,
                self.ttl_ms,
                keys.session,
            )
        if type(need) is Settle:
            return (
                "EVALSHA",
                self.shas["settle"],
                1,
                keys.session + need.session,
                f"i{SEP}{need.skill}{SEP}{need.key}",
                need.digest,
                b"" if need.answer is None else need.answer,
                need.busy_ms,
            )
        if type(need) is Submit:
            return (
                "EVALSHA",
                self.shas["submit"],
                3,
                keys.tasks,
                keys.task_number,
                keys.task_held + need.session,
                need.session,
                need.skill,
                need.keep_ms,
                need.limit,
                keys.task,
                keys.task_held,
                need.callback,
            )
        if type(need) is Claim:
            return (
                "EVALSHA",
                self.shas["claim"],
                1,
                f"{keys.task}{need.session}{SEP}{need.number}",
                need.key,
            )
        if type(need) is Touch:
            member = f"{need.session}{SEP}{need.number}"
            return (
                "EVALSHA",
                self.shas["touch"],
                3,
                keys.task + member,
                keys.tasks,
                keys.task_held + need.session,
                member,
                need.number,
                need.action,
                need.keep_ms,
                need.skill,
                ",".join(map(str, need.fits)),
                MAX_TASK_EVENTS,
            )
        assert type(need) is IssueToken
        return (
            "EVALSHA",
            self.shas["issue_token"],
            3,
            keys.token + need.token,
            keys.tokens,
            keys.clock,
            need.token,
            encoded_scopes(need.scopes),
            -1 if need.uses is None else max(need.uses, 0),
            "" if need.seconds is None else need.seconds * 1000,
            self.max_sessions,
            keys.token,
        )


def decoded(need: Need, reply: object) -> NeedAnswer:
    """*need*'s answer from the reply to its :meth:`Encoder.command`."""
    if type(need) is Take:
        position: int
        draw: int
        admitted: int
        remaining: int
        next_ms: int
        full_ms: int
        if len(reply) == 2:  # type: ignore[arg-type]
            position, draw = reply  # type: ignore[misc]
            return _new(Taken, (None if position < 0 else position, draw, None))
        position, draw, admitted, remaining, next_ms, full_ms = reply  # type: ignore[misc]
        spent: Spent = (admitted == 1, remaining, next_ms, full_ms)
        return _new(Taken, (None if position < 0 else position, draw, spent))
    if type(need) is UseToken:
        return None if reply is None else decoded_scopes(reply)  # type: ignore[arg-type]
    if type(need) is ReadState:
        return reply.decode() if isinstance(reply, bytes) else None
    if type(need) is Recall:
        state: object
        wait: int
        answer: object
        state, wait, answer = reply  # type: ignore[misc]
        text = state.decode() if isinstance(state, bytes) else str(state)
        kept = answer if isinstance(answer, bytes) else str(answer).encode()
        return Recalled(text, kept or None, int(wait))
    if type(need) is Submit:
        number: int
        at: bytes
        number, at = reply  # type: ignore[misc]
        return Submitted(None if number < 0 else number, float(at))
    if type(need) is Touch:
        return None if reply is None else decoded_task(reply)  # type: ignore[arg-type]
    if type(need) is Claim:
        return reply == 1
    return None


def decoded_task(reply: list[Any]) -> TaskRecord:
    """A :class:`TaskRecord` from the TOUCH script's reply (see :mod:`.scripts`)."""
    skill, submitted, polls, events, now, callback = reply
    logged = tuple(decoded_event(line) for line in events.decode().split("\n")) if events else ()
    record = (skill.decode(), float(submitted), polls, logged, float(now), callback.decode())
    return _new(TaskRecord, record)


def decoded_event(line: str) -> TaskEvent:
    """One line of a task's ``e`` field: ``<action> <at ms> <polls> <fits>``."""
    action, at, polls, fits = line.split(" ")
    return TaskEvent(action, float(at), int(polls), tuple(int(f) for f in fits.split(",") if f))


def _bulk(data: bytes) -> bytes:
    """*data* as a RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(data), data)


def packed(command: Sequence[str | int | bytes]) -> bytes:
    """*command* in RESP: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(command)]
    for arg in command:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def encoded_scopes(scopes: Iterable[str]) -> str:
    """Scopes as one string (sorted, so equal sets are equal strings)."""
    return SEP.join(sorted(scopes))


_SCOPES: dict[bytes, frozenset[str]] = {}
"""Scopes decoded already: a token's few sets, asked for on every protected request."""


def decoded_scopes(raw: bytes) -> frozenset[str]:
    scopes = _SCOPES.get(raw)
    if scopes is None:
        scopes = frozenset(raw.decode().split(SEP)) if raw else frozenset()
        if len(_SCOPES) < 1024:  # bounded: a client cannot grow it with made-up scopes
            _SCOPES[raw] = scopes
    return scopes


def _ms(value: float) -> str:
    """A window's bound in whole milliseconds or as a float (Lua reads either)."""
    return str(int(value)) if value == int(value) else repr(float(value))
