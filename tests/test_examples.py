"""Every bundled example replays with all its expectations holding (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml"))


ROOT = Path(__file__).resolve().parent.parent
PICTURE_COMMAND = "openrl-place simulate examples/day.yaml --report docs/images/day.svg"


def test_the_examples_are_there() -> None:
    assert {path.name for path in EXAMPLES} >= {"devbox.yaml", "production.yaml", "day.yaml"}


def test_the_readme_picture_is_the_tools_own_with_the_command_that_remakes_it() -> None:
    readme = (ROOT / "README.md").read_text()
    assert PICTURE_COMMAND in readme and "](docs/images/day.svg)" in readme
    picture = (ROOT / "docs" / "images" / "day.svg").read_text()
    assert picture.startswith("<svg") and "examples/day.yaml" in picture
    assert "pending workers" in picture and "Matplotlib" in picture


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_replays_with_every_expectation_holding(path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_expectations_are_many_and_all_pass_in_json(path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", "--output", "json", str(path)])
    assert result.exit_code == 0, result.output
    expectations = json.loads(result.stdout)["expectations"]
    assert expectations["failed"] == 0
    assert expectations["passed"] >= 10
