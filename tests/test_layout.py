"""docs/layout.md stays a true map: it names every tracked file, and nothing that is gone.

How the map names a file: ``docs/layout.md`` is cut at its ``## `` headings;
a section whose heading names a folder (``## 2. `cli/` ...``) covers that
folder, the text before the first heading covers the top level. The first
column of a section's tables names files relative to its folder, each in
backticks (several may share a cell): ``live.py`` one file, ``unit/cli/`` every
file under a folder, ``test_*.py`` a glob (``*`` stays within a folder).
Every file ``git ls-files`` lists must be named so, and every name must
still match a file.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path, PurePosixPath

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = "docs/layout.md"


@attrs.frozen
class Section:
    heading: str  # as written, "" for the text before the first heading
    folder: str  # "cli/", or "" for the top level
    names: tuple[str, ...]  # first-column entries, relative to folder

    @property
    def where(self) -> str:
        return f"section {self.heading.split(' -- ')[0]}" if self.heading else "the top-level table"


def sections(text: str) -> list[Section]:
    """The map's sections, each with the names in the first column of its tables."""
    found = []
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # no tables there
    for number, part in enumerate(re.split(r"^(?=## )", text, flags=re.MULTILINE)):
        heading = part.splitlines()[0].removeprefix("## ").strip() if number else ""
        folder = next((t for t in re.findall(r"`([^`]+)`", heading) if t.endswith("/")), "")
        names = []
        for line in part.splitlines():
            cells = line.strip().split("|")
            if len(cells) < 3 or not line.lstrip().startswith("|"):
                continue
            names += re.findall(r"`([^`\s]+)`", cells[1])
        found.append(Section(heading, folder if number else "", tuple(names)))
    return found


def _pattern(name: str) -> re.Pattern[str]:
    """A name as a regular expression over paths: ``dir/`` takes all below, ``*`` one level."""
    body = "".join("[^/]*" if part == "*" else re.escape(part)
                   for part in re.split(r"(\*)", name.rstrip("/")))
    return re.compile(body + ("/.+" if name.endswith("/") else ""))


def unnamed(files: list[str], text: str) -> tuple[list[str], list[str]]:
    """(files no section names, each with where to add it; names that match no file)."""
    parts = sections(text)
    patterns = [(s, n, _pattern(s.folder + n)) for s in parts for n in s.names]
    missing = []
    for path in files:
        if any(p.fullmatch(path) for _, _, p in patterns):
            continue
        home = max((s for s in parts if path.startswith(s.folder)), key=lambda s: len(s.folder))
        relative = path.removeprefix(home.folder)
        hint = f"`{relative}` in {home.where}"
        top = PurePosixPath(path).parts[0]
        if not home.folder and "/" in path and not top.startswith("."):
            hint += f" (or a new section `## N. \\`{top}/\\`` with a table)"
        missing.append(f"{path}: add {hint}")
    stale = [f"`{n}` in {s.where} ({s.folder + n})" for s, n, p in patterns
             if not any(p.fullmatch(path) for path in files)]
    return missing, stale


@cache
def _tracked() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    # A file deleted in the work tree but not yet committed is on its way out.
    return sorted(p for p in listed.split("\0") if p and (ROOT / p).exists())


def test_every_tracked_file_is_named() -> None:
    missing, _ = unnamed(_tracked(), (ROOT / LAYOUT).read_text(encoding="utf-8"))
    if missing:
        pytest.fail(f"{LAYOUT} does not name {len(missing)} tracked file(s). Add each to a "
                    "table of the section shown (first column: the path relative to the "
                    "section's folder, in backticks; `folder/` or `test_*.py` names a "
                    "group):\n  " + "\n  ".join(missing), pytrace=False)


def test_every_name_is_a_tracked_file() -> None:
    _, stale = unnamed(_tracked(), (ROOT / LAYOUT).read_text(encoding="utf-8"))
    if stale:
        pytest.fail(f"{LAYOUT} names what no tracked file matches (renamed or removed?):\n  "
                    + "\n  ".join(stale), pytrace=False)


MAP = """\
Intro, `cli/` in prose names nothing, nor does a block:

```
## not a heading
| `Makefile` | not a table |
```

| file | role |
| --- | --- |
| `README.md`, `.ci/run` | top |

## 1. `cli/` -- commands

| file | role |
| --- | --- |
| `main.py` | see `other.py` |

## 2. `tests/`

| path | covers |
| --- | --- |
| `unit/cli/` | all of it |
| `e2e/test_*.py` | one level |
| `gone.py` | nothing |
"""


def test_the_check_says_where_each_unnamed_file_goes() -> None:
    files = ["README.md", ".ci/run", "cli/main.py", "cli/other.py", "tests/unit/cli/a/b.py",
             "tests/e2e/test_x.py", "tests/e2e/deep/test_y.py", "charts/x/Chart.yaml", "Makefile"]
    missing, stale = unnamed(files, MAP)
    assert missing == [
        "cli/other.py: add `other.py` in section 1. `cli/`",
        "tests/e2e/deep/test_y.py: add `e2e/deep/test_y.py` in section 2. `tests/`",
        "charts/x/Chart.yaml: add `charts/x/Chart.yaml` in the top-level table "
        "(or a new section `## N. \\`charts/\\`` with a table)",
        "Makefile: add `Makefile` in the top-level table",
    ]
    assert stale == ["`gone.py` in section 2. `tests/` (tests/gone.py)"]
