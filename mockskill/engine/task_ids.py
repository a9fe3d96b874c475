"""Task ids: ``<session>.<number>.<mac>``, made and read back without the store.

The id carries its session (base64url, no padding), so a poll of the status URL needs no
``Mockskill-Session`` header: the poll is journalled in the task's session. The mac (10 hex
digits of a keyed digest of the skill, session and number, under the server's digest key)
tells an id mockskill handed out, at its own skill's status URL, from one a consumer built,
moved to another skill's URL or took from another server, before the store is asked.
Consumers should treat the id as opaque and follow ``Location`` (docs/tasks.md).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from typing import TYPE_CHECKING

from .entries import MAX_SESSION_NAME

if TYPE_CHECKING:
    from .digests import KeyedDigest

MAC_CHARS = 10
"""Hex digits of the mac: 40 bits, so a guessed id is told with near certainty."""
MAX_NUMBER_DIGITS = 15
"""Digits of a task's number at most (a session's tasks are counted from 0)."""
MAX_TASK_ID = (MAX_SESSION_NAME * 4 * 4 + 2) // 3 + 1 + MAX_NUMBER_DIGITS + 1 + MAC_CHARS
"""The longest id :func:`make` makes (a session name of :data:`MAX_SESSION_NAME` characters,
4 bytes each in UTF-8): a longer one is malformed before anything is decoded."""

_FORM = re.compile(
    rf"([A-Za-z0-9_-]*)\.(0|[1-9][0-9]{{0,{MAX_NUMBER_DIGITS - 1}}})\.([0-9a-f]{{{MAC_CHARS}}})"
)
_DOMAIN = b"mockskill task id\x00"
"""Put before what is digested: a task id's mac is never another digest of the same key."""


def _mac(skill: str, session: str, number: int, keyed: KeyedDigest) -> str:
    name, owner = session.encode(), skill.encode()
    data = b"%s%d:%s%d:%s%d" % (_DOMAIN, len(owner), owner, len(name), name, number)
    return keyed.raw(data).hex()[:MAC_CHARS]


def make_session(session: str) -> str:
    """*session* as an id carries it: base64url of its UTF-8, without padding."""
    return base64.urlsafe_b64encode(session.encode()).rstrip(b"=").decode("ascii")


def make(session: str, number: int, keyed: KeyedDigest, skill: str) -> str:
    """The id of task *number* of *session*, a task of *skill* (scenario-qualified, as the
    store's :attr:`~.store.Submit.skill`), under the server's *keyed* digest."""
    return f"{make_session(session)}.{number}.{_mac(skill, session, number, keyed)}"


def read(task_id: str, keyed: KeyedDigest, skill: str) -> tuple[str, int] | None:
    """The session and number *task_id* names at *skill*'s status URL, or None: malformed,
    or a mac that is not this server's for that skill (never handed out there)."""
    parts = _parts(task_id)
    if parts is None:
        return None
    session, number, mac = parts
    if not hmac.compare_digest(mac, _mac(skill, session, number, keyed)):
        return None
    return session, number


def claimed_session(task_id: str) -> str | None:
    """The session a well-formed *task_id* names, its mac unchecked (None: malformed): where
    a request to an id mockskill never handed out is journalled, so that the audit grades
    the consumer that built it (``status-url-ignored``) in its own session."""
    parts = _parts(task_id)
    return None if parts is None else parts[0]


def _parts(task_id: str) -> tuple[str, int, str] | None:
    """The session, number and mac *task_id* is written with, or None: malformed."""
    if len(task_id) > MAX_TASK_ID:
        return None
    form = _FORM.fullmatch(task_id)
    if form is None:
        return None
    encoded, digits, mac = form.groups()
    if len(encoded) % 4 == 1:  # no base64 text has this length, padded or not
        return None
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        session = raw.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if len(session) > MAX_SESSION_NAME or make_session(session) != encoded:
        return None  # (another spelling of the same bytes is not an id handed out)
    return session, int(digits), mac
