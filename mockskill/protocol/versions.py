"""Protocol versions: parsing them, and which consumer versions a skill accepts.

The rule (documented in docs/scenarios.md, "Protocol versions"): versions are
semantic (``MAJOR.MINOR.PATCH``), and a consumer is compatible with a
descriptor of the same major version — unless the skill states the consumer
versions it accepts as a range. A range is one or more alternatives joined
by ``||``; each alternative is an x-range (``1.x``, ``1.2.x``, ``1.x.x``),
an exact version, or comparators joined by spaces (``>=1.2.0 <3.0.0``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

Version = tuple[int, int, int]

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:[-+][0-9A-Za-z.+-]*)?")
# A range's patterns are compiled by re (and kept in its cache) when the first range is
# read, not at import: serving the bundled scenarios reads none.
_PARTIAL = r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*|[xX*]))?(?:\.(0|[1-9][0-9]*|[xX*]))?"
_COMPARATOR = r"\s*(>=|<=|>|<|=)?\s*([^\s<>=]+)\s*"
_OPERATORS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
}


def parse_version(text: str) -> Version | None:
    """``"1.4.0"`` → ``(1, 4, 0)`` (pre-release and build parts are ignored); None if not one."""
    match = _VERSION.fullmatch(text.strip())
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


@dataclass(frozen=True)
class Range:
    """Consumer versions a skill accepts: alternatives, each a list of comparisons."""

    text: str
    alternatives: tuple[tuple[tuple[str, Version], ...], ...]

    def __contains__(self, version: Version) -> bool:
        return any(
            all(_OPERATORS[op](version, bound) for op, bound in alternative)
            for alternative in self.alternatives
        )

    @classmethod
    def same_major(cls, version: Version) -> Range:
        """The default: every version of *version*'s major."""
        major = version[0]
        bounds = ((">=", (major, 0, 0)), ("<", (major + 1, 0, 0)))
        return cls(f"{major}.x.x", (bounds,))

    @classmethod
    def parse(cls, text: str) -> Range | None:
        """A range from its text; None when it is not one."""
        alternatives = []
        for part in text.split("||"):
            comparisons = _alternative(part.strip())
            if not comparisons:
                return None
            alternatives.append(comparisons)
        return cls(text.strip(), tuple(alternatives))


def _alternative(text: str) -> tuple[tuple[str, Version], ...]:
    partial = re.fullmatch(_PARTIAL, text)
    if partial is not None and not (partial[2] and partial[3] and partial[3] not in "xX*"):
        return _x_range(partial)
    comparisons, end = [], 0
    for match in re.finditer(_COMPARATOR, text):
        version = parse_version(match[2])
        if version is None or match.start() != end:
            return ()
        comparisons.append((match[1] or "=", version))
        end = match.end()
    return tuple(comparisons) if end == len(text) else ()


def _x_range(match: re.Match[str]) -> tuple[tuple[str, Version], ...]:
    major = int(match[1])
    if match[2] is None or match[2] in "xX*":
        return ((">=", (major, 0, 0)), ("<", (major + 1, 0, 0)))
    minor = int(match[2])
    return ((">=", (major, minor, 0)), ("<", (major, minor + 1, 0)))
