"""A node of mixed devices, from the cluster to the scenario and back: the reading groups
its devices by memory, ``snapshot`` writes them as ``deviceGroups``, the scenario reads
them strictly, and the replay cuts each claim from one group."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli.document import ScenarioError
from cli.explain import _explanation, _explanation_lines
from cli.replay import replay
from cli.scenario import build_scenario
from cli.snapshot import snapshot_document, verify_snapshot
from controller.fleet.claims import build_claim, read_claim
from controller.fleet.rules import placement_claim
from controller.inspect_fleet import LiveFleet
from placement import GiB, NewClaim, Node, Request, Role
from placement.remedy import diagnose
from tests.unit.cli.conftest import Run
from tests.unit.controller.fleet.test_devices import device, nv_slice, read


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


# small takes one of plain's devices, other two of mixed's 80Gi ones: a 300Gi worker
# fits four 80Gi devices, never four 48Gi ones, and waits.
WAITING = """
nodes:
  - name: mixed
    deviceGroups: [{devices: 4, deviceMemory: 80Gi}, {devices: 4, deviceMemory: 48Gi}]
  - {name: plain, devices: 2, deviceMemory: 80Gi}
events:
  - arrive: {name: small, role: trainer, memory: 60Gi}
  - arrive: {name: other, role: trainer, memory: 150Gi}
  - arrive: {name: fft, role: trainer, memory: 300Gi}
"""


def test_the_table_prints_a_mixed_node_s_groups_largest_first(run: Run) -> None:
    result = run(WAITING)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()
            if line.startswith(("  mixed ", "  plain "))}
    assert "  4 x 80Gi + 4 x 48Gi  " in rows["mixed"]  # it read "8 x 48Gi"
    assert "  2 x 80Gi  " in rows["plain"]


def test_the_json_names_the_80gi_devices_a_waiting_worker_needs(run: Run) -> None:
    result = run(WAITING, "-o", "json")
    assert result.exit_code == 0, result.output  # growing a mixed node's 48Gi read failed
    document = json.loads(result.output)
    assert document["workers"]["fft"]["wouldSeat"] == {
        "kind": "freeDevices", "node": "mixed", "amount": 2,
        "text": "2 more free 80Gi devices on mixed (a node for both roles)"}


def test_explain_reads_a_mixed_node_group_by_group() -> None:
    live = LiveFleet(read([mixed_slice()]), {}, {})
    request = Request("fft", Role.TRAINER, 300 * GiB)
    diagnosis = diagnose(request, live.view.fleet)
    document = _explanation("fft", "trainer", 300 * GiB, "fft", "Pending", None, None, live,
                            diagnosis)
    (node,) = document["nodes"]
    assert node["deviceGroups"] == [
        {"devices": 4, "deviceMemory": "48Gi", "freeDevices": 4},
        {"devices": 4, "deviceMemory": "80Gi", "freeDevices": 4}]
    assert node["needs"] == 4
    lines = _explanation_lines(document, diagnosis)
    assert any(line.endswith("4 x 80Gi + 4 x 48Gi, 4 + 4 free; needs 4 of 80Gi: "
                             "a new claim fits") for line in lines)
