"""The real node in NVIDIA's driver's shape (``NODE_PROFILE=nvidia hack/node.sh up``).

The node's DRA plugin publishes hack/node/nvidia.yaml's pool under
``gpu.nvidia.com``: whole GPUs listed out of order, one tainted NoSchedule
(XID), one partitionable (its counter set in a slice of its own, shared with
its MIG devices), MIG devices the GPU class does not select. The scheduler's
Deployment asks for DeviceClass ``gpu.nvidia.com``. In order:

* the plugin published the file's slices as written, out of order;
* a claim that is not ours takes a MIG device of the partitionable GPU (a
  pause pod consumes it, so kube-scheduler allocates it and the plugin
  prepares it): placement counts the whole GPUs DRA would still hand out, and
  names every device it leaves out with its reason;
* workers until those devices are shared full, and one more: every claim is
  allocated among the counted devices by kube-scheduler itself, no worker is
  left Placing on a claim DRA cannot satisfy, the extra one waits;
* the MIG claim freed, the partitionable GPU is counted again and the waiting
  worker lands on it;
* the scheduler switched to DeviceClass ``large.nvidia.com``, which selects by
  memory alone through a method call (``memory.compareTo(quantity('60Gi'))``)
  on this node of three memory sizes: placement counts the whole GPUs (the
  tainted one aside) and names the MIG devices as not selected, each device by
  its own memory; workers until those are shared full, and one more: every
  claim is allocated among exactly those devices by kube-scheduler;
* the scheduler switched to DeviceClass ``mixed.nvidia.com``, which selects
  the whole GPUs but the partitionable one and its MIG devices: a node of
  three device sizes, read as three device groups (its snapshot lists them
  as ``deviceGroups``); a 60Gi worker gets a whole GPU, a 30Gi one the 40Gi
  MIG device, a 5Gi one the 10Gi MIG device, and a second 30Gi one a whole
  GPU: kube-scheduler allocates exactly the group placement chose, and no
  other device.

Where the API server drops device taints and counters (alpha before 1.36,
hack/node.sh then does not publish them) the checks that need them are skipped,
saying so. ``E2E_NVIDIA_SNAPSHOT=PATH`` writes the mixed node's snapshot there.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.inspect_fleet import connect, read_live_fleet
from controller.k8s import naming
from tests.e2e.test_node import (
    BUILD_TIMEOUT,
    DEPLOYMENT,
    NODE,
    NODE_DIR,
    NS,
    RESOURCES,
    Node,
    allocation,
    node_sh,
    set_fake_nodes_aside,
    skip_unless_a_node_can_run,
)

REPO = Path(__file__).resolve().parents[2]
DRIVER = "gpu.nvidia.com"
PROFILE = {"NODE_PROFILE": "nvidia"}
MAXW = 2
WHOLE = ["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-0"]  # as the file lists them
MIGS = ["gpu-4-mig-1g10gb-0", "gpu-4-mig-3g40gb-0"]
TAINTED = "gpu-2"
PARTITIONED = "gpu-4"
NOT_SELECTED = f"not selected by class {DRIVER}"
LARGE = "large.nvidia.com"  # the file's class selecting by memory: 60Gi and more
MIXED = "mixed.nvidia.com"  # the file's class selecting whole GPUs (not gpu-4) and MIG devices


def dropped() -> set[str]:
    """What hack/node.sh left out of the profile for this API server."""
    line = (NODE_DIR / "run" / "profile").read_text()
    fields = dict(f.split("=", 1) for f in line.split())
    return {part for part in fields.get("drop", "").split(",") if part}


def node_slices(node: Node) -> list[dict[str, Any]]:
    items = node.custom.list_cluster_custom_object(*RESOURCES, "resourceslices")["items"]
    return [s for s in items if s["spec"].get("nodeName") == NODE
            and s["spec"].get("driver") == DRIVER]


def left_out(node: Node, device_class: str = DRIVER) -> dict[str, str]:
    """Device -> why placement leaves it out, as the controller reads the node."""
    live = read_live_fleet(connect(node.cluster.kubeconfig, NS), DRIVER, device_class)
    return {item.device: item.reason for item in live.view.left_out.get(NODE, ())}


def snapshot(node: Node, device_class: str = DRIVER) -> tuple[str, dict[str, Any]]:
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "openrl-place"), "snapshot", "--namespace", NS,
         "--device-class", device_class, "--device-driver", DRIVER,
         "--kubeconfig", node.cluster.kubeconfig, "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    (ours,) = [n for n in document["nodes"] if n["name"] == NODE]
    return proc.stdout + proc.stderr, ours


def phases(node: Node) -> dict[str, str]:
    return {w["metadata"]["name"]: str((w.get("status") or {}).get("phase"))
            for w in node.workers()}


def no_workers(node: Node) -> None:
    """Every worker deleted, and gone with its claims."""
    for w in node.workers():
        node.delete_worker(w["metadata"]["name"])
    # A claim goes once the kubelet has stopped its pods and the driver unprepared it:
    # minutes on a loaded machine running other lanes beside this one.
    node.cluster.wait_for(lambda: not node.workers() and not node.claims(), timeout=300,
                          what="every worker and claim gone")


def use_class(node: Node, device_class: str) -> None:
    """The scheduler's claims ask for ``device_class`` (the driver stays ``gpu.nvidia.com``),
    its pods rolled out with it."""
    env = ([f"OPEN_RL_DEVICE_CLASS={device_class}", f"OPEN_RL_DEVICE_DRIVER={DRIVER}"]
           if device_class != DRIVER else [f"OPEN_RL_DEVICE_CLASS={DRIVER}",
                                           "OPEN_RL_DEVICE_DRIVER-"])
    node.cluster.kubectl("-n", NS, "set", "env", f"deployment/{DEPLOYMENT}", *env)
    node.cluster.kubectl("-n", NS, "rollout", "status", f"deployment/{DEPLOYMENT}",
                         "--timeout=240s", timeout=260)
    node.wait_deployment()


def fill(node: Node, counted: list[str]) -> None:
    """Workers until the counted devices are shared full, and one more: every claim
    allocated by kube-scheduler among exactly the counted devices, the extra one waiting."""
    for i in range(len(counted) * MAXW + 1):
        node.create_worker(f"nv-{i}", memory="1Gi")

    def settled() -> bool:
        seen = phases(node)
        return (sum(p == "Running" for p in seen.values()) == len(counted) * MAXW
                and sum(p == "Pending" for p in seen.values()) == 1)
    node.cluster.wait_for(settled, timeout=240, interval=1,
                          what=f"{len(counted) * MAXW} workers Running and one Pending")
    by_claim = running_claims(node)
    claims = node.claims()
    devices = sorted(d for name in by_claim for _, d in allocation(claims[name]))
    assert devices == sorted(counted), (
        f"kube-scheduler allocated {devices}, placement counted {sorted(counted)}")
    assert all(len(ws) == MAXW for ws in by_claim.values()), by_claim
    assert "Placing" not in phases(node).values(), phases(node)


def running_claims(node: Node) -> dict[str, list[str]]:
    """Claim -> its Running workers."""
    by_claim: dict[str, list[str]] = {}
    for w in node.workers():
        status = w.get("status") or {}
        if status.get("phase") == "Running":
            by_claim.setdefault(status["claimName"], []).append(w["metadata"]["name"])
    return by_claim


@pytest.fixture(scope="module")
def node(cluster: Any) -> Iterator[Node]:
    skip_unless_a_node_can_run(cluster)
    n = Node(cluster)
    node_sh("image", timeout=BUILD_TIMEOUT, **n.env)
    node_sh("up", timeout=BUILD_TIMEOUT, **n.env, **PROFILE)
    saved = set_fake_nodes_aside(n.core, MAXW)
    try:
        node_sh("deploy", timeout=120, **n.env, **PROFILE)
        for name in n.claims():  # an earlier run's, holding this pool's devices
            n.custom.delete_namespaced_custom_object(*RESOURCES, NS, "resourceclaims", name)
        n.cluster.wait_for(lambda: not n.claims(), timeout=120, what="old claims gone")
        n.wait_deployment()
        yield n
    finally:
        n.tear_down(saved)


def test_the_plugin_publishes_the_files_pool_out_of_order(node: Node) -> None:
    slices = node_slices(node)
    devices = [d["name"] for s in slices for d in s["spec"].get("devices") or []]
    assert sorted(devices) == sorted(WHOLE + MIGS), devices
    (gpus,) = [s for s in slices
               if any(d["name"] == "gpu-0" for d in s["spec"].get("devices") or [])]
    assert [d["name"] for d in gpus["spec"]["devices"]] == WHOLE
    assert gpus["spec"]["devices"][-1]["capacity"]["memory"]["value"] == "81559Mi"
    attributes = gpus["spec"]["devices"][0]["attributes"]
    assert attributes["type"] == {"string": "gpu"} and attributes["index"] == {"int": 1}
    assert attributes["uuid"]["string"].startswith("GPU-"), attributes
    if "counters" in dropped():
        assert len(slices) == 2, slices
        pytest.skip(f"hack/node.sh did not publish {','.join(sorted(dropped()))} (off on this "
                    "API server): no counters-only slice to check")
    counters = [s for s in slices if s["spec"].get("sharedCounters")]
    assert len(slices) == 3 and len(counters) == 1 and not counters[0]["spec"].get("devices"), (
        slices)


def test_workers_get_exactly_the_devices_placement_counts(node: Node, namespace: str) -> None:
    dropping = dropped()
    # A MIG device claimed outside the scheduler: DRA then cannot hand out
    # the whole GPU it is cut from (their counters are one set).
    node.custom.create_namespaced_custom_object(*RESOURCES, namespace, "resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "mig"},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com",
            "selectors": [{"cel": {"expression":
                                   f"device.attributes['{DRIVER}'].profile == '1g.10gb'"}}]}}]}}})
    node.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "mig-user"},
        "spec": {"containers": [{"name": "pause", "image": "localhost/pause:3.10",
                                 "resources": {"claims": [{"name": "mig"}]}}],
                 "resourceClaims": [{"name": "mig", "resourceClaimName": "mig"}],
                 "terminationGracePeriodSeconds": 0}})
    node.cluster.wait_for(
        lambda: node.core.read_namespaced_pod("mig-user", namespace).status.phase == "Running",
        timeout=120, what="the MIG claim's pod Running")
    mig = node.custom.get_namespaced_custom_object(*RESOURCES, namespace, "resourceclaims", "mig")
    assert allocation(mig) == [(NODE, MIGS[0])], mig.get("status")

    # What placement leaves out, device by device, and why.
    out = left_out(node)
    want = {m: NOT_SELECTED for m in MIGS}
    if "taints" not in dropping:
        want[TAINTED] = "tainted gpu.nvidia.com/xid=79:NoSchedule"
    if "counters" not in dropping:
        want[PARTITIONED] = f"counters consumed by claim {namespace}/mig ({MIGS[0]})"
    assert out == want, out
    counted = sorted(set(WHOLE) - set(out))
    text, ours = snapshot(node)
    for device, reason in want.items():  # its warnings name them one by one
        assert any(device in line and line.endswith(reason) for line in text.splitlines()), (
            device, text)
    assert ours["devices"] == len(counted) and ours["deviceMemory"] == "81559Mi", ours
    reasons: dict[str, int] = {}
    for reason in want.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    assert ours["leftOut"] == [{"devices": n, "reason": r} for r, n in sorted(reasons.items())]

    # Every counted seat, and one more.
    fill(node, counted)
    if path := os.environ.get("E2E_NVIDIA_SNAPSHOT"):
        Path(path).write_text(snapshot(node)[0])

    # The MIG device given back: its GPU is whole again, and the waiting worker takes it.
    node.core.delete_namespaced_pod("mig-user", namespace)
    node.cluster.wait_for(lambda: not [p for p in node.core.list_namespaced_pod(namespace).items],
                          timeout=90, what="the MIG pod gone")
    node.custom.delete_namespaced_custom_object(*RESOURCES, namespace, "resourceclaims", "mig")
    if dropping:
        pytest.skip(f"hack/node.sh did not publish {','.join(sorted(dropping))} (off on this "
                    "API server): the tainted and partitionable GPUs were counted, and what "
                    "freeing the MIG device gives back is not checked")
    node.cluster.wait_for(lambda: set(phases(node).values()) == {"Running"}, timeout=150,
                          interval=1, what="the waiting worker Running on the freed GPU")
    claims = node.claims()
    devices = sorted(d for name in running_claims(node) for _, d in allocation(claims[name]))
    assert devices == sorted([*counted, PARTITIONED]), devices
    assert left_out(node) == {k: v for k, v in want.items() if k != PARTITIONED}


def test_a_class_selecting_by_memory_gets_exactly_the_large_devices(node: Node) -> None:
    """Three memory sizes on one node (81559Mi whole GPUs, 40Gi and 10Gi MIG devices), a
    class asking for 60Gi and more by ``memory.compareTo``: each device is judged by its
    own memory, not the first one's."""
    dropping = dropped()
    no_workers(node)
    # hack/node.sh applies the file's classes; a node left up by an earlier run may
    # predate this one.
    (large,) = [d for d in yaml.safe_load_all((REPO / "hack/node/nvidia.yaml").read_text())
                if d["kind"] == "DeviceClass" and d["metadata"]["name"] == LARGE]
    node.cluster.kubectl("apply", "-f", "-", input=json.dumps(large))
    want = {m: f"not selected by class {LARGE}" for m in MIGS}
    if "taints" not in dropping:
        want[TAINTED] = "tainted gpu.nvidia.com/xid=79:NoSchedule"
    out = left_out(node, LARGE)
    assert out == want, out
    counted = sorted(set(WHOLE) - set(out))
    text, ours = snapshot(node, LARGE)
    for device, reason in want.items():
        assert any(device in line and line.endswith(reason) for line in text.splitlines()), (
            device, text)
    assert ours["devices"] == len(counted) and ours["deviceMemory"] == "81559Mi", ours
    use_class(node, LARGE)
    try:
        fill(node, counted)
        assert all(c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == LARGE
                   for c in node.claims().values()), node.claims()
    finally:
        no_workers(node)
        use_class(node, DRIVER)


def test_a_node_of_mixed_devices_gives_each_worker_its_tightest_group(node: Node) -> None:
    """Three sizes through ``mixed.nvidia.com`` (81559Mi whole GPUs, a 40Gi and a 10Gi MIG
    device): each claim is cut from one size, its memory bounds admit only that size, and
    kube-scheduler allocates exactly that. The node takes one worker per claim here: on a
    node that may share, every worker's estimate counts against host memory, and a 60Gi
    one does not fit this machine's 24Gi."""
    dropping = dropped()
    no_workers(node)
    (mixed,) = [d for d in yaml.safe_load_all((REPO / "hack/node/nvidia.yaml").read_text())
                if d["kind"] == "DeviceClass" and d["metadata"]["name"] == MIXED]
    node.cluster.kubectl("apply", "-f", "-", input=json.dumps(mixed))
    want = {PARTITIONED: f"not selected by class {MIXED}"}
    if "taints" not in dropping:
        want[TAINTED] = "tainted gpu.nvidia.com/xid=79:NoSchedule"
    assert left_out(node, MIXED) == want
    whole = sorted(set(WHOLE) - set(want))
    _, ours = snapshot(node, MIXED)
    assert ours["deviceGroups"] == [{"devices": 1, "deviceMemory": "10Gi"},
                                    {"devices": 1, "deviceMemory": "40Gi"},
                                    {"devices": len(whole), "deviceMemory": "81559Mi"}], ours
    use_class(node, MIXED)
    node.core.patch_node(NODE, {"metadata": {"labels": {naming.NODE_MAX_WORKERS: "1"}}})
    try:
        sizes = {"mx-big": "60Gi", "mx-mid": "30Gi", "mx-small": "5Gi", "mx-mid-2": "30Gi"}
        for name, memory in sizes.items():  # one at a time: each sees the others' claims
            node.create_worker(name, memory=memory)
            node.cluster.wait_for(lambda name=name: phases(node).get(name) == "Running",
                                  timeout=180, interval=1, what=f"{name} Running")
        claims = node.claims()
        got: dict[str, list[str]] = {}
        for claim, workers in running_claims(node).items():
            (worker,) = workers  # every worker on a claim of its own: devices were free
            got[worker] = [device for _, device in allocation(claims[claim])]
        assert got["mx-small"] == [MIGS[0]] and got["mx-mid"] == [MIGS[1]], got
        assert got["mx-big"][0] in whole and got["mx-mid-2"][0] in whole, got
        assert len(got["mx-big"]) == len(got["mx-mid-2"]) == 1, got
        assert got["mx-big"] != got["mx-mid-2"], got
        assert sum(len(devices) for devices in got.values()) == 4, got  # nothing else taken
    finally:
        no_workers(node)
        node.core.patch_node(NODE, {"metadata": {"labels": {
            naming.NODE_MAX_WORKERS: str(MAXW)}}})
        use_class(node, DRIVER)
