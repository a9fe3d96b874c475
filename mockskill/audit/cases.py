"""Named cases in the audit: which a session was served, and how its consumer took them.

A failure pack (``mockskill generate``) names a case for every way a skill can fail;
its gate asks that the consumer met each and handled each. Per session, of the skills it
requested, :func:`case_coverage` says which named cases it was served
(``Entry.case``, read by name through the scenarios' :data:`NamedCases`), and makes a
gap of each one never served (``case-unexercised``) and each one whose answer is an
attempt of a finding (``case-mishandled``: the finding says what the consumer did
wrong). The gates read the gaps as :data:`CASES_ROW` and its two rule names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine.state import Entry
from ..scenario.model import Skill
from .findings import Finding

NamedCases = Mapping[tuple[str, str, int], str]
"""A case's name by its skill's id, its endpoint (``describe``, ``invoke``) and its index,
as the journal names a case (``Entry.skill``, ``Entry.endpoint``, ``Entry.case``)."""

CASES_ROW = "CASES"
"""The gates' name (``--require CASES``) for every named case served and none mishandled."""
UNEXERCISED = "case-unexercised"
MISHANDLED = "case-mishandled"
CASE_ROWS: tuple[str, ...] = (CASES_ROW, UNEXERCISED, MISHANDLED)
"""Every name the gates know for the named cases (one kind of gap each, or both)."""

_FIX = {
    UNEXERCISED: "add a test that sends Mockskill-Case: {case} to skill {skill!r} (or play"
    " the pack's cases in order) and asserts what the consumer does with that answer",
    MISHANDLED: "handle the {case} answer as the finding's fix says: {fixes}",
}


def named_cases(skills: Iterable[Skill]) -> dict[tuple[str, str, int], str]:
    """The named cases of *skills*, as :data:`NamedCases`."""
    named: dict[tuple[str, str, int], str] = {}
    for skill in skills:
        for kind, cases in (("describe", skill.describe_cases), ("invoke", skill.invoke_cases)):
            for case in cases:
                if case.name is not None:
                    named[(skill.id, kind, case.index)] = case.name
    return named


def case_coverage(
    entries: Sequence[Entry], named: NamedCases, findings: Sequence[Finding]
) -> dict[str, Any]:
    """The named cases of the skills *entries* requested: how often each was served
    (``served``: ``{skill: {case: count}}``, in the order written), and a gap per case
    never served or mishandled (``gaps``: rule, skill, case, what, fix, attempts)."""
    used = {e.skill for e in entries if e.skill is not None}
    served: dict[str, dict[str, int]] = {}
    for (skill, _kind, _index), name in named.items():
        if skill in used:
            served.setdefault(skill, {})[name] = 0
    if not served:
        return {"served": {}, "gaps": []}
    answered: dict[int, tuple[str, str]] = {}  # entry id: (skill, case) that answered it
    for entry in entries:
        if entry.case is None or entry.skill is None:
            continue
        case = named.get((entry.skill, entry.endpoint, entry.case))
        if case is not None:
            served[entry.skill][case] += 1
            answered[entry.id] = (entry.skill, case)
    gaps: list[dict[str, Any]] = []
    for skill, counts in served.items():
        for name, count in counts.items():
            if not count:
                gaps.append(_gap(UNEXERCISED, skill, name, [], "never served in this session"))
    drew: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        for attempt in finding.attempts:
            drawn = answered.get(attempt)
            if drawn is not None and finding not in drew.get(drawn, []):
                drew.setdefault(drawn, []).append(finding)
    for (skill, name), found in drew.items():
        rules = ", ".join(dict.fromkeys(f.rule for f in found))
        attempts = sorted({a for f in found for a in f.attempts})
        gap = _gap(MISHANDLED, skill, name, attempts, f"its answer drew {rules}")
        gap["fix"] = _FIX[MISHANDLED].format(
            case=name, fixes="; ".join(dict.fromkeys(f.fix for f in found))
        )
        gaps.append(gap)
    return {"served": served, "gaps": gaps}


def _gap(rule: str, skill: str, case: str, attempts: list[int], what: str) -> dict[str, Any]:
    return {
        "rule": rule,
        "skill": skill,
        "case": case,
        "message": f"case {case!r} of skill {skill!r}: {what}",
        "fix": _FIX[rule].format(case=case, skill=skill, fixes=""),
        "attempts": attempts,
    }


def gap_name(gap: Mapping[str, Any]) -> str:
    """How the gates list a gap: ``case-unexercised:translate/AUTH_REQUIRED``."""
    return f"{gap['rule']}:{gap['skill']}/{gap['case']}"
