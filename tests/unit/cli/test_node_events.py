"""loseNode and finish in scenarios: read strictly, played by `simulate`, shown in the
table, the JSON document and the report."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli.main import main
from tests.unit.cli.conftest import Run

TWO_NODES = """
dra: instant
nodes:
  - {name: a, devices: 2, deviceMemory: 80Gi, maxWorkersPerClaim: 2}
  - {name: b, devices: 2, deviceMemory: 80Gi, maxWorkersPerClaim: 2}
events:
  - arrive: {name: w1, role: trainer, memory: 40Gi}
  - arrive: {name: w2, role: trainer, memory: 40Gi}
  - arrive: {name: w3, role: trainer, memory: 40Gi}
  - arrive: {name: w4, role: trainer, memory: 40Gi}
  - arrive: {name: w5, role: trainer, memory: 40Gi}
  - loseNode: b
  - expect: {worker: w3, node: a, sharesWith: w2}
  - expect: {worker: w4, phase: Pending, reason: WaitingForCapacity}
  - finish: w1
  - expect: {worker: w4, node: a, sharesWith: w5}
"""


def test_a_lost_nodes_workers_are_placed_again_oldest_first_in_the_table(run: Run) -> None:
    result = run(TWO_NODES)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "loseNode  b       lost: its 2 workers placed again, oldest first" in out
    assert "~ w3  left claim-w3, placed again: shares claim-w2 on a" in out
    assert "~ w4  left claim-w4, waits  WaitingForCapacity:" in out
    assert "finish    w1      completes and leaves claim-w1" in out
    assert "+ w4  was pending: shares claim-w1 on a" in out
    assert "expect   all 3 held" in out


def test_the_json_document_lists_each_moved_worker(run: Run) -> None:
    result = run(TWO_NODES, "-o", "json")
    assert result.exit_code == 0, result.output
    steps = json.loads(result.output)["steps"]
    lost = next(s for s in steps if s["event"] == "loseNode")
    assert lost["node"] == "b"
    assert [(m["worker"], m["claim"], m["released"], bool(m["placed"]))
            for m in lost["moved"]] == [("w3", "claim-w3", True, True),
                                        ("w4", "claim-w4", True, False)]
    assert lost["moved"][1]["reason"].startswith("WaitingForCapacity")
    finished = next(s for s in steps if s["event"] == "finish")
    assert finished["worker"] == "w1" and finished["placed"][0]["worker"] == "w4"


def test_the_report_and_the_turns_read_a_lost_node(tmp_path: Path) -> None:
    path = tmp_path / "lost.yaml"
    path.write_text("turns: {}\n" + TWO_NODES.replace(
        "events:\n", "events:\n").replace("  - loseNode: b", "  - {at: 10m, loseNode: b}")
        .replace("  - finish: w1", "  - {at: 20m, finish: w1}"))
    report = tmp_path / "lost.html"
    result = CliRunner().invoke(main, ["simulate", str(path), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert report.stat().st_size > 0


def test_losing_an_unknown_node_names_the_event(run: Run) -> None:
    result = run(TWO_NODES.replace("loseNode: b", "loseNode: c"))
    assert result.exit_code != 0
    assert 'events[5].loseNode: no node named "c"' in result.output


def test_the_new_events_are_read_strictly(run: Run) -> None:
    result = run(TWO_NODES.replace("loseNode: b", "loseNode: {name: b}"))
    assert result.exit_code != 0 and "events[5].loseNode" in result.output
    result = run(TWO_NODES.replace("  - finish: w1", "  - finish: nobody"))
    assert result.exit_code != 0 and "finish" in result.output
