"""hack/replay.py without a cluster: what it generates, what it refuses, how it compares."""

from __future__ import annotations

import pytest

from cli.scenario import build_scenario
from hack import replay


def test_generated_scenarios_are_valid_repeatable_and_varied() -> None:
    documents = [replay.generate(seed) for seed in range(40)]
    assert documents[3] == replay.generate(3)
    for document in documents:
        scenario = build_scenario(document)  # valid, or this raises
        assert scenario.dra == "instant"
        assert all(node.host_memory is not None for node in scenario.nodes)
    events = [next(iter(e)) for d in documents for e in d["events"]]
    assert {"arrive", "leave", "addNode"} <= set(events)
    roles = {tuple(n.get("roles", ())) for d in documents for n in d["nodes"]}
    assert len(roles) >= 3
    assert len({n["deviceMemory"] for d in documents for n in d["nodes"]}) >= 2
    # Some nodes are pod-limited, tightly enough to bind before devices or seats do.
    limits = [n.get("pods") for d in documents for n in d["nodes"]]
    assert {1, 2, 3} <= set(limits) and None in limits


def test_a_deferred_scenario_cannot_be_played() -> None:
    scenario = build_scenario({"dra": "deferred", "nodes": [], "events": []})
    with pytest.raises(replay.Unplayable, match="dra: deferred cannot be played"):
        replay.playable(scenario)


def test_the_simulated_view_compares_groups_not_claim_names() -> None:
    scenario = build_scenario({
        "nodes": [{"name": "g", "devices": 1, "deviceMemory": "80Gi", "hostMemory": "1Ti",
                   "maxWorkersPerClaim": 2}],
        "events": [{"arrive": {"name": n, "role": "trainer", "memory": "30Gi"}}
                   for n in ("a", "b", "c")]})
    view = replay.simulated_view(scenario, 3)
    assert view.groups == frozenset({(("a", "b"), "g", 1)})
    assert dict(view.phases) == {"a": "Placed", "b": "Placed",
                                 "c": "Pending:WaitingForCapacity"}
    cluster = replay.View(frozenset({(("a",), "g", 1)}), view.phases)
    assert cluster.differences(view) == ["simulate only: [a, b] on g (1 device)",
                                         "cluster only:  [a] on g (1 device)"]
    assert not view.differences(replay.simulated_view(scenario, 3))
