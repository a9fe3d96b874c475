"""How a journal entry is held in the shared stream, and the script that appends a batch.

Owns the entry's stream form, which every replica's journal writes and reads
(:mod:`.journal` off the loop, :mod:`.loop_journal` on it): the entry as the
journal shows it (:func:`~mockskill.engine.entries.kept`: bounds, escaping,
the secrets hidden when it was recorded), naming its replica, as a JSON
array of its values but its id, in :data:`SCHEMA`'s order. JSON because
replicas may run different Pythons: nothing marshalled or pickled crosses
processes. The names the values go by are kept once per version in a hash,
so that replicas of two versions read each other's entries by name.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from ..engine.entries import ENTRY_FIELDS, Entry, shown_changes
from ..protocol.catalog import Retry

# Each entry of the stream: i = its id, s = its session as shown (what a session's read
# or clear compares, without decoding), k = its schema (the names of e's values), e = the
# entry's values but its id, as a JSON array.
APPEND = """
local taken = redis.call('HGET', KEYS[4], ARGV[4])
if taken then
  return -1 - tonumber(taken)
end
local n = (#ARGV - 4) / 2
redis.call('HSET', KEYS[4], ARGV[4], n)
redis.call('HDEL', KEYS[4], tonumber(ARGV[4]) - 1024)
redis.call('PEXPIRE', KEYS[4], 86400000)
redis.call('HSETNX', KEYS[3], ARGV[2], ARGV[3])
local last = redis.call('INCRBY', KEYS[2], n)
local id = last - n
for k = 5, #ARGV, 2 do
  id = id + 1
  redis.call('XADD', KEYS[1], '*', 'i', id, 's', ARGV[k], 'k', ARGV[2], 'e', ARGV[k + 1])
end
redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', ARGV[1])
return last
"""
"""KEYS: the stream, the id counter, the schemas, the writer's batches taken; ARGV:
capacity, the schema's key and its names (JSON), the batch's number, then (session,
values) per entry. A batch is taken once: sent again (its reply was lost: Redis frozen
past the timeout took it late, or never), a number the writer's hash holds is answered
``-1 - entries it took`` and adds nothing (the hash keeps the last 1024 numbers, for a day
unused). One INCRBY numbers the batch; one exact trim keeps the bound (nothing runs
between the adds and the trim: no reader sees more than capacity). The schema is set
with every batch (a Redis restarted without it gets it back with the next)."""
APPEND_SHA = hashlib.sha1(APPEND.encode()).hexdigest()

MAX_BATCH = 256
"""Entries sent in one script call at most: a bigger backlog goes as several calls, so
that no call holds Redis (every replica's requests wait behind it) for long."""

_NAMES = ENTRY_FIELDS[1:]
"""What an entry's JSON holds, in order: every field but the id (the stream's counter's)."""
SCHEMA = json.dumps(_NAMES, separators=(",", ":"))
"""The names of this version's values, as the schemas hash holds them."""
SCHEMA_KEY = hashlib.sha1(SCHEMA.encode()).hexdigest()[:16]
"""How an entry says it holds :data:`SCHEMA`'s values (replicas of another version, with
other fields, write theirs under another key: each reads the other's by its names)."""
SCHEMA_KEY_BYTES = SCHEMA_KEY.encode()
Slot = tuple[Entry, tuple[str, ...] | None]
"""A queued record and the secrets hidden when it was recorded (None: built already)."""
_RETRY = ENTRY_FIELDS.index("retry")
_REPLICA = ENTRY_FIELDS.index("replica")
_NEAR_MISSES = ENTRY_FIELDS.index("near_misses")
_TLS = ENTRY_FIELDS.index("tls")
_HEADERS = ENTRY_FIELDS.index("headers")
_SESSION = ENTRY_FIELDS.index("session") - 1
"""Where an entry's session is in :func:`shown`'s values (they leave the id out)."""
_INDEX = {name: i for i, name in enumerate(ENTRY_FIELDS)}


def _refuse(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _encoder() -> Callable[[Any], str]:
    """``json.dumps(values, separators=(",", ":"))``, at the C encoder's own cost: made once,
    without the check for circular values (an entry's are plain) and its dict per call."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has the C encoder
        return json.JSONEncoder(separators=(",", ":")).encode
    encode = make(
        None, _refuse, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    join = "".join
    return lambda values: join(encode(values, 0))


json_text = _encoder()
"""*values* as compact JSON (ASCII: a lone surrogate is escaped, never an encoding error)."""
_unjson = json.JSONDecoder().decode


def encoded(entry: Entry) -> str:
    """*entry*'s values but its id as the stream holds them: a JSON array, in
    :data:`SCHEMA`'s order (the names once per version, not per entry: half the cost)."""
    values: Any = entry[1:]
    retry = entry.retry
    if retry is not None:
        values = list(values)
        values[_RETRY - 1] = (retry.suggested_delay_ms, retry.max_attempts)
    return json_text(values)


def decoded(
    ident: int | bytes | str, text: bytes | str, names: Sequence[str] | None = None
) -> Entry:
    """The entry :func:`encoded` made *text* of, numbered *ident*.

    *names*: the schema it was written in, when not this version's: the
    fields this version knows are taken by name, the others left out, and
    those it does not hold get their defaults (:meth:`Entry.from_json`).
    """
    values = _unjson(text if isinstance(text, str) else text.decode())
    if names is None:
        retry = values[_RETRY - 1]
        if retry is not None:
            values[_RETRY - 1] = Retry(int(retry[0]), int(retry[1]))
        values[_NEAR_MISSES - 1] = tuple(values[_NEAR_MISSES - 1])
        # An entry an earlier version wrote for a request ends before tls (the field
        # default); a failed handshake's holds it, a JSON array, held as a tuple.
        if len(values) >= _TLS and values[_TLS - 1] is not None:
            values[_TLS - 1] = tuple(values[_TLS - 1])
        if len(values) >= _HEADERS and values[_HEADERS - 1] is not None:
            values[_HEADERS - 1] = tuple(map(tuple, values[_HEADERS - 1]))
        return Entry(int(ident), *values)
    data = dict(zip(names, values, strict=False))
    data["id"] = int(ident)
    retry = data.get("retry")
    if isinstance(retry, list):
        data["retry"] = {"suggested_delay_ms": retry[0], "max_attempts": retry[1]}
    return Entry.from_json(data)


def utf8(text: str) -> bytes:
    """*text* as Redis keeps it; a lone surrogate (a client's undecodable byte) too."""
    return text.encode("utf-8", "surrogatepass")


def as_bytes(value: bytes | str) -> bytes:
    """A reply's value as bytes, whether the client decodes replies or not."""
    return value if isinstance(value, bytes) else utf8(value)


def shown(recorded: Entry, hidden: tuple[str, ...] | None, replica: str | None) -> list[Any]:
    """*recorded*'s values but its id as the stream holds them (what :func:`encoded` makes
    of what :func:`kept` shows), naming *replica*. *hidden* None: *recorded* is kept's
    already (an oversized one, built when recorded): cut again, its marker would lie.

    Plain values, the changes :func:`kept` would make applied to them: the stream holds
    only their JSON.
    """
    values: list[Any] = list(recorded)
    changes = None if hidden is None else shown_changes(recorded, hidden)  # most often none
    if changes:
        for name, value in changes.items():
            values[_INDEX[name]] = value
    retry = values[_RETRY]
    if retry is not None:
        values[_RETRY] = (retry.suggested_delay_ms, retry.max_attempts)
    if replica is not None:
        values[_REPLICA] = replica
    del values[0]
    return values


def writer_key(prefix: str) -> str:
    """A key of its own for one writer of the journal (a loop's queue, a flusher): its
    batches taken, by number (:data:`APPEND`). Random: a process forked or restarted is
    another writer, whose numbers start afresh."""
    return f"{prefix}journal:taken:{secrets.token_hex(8)}"


class Batch:
    """One numbered script call of *writer*'s: its entries (session, JSON), and *last*,
    the number of its writer's last record in it (what readers wait for).

    Sent until Redis answers: the script takes a number once, so a batch whose reply
    was lost is sent again, not counted lost. When the hold is full, its oldest entries
    go (:meth:`let_go`) but the call still goes, to learn whether the first send was
    taken (:meth:`counted`).
    """

    __slots__ = ("entries", "last", "number", "size", "writer")

    def __init__(
        self, writer: str, number: int, entries: list[tuple[bytes, bytes]], last: int
    ) -> None:
        self.writer = writer
        self.number = number
        self.entries = entries
        self.size = len(entries)
        """How many entries it held when first sent."""
        self.last = last

    def let_go(self) -> None:
        """Hold one entry less (the oldest): the hold is full and Redis is away."""
        del self.entries[0]

    def counted(self, reply: int) -> tuple[int, int]:
        """(taken, missing): how many of its entries the journal holds, and how many it
        never took (let go before a send that Redis took)."""
        taken = -1 - reply if reply < 0 else len(self.entries)
        return taken, self.size - taken


def stream_fields(slot: Slot, replica: str | None) -> tuple[bytes, bytes]:
    """A queued record's session (as shown) and its JSON, as the append script takes them."""
    values = shown(slot[0], slot[1], replica)
    return utf8(values[_SESSION]), json_text(values).encode()
