"""A shared scenario set as data: the records a version holds, their JSON, their digest.

Owns what one version of the shared scenario set (:mod:`.scenarios`) is —
a :class:`Record` per loaded scenario: what it was read from (the text and
its origin name, and where in that text it starts), whether it is active,
when it was loaded and activated, whether it was added at run time — and
how a version goes to and from the JSON that Redis keeps. Nothing here
talks to Redis, so the registry can build and read records without
importing the Redis client.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

FORMAT = 1
"""The layout of a stored version; a replica refuses (and says so) a layout it does not know."""


@dataclass(frozen=True)
class Record:
    """One loaded scenario as the shared set keeps it."""

    name: str
    origin: str
    """The file or body name it was read under (problems and default names depend on it)."""
    text: str
    """All of the text it was read from (YAML or JSON)."""
    line: int
    column: int
    """Where its document starts in :attr:`text` (a text may hold several scenarios)."""
    active: bool
    loaded: float
    activated: float | None
    added: bool
    """Loaded at run time (``Server.add``, the admin API) rather than from the files."""

    def source(self) -> tuple[str, str, str, int, int]:
        """What it was read from, without how it is served: equal sources read equal."""
        return (self.name, self.origin, self.text, self.line, self.column)


@dataclass(frozen=True)
class Stored:
    """One version of the shared set, as read from the store."""

    version: int
    records: tuple[Record, ...]
    files: str
    """The digest of the scenario files that were last published whole (:func:`files_digest`)."""


def files_digest(records: Iterable[Record]) -> str:
    """The digest of the records that came from files: their sources, in order.

    Replicas started (or reloaded) from the same files compute the same
    digest, so the second one publishes nothing; how they are served (active,
    times) is not part of it.
    """
    sources = [r.source() for r in records if not r.added]
    blob = json.dumps(sources, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def encode(records: Sequence[Record]) -> str:
    """The JSON of a version's records."""
    return json.dumps(
        {"format": FORMAT, "scenarios": [asdict(r) for r in records]},
        ensure_ascii=False,
        separators=(",", ":"),
    )


class BadVersion(ValueError):
    """A stored version this mockskill cannot read (another layout, or damaged)."""


def decode(text: str) -> tuple[Record, ...]:
    """The records of a version's JSON; :class:`BadVersion` says what is wrong."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise BadVersion(f"the stored scenario set is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise BadVersion(
            f"the stored scenario set has layout {found!r}, this mockskill reads layout {FORMAT}"
            " (replicas of different mockskill versions share one Redis?)"
        )
    try:
        return tuple(Record(**item) for item in data["scenarios"])
    except (KeyError, TypeError) as exc:
        raise BadVersion(f"a stored scenario record is damaged ({exc})") from None
