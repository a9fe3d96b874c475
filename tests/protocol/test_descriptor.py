"""The Skill Descriptor: a valid default, merged overrides, the chapter's invalid example."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from mockskill.protocol import descriptor
from mockskill.protocol.catalog import BASE_URL
from mockskill.protocol.descriptor import chapter_invalid, default, merge

SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


# -- the default ------------------------------------------------------------------------


@pytest.mark.parametrize("skill_id", ["translate", "web-search", "a_b.c~d"])
def test_the_default_descriptor_looks_valid(skill_id: str) -> None:
    doc = default(skill_id)
    assert SEMVER.match(doc["protocol_version"])
    assert doc["id"] == skill_id
    assert isinstance(doc["name"], str)
    assert doc["name"].strip()
    assert doc["capability_type"] in {"plugin", "api", "knowledge", "task"}
    assert doc["endpoint"]["url"] == f"{BASE_URL}/skills/{skill_id}/invoke"
    assert doc["auth"]["type"] == "none"


def test_the_default_speaks_protocol_version_one() -> None:
    # The chapter's VERSION_INCOMPATIBLE example has a 2.0.0 descriptor refused
    # by a 1.x consumer: a default must be one a 1.x consumer accepts.
    assert default("x")["protocol_version"].startswith("1.")


def test_the_capability_types_are_the_chapters_four() -> None:
    assert set(descriptor.CAPABILITY_TYPES) == {"plugin", "api", "knowledge", "task"}


def test_the_default_is_json() -> None:
    doc = default("translate")
    assert json.loads(json.dumps(doc)) == doc


def test_each_call_returns_a_fresh_default() -> None:
    first = default("x")
    first["endpoint"]["url"] = "changed"
    assert default("x")["endpoint"]["url"] == f"{BASE_URL}/skills/x/invoke"


def test_descriptor_and_invoke_urls_follow_the_documented_layout() -> None:
    assert descriptor.descriptor_url("translate") == f"{BASE_URL}/skills/translate"
    assert descriptor.invoke_url("translate") == f"{BASE_URL}/skills/translate/invoke"


# -- merge ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "override", "merged"),
    [
        pytest.param({"a": 1}, {}, {"a": 1}, id="empty-override"),
        pytest.param({"a": 1}, {"b": 2}, {"a": 1, "b": 2}, id="adds"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="replaces-scalar"),
        pytest.param(
            {"e": {"url": "u", "method": "POST"}},
            {"e": {"method": "PUT"}},
            {"e": {"url": "u", "method": "PUT"}},
            id="merges-nested",
        ),
        pytest.param(
            {"a": {"b": {"c": 1, "d": 2}}},
            {"a": {"b": {"d": 3}}},
            {"a": {"b": {"c": 1, "d": 3}}},
            id="merges-deeply",
        ),
        pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="null-removes"),
        pytest.param(
            {"e": {"url": "u", "method": "POST"}},
            {"e": {"url": None}},
            {"e": {"method": "POST"}},
            id="nested-null-removes",
        ),
        pytest.param({"a": 1}, {"zz": None}, {"a": 1}, id="null-on-missing-key"),
        pytest.param(
            {"a": 1},
            {"n": {"x": None, "y": 1}},
            {"a": 1, "n": {"y": 1}},
            id="null-inside-a-new-mapping-removes",
        ),
        pytest.param(
            {"a": "text"},
            {"a": {"x": None, "y": 1}},
            {"a": {"y": 1}},
            id="null-inside-a-mapping-over-a-string-removes",
        ),
        pytest.param({"t": [1, 2, 3]}, {"t": [4]}, {"t": [4]}, id="lists-replace"),
        pytest.param({"t": [1, 2]}, {"t": []}, {"t": []}, id="empty-list-replaces"),
        pytest.param({"a": "none"}, {"a": {"type": "x"}}, {"a": {"type": "x"}}, id="map-over-str"),
        pytest.param({"a": {"type": "x"}}, {"a": "none"}, {"a": "none"}, id="str-over-map"),
        pytest.param({"a": {"b": 1}}, {"a": {}}, {"a": {"b": 1}}, id="empty-map-keeps"),
        pytest.param({"a": 1}, {"a": False}, {"a": False}, id="false-is-not-null"),
        pytest.param({"a": 1}, {"a": 0}, {"a": 0}, id="zero-is-not-null"),
    ],
)
def test_merge(base: dict[str, Any], override: dict[str, Any], merged: dict[str, Any]) -> None:
    assert merge(base, override) == merged


def test_merge_leaves_its_inputs_alone() -> None:
    base = {"e": {"url": "u", "method": "POST"}, "tags": ["a"]}
    override = {"e": {"url": None}, "tags": ["b", "c"], "new": {"x": [1]}}
    base_before, override_before = copy.deepcopy(base), copy.deepcopy(override)
    merge(base, override)
    assert base == base_before
    assert override == override_before


def test_the_merged_result_shares_nothing_with_its_inputs() -> None:
    base = {"e": {"url": "u"}, "keep": {"k": [1]}}
    override = {"tags": ["b"], "new": {"x": [1]}}
    out = merge(base, override)
    out["e"]["url"] = "changed"
    out["keep"]["k"].append(2)
    out["tags"].append("c")
    out["new"]["x"].append(2)
    assert base == {"e": {"url": "u"}, "keep": {"k": [1]}}
    assert override == {"tags": ["b"], "new": {"x": [1]}}


def test_merge_over_the_default_breaks_one_field_only() -> None:
    broken = merge(default("translate"), {"auth": {"type": None}})
    expected = default("translate")
    expected["auth"] = {}
    assert broken == expected


# -- the chapter's invalid example ------------------------------------------------------------


def test_chapter_invalid_has_an_unknown_capability_type() -> None:
    doc = chapter_invalid("translate")
    assert doc["capability_type"] == "unknown_type"
    assert doc["capability_type"] not in descriptor.CAPABILITY_TYPES


def test_chapter_invalid_has_no_endpoint_url() -> None:
    doc = chapter_invalid("translate")
    assert "url" not in doc.get("endpoint", {})


def test_chapter_invalid_is_otherwise_the_default() -> None:
    doc = chapter_invalid("translate")
    valid = default("translate")
    for key in ("capability_type", "endpoint"):
        doc.pop(key)
        valid.pop(key)
    assert doc == valid
