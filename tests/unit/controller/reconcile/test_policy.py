"""The placement policy in the controller: --strategy, a worker's spec.exclusive, owner affinity."""

from __future__ import annotations

from controller.k8s import kube
from tests.unit.controller.conftest import Cluster

SHARING = {"openrl.io/max-workers-per-claim": "2"}


def test_binpack_joins_an_allocated_claim_before_cutting_a_new_one() -> None:
    c = Cluster(devices=2, node_labels=SHARING, strategy="binpack")
    a = c.place("a")
    c.allocate_and_run("a")
    b = c.place("b")  # a device is free, but a's claim can seat b
    assert b["claimName"] == a["claimName"]
    assert b["reason"].endswith("binpack joins before cutting")
    third = c.place("third")  # a's claim is full: a new claim
    assert third["claimName"] not in {a["claimName"]}


def test_an_exclusive_worker_is_never_joined_and_waits_for_a_device_of_its_own() -> None:
    c = Cluster(devices=2, node_labels=SHARING)
    solo = c.place("solo", exclusive=True)
    b = c.place("b")
    c.allocate_and_run("solo")
    c.allocate_and_run("b")
    joined = c.place("c")  # no device free: c joins b's claim, never solo's
    assert joined["claimName"] == b["claimName"] != solo["claimName"]
    waiting = c.place("solo-2", exclusive=True)
    assert waiting["phase"] == "Pending"
    assert "exclusive: it shares no claim and waits for devices of its own" in waiting["reason"]


def test_a_joiner_goes_to_its_owners_claim_first() -> None:
    c = Cluster(devices=2, node_labels=SHARING)
    a = c.place("a", ownerId="job-a")
    b = c.place("b", ownerId="job-b")
    c.allocate_and_run("a")
    c.allocate_and_run("b")
    joined = c.place("b-sampler", "10Gi", role="sampler", ownerId="job-b")
    assert joined["claimName"] == b["claimName"] != a["claimName"]
    assert joined["reason"].endswith("same owner, other role")


def test_a_joiner_passes_over_its_owners_claim_of_its_own_role() -> None:
    # Two samplers of one job roll out together: on one claim they would wait for each other.
    c = Cluster(devices=2, node_labels=SHARING)
    # No claim is preferred then: the ranking falls to fewest workers, then the claim's name.
    c.place("s", "10Gi", role="sampler", ownerId="job-s")
    other = c.place("b", "10Gi", role="sampler", ownerId="job-b")
    c.allocate_and_run("s")
    c.allocate_and_run("b")
    joined = c.place("s-2", "10Gi", role="sampler", ownerId="job-s")
    assert joined["claimName"] == other["claimName"]


def test_exclusive_must_be_true_or_false() -> None:
    c = Cluster(devices=1)
    status = c.place("w", exclusive="yes")
    assert status["phase"] == "Failed"
    assert "spec.exclusive 'yes' is not true or false" in status["reason"]


def test_spec_devices_gets_a_claim_of_exactly_that_many_floored_at_its_share() -> None:
    # 100Gi would take 2 of 8 x 80Gi; devices: 4 takes 4, each of at least 25Gi.
    c = Cluster(devices=8)
    status = c.place("tp", "100Gi", devices=4)
    claim = c.api.obj(kube.CLAIMS, status["claimName"])
    assert claim is not None
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["count"] == 4
    assert claim["metadata"]["labels"]["openrl.io/memory-floor"] == "25Gi"
    assert claim["metadata"]["labels"]["openrl.io/memory-ceiling"] == "80Gi"
    expression = request["exactly"]["selectors"][0]["cel"]["expression"]
    assert 'compareTo(quantity("25Gi")) >= 0' in expression
    assert 'compareTo(quantity("80Gi")) <= 0' in expression
    assert c.place("plain", "100Gi")["claimName"] != status["claimName"]
    assert c.api.obj(kube.CLAIMS, c.status("plain")["claimName"])["spec"]["devices"][
        "requests"][0]["exactly"]["count"] == 2


def test_spec_devices_more_than_any_node_has_never_fits() -> None:
    c = Cluster(devices=8)
    status = c.place("tp", "100Gi", devices=16)
    assert status["phase"] == "Pending"
    assert status["reason"].startswith(
        "NoCapacity: devices: 16: no trainer node has 16 devices of at least 6.25Gi")


def test_spec_devices_must_be_a_whole_number_from_one() -> None:
    c = Cluster()
    for bad in (0, -1, 2.5, "4", True):
        name = f"w{abs(hash(repr(bad))) % 1000}"
        status = c.place(name, devices=bad)
        assert f"spec.devices {bad!r} is not a whole number of at least 1" in \
            status["reason"], status
