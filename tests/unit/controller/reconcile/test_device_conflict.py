"""A device given to two of our claims (controller/reconcile/moves.py, fleet_rules.device_conflict).

kube-scheduler allocates from its cache; when the answer to its allocation write is
lost (the API server restarting under it) the device looks free there until its watch
catches up, and a second claim can be given it. The older claim keeps the device; the
workers of the younger one are placed again, and nobody on the older one is disturbed.
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


def test_the_younger_claim_gives_the_device_back_and_its_worker_lands_on_a_free_one() -> None:
    c = Cluster(nodes=1, devices=2, node_labels=TWO)
    running(c, "a")
    a_claim = c.status("a")["claimName"]
    a_pod = c.api.obj(kube.PODS, "orw-a")
    c.place("b")  # spread: a claim of its own, on the device still free
    b_claim = given_twice(c, "b", "gpu-0")  # ...but given a's device
    c.sync()
    assert c.cache.view.device_conflict(b_claim) == ("gpu.example.com/node-0/gpu-0", a_claim)
    assert c.cache.view.device_conflict(a_claim) is None  # the older claim keeps it
    # The claim whose allocation showed the conflict may be either: both queue b.
    assert list(workers_in_conflict(c.cache, a_claim)) == ["b"]
    assert list(workers_in_conflict(c.cache, b_claim)) == ["b"]

    c.reconcile("b")
    status = c.status("b")
    assert status["phase"] == "Pending" and status["reason"].startswith("DeviceConflict: ")
    assert f"is allocated to claim {a_claim} too" in status["reason"]
    assert status["moves"][-1]["reason"] == "DeviceConflict"
    assert status["moves"][-1]["claim"] == b_claim
    assert c.api.obj(kube.PODS, "orw-b")["metadata"].get("deletionTimestamp")

    c.api.finish_pod("orw-b")
    c.reconcile("b")  # no pod: its claim goes, the device with it
    assert c.api.obj(kube.CLAIMS, b_claim) is None
    assert c.status("b")["reason"].startswith("DeviceConflict: ")
    c.reconcile("b")  # placed again, on the node's free device, as a newcomer is
    assert c.status("b")["phase"] == "Placing"
    assert "placed again after its claim on node node-0 gave up a device" in (
        c.status("b")["reason"])
    c.allocate_and_run("b")
    assert c.status("b")["phase"] == "Running"
    devices = {c.status(w)["claimName"]: c.api.obj(kube.CLAIMS, c.status(w)["claimName"])[
        "status"]["allocation"]["devices"]["results"][0]["device"] for w in ("a", "b")}
    assert sorted(devices.values()) == ["gpu-0", "gpu-1"]

    c.reconcile("a")  # a was never touched
    assert c.status("a")["claimName"] == a_claim and c.status("a")["phase"] == "Running"
    assert c.api.obj(kube.PODS, "orw-a")["metadata"]["uid"] == a_pod["metadata"]["uid"]
    assert "moves" not in c.status("a")


def test_everyone_on_the_claim_giving_up_its_device_leaves_it() -> None:
    """d joined b's claim (a has c beside it, and the node no free device): both pods
    go, and b's claim is deleted with d still on it -- a join cannot keep a device its
    claim gives up. a and c, on the claim keeping it, are never touched."""
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
    assert sorted(workers_in_conflict(c.cache, a_claim)) == ["b", "d"]

    for w in ("b", "d"):
        c.reconcile(w)
        assert c.status(w)["reason"].startswith("DeviceConflict: "), w
        assert c.api.obj(kube.PODS, f"orw-{w}")["metadata"].get("deletionTimestamp")
        c.api.finish_pod(f"orw-{w}")
    c.reconcile("b")  # its own claim goes though d sits on it
    assert c.api.obj(kube.CLAIMS, b_claim) is None
    for w in ("d", "b"):  # placed again, as anyone arriving now would be
        c.reconcile(w)
        assert c.status(w)["phase"] == "Placing", w
        c.allocate_and_run(w)
        assert c.status(w)["phase"] == "Running", w
    held = [r["device"] for claim in c.api.all(kube.CLAIMS)
            for r in claim["status"]["allocation"]["devices"]["results"]]
    assert sorted(held) == ["gpu-0", "gpu-1"]  # one claim per device again
    for w in ("a", "c"):
        c.reconcile(w)
        assert c.status(w)["phase"] == "Running" and c.status(w)["claimName"] == a_claim
        assert "moves" not in c.status(w)
