"""Stories of the fleet cache healing what it once had to leave out.

A node reads narrower than a claim on it for a while (a device tainted, say).
The node is left out whichever was read first -- the claim's devices are
really held, and the node's reading would offer some of them -- and once the
obstacle is gone (the node reads wide again, or the claim leaves) the books
count it again without waiting for some later event of its own.
"""

from __future__ import annotations

from typing import Any

from controller.fleet.reader import build_fleet
from controller.k8s import kube
from controller.k8s.objects import Worker
from controller.store.cache import Cache
from placement import NewClaim, Request, Role, Wait, decide
from placement.quantity import parse_quantity
from tests.unit.controller.conftest import Cluster, slice_obj, sync_cache


def tainted_slice(node: str, devices: int, tainted: int) -> dict[str, Any]:
    out = slice_obj(node, devices)
    out["spec"]["devices"][tainted]["taints"] = [
        {"key": "gpu.example.com/xid", "value": "79", "effect": "NoSchedule"}]
    return out


def running_two_device_worker() -> tuple[Cluster, str]:
    """One node of 2 x 80Gi; worker a (150Gi) runs on a claim of both devices."""
    cluster = Cluster(nodes=1, devices=2)
    cluster.place("a", "150Gi")
    cluster.allocate_and_run("a")
    return cluster, cluster.status("a")["claimName"]


def probe(cache: Cache) -> object:
    """Where a new 50Gi trainer would go now."""
    return decide(Request("probe", Role.TRAINER, parse_quantity("50Gi")), cache.view.fleet)


def test_a_claim_wider_than_its_node_reads_keeps_the_node_out_until_it_heals() -> None:
    cluster, claim = running_two_device_worker()
    cluster.api.put(kube.SLICES, tainted_slice("node-0", 2, tainted=1))
    restarted = Cache(cluster.settings.device_driver)  # lists the node before the claim
    sync_cache(restarted, cluster.api)
    assert restarted.view.fleet.has_claim(claim)  # the claim is what DRA allocated
    assert "node-0" not in restarted.view.nodes  # its one readable device is a's
    assert (f"node node-0: left out of placement: claim {claim} holds 2 devices, "
            "node node-0 has 1") in [w.text for w in restarted.view.warnings]
    assert isinstance(probe(restarted), Wait)

    cluster.api.put(kube.SLICES, slice_obj("node-0", 2))  # the device heals
    sync_cache(restarted, cluster.api)

    assert restarted.view.warnings == ()
    assert restarted.view.fleet.free_devices("node-0") == 0  # both devices are a's
    assert isinstance(probe(restarted), Wait)


def test_a_node_refused_for_a_claim_on_it_counts_once_the_claim_leaves() -> None:
    cluster, claim = running_two_device_worker()
    cluster.api.put(kube.SLICES, tainted_slice("node-0", 2, tainted=1))
    cluster.sync()
    assert "node-0" not in cluster.cache.view.nodes  # a's claim is wider than it reads

    cluster.api.delete(kube.CLAIMS, claim)  # a is gone, and its claim with it
    cluster.sync()

    assert cluster.cache.view.nodes["node-0"].devices == 1
    assert cluster.cache.view.fleet.free_devices("node-0") == 1
    assert isinstance(probe(cluster.cache), NewClaim)  # the healthy device is offered


def test_the_plain_reading_leaves_the_narrow_node_out_the_same_way() -> None:
    """``snapshot`` and ``explain`` read the cluster once, by the plain reading: the
    same node left out, the same warning, where it once failed outright."""
    cluster, claim = running_two_device_worker()
    cluster.api.put(kube.SLICES, tainted_slice("node-0", 2, tainted=1))
    plain = build_fleet(
        slices=cluster.api.all(kube.SLICES), nodes=cluster.api.all(kube.NODES),
        claims=cluster.api.all(kube.CLAIMS),
        workers=[Worker.from_obj(w) for w in cluster.api.all(kube.WORKERS)],
        pods=cluster.api.all(kube.PODS), driver=cluster.settings.device_driver)
    restarted = Cache(cluster.settings.device_driver)
    sync_cache(restarted, cluster.api)
    assert plain.nodes == {} == dict(restarted.view.nodes)
    assert plain.fleet.has_claim(claim)
    assert sorted(plain.warnings) == sorted(restarted.view.warnings)
