"""Stories of the fleet cache healing what it once had to leave out.

A node reads narrower than a claim on it for a while (a device tainted, say).
Whichever arrived second, the node or the claim, the fleet refuses; once the
obstacle is gone -- the node reads wide again, or the claim leaves -- the
books must count both again without waiting for some later event, or the
devices the claim holds would look free (or the node's devices lost).
"""

from __future__ import annotations

from typing import Any

from controller import kube
from controller.cache import Cache
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


def test_a_claim_refused_while_its_node_read_narrow_counts_once_the_node_heals() -> None:
    cluster, claim = running_two_device_worker()
    cluster.api.put(kube.SLICES, tainted_slice("node-0", 2, tainted=1))
    restarted = Cache(cluster.settings.device_driver)  # lists the node before the claim
    sync_cache(restarted, cluster.api)
    assert any(w.startswith(f"claim {claim}: left out of placement") for w in
               restarted.view.warnings)

    cluster.api.put(kube.SLICES, slice_obj("node-0", 2))  # the device heals
    sync_cache(restarted, cluster.api)

    assert restarted.view.warnings == ()
    assert restarted.view.fleet.has_claim(claim)
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
