"""The reference pages made at build time from the files the code uses, so none goes stale.

An MkDocs hook (mkdocs.yml's ``hooks:``): the JSON Schemas of a scenario and of
a skill descriptor (``mockskill/*.schema.json``) and the admin API's OpenAPI
document (``mockskill/admin/openapi.json``) each become a page under
``reference/``, with the file itself beside it to download.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from schema_markdown import Schema, SchemaDocument, cell

SCHEMAS = {
    "reference/scenario-schema.md": "mockskill/scenario.schema.json",
    "reference/descriptor-schema.md": "mockskill/descriptor.schema.json",
}
OPENAPI = ("reference/admin-api.md", "mockskill/admin/openapi.json")
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).resolve().parent
    pages: dict[str, tuple[str, Callable[[Schema, str, str], str]]]
    pages = {page: (source, schema_page) for page, source in SCHEMAS.items()}
    pages[OPENAPI[0]] = (OPENAPI[1], openapi_page)
    for page, (source, render) in pages.items():
        download = f"reference/{Path(source).name}"
        document = json.loads((root / source).read_text())
        text = render(document, source, Path(download).name)
        files.append(File.generated(config, page, content=text))
        files.append(File.generated(config, download, abs_src_path=str(root / source)))
    return files


def schema_page(schema: Schema, source: str, download: str) -> str:
    document = SchemaDocument(schema)
    parts = [
        f"# {schema.get('title', source)}",
        f"Made from [`{source}`]({download}) (JSON Schema {dialect(schema)}) at build time. "
        "Each key links to the definition it takes.",
        "## The document",
        document.section(schema),
    ]
    for holder in ("$defs", "definitions"):
        if holder in schema:
            parts += ["## Definitions", document.definitions(schema[holder], 3)]
    return "\n\n".join(parts) + "\n"


def dialect(schema: Schema) -> str:
    url = str(schema.get("$schema", ""))
    return url.split("/schema")[0].rsplit("/", 1)[-1] or "draft"


def openapi_page(spec: Schema, source: str, download: str) -> str:
    document = SchemaDocument(spec)
    info = spec["info"]
    parts = [
        f"# {info['title']}",
        f"Made from [`{source}`]({download}) (OpenAPI {spec['openapi']}) at build time; "
        f"version {info['version']}. The same document is served at `/__admin/openapi.json`.",
        info.get("description", ""),
    ]
    tags = [tag["name"] for tag in spec.get("tags", ())]
    described = {tag["name"]: tag.get("description", "") for tag in spec.get("tags", ())}
    by_tag: dict[str, list[str]] = {tag: [] for tag in tags}
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append(operation_section(document, method, path, item))
    for tag, sections in by_tag.items():
        if sections:
            parts += [f"## {tag}", described.get(tag, ""), *sections]
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        parts += ["## Schemas", document.definitions(schemas, 3)]
    return "\n\n".join(part for part in parts if part) + "\n"


def operation_section(document: SchemaDocument, method: str, path: str, item: Schema) -> str:
    operation = item[method]
    # GET /__admin/corpus/{name} -> #get-admin-corpus-name, as a reader would spell it
    slug = "-".join(re.findall(r"[a-z0-9]+", f"{method} {path}".lower()))
    parts = [f"### `{method.upper()} {path}` {{#{slug}}}"]
    parts += [operation[key] for key in ("summary", "description") if key in operation]
    parameters = [
        resolved(document, p)
        for p in [*item.get("parameters", ()), *operation.get("parameters", ())]
    ]
    if parameters:
        rows = [
            f"| `{p['name']}`{' (required)' if p.get('required') else ''} | {p['in']} "
            f"| {cell(document.kind(p.get('schema', {})))} | {cell(p.get('description', ''))} |"
            for p in parameters
        ]
        parts.append(
            "\n".join(["| parameter | in | value | what it is |", "|---|---|---|---|", *rows])
        )
    if "requestBody" in operation:
        body = resolved(document, operation["requestBody"])
        parts.append("**Request body:** " + content_kinds(document, body.get("content", {})))
    rows = []
    for status, response in operation.get("responses", {}).items():
        response = resolved(document, response)
        answer = content_kinds(document, response.get("content", {}))
        rows.append(f"| {status} | {cell(response.get('description', ''))} | {cell(answer)} |")
    parts.append("\n".join(["| status | when | body |", "|---|---|---|", *rows]))
    return "\n\n".join(parts)


def resolved(document: SchemaDocument, node: Mapping[str, Any]) -> Schema:
    while "$ref" in node:
        node = document.resolve(node["$ref"])
    return node


def content_kinds(document: SchemaDocument, content: Mapping[str, Any]) -> str:
    return "; ".join(
        f"`{media}`: {document.kind(entry.get('schema', {}))}" for media, entry in content.items()
    )
