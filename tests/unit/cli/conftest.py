"""Run ``openrl-place`` in process on a scenario written to a temporary file."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main

Run = Callable[..., Result]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """``run(yaml_text, *options)``: simulate the scenario, return click's Result."""

    def simulate(text: str, *options: str, name: str = "scenario.yaml") -> Result:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return CliRunner().invoke(main, ["simulate", str(path), *options])

    return simulate


# A dev box in the reference figures (2x L4 24Gi, 94Gi host memory).
DEVBOX = """
dra: {dra}
nodes:
  - name: box
    devices: 2
    deviceMemory: 24Gi
    hostMemory: 94Gi
    maxWorkersPerClaim: 4
events:
"""


def devbox(*events: str, dra: str = "instant") -> str:
    return DEVBOX.format(dra=dra) + "".join(f"  - {event}\n" for event in events)
