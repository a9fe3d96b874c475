"""Delay shapes: how long a step waits, drawn per request from the seeded generator.

A delay is written in milliseconds, as a number (fixed) or as a mapping with
one shape, declared in :mod:`.kinds` (``{fixed: 250}``, ``{uniform: [100, 300]}``,
``{lognormal: {median: 200, sigma: 0.8, cap: 5000}}``); this module reads each
and draws from it. A lognormal draw over ``cap`` is drawn again (never
clamped, which would pile the tail up at the cap). Without ``cap``, the
longest delay a scenario may ask for is the cap.

A delay that could exceed the configured maximum is refused at load.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import kinds
from .problems import Path, describe, did_you_mean
from .reader import Reader

WRITTEN = kinds.listed(s.written for s in kinds.SHAPES)
"""The shapes as a problem lists them."""
_LOGNORMAL = kinds.shape("lognormal").params
LOGNORMAL_KEYS = tuple(p.name for p in _LOGNORMAL)
LOGNORMAL_REQUIRED = tuple(p.name for p in _LOGNORMAL if p.required)

MAX_REDRAWS = 1000
"""Draws of a capped lognormal before giving up (at cap): about never reached."""


class Delay(Protocol):
    """A delay shape: what it is called, and a draw in milliseconds."""

    def draw(self, rng: random.Random) -> float: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Fixed:
    """Always *ms* milliseconds."""

    ms: int

    def draw(self, rng: random.Random) -> float:
        return float(self.ms)

    def describe(self) -> str:
        return f"{self.ms} ms"


@dataclass(frozen=True)
class Uniform:
    """Any of *low* to *high* milliseconds, all as likely."""

    low: int
    high: int

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)

    def describe(self) -> str:
        return f"uniform {self.low}-{self.high} ms"


@dataclass(frozen=True)
class LogNormal:
    """Lognormal around *median* ms with *sigma*; a draw above *cap* is drawn again."""

    median: float
    sigma: float
    cap: float

    def draw(self, rng: random.Random) -> float:
        mu = math.log(self.median)
        for _ in range(MAX_REDRAWS):
            value = rng.lognormvariate(mu, self.sigma)
            if value <= self.cap:
                return value
        return self.cap

    def describe(self) -> str:
        return f"lognormal median {self.median} ms, sigma {self.sigma}, cap {self.cap} ms"


def read_delay(r: Reader, value: Any, path: Path, maximum: int) -> Delay | None:
    """A delay from YAML (a number of ms, or ``{shape: ...}``); None after a problem."""
    if isinstance(value, dict) and len(value) == 1:
        ((shape, args),) = value.items()
        reader = SHAPES.get(shape)
        if reader is not None:
            return reader(r, args, (*path, shape), maximum)
    if isinstance(value, dict):
        hint = did_you_mean(str(next(iter(value), "")), SHAPES) if len(value) == 1 else ""
        r.bad(path, f"one delay shape: {WRITTEN}", describe(value), hint)
        return None
    return _fixed(r, value, path, maximum)


def _fixed(r: Reader, value: Any, path: Path, maximum: int) -> Fixed | None:
    ms = r.number_at(value, path, minimum=0, maximum=maximum, unit="ms")
    return None if ms is None else Fixed(ms)


def _uniform(r: Reader, value: Any, path: Path, maximum: int) -> Uniform | None:
    if not (isinstance(value, list) and len(value) == 2):
        r.bad(path, "[MIN, MAX] in ms", describe(value))
        return None
    low = r.number_at(value[0], (*path, 0), minimum=0, maximum=maximum, unit="ms")
    high = r.number_at(value[1], (*path, 1), minimum=0, maximum=maximum, unit="ms")
    if low is None or high is None:
        return None
    if low > high:
        r.bad(path, "MIN no larger than MAX", f"[{low}, {high}]")
        return None
    return Uniform(low, high)


def _lognormal(r: Reader, value: Any, path: Path, maximum: int) -> LogNormal | None:
    if not isinstance(value, dict):
        r.bad(path, "{median: MS, sigma: S, cap: MS}", describe(value))
        return None
    if not r.keys(value, path, LOGNORMAL_KEYS, required=LOGNORMAL_REQUIRED):
        return None
    median = r.number_at(value["median"], (*path, "median"), minimum=1, maximum=maximum, unit="ms")
    sigma = value["sigma"]
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not 0 < sigma <= 5:
        r.bad((*path, "sigma"), "a number above 0, at most 5", describe(sigma))
        return None
    cap = value.get("cap", maximum)
    cap_ms = r.number_at(cap, (*path, "cap"), minimum=1, maximum=maximum, unit="ms")
    if median is None or cap_ms is None:
        return None
    if cap_ms < median:
        r.bad((*path, "cap"), f"a cap of at least the median ({median} ms)", describe(cap))
        return None
    return LogNormal(float(median), float(sigma), float(cap_ms))


SHAPES: dict[str, Callable[[Reader, Any, Path, int], Delay | None]] = kinds.implemented(
    kinds.SHAPE_NAMES, _fixed, _uniform, _lognormal
)
"""Each declared shape's reader, by name."""
