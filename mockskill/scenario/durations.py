"""Durations written with their unit (``500ms``, ``1s``, ``1.5s``, ``5m``) → whole milliseconds.

A task's timings (its phases' ``for:``, ``poll_after``, ``ttl``, a cancel's ``settle``)
are read here. They are spans a person thinks of in seconds and minutes, so they carry
their unit; a bare number is refused rather than guessed at (``5`` could be 5 ms or 5 s),
while a step's ``delay`` keeps its plain milliseconds. The unit is what HTTP and the
protocol's fields end in (``Retry-After`` in seconds, ``poll_after_ms``); the model holds
milliseconds.
"""

from __future__ import annotations

import re
from typing import Any

from .problems import Path, describe
from .reader import Reader

UNITS: dict[str, int] = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
"""Each unit a duration may end in, and its milliseconds."""
WRITTEN = "a duration with its unit: 500ms, 1s, 1.5s, 5m"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def read_duration(
    r: Reader, value: Any, path: Path, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    """*value* (at *path*) in whole milliseconds, from *minimum* to *maximum*; None (with a
    problem recorded) when it is not a duration or out of bounds."""
    bounds = _bounds(minimum, maximum)
    if isinstance(value, str):
        text = value.strip()
        match = _DURATION.fullmatch(text)
        if match is None:
            hint = "a duration is never negative" if text.startswith("-") else _unit_hint(text)
            r.bad(path, f"{WRITTEN} ({bounds})", describe(value), hint)
            return None
        number, unit = match.groups()
        exact = float(number) * UNITS[unit]
        ms = round(exact)
        if abs(exact - ms) > 1e-6:
            r.bad(path, f"{WRITTEN} ({bounds})", describe(value), "a whole number of ms")
            return None
        if ms < minimum or (maximum is not None and ms > maximum):
            hint = "longer spans are refused, not clamped" if maximum is not None else ""
            if ms < minimum and minimum == 1:
                hint = "a span of nothing never happens: give it a length, or leave it out"
            r.bad(path, f"{WRITTEN} ({bounds})", describe(value), hint)
            return None
        return ms
    hint = ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        hint = f"write the unit: {value}ms or {value}s"
        if value < 0:
            hint = "a duration is never negative"
    r.bad(path, f"{WRITTEN} ({bounds})", describe(value), hint)
    return None


def _bounds(minimum: int, maximum: int | None) -> str:
    low = "more than 0" if minimum == 1 else f"at least {shown(minimum)}"
    return low if maximum is None else f"{low}, at most {shown(maximum)}"


def shown(ms: int) -> str:
    """*ms* written back as a duration, in the largest unit that keeps it whole."""
    for unit, size in sorted(UNITS.items(), key=lambda item: -item[1]):
        if ms % size == 0 and ms >= size:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _unit_hint(text: str) -> str:
    units = ", ".join(UNITS)
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return f"write the unit: {text}ms or {text}s"
    return f"units: {units}"
