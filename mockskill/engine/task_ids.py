"""Task ids (interim: s17-life's module replaces this one at the merge).

``<session as base64url, no padding>.<number>.<mac>``: the mac is 10 hex digits of
the keyed digest of (session, number) under the server's key.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from .digests import KeyedDigest

MAX_ID = 400


def _mac(session: str, number: int, keyed: KeyedDigest) -> str:
    data = f"{len(session)}:{session}:{number}".encode("utf-8", "surrogatepass")
    return keyed.raw(data).hex()[:10]


def make(session: str, number: int, keyed: KeyedDigest) -> str:
    encoded = base64.urlsafe_b64encode(session.encode("utf-8", "surrogatepass")).rstrip(b"=")
    return f"{encoded.decode()}.{number}.{_mac(session, number, keyed)}"


def read(task_id: str, keyed: KeyedDigest) -> tuple[str, int] | None:
    if len(task_id) > MAX_ID:
        return None
    parts = task_id.split(".")
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[1]) > 18:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4))
        session = raw.decode("utf-8", "surrogatepass")
    except (binascii.Error, ValueError):
        return None
    number = int(parts[1])
    if not hmac.compare_digest(parts[2], _mac(session, number, keyed)):
        return None
    return session, number
