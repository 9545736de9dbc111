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
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
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
        "    from controller.kube import Kube\n"
        "LAZY = {'x': 'cli.snapshot:command'}\n"
        "from . import sibling\n"
        "NOT_A_MODULE = 'cli'\n")
    assert sorted(_imports(module, "placement")) == [
        (1, "cli.main"), (2, "cli"), (4, "controller.kube"), (5, "cli.snapshot"),
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
