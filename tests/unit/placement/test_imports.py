"""placement/policy.py reads plain values only: it imports no part of the search.

That no module of any package imports itself around a circle is tests/test_layers.py's.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "placement"


def _imports(path: Path) -> set[str]:
    """The package's modules ``path`` imports, type-checking-only imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "placement":  # ``from placement import x`` may name a module
                names = [f"placement.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "placement" and len(parts) > 1 and (PACKAGE / f"{parts[1]}.py").exists():
                found.add(parts[1])
    return found


def _graph() -> dict[str, set[str]]:
    return {path.stem: _imports(path) for path in sorted(PACKAGE.glob("*.py"))
            if path.stem != "__init__"}


def test_the_policy_imports_no_part_of_the_search() -> None:
    assert _graph()["policy"] <= {"model", "rooms"}
