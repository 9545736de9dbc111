"""A device given to two of our claims (controller/reconcile/moves.py, fleet_rules.device_conflict).

kube-scheduler allocates from its cache; when the answer to its allocation write is
lost (the API server restarting under it) the device looks free there until its watch
catches up, and a second claim can be given it. It keeps allocated devices as a set, so
once one of the two claims lets the device go it would hand it out again while the
other holds it: both claims give it up, and every worker on either is placed again.
"""

from __future__ import annotations

from controller.k8s import kube
from controller.reconcile.moves import workers_in_conflict
from tests.unit.controller.conftest import Cluster

TWO = {"openrl.io/max-workers-per-claim": "2"}


def running(c: Cluster, *names: str) -> None:
    for name in names:
        c.place(name)
        c.allocate_and_run(name)


def given_twice(c: Cluster, worker: str, device: str) -> str:
    """kube-scheduler allocates the worker's claim ``device`` of node-0, whoever holds it;
    the worker's pod runs. The claim's name."""
    claim = c.status(worker)["claimName"]
    c.api.edit(kube.CLAIMS, claim, {"status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                 "pool": "node-0", "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}}})
    c.api.run_pod(f"orw-{worker}", "node-0")
    return claim


def leaves(c: Cluster, worker: str, claim: str) -> None:
    """The worker's pod is deleted for the conflict, goes, and its seat is given back."""
    c.reconcile(worker)
    status = c.status(worker)
    assert status["phase"] == "Pending" and status["reason"].startswith("DeviceConflict: ")
    assert status["moves"][-1]["reason"] == "DeviceConflict"
    assert status["moves"][-1]["claim"] == claim
    assert c.api.obj(kube.PODS, f"orw-{worker}")["metadata"].get("deletionTimestamp")
    c.api.finish_pod(f"orw-{worker}")
    c.reconcile(worker)  # no pod: its seat goes back, its own claim deleted
    assert c.status(worker)["reason"].startswith("DeviceConflict: ")


def test_both_claims_give_the_device_up_and_their_workers_land_on_a_device_each() -> None:
    c = Cluster(nodes=1, devices=2, node_labels=TWO)
    running(c, "a")
    a_claim = c.status("a")["claimName"]
    c.place("b")  # spread: a claim of its own, on the device still free
    b_claim = given_twice(c, "b", "gpu-0")  # ...but given a's device
    c.sync()
    assert c.cache.view.device_conflict(b_claim) == ("gpu.example.com/node-0/gpu-0", a_claim)
    assert c.cache.view.device_conflict(a_claim) == ("gpu.example.com/node-0/gpu-0", b_claim)
    # Whichever claim's allocation showed the conflict, both workers are woken.
    assert list(workers_in_conflict(c.cache, a_claim)) == ["a", "b"]
    assert list(workers_in_conflict(c.cache, b_claim)) == ["a", "b"]

    leaves(c, "b", b_claim)
    # b's claim is gone and the conflict with it, but not kube-scheduler's slip: a's
    # claim was marked when the conflict was seen, and goes too.
    assert c.api.obj(kube.CLAIMS, a_claim)["metadata"]["annotations"][
        "openrl.io/gives-up-device"] == "gpu.example.com/node-0/gpu-0"
    c.sync()
    assert c.cache.view.device_conflict(a_claim) == ("gpu.example.com/node-0/gpu-0", "")
    leaves(c, "a", a_claim)
    assert c.api.all(kube.CLAIMS) == []  # both claims gone, and the device with them
    for w in ("a", "b"):
        c.reconcile(w)  # placed again, as a newcomer is: the node is fine
        assert c.status(w)["phase"] == "Placing", w
        assert "placed again after its claim on node node-0 gave up a device" in (
            c.status(w)["reason"])
        c.allocate_and_run(w)
        assert c.status(w)["phase"] == "Running", w
    held = sorted(r["device"] for claim in c.api.all(kube.CLAIMS)
                  for r in claim["status"]["allocation"]["devices"]["results"])
    assert held == ["gpu-0", "gpu-1"]  # a device each


def test_everyone_on_either_claim_leaves_it_joiners_too() -> None:
    """c joined a's claim, d joined b's (the node had no free device): all four pods go,
    and each claim is deleted with its joiner still on it -- a join cannot keep a device
    its claim gives up."""
    c = Cluster(nodes=1, devices=2, node_labels=TWO)
    running(c, "a")
    c.place("b")
    b_claim = given_twice(c, "b", "gpu-0")
    running(c, "c")  # joins a's claim, the older of the two
    a_claim = c.status("a")["claimName"]
    assert c.status("c")["claimName"] == a_claim
    c.place("d")  # a's claim is full: d joins b's
    assert c.status("d")["claimName"] == b_claim
    c.api.run_pod("orw-d", "node-0")
    assert sorted(workers_in_conflict(c.cache, a_claim)) == ["a", "b", "c", "d"]

    for w, claim in (("d", b_claim), ("c", a_claim)):  # the joiners first, as it happens
        leaves(c, w, claim)
    for w, claim in (("b", b_claim), ("a", a_claim)):
        leaves(c, w, claim)
    assert c.api.all(kube.CLAIMS) == []
    for w in ("a", "b", "c", "d"):
        c.reconcile(w)
        assert c.status(w)["phase"] == "Placing", w
        c.allocate_and_run(w)
    held = [r["device"] for claim in c.api.all(kube.CLAIMS)
            for r in claim["status"]["allocation"]["devices"]["results"]]
    assert sorted(held) == ["gpu-0", "gpu-1"]  # two claims of two again, a device each
