"""The reconcile's order (controller/reconcile/stages.py): the table holds together, and
docs/layout.md's "One worker's path" follows it, every name it gives resolving."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import controller
from controller.reconcile import stages
from controller.reconcile.stages import REFINERS, STAGES, When

ROOT = Path(__file__).resolve().parents[4]
# Where a dotted name in the paragraph may start: the product packages, then the
# controller's folders (the paragraph is section 3's, whose names are controller/'s).
BASES = ("", "controller.", "controller.reconcile.", "controller.store.", "controller.fleet.",
         "controller.k8s.")


def paragraph() -> str:
    text = (ROOT / "docs" / "layout.md").read_text()
    start = text.index("One worker's path, to follow by name:")
    return " ".join(text[start:text.index("\n\n", start)].split())


def controller_modules() -> list[ModuleType]:
    return [importlib.import_module(info.name) for info in
            pkgutil.walk_packages(controller.__path__, "controller.")
            if not info.name.endswith("__main__")]


def _attribute(obj: object, parts: list[str]) -> bool:
    for part in parts:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def resolves(name: str, modules: list[ModuleType]) -> bool:
    """A path under controller/, a dotted name from one of ``BASES``, or ``Class.member``
    of a class some controller module defines."""
    if "/" in name or name.endswith(".py"):
        return (ROOT / "controller" / name).is_file()
    parts = name.split(".")
    for base in BASES:
        for cut in range(len(parts), 0, -1):
            try:
                module = importlib.import_module(base + ".".join(parts[:cut]))
            except ImportError:
                continue
            if _attribute(module, parts[cut:]):
                return True
            break
    return any(isinstance(getattr(m, parts[0], None), type) and _attribute(m, parts)
               for m in modules)


def test_stage_and_refiner_names_are_unique_and_every_refiner_follows_a_stage() -> None:
    names = [s.name for s in STAGES] + [r.name for r in REFINERS]
    assert len(names) == len(set(names)), names
    assert {r.after for r in REFINERS} <= {s.name for s in STAGES}


def test_every_condition_can_be_told() -> None:
    assert set(stages._HOLDS) == set(When)


def test_the_paragraph_names_every_stage_and_refiner_in_the_tables_order() -> None:
    text = paragraph()
    named = re.findall(r"\*([a-z ]+)\*", text)
    rows = [(s.name, s.step) for s in STAGES] + [(r.name, r.refine) for r in REFINERS]
    assert named == [name for name, _ in rows], (
        "docs/layout.md's 'One worker's path' names the stages (in *italics*) in another "
        "order than stages.STAGES, then stages.REFINERS")
    for name, step in rows:
        module = step.__module__.rpartition(".")[2]
        assert f"*{name}* (`{module}.{step.__name__}`" in text, (
            f"the paragraph should give stage {name!r} with its step {module}.{step.__name__}")


def test_every_name_the_paragraph_gives_exists() -> None:
    modules = controller_modules()
    names = re.findall(r"`([^`]+)`", paragraph())
    assert names
    missing = [name for name in names if not resolves(name, modules)]
    assert not missing, f"docs/layout.md's 'One worker's path' names what is not there: {missing}"


@pytest.mark.parametrize("name", ["stages.NOWHERE", "Cache.nothing", "fleet/none.py"])
def test_a_name_that_is_not_there_does_not_resolve(name: str) -> None:
    assert not resolves(name, controller_modules())
