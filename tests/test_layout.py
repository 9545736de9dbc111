"""docs/layout.md stays a true tour: every module of the three packages is named in its section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("placement", "cli", "controller")


def _sections() -> dict[str, str]:
    """Text of each ``## N. `package/` ...`` section, by package."""
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    parts = re.split(r"^## \d+\. `([^`/]+)/`.*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_in_the_tour(package: str) -> None:
    section = _sections()[package]
    named = set(re.findall(r"`([\w/]+\.py)`", section))
    modules = {path.name for path in (ROOT / package).glob("*.py") if path.name != "__init__.py"}
    missing = sorted(modules - named)
    assert not missing, f"docs/layout.md, section {package}/, does not name: {', '.join(missing)}"
    gone = sorted(name for name in named if "/" not in name and name not in modules
                  and name != "__init__.py")
    assert not gone, f"docs/layout.md, section {package}/, names missing files: {', '.join(gone)}"
