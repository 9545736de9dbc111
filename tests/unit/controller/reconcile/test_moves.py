"""Placed again (controller/reconcile/moves.py): lost and not-ready nodes, wedged pods, too many
moves, and finished workers giving their seat back."""

from __future__ import annotations

from controller.fleet.health import trouble
from controller.k8s import kube
from controller.reconcile.moves import workers_on_node
from tests.unit.controller.conftest import Cluster

TWO = {"openrl.io/max-workers-per-claim": "2"}


def kinds(c: Cluster, name: str) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in c.api.all(kube.EVENTS)
            if e["regarding"]["name"] == name]


def running(c: Cluster, *names: str) -> None:
    for name in names:
        c.place(name)
        c.allocate_and_run(name)


def lose(c: Cluster, node: str) -> None:
    """A cloud takes the machine: the Node object goes, its slices with it."""
    del c.api.objects[c.api.key(kube.NODES, node)]
    for s in c.api.all(kube.SLICES):
        if s["spec"]["nodeName"] == node:
            del c.api.objects[c.api.key(kube.SLICES, s["metadata"]["name"])]


def settle(c: Cluster, name: str, rounds: int = 4) -> dict:
    for _ in range(rounds):
        if c.api.obj(kube.PODS, f"orw-{name}") is not None and \
                c.api.obj(kube.PODS, f"orw-{name}")["metadata"].get("deletionTimestamp"):
            c.api.finish_pod(f"orw-{name}")  # Kubernetes collects the lost node's pod
        c.reconcile(name)
    return c.status(name)


def test_a_lost_nodes_workers_are_placed_again_on_what_is_left() -> None:
    c = Cluster(nodes=2, devices=2, node_labels=TWO)
    running(c, "w1", "w2", "w3", "w4")
    on = {w: c.status(w)["nodeName"] for w in ("w1", "w2", "w3", "w4")}
    lost = on["w2"]
    movers = sorted(w for w, n in on.items() if n == lost)
    stayers = sorted(set(on) - set(movers))
    before = {w: (c.status(w), c.api.obj(kube.PODS, f"orw-{w}")) for w in stayers}
    lose(c, lost)
    assert sorted(workers_on_node(c.cache, lost)) == movers
    for w in movers:
        c.reconcile(w)
        status = c.status(w)
        assert status["phase"] == "Pending" and status["reason"].startswith("NodeLost: ")
        assert f"node {lost} is gone" in status["reason"]
        assert status["moves"][-1]["node"] == lost and status["moves"][-1]["reason"] == "NodeLost"
        assert c.api.obj(kube.PODS, f"orw-{w}")["metadata"].get("deletionTimestamp")
        assert ("Warning", "NodeLost") in kinds(c, w)
    for w in movers:
        status = settle(c, w)
        assert status["phase"] == "Placing", status
        assert status["reason"].startswith(f"Placed: placed again after node {lost} was lost")
        pod = c.api.obj(kube.PODS, f"orw-{w}")
        pinned = pod["spec"]["affinity"]["nodeAffinity"]
        assert lost not in repr(pinned)
        assert len(status["moves"]) == 1
    # The old claims are released; nobody on the healthy node moved or restarted.
    for w in stayers:
        assert (c.status(w), c.api.obj(kube.PODS, f"orw-{w}")) == before[w]


def test_a_lost_node_without_room_leaves_its_worker_waiting_never_failed() -> None:
    c = Cluster(nodes=2, devices=1, placement_timeout="10m")
    running(c, "a", "b")
    lost = c.status("b")["nodeName"]
    lose(c, lost)
    settle(c, "b")
    c.api.advance(3600)
    status = settle(c, "b")
    assert status["phase"] == "Pending"
    assert status["reason"].startswith(f"NodeLost: to be placed again after node {lost} "
                                       "was lost: ")
    assert "claimName" not in status
    claims = [x["metadata"]["name"] for x in c.api.all(kube.CLAIMS)]
    assert claims == [c.status("a")["claimName"]]  # b's old claim is released


def test_a_not_ready_node_keeps_its_pod_until_kubernetes_confirms_it_gone() -> None:
    c = Cluster(nodes=2, devices=1)
    running(c, "a", "b")
    node = c.status("b")["nodeName"]
    c.api.edit(kube.NODES, node, {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    c.reconcile("b")
    status = c.status("b")
    assert status["phase"] == "Running" and status["reason"].startswith("NodeNotReady: ")
    assert not c.api.obj(kube.PODS, "orw-b")["metadata"].get("deletionTimestamp")
    assert "moves" not in status
    # A new worker is never seated on the node that is not ready.
    assert c.place("c")["phase"] == "Pending"
    # The eviction finishes (or the operator marks the node out-of-service): placed again.
    c.api.delete(kube.PODS, "orw-b")
    c.api.finish_pod("orw-b")
    c.reconcile("b")
    status = c.status("b")
    assert status["phase"] == "Pending" and status["reason"].startswith("NodeNotReady: ")
    assert status["moves"][-1]["reason"] == "NodeNotReady"


def test_out_of_service_taint_and_ready_rules() -> None:
    assert trouble({"metadata": {"name": "n"}}, "n") is None
    tainted = {"spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                                    "effect": "NoExecute"}]}}
    found = trouble(tainted, "n")
    assert found is not None and "out-of-service" in found.why and not found.lost
    unreachable = {"spec": {"taints": [{"key": "node.kubernetes.io/unreachable"}]}}
    assert trouble(unreachable, "n") is not None
    gone = trouble(None, "n")
    assert gone is not None and gone.lost


def test_a_pod_unschedulable_past_the_grace_gives_its_seat_back() -> None:
    c = Cluster(nodes=2, devices=1, wedge_grace="2m")
    c.place("w1")
    first = c.status("w1")["claimName"]
    c.api.edit(kube.PODS, "orw-w1", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/2 nodes are available: 1 node(s) had untolerated taint."}]}})
    c.api.advance(60)
    result = c.reconcile("w1")
    assert c.status("w1")["phase"] == "Placing"
    assert result.requeue_after is not None and result.requeue_after <= 61
    c.api.advance(61)
    c.reconcile("w1")
    status = c.status("w1")
    assert status["phase"] == "Pending" and status["reason"].startswith("PodWedged: ")
    assert "untolerated taint" in status["reason"]
    assert c.api.obj(kube.PODS, "orw-w1") is None  # never bound: gone at once
    c.reconcile("w1")  # its claim given back
    assert c.api.obj(kube.CLAIMS, first) is None
    c.reconcile("w1")
    status = c.status("w1")
    assert status["phase"] == "Placing"
    assert "placed again after its pod was wedged" in status["reason"]


def wedge(c: Cluster, name: str) -> None:
    """kube-scheduler cannot fit the worker's pod on its node, past the grace."""
    c.api.edit(kube.PODS, f"orw-{name}", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/2 nodes are available: 1 node(s) had untolerated taint."}]}})
    c.api.advance(121)
    for _ in range(3):  # wedged, its seat given back, placed again
        c.reconcile(name)


def sized_for(c: Cluster, name: str) -> str:
    claim = c.api.obj(kube.CLAIMS, c.status(name)["claimName"])
    return str(claim["metadata"]["annotations"]["openrl.io/sized-for-node"])


def test_a_wedged_worker_is_placed_again_elsewhere_when_it_can_be() -> None:
    """Whatever kept its pod off node-0 may keep the next one off too: node-1, free
    as well, takes it."""
    c = Cluster(nodes=2, devices=1, wedge_grace="2m")
    c.place("w1")
    assert sized_for(c, "w1") == "node-0"
    wedge(c, "w1")
    status = c.status("w1")
    assert status["phase"] == "Placing", status
    assert sized_for(c, "w1") == "node-1"
    assert status["reason"].startswith(
        "Placed: placed again after its pod was wedged on node node-0: new claim ")


def test_a_wedged_worker_goes_back_to_its_node_when_no_other_can_take_it() -> None:
    c = Cluster(nodes=2, devices=1, wedge_grace="2m")
    running(c, "other")
    c.place("w1")
    assert (sized_for(c, "other"), sized_for(c, "w1")) == ("node-0", "node-1")
    wedge(c, "w1")
    assert c.status("w1")["phase"] == "Placing"
    assert sized_for(c, "w1") == "node-1"  # the last resort; the move limit bounds it


def test_a_pod_failing_in_the_scheduler_past_the_grace_is_wedged_too() -> None:
    """kube-scheduler cannot bind a pod whose claim was deleted under it (SchedulerError,
    retried for ever): past the grace it is placed again, not left waiting."""
    c = Cluster(nodes=2, devices=1, wedge_grace="2m")
    c.place("w1")
    c.api.edit(kube.PODS, "orw-w1", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulerError",
         "message": 'running PreBind plugin "DynamicResources": claim not found'}]}})
    c.api.advance(60)
    c.reconcile("w1")
    assert c.status("w1")["phase"] == "Placing"
    c.api.advance(61)
    c.reconcile("w1")
    status = c.status("w1")
    assert status["phase"] == "Pending" and status["reason"].startswith("PodWedged: ")
    assert "claim not found" in status["reason"]


def test_a_pod_the_kubelet_rejects_is_placed_again_not_failed() -> None:
    c = Cluster(nodes=2, devices=1)
    c.place("w1")
    node = c.api.obj(kube.CLAIMS, c.status("w1")["claimName"])["metadata"]["annotations"][
        "openrl.io/sized-for-node"]
    c.api.edit(kube.PODS, "orw-w1", {"spec": {"nodeName": node}, "status": {
        "phase": "Failed", "reason": "OutOfpods",
        "message": "Pod was rejected: Node didn't have enough resource: pods"}})
    c.reconcile("w1")
    status = c.status("w1")
    assert status["phase"] == "Pending" and "rejected pod orw-w1" in status["reason"]


def test_placed_again_too_often_waits_with_a_reason() -> None:
    c = Cluster(nodes=2, devices=1, wedge_grace="1m", move_limit=2, move_window="30m")
    c.place("w1")
    for round_ in range(3):
        c.api.edit(kube.PODS, "orw-w1", {"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "node(s) had untolerated taint"}]}})
        c.api.advance(61)
        for _ in range(3):
            c.reconcile("w1")
        if round_ < 2:
            assert c.status("w1")["phase"] == "Placing", (round_, c.status("w1"))
    status = c.status("w1")
    assert status["phase"] == "Pending" and status["reason"].startswith("PlacedTooOften: ")
    assert len(status["moves"]) == 3
    census = c.reconciler.metrics
    assert census.moves.labels(reason="PodWedged")._value.get() == 3
    c.api.advance(1800)
    c.reconcile("w1")
    assert c.status("w1")["phase"] == "Placing"


def test_a_completed_pod_makes_the_worker_succeeded_and_frees_its_claim() -> None:
    c = Cluster(devices=1)
    running(c, "a")
    claim = c.status("a")["claimName"]
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Succeeded"}})
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Succeeded" and status["reason"].startswith("Completed: ")
    c.reconcile("a")  # the finished pod and the claim go at once, no sweep needed
    assert c.api.obj(kube.CLAIMS, claim) is None
    assert c.api.obj(kube.PODS, "orw-a")["metadata"].get("deletionTimestamp") or \
        c.api.obj(kube.PODS, "orw-a") is None
    c.api.finish_pod("orw-a")
    assert c.place("b")["phase"] == "Placing"


def test_a_pod_deleted_under_its_worker_that_exits_cleanly_is_replaced_not_finished() -> None:
    # The time-slicer evicts a worker that overran its turn; its process handles
    # SIGTERM and exits 0, so the pod ends Succeeded while being deleted.
    c = Cluster(devices=1, node_labels=TWO)
    running(c, "a", "b")
    claim = c.status("a")["claimName"]
    c.api.delete(kube.PODS, "orw-a")
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Succeeded"}})
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Placing" and "being deleted" in status["reason"], status
    c.api.finish_pod("orw-a")
    c.reconcile("a")
    pod = c.api.obj(kube.PODS, "orw-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    assert c.status("a")["claimName"] == claim and c.status("a")["phase"] != "Succeeded"


def test_a_failed_worker_releases_its_claim_at_once_unless_shared() -> None:
    c = Cluster(devices=1, node_labels=TWO)
    running(c, "a", "b")
    claim = c.status("a")["claimName"]
    assert c.status("b")["claimName"] == claim
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Failed"}})
    c.reconcile("a")
    c.reconcile("a")
    assert c.status("a")["phase"] == "Failed"
    assert c.api.obj(kube.CLAIMS, claim) is not None  # b still sits on it


def test_a_node_gone_or_not_ready_queues_its_workers_and_nothing_else_does() -> None:
    from controller.store.queue import WorkQueue
    from controller.store.watches import feeds
    q = WorkQueue()
    placed = {"n": ["w1", "w2"]}
    node_feed = next(f for f in feeds(q, "gpu.example.com",
                                      placed_on=lambda node: placed.get(node, []))
                     if f.resource == kube.NODES)
    node = {"metadata": {"name": "n", "uid": "u"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}]}}
    node_feed.event("ADDED", node)
    beat = {**node, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "t2"}]}}
    node_feed.event("MODIFIED", beat)  # a heartbeat: no news
    assert "w1" not in q._due
    node_feed.event("MODIFIED", {**node, "status": {"conditions": [
        {"type": "Ready", "status": "Unknown"}]}})
    assert {"w1", "w2"} <= set(q._due)
    q2 = WorkQueue()
    gone = next(f for f in feeds(q2, "gpu.example.com",
                                 placed_on=lambda node: placed.get(node, []))
                if f.resource == kube.NODES)
    gone.event("ADDED", node)
    gone.event("DELETED", node)
    assert {"w1", "w2"} <= set(q2._due)


def test_kube_schedulers_verdict_on_an_unbound_pod_wakes_its_worker() -> None:
    """Unschedulable (or a scheduler error) is what the wedge rules judge: the worker must
    be woken for it, once; the scheduler's retries with a new message are no news."""
    from controller.store.queue import WorkQueue
    from controller.store.watches import feeds
    q = WorkQueue()
    pod_feed = next(f for f in feeds(q, "gpu.example.com") if f.resource == kube.PODS)
    pod = {"metadata": {"name": "orw-w1", "uid": "p", "ownerReferences": [
        {"kind": "OpenRLWorker", "name": "w1", "uid": "w", "controller": True}]},
           "status": {"phase": "Pending"}}
    pod_feed.event("ADDED", pod)
    assert "w1" not in q._due  # just created, by us
    refused = {**pod, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/5 nodes are available: 1 cannot allocate all claims"}]}}
    pod_feed.event("MODIFIED", refused)
    assert "w1" in q._due
    q2 = WorkQueue()
    seen = next(f for f in feeds(q2, "gpu.example.com") if f.resource == kube.PODS)
    seen.event("ADDED", refused)  # as a fresh watch lists it: unbound, not news either
    again = {**pod, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/6 nodes are available: still not schedulable"}]}}
    seen.event("MODIFIED", again)
    assert "w1" not in q2._due


def test_a_wedged_worker_sharing_its_own_claim_keeps_it_and_tries_again() -> None:
    c = Cluster(nodes=1, devices=1, node_labels=TWO, wedge_grace="1m")
    running(c, "a", "b")
    claim = c.status("a")["claimName"]
    assert c.status("b")["claimName"] == claim
    c.api.delete(kube.PODS, "orw-a")
    c.api.finish_pod("orw-a")
    c.reconcile("a")  # recreated on its claim, then refused a place on its node
    c.api.edit(kube.PODS, "orw-a", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "node(s) had untolerated taint"}]}})
    c.api.advance(61)
    c.reconcile("a")
    assert c.status("a")["reason"].startswith("PodWedged: ")
    result = c.reconcile("a")  # pod gone: b still sits on the claim, so a keeps it
    assert c.api.obj(kube.CLAIMS, claim) is not None
    assert c.status("a")["phase"] == "Placing" and c.status("a")["claimName"] == claim
    assert result.requeue_after is not None and result.requeue_after > 1
