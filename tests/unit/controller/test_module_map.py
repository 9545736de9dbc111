"""controller/__init__.py's module map stays true: it names every module, and only modules.

The map is the docstring's list from "Module map" on; an entry is a name in
double backticks followed by a colon (``name``: what it is), or several
sharing one (``a``, ``b``: ...). Other names in backticks are prose. The
package's modules are its tracked ``.py`` files (as ``git ls-files`` lists
them, less ``__init__``), so a file not yet committed need not be named; a
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


def tracked_modules() -> set[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "controller"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return {Path(p).stem for p in listed.split("\0")
            if p.count("/") == 1 and p.endswith(".py") and (ROOT / p).exists()} - {"__init__"}


def test_the_map_names_every_module_once_and_nothing_else() -> None:
    named = entries(ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or "")
    on_disk = {p.stem for p in PACKAGE.glob("*.py")}
    twice = sorted({n for n in named if named.count(n) > 1})
    unnamed = sorted(tracked_modules() - set(named))
    not_modules = sorted(set(named) - on_disk)
    assert not twice, f"controller/__init__.py's map names these twice: {twice}"
    assert not unnamed, (f"controller/__init__.py's module map leaves out {unnamed}: add "
                         "each as ``name``: what it is, where a reader meets it")
    assert not not_modules, (f"controller/__init__.py's module map names {not_modules}, "
                             "which are not modules of controller/ (renamed or removed?)")
    assert controller.__doc__  # the map is the package's own docstring


def test_entries_are_names_before_a_colon() -> None:
    text = ("Module map:\n* ``a``: one; ``b``: two, see ``c``.\n"
            "* ``d``, ``e``: shared (``f``: prose in parentheses counts too)\n")
    assert entries("Intro ``x``: before the map.\n" + text) == ["a", "b", "d", "e", "f"]
