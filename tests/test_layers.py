"""The packages stack one way: ``cli`` above ``controller``, both above ``placement``.

The commands people type live in ``cli``; ``controller`` is the reconcile loop
and its reading of the cluster, and never reaches up into the commands;
``placement`` is the decision and knows neither. ``timeslicer`` (the node
agent and the worker side) sits beside ``controller``, above ``placement``,
and only ``cli`` imports it; its worker side (everything but
``timeslicer.agent``) imports the standard library alone, since a worker pod
has nothing else installed. Checked on the source itself:
every import statement (at any depth, ``TYPE_CHECKING`` included) and every
module named as a string for loading later (``"package.module:attribute"``, or
``importlib.import_module("package.module")``).

Within the packages, no module imports itself around a circle: the graph of
every module of every package (subpackages too, by the same count of imports)
has no cycle.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What each package may import of the project, itself included.
MAY_IMPORT = {
    "placement": {"placement"},
    "controller": {"controller", "placement"},
    "timeslicer": {"timeslicer", "controller", "placement"},
    "cli": {"cli", "controller", "placement", "timeslicer"},
}
_BY_NAME = re.compile(rf"^({'|'.join(MAY_IMPORT)})(\.\w+)*(:\w+)?$")


def _imports(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every project module ``path`` imports or names for loading."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, package if node.level else (node.module or "")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and _BY_NAME.match(node.value) and (":" in node.value or "." in node.value)):
            yield node.lineno, node.value.split(":")[0]


def _crossings(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in _imports(path, package):
            top = module.split(".")[0]
            if top in MAY_IMPORT and top not in MAY_IMPORT[package]:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_no_package_reaches_up(package: str) -> None:
    crossings = _crossings(package)
    allowed = ", ".join(sorted(MAY_IMPORT[package]))
    assert not crossings, (
        f"{package}/ may import only {allowed} of the project (cli above controller, both "
        f"above placement):\n  " + "\n  ".join(crossings))


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "import cli.main\n"
        "from cli import scenario\n"
        "def later():\n"
        "    from controller.k8s.kube import Kube\n"
        "LAZY = {'x': 'cli.snapshot:command'}\n"
        "from . import sibling\n"
        "NOT_A_MODULE = 'cli'\n")
    assert sorted(_imports(module, "placement")) == [
        (1, "cli.main"), (2, "cli"), (4, "controller.k8s.kube"), (5, "cli.snapshot"),
        (6, "placement")]


def test_the_worker_side_imports_the_standard_library_alone() -> None:
    found = []
    for path in sorted((ROOT / "timeslicer").rglob("*.py")):
        if "agent" in path.relative_to(ROOT / "timeslicer").parts:
            continue
        for line, module in _imports(path, "timeslicer"):
            top = module.split(".")[0]
            if module.startswith("timeslicer.agent") or (
                    top != "timeslicer" and top not in sys.stdlib_module_names):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not found, ("the worker side of timeslicer/ runs in worker pods with only the "
                       "standard library:\n  " + "\n  ".join(found))


# ------------------------------------------------------------------ circles

def _module_of(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Every module of the product packages, by dotted name (a package by its own)."""
    return {_module_of(path): path for package in sorted(MAY_IMPORT)
            for path in sorted((ROOT / package).rglob("*.py"))}


def _known(name: str, known: Mapping[str, object]) -> str | None:
    """The module ``name`` loads: itself, else its longest prefix that is a module."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _edges(path: Path, known: Mapping[str, object], root: Path = ROOT) -> dict[str, int]:
    """The project modules ``path`` imports or names for loading, each with a line.

    ``from package import name`` is an edge to ``package.name`` when that is a
    module, else to ``package`` (its ``__init__``); relative imports are resolved.
    """
    module = _module_of(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *filter(None, [base])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and _BY_NAME.match(node.value) and (":" in node.value or "." in node.value)):
            targets = [node.value.split(":")[0]]
        else:
            continue
        for target in targets:
            resolved = _known(target, known)
            if resolved is not None and resolved != module:
                found.setdefault(resolved, node.lineno)
    return found


def _circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The graph's knots: each set of modules that reach one another (two or more), sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    knots: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph.get(module, {}):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            knot = []
            while True:
                member = stack.pop()
                knot.append(member)
                if member == module:
                    break
            if len(knot) > 1:
                knots.append(sorted(knot))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(knots)


def _graph() -> dict[str, dict[str, int]]:
    known = _modules()
    return {module: _edges(path, known) for module, path in known.items()}


def test_no_module_imports_itself_around_a_circle() -> None:
    graph = _graph()
    lines = []
    for knot in _circles(graph):
        lines.append(" <-> ".join(knot))
        lines += [f"    {_modules()[a].relative_to(ROOT)}:{line} imports {b}"
                  for a in knot for b, line in sorted(graph[a].items()) if b in knot]
    assert not lines, ("modules import one another in a circle (every import counts, inside "
                       "functions too); break it by moving what both need down a layer:\n  "
                       + "\n  ".join(lines))


def test_the_circle_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    known = {"cli": 0, "cli.a": 0, "cli.b": 0, "cli.sub": 0, "cli.sub.c": 0,
             "controller.k8s.kube": 0}
    module = tmp_path / "cli" / "sub" / "c.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from cli import a\n"
        "from cli import helper\n"
        "def later():\n"
        "    from .. import b\n"
        "    import controller.k8s.kube.Kube\n"
        "LAZY = 'cli.sub:command'\n")
    assert _edges(module, known, root=tmp_path) == {"cli.a": 1, "cli": 2, "cli.b": 4,
                                                    "controller.k8s.kube": 5, "cli.sub": 6}
    assert _circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]]
    assert _circles({"a": {"b": 1}, "b": {}}) == []


# ------------------------------------------------------------- depth

def _longest_chain(graph: Mapping[str, Mapping[str, int]], prefix: str) -> list[str]:
    """The longest chain of imports among the modules under ``prefix`` (the graph has
    no circle, as the test above holds)."""
    inside = {m: [t for t in targets if t.startswith(prefix) and t != m]
              for m, targets in graph.items() if m.startswith(prefix)}
    longest: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in longest:
            longest[module] = [module, *max((chain(t) for t in inside.get(module, ())),
                                            key=len, default=[])]
        return longest[module]

    return max((chain(m) for m in sorted(inside)), key=len, default=[])


def test_the_controller_stacks_no_deeper_than_its_folders_need() -> None:
    # The shared words of a reconcile live low in the graph, not inside a step, so
    # a chain runs entry point -> reconcile -> store -> fleet -> the door once.
    chain = _longest_chain(_graph(), "controller")
    assert len(chain) <= 13, (f"controller/ imports {len(chain)} modules deep: "
                              + " -> ".join(chain))
    assert _longest_chain({"a": {"b": 1, "c": 1}, "b": {"c": 1}, "c": {}}, "") == [
        "a", "b", "c"]
