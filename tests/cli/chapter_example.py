"""The error chapter's own VALIDATION_ERROR example: the violations of a descriptor whose
capability_type is ``unknown_type`` and whose endpoint has no url, as the chapter words
them. ``check-descriptor`` and ``generate`` each print them so (tests/cli)."""

from __future__ import annotations

from typing import Any

CHAPTER_VIOLATIONS: list[dict[str, Any]] = [
    {
        "field": "/capability_type",
        "expected": "one of: plugin, api, knowledge, task",
        "actual": "unknown_type",
        "message": "Invalid enum value",
    },
    {
        "field": "/endpoint/url",
        "expected": "string (URI format)",
        "actual": None,
        "message": "Required field is missing",
    },
]
