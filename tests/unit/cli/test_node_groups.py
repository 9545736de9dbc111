"""Node groups in scenarios: read strictly, played by `simulate` (table and JSON), and
compared under `compare --set strategy=spread,binpack`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.generate import generate
from cli.eventlog import (
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    EventLog,
    LeaveStep,
    RemoveNodeStep,
    walk,
)
from cli.fleet_use import FIXED, FleetUse, Paying
from cli.main import main
from cli.render_json import _ending_fleet
from cli.replay import replay
from cli.scenario import build_scenario
from cli.timeline import fleet_of, timeline_of
from cli.waits import WaitBook, wait_stats
from placement import Fleet
from placement.simulator.simulation import Placement
from tests.unit.cli.conftest import Run

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "autoscaled.yaml"

# One node always up, four devices, no sharing; a node joins 5 minutes after it is asked.
POOL = """
nodeGroups:
  - name: gpu
    template: {devices: 4, deviceMemory: 80Gi, hostMemory: 1Ti}
    min: 1
    max: 2
    bootTime: 5m
    idleTime: 10m
events:
  - {at: 1m, arrive: {name: big, role: trainer, memory: 300Gi}}
  - {at: 2m, arrive: {name: wide, role: trainer, memory: 140Gi}}
  - expect: {worker: wide, phase: Pending, reason: "node gpu-2 of group gpu is on its way"}
  - {at: 8m, expect: {worker: wide, node: gpu-2}}
  - {at: 20m, leave: wide}
  - {at: 1h, leave: big}
"""


def test_a_waiting_worker_gets_a_node_that_leaves_once_idle(run: Run) -> None:
    result = run(POOL)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # The autoscaler's steps sit among the events at their times, without a number.
    assert any(line.split()[:3] == ["2m", "askNode", "gpu-2"] for line in lines)
    assert any(line.split()[:3] == ["7m", "nodeUp", "gpu-2"] for line in lines)
    assert any(line.split()[:3] == ["30m", "nodeDown", "gpu-2"] for line in lines)
    assert "Node groups" in result.output
    assert "gpu nodes over time: 1 at 0s, 2 at 7m, 1 at 30m" in result.output


def test_the_json_says_nodes_over_time_gpu_hours_and_waits(run: Run) -> None:
    result = run(POOL, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    groups = document["nodeGroups"]
    assert groups["groups"]["gpu"]["nodes"] == [[0, 1], [420, 2], [1800, 1]]
    assert groups["groups"]["gpu"] | {"nodes": None} == {
        "nodes": None, "peak": 2, "asked": 1, "joined": 1, "removed": 1,
        # gpu-1 all hour (4 devices) and gpu-2 from 7m to 30m (4 devices, 23 minutes).
        "gpuHours": pytest.approx(4 * 1 + 4 * 23 / 60)}
    assert groups["nodesPeak"] == 2 and groups["gpuHours"] == pytest.approx(4 + 4 * 23 / 60)
    assert groups["waits"] | {"median": None} == {
        "workers": 2, "neverSeated": 0, "median": None, "p95": 300, "max": 300}
    events = [step["event"] for step in document["steps"]]
    assert events[:4] == ["arrive", "arrive", "askNode", "expect"]
    assert "nodeUp" in events and events[-2:] == ["nodeDown", "leave"]


def test_an_expectation_naming_a_group_node_not_there_fails_rather_than_errs(run: Run) -> None:
    result = run(POOL.replace("{at: 8m, expect: {worker: wide, node: gpu-2}}",
                              "{at: 8m, expect: {worker: wide, node: gpu-7}}"))
    assert result.exit_code == 1, result.output
    assert "node: expected gpu-7, saw Placed on claim-wide on gpu-2" in result.output


@pytest.mark.parametrize(("old", "new", "where", "message"), [
    ("min: 1", "min: 3", "nodeGroups[0].max", 'group "gpu": must be at least min (3), got 2'),
    ("min: 1", "min: -1", "nodeGroups[0].min", 'group "gpu": must be at least 0, got -1'),
    ("bootTime: 5m", "bootTime: 5q", "nodeGroups[0].bootTime",
     'group "gpu": "5q" is not a duration'),
    ("{devices: 4,", "{name: x, devices: 4,", "nodeGroups[0].template.name",
     'group "gpu": a group names its nodes'),
    ("deviceMemory: 80Gi", "deviceMemory: 80Gb", "nodeGroups[0].template.deviceMemory",
     'group "gpu": "80Gb"'),
    ("idleTime: 10m", "", "nodeGroups[0].idleTime", 'group "gpu": is required'),
    ("template: {devices: 4, deviceMemory: 80Gi, hostMemory: 1Ti}", "template: 5",
     "nodeGroups[0].template", 'group "gpu": must be a mapping of a node\'s keys but its name'),
])
def test_a_bad_group_is_named_with_its_field(run: Run, old: str, new: str, where: str,
                                             message: str) -> None:
    result = run(POOL.replace(old, new, 1))
    assert result.exit_code == 2
    assert f"scenario.yaml: {where}: {message}" in result.output


def test_node_groups_need_a_clock_and_their_node_names(run: Run) -> None:
    untimed = POOL.replace("{at: 1m, ", "{").replace("{at: 2m, ", "{").replace(
        "{at: 8m, expect: {worker: wide, node: gpu-2}}", "expect: {worker: wide}").replace(
        "{at: 20m, ", "{").replace("{at: 1h, ", "{")
    result = run(untimed)
    assert result.exit_code == 2 and "nodeGroups: node groups need a clock" in result.output
    taken = run("nodes: [{name: gpu-3, devices: 1, deviceMemory: 80Gi}]\n" + POOL)
    assert taken.exit_code == 2
    assert 'nodes[0].name: node "gpu-3" takes a name of group "gpu"' in taken.output


def test_binpack_pays_for_fewer_nodes_and_gpu_hours_than_spread_on_the_example() -> None:
    # The example's story: binpack keeps h100-1's devices free for the wide workers, where
    # spread's samplers take them and each wide worker waits for a node of its own.
    result = CliRunner().invoke(main, ["compare", str(EXAMPLE), "--set",
                                       "strategy=spread,binpack", "-o", "json"])
    assert result.exit_code == 0, result.output
    spread, binpack = json.loads(result.output)["variants"]
    assert (spread["variant"], binpack["variant"]) == ("strategy=spread", "strategy=binpack")
    assert binpack["nodesPeak"] < spread["nodesPeak"]
    assert binpack["gpuHours"] < spread["gpuHours"]
    assert binpack["waits"]["p95"] <= spread["waits"]["p95"]
    assert binpack["placed"] == spread["placed"] and binpack["pending"] == 0
    table = CliRunner().invoke(main, ["compare", str(EXAMPLE), "--set",
                                      "strategy=spread,binpack"])
    assert "nodes (peak)" in table.output and "GPU-hours" in table.output


def test_a_node_key_in_compare_reaches_the_group_templates(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(POOL)
    result = CliRunner().invoke(main, ["compare", str(path), "--set", "devices=4,8",
                                       "--nodes", "gpu-*", "-o", "json"])
    assert result.exit_code == 0, result.output
    four, eight = json.loads(result.output)["variants"]
    # Eight devices seat both workers on gpu-1: no node is asked for.
    assert (four["nodesPeak"], eight["nodesPeak"]) == (2, 1)


def test_the_report_draws_nodes_over_time_and_prices_them(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page, compared = tmp_path / "day.html", tmp_path / "compared.html"
    simulate = CliRunner().invoke(main, ["simulate", str(EXAMPLE), "--report", str(page)])
    assert simulate.exit_code == 0, simulate.output
    text = page.read_text()
    assert "<h2>Node groups</h2>" in text and 'id="figure-nodes"' in text
    assert "2 nodes at the peak; 216.5 GPU-hours paid for" in text
    compare = CliRunner().invoke(main, ["compare", str(EXAMPLE), "--set",
                                        "strategy=spread,binpack", "--report", str(compared)])
    assert compare.exit_code == 0, compare.output
    text = compared.read_text()
    assert "<th>nodes (peak)</th><th>GPU-hours</th>" in text and 'id="figure-nodes"' in text


def test_a_lost_group_node_is_replaced_for_the_workers_it_held(run: Run) -> None:
    result = run("""
        nodeGroups:
          - {name: gpu, template: {devices: 4, deviceMemory: 80Gi}, min: 1, max: 2,
             bootTime: 1m, idleTime: 5m}
        events:
          - {at: 1m, arrive: {name: a, role: trainer, memory: 300Gi}}
          - {at: 2m, loseNode: gpu-1}
          - expect: {worker: a, phase: Pending, reason: "node gpu-2 of group gpu is on its way"}
          - {at: 4m, expect: {worker: a, node: gpu-2}}
        """, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert [s["event"] for s in document["steps"]] == [
        "arrive", "loseNode", "askNode", "expect", "nodeUp", "expect"]
    assert document["nodeGroups"]["groups"]["gpu"]["nodes"] == [[0, 1], [120, 0], [180, 1]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_brief_reading_agrees_with_the_timeline(seed: int) -> None:
    # fleet_of (what the table and JSON read) against timeline_of, the full reading.
    document = generate(nodes=8, events=600, seed=seed, live=80, groups=2)
    document["events"].insert(300, {"at": document["events"][300]["at"],
                                    "loseNode": document["nodes"][0]["name"]})
    log = replay(build_scenario(document)).log
    brief, full = fleet_of(log), timeline_of(log)
    assert brief.groups == full.fleet and brief.nodes_peak == full.nodes_peak
    assert brief.waits == full.summary().waits
    assert brief.gpu_hours == full.summary().gpu_hours


class _PlainReader:
    """The plain reading ``fleet_of`` stands for (``cli.eventlog.walk`` to a reader keeping
    a ``Paying`` and a ``WaitBook``), kept to check the one loop against."""

    def __init__(self, log: EventLog) -> None:
        self.paying = Paying(log)
        self.book = WaitBook()

    def arrive(self, step: ArriveStep, at: float) -> None:
        self.book.arrived(step, at)

    def leave(self, step: LeaveStep, at: float) -> None:
        if step.claim is None:
            self.book.ended(step.worker, None, at)

    def allocate(self, step: AllocateStep, at: float) -> None:
        pass

    def add_node(self, step: AddNodeStep, at: float) -> None:
        self.paying.joined(step.node, step.group or FIXED, step.link.devices, at)

    def remove_node(self, step: RemoveNodeStep, at: float) -> None:
        self.paying.left(step.node, at)

    def seat(self, seat: Placement, at: float) -> None:
        self.book.ended(seat.worker, at, at)

    def stepped(self, at: float) -> None:
        pass


def _plain_fleet_of(log: EventLog) -> FleetUse:
    reader = _PlainReader(log)
    walk(log, reader)
    end = log.clock[-1] if log.steps else 0.0
    return FleetUse(reader.paying.uses(log, end), reader.paying.peak,
                    wait_stats(reader.book.close(end)))


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=2, max_value=10),
       st.integers(min_value=1, max_value=3), st.lists(st.floats(0, 1), max_size=2))
def test_the_one_loop_reads_as_the_plain_walk(seed: int, nodes: int, groups: int,
                                             losses: list[float]) -> None:
    # Every field, types included (an int wait and a float one print differently).
    document = generate(nodes=nodes, events=300, seed=seed, live=40, groups=groups)
    for lost, share in enumerate(losses):  # fixed nodes lost along the way
        where = int(share * (len(document["events"]) - 1))
        document["events"].insert(where, {"at": document["events"][where]["at"],
                                          "loseNode": document["nodes"][lost]["name"]})
    log = replay(build_scenario(document)).log
    fast, plain = fleet_of(log), _plain_fleet_of(log)
    assert fast == plain
    assert repr(fast) == repr(plain)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=2, max_value=8),
       st.integers(min_value=0, max_value=2), st.sampled_from(["spread", "binpack"]),
       st.sampled_from(["instant", "deferred"]), st.booleans())
def test_the_ending_fleet_built_claims_first_is_the_plain_build(
        seed: int, nodes: int, groups: int, strategy: str, dra: str, lose: bool) -> None:
    # wouldSeat's fleet takes the claims in before the nodes; the plain build adds each
    # node, then each claim. Same books, same index (so the same decisions).
    document = generate(nodes=nodes, events=300, seed=seed, live=40, groups=groups)
    document["strategy"], document["dra"] = strategy, dra
    if lose:
        document["events"].insert(150, {**({"at": document["events"][150]["at"]}
                                            if groups else {}),
                                        "loseNode": document["nodes"][0]["name"]})
    report = replay(build_scenario(document))
    fast = _ending_fleet(report)
    plain = Fleet((summary.node for summary in report.nodes), report.claims)
    assert fast.nodes == plain.nodes and fast.claims == plain.claims
    assert fast.index.describe() == plain.index.describe()
    for node in plain.nodes:
        assert fast.free_by_group(node.name) == plain.free_by_group(node.name)
        assert fast.parked_load(node.name) == plain.parked_load(node.name)
