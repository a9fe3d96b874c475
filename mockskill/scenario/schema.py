"""The JSON Schema of scenario files, as shipped for editors and other tools.

This module owns access to ``scenario.schema.json`` (draft 2020-12), which
sits at the top of the package, ``mockskill/scenario.schema.json``: the path
docs/scenarios.md gives editors, kept when this module moved into ``scenario/``.
The schema describes one scenario document for editors (e.g.
``# yaml-language-server: $schema=...``); the loader remains the authority,
and checks a few things a schema cannot (unique names across files, ``name``
in multi-document files, Werkzeug rule syntax).
``tests/scenario/test_schema.py`` keeps the two in step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_PATH: Path = Path(__file__).resolve().parent.parent / "scenario.schema.json"
"""Where the schema file is, inside the installed package."""


def scenario_schema() -> dict[str, Any]:
    """The scenario JSON Schema, freshly parsed (callers may change their copy)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    if not isinstance(schema, dict):  # pragma: no cover - the file ships with the package
        raise TypeError(f"{SCHEMA_PATH} does not hold a JSON object")
    return schema
