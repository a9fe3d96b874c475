"""The package's source as syntax trees, parsed once per test process.

The layout rules (``test_layout.py``) and the private-API rule
(``test_private_apis.py``) read every module of the package, several times
each; they share these trees and their node lists instead of parsing and
walking each file again. Nothing here is ever changed by a reader.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def tree(path: Path) -> ast.Module:
    """The module at *path*, parsed."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """Every node under *node*, itself included: :func:`ast.walk`, kept."""
    return tuple(ast.walk(node))
