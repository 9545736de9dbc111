from controller.fleet.reader import build_fleet, read_bookings, read_nodes, read_slices
from controller.k8s.objects import Worker
from placement import GiB, Role
from tests.unit.controller.conftest import DRIVER, node_obj, slice_obj, worker_obj


def test_one_complete_pool_per_node() -> None:
    hardware, pools, notes = read_slices([slice_obj("n1", 8, "80Gi")], DRIVER)
    assert hardware["n1"].devices == 8
    assert hardware["n1"].device_memory == 80 * GiB
    assert hardware["n1"].product == "Example GPU"
    assert pools == {"n1": "n1"} and notes == []


def test_smallest_device_wins() -> None:
    hardware, _, _ = read_slices([slice_obj("n1", memories=["80Gi", "40Gi", "80Gi"])], DRIVER)
    assert (hardware["n1"].devices, hardware["n1"].device_memory) == (3, 40 * GiB)


def test_only_latest_generation_counts() -> None:
    old = slice_obj("n1", 8, "40Gi", generation=1, name="old")
    new = slice_obj("n1", 4, "80Gi", generation=2, name="new")
    hardware, _, _ = read_slices([old, new], DRIVER)
    assert (hardware["n1"].devices, hardware["n1"].device_memory) == (4, 80 * GiB)


def test_multi_slice_pool_counts_only_when_complete() -> None:
    a = slice_obj("n1", 4, generation=3, count=2, name="a")
    b = slice_obj("n1", 4, generation=3, count=2, name="b")
    hardware, _, _ = read_slices([a, b], DRIVER)
    assert hardware["n1"].devices == 8
    partial, _, notes = read_slices([a], DRIVER)
    assert "n1" not in partial
    assert "1 of 2" in notes[0].text


def test_partial_new_generation_hides_pool_rather_than_mixing() -> None:
    old_a = slice_obj("n1", 4, generation=1, count=2, name="old-a")
    old_b = slice_obj("n1", 4, generation=1, count=2, name="old-b")
    new_a = slice_obj("n1", 4, generation=2, count=2, name="new-a")
    hardware, _, _ = read_slices([old_a, old_b, new_a], DRIVER)
    assert "n1" not in hardware


def test_other_drivers_and_devices_without_memory_are_ignored() -> None:
    other = slice_obj("n1", 8, driver="other.example.com")
    mine = slice_obj("n2", 2)
    mine["spec"]["devices"].append({"name": "nic", "attributes": {}})
    qualified = slice_obj("n3", 1)
    qualified["spec"]["devices"][0]["capacity"] = {f"{DRIVER}/memory": {"value": "24Gi"}}
    no_node = slice_obj("n4", 1)
    del no_node["spec"]["nodeName"]
    hardware, _, notes = read_slices([other, mine, qualified, no_node], DRIVER)
    assert set(hardware) == {"n2", "n3"}
    assert hardware["n2"].devices == 2
    assert hardware["n3"].device_memory == 24 * GiB
    assert any("no nodeName" in n.text for n in notes)


def hw(*names: str) -> dict:
    return read_slices([slice_obj(n, 8) for n in names], DRIVER)[0]


def test_nodes_need_the_enabled_label_and_published_devices() -> None:
    nodes, warnings = read_nodes([node_obj("a"), node_obj("b", enabled=False), node_obj("c")],
                                 hw("a", "b"))
    assert [n.name for n in nodes] == ["a"]
    assert warnings == []
    assert nodes[0].host_memory == 1 << 40


def test_role_labels_and_max_workers() -> None:
    nodes, warnings = read_nodes([
        node_obj("a", labels={"openrl.io/trainer": "true", "openrl.io/max-workers-per-claim": "4"}),
        node_obj("b", labels={"openrl.io/sampler": "true", "openrl.io/trainer": "true"}),
        node_obj("c"),
    ], hw("a", "b", "c"))
    by_name = {n.name: n for n in nodes}
    assert by_name["a"].roles == {Role.TRAINER} and by_name["a"].max_workers_per_claim == 4
    assert by_name["b"].roles == {Role.TRAINER, Role.SAMPLER}
    assert by_name["c"].roles == frozenset() and by_name["c"].max_workers_per_claim == 1
    assert warnings == []


def test_malformed_labels_fall_back_and_say_so() -> None:
    nodes, warnings = read_nodes([
        node_obj("a", labels={"openrl.io/max-workers-per-claim": "two"}),
        node_obj("b", labels={"openrl.io/max-workers-per-claim": "0"}),
        node_obj("c", labels={"openrl.io/trainer": "false"}),
        node_obj("d", memory="lots"),
    ], hw("a", "b", "c", "d"))
    assert {n.name: n.max_workers_per_claim for n in nodes} == {"a": 1, "b": 1, "d": 1}
    assert next(n for n in nodes if n.name == "d").host_memory is None
    assert len(warnings) == 4
    assert any("'two'" in w.text and "using 1" in w.text for w in warnings)
    assert any("node c" in w.text and "accepts no workers" in w.text for w in warnings)


def test_a_max_workers_label_above_256_warns_and_counts_as_256() -> None:
    nodes, warnings = read_nodes(
        [node_obj("a", labels={"openrl.io/max-workers-per-claim": "300"})], hw("a"))
    assert nodes[0].max_workers_per_claim == 256
    assert [w.text for w in warnings] == [
        "node a: openrl.io/max-workers-per-claim='300' is above 256, the most "
        "consumers a ResourceClaim lists; using 256"]


def other_pod(name: str, node: str, phase: str = "Running", *, managed: bool = False,
              namespace: str = "kube-system") -> dict:
    labels = {"openrl.io/managed": "true"} if managed else {}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_pod_slots_are_allocatable_pods_less_the_pods_that_are_not_workers() -> None:
    a, b, c = node_obj("a"), node_obj("b"), node_obj("c")
    a["status"]["allocatable"]["pods"] = "110"
    b["status"]["allocatable"]["pods"] = "2"
    c["status"]["allocatable"]["pods"] = "many"
    pods = [other_pod("ds-a", "a"), other_pod("ds-b", "a", "Pending"),
            other_pod("done", "a", "Succeeded"), other_pod("crashed", "a", "Failed"),
            other_pod("orw-w", "a", managed=True, namespace="openrl"),  # a worker: booked
            other_pod("ds-1", "b"), other_pod("ds-2", "b"), other_pod("ds-3", "b"),
            {"metadata": {"name": "unbound"}, "status": {"phase": "Pending"}}]
    view = build_fleet(slices=[slice_obj(n, 8) for n in "abc"], nodes=[a, b, c], claims=[],
                       workers=[], pods=[], driver=DRIVER, node_pods=pods)
    assert {n: node.pods for n, node in view.nodes.items()} == {"a": 108, "b": 0, "c": None}
    assert tuple(w.text for w in view.warnings) == (
        "node c: allocatable pods 'many' unreadable; pod slots unchecked",)
    # Seats count no more than the pod slots: 8 x 1 on a, none on b, 8 on c.
    assert view.seats_total == 8 + 0 + 8


def worker(name: str, claim: str = "", phase: str = "", uid: str = "") -> Worker:
    obj = worker_obj(name, "50Gi", ownerId="team")
    obj["metadata"]["uid"] = uid or f"uid-{name}"
    obj["status"] = {"claimName": claim, "phase": phase} if claim else {}
    return Worker.from_obj(obj)


def pod(name: str, claim: str, owner_uid: str, phase: str = "Running") -> dict:
    return {
        "metadata": {"name": name, "labels": {"openrl.io/managed": "true"},
                     "annotations": {"openrl.io/memory": str(20 * GiB), "openrl.io/owner": "o"},
                     "ownerReferences": [{"apiVersion": "openrl.io/v1alpha1",
                                          "kind": "OpenRLWorker", "name": "x",
                                          "uid": owner_uid, "controller": True}]},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
        "status": {"phase": phase},
    }


def test_bookings_from_status_pod_wins_failed_excluded_orphans_held() -> None:
    workers = [worker("a", "c1", "Running"), worker("b", "c1", "Placing"),
               worker("f", "c2", "Failed"), worker("p")]
    pods = [
        pod("orw-b", "c3", "uid-b"),            # lost status write: the pod's claim wins
        pod("orw-p", "c4", "uid-p", "Pending"),  # status never written at all
        pod("orw-gone", "c1", "uid-old"),         # its worker is gone, it still holds a seat
        pod("orw-done", "c1", "uid-old2", "Failed"),  # terminated: holds nothing
    ]
    bookings = read_bookings(workers, pods)
    assert {k: v.claim for k, v in bookings.items()} == {
        "a": "c1", "b": "c3", "p": "c4", "pod/orw-gone": "c1"}
    assert bookings["a"].owner == "team" and bookings["a"].memory == 50 * GiB
    assert bookings["pod/orw-gone"].memory == 20 * GiB


def test_build_fleet_joins_everything() -> None:
    claim = {
        "metadata": {"name": "c1", "labels": {"openrl.io/managed": "true"},
                     "annotations": {"openrl.io/sized-for-node": "a"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [{"pool": "a", "device": "gpu-0"}]},
                                  "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                      {"key": "metadata.name", "operator": "In",
                                       "values": ["a"]}]}]}}},
    }
    terminating = {**claim, "metadata": {**claim["metadata"], "name": "c9",
                                         "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    view = build_fleet(
        slices=[slice_obj("a", 8)],
        nodes=[node_obj("a", labels={"openrl.io/max-workers-per-claim": "2"})],
        claims=[claim, terminating],
        workers=[worker("w1", "c1", "Running"), worker("w2", "c9", "Running")],
        pods=[], driver=DRIVER)
    assert set(view.claims) == {"c1"}
    assert view.fleet.free_devices("a") == 6  # c9 keeps its device until it is gone
    assert view.fleet.claim_of("w1") == "c1"
    assert view.fleet.claim_of("w2") == "c9"  # booked there until then
    assert not view.fleet.is_allocated("c9")  # and nobody joins it
    assert (view.seats_used, view.seats_total) == (1, 16)


def test_terminating_claim_keeps_its_devices_until_gone_and_takes_nobody() -> None:
    claim = {
        "metadata": {"name": "c1", "labels": {"openrl.io/managed": "true"},
                     "annotations": {"openrl.io/sized-for-node": "a"},
                     "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": 4}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"pool": "a", "device": f"gpu-{i}"} for i in range(4)]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}},
    }
    nodes = [node_obj("a", labels={"openrl.io/max-workers-per-claim": "2"})]
    workers = [worker("w1", "c1", "Running")]
    in_use = build_fleet(slices=[slice_obj("a", 8)], nodes=nodes, claims=[claim],
                         workers=workers, pods=[pod("orw-w1", "c1", "uid-w1")], driver=DRIVER)
    assert in_use.fleet.free_devices("a") == 4  # its devices are still DRA's
    assert not in_use.fleet.is_allocated("c1")  # so it is never joined
    assert "c1" not in in_use.claims  # not a claim to resume on
    released = build_fleet(slices=[slice_obj("a", 8)], nodes=nodes, claims=[], workers=workers,
                           pods=[], driver=DRIVER)
    assert released.fleet.free_devices("a") == 8  # gone: its devices are free
