"""Autoscaling: workers that must wait stand on an unpinned claim and pod (standing.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.fleet.pools import PoolError, alternatives, can_grow, parse_pools
from controller.k8s import kube
from controller.settings import Settings, SettingsError
from placement import Node
from placement.model import Role
from tests.unit.controller.conftest import Cluster, node_obj, slice_obj
from tests.unit.controller.reconcile.test_reconciler import events, writes

GI = 1 << 30
SHARED = {"openrl.io/max-workers-per-claim": "4"}


def standing_claim(c: Cluster, worker: str) -> dict[str, Any] | None:
    uid = c.worker(worker)["metadata"]["uid"]
    return c.api.obj(kube.CLAIMS, f"orw-{worker}-standing-{uid}")


def kube_scheduler_allocates(c: Cluster, worker: str, node: str) -> None:
    """kube-scheduler takes the first shape of the standing claim on ``node``, binds the
    pod there, and the kubelet runs it."""
    claim = standing_claim(c, worker)
    assert claim is not None
    first = claim["spec"]["devices"]["requests"][0]["firstAvailable"][0]
    c.api.edit(kube.CLAIMS, claim["metadata"]["name"], {"status": {"allocation": {
        "devices": {"results": [
            {"request": f"gpu/{first['name']}", "driver": "gpu.example.com", "pool": node,
             "device": device} for device in c.api.free_devices(node, first["count"])]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    }}})
    c.api.run_pod(f"orw-{worker}", node)


def total_writes(c: Cluster) -> int:
    return sum(writes(c.api, exclude_events=False).values())


def add_node(c: Cluster, name: str, devices: int = 8, memory: str = "80Gi",
             labels: dict[str, str] | None = None) -> None:
    c.api.put(kube.NODES, node_obj(name, labels=labels))
    c.api.put(kube.SLICES, slice_obj(name, devices, memory))


# ------------------------------------------------------------------ declared pools


def test_pools_read_and_bad_entries_named() -> None:
    pools = parse_pools("8x80Gi:trainer, 4x40Gi;2x141Gi:trainer+sampler")
    assert [str(p) for p in pools] == ["8x80Gi:trainer", "4x40Gi", "2x141Gi:sampler+trainer"]
    for bad, says in (("8x", "not COUNTxMEMORY"), ("0x80Gi", "greater than zero"),
                      ("8x80Gi:cook", "roles are"), ("8x80Qi", "80Qi")):
        with pytest.raises(PoolError, match=says):
            parse_pools(bad)
    with pytest.raises(SettingsError, match="autoscale-pools entry 'x'"):
        Settings(namespace="openrl", autoscale_pools="x")


def test_shapes_smallest_device_first_each_with_count_floor_and_ceiling() -> None:
    nodes = [Node("a", 8, 80 * GI), Node("b", 2, 40 * GI, roles=frozenset({Role.SAMPLER}))]
    pools = parse_pools("4x40Gi:trainer, 8x141Gi")
    verdict = alternatives(Role.TRAINER, 100 * GI, nodes, pools)
    assert [str(s) for s in verdict.shapes] == [
        "3 x 35791394134..40Gi", "2 x 50Gi..80Gi", "1 x 100Gi..141Gi"]
    assert [s.name for s in verdict.shapes] == ["d3-40gi", "d2-80gi", "d1-141gi"]
    # 200Gi needs 5 of 40Gi: a 4-device pool cannot, so that size is left out.
    assert [s.devices for s in alternatives(Role.TRAINER, 200 * GI, nodes, pools).shapes] == [
        3, 2]
    never = alternatives(Role.TRAINER, 2000 * GI, nodes, pools)
    assert never.never and never.reason == "no declared autoscaled pool fits it"
    open_ = alternatives(Role.TRAINER, 2000 * GI, [], ())
    assert not open_.never and [str(s) for s in open_.shapes] == ["1 x 2000Gi..any"]


def test_a_named_device_count_lists_only_sizes_with_that_many_each_floored_at_its_share() -> None:
    nodes = [Node("a", 8, 80 * GI), Node("b", 2, 40 * GI)]
    pools = parse_pools("4x40Gi:trainer, 8x141Gi")
    verdict = alternatives(Role.TRAINER, 100 * GI, nodes, pools, devices=4)
    assert [str(s) for s in verdict.shapes] == ["4 x 25Gi..40Gi", "4 x 25Gi..80Gi",
                                                 "4 x 25Gi..141Gi"]
    assert alternatives(Role.TRAINER, 100 * GI, nodes, pools, devices=16).never
    assert can_grow(Role.TRAINER, 100 * GI, pools, 8)
    assert not can_grow(Role.TRAINER, 100 * GI, pools, 16)
    open_ = alternatives(Role.TRAINER, 100 * GI, [], (), devices=4)
    assert [str(s) for s in open_.shapes] == ["4 x 25Gi..any"]


# --------------------------------------------------------------------- stories


def test_from_zero_a_worker_stands_and_never_times_out() -> None:
    c = Cluster(nodes=0, autoscaling=True)
    status = c.place("w1")
    assert status["phase"] == "Pending"
    assert "waiting for a node to be added" in status["reason"]
    claim = standing_claim(c, "w1")
    assert claim is not None and claim["metadata"]["labels"]["openrl.io/standing"] == "true"
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["firstAvailable"] == [{
        "name": "d1-any", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
        "count": 1, "selectors": [{"cel": {"expression":
            'device.capacity["gpu.example.com"].memory.compareTo(quantity("50Gi")) >= 0'}}]}]
    pod = c.api.obj(kube.PODS, "orw-w1")
    assert pod is not None and "nodeName" not in pod["spec"]
    assert pod["spec"]["resourceClaims"][0]["resourceClaimName"] == claim["metadata"]["name"]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all("matchFields" not in t for t in terms)  # no node named
    assert all(t["matchExpressions"][0]["key"] == "openrl.io/enabled" for t in terms)
    c.api.advance(3600)
    c.reconcile("w1")  # far past the placement timeout: still waiting, nothing rewritten
    assert c.status("w1")["phase"] == "Pending"
    assert c.api.obj(kube.PODS, "orw-w1") is not None


def test_autoscaling_off_keeps_todays_no_capacity() -> None:
    c = Cluster(nodes=0)
    assert c.place("w1")["reason"].startswith("NoCapacity:")
    assert c.api.all(kube.CLAIMS) == [] and c.api.all(kube.PODS) == []


def test_a_declared_pool_that_cannot_fit_is_no_capacity_at_once() -> None:
    c = Cluster(nodes=0, autoscaling=True, autoscale_pools="8x80Gi:trainer")
    big = c.place("big", "700Gi")
    assert big["reason"] == ("NoCapacity: no declared autoscaled pool fits it "
                             "(8x80Gi:trainer), nor any node")
    sampler = c.place("s", "10Gi", role="sampler")
    assert sampler["reason"].startswith("NoCapacity:")
    assert c.api.all(kube.CLAIMS) == [] and c.api.all(kube.PODS) == []
    fits = c.place("fits", "100Gi")
    assert "waiting for kube-scheduler or the autoscaler" in fits["reason"]
    claim = standing_claim(c, "fits")
    assert claim is not None
    assert [s["name"] for s in claim["spec"]["devices"]["requests"][0]["firstAvailable"]] == [
        "d2-80gi"]
    c.api.advance(601)
    c.reconcile("big")
    assert c.status("big")["reason"].startswith("Unsatisfiable: NoCapacity:")


def test_node_added_standing_claim_allocated_worker_placed_and_booked() -> None:
    c = Cluster(nodes=0, autoscaling=True, autoscale_pools="8x80Gi")
    c.place("w1")
    before = total_writes(c)
    add_node(c, "gpu-a")
    kube_scheduler_allocates(c, "w1", "gpu-a")
    c.reconcile("w1")
    status = c.status("w1")
    assert status["phase"] == "Running" and status["nodeName"] == "gpu-a"
    assert status["claimName"] == standing_claim(c, "w1")["metadata"]["name"]  # type: ignore[index]
    total = total_writes(c)
    assert before == 5  # finalizer, claim, pod, status, Event
    # The books: the standing claim is an allocation like any other; its device is taken.
    with c.cache.lock:
        fleet = c.cache.view.fleet
        assert fleet.claim_node(standing_claim(c, "w1")["metadata"]["name"]) == "gpu-a"  # type: ignore[index]
    c.place("w2")
    assert c.status("w2")["phase"] == "Placing"  # pinned on the node, 7 devices left
    assert c.api.obj(kube.PODS, "orw-w2")["spec"]["affinity"]["nodeAffinity"][  # type: ignore[index]
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"] == ["gpu-a"]
    print(f"\nAPI writes for a standing worker placed by allocation: {total} "
          f"(events included; today's pinned placement: 7)")
    assert total <= 7 + 3


def test_a_standing_claim_is_never_joined_and_is_left_for_a_seat() -> None:
    c = Cluster(nodes=0, autoscaling=True, strategy="binpack")
    c.place("a")
    before_b = total_writes(c)
    c.place("b")  # both stand: a's standing claim takes no joiner
    b_standing = total_writes(c) - before_b
    assert standing_claim(c, "b") is not None
    add_node(c, "gpu-a", labels=SHARED)
    kube_scheduler_allocates(c, "a", "gpu-a")
    c.reconcile("a")
    a_claim = c.status("a")["claimName"]
    b_during_a = total_writes(c)
    c.reconcile("b")  # binpack: a's claim now seats b; its standing pod and claim go first
    assert c.api.obj(kube.PODS, "orw-b") is None and standing_claim(c, "b") is None
    assert "standing claim" in c.status("b")["reason"]  # the status stays until the join
    c.reconcile("b")
    assert c.status("b")["phase"] == "Placing" and c.status("b")["claimName"] == a_claim
    c.api.run_pod("orw-b", "gpu-a")
    c.reconcile("b")
    assert c.status("b")["phase"] == "Running"
    # Never two claims for one worker; no standing claim left behind.
    assert [o["metadata"]["name"] for o in c.api.all(kube.CLAIMS)] == [a_claim]
    assert ("Normal", "Placed") in events(c.api, "b")
    b_writes = b_standing + total_writes(c) - b_during_a
    print(f"\nAPI writes for a standing worker that moves to a join: {b_writes} "
          f"(events included; today's pinned placement: 7)")
    assert b_writes <= 7 + 6


def test_a_standing_claim_allocated_while_its_worker_leaves_it_is_never_deleted() -> None:
    """binpack: b decides to leave its standing claim for a join on a view that has not
    yet seen kube-scheduler allocate that claim (and bind its pod). Both deletes hold only
    for the objects as read, so neither lands: b stays on its own claim, and a worker that
    joined it meanwhile never has it deleted under it."""
    c = Cluster(nodes=0, autoscaling=True, strategy="binpack")
    c.place("a")
    c.place("b")
    add_node(c, "gpu-a", labels=SHARED)
    kube_scheduler_allocates(c, "a", "gpu-a")
    c.reconcile("a")
    claim = standing_claim(c, "b")
    assert claim is not None
    c.sync()  # the view as b's reconcile reads it: b's claim unallocated, its pod unbound
    kube_scheduler_allocates(c, "b", "gpu-a")  # meanwhile, on the server
    c.reconciler("b")
    assert standing_claim(c, "b") is not None
    assert c.api.obj(kube.PODS, "orw-b") is not None
    c.reconcile("b")  # decided again on what is there: placed where it stands
    assert c.status("b")["claimName"] == claim["metadata"]["name"]
    c.reconcile("b")
    assert c.status("b")["phase"] == "Running"


def test_standing_claim_left_without_its_pod_goes_before_a_decision() -> None:
    c = Cluster(nodes=0, autoscaling=True)
    c.place("w1")
    c.api.objects.pop(c.api.key(kube.PODS, "orw-w1"))  # someone deleted the standing pod
    c.reconcile("w1")
    assert standing_claim(c, "w1") is None
    c.reconcile("w1")  # stands again, one claim, one pod
    assert standing_claim(c, "w1") is not None and c.api.obj(kube.PODS, "orw-w1") is not None


def test_a_pinned_pod_whose_device_a_standing_claim_took_is_wedged_at_once() -> None:
    c = Cluster(nodes=0, autoscaling=True)
    c.place("old")  # stands: no node yet
    add_node(c, "gpu-a", devices=1)
    c.place("new")  # the books see one free device: a pinned claim is cut for it
    assert c.status("new")["phase"] == "Placing"
    # Meanwhile kube-scheduler gave that device to the standing claim of "old".
    kube_scheduler_allocates(c, "old", "gpu-a")
    c.reconcile("old")
    assert c.status("old")["phase"] == "Running"
    c.api.edit(kube.PODS, "orw-new", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "cannot allocate all claims",
         "lastTransitionTime": c.status("new")["conditions"][0]["lastTransitionTime"]}]}})
    c.api.advance(1)  # far inside the wedge grace
    c.reconcile("new")  # the node's allocations leave it no device: wedged at once
    assert c.status("new")["reason"].startswith("PodWedged:")
    c.api.finish_pod("orw-new")
    for _ in range(3):
        c.reconcile("new")
    status = c.status("new")
    assert status["phase"] == "Pending", status
    assert c.api.obj(kube.PODS, "orw-new") is not None  # standing again, for a new node
    assert standing_claim(c, "new") is not None
    mine = [o for o in c.api.all(kube.CLAIMS)
            if o["metadata"]["annotations"].get("openrl.io/worker") == "new"]
    assert len(mine) == 1  # the pinned claim it gave back is gone: one claim per worker


@pytest.mark.parametrize(("strategy", "third"), [("spread", "stands"), ("binpack", "joins")])
def test_a_full_node_spread_stands_for_a_new_node_binpack_joins(strategy: str,
                                                               third: str) -> None:
    c = Cluster(nodes=0, autoscaling=True, strategy=strategy)
    add_node(c, "gpu-a", devices=2, labels=SHARED)
    for name in ("a", "b"):
        c.place(name)
        c.allocate_and_run(name)
    status = c.place("c")  # both devices taken: a seat on a shared claim is all there is
    if third == "stands":
        assert status["phase"] == "Pending" and standing_claim(c, "c") is not None
        assert "waiting for a node to be added" in status["reason"]
    else:
        assert status["phase"] == "Placing" and standing_claim(c, "c") is None
        assert status["claimName"] in (c.status("a")["claimName"], c.status("b")["claimName"])


def test_spread_joins_when_no_declared_pool_could_add_a_node() -> None:
    c = Cluster(nodes=0, autoscaling=True, autoscale_pools="8x40Gi")
    add_node(c, "gpu-a", devices=1, labels=SHARED)
    c.place("a")
    c.allocate_and_run("a")
    assert c.place("b")["phase"] == "Pending"  # 2 x 40Gi of the declared pool fits it
    c2 = Cluster(nodes=0, autoscaling=True, autoscale_pools="1x40Gi")
    add_node(c2, "gpu-a", devices=1, labels=SHARED)
    c2.place("a")
    c2.allocate_and_run("a")
    assert c2.place("b")["phase"] == "Placing"  # no pool can grow for it: it shares
