"""Keyed digests for the journal: ``hmac-sha256:`` and 16 hex digits, never the data itself.

HMAC-SHA256 (RFC 2104) under a key set up once per server: each digest copies
the prepared :class:`hmac.HMAC` and feeds it the data, so the key's padding and
hashing are not repeated per request. A short body's is taken when its journal
entry is first shown (:class:`LaterDigest`), as the entry's texts are bounded and
masked then: most entries are recorded and never read one by one.
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "hmac-sha256:"

LATER_BYTES = 1024
"""Bodies up to this size are digested when their entry is first shown
(:meth:`KeyedDigest.later`), longer ones at once: what an entry holds until shown stays
within its bound."""


class KeyedDigest:
    """``hmac-sha256:…`` of bytes under one *key* (a server's, made at start)."""

    __slots__ = ("_prepared", "later_bytes")

    def __init__(self, key: bytes, later_bytes: int = LATER_BYTES) -> None:
        self._prepared = hmac.new(key, digestmod=hashlib.sha256)
        self.later_bytes = later_bytes
        """Data up to this size is digested later (:meth:`later`): :data:`LATER_BYTES`, or
        the journal's body limit when the entry keeps the body anyway."""

    def _hmac(self, data: bytes) -> hmac.HMAC:
        mac = self._prepared.copy()
        mac.update(data)
        return mac

    def digest(self, data: bytes) -> str:
        """The keyed digest of *data*."""
        return PREFIX + self._hmac(data).hexdigest()[:16]

    def later(self, data: bytes) -> str | LaterDigest:
        """The keyed digest of *data*: taken now if *data* is over :attr:`later_bytes`, else
        when first asked of the :class:`LaterDigest` returned (which holds *data* until then)."""
        if len(data) > self.later_bytes:
            return self.digest(data)
        return LaterDigest(data, self)

    def raw(self, data: bytes) -> bytes:
        """The whole HMAC-SHA256 of *data* (``hmac.new(key, data, "sha256").digest()``)."""
        return self._hmac(data).digest()

    __call__ = digest


class LaterDigest:
    """A short body's keyed digest, taken when first asked (:meth:`text`): what a recorded
    journal entry holds until the entry is first shown (:func:`~.entries.shown_changes`)."""

    __slots__ = ("_data", "_keyed")

    def __init__(self, data: bytes, keyed: KeyedDigest) -> None:
        self._data, self._keyed = data, keyed

    def text(self) -> str:
        """``hmac-sha256:…`` of the body."""
        return self._keyed.digest(self._data)

    def __repr__(self) -> str:
        return f"LaterDigest({self.text()!r})"
