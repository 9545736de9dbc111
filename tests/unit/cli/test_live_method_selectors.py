"""snapshot and explain on a node of mixed memory whose class selects by a method call on
the memory (``memory.compareTo(...)``): the smaller GPU is named as left out, the larger
ones count, and the snapshot replays as the cluster reads."""

from __future__ import annotations

from cli.explain import _explanation, _explanation_lines
from cli.snapshot import snapshot_document, verify_snapshot
from controller.inspect_fleet import LiveFleet
from placement import Request, Role
from placement.remedy import diagnose
from tests.unit.controller.fleet.test_devices import device, nv_slice, read

BIG = {"metadata": {"name": "big.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression":
       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0"}}]}}
REASON = "not selected by class big.nvidia.com"


def mixed_memory() -> LiveFleet:
    # The small one between the large ones: no verdict may be carried from the first.
    devices = [device("gpu-0", "gpu", "81559Mi"), device("gpu-1", "gpu", "46068Mi"),
               device("gpu-2", "gpu", "81559Mi")]
    return LiveFleet(read([nv_slice("mixed", devices)], device_class=BIG), {}, {})


def test_the_snapshot_counts_the_large_gpus_and_says_the_small_one_is_left_out() -> None:
    live = mixed_memory()
    document = snapshot_document(live)
    (node,) = document["nodes"]
    assert (node["devices"], node["deviceMemory"]) == (2, "81559Mi")
    assert node["leftOut"] == [{"devices": 1, "reason": REASON}]
    assert verify_snapshot(live, document) == []


def test_explain_names_the_gpu_the_memory_selector_leaves_out() -> None:
    live = mixed_memory()
    diagnosis = diagnose(Request("w", Role.TRAINER, 100 << 30), live.view.fleet)
    document = _explanation("w", "trainer", 100 << 30, "w", "Pending", None, None, live,
                            diagnosis)
    lines = _explanation_lines(document, diagnosis)
    at = lines.index("devices not counted:")
    assert lines[at + 1] == f"  node mixed: 1 device left out (gpu-1): {REASON}"
