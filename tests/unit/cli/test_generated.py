"""Generated scenarios (bench/generate.py, small) replay into a self-consistent JSON document."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.generate import generate
from cli.render_json import to_document
from cli.replay import replay
from cli.scenario import build_scenario
from tests.unit.cli.conftest import Run


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_document_is_consistent(seed: int) -> None:
    scenario = generate(nodes=6, events=400, seed=seed, live=60)
    doc = to_document(replay(build_scenario(json.loads(json.dumps(scenario)))))
    nodes = {node["name"]: node for node in scenario["nodes"]}
    nodes.update({e["addNode"]["name"]: e["addNode"] for e in scenario["events"] if "addNode" in e})

    # workers and claims agree both ways
    for name, worker in doc["workers"].items():
        if worker["claim"] is None:
            assert worker["phase"] == "Pending" and worker["reason"]
        else:
            assert name in doc["claims"][worker["claim"]]["workers"]
            assert worker["devices"] == doc["claims"][worker["claim"]]["devices"]
    for claim_name, claim in doc["claims"].items():
        assert claim["workers"], f"{claim_name} has no workers but was not released"
        assert len(claim["workers"]) <= nodes[claim["node"]].get("maxWorkersPerClaim", 1)
        for worker in claim["workers"]:
            assert doc["workers"][worker]["claim"] == claim_name

    # no device promised twice
    used = Counter[str]()
    for claim in doc["claims"].values():
        used[claim["node"]] += claim["devices"]
    for node, devices in used.items():
        assert devices <= nodes[node]["devices"]

    # every event has a step, and every seat a step hands out names a real claim at that time
    assert len(doc["steps"]) == len(scenario["events"])
    for step in doc["steps"]:
        for seat in step.get("placed", []):
            assert seat["claim"].startswith("claim-")
            assert 1 <= seat["workers"] <= nodes[seat["node"]].get("maxWorkersPerClaim", 1)


def test_a_generated_scenario_through_the_command(run: Run) -> None:
    text = json.dumps(generate(nodes=4, events=200, seed=7, live=40))
    result = run(text, "-o", "json", name="generated.json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["steps"]) == 200


def test_generated_node_groups_are_opt_in_and_replay() -> None:
    plain = generate(nodes=6, events=300, seed=4, live=60)
    grouped = generate(nodes=6, events=300, seed=4, live=60, groups=1)
    assert "nodeGroups" not in plain and "at" not in plain["events"][0]
    assert [{k: v for k, v in e.items() if k != "at"} for e in grouped["events"]] == \
        plain["events"]
    doc = to_document(replay(build_scenario(json.loads(json.dumps(grouped)))))
    assert set(doc["nodeGroups"]["groups"]) == {"pool-0", "(fixed)"}
    # A contended fleet: the group is asked for nodes.
    assert doc["nodeGroups"]["groups"]["pool-0"]["asked"] >= 1
