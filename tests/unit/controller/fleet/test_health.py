"""A closing node (controller/fleet/health.py): cordoned, or being removed by a node autoscaler,
it keeps its workers and gets no new one."""

from __future__ import annotations

import pytest

from controller.fleet.health import closing, ready_signature, trouble
from controller.k8s import kube
from controller.store.records import to_obj, to_record
from controller.store.strip import strip
from tests.unit.controller.conftest import Cluster

CORDON = {"spec": {"unschedulable": True}}
KARPENTER = {"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}}
CLUSTER_AUTOSCALER = {"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler",
                                           "value": "1733000000", "effect": "NoSchedule"}]}}


# Held by a finalizer (Karpenter's termination, say) while its pods are drained.
DELETING = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
                         "finalizers": ["karpenter.sh/termination"]}}


@pytest.mark.parametrize(("edit", "said"), [
    (DELETING, "being deleted"), (CORDON, "cordoned"), (KARPENTER, "karpenter.sh/disrupted"),
    (CLUSTER_AUTOSCALER, "ToBeDeletedByClusterAutoscaler")])
def test_a_closing_node_keeps_its_worker_and_takes_no_new_one(edit: dict, said: str) -> None:
    c = Cluster(nodes=1, devices=2)
    c.place("a")
    c.allocate_and_run("a")
    node = c.status("a")["nodeName"]
    pod = c.api.obj(kube.PODS, "orw-a")
    c.api.edit(kube.NODES, node, edit)
    # The worker there stays, untouched: closing is not a fault of the node.
    before = c.status("a")
    c.reconcile("a")
    assert c.status("a") == before and c.api.obj(kube.PODS, "orw-a") == pod
    # A newcomer is not seated there, though a device is free.
    assert c.place("b")["phase"] == "Pending"
    assert any(said in w.text for w in c.cache.view.warnings)
    # The node opens again (a test's liberty for a deletion): the newcomer gets its device.
    c.api.edit(kube.NODES, node, {"metadata": {"deletionTimestamp": None},
                                  "spec": {"unschedulable": False, "taints": []}})
    assert c.place("b")["phase"] in ("Placing", "Running")


def test_closing_and_health_read_only_their_own_signs() -> None:
    assert closing({"metadata": {"name": "n"}}, "n") == ""
    assert "cordoned" in closing(CORDON, "n")
    assert "karpenter.sh/disrupted" in closing(KARPENTER, "n")
    assert trouble(CORDON, "n") is None and trouble(KARPENTER, "n") is None
    other = {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}
    assert closing(other, "n") == ""
    # A cordon and the autoscalers' taints reach the cache, and change the watch's signature.
    both = {"metadata": {"name": "n"}, "spec": {**CORDON["spec"], **KARPENTER["spec"]}}
    kept = to_obj(to_record(kube.NODES, strip(kube.NODES, both)))
    assert kept["spec"] == both["spec"]
    assert len({ready_signature(n) for n in (CORDON, KARPENTER, DELETING, {})}) == 4
