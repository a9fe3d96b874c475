"""The audit's rules, named once: every rule documented where its link points."""

from __future__ import annotations

import re
from pathlib import Path

from mockskill.audit.rules import AUDIT_DOCS, CATALOGUE, RULES

AUDIT_MD = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def anchor(heading: str) -> str:
    """The anchor GitHub (and MkDocs' toc) gives a heading: lower case, punctuation out,
    spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_each_rule_links_to_a_section_of_docs_audit_md() -> None:
    headings = re.findall(r"^#{2,4} (.+)$", AUDIT_MD.read_text(encoding="utf-8"), re.MULTILINE)
    anchors = {anchor(h) for h in headings}
    for rule in CATALOGUE:
        assert rule.section in anchors, (rule.id, rule.section)
        assert rule.help_uri == f"{AUDIT_DOCS}#{rule.section}"


def test_each_rule_has_a_title_a_when_and_a_fix_of_its_own() -> None:
    assert len(set(RULES)) == len(RULES)
    for field in ("title", "when", "fix"):
        said = [getattr(rule, field) for rule in CATALOGUE]
        assert all(s and s[0].isupper() for s in said), field
        assert len(set(said)) == len(said), field


def test_the_anchor_is_the_one_github_makes() -> None:
    assert anchor('Not retryable, and what "unchanged" means') == (
        "not-retryable-and-what-unchanged-means"
    )
    assert anchor("Tasks: how a consumer waits") == "tasks-how-a-consumer-waits"
