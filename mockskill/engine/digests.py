"""Keyed digests for the journal: ``hmac-sha256:`` and 16 hex digits, never the data itself.

HMAC-SHA256 (RFC 2104) with its two keyed SHA-256 states prepared once:
a digest is then two C-level copies and updates. Every request with a body
takes one, and both of the standard library's ways cost more per call —
``hmac.HMAC.copy`` builds a Python wrapper object around its copy, and
``hmac.digest`` (OpenSSL's one-shot HMAC) sets the key up afresh each time.
The value is exactly ``hmac.new(key, data, "sha256").hexdigest()[:16]``.

The states are CPython's own SHA-256 (``_sha256``) where the build has it,
OpenSSL's (``hashlib``) otherwise: the same values, and for the short bodies
of most requests (one or two blocks) the built-in costs a fifth less per
digest — OpenSSL's per-call overhead (context copy, reset and free through
EVP) outweighs its faster block function until bodies are kilobytes long.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hashlib import _Hash

# Not hashlib: importing it loads OpenSSL's _hashlib (3-5 ms of serve's start-up), which
# nothing before the first answer needs (issue 13).
_sha256: Callable[[bytes], _Hash]
try:
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found,no-redef]
except ImportError:  # a build without the built-in hashes (--without-builtin-hashlib-hashes)
    from hashlib import sha256 as _sha256

_BLOCK = 64
"""SHA-256's block size in bytes: the HMAC key is padded (or hashed) to it."""
PREFIX = "hmac-sha256:"


class KeyedDigest:
    """``hmac-sha256:…`` of bytes under one *key* (a server's, made at start).

    Called, or through :meth:`digest` (a bound method called directly: a call
    through the instance looks ``__call__`` up and binds it on every use)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = _sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = _sha256(bytes(b ^ 0x36 for b in key))
        self._outer = _sha256(bytes(b ^ 0x5C for b in key))

    def _hmac(self, data: bytes) -> _Hash:
        """The HMAC of *data*: the outer state, fed the inner one's digest."""
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer

    def digest(self, data: bytes) -> str:
        """The keyed digest of *data*."""
        return PREFIX + self._hmac(data).hexdigest()[:16]

    def raw(self, data: bytes) -> bytes:
        """The whole HMAC-SHA256 of *data* (``hmac.new(key, data, "sha256").digest()``)."""
        return self._hmac(data).digest()

    __call__ = digest
