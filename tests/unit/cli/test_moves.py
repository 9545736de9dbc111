"""Moves in the commands: a scenario's rebalanceAfter, movable and restart, shown and compared."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from cli.main import main

# Node b's device frees at 10m; s1 and s4 take turns on node c's claim until then.
CROWDED = """
rebalanceAfter: 2m
turns: {}
nodes:
  - {name: a, devices: 1, deviceMemory: 80Gi, hostMemory: 512Gi, maxWorkersPerClaim: 2}
  - {name: b, devices: 1, deviceMemory: 80Gi, hostMemory: 512Gi, maxWorkersPerClaim: 2}
  - {name: c, devices: 1, deviceMemory: 80Gi, hostMemory: 512Gi, maxWorkersPerClaim: 2}
events:
  - {at: 0, arrive: {name: s1, role: sampler, memory: 40Gi, movable: true}}
  - {at: 0, arrive: {name: s2, role: sampler, memory: 40Gi, movable: true}}
  - {at: 0, arrive: {name: s3, role: sampler, memory: 40Gi, movable: true}}
  - {at: 1m, arrive: {name: s4, role: sampler, memory: 40Gi, movable: true, restart: 30s}}
  - {at: 10m, leave: s2}
  - {at: 1h, expect: {worker: s1, alone: true}}
"""


def run(tmp_path: Path, *args: str, text: str = CROWDED) -> Result:
    path = tmp_path / "moves.yaml"
    path.write_text(textwrap.dedent(text))
    return CliRunner().invoke(main, [args[0], str(path), *args[1:]])


def test_simulate_shows_the_move_at_its_time_with_its_reason_and_cost(tmp_path: Path) -> None:
    result = run(tmp_path, "simulate")
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.stdout.splitlines() if " move " in line]
    assert "12m" in line and "s1" in line and "OwnDevices" in line and "restarts in 1m" in line
    document = json.loads(run(tmp_path, "simulate", "-o", "json").stdout)
    (move,) = [step for step in document["steps"] if step["event"] == "move"]
    assert (move["at"], move["worker"], move["claim"], move["restartSeconds"]) == (
        720.0, "s1", "claim-s1", 60.0)
    assert move["placed"][0]["node"] == "b" and move["placed"][0]["newClaim"]


def test_a_move_costs_its_restart_in_the_served_share(tmp_path: Path) -> None:
    document = json.loads(run(tmp_path, "simulate", "-o", "json").stdout)
    s1: dict[str, Any] = document["turns"]["workers"]["s1"]
    # s1 shared from 1m to 12m: it wanted the turn all that time and got about half.
    assert 0.4 < s1["servedShare"] < 0.6


def test_compare_counts_stranded_device_hours_and_moves(tmp_path: Path) -> None:
    result = run(tmp_path, "compare", "--set", "rebalanceAfter=0,2m", "-o", "json")
    assert result.exit_code == 0, result.output
    off, on = json.loads(result.stdout)["variants"]
    # b's device free from 10m to the end at 1h while s1 and s4 shared: 50 minutes.
    assert off["moves"] == {"strandedDeviceHours": 0.833, "moves": 0, "mostInAnHour": 0,
                            "placedServedShare": off["moves"]["placedServedShare"]}
    assert on["moves"]["strandedDeviceHours"] == 0.033  # two minutes, then s1 moved
    assert (on["moves"]["moves"], on["moves"]["mostInAnHour"]) == (1, 1)
    assert on["moves"]["placedServedShare"] > off["moves"]["placedServedShare"]
    table = run(tmp_path, "compare", "--set", "rebalanceAfter=0,2m").stdout
    assert "stranded device-hours" in table and "most/hour" in table


def test_moves_need_a_clock_and_instant_allocation(tmp_path: Path) -> None:
    untimed = "rebalanceAfter: 2m\nnodes: []\nevents:\n  - arrive: {name: w, role: trainer, " \
              "memory: 1Gi}\n"
    result = run(tmp_path, "simulate", text=untimed)
    assert result.exit_code == 2 and "rebalanceAfter" in result.output
    assert "need a clock" in result.output
    deferred = "dra: deferred\n" + CROWDED
    result = run(tmp_path, "simulate", text=deferred)
    assert result.exit_code == 2 and "dra: instant" in result.output
    result = run(tmp_path, "compare", "--set", "rebalanceAfter=0,soon")
    assert result.exit_code != 0 and "rebalanceAfter" in result.output
