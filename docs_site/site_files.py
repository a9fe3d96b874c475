"""Which files of the repository make the site, each at its path in the repository.

An MkDocs hook (mkdocs.yml's ``hooks:``). MkDocs reads its pages from one
folder, ``docs/``; our pages link to each other by their paths in the
repository (the README to ``docs/cli.md``, a page to ``../examples/...``),
which is how GitHub shows them. So the site is laid out as the repository is:
the README is its home, ``docs/`` keeps its name, and what the pages link to
outside ``docs/`` comes along. A link that works on GitHub then works here
unchanged, and the strict build checks every one.

The site holds: every file under ``docs/`` (what MkDocs found there, its
exclusions honoured), every page the nav names (README.md, CHANGES.md,
bench/README.md...), and every file of the repository that one of those pages
links to (an example, a benchmark's script), to be read as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

LINK = re.compile(r"\]\(\s*<?([^)\s>#?]+)")
"""The target of an inline Markdown link, ``[text](target)``, without its anchor or query."""


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).resolve().parent
    docs = Path(config.docs_dir).relative_to(root).as_posix()

    def file(path: str) -> File:
        return File(path, str(root), config.site_dir, config.use_directory_urls)

    # MkDocs found docs/ and the theme's files; only the pages move, under their folder's name.
    site = Files(
        [
            file(f"{docs}/{found.src_uri}") if found.src_dir == config.docs_dir else found
            for found in files
        ]
    )
    for path in nav_paths(config.nav or []):
        if (root / path).is_file() and site.get_file_from_path(path) is None:
            site.append(file(path))
    pages = [Path(page.abs_src_path) for page in site.documentation_pages() if page.abs_src_path]
    for path in linked_files(root, pages):
        if site.get_file_from_path(path) is None:
            site.append(file(path))
    return site


def nav_paths(nav: Any) -> Iterator[str]:
    """The local paths the nav names, at any depth (a title's entry or a bare path)."""
    if isinstance(nav, str):
        if "://" not in nav:
            yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_paths(item)
    elif isinstance(nav, dict):
        for item in nav.values():
            yield from nav_paths(item)


def linked_files(root: Path, pages: Iterable[Path]) -> Iterator[str]:
    """The repository's files the pages link to, by relative links (a folder is no file)."""
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if ":" in target or target.startswith("/"):
                continue  # a URL (https:, mailto:) or a path from the site's root
            path = (page.parent / unquote(target)).resolve()
            if path.is_file() and path.is_relative_to(root):
                yield path.relative_to(root).as_posix()
