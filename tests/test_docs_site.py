"""The docs build as a site (mkdocs.yml, docs_site/), strictly, and the site is the docs.

- ``mkdocs build --strict`` finds nothing to warn of in the repository's pages:
  no link to a missing page, anchor or file, every page under docs/ in the nav.
- It does fail on a page left out of the nav and on each kind of bad link (one
  planted in a copy), so the settings that make it strict are the ones in force.
- The README is the home page, every page keeps its path in the repository, and
  a link between pages (written for GitHub) leads to that page in the site.
- The reference pages are made from the files the code uses: every definition
  of each JSON Schema and every operation and schema of the OpenAPI document
  has its section; the files themselves are beside them.
- The search index holds every page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(site)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        # Material's notice of its end of life (May 2027) is for a person, not for this log.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


PLANTED = "docs/planted.md"
"""A page the site's fixture adds to a copy of the docs: out of the nav, each of its links bad."""

PLANTED_TEXT = """# Planted

[a page](missing.md) · [an anchor](cli.md#no-such-heading) · [a folder](../examples/)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``(site, log)``: the docs built strictly from a copy with one bad page planted.

    One build (a few seconds) shows both halves: the strict settings fail on the
    planted page, and the repository's own pages draw no warning at all. MkDocs
    writes the whole site before it counts the warnings.
    """
    project = tmp_path_factory.mktemp("project")
    for name in repository_files():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, project / name)
    (project / PLANTED).write_text(PLANTED_TEXT)
    site = tmp_path_factory.mktemp("site")
    result = build(project, site)
    assert result.returncode == 1, result.stderr
    return site, result.stderr + result.stdout  # the warnings, then the verdict


@pytest.fixture(scope="module")
def site(built: tuple[Path, str]) -> Path:
    return built[0]


def repository_files() -> list[str]:
    """The files of the work tree that git knows or would add (a new page before its commit)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def warnings_in(log: str) -> list[str]:
    """MkDocs' warnings in its log, each with the lines that go on from it (indented)."""
    warnings: list[str] = []
    for line in log.splitlines():
        if line.startswith("WARNING"):
            warnings.append(line)
        elif line.startswith(" ") and warnings and not line.startswith(("INFO", "DEBUG")):
            warnings[-1] += "\n" + line
    return warnings


def page(site: Path, source: str) -> str:
    """The HTML of the page made from *source* (a path in the repository)."""
    stem = source.removesuffix(".md")
    stem = "" if stem == "README" else stem.removesuffix("/README")
    return (site / stem / "index.html").read_text()


def test_the_readme_is_the_home_page(site: Path) -> None:
    home = page(site, "README.md")
    assert "A 30-second tour" in home
    # the README's links to docs/ lead to those pages in the site
    assert 'href="docs/cli/"' in home
    assert (site / "docs" / "cli" / "index.html").exists()


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_every_page_under_docs_is_in_the_site_and_its_nav(site: Path, doc: str) -> None:
    html = page(site, f"docs/{doc}")
    title = (ROOT / "docs" / doc).read_text().splitlines()[0].removeprefix("# ")
    assert re.sub(r"`([^`]*)`", r"<code>\1</code>", title) in html
    # in the nav (the home page's): a reader goes by it
    assert f'href="docs/{doc.removesuffix(".md")}/"' in page(site, "README.md")


def test_a_link_between_pages_leads_to_the_page_and_its_anchor(site: Path) -> None:
    scenarios = page(site, "docs/scenarios.md")
    assert 'href="../streams/#faults-after-event-n"' in scenarios
    assert 'id="faults-after-event-n"' in page(site, "docs/streams.md")
    # a page's link to a file outside docs/ (an example) leads to that file in the site
    assert 'href="../../examples/consumer/consumer.py"' in page(site, "docs/docker.md")
    assert (site / "examples" / "consumer" / "consumer.py").exists()


@pytest.mark.parametrize(
    ("source", "reference"),
    [
        ("mockskill/scenario.schema.json", "reference/scenario-schema"),
        ("mockskill/descriptor.schema.json", "reference/descriptor-schema"),
    ],
)
def test_each_schema_has_a_page_with_every_definition(
    site: Path, source: str, reference: str
) -> None:
    schema = json.loads((ROOT / source).read_text())
    html = (site / reference / "index.html").read_text()
    for name in schema["$defs"]:
        assert f'id="schema-{name.replace("_", "-").lower()}"' in html, name
    for key in schema["properties"]:
        assert f"<code>{key}</code>" in html, key
    anchors = re.findall(r'id="([^"]+)"', html)
    assert len(anchors) == len(set(anchors))
    # the file itself, beside its page, as the code has it
    copy = site / "reference" / Path(source).name
    assert copy.read_bytes() == (ROOT / source).read_bytes()


def test_a_reference_is_a_link_to_the_definition_it_points_into(site: Path) -> None:
    html = (site / "reference" / "scenario-schema" / "index.html").read_text()
    # outcome.error is {"$ref": "#/$defs/step/properties/error"}: the key it reuses, named
    assert '<a href="#schema-step"><code>step.error</code></a>' in html
    # and a key without a description of its own shows the one it points at
    schema = json.loads((ROOT / "mockskill" / "scenario.schema.json").read_text())
    error = schema["$defs"]["step"]["properties"]["error"]["description"]
    assert html.count(error.split("`")[0]) >= 2  # under step and under outcome


def test_the_admin_api_page_has_every_operation_and_schema(site: Path) -> None:
    spec = json.loads((ROOT / "mockskill" / "admin" / "openapi.json").read_text())
    html = (site / "reference" / "admin-api" / "index.html").read_text()
    for path, item in spec["paths"].items():
        for method in ("get", "put", "post", "delete", "patch"):
            if method in item:
                assert f"<code>{method.upper()} {path}</code>" in html, (method, path)
    for name in spec["components"]["schemas"]:
        assert f'id="schema-{name.lower()}"' in html, name
    # a reference to a schema is a link to its section
    assert 'href="#schema-error"' in html
    # and every section can be linked to: no two share an anchor
    anchors = re.findall(r'id="([^"]+)"', html)
    assert len(anchors) == len(set(anchors))
    assert 'id="get-admin-corpus-name"' in html


def test_the_search_index_holds_every_page(site: Path) -> None:
    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    for doc in (ROOT / "docs").glob("*.md"):
        assert f"docs/{doc.stem}/" in locations, doc.name
    assert {"", "reference/admin-api/", "reference/scenario-schema/"} <= locations


def test_the_strict_build_fails_on_a_page_out_of_the_nav_and_on_each_bad_link(
    built: tuple[Path, str],
) -> None:
    _, log = built
    warnings = warnings_in(log)
    assert len(warnings) == 4, log
    assert 'not included in the "nav"' in warnings[0]
    assert f"- {PLANTED}" in warnings[0]
    assert "'missing.md'" in warnings[1]
    assert "unrecognized relative link '../examples/'" in warnings[2]
    assert "'#no-such-heading'" in warnings[3]
    assert "Aborted with 4 warnings in strict mode!" in log


def test_the_repository_pages_draw_no_warning(built: tuple[Path, str]) -> None:
    _, log = built
    assert all(PLANTED in warning for warning in warnings_in(log)), warnings_in(log)
