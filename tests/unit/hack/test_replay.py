"""hack/replay.py without a cluster: what it generates, what it refuses, how it compares."""

from __future__ import annotations

import pytest

from cli.replay import replay as run_replay
from cli.scenario import build_scenario
from hack import replay, replay_pool
from hack.fakenodes import fakenodes


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


def test_generated_scenarios_declare_a_node_group_only_when_asked() -> None:
    kinds = replay_pool.instance_types()
    for seed in range(1, 11):
        plain, grouped = replay.generate(seed), replay.generate(seed, groups=True)
        assert "nodeGroups" not in plain
        # The same scenario, with a group and a clock: it replays in the simulator.
        assert [{k: v for k, v in e.items() if k != "at"} for e in grouped["events"]] == \
            plain["events"] and grouped["nodes"] == plain["nodes"]
        scenario = build_scenario(grouped)
        assert [g.name for g in scenario.groups] == ["pool"] and scenario.times is not None
        assert run_replay(scenario).log.groups == ("pool",)
        # Its template is a Karpenter instance type, so the harness can play it live.
        kind = replay_pool.instance_type(scenario.groups[0].template)
        assert isinstance(kind, replay_pool.InstanceType) and kind.name in kinds
        assert replay.playable(scenario) is scenario


def _group_scenario(**changes: object) -> dict[str, object]:
    group: dict[str, object] = {
        "name": "g", "template": {"devices": 8, "deviceMemory": "80Gi", "hostMemory": "1Ti",
                                  "maxWorkersPerClaim": 2},
        "max": 2, "bootTime": "1m", "idleTime": "2m"}
    group.update(changes)
    return {"nodes": [{"name": "n0", "devices": 1, "deviceMemory": "80Gi"}],
            "nodeGroups": [group],
            "events": [{"at": 0, "arrive": {"name": "a", "role": "trainer", "memory": "80Gi"}},
                       {"at": 600, "arrive": {"name": "b", "role": "trainer", "memory": "80Gi"}},
                       {"at": 1200, "arrive": {"name": "c", "role": "trainer",
                                               "memory": "90Gi"}},
                       {"at": 1800, "leave": "c"}]}


@pytest.mark.parametrize(("changes", "why"), [
    ({"min": 1}, "min must be 0"),
    ({"template": {"devices": 2, "deviceMemory": "80Gi"}}, "matches no Karpenter instance type"),
    ({"template": {"devices": 8, "deviceMemory": "80Gi", "hostMemory": "64Gi"}},
     "hostMemory 64Gi is not gpu-8x80gi's 1Ti"),
    ({"idleTime": "5m"}, "events must be more than 720s apart"),
])
def test_a_group_the_cluster_cannot_play_is_refused_saying_why(
        changes: dict[str, object], why: str) -> None:
    with pytest.raises(replay.Unplayable, match=why):
        replay.playable(build_scenario(_group_scenario(**changes)))


def test_a_group_scenario_is_read_once_its_group_is_done_nodes_by_partition() -> None:
    scenario = build_scenario(_group_scenario())
    views = [replay.simulated_view(scenario, steps) for steps in range(1, 5)]
    # a on the fixed node; b on a group node that came up for it; c (2 devices) on another.
    assert views[0].groups == frozenset({(("a",), "n0", 1)}) and views[0].hosts == ()
    assert views[1].groups == frozenset({(("a",), "n0", 1), (("b",), "g/*", 1)})
    assert views[2].hosts == ((("b",), ("c",)),)  # c's 2 devices fit beside b's one
    assert dict(views[2].phases) == {"a": "Placed", "b": "Placed", "c": "Placed"}
    # c gone: its node still holds b, so the group keeps one node, and the marker is unseen.
    assert views[3].hosts == ((("b",),),) and "fidelity-marker" not in dict(views[3].phases)
    cluster = replay.View(views[2].groups, views[2].phases, ((("b",),), (("c",),)))
    assert cluster.differences(views[2]) == [
        "group nodes: simulate 1 {[b] [c]}, cluster 2 {[b]} {[c]}"]


def test_the_group_becomes_a_nodepool_of_its_instance_type_capped_at_max() -> None:
    group = build_scenario(_group_scenario()).groups[0]
    kind = replay_pool.instance_type(group.template)
    assert isinstance(kind, replay_pool.InstanceType)
    body = replay_pool.nodepool_body("fidelity-x", group, kind)
    spec = body["spec"]
    assert spec["limits"] == {"cpu": str(2 * kind.cpu)}
    assert spec["template"]["spec"]["requirements"][0]["values"] == ["gpu-8x80gi"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["openrl.io/max-workers-per-claim"] == "2"
    assert labels["openrl.io/autoscaled"] == "true"  # adopt.py plays it
    assert replay_pool.declared_pool(group.template) == "8x80Gi"


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


def test_some_generated_nodes_are_mixed_and_the_scenario_declares_what_is_left_out() -> None:
    documents = [replay.generate(seed) for seed in range(1, 21)]
    mixed = [node for d in documents
             for node in d["nodes"] + [e["addNode"] for e in d["events"] if "addNode" in e]
             if "leftOut" in node]
    assert 2 <= len(mixed) <= 10  # sometimes, not always
    spec = build_scenario({"nodes": [mixed[0]], "events": []}).nodes[0]
    tainted = sum(count for count, _ in spec.left_out)
    assert tainted >= 1 and spec.devices >= 1
    # The fake node publishes the declared devices beside its own, each tainted NoSchedule.
    fake = fakenodes.FakeNodes(None, [], fakenodes.PROFILES["gpu80"], "d.example.com", {})
    fake.profiles["n"] = replay.node_profile(spec)
    fake.node_uids["n"] = "uid"
    devices = fake.slice_body("n")["spec"]["devices"]
    assert len(devices) == spec.devices + tainted
    assert [d.get("taints", [{}])[0].get("effect") for d in devices] == \
        [None] * spec.devices + ["NoSchedule"] * tainted
    assert spec.left_out[0][1] == f"tainted {fakenodes.TAINT_KEY}:NoSchedule"


def test_without_left_out_devices_a_fake_node_publishes_what_it_always_did() -> None:
    spec = build_scenario({"nodes": [{"name": "n", "devices": 2, "deviceMemory": "80Gi"}],
                           "events": []}).nodes[0]
    assert replay.node_profile(spec).tainted == 0
    fake = fakenodes.FakeNodes(None, ["n"], fakenodes.PROFILES["devbox"], "d.example.com", {})
    fake.node_uids["n"] = "uid"
    assert all("taints" not in d for d in fake.slice_body("n")["spec"]["devices"])


def test_generated_scenarios_with_moves_are_playable_and_some_move() -> None:
    moved = 0
    for seed in range(1, 41):
        document = replay.generate(seed, moves=True)
        scenario = build_scenario(document)
        assert scenario.rebalance_after == replay.MOVES_AFTER
        assert replay.playable(scenario) is scenario
        arrivals = [e["arrive"] for e in document["events"] if "arrive" in e]
        assert any(a.get("movable") for a in arrivals) or len(arrivals) < 3
        moved += sum("a move" in replay.simulated_view(scenario, k).shows
                     for k in range(1, len(scenario.events) + 1))
    assert moved >= 5
    # The plain scenarios of the same seeds are what they always were.
    assert "rebalanceAfter" not in replay.generate(3)


def _moves_scenario(*times: float, **top: object) -> dict[str, object]:
    names = iter("abcdefgh")
    return {"rebalanceAfter": "2m", **top,
            "nodes": [{"name": "n0", "devices": 1, "deviceMemory": "80Gi",
                       "maxWorkersPerClaim": 2},
                      {"name": "n1", "devices": 1, "deviceMemory": "80Gi",
                       "maxWorkersPerClaim": 2}],
            "events": [{"at": at, "arrive": {"name": next(names), "role": "trainer",
                                             "memory": "30Gi", "movable": True}}
                       for at in times]}


@pytest.mark.parametrize(("times", "why"), [
    ((0, 120), "events at 0s and 120s are not more than rebalanceAfter"),
    ((0, 1800, 3600), "the events span 3600s: a worker moves at most once"),
])
def test_a_scenario_with_moves_the_cluster_cannot_play_is_refused_saying_why(
        times: tuple[float, ...], why: str) -> None:
    with pytest.raises(replay.Unplayable, match=why):
        replay.playable(build_scenario(_moves_scenario(*times)))


def test_a_step_is_read_once_the_moves_it_made_due_are_made() -> None:
    """a and b each alone, c joins a; b leaves: two minutes later c (or a) moves to the
    device b freed. The simulator is read after that, as the settled cluster is."""
    document = _moves_scenario(0, 300, 600)
    document["events"].append({"at": 900, "leave": "b"})  # type: ignore[attr-defined]
    scenario = build_scenario(document)
    view = replay.simulated_view(scenario, 4)
    assert "a move" in view.shows
    assert sorted(workers for workers, _, _ in view.groups) == [("a",), ("c",)]
    assert "a move" not in replay.simulated_view(scenario, 3).shows


def test_the_scenarios_strategy_is_played_and_owner_affinity_off_is_refused() -> None:
    document = {"strategy": "binpack",
                "nodes": [{"name": "n", "devices": 2, "deviceMemory": "80Gi",
                           "maxWorkersPerClaim": 2}],
                "events": [{"arrive": {"name": w, "role": "trainer", "memory": "30Gi"}}
                           for w in ("a", "b")]}
    scenario = replay.playable(build_scenario(document))
    assert str(scenario.policy.strategy) == "binpack"
    # The simulator is read under the scenario's strategy too: binpack joins first.
    assert replay.simulated_view(scenario, 2).groups == frozenset({(("a", "b"), "n", 1)})
    with pytest.raises(replay.Unplayable, match="ownerAffinity: false cannot be played"):
        replay.playable(build_scenario({**document, "ownerAffinity": False}))
