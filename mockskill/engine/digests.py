"""Keyed digests for the journal: ``hmac-sha256:`` and 16 hex digits, never the data itself.

HMAC-SHA256 (RFC 2104) under a key set up once per server: each digest copies
the prepared :class:`hmac.HMAC` and feeds it the data, so the key's padding and
hashing are not repeated per request.
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "hmac-sha256:"


class KeyedDigest:
    """``hmac-sha256:…`` of bytes under one *key* (a server's, made at start)."""

    __slots__ = ("_prepared",)

    def __init__(self, key: bytes) -> None:
        self._prepared = hmac.new(key, digestmod=hashlib.sha256)

    def _hmac(self, data: bytes) -> hmac.HMAC:
        mac = self._prepared.copy()
        mac.update(data)
        return mac

    def digest(self, data: bytes) -> str:
        """The keyed digest of *data*."""
        return PREFIX + self._hmac(data).hexdigest()[:16]

    def raw(self, data: bytes) -> bytes:
        """The whole HMAC-SHA256 of *data* (``hmac.new(key, data, "sha256").digest()``)."""
        return self._hmac(data).digest()

    __call__ = digest
