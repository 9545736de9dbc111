"""simulate plays the turns with the node agent's own policy, and says so in every output."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import astuple
from pathlib import Path

import pytest
from click.testing import CliRunner

import placement.turns
import placement.turns.play
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

    monkeypatch.setattr(placement.turns.play, "TurnGroup", Watched)
    turns = replay(load_scenario(SHARED)).turns
    # The group runs on the player's clock: whole nanoseconds.
    assert len(made) == 1 and made[0].settings.quantum == 60 * placement.turns.play.NS
    assert turns is not None and turns.claims[0].switches > 50


def test_nothing_else_in_cli_or_placement_decides_a_turn() -> None:
    # The policy's module is imported by the player alone; the CLI reaches it only there.
    importers = []
    for package in ("cli", "placement"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.parent.name == "turns" and path.stem != "play":
                continue  # the policy's own package
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module in (
                        "placement.turns", "placement.turns.policy",
                        "placement.turns.group"):
                    names = {alias.name for alias in node.names}
                    if names - {"TurnSettings"}:
                        importers.append(path.relative_to(ROOT).as_posix())
    assert importers == ["placement/turns/play.py"]


def test_the_table_json_and_compare_show_the_turns() -> None:
    runner = CliRunner()
    path = ROOT / "examples" / "sharing.yaml"
    table = runner.invoke(main, ["simulate", str(path)])
    assert table.exit_code == 0, table.output
    assert "Turns" in table.output and "resident share" in table.output
    doc = json.loads(runner.invoke(main, ["simulate", "-o", "json", str(path)]).output)
    assert set(doc["turns"]) == {"settings", "switches", "switchingShare", "waits", "claims",
                                 "workers", "owners", "servedShare", "usefulShare"}
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


TWO_NODES = """
turns: {quantum: 1m}
nodes:
  - {name: quick, devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2}
  - {name: slow, devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2,
     turns: {quantum: 10m, hostToDeviceBandwidth: 1GB/s}}
events:
  - {at: 0, arrive: {name: a, role: sampler, memory: 10G, owner: alice}}
  - {arrive: {name: b, role: sampler, memory: 10G, owner: bob}}
  - {arrive: {name: c, role: sampler, memory: 10G, owner: alice}}
  - {arrive: {name: d, role: sampler, memory: 10G, owner: bob}}
  - {at: 2h, leave: a}
"""


def test_a_nodes_own_turns_play_on_its_claims_alone() -> None:
    turns = replay(load_scenario(TWO_NODES)).turns
    assert turns is not None
    by_node = {claim.node: claim for claim in turns.claims}
    quick, slow = by_node["quick"], by_node["slow"]
    # A ten times longer quantum: about a tenth of the switches; each switch parks and
    # restores 10GB over 1GB/s instead of the default link.
    assert 8 < quick.switches / slow.switches < 12
    assert slow.switching / slow.switches > 19
    assert quick.switching / quick.switches < 5


def test_the_json_names_each_nodes_own_settings(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_NODES)
    result = CliRunner().invoke(main, ["simulate", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    settings = json.loads(result.output)["turns"]["settings"]
    assert settings["quantum"] == 60.0
    # Only the node with its own; its other keys are the scenario's.
    assert settings["nodes"] == {"slow": {"quantum": 600.0, "minResident": 10.0,
                                          "yieldGrace": 30.0}}


@pytest.mark.parametrize(("turns", "message"), [
    ("{quantom: 1m}", r'nodes\[1\]\.turns: node "slow": unknown key "quantom"'),
    ("{yieldGrace: soon}", r'nodes\[1\]\.turns: node "slow": yieldGrace: "soon" is not'),
    ("{hostToDeviceBandwidth: fast}",
     r'nodes\[1\]\.turns: node "slow": hostToDeviceBandwidth: "fast" is not a bandwidth'),
    ("{minResident: 5m}", r'nodes\[1\]\.turns: node "slow": minResident \(300.0s\) must not '
                          r"exceed quantum \(60.0s\)"),
    ("soon", r'nodes\[1\]\.turns: node "slow": must be a mapping'),
])
def test_a_bad_node_turn_setting_names_the_node_and_the_key(turns: str, message: str) -> None:
    text = TWO_NODES.replace("turns: {quantum: 10m, hostToDeviceBandwidth: 1GB/s}",
                             f"turns: {turns}")
    with pytest.raises(ScenarioError, match=message):
        load_scenario(text)


def test_compare_says_which_node_a_variant_leaves_without_a_policy(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(TWO_NODES.replace("turns: {quantum: 10m,",
                                      "turns: {minResident: 5m, quantum: 10m,"))
    runner = CliRunner()
    fine = runner.invoke(main, ["compare", str(path), "--set", "yieldGrace=10s,20s"])
    assert fine.exit_code == 0, fine.output
    # The node keeps minResident 5m; a scenario quantum of 3m is fine for it (its own
    # quantum is 10m), so only a node left without a quantum of its own could fail.
    result = runner.invoke(main, ["compare", str(path), "--set", "quantum=1m,3m"])
    assert result.exit_code == 0, result.output
    path.write_text(TWO_NODES.replace("turns: {quantum: 10m,", "turns: {minResident: 5m,")
                    .replace("turns: {quantum: 1m}", "turns: {quantum: 10m}"))
    result = runner.invoke(main, ["compare", str(path), "--set", "quantum=10m,3m"])
    assert result.exit_code == 2
    assert '--set quantum: "3m"' in result.output and 'node "slow"' in result.output


@pytest.mark.parametrize("example", ["sharing.yaml", "generated"])
def test_counted_cycles_give_every_worker_owner_and_claim_what_playing_every_switch_does(
        example: str) -> None:
    from bench.generate import generate
    from cli.turns import play_turns

    if example == "generated":
        document = generate(30, 600, seed=3)
        for index, event in enumerate(document["events"]):
            event["at"] = index * 20
        text = json.dumps({**document, "turns": {"quantum": "90s"}})
    else:
        text = (ROOT / "examples" / example).read_text()
    scenario = load_scenario(text)
    report = replay(scenario)
    assert scenario.turns is not None
    counted = play_turns(report.log)
    played = play_turns(report.log, compress=False)
    assert counted.claims and sum(c.switches for c in counted.claims) > 100

    def same(a: object, b: object) -> bool:
        # Seconds summed in another order differ in the last bits; counts must not at all.
        if isinstance(a, float) and isinstance(b, float):
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
        if isinstance(a, tuple) and isinstance(b, tuple):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    for mine, theirs in [(counted.workers, played.workers), (counted.owners, played.owners)]:
        assert [astuple(row) for row in mine] == [astuple(row) for row in theirs] or all(
            same(astuple(x), astuple(y)) for x, y in zip(mine, theirs, strict=True))
    for x, y in zip(counted.claims, played.claims, strict=True):
        assert (x.claim, x.switches, x.last) == (y.claim, y.switches, y.last)
        assert same(x.switching, y.switching)
    assert same(counted.summary().median_wait, played.summary().median_wait)


SLOW_LINK = """
turns: {quantum: 1m, minResident: 10s, yieldGrace: 30s}
nodes:
  - {name: slow, devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2,
     hostToDeviceBandwidth: 25GB/s, turns: {hostToDeviceBandwidth: 1GB/s}}
events:
  - {at: 0, arrive: {name: big, role: sampler, memory: 10G, owner: alice}}
  - {at: 0, arrive: {name: small, role: sampler, memory: 5G, owner: bob}}
  - {at: 1h, leave: big}
"""


def test_a_node_at_1gbs_prices_its_switches_alike_in_the_report_the_table_and_the_json(
        tmp_path: Path) -> None:
    """The node's own turns bandwidth is what its switches cost everywhere: one switch
    parks 10G and restores 5G (or the reverse), 15 s at 1GB/s, not 0.6 s at 25GB/s."""
    import click

    from cli.render_json import to_document
    from cli.render_table import render_table
    from cli.report import write_report

    scenario = load_scenario(SLOW_LINK)
    report = replay(scenario)
    [(claim, played)] = to_document(report)["turns"]["claims"].items()
    switches, seconds = played["switches"], played["switchingSeconds"]
    # Every switch costs 15 s; besides them, only the first restore (10 s) and a park
    # cut short by the end.
    assert switches > 20
    assert 15 * switches + 10 <= seconds <= 15 * switches + 10 + 10
    table = [click.unstyle(line).split() for line in render_table(report, "slow")]
    assert [claim, "slow", str(switches), f"{played['switchingShare']:.1%}",
            f"{played['usefulShare']:.1%}"] in table
    page_path = tmp_path / "page.html"
    write_report(page_path, "slow", scenario, report)
    page = page_path.read_text()
    row = page[page.index(f"<tr><td>{claim}</td><td>slow</td>"):]
    row = row[:row.index("</tr>")]
    assert "<td>1GB/s</td><td>15s</td>" in row
