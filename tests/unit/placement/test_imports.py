"""The package's modules import one another in one direction: no circle, counting every import."""

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


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return None
        for target in sorted(graph.get(module, ())):
            found = visit(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_placement_has_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, f"placement/ imports in a circle: {' -> '.join(cycle or [])}"


def test_the_policy_imports_no_part_of_the_search() -> None:
    assert _graph()["policy"] <= {"model", "rooms"}


def test_the_finder_sees_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
