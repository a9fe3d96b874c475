"""The journal's entries: one request as answered, and what a client can make it hold.

:class:`Entry` is what the engine records, once per request, and what every
reader of the journal sees (the admin journal, the audit, the report, the
dashboard). A named tuple, since one is made on every request. :func:`kept`
is the entry as the journal shows it: the client's texts cut to bounds,
escaped, and the secrets hidden when it was recorded masked (applied when
the journal is read). What the consumer sent (target, headers, body) is
recorded raw, cut to its bounds only when it is over them (:func:`sent_headers`,
:func:`sent_target`, the body limit), and decoded and masked when shown
(:data:`MASKED_HEADERS`, :data:`MASKED_QUERY`, :data:`MASKED_FIELDS`, and the names
:func:`redaction` adds). :func:`packed` and :func:`unpacked` hold many of them as one
``bytes`` and read them back (the journal after a flood).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import marshal
import operator
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeAlias
from urllib.parse import unquote_plus

from ..protocol.catalog import Retry
from .digests import LaterDigest

MAX_SESSION_NAME = 256
"""The longest session name served (characters); a longer one is refused with 400."""
MAX_PATH = 512
"""The longest request path an entry keeps (characters); a longer one is kept cut, marked."""
MAX_TEXT = 128
"""The longest of any other text a client chose that an entry keeps (the method, a
skill id from the path, header values, the path and method quoted in a near miss)."""
MAX_ENTRY_BYTES = 64 * 1024
"""What one journal entry can hold in memory at most, whatever the request, but its body
(:func:`max_entry_bytes`; docs/admin.md): 16 KiB of texts, the target and the headers."""
MASK = "***"
"""What a hidden secret (:meth:`State.hide`) reads as in the journal."""
MAX_TARGET = 8 * 1024
"""The longest request target (path and query) an entry keeps, as sent (characters); a
longer one is kept cut, marked (the transport reads targets up to 64 KiB)."""
MAX_HEADER_BYTES = 8 * 1024
"""The most bytes of header values an entry keeps, as sent; past them, each value is cut,
marked (``...[N more bytes]``), every header still listed (each name cut to
:data:`MAX_TEXT`, marked)."""
DEFAULT_BODY_LIMIT = 64 * 1024
"""The most bytes of a request body an entry keeps (``--journal-body-limit``); a longer one
is kept cut: its ``body_size`` says how many bytes were sent."""
MASKED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
"""Request headers whose values read :data:`MASK` in the journal (an ``Authorization``
keeps its scheme, ``Bearer ***``; a ``Cookie`` its names, ``a=***; b=***``)."""
MASKED_QUERY = frozenset(
    {
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
        "key",
        "token",
        "client_secret",
        "password",
        "code",
        "code_verifier",
        "client_assertion",
    }
)
"""Query parameters whose values read :data:`MASK` in the journal's ``target``."""
MASKED_FIELDS = frozenset(
    {
        "client_secret",
        "access_token",
        "refresh_token",
        "id_token",
        "password",
        "client_assertion",
        "code_verifier",
    }
)
"""Form fields and JSON object keys (at any depth) whose values read :data:`MASK` in the
journal's ``body``; the document keeps its shape (and, most often, its very text)."""
REDACT = "\x00redact:"
"""How a name to mask (:func:`redaction`) is told from a secret among the hidden ones."""
RawHeaders: TypeAlias = tuple[tuple[bytes, bytes], ...]
"""Header names and values as read, before the journal shows them."""


def max_entry_bytes(body_limit: int | None) -> int:
    """What one journal entry can hold in memory at most, with its body cut to *body_limit*
    bytes (None: journal bodies off, :data:`MAX_ENTRY_BYTES` less what was sent, as before
    they were kept). Text a character wider than Latin-1 makes takes up to 4 bytes a
    character, so a body shown as text up to 4 times its bytes (base64: 4/3)."""
    if body_limit is None:
        return 16 * 1024
    return MAX_ENTRY_BYTES + 4 * body_limit


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """*text*, or its first *limit* characters and a marker saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more characters]"


_UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
"""Controls, line and paragraph separators, and bidi overrides: text that prints
other than it reads (a client's ``/x%0Aforged`` would add a line to a report)."""


def redaction(name: str) -> str:
    """What :meth:`State.hide` takes to mask the values of every header, query parameter,
    form field and JSON key named *name* (any case) in the journal, besides the built-in
    ones (``mockskill serve --redact NAME``)."""
    return REDACT + name.strip().lower()


def escaped(text: str) -> str:
    """*text* with every character of :data:`_UNPRINTABLE` percent-escaped (UTF-8), as in a URL."""
    if text.isascii() and text.isprintable():
        return text  # the common case; in ASCII, exactly what the pattern does not match
    # The pattern is compiled by re (and kept in its cache) on the first text that needs
    # it, not at import: a set reaching past U+00FF is slow to compile, and most never do.
    return re.sub(_UNPRINTABLE, lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), text)


MAX_SHOWN_KEY_VALUE = 64
"""Characters of a rate limit's keyed value the journal shows (the rest marked as cut)."""


def shown_limit_key(kind: str, value: str | None) -> str:
    """A rate limit's ``key`` as the journal shows it: its *kind* (``session``, ``header
    x-tenant``) and *value* (bounded and printable), as ``session: s1``; the kind alone when
    there is no value (the endpoint's shared bucket). A string, so an entry holds no
    container the collector must walk (the journal keeps thousands)."""
    if value is None:
        return kind
    return f"{kind}: {shorten(escaped(value), MAX_SHOWN_KEY_VALUE)}"


LaterRecord: TypeAlias = tuple[Any, ...]
"""A bucket's ``Entry.rate_limit`` as recorded, (kept, value, remaining, next_ms, full_ms):
made the dict (:func:`limit_record`) when the entry is first shown (:func:`shown_changes`),
as a short body's digest is. *kept*: the record its answer shares (``Policy.admitted``, a
kept refusal's), its ``key`` the limit's kind; *value*: what the bucket counts (None: the
shared one); then the :data:`~.store.Spent`'s. A plain tuple of atoms and a dict of them:
the collector stops watching it at its first pass (a named tuple it walks for good)."""


def limit_record(parts: LaterRecord) -> dict[str, Any]:
    """``Entry.rate_limit`` of a :data:`LaterRecord`: its kept record with the spent fields
    and the key."""
    kept, value, remaining, next_ms, full_ms = parts
    record: dict[str, Any] = kept.copy()
    record["remaining"], record["next_ms"], record["full_ms"] = remaining, next_ms, full_ms
    record["key"] = shown_limit_key(record["key"], value)
    return record


LaterTask: TypeAlias = tuple[Any, ...]
"""A kept poll's ``Entry.task`` as recorded, (kept, id, poll, terminal_at_ms): made the dict
(:func:`task_record`) when the entry is first shown (:func:`shown_changes`), as a
:data:`LaterRecord` is. *kept*: the record every poll of its task's state shares (its id,
poll and terminal time placeholders, in their places); then the poll's own values. A plain
tuple of atoms and a dict of them, as a LaterRecord (the journal packs it as it is)."""


def task_record(parts: LaterTask) -> dict[str, Any]:
    """``Entry.task`` of a :data:`LaterTask`: its kept record with the poll's own values."""
    kept, task_id, poll, terminal_at_ms = parts
    record: dict[str, Any] = kept.copy()
    record["id"], record["poll"], record["terminal_at_ms"] = task_id, poll, terminal_at_ms
    return record


class Entry(NamedTuple):
    """One request as the server answered it; recorded exactly once.

    Made positionally on the request path (``tuple.__new__(Entry, values)``, in
    this field order: :mod:`.journalling`), so every field but the first eight
    has a default and a new field goes last.
    """

    id: int
    started: float
    """Wall-clock time the request arrived (seconds since the epoch)."""
    finished: float
    session: str
    method: str
    path: str
    status: int | None
    """The HTTP status answered; None when no answer was sent (a fault, a client gone)."""
    endpoint: str
    """``list``, ``describe``, ``invoke``, ``route``, ``task`` (a task's status URL),
    ``token``, ``authorize``, ``unmatched``, or ``refused`` (turned away before matching: a
    body or a session name over the limit)."""
    skill: str | None = None
    scenario: str | None = None
    step: int | None = None
    """Index of the step served in its sequence (None: not from a sequence)."""
    position: int | None = None
    """The request's number in its sequence for this session (0-based)."""
    error_code: str | None = None
    retry: Retry | None = None
    forced: bool = False
    """Whether ``Mockskill-Error`` chose the answer."""
    outage: bool = False
    """Whether the scenario's outage window answered instead of the sequence."""
    choice: int | None = None
    """Which outcome of a random step was drawn (its index)."""
    delay_ms: float | None = None
    """The delay drawn for this request."""
    execution_ms: float | None = None
    """The execution time drawn for this request."""
    fault: str | None = None
    """The transport fault done to the connection."""
    client_left: float | None = None
    """Wall-clock time the client closed the connection before the answer was complete."""
    headers_sent: float | None = None
    """For a slow body (a dribble): wall-clock time its status line and headers (with
    any ``Retry-After``) went out, what a client can act on before the body; then
    ``finished`` is when its last byte went out or, with ``client_left``, when the
    client abandoned it. None for an answer sent whole (at ``finished``) or not at all."""
    near_misses: tuple[dict[str, Any], ...] = ()
    credential: str | None = None
    """The credential the request carried, as its kind and a fingerprint keyed per
    server (``bearer hmac-sha256:…``, ``api_key hmac-sha256:…``; ``client ID`` at the
    token endpoint); never the secret. None: no credential was presented."""
    protocol_version: str | None = None
    """The consumer's ``Skill-Protocol-Version`` header as sent (None: not sent)."""
    body_digest: str | LaterDigest | None = None
    """The request body as a digest keyed per server (``hmac-sha256:…``), so that
    the retry audit can tell an unchanged retry from a changed one; never the
    body. None: no body. A recorded entry may hold a short body's
    :class:`~.digests.LaterDigest`; the entry shown (:func:`kept`) always holds text."""
    invalid_descriptor: bool = False
    """Whether the answer was a Skill Descriptor that the reference validator
    rejects: the consumer's own ``VALIDATION_ERROR``."""
    stopped: bool = False
    """Whether the server, stopping, cut the request after its grace period (no answer)."""
    replica: str | None = None
    """The replica that served it, in a journal several share (``--state redis://...``);
    None for a server's own journal (the embedded default)."""
    case: int | None = None
    """The index of the endpoint's case that played (0-based, as ``cases:`` lists them);
    None when its default sequence played, or it has no cases."""
    upstream: dict[str, Any] | None = None
    """For a proxied request (a ``proxy`` step), what happened upstream: ``url`` (the
    provider's base), ``reached`` (the request was sent to it: it may have run),
    ``status`` (its answer's, or None), ``error`` (why no whole answer came, or None)
    and ``ms``; None when the request was not proxied."""
    tls: tuple[str, str | None, str | None] | None = None
    """A TLS handshake that failed on a skill's fault port (docs/tls.md): the fault, the
    alert the client sent (None: none), the SNI name it offered (None: none). Then no
    request was read: ``method`` is empty, ``path`` the skill's invoke path."""
    target: str | None = None
    """The request target as sent: the path and query string, not percent-decoded
    (``/skills/echo/invoke?x=1``); secret query parameters read :data:`MASK` when shown.
    None: no request was read (a failed handshake), or an entry an earlier version wrote."""
    headers: tuple[tuple[str, str], ...] | None = None
    """The request's headers as sent: each (name as written, value), in order, repeats
    kept; credentials read :data:`MASK` when shown. None: not kept (``--journal-bodies
    off``, or no request was read)."""
    body: str | None = None
    """The request body as sent, up to the per-entry limit (then cut, ``body_size`` says
    how much there was): UTF-8 text as text, any other bytes as base64 (``body_encoding``);
    credentials in a form or JSON body read :data:`MASK` when shown. None: no body, or
    not kept (``--journal-bodies off``)."""
    body_encoding: str | None = None
    """How :attr:`body` holds the bytes: ``"text"`` (UTF-8) or ``"base64"``; None: no body kept."""
    body_size: int | None = None
    """How many bytes the body had as sent (more than :attr:`body` holds: it was cut);
    None: no body, or not kept.

    Until an entry is shown (:func:`kept`), it holds what was sent as read: ``headers``
    as (bytes, bytes) pairs, ``body`` as the bytes (cut to the limit), ``body_encoding``
    None, the target as read (Latin-1); each cut to its bound when over it
    (:func:`sent_headers`, :func:`sent_target`). Every reader of the journal sees shown
    entries: the texts above."""
    executed: bool = False
    """Whether the skill ran for this request: a scripted invocation (or free route)
    answered with a result (2xx, no fault), a scripted step with ``after:`` (it ran, then
    its answer was lost), or a proxied request that reached the provider (``upstream``'s
    ``reached``)."""
    replayed: bool = False
    """Whether a skill honouring ``Idempotency-Key`` answered with the first answer of the
    key's execution instead of running again (then ``executed`` is False)."""
    idempotency_key: str | None = None
    """The request's ``Idempotency-Key`` (cut to :data:`MAX_TEXT` and escaped as it is
    recorded), where it decided something: a skill that honours it, or a step with
    ``after:``. None: not sent or not read (a plain step's key is in :attr:`headers`,
    when kept)."""

    rate_limit: dict[str, Any] | None = None
    """What a rate limit said of the request (a skill's or route's ``rate_limit:``, or a
    scripted ``rate_limited:`` step); None: nothing limits it. JSON values:
    ``refused`` (no token: the request was not played), ``scripted`` (a step, not a
    bucket), ``status`` (429 or 503), ``retry_after`` and ``headers`` (the forms,
    docs/rate-limits.md), ``limit`` (the capacity the headers state), ``remaining``
    (whole tokens left after the request), ``refill`` (tokens a second; None when
    scripted), ``wait_ms`` (the wait the answer advised, as its headers state it: the
    date form measured from when it was answered; None: no advice, the missing and
    malformed forms, or an admitted request), ``next_ms`` and ``full_ms`` (after the
    request, milliseconds until the bucket holds a token again and until it is full;
    for a scripted step both are its wait), ``retry_after_value`` (the ``Retry-After``,
    or ``retry-after-ms``, as sent; None: none), ``key`` (what the bucket counts: its kind
    and the value, a credential's fingerprint, never a secret). A refusal's advice is in
    :attr:`retry` too (``max_attempts`` as the unified body says), as every advice is.
    Until an entry is shown (:func:`kept`), a bucket's is its :data:`LaterRecord`."""
    connection: str | None = None
    """The client's end of the connection the request came on, as the server saw it
    (``127.0.0.1:50123``, ``[::1]:50123``): requests of one keep-alive connection share
    it (the ``rate-limit-ignored`` audit tells a sequential consumer by it). None:
    not known. Until an entry is shown (:func:`kept`), the (host, port) pair as read."""
    task: dict[str, Any] | None = None
    """What the request did to a long-running task (docs/tasks.md); None: it touched none.
    JSON values: ``id`` (the task's id, as sent when unknown: shown bounded), ``action``
    (``submit``, ``poll``, ``cancel``, ``input``, or ``watch``: a poll answered with the
    task's changes as a stream, its ``status`` the last change sent), ``known`` (mockskill
    handed this id out; False: unknown, malformed or another server's — the consumer built the URL),
    ``expired`` (handed out, but past its time-to-live), ``served`` (the answer carried
    the task's state; False: a scripted error or fault on the status URL, a 404, a 409,
    a refused submit), ``status`` (the task's status after the request; None: not known),
    ``cancelling``, ``progress`` (None: none reported), ``poll`` (a poll's number for its
    task, 0-based; None for other actions), ``poll_after_ms`` (the ``Retry-After`` the
    answer advised, in ms; None: none), ``terminal_at_ms`` (epoch ms when the task reached
    its terminal status, if it has; None: not yet), and for a submit ``operation``
    (``key:`` and the ``Idempotency-Key``, else ``body:`` and the body's digest: what a
    second invoke of the same operation repeats) and ``settles_at_ms`` (epoch ms when its
    life ends if nothing disturbs it; None: it waits for input or counts polls). A callback
    delivery (an entry of endpoint ``callback``, made by mockskill, its ``status`` the
    receiver's answer or None) has action ``callback`` and ``delivery`` (the change's
    number for its task, 0-based, in the order the changes happened), ``attempt`` (0 for
    the first try of that change), ``pushed`` (the status it carried), ``fault`` (the
    task's scripted fault), ``forged`` (its signature was forged on purpose),
    ``acknowledged`` (the receiver answered 2xx within the timeout), ``late_ms`` (how far
    after the change it was sent), ``receiver`` (the URL's ``host:port``)). A submit of a
    task with ``callback:`` has ``callback_fault`` too (the task's scripted fault, ``none``
    for none): a ``never`` task sends no delivery, and the audit knows it by this. Until an
    entry is shown (:func:`kept`), a kept poll's is its :data:`LaterTask`."""
    stream: dict[str, Any] | None = None
    """How a stream step's answer went (docs/streams.md); None: the answer was no stream.
    JSON values: ``format`` (``sse`` or ``ndjson``), ``events`` (events sent: comments,
    heartbeats and ``retry:`` not counted), ``last_id`` (the last event id sent; None:
    none), ``ended`` (``complete``; the fault done: ``reset``, ``close``, ``stall``,
    ``broken_chunking``; ``client_left``; ``gave_up``: the client read nothing for the
    server's bound; ``stopped``: the server stopped; a proxied stream's ``upstream_cut``:
    the provider failed mid-stream and the consumer's connection was cut), ``fault`` (the
    kind of the scripted fault this attempt plays; None: none, or it resumed past it),
    ``fault_after`` (the events of the whole stream that fault comes after; None: no
    fault), ``duration_ms`` (from the head sent to the stream's end), ``asked_from`` (the
    request's ``Last-Event-ID``, cut to :data:`MAX_TEXT` and escaped as other client text;
    None: none sent), ``resumed_from`` (the id a resumable stream continued after, one it
    sends; None: it started over); for a scripted stream also ``resumable``, ``retry_ms``
    (the SSE ``retry:`` sent; None: none), ``idle_bound_ms`` and ``expected_ms`` (the
    scenario's, or their defaults), ``stalled_ms`` (how long the bytes had stopped when it
    ended; None: no head went), and for a resumable stream cut short ``sent_ids`` (the ids
    it sent, the last 1024); a task's watch (docs/tasks.md, "Watching a task") has
    ``watch``, the task's id. ``events``, ``last_id`` and ``sent_ids`` are the attempt's
    own: a resumed attempt counts from the event after ``resumed_from``. A stream that sent
    its error end carries the code's ``error_code`` and ``retry`` in the entry, as an error
    answer."""

    def as_json(self) -> dict[str, Any]:
        """The entry as the journal serves it (``GET /__admin/journal``): JSON values, and
        copies of the dicts a caller could change (not of every value of every entry)."""
        data: dict[str, Any] = dict(zip(ENTRY_FIELDS, self, strict=True))
        data["retry"] = None if self.retry is None else self.retry.as_json()
        if self.tls is not None:
            fault, alert, sni = self.tls
            data["tls"] = {"fault": fault, "alert": alert, "sni": sni}
        data["near_misses"] = [copy.deepcopy(m) for m in self.near_misses]
        if self.upstream is not None:
            data["upstream"] = copy.deepcopy(self.upstream)
        if self.rate_limit is not None:
            data["rate_limit"] = dict(self.rate_limit)
        if self.headers is not None:  # as JSON holds them: [name, value] lists
            data["headers"] = [[name, value] for name, value in self.headers]
        if self.task is not None:
            data["task"] = dict(self.task)
        if self.stream is not None:
            data["stream"] = dict(self.stream)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        """The entry :meth:`as_json` gave (also after a JSON round trip, as the journal serves it).

        Keys it does not know are left out, so that a newer server's journal
        still reads; a missing field raises ValueError naming it.
        """
        values = {k: v for k, v in data.items() if k in ENTRY_FIELDS}
        required = [name for name in ENTRY_FIELDS if name not in cls._field_defaults]
        missing = [name for name in required if name not in values]
        if missing:
            raise ValueError(
                f"a journal entry needs the fields {', '.join(required)}; "
                f"found none for {', '.join(missing)}"
            )
        retry = values.get("retry")
        if retry is not None:
            values["retry"] = Retry(int(retry["suggested_delay_ms"]), int(retry["max_attempts"]))
        values["near_misses"] = tuple(dict(m) for m in values.get("near_misses") or ())
        tls = values.get("tls")
        if isinstance(tls, Mapping):
            values["tls"] = (tls["fault"], tls.get("alert"), tls.get("sni"))
        elif tls is not None:
            values["tls"] = tuple(tls)
        headers = values.get("headers")
        if headers is not None:
            values["headers"] = tuple((str(name), str(value)) for name, value in headers)
        return cls(**values)


_BOUNDED = (
    ("session", MAX_SESSION_NAME),
    ("method", MAX_TEXT),
    ("path", MAX_PATH),
    ("skill", MAX_TEXT),
    ("credential", MAX_TEXT),
    ("protocol_version", MAX_TEXT),
)
"""The entry fields a client's text goes into, and how much of it each keeps."""
_BOUNDED_VALUES = operator.itemgetter(*(Entry._fields.index(name) for name, _ in _BOUNDED))


def oversized(recorded: Entry) -> bool:
    """Whether a client's text in *recorded* is over its bound (:data:`_BOUNDED`): kept whole
    until read, it would hold more memory than an entry may (:data:`MAX_ENTRY_BYTES`)."""
    # Read at once by index (one C call): every request's entry comes here.
    session, method, path, skill, credential, version = _BOUNDED_VALUES(recorded)
    return (
        len(path) > MAX_PATH
        or len(session) > MAX_SESSION_NAME
        or len(method) > MAX_TEXT
        or (skill is not None and len(skill) > MAX_TEXT)
        or (credential is not None and len(credential) > MAX_TEXT)
        or (version is not None and len(version) > MAX_TEXT)
    )


def kept(recorded: Entry, hidden: tuple[str, ...]) -> Entry:
    """*recorded* as the journal shows it: what one request can make it hold is bounded.

    A client chooses the session name, method, path and header values;
    kept whole, a 60 KB value times the journal's entries would be
    gigabytes. Cut ones end with a marker saying how much was cut.
    Characters that print other than they read are kept escaped, so that
    no client text can forge a line of a report printed from the journal.
    The secrets *hidden* (those hidden when it was recorded) read :data:`MASK`.
    """
    changes = shown_changes(recorded, hidden)
    if not changes:
        return recorded
    # Positionally (NamedTuple's _replace maps every field through a dict: slower).
    values = list(recorded)
    index = _FIELD_INDEX
    for name, value in changes.items():
        values[index[name]] = value
    return tuple.__new__(Entry, values)


def shown_changes(recorded: Entry, hidden: tuple[str, ...]) -> dict[str, Any]:
    """What :func:`kept` changes in *recorded*: its fields cut, escaped or masked (most
    often none), and a short body's digest taken. The shared journal applies them to the
    values it sends."""
    changes: dict[str, Any] = {}
    digest = recorded.body_digest
    if type(digest) is LaterDigest:
        changes["body_digest"] = digest.text()
    if recorded.target is not None:  # a request read, what it sent kept: shown now
        _sent_changes(recorded, hidden, changes)
    peer: Any = recorded.connection
    if type(peer) is tuple:  # as read: written out once, now
        changes["connection"] = connection_text(peer)
    limited: Any = recorded.rate_limit
    if type(limited) is tuple:  # as recorded (LaterRecord): made a dict once, now
        changes["rate_limit"] = limit_record(limited)
    task: Any = recorded.task
    if type(task) is tuple:  # as recorded (LaterTask): made a dict once, now
        changes["task"] = task_record(task)
    if _plain(recorded, hidden):
        return changes
    for name, limit in _BOUNDED:
        value = getattr(recorded, name)
        if value is not None:
            shown = shorten(escaped(_masked(value, hidden)), limit)
            if shown != value:
                changes[name] = shown
    near_misses = recorded.near_misses
    if near_misses:
        near = tuple(
            {
                **miss,
                "reasons": [
                    shorten(escaped(_masked(r, hidden)), MAX_PATH) for r in miss["reasons"]
                ],
            }
            for miss in near_misses
        )
        if near != near_misses:
            changes["near_misses"] = near
    return changes


def connection_text(peer: tuple[str, int]) -> str | None:
    """A connection's client end (host, port) as an entry shows it: ``host:port``, an IPv6
    host bracketed; None when not known (no host)."""
    host, port = peer
    if not host:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _plain(r: Entry, hidden: tuple[str, ...]) -> bool:
    """Whether :func:`shown_changes` would change nothing in *r*, told cheaply (the common
    case: short printable ASCII texts, no secret in them, no near misses): one test of
    their concatenation instead of a mask, an escape and a cut per field. A secret found
    only across two fields' boundary is a false alarm (the per-field work), never a miss."""
    session, method, path = r.session, r.method, r.path
    skill, credential, version = r.skill, r.credential, r.protocol_version
    if (
        r.near_misses
        or len(session) > MAX_SESSION_NAME
        or len(method) > MAX_TEXT
        or len(path) > MAX_PATH
        or (skill is not None and len(skill) > MAX_TEXT)
        or (credential is not None and len(credential) > MAX_TEXT)
        or (version is not None and len(version) > MAX_TEXT)
    ):
        return False
    text = f"{session}{method}{path}{skill or ''}{credential or ''}{version or ''}"
    if not (text.isascii() and text.isprintable()):
        return False
    return all(secret not in text for secret in hidden)


def _masked(text: str, hidden: tuple[str, ...]) -> str:
    for secret in hidden:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


# -- what the consumer sent ---------------------------------------------------------


def sent_headers(pairs: RawHeaders, size: int) -> RawHeaders:
    """*pairs* as an entry records them: as read when *size* (at least their bytes, as the
    transport counted them) is within :data:`MAX_HEADER_BYTES`, else cut (see there)."""
    if size <= MAX_HEADER_BYTES:
        return pairs
    return _within(pairs, MAX_HEADER_BYTES, lambda n: b"...[%d more bytes]" % n)


def sent_target(target: str) -> str:
    """*target* as an entry records it: cut to :data:`MAX_TARGET`, marked, if longer."""
    return target if len(target) <= MAX_TARGET else shorten(target, MAX_TARGET)


def body_bytes(entry: Entry) -> int:
    """The bytes (or characters, once shown) of body *entry* keeps: what the journal's
    bytes bound counts (targets and headers are bounded per entry)."""
    body = entry.body
    return 0 if body is None else len(body)


def headers_size(pairs: Iterable[tuple[bytes, bytes]]) -> int:
    """The bytes of header *pairs*' names and values (at least what :func:`sent_headers`
    bounds)."""
    return sum(len(name) + len(value) for name, value in pairs)


def _within(
    pairs: Iterable[tuple[Any, Any]], room: int, more: Any, name_room: int = MAX_TEXT
) -> tuple[Any, ...]:
    """*pairs* with each name cut to *name_room* and each value to what is left of *room*
    (``more(n)`` marks *n* cut), in order: every pair is still listed, named."""
    out = []
    for name, value in pairs:
        if len(name) > name_room:
            name = name[:name_room] + more(len(name) - name_room)
        if len(value) > room:
            value, room = value[:room] + more(len(value) - room), 0
        else:
            room -= len(value)
        out.append((name, value))
    return tuple(out)


def _sent_changes(recorded: Entry, hidden: tuple[str, ...], changes: dict[str, Any]) -> None:
    """What the consumer sent, as recorded (:func:`sent_headers`, raw bytes), as the journal
    shows it: decoded, escaped, credentials masked; into *changes* where it differs."""
    secrets, names = _split(hidden)
    target = recorded.target
    assert target is not None
    shown = _shown_target(target, secrets, names)
    if shown != target:
        changes["target"] = shown
    # Recorded as read (bytes), whatever the fields' types say of them as shown.
    headers: Any = recorded.headers
    if headers and type(headers[0][0]) is bytes:  # as read: decoded once, now
        changes["headers"] = _shown_headers(headers, secrets, names)
    body: Any = recorded.body
    if type(body) is bytes:
        changes["body"], changes["body_encoding"] = _shown_body(
            body, recorded.body_size, secrets, names
        )


def _split(hidden: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]]:
    """*hidden* as (the secrets, the names :func:`redaction` added)."""
    if not hidden:
        return hidden, frozenset()
    names = frozenset(h[len(REDACT) :] for h in hidden if h.startswith(REDACT))
    return tuple(h for h in hidden if not h.startswith(REDACT)), names


_MARKER = 32
"""Room for a cut's marker (``...[N more bytes]``) made when an entry was recorded."""
_TARGET_ESCAPED = re.compile(r"[^\x21-\x7e]")
"""What a target shows percent-escaped: spaces, controls and every byte past ASCII."""


def _shown_target(target: str, secrets: tuple[str, ...], names: frozenset[str]) -> str:
    """*target* (read as Latin-1) with its odd bytes percent-escaped, as in a URL, and the
    values of secret query parameters (:data:`MASKED_QUERY`, *names*) masked."""
    if not (target.isascii() and target.isprintable()) or " " in target:
        target = _TARGET_ESCAPED.sub(_percent_escaped, target)
    path, mark, query = target.partition("?")
    if mark and "=" in query:
        parts = query.split("&")
        masked = False
        for n, part in enumerate(parts):
            key, equals, value = part.partition("=")
            if equals and value and _secret_name(key, MASKED_QUERY, names):
                parts[n], masked = f"{key}={MASK}", True
        if masked:
            target = f"{path}?{'&'.join(parts)}"
    if secrets:
        target = _masked(target, secrets)
    # Escaping may have made a long one longer; a cut's marker, when recorded, stays.
    return shorten(target, MAX_TARGET + _MARKER)


def _percent_escaped(match: re.Match[str]) -> str:
    char = match[0]
    data = char.encode("latin-1") if ord(char) < 256 else char.encode("utf-8")
    return "".join(f"%{b:02X}" for b in data)


def _secret_name(key: str, builtin: frozenset[str], names: frozenset[str]) -> bool:
    """Whether form or query key *key* (as sent, percent-encoded) names a secret."""
    name = unquote_plus(key).strip().lower() if "%" in key or "+" in key else key.lower()
    return name in builtin or name in names


def _shown_headers(
    pairs: RawHeaders, secrets: tuple[str, ...], names: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    masked = MASKED_HEADERS | names if names else MASKED_HEADERS
    shown = []
    size = 0
    for raw_name, raw_value in pairs:
        known = _SHOWN_NAMES.get(raw_name)
        if known is None:
            known = _shown_name(raw_name)
        name, lower = known
        value = raw_value.decode("latin-1")
        if not (value.isascii() and value.isprintable()):
            value = _header_text(raw_value)
        if lower in masked:
            value = _masked_header(lower, value)
        elif secrets:
            value = _masked(value, secrets)
        size += len(value)
        shown.append((name, value))
    if size <= MAX_HEADER_BYTES:
        return tuple(shown)
    # Escaping may have made them longer than the bytes recorded: bounded again, with room
    # for the markers of a cut when recorded (a marker each at most), which stay as they are.
    room = MAX_HEADER_BYTES + _MARKER * len(shown)
    return _within(shown, room, lambda n: f"...[{n} more characters]", MAX_TEXT + _MARKER)


_SHOWN_NAMES: dict[bytes, tuple[str, str]] = {}
"""Header names as read -> (as shown, lowered): a client sends the same few every time."""


def _shown_name(raw: bytes) -> tuple[str, str]:
    """*raw*, a header name, as shown and lowered; kept for the next (a client inventing
    names cannot grow memory: the table starts afresh past 256)."""
    name = _header_text(raw)
    if len(_SHOWN_NAMES) >= 256:
        _SHOWN_NAMES.clear()  # atomic, unlike evicting one: journals are read on threads
    known = _SHOWN_NAMES[raw] = (name, name.lower())
    return known


def _header_text(raw: bytes) -> str:
    """A header name or value as sent, read as Latin-1 (as HTTP reads it: a character a
    byte, one byte each in memory too), what prints other than it reads escaped."""
    text = raw.decode("latin-1")
    if text.isascii() and text.isprintable():
        return text
    if "\t" in text:  # a tab is a value's own (RFC 9110 5.5), kept as sent
        return "\t".join(escaped(part) for part in text.split("\t"))
    return escaped(text)


def _masked_header(lower: str, value: str) -> str:
    """A credential header's *value* masked: an authorization keeps its scheme, a cookie
    its names."""
    if lower == "cookie":
        return "; ".join(
            f"{c.partition('=')[0].strip()}={MASK}" if "=" in c else MASK for c in value.split(";")
        )
    scheme, space, credential = value.strip().partition(" ")
    if lower.endswith("authorization") and space and credential.strip():
        return f"{scheme} {MASK}"
    return MASK


def _shown_body(
    body: bytes, size: int | None, secrets: tuple[str, ...], names: frozenset[str]
) -> tuple[str, str]:
    """(the body as shown, its encoding): UTF-8 text as text, its credentials masked; any
    other bytes (and UTF-8 holding controls no text has: :data:`_BINARY`) as base64. A
    body cut inside a character is text up to that character."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        cut = size is not None and size > len(body)
        if not (cut and error.reason == "unexpected end of data" and error.start >= len(body) - 3):
            return base64.b64encode(body).decode("ascii"), "base64"
        text = body[: error.start].decode("utf-8")
    if body.translate(None, _NOT_BINARY):  # valid UTF-8, but no text
        return base64.b64encode(body).decode("ascii"), "base64"
    lower = text.lower()
    # The built-in names share five stems: five searches of the text, not seven.
    if any(stem in lower for stem in _STEMS) or (names and any(n in lower for n in names)):
        fields = MASKED_FIELDS | names if names else MASKED_FIELDS
        if any(field in lower for field in fields):
            text = _masked_fields(text, fields)
    if secrets:
        text = _masked(text, secrets)
    return text, "text"


_BINARY = bytes([*range(0x09), *range(0x0E, 0x20), 0x7F])
"""Controls no text holds (tabs, line and form feeds aside): bytes that decode as UTF-8
but are data, shown as base64."""
_NOT_BINARY = bytes(b for b in range(256) if b not in _BINARY)
"""What ``bytes.translate`` deletes to leave a body's :data:`_BINARY` bytes, if any."""
_STEMS = ("secret", "token", "password", "assertion", "verifier")
"""What every one of :data:`MASKED_FIELDS` holds one of."""
_NOT_JSON = object()


def _masked_fields(text: str, fields: frozenset[str]) -> str:
    """*text*, a JSON or form body, with the values of *fields* masked, its shape kept: in
    its very text where a pattern can tell (the text sent, but those values), else (a
    secret field holding an object, a key written with escapes) the document written anew."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        document = _NOT_JSON
    if document is _NOT_JSON:  # a form, or JSON cut at the body limit: masked where found
        return _masked_form(_json_fields(fields).sub(_masked_json_value, text), fields)
    masked_document = _masked_document(document, fields)
    if masked_document == document:
        return text
    masked = _json_fields(fields).sub(_masked_json_value, text)
    try:
        if json.loads(masked) == masked_document:
            return masked
    except (ValueError, RecursionError):
        pass
    return json.dumps(masked_document, ensure_ascii=False)


@functools.lru_cache(maxsize=16)
def _json_fields(fields: frozenset[str]) -> re.Pattern[str]:
    """A JSON member named one of *fields* (any case) and its value, unless an object or
    array; a string cut at the body's end too."""
    alternatives = "|".join(re.escape(f) for f in sorted(fields))
    return re.compile(
        rf'("(?:{alternatives})"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^\s,\]}}{{\[][^\s,\]}}]*)',
        re.IGNORECASE,
    )


def _masked_json_value(match: re.Match[str]) -> str:
    return f'{match[1]}"{MASK}"'


def _masked_document(value: Any, fields: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {
            k: MASK if isinstance(k, str) and k.lower() in fields else _masked_document(v, fields)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_masked_document(item, fields) for item in value]
    return value


def _masked_form(text: str, fields: frozenset[str]) -> str:
    """*text* with the values of its ``name=value`` parts (split on ``&``) named by *fields*
    masked: a form body's."""
    if "=" not in text:
        return text
    parts = text.split("&")
    masked = False
    for n, part in enumerate(parts):
        key, equals, value = part.partition("=")
        if equals and value and _secret_name(key, fields, frozenset()):
            parts[n], masked = f"{key}={MASK}", True
    return "&".join(parts) if masked else text


ENTRY_FIELDS: tuple[str, ...] = Entry._fields
"""An Entry's fields, in order."""
_FIELD_INDEX = {name: n for n, name in enumerate(ENTRY_FIELDS)}
_RETRY = ENTRY_FIELDS.index("retry")
_DIGEST = ENTRY_FIELDS.index("body_digest")


def packed(slots: Iterable[tuple[tuple[str, ...] | None, Entry]]) -> bytes:
    """Journal slots as one compact ``bytes`` (:func:`unpacked` reads them back).

    Each slot is (the secrets hidden when it was recorded, what was recorded),
    or (None, its Entry) once built. Marshalled and compressed, an entry takes
    some 20 bytes instead of some 600 in small objects; and a ``bytes`` over 512
    bytes comes from malloc, not from the interpreter's arenas, so that it does
    not pin an arena the small objects around it would otherwise give back.
    """
    rows: list[Any] = []
    for hidden, recorded in slots:
        values: tuple[Any, ...] = tuple(recorded)  # marshal holds plain tuples only
        digest = recorded.body_digest
        if type(digest) is LaterDigest:  # taken now: marshal holds no such object
            values = (*values[:_DIGEST], digest.text(), *values[_DIGEST + 1 :])
        retry = recorded.retry
        if retry is not None:  # the one value marshal cannot hold
            advice = (retry.suggested_delay_ms, retry.max_attempts)
            values = (*values[:_RETRY], advice, *values[_RETRY + 1 :])
        rows += (hidden, values)
    return zlib.compress(marshal.dumps(rows), 1)


def unpacked(data: bytes, last: int) -> list[Entry]:
    """The entries of the last *last* slots that :func:`packed` made *data* of, as read
    from the journal: those not yet built are built now (:func:`kept`), as on a first read."""
    rows = marshal.loads(zlib.decompress(data))
    entries = []
    for n in range(max(0, len(rows) - 2 * last), len(rows), 2):
        hidden, values = rows[n], rows[n + 1]
        if values[_RETRY] is not None:
            values = (*values[:_RETRY], Retry(*values[_RETRY]), *values[_RETRY + 1 :])
        entry = Entry(*values)
        entries.append(entry if hidden is None else kept(entry, hidden))
    return entries
