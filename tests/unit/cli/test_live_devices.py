"""snapshot and explain on a node that publishes more than placement counts: the MIG
devices are said, with their reason, and the snapshot still replays as the cluster reads."""

from __future__ import annotations

from cli.explain import _explanation, _explanation_lines
from cli.scenario import build_scenario
from cli.snapshot import snapshot_document, verify_snapshot
from controller.inspect_fleet import LiveFleet
from placement import Request, Role
from placement.remedy import diagnose
from tests.unit.controller.fleet.test_devices import device, nv_slice, read


def mixed_node() -> LiveFleet:
    devices = [device("gpu-0", "gpu", "80Gi"), device("gpu-1", "gpu", "80Gi"),
               *(device(f"mig-1-{i}", "mig", "10Gi") for i in range(3))]
    return LiveFleet(read([nv_slice("a100", devices)]), {}, {})


def test_the_snapshot_of_a_mixed_node_says_what_it_leaves_out_and_replays() -> None:
    live = mixed_node()
    document = snapshot_document(live)
    (node,) = document["nodes"]
    assert (node["devices"], node["deviceMemory"]) == (2, "80Gi")
    assert node["leftOut"] == [{"devices": 3, "reason": "not selected by class gpu.nvidia.com"}]
    assert build_scenario(document).nodes[0].left_out == (
        (3, "not selected by class gpu.nvidia.com"),)
    assert verify_snapshot(live, document) == []


def test_explain_names_the_devices_placement_does_not_count() -> None:
    live = mixed_node()
    diagnosis = diagnose(Request("w", Role.TRAINER, 100 << 30), live.view.fleet)
    document = _explanation("w", "trainer", 100 << 30, "w", "Pending", None, None, live,
                            diagnosis)
    lines = _explanation_lines(document, diagnosis)
    at = lines.index("devices not counted:")
    assert lines[at + 1] == ("  node a100: 3 devices left out (mig-1-0, mig-1-1, mig-1-2): "
                             "not selected by class gpu.nvidia.com")
