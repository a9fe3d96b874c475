"""What of an exchange is a secret, kept out of the file a recording becomes.

A consumer authenticates with headers (``Authorization``, an API key,
cookies) and, at a token endpoint, with form or JSON fields (an OAuth2
client's secret); a provider answers with tokens (``access_token``) and
cookies. None of these reaches a recorded file: headers are left out, body
fields are left out of what a case may test, and an access token in an
answer is replaced by a stand-in the file may hold (a replay hands the
stand-in out, and accepts it back). :class:`Secrets` keeps what it removed,
by name only, for the file's header comment, and what the consumer
presented, as digests, for the skill's ``requires:``.

Leaving a secret out where it was is not enough: a provider echoes what it
was sent (a request's headers in a debug answer, a key in an error message,
a token in a ``Location``). Every secret *value* an exchange carried is
kept here (:meth:`Secrets.harvest`), and :meth:`Secrets.scrub` replaces it
wherever it appears in the scenario written — bodies (text, JSON strings,
the raw bytes of ``body_base64``), headers, paths — by ``(redacted)`` (an
access token by its stand-in).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote

from ..engine.exchange import Exchange

SECRET_HEADER = re.compile(
    r"authorization|cookie|api[-_]?key|token|secret|password|passwd|credential|session-?id",
    re.IGNORECASE,
)
"""Header names that carry a secret (``Authorization``, ``Proxy-Authorization``,
``X-API-Key``, ``Cookie``, ``Set-Cookie``, ``X-Auth-Token``, ...)."""
NOT_SECRET_HEADERS = frozenset({"www-authenticate", "mockskill-session"})
"""Names that look like secrets' but say how to authenticate (or which session), no more."""
SECRET_FIELDS = frozenset(
    {
        "client_secret",
        "password",
        "access_token",
        "refresh_token",
        "id_token",
        "client_assertion",
        "assertion",
        "code_verifier",
        "api_key",
        "apikey",
        "secret",
        "token",
    }
)
"""Body fields (form fields, JSON object keys at any depth) that carry a secret."""
TOKEN_FIELD = "access_token"
STAND_IN = "recorded-token-{n}"
"""An access token of a recorded answer, as the file holds it (numbered in order seen)."""
REDACTED = "(redacted)"
"""What a secret body field of an answer becomes when nothing can stand in for it."""
MIN_SCRUBBED = 4
"""The shortest secret value searched for everywhere: a shorter one ("1", "yes") would
replace ordinary words and numbers of the file (it is still left out where it was)."""
MAX_DECODED = 8 * 1024 * 1024
"""The most a compressed answer is uncompressed to, to look for secrets in it."""
FREE_FORM = frozenset({"json", "raw_descriptor", "details"})
"""Keys of a scenario whose mappings are a provider's data: their keys are scrubbed too."""


def is_secret_header(name: str) -> bool:
    lower = name.lower()
    return lower not in NOT_SECRET_HEADERS and SECRET_HEADER.search(lower) is not None


def sha256(secret: str) -> str:
    """The digest a replay compares a presented credential with (hex, as ``sha256sum``)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Secrets:
    """What one recording left out: names for the header, digests and stand-ins for replay."""

    names: dict[str, None] = field(default_factory=dict)
    """What was redacted, in order (``header Authorization``, ``body field client_secret``)."""
    stand_ins: dict[str, str] = field(default_factory=dict)
    """An access token an answer carried -> the stand-in the file holds instead."""
    stand_in_scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """A stand-in -> the scopes its answer granted (``scope``)."""
    values: dict[str, None] = field(default_factory=dict)
    """Every secret value seen (credentials, cookies, secret fields), scrubbed everywhere."""
    scrubbed: int = 0
    """How many times a secret value was replaced where it was echoed (by :meth:`scrub`)."""
    short: bool = False
    """Whether a secret value was too short to be searched for (:data:`MIN_SCRUBBED`)."""
    recompressed: bool = False
    """Whether a compressed answer held a secret: scrubbed, then compressed anew (so its
    bytes are not the provider's any more)."""

    def value(self, secret: str) -> None:
        """Keep *secret* (a value), to scrub wherever it appears."""
        secret = secret.strip()
        if secret:
            self.values.setdefault(secret)

    def harvest(self, exchange: Exchange) -> None:
        """Keep every secret value *exchange* carries: its request's credentials, cookies,
        secret query parameters and body fields, and its answer's secret headers."""
        for name, value in exchange.headers:
            if is_secret_header(name):
                self._header_value(name, value)
        for name, value in exchange.response_headers:
            if is_secret_header(name):
                self._header_value(name, value)
        _, _, query = exchange.target.partition("?")
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key.lower() in QUERY_SECRETS or key.lower() in SECRET_FIELDS:
                self.value(value)
        text = exchange.body.decode("utf-8", "replace")
        try:
            self._fields(json.loads(text))
        except (ValueError, RecursionError):
            if "=" in text:
                for key, value in parse_qsl(text, keep_blank_values=True):
                    if key.lower() in SECRET_FIELDS:
                        self.value(value)

    def _header_value(self, name: str, value: str) -> None:
        lower = name.lower()
        self.value(value)
        scheme, _, credential = value.strip().partition(" ")
        if lower.endswith("authorization") and credential:
            self.value(credential)  # the token, without its scheme
            pair = basic(value) if scheme.lower() == "basic" else None
            if pair is not None:
                self.value(pair[1])
        elif lower in ("cookie", "set-cookie"):
            cookies = value.split(";") if lower == "cookie" else value.split(";")[:1]
            for cookie in cookies:
                self.value(cookie.partition("=")[2])

    def _fields(self, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and key.lower() in SECRET_FIELDS and isinstance(item, str):
                    self.value(item)
                else:
                    self._fields(item)
        elif isinstance(value, list):
            for item in value:
                self._fields(item)

    def scrub(self, data: Any) -> Any:
        """The scenario *data* with every secret value replaced wherever it appears (its
        ``auth:`` aside: digests and stand-ins only, by construction)."""
        forms: dict[str, str] = {}
        for secret in self.values:
            if len(secret) < MIN_SCRUBBED:
                self.short = True
                continue
            marker = self.stand_ins.get(secret, REDACTED)
            for form in (secret, quote(secret, safe=""), quote_plus(secret), _json(secret)):
                forms.setdefault(form, marker)
        for token, stand_in in self.stand_ins.items():
            forms.setdefault(token, stand_in)
        if not forms:
            return data
        ordered = sorted(forms, key=len, reverse=True)  # a longer value first: it may hold one
        pattern = re.compile("|".join(re.escape(f) for f in ordered))
        raw = re.compile("|".join(re.escape(f) for f in ordered).encode())
        raw_forms = {f.encode(): m.encode() for f, m in forms.items()}

        def text(value: str) -> str:
            out, n = pattern.subn(lambda m: forms[m[0]], value)
            self.scrubbed += n
            return out

        def walk(value: Any, free: bool) -> Any:
            if isinstance(value, str):
                return text(value)
            if isinstance(value, list):
                return [walk(item, free) for item in value]
            if not isinstance(value, dict):
                return value
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if not free and key == "auth":
                    out[key] = item
                elif not free and key == "body_base64" and isinstance(item, str):
                    body = base64.b64decode(item)
                    coding = _coding(value.get("headers"))
                    plain = _decoded(body, coding)
                    if plain is not None and raw.search(plain):  # a secret inside, compressed
                        plain, n = raw.subn(lambda m: raw_forms[m[0]], plain)
                        body = _encoded(plain, coding)
                        self.scrubbed += n
                        self.recompressed = True
                    body, n = raw.subn(lambda m: raw_forms[m[0]], body)
                    self.scrubbed += n
                    out[key] = base64.b64encode(body).decode("ascii")
                else:
                    name = text(key) if free and isinstance(key, str) else key
                    out[name] = walk(item, free or key in FREE_FORM)
            return out

        return walk(data, False)

    def header(self, name: str) -> None:
        self.names.setdefault(f"header {name}")

    def field(self, name: str) -> None:
        self.names.setdefault(f"body field {name}")

    def fields_out(self, value: Any) -> Any:
        """A JSON request body without its secret fields (at any depth), for what cases test."""
        if isinstance(value, dict):
            kept = {}
            for key, item in value.items():
                if key.lower() in SECRET_FIELDS:
                    self.field(key)
                else:
                    kept[key] = self.fields_out(item)
            return kept
        if isinstance(value, list):
            return [self.fields_out(item) for item in value]
        return value

    def answer_out(self, value: Any) -> Any:
        """A JSON answer with its tokens replaced: an access token by its stand-in."""
        if isinstance(value, dict):
            kept: dict[str, Any] = {}
            for key, item in value.items():
                if key.lower() == TOKEN_FIELD and isinstance(item, str):
                    self.field(key)
                    kept[key] = self.stand_in(item, value.get("scope"))
                elif key.lower() in SECRET_FIELDS and isinstance(item, str):
                    self.field(key)
                    self.value(item)  # (echoed elsewhere too, perhaps)
                    kept[key] = REDACTED
                else:
                    kept[key] = self.answer_out(item)
            return kept
        if isinstance(value, list):
            return [self.answer_out(item) for item in value]
        return value

    def stand_in(self, token: str, scope: Any = None) -> str:
        """The stand-in of *token* (the same one each time it is seen)."""
        if token not in self.stand_ins:
            name = STAND_IN.format(n=len(self.stand_ins) + 1)
            self.stand_ins[token] = name
            scopes = tuple(scope.split()) if isinstance(scope, str) else ()
            self.stand_in_scopes[name] = scopes
        return self.stand_ins[token]


def _coding(headers: Any) -> str:
    """The ``Content-Encoding`` of a step's *headers* (lower case; "" for none)."""
    if isinstance(headers, dict):
        for name, value in headers.items():
            if str(name).lower() == "content-encoding":
                return str(value).strip().lower()
    return ""


def _decoded(body: bytes, coding: str) -> bytes | None:
    """*body* uncompressed (gzip, deflate), at most :data:`MAX_DECODED` bytes; None when
    its coding is another (br, ...) or it does not decode."""
    if coding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        decoder = zlib.decompressobj(zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS)
    else:
        return None
    try:
        plain = decoder.decompress(body, MAX_DECODED)
    except zlib.error:
        return None
    return plain if not decoder.unconsumed_tail else None


def _encoded(plain: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        return gzip.compress(plain, mtime=0)
    return zlib.compress(plain)


def _json(secret: str) -> str:
    """*secret* as it is written inside a JSON string (quotes and escapes)."""
    return json.dumps(secret)[1:-1]


def presented(headers: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The credential a request carries, as a replay reads it: ("bearer", token) or
    ("api_key", key) (the scenario format's ``X-API-Key``), if any."""
    for name, value in headers:
        if name.lower() == "authorization" and value[:7].lower() == "bearer ":
            return "bearer", value[7:].strip()
    for name, value in headers:
        if name.lower() == "x-api-key" and value.strip():
            return "api_key", value.strip()
    return None


QUERY_SECRETS = frozenset({"access_token", "api_key", "apikey", "client_secret", "token"})
"""Query parameters that carry a secret."""


def form_secrets(text: str, secrets: Secrets) -> bool:
    """Whether a form-encoded body holds a secret field (each one named in *secrets*)."""
    found = False
    if "=" in text:
        for key, _ in parse_qsl(text, keep_blank_values=True):
            if key.lower() in SECRET_FIELDS:
                secrets.field(key)
                found = True
    return found


def basic(value: str) -> tuple[str, str] | None:
    if value[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, _, secret = decoded.partition(":")
    return unquote(client_id), unquote(secret)
