"""An arrival's `devices` key: an exact device count, read strictly and played by `simulate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from cli.scenario import ScenarioError, load_scenario

FLEET = """
nodes:
  - {name: gpu-8, devices: 8, deviceMemory: 80Gi}
events:
  - arrive: {name: tp, role: sampler, memory: 100Gi, devices: 4}
  - arrive: {name: plain, role: sampler, memory: 100Gi}
  - arrive: {name: wide, role: sampler, memory: 100Gi, devices: 16}
  - expect: {worker: tp, devices: 4}
  - expect: {worker: plain, devices: 2}
"""


def simulate(tmp_path: Path, text: str, *options: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["simulate", str(path), *options])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_an_arrival_naming_its_devices_gets_a_claim_of_that_many(tmp_path: Path) -> None:
    table = simulate(tmp_path, FLEET)
    assert "new claim claim-tp on gpu-8 (4 devices)" in table
    assert "new claim claim-plain on gpu-8 (2 devices)" in table
    assert ("waits  NoCapacity: devices: 16: no sampler node has 16 devices of at least "
            "6.25Gi (100Gi over 16); the largest sampler pool offers 8 x 80Gi") in table
    assert "expect   all 2 held" in table
    workers = json.loads(simulate(tmp_path, FLEET, "-o", "json"))["workers"]
    assert (workers["tp"]["devices"], workers["tp"]["memoryPerDevice"]) == (4, "25Gi")
    # No single change seats it: no node could ever have 16 devices (its memory alone
    # would fit 2, which is not what it asks).
    assert workers["wide"]["phase"] == "Pending" and workers["wide"]["wouldSeat"] is None


@pytest.mark.parametrize(("value", "message"), [
    ("0", 'worker "tp": must be at least 1, got 0'),
    ("-3", 'worker "tp": must be at least 1, got -3'),
    ("2.5", 'worker "tp": must be a whole number, got 2.5'),
    ("'4'", 'worker "tp": must be a whole number, got "4"'),
    ("true", 'worker "tp": must be a whole number, got true'),
])
def test_a_bad_device_count_is_named_with_its_worker_and_key(value: str, message: str) -> None:
    with pytest.raises(ScenarioError) as error:
        load_scenario(FLEET.replace("devices: 4}", f"devices: {value}}}", 1))
    assert error.value.where == "events[0].arrive.devices"
    assert message in str(error.value)
