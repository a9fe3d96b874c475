"""How a step behaves on the wire, beside its reply: the YAML of waits and faults → checked values.

``delay`` and ``execution`` (a wait's shape, :mod:`.delays`), ``hang`` (a
bound in ms, or ``true`` for the longest wait), ``dribble`` (a body in timed
chunks), ``fault`` (one of the transport faults) and ``keep_alive`` (what
happens to the connection after the answer). Each reader returns ``None``
when the step has no such key, :data:`BAD` when it has a problem (reported
on the reader), else the checked value.
"""

from __future__ import annotations

from typing import Any

from . import delays
from .kinds import FAULT_NAMES, WRITTEN_BODIES, listed
from .model import STALE_MODES, Dribble, KeepAlive
from .problems import Path, describe
from .reader import Reader

KEEP_ALIVE_KEYS = ("close_after", "stale_after_ms", "stale", "max_requests")
BAD = object()
"""What a reader returns for a value with a problem (None means: not in the step)."""


def delay(r: Reader, raw: dict[str, Any], key: str, path: Path) -> Any:
    if key not in raw:
        return None
    delay = delays.read_delay(r, raw[key], (*path, key), r.max_delay_ms)
    return BAD if delay is None else delay


def hang(r: Reader, raw: dict[str, Any], path: Path) -> Any:
    if "hang" not in raw:
        return None
    value = raw["hang"]
    if value is True:
        return r.max_delay_ms
    bound = r.number_at(value, (*path, "hang"), minimum=1, maximum=r.max_delay_ms, unit="ms")
    return BAD if bound is None else bound


def dribble(r: Reader, raw: dict[str, Any], path: Path, *, has_body: bool) -> Any:
    if "dribble" not in raw:
        return None
    where = (*path, "dribble")
    value = raw["dribble"]
    if not isinstance(value, dict):
        r.bad(where, "{chunks: N, over: MS}", describe(value))
        return BAD
    if not r.keys(value, where, ("chunks", "over"), required=("chunks", "over")):
        return BAD
    chunks = r.integer(value, "chunks", where, default=1, minimum=1, maximum=10_000)
    over = r.integer(value, "over", where, default=0, minimum=0, maximum=r.max_delay_ms, unit="ms")
    if not has_body:
        r.bad(
            where,
            f"a body to dribble ({listed(WRITTEN_BODIES)})",
            "none in this step",
        )
        return BAD
    for other in ("fault", "hang"):
        if other in raw:
            r.bad(where, f"dribble or {other}", "both", "a step answers one way", at_key=True)
            return BAD
    if chunks is None or over is None:
        return BAD
    return Dribble(chunks, over)


def fault(r: Reader, raw: dict[str, Any], path: Path) -> Any:
    if "fault" not in raw:
        return None
    name = raw["fault"]
    if not r.among(name, (*path, "fault"), FAULT_NAMES):
        return BAD
    if "hang" in raw:
        r.bad((*path, "fault"), "fault or hang", "both", "a step answers one way", at_key=True)
        return BAD
    return name


def keep_alive(r: Reader, raw: dict[str, Any], path: Path) -> Any:
    if "keep_alive" not in raw:
        return None
    where = (*path, "keep_alive")
    value = raw["keep_alive"]
    shape = "{close_after: true}, {stale_after_ms: MS, stale: close|drop_next} or {max_requests: N}"
    if not isinstance(value, dict) or not value:
        r.bad(where, shape, describe(value))
        return BAD
    if not r.keys(value, where, KEEP_ALIVE_KEYS):
        return BAD
    for other in ("fault", "hang"):
        if other in raw:
            r.bad(
                where,
                f"keep_alive or {other}",
                "both",
                "a fault closes the connection itself",
                at_key=True,
            )
            return BAD
    close_after = value.get("close_after", False)
    if close_after is not True and "close_after" in value:
        r.bad((*where, "close_after"), "true", describe(close_after))
        return BAD
    stale_after = None
    if "stale_after_ms" in value:
        stale_after = r.integer(
            value, "stale_after_ms", where, default=0, minimum=0, maximum=r.max_delay_ms, unit="ms"
        )
        if stale_after is None:
            return BAD
    stale = value.get("stale", "close")
    if "stale" in value:
        if stale_after is None:
            r.bad((*where, "stale"), "stale_after_ms beside stale", "stale alone", at_key=True)
            return BAD
        if not r.among(stale, (*where, "stale"), STALE_MODES):
            return BAD
    max_requests = None
    if "max_requests" in value:
        max_requests = r.integer(
            value, "max_requests", where, default=1, minimum=1, maximum=1_000_000
        )
        if max_requests is None:
            return BAD
    return KeepAlive(bool(close_after), stale_after, stale, max_requests)
