"""The JSON Schema of scenario files, as shipped for editors and other tools.

This module owns access to ``scenario.schema.json`` (draft 2020-12), which
sits at the top of the package, ``mockskill/scenario.schema.json``: the path
docs/scenarios.md gives editors, kept when this module moved into ``scenario/``.
The schema describes one scenario document for editors (e.g.
``# yaml-language-server: $schema=...``); the loader remains the authority,
and checks a few things a schema cannot (unique names across files, ``name``
in multi-document files, Werkzeug rule syntax).
``tests/scenario/test_schema.py`` keeps the two in step; :func:`disagreements`
says where the schema's lists of step kinds, faults, TLS faults and delay
shapes differ from their declaration (:mod:`.kinds`), and a stream's faults and formats
from the model's, which
``tests/scenario/test_kinds.py`` holds at none.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from . import kinds
from .model import STREAM_FAULTS, STREAM_FORMATS

SCHEMA_PATH: Path = Path(__file__).resolve().parent.parent / "scenario.schema.json"
"""Where the schema file is, inside the installed package."""


def scenario_schema() -> dict[str, Any]:
    """The scenario JSON Schema, freshly parsed (callers may change their copy)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    if not isinstance(schema, dict):  # pragma: no cover - the file ships with the package
        raise TypeError(f"{SCHEMA_PATH} does not hold a JSON object")
    return schema


def disagreements(schema: dict[str, Any]) -> list[str]:
    """Where *schema* lists step kinds, faults, TLS faults or delay shapes other than :mod:`.kinds`
    declares them, or a stream's faults and formats other than the model does (empty when
    it agrees): each entry says where, what is written, what is declared."""
    defs = schema.get("$defs", {})
    found: list[str] = []

    def compare(where: str, written: Any, declared: Any) -> None:
        if written != declared:
            found.append(f"{where}: {written!r}, declared {declared!r}")

    fault = defs.get("step", {}).get("properties", {}).get("fault", {})
    compare("$defs.step.properties.fault.enum", fault.get("enum"), list(kinds.FAULT_NAMES))
    described = fault.get("description", "")
    compare(
        "$defs.step.properties.fault.description (the faults it names)",
        [name for name in kinds.FAULT_NAMES if name in described],
        list(kinds.FAULT_NAMES),
    )
    tls = defs.get("skill", {}).get("properties", {}).get("tls", {})
    compare("$defs.skill.properties.tls.enum", tls.get("enum"), [*kinds.TLS_FAULT_NAMES, None])
    step_delay = defs.get("step", {}).get("properties", {}).get("delay", {})
    written = kinds.listed(shape.written for shape in kinds.SHAPES)
    compare(
        "$defs.step.properties.delay.description (the shapes it names)",
        written in step_delay.get("description", ""),
        True,
    )
    compare(
        "$defs.delay.oneOf (the shapes)",
        [form["$ref"] for form in defs.get("delay", {}).get("oneOf", []) if "$ref" in form],
        [f"#/$defs/delay_{name}" for name in kinds.SHAPE_NAMES],
    )
    for name in kinds.SHAPE_NAMES:
        form = defs.get(f"delay_{name}", {})
        compare(f"$defs.delay_{name}.required", form.get("required"), [name])
        compare(f"$defs.delay_{name}.properties", list(form.get("properties", {})), [name])
    for shape in kinds.SHAPES:
        if shape.params:
            params = defs.get(shape.name, {})
            compare(
                f"$defs.{shape.name}.properties",
                list(params.get("properties", {})),
                [p.name for p in shape.params],
            )
            compare(
                f"$defs.{shape.name}.required",
                params.get("required"),
                [p.name for p in shape.params if p.required],
            )
    rules = defs.get("step_rules", {}).get("allOf", [{}, {}])
    compare(
        "$defs.step_rules.allOf[0].anyOf (a step's kinds)",
        rules[0].get("anyOf"),
        [{"required": [kind.name]} for kind in kinds.STEP_KINDS],
    )
    compare(
        "$defs.step_rules.allOf[1].not.anyOf (one body kind)",
        rules[1].get("not", {}).get("anyOf") if len(rules) > 1 else None,
        [{"required": list(pair)} for pair in itertools.combinations(kinds.BODY_KINDS, 2)],
    )
    stream_kind = defs.get("stream_fault", {}).get("properties", {}).get("kind", {})
    compare("$defs.stream_fault.properties.kind.enum", stream_kind.get("enum"), list(STREAM_FAULTS))
    compare(
        "$defs.stream_fault.properties.kind.description (the faults it names)",
        [name for name in STREAM_FAULTS if name in stream_kind.get("description", "")],
        list(STREAM_FAULTS),
    )
    stream_format = defs.get("stream", {}).get("properties", {}).get("format", {})
    compare(
        "$defs.stream.properties.format.anyOf[0].enum",
        stream_format.get("anyOf", [{}])[0].get("enum"),
        list(STREAM_FORMATS),
    )
    step_keys = defs.get("step", {}).get("properties", {})
    compare(
        "$defs.step.properties (the kinds among them)",
        [kind.name for kind in kinds.STEP_KINDS if kind.name in step_keys],
        [kind.name for kind in kinds.STEP_KINDS],
    )
    return found
