"""A node of mixed devices, from the cluster to the scenario and back: the reading groups
its devices by memory, ``snapshot`` writes them as ``deviceGroups``, the scenario reads
them strictly, and the replay cuts each claim from one group."""

from __future__ import annotations

from typing import Any

import pytest

from cli.document import ScenarioError
from cli.replay import replay
from cli.scenario import build_scenario
from cli.snapshot import snapshot_document, verify_snapshot
from controller.claims import build_claim, read_claim
from controller.fleet_rules import placement_claim
from controller.inspect_fleet import LiveFleet
from placement import GiB, NewClaim, Node
from tests.unit.controller.test_fleet_devices import device, nv_slice, read


def mixed_slice() -> dict[str, Any]:
    return nv_slice("mixed", [*(device(f"big-{i}", "gpu", "80Gi") for i in range(4)),
                              *(device(f"small-{i}", "gpu", "48Gi") for i in range(4))])


def test_the_reading_groups_a_node_s_devices_by_memory() -> None:
    node = read([mixed_slice()]).nodes["mixed"]
    assert node == Node.grouped("mixed", [(4, 48 * GiB), (4, 80 * GiB)],
                                host_memory=node.host_memory, pods=node.pods,
                                product=node.product)
    assert (node.devices, node.device_memory) == (8, 48 * GiB)


def test_a_claim_reads_back_in_the_group_its_ceiling_names() -> None:
    claim = build_claim("c", NewClaim("mixed", 1, 48 * GiB + 1, 80 * GiB), namespace="ns",
                        device_class="gpu", driver="gpu.nvidia.com", worker="w")
    assert "48Gi" not in claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0][
        "cel"]["expression"]  # the floor is a byte above it: no 48Gi device qualifies
    view = read_claim(claim, {})
    assert view.device_memory == 80 * GiB
    found = placement_claim(view, ())
    assert found is not None and found.device_memory == 80 * GiB


def test_snapshot_writes_a_mixed_node_as_device_groups_and_replays() -> None:
    live = LiveFleet(read([mixed_slice()]), {}, {})
    document = snapshot_document(live)
    (node,) = document["nodes"]
    assert node["deviceGroups"] == [{"devices": 4, "deviceMemory": "48Gi"},
                                    {"devices": 4, "deviceMemory": "80Gi"}]
    assert "devices" not in node and "deviceMemory" not in node
    assert build_scenario(document).nodes[0].to_node() == live.view.nodes["mixed"]
    assert verify_snapshot(live, document) == []


def scenario(node: dict[str, Any], *arrivals: tuple[str, str]) -> dict[str, Any]:
    return {"nodes": [node], "events": [
        {"arrive": {"name": name, "role": "trainer", "memory": memory}}
        for name, memory in arrivals]}


MIXED = {"name": "m", "deviceGroups": [{"devices": 4, "deviceMemory": "80Gi"},
                                       {"devices": 4, "deviceMemory": "48Gi"}]}


def test_a_scenario_node_of_device_groups_seats_each_worker_in_its_tightest_group() -> None:
    report = replay(build_scenario(scenario(MIXED, ("big", "60Gi"), ("small", "20Gi"))))
    seats = {state.name: state.devices for state in report.workers}
    assert seats == {"big": 1, "small": 1}  # as eight 48Gi devices, big took two


@pytest.mark.parametrize(("change", "where", "message"), [
    ({"devices": 8}, "nodes[0].devices",
     "node \"m\": give either deviceGroups or devices and deviceMemory, not both"),
    ({"deviceGroups": []}, "nodes[0].deviceGroups",
     "node \"m\": must be a list of {devices, deviceMemory}, got"),
    ({"deviceGroups": [{"devices": 4}]}, "nodes[0].deviceGroups[0]",
     "node \"m\": must be {devices: N, deviceMemory: SIZE}, got"),
    ({"deviceGroups": [{"devices": 0, "deviceMemory": "80Gi"}]},
     "nodes[0].deviceGroups[0].devices", "node \"m\": must be a whole number from 1 to"),
    ({"deviceGroups": [{"devices": 1, "deviceMemory": "lots"}]},
     "nodes[0].deviceGroups[0].deviceMemory", "node \"m\": "),
    ({"deviceGroups": [{"devices": 1, "deviceMemory": "80Gi"},
                       {"devices": 2, "deviceMemory": "80Gi"}]},
     "nodes[0].deviceGroups[1].deviceMemory", "node \"m\": 80Gi is listed twice"),
])
def test_bad_device_groups_name_the_node_and_the_field(change: dict[str, Any], where: str,
                                                       message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        build_scenario(scenario(dict(MIXED, **change)))
    assert raised.value.where == where
    assert raised.value.message.startswith(message)
