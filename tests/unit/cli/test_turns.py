"""simulate plays the turns with the node agent's own policy, and says so in every output."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import placement.turnplay
import placement.turns
from cli.main import main
from cli.replay import replay
from cli.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[3]
SHARED = """
turns: {quantum: 1m}
nodes: [{name: box, devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2}]
events:
  - {at: 0, arrive: {name: a, role: sampler, memory: 10Gi, owner: alice}}
  - {arrive: {name: b, role: sampler, memory: 10Gi, owner: bob}}
  - {at: 1h, leave: a}
"""


def test_the_turns_are_decided_by_placement_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[placement.turns.TurnGroup] = []

    class Watched(placement.turns.TurnGroup):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(placement.turnplay, "TurnGroup", Watched)
    turns = replay(load_scenario(SHARED)).turns
    assert len(made) == 1 and made[0].settings.quantum == 60
    assert turns is not None and turns.claims[0].switches > 50


def test_nothing_else_in_cli_or_placement_decides_a_turn() -> None:
    # The policy's module is imported by the player alone; the CLI reaches it only there.
    importers = []
    for package in ("cli", "placement"):
        for path in (ROOT / package).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "placement.turns":
                    names = {alias.name for alias in node.names}
                    if names - {"TurnSettings"}:
                        importers.append(f"{package}/{path.name}")
    assert importers == ["placement/turnplay.py"]


def test_the_table_json_and_compare_show_the_turns() -> None:
    runner = CliRunner()
    path = ROOT / "examples" / "sharing.yaml"
    table = runner.invoke(main, ["simulate", str(path)])
    assert table.exit_code == 0, table.output
    assert "Turns" in table.output and "resident share" in table.output
    doc = json.loads(runner.invoke(main, ["simulate", "-o", "json", str(path)]).output)
    assert set(doc["turns"]) == {"settings", "switches", "switchingShare", "waits", "claims",
                                 "workers", "owners"}
    compared = runner.invoke(main, ["compare", str(path), "--set", "quantum=30s,10m",
                                    "-o", "json"])
    rows = json.loads(compared.output)["variants"]
    # A longer quantum: fewer switches, longer waits for a turn.
    assert rows[0]["turns"]["switches"] > rows[1]["turns"]["switches"]
    assert rows[0]["turns"]["waits"]["max"] < rows[1]["turns"]["waits"]["max"]


def test_compare_without_a_clock_says_turns_need_one() -> None:
    result = CliRunner().invoke(main, ["compare", str(ROOT / "examples" / "devbox.yaml"),
                                       "--set", "quantum=30s,2m"])
    assert result.exit_code == 0 and "they need a clock" in result.output


@pytest.mark.parametrize(("change", "message"), [
    ("turns: {quantum: 1m}", None),
    ("turns: {quantum: 5s, minResident: 10s}",
     r"turns: minResident \(10.0s\) must not exceed quantum"),
    ("turns: {quantom: 1m}", "turns: unknown key"),
    ("turns: {quantum: soon}", 'turns: quantum: "soon" is not a duration'),
])
def test_bad_turn_settings_name_the_key(change: str, message: str | None) -> None:
    text = SHARED.replace("turns: {quantum: 1m}", change)
    if message is None:
        load_scenario(text)
        return
    with pytest.raises(ScenarioError, match=message):
        load_scenario(text)


def test_bad_demand_names_the_event() -> None:
    text = SHARED.replace("owner: bob}", "owner: bob, demand: [{from: 10m, to: 5m}]}")
    with pytest.raises(ScenarioError, match=r"events\[1\]\.arrive\.demand: \[0\] ends before"):
        load_scenario(text)


def test_compare_refuses_a_node_pattern_for_a_turn_setting() -> None:
    result = CliRunner().invoke(main, ["compare", str(ROOT / "examples" / "sharing.yaml"),
                                       "--set", "quantum=1m", "--nodes", "x*"])
    assert result.exit_code == 2 and "--nodes does not apply" in result.output
