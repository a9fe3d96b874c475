"""mockskill uses no private module or attribute of the standard library or of a dependency.

A name with a leading underscore is an implementation detail of whoever
defines it: CPython renames and removes them between releases (``_sha256``
became ``_sha2`` in 3.12), and so do libraries. This reads every module of the
package with :mod:`ast` and fails on:

- an import of a private module (``import _thread``, ``from _blake2 import …``)
  or of a private name from another package (``from ssl import _create…``);
- an attribute with a leading underscore read from a module imported from
  outside the package (``socket._accept``);
- an attribute with a leading underscore that mockskill itself never defines
  (``future._asyncio_future_blocking``): it can only be someone else's.

Named tuples' documented methods (``_replace``, ``_fields``, ``_asdict``,
``_make``) are public API despite their underscore.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import package_source
import pytest

import mockskill

PACKAGE = Path(mockskill.__file__).parent
NAMED_TUPLE_API = {"_replace", "_fields", "_asdict", "_make", "_field_defaults"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE.parent)), package_source.tree(path)


def _defined_here(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """Every private name mockskill gives a meaning: functions, classes, attributes it
    assigns, slots, keyword arguments and fields."""
    names: set[str] = set()
    for _, tree in trees:
        for node in package_source.nodes(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # __slots__ entries, setattr names
    return {name for name in names if _private(name)}


def _outside_modules(tree: ast.Module) -> set[str]:
    """The names a module binds to modules imported from outside the package."""
    bound: set[str] = set()
    for node in package_source.nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("mockskill"):
                    bound.add(alias.asname or alias.name.split(".")[0])
    return bound


def problems(trees: list[tuple[str, ast.Module]], ours: set[str]) -> list[str]:
    """Each private use in *trees*, as ``file:line: what``; *ours* are the private names
    the package defines itself."""
    found = []
    for where, tree in trees:
        outside = _outside_modules(tree)
        for node in package_source.nodes(tree):
            line = f"{where}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [
                    f"{line}: import {a.name}"
                    for a in node.names
                    if any(_private(part) for part in a.name.split("."))
                ]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                if module.startswith("mockskill"):
                    continue
                if any(_private(part) for part in module.split(".")):
                    found.append(f"{line}: from {module} import ...")
                found += [
                    f"{line}: from {module} import {a.name}" for a in node.names if _private(a.name)
                ]
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in outside:
                    found.append(f"{line}: {node.value.id}.{node.attr}")
                elif node.attr not in ours and node.attr not in NAMED_TUPLE_API:
                    found.append(f"{line}: .{node.attr}")
    return found


def test_no_private_module_or_attribute_of_another_package_is_used() -> None:
    trees = list(_modules())
    assert problems(trees, _defined_here(trees)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import _thread",
        "from _blake2 import blake2b",
        "from ssl import _create_unverified_context",
        "import socket\nsocket._accept",
        "def f(future):\n    return future._asyncio_future_blocking",
    ],
)
def test_the_check_finds_each_kind_of_private_use(source: str) -> None:
    """The check itself can fail: each form it looks for, planted in a module."""
    assert problems([("planted.py", ast.parse(source))], ours=set())


def test_a_private_name_of_the_package_s_own_is_allowed() -> None:
    source = "class A:\n    def _own(self): ...\ndef f(a):\n    return a._own()"
    tree = ast.parse(source)
    assert problems([("ours.py", tree)], _defined_here([("ours.py", tree)])) == []


# -- the engine's own: nothing outside engine/ touches Engine._* ---------------------------


def engine_privates(tree: ast.Module) -> set[str]:
    """The private names class ``Engine`` of *tree* gives a meaning: its methods and the
    attributes it sets on ``self``."""
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    names = set()
    for node in ast.walk(engine):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return {name for name in names if _private(name)}


def engine_private_uses(trees: list[tuple[str, ast.Module]], privates: set[str]) -> list[str]:
    """Each read of one of the engine's *privates* in *trees* on anything but ``self``
    (another class's own attribute of the same name is its own business)."""
    return [
        f"{where}:{node.lineno}: {ast.unparse(node)}"
        for where, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in privates
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


def test_nothing_outside_the_engine_touches_its_private_members() -> None:
    """The engine's callers (the loop's surface, the WSGI player, the server, the admin
    app) use its public methods (decide, plan, plan_async, entry, unavailable, ...)."""
    engine = ast.parse((PACKAGE / "engine" / "engine.py").read_text())
    privates = engine_privates(engine)
    assert {"_journalling", "_plain", "_refusal"} <= privates  # the reader finds them
    outside = [
        (name, tree) for name, tree in _modules() if not name.startswith("mockskill/engine/")
    ]
    assert engine_private_uses(outside, privates) == []


def test_the_engine_check_finds_a_private_call_and_allows_a_public_one() -> None:
    planted = ast.parse("def handle(engine, request):\n    return engine._decide(request)")
    assert engine_private_uses([("planted.py", planted)], {"_decide"}) == [
        "planted.py:2: engine._decide"
    ]
    public = ast.parse("def handle(engine, request):\n    return engine.decide(request)")
    assert engine_private_uses([("public.py", public)], {"_decide"}) == []
