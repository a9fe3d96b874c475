"""JSON Schema as Markdown a person reads: a table of keys per object, a section per definition.

Used by reference_pages.py for the scenario and descriptor schemas and for the
schemas of the OpenAPI document. A ``$ref`` becomes a link to its
definition's section on the same page; a reference into a definition
(``#/$defs/step/properties/error``) links to the definition and shows what it
points at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

Schema = Mapping[str, Any]

DEFINITION_HOLDERS = ("$defs", "definitions", "schemas")
"""The keys under which a document keeps its named schemas (the last: OpenAPI's components)."""

CONSTRAINTS = {
    "minimum": ">= {}",
    "exclusiveMinimum": "> {}",
    "maximum": "<= {}",
    "exclusiveMaximum": "< {}",
    "minLength": "length >= {}",
    "maxLength": "length <= {}",
    "minItems": ">= {} items",
    "maxItems": "<= {} items",
    "minProperties": ">= {} keys",
    "maxProperties": "<= {} keys",
    "pattern": "matching `{}`",
    "format": "format {}",
}


class SchemaDocument:
    """A JSON document holding schemas, rendered piece by piece with its references resolved."""

    def __init__(self, document: Schema) -> None:
        self.document = document

    def resolve(self, ref: str) -> Schema:
        """The schema a local ``$ref`` points at (a JSON pointer into this document)."""
        if not ref.startswith("#/"):
            raise ValueError(f"only local references are rendered, not {ref!r}")
        node: Any = self.document
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node  # type: ignore[no-any-return]

    def definition(self, ref: str) -> tuple[str, str]:
        """``(name, label)`` of a reference: the definition it is in and how to show it."""
        parts = ref[2:].split("/")
        for at, part in enumerate(parts[:-1]):
            if part in DEFINITION_HOLDERS:
                name = parts[at + 1]
                rest = [p for p in parts[at + 2 :] if p != "properties"]
                return name, ".".join([name, *rest])
        return parts[-1], parts[-1]

    def link(self, ref: str) -> str:
        name, label = self.definition(ref)
        return f"[`{label}`](#{anchor(name)})"

    def kind(self, schema: Schema) -> str:
        """What a value must be, in a few words: types, enums, references, constraints."""
        if "$ref" in schema:
            return self.link(schema["$ref"])
        words: list[str] = []
        if "const" in schema:
            words.append(f"`{json.dumps(schema['const'])}`")
        if "enum" in schema:
            words.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"]))
        for combiner, joiner in (("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")):
            if combiner in schema:
                words.append(joiner.join(self.kind(part) for part in schema[combiner]))
        types = schema.get("type")
        if isinstance(types, str):
            types = [types]
        if types and not {"enum", "const"} & schema.keys():
            words.append(" or ".join(self.typed(t, schema) for t in types))
        if not words and "required" in schema:  # an alternative that asks for keys only
            words.append("with " + " and ".join(f"`{key}`" for key in schema["required"]))
        constraints = [
            text.format(schema[key]) for key, text in CONSTRAINTS.items() if key in schema
        ]
        if constraints:
            words.append(", ".join(constraints))
        if "default" in schema:
            words.append(f"default `{json.dumps(schema['default'])}`")
        return "; ".join(words) or "any value"

    def typed(self, name: str, schema: Schema) -> str:
        if name == "array" and isinstance(schema.get("items"), Mapping):
            return f"array of {self.kind(schema['items'])}"
        extra = schema.get("additionalProperties")
        if name == "object" and isinstance(extra, Mapping) and "properties" not in schema:
            return f"map of {self.kind(extra)}"
        return name

    def description(self, schema: Schema) -> str:
        if "description" in schema:
            return str(schema["description"])
        if "$ref" in schema:
            return self.description(self.resolve(schema["$ref"]))
        return ""

    def rows(self, schema: Schema, prefix: str = "") -> Iterator[str]:
        """One table row per key of an object schema; an inline object's keys follow, dotted."""
        required = set(schema.get("required", ()))
        for key, sub in schema.get("properties", {}).items():
            name = f"`{prefix}{key}`" + (" (required)" if key in required else "")
            yield f"| {name} | {cell(self.kind(sub))} | {cell(self.description(sub))} |"
            if "properties" in sub and "$ref" not in sub:
                yield from self.rows(sub, f"{prefix}{key}.")

    def table(self, schema: Schema) -> str:
        if not schema.get("properties"):
            return ""
        lines = ["| key | value | what it is |", "|---|---|---|", *self.rows(schema)]
        if schema.get("additionalProperties") is False:
            lines.append("")
            lines.append("No other key is allowed.")
        return "\n".join(lines)

    def section(self, schema: Schema) -> str:
        """A schema's description, what it is, and its keys' table (and each alternative's)."""
        parts = [self.description(schema)] if "description" in schema else []
        if "properties" not in schema or {"oneOf", "anyOf"} & schema.keys():
            parts.append(f"**Value:** {self.kind(schema)}")
        parts.append(self.table(schema))
        for combiner in ("oneOf", "anyOf"):
            for number, alternative in enumerate(schema.get(combiner, ()), 1):
                if alternative.get("properties"):
                    parts.append(f"Alternative {number}:\n\n{self.table(alternative)}")
        return "\n\n".join(part for part in parts if part)

    def definitions(self, holder: Schema, level: int) -> str:
        """A section per named schema, in the document's order, each with its anchor."""
        return "\n\n".join(
            f"{'#' * level} `{name}` {{#{anchor(name)}}}\n\n{self.section(schema)}"
            for name, schema in holder.items()
        )


def anchor(name: str) -> str:
    return "schema-" + name.replace("_", "-").lower()


def cell(text: str) -> str:
    """Text fit for a table cell: one line, and a ``|`` outside code spans escaped."""
    pieces = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(pieces))
