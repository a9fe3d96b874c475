"""The package's layout stays true: imports only go down, and nothing imports in a circle.

docs/architecture.md describes the stages; this file holds the package to
them by reading every module's imports with ``ast`` (type-only imports and
imports inside functions included: they are dependencies too). The stages,
from the bottom:

- ``protocol/`` — what the skill protocol says; imports nothing of mockskill;
- ``scenario/`` — files in, the frozen model out; imports only ``protocol/``;
- ``engine/`` — one request through the scenarios; imports the two below;
- ``transport/`` — the serving layer (the transport rework lands here);
  imports ``engine/`` and what is below it, and nothing below imports it;
- ``audit/`` — grading a consumer from the journal; no serving, no control;
- ``store/`` — the Redis backend of the state interface; reads the engine's
  store interface and the scenarios it shares, nothing that serves;
- ``recording/`` — proxied exchanges into a scenario file; reads the engine's
  exchanges and the scenario loader, nothing that serves;
- ``control/`` — the loaded scenario set and every change to it (load, check,
  activate, swap into the engine, share with replicas, reload): its one owner,
  which the server, the watcher and the admin app all call; reads ``store/``
  for a shared set;
- ``admin/`` — the control surface, a face over ``control/``; may read the
  audit and drive a recording;
- the faces, each a subpackage over the stages: ``wsgi/`` (the WSGI app and
  its blocking player), ``server/`` (the Python server API; it runs the WSGI
  app for ``/__admin``), ``workers/`` (the ``--workers`` supervisor) and
  ``cli/`` (the command line, over all three). The top of the package holds
  only ``mockskill/__init__`` (the public API), ``__main__``, ``pytest_plugin``
  (which runs a server) and ``_version``, a leaf everyone may read: it imports
  nothing of the package.

The stages that decide — ``protocol/``, ``scenario/``, ``engine/``, ``audit/`` —
are sans-IO: none imports ``socket``, ``select``, ``asyncio`` or ``ssl``, nor calls
``time.sleep`` (``threading`` stays: the in-memory state's lock, behind the store
interface). The transport and the faces do the I/O.

Each stage's ``__init__`` docstring names every module of the stage and says
what the stage may import; no module is over 1 200 lines, and the run's summary
names those over 800 for a reviewer's eye.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from pathlib import Path

import package_source

# Found, not imported: the test reads the source, so a circle cannot break it before it reports.
_SPEC = importlib.util.find_spec("mockskill")
assert _SPEC is not None
assert _SPEC.origin is not None
PACKAGE = Path(_SPEC.origin).resolve().parent
FACES = "faces"
LEAVES = {"mockskill._version"}

BELOW_THE_FACES = {
    "admin",
    "control",
    "recording",
    "store",
    "audit",
    "transport",
    "engine",
    "scenario",
    "protocol",
}
"""The stages under the faces: the WSGI face reads them all, and each face above it more."""

# What each stage may import (besides itself and the LEAVES).
MAY_IMPORT: dict[str, set[str]] = {
    "protocol": set(),
    "scenario": {"protocol"},
    "engine": {"scenario", "protocol"},
    "transport": {"engine", "scenario", "protocol"},
    "audit": {"engine", "scenario", "protocol"},
    "store": {"engine", "scenario", "protocol"},
    "recording": {"engine", "scenario", "protocol"},
    "control": {"store", "engine", "scenario", "protocol"},
    "admin": {"control", "recording", "audit", "transport", "engine", "scenario", "protocol"},
    "wsgi": BELOW_THE_FACES,
    "server": BELOW_THE_FACES | {"wsgi"},
    "workers": {"server", "store", "engine", "scenario", "protocol"},
    "cli": BELOW_THE_FACES | {"wsgi", "server", "workers"},
    FACES: BELOW_THE_FACES | {"wsgi", "server", "workers", "cli"},
}
TOP = {"__init__", "__main__", "_version", "pytest_plugin"}
"""The modules at the top of the package: the public API and its entry points."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str:
    """The module of the package that *name* (a module, or a name in one) lives in."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> set[str]:
    """The package's modules that *module* imports, anywhere in its text."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in package_source.nodes(package_source.tree(path)):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            # ``from . import audit`` names a module, ``from .x import Y`` a name in x:
            # resolve() takes either to the module.
            targets = [f"{stem}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            if target == "mockskill" or target.startswith("mockskill."):
                found.add(resolve(target))
    found.discard(module)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports of the package. Read when a test asks, not at import: the run's
    summary imports this file for REVIEW_LINES."""
    return {module: imports(module) for module in MODULES}


def stage(module: str) -> str:
    """``mockskill.scenario.loader`` is in ``scenario``; a top-level module is a face."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1] / "__init__.py").exists()):
        return parts[1]
    return FACES


def test_no_module_imports_in_a_circle() -> None:
    circles: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circles.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for target in sorted(graph()[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph()):
        visit(module, [])
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_imports_only_go_down() -> None:
    stages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert stages <= set(MAY_IMPORT), f"a stage without rules: {stages - set(MAY_IMPORT)}"
    wrong = []
    for module, targets in sorted(graph().items()):
        if module in LEAVES:
            assert targets == set(), f"{module} is a leaf: it imports nothing of the package"
            continue
        here = stage(module)
        for target in sorted(targets):
            there = stage(target)
            if target in LEAVES or there == here or there in MAY_IMPORT[here]:
                continue
            wrong.append(f"{module} ({here}) imports {target} ({there})")
    assert wrong == [], "imports against the layout:\n" + "\n".join(wrong)


def test_the_top_of_the_package_holds_only_its_entry_points() -> None:
    """Everything else lives in the stage or the face it belongs to."""
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == TOP, f"modules at the top of the package besides {sorted(TOP)}: {top - TOP}"


def test_every_stage_says_what_it_owns_and_may_import() -> None:
    for name in MAY_IMPORT:
        if name == FACES:
            continue
        init = PACKAGE / name / "__init__.py"
        assert init.exists(), f"the stage {name}/ has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{init} has no docstring"
        assert "may import" in doc.lower(), f"{init} does not say what it may import"
        # What it owns: each of its modules, named as ``module``, :mod:`.module`
        # or :class:`~.module.Name`, so that a new module finds its line there.
        unnamed = [
            path.stem
            for path in sorted((PACKAGE / name).glob("*.py"))
            if path.stem != "__init__" and not re.search(rf"`~?\.?{re.escape(path.stem)}[`.]", doc)
        ]
        assert unnamed == [], f"{init}'s docstring does not say what owns {unnamed}"


def engine_loads(tree: ast.AST) -> int:
    """How many times *tree* swaps a scenario set into an engine: ``engine.load(...)``,
    ``self.engine.load(...)``, ``x.engine.load(...)``."""
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "load"
        and (
            (isinstance(node.func.value, ast.Name) and node.func.value.id == "engine")
            or (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "engine")
        )
    )


def test_only_the_scenario_sets_owner_swaps_it_into_the_engine() -> None:
    """The set's life has one owner, ``control/``: the server, the watcher and the admin
    app change it through its Registry, never by handing the engine a set themselves."""
    swapping = {
        module
        for module, path in MODULES.items()
        if engine_loads(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert swapping == {"mockskill.control.registry"}
    assert engine_loads(ast.parse("self.engine.load(s)\nengine.load(s)\njson.load(f)")) == 2


SANS_IO = ("protocol", "scenario", "engine", "audit")
"""The stages that decide and do no I/O: they hand the transport data to play."""
IO_MODULES = {"socket", "select", "asyncio", "ssl"}
"""What plays on the wire or the clock: the transport's and the faces' to import."""
IO_ALLOWED = {
    ("mockskill.scenario.proxy_config", "ssl"): "a proxy step's CA file is read at load, as the "
    "upstream's TLS will read it, so that a file holding no certificate is a positioned "
    "load problem, not a closed connection on every proxied request",
}
"""(module, what) -> why: the few that must, each with its reason."""


def io_uses(tree: ast.AST) -> set[str]:
    """The I/O *tree* does: each of :data:`IO_MODULES` it imports (anywhere, in a function
    too), and ``time.sleep`` if it calls or names it (``from time import sleep`` too)."""
    found: set[str] = set()
    for node in package_source.nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
            if node.module == "time" and any(a.name == "sleep" for a in node.names):
                found.add("time.sleep")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "sleep"
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
        ):
            found.add("time.sleep")
    return found & (IO_MODULES | {"time.sleep"})


def test_the_deciding_stages_do_no_io() -> None:
    wrong = []
    for module, path in sorted(MODULES.items()):
        if stage(module) not in SANS_IO:
            continue
        for what in sorted(io_uses(package_source.tree(path))):
            if (module, what) not in IO_ALLOWED:
                wrong.append(f"{module} ({stage(module)}) uses {what}")
    assert wrong == [], "I/O in a sans-IO stage (the transport or a face does it):\n" + "\n".join(
        wrong
    )


def test_the_io_rule_sees_each_way_of_doing_io() -> None:
    """The rule's reader itself: every form below is I/O, and ``threading`` is not."""
    for source, what in [
        ("import socket", "socket"),
        ("import asyncio.events", "asyncio"),
        ("from select import poll", "select"),
        ("def f():\n    import ssl", "ssl"),
        ("import time\ntime.sleep(1)", "time.sleep"),
        ("from time import sleep", "time.sleep"),
    ]:
        assert io_uses(ast.parse(source)) == {what}, source
    assert (
        io_uses(ast.parse("import threading, time\nlock = threading.Lock()\ntime.time()")) == set()
    )


REVIEW_LINES = 800
"""A module longer than this is named at the end of the run: does it hold one concept?"""
MAX_LINES = 1200
"""A module longer than this fails: it surely holds more than one."""


def module_lines() -> dict[str, int]:
    return {
        module: len(path.read_text(encoding="utf-8").splitlines())
        for module, path in sorted(MODULES.items())
    }


def test_no_module_is_over_1200_lines() -> None:
    """Split a module by the concepts it holds, never by its line count: the length is
    a hint for a reviewer (the run's summary names modules over ~800 lines), and only
    a module over ~1 200 lines is held to be two concepts or more."""
    long = {module: lines for module, lines in module_lines().items() if lines > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def test_the_architecture_page_is_short_and_names_what_exists() -> None:
    """docs/architecture.md stays under two screens, and every file and ``Class.attribute``
    it names exists (a module moved or a method renamed shows up here)."""
    if not ARCHITECTURE.exists():  # an installed package without its source tree
        return
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 130, "docs/architecture.md is over two screens"
    defined: dict[str, set[str]] = {}  # class -> what it defines: methods, attributes
    bases: dict[str, set[str]] = {}
    for path in MODULES.values():
        for node in package_source.nodes(package_source.tree(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            members = defined.setdefault(node.name, set())
            bases.setdefault(node.name, set()).update(ast.unparse(b) for b in node.bases)
            for inner in ast.walk(node):
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    members.add(inner.name)
                elif isinstance(inner, ast.AnnAssign | ast.Assign):
                    targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            members.add(target.id)
                        elif isinstance(target, ast.Attribute):
                            members.add(target.attr)

    def has(owner: str, attribute: str, seen: frozenset[str] = frozenset()) -> bool:
        if attribute in defined.get(owner, ()):
            return True
        return any(has(b, attribute, seen | {owner}) for b in bases.get(owner, set()) - seen)

    missing = []
    for name in sorted(set(re.findall(r"`([\w./]+)(?:\([^`]*\))?`", text))):
        if "/" in name and "." in name.rpartition("/")[2]:  # a file
            if not any((base / name).exists() for base in (PACKAGE, PACKAGE.parent)):
                missing.append(name)
        elif "/" not in name and name.count(".") == 1:
            owner, attribute = name.split(".")
            if owner in defined and not has(owner, attribute):
                missing.append(name)
    assert missing == [], f"docs/architecture.md names what is not there: {missing}"
