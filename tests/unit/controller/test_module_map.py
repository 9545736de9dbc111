"""Each controller folder's module map stays true: it names every module, and only modules.

A map is its ``__init__`` docstring's list from "Module map" on; an entry is a name in
double backticks followed by a colon (``name``: what it is), or several
sharing one (``a``, ``b``: ...). Other names in backticks are prose. A
folder's modules are its tracked ``.py`` files and subfolders (as ``git ls-files``
lists them, less ``__init__``), so a file not yet committed need not be named; a
name must match a file that exists.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

import controller

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "controller"
_ENTRY = re.compile(r"``(\w+)``(?=(?:, ``\w+``)*:)")


def entries(docstring: str) -> list[str]:
    """The module names the map's entries give, in order."""
    _, found, text = docstring.partition("Module map")
    assert found, "no 'Module map' in the docstring"
    return _ENTRY.findall(text)


PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py")
                  if "__pycache__" not in path.parts)


def tracked_modules(package: Path) -> set[str]:
    """The package's tracked modules and subpackages, by name (less ``__init__``)."""
    folder = package.relative_to(ROOT).as_posix()
    try:
        listed = subprocess.run(["git", "ls-files", "-z", folder], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    names = set()
    for line in filter(None, listed.split("\0")):
        inside = Path(line).relative_to(folder).parts
        if len(inside) == 1 and inside[0].endswith(".py") and (ROOT / line).exists():
            names.add(Path(inside[0]).stem)
        elif len(inside) > 1 and (package / inside[0] / "__init__.py").exists():
            names.add(inside[0])
    return names - {"__init__"}


def on_disk(package: Path) -> set[str]:
    return ({p.stem for p in package.glob("*.py")}
            | {p.parent.name for p in package.glob("*/__init__.py")})


@pytest.mark.parametrize("package", PACKAGES,
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_map_names_every_module_once_and_nothing_else(package: Path) -> None:
    where = (package / "__init__.py").relative_to(ROOT)
    named = entries(ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or "")
    twice = sorted({n for n in named if named.count(n) > 1})
    unnamed = sorted(tracked_modules(package) - set(named))
    not_modules = sorted(set(named) - on_disk(package))
    assert not twice, f"{where}'s map names these twice: {twice}"
    assert not unnamed, (f"{where}'s module map leaves out {unnamed}: add "
                         "each as ``name``: what it is, where a reader meets it")
    assert not not_modules, (f"{where}'s module map names {not_modules}, "
                             "which are not modules of its folder (renamed or removed?)")


def test_the_controller_is_in_folders_by_job() -> None:
    """Few modules directly in controller/: the rest live in the folder of their job."""
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert len(top) <= 15, f"controller/ holds {len(top)} modules directly: {sorted(top)}"
    assert controller.__doc__  # the map is the package's own docstring


def test_entries_are_names_before_a_colon() -> None:
    text = ("Module map:\n* ``a``: one; ``b``: two, see ``c``.\n"
            "* ``d``, ``e``: shared (``f``: prose in parentheses counts too)\n")
    assert entries("Intro ``x``: before the map.\n" + text) == ["a", "b", "d", "e", "f"]
