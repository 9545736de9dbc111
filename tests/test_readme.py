"""The README's library example runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import placement

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_library_example_runs_as_written() -> None:
    section = README.read_text(encoding="utf-8").split("## The library", 1)[1]
    code, output = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.DOTALL)[:2]
    assert len(code.strip().splitlines()) == 4  # build nodes, a fleet, decide, read
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, {name: getattr(placement, name) for name in placement.__all__})
    assert printed.getvalue() == output


def test_the_public_api_is_small() -> None:
    assert len(placement.__all__) <= 15
    for name in placement.__all__:
        assert getattr(placement, name) is not None
