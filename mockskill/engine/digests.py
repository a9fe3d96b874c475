"""Keyed digests for the journal: ``hmac-sha256:`` and 16 hex digits, never the data itself.

HMAC-SHA256 (RFC 2104) with its two keyed SHA-256 states prepared once:
a digest is then two C-level copies and updates. Every request with a body
takes one, and both of the standard library's ways cost more per call —
``hmac.HMAC.copy`` builds a Python wrapper object around its copy, and
``hmac.digest`` (OpenSSL's one-shot HMAC) sets the key up afresh each time.
The value is exactly ``hmac.new(key, data, "sha256").hexdigest()[:16]``.
"""

from __future__ import annotations

import hashlib

_BLOCK = 64
"""SHA-256's block size in bytes: the HMAC key is padded (or hashed) to it."""
PREFIX = "hmac-sha256:"


class KeyedDigest:
    """``hmac-sha256:…`` of bytes under one *key* (a server's, made at start)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def __call__(self, data: bytes) -> str:
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return PREFIX + outer.hexdigest()[:16]
