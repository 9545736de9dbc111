"""Every bundled example replays with all its expectations holding (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml"))


def test_the_examples_are_there() -> None:
    assert {path.name for path in EXAMPLES} >= {"devbox.yaml", "production.yaml"}


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
