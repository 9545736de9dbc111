"""hack/chaos.py: what a round that did not converge prints about each unsettled worker."""

from __future__ import annotations

from hack import chaos
from hack.lib import invariants as inv


def test_an_unsettled_worker_is_explained_by_its_pod_and_node() -> None:
    shelved = {"metadata": {"name": "orw-a"}, "spec": {}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable",
                                            "message": "0/3 nodes are available"}]}}
    bound = {"metadata": {"name": "orw-b"}, "spec": {"nodeName": "n"},
             "status": {"phase": "Pending", "conditions": [
                 {"type": "PodScheduled", "status": "True"}]}}
    node = {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}
    world = inv.World(pods={"orw-a": shelved, "orw-b": bound}, nodes={"n": node})
    left = [inv.Violation("final", w, f"worker {w} is Placing") for w in ("a", "b", "c")]
    assert chaos.explain_unsettled(world, left) == [
        "    a: pod orw-a Pending on no node; PodScheduled False Unschedulable "
        "0/3 nodes are available",
        "    b: pod orw-b Pending on n (node ready); PodScheduled True",
        "    c: no pod",
    ]
