"""Devices shaped like a real GPU driver's: only what the DeviceClass selects, untainted,
with its counters free, counts; everything else is named per node with its reason."""

from __future__ import annotations

from typing import Any

from controller.fleet.reader import build_fleet, read_slices
from controller.fleet.selectors import DeviceSelector
from controller.k8s import kube
from controller.store.cache import Cache, strip
from controller.store.queue import WorkQueue
from controller.store.watches import feeds
from controller.store.work import WAKE
from placement.quantity import parse_quantity

DRIVER = "gpu.nvidia.com"
GPU_CLASS = {"metadata": {"name": "gpu.nvidia.com"},
             "spec": {"selectors": [{"cel": {
                 "expression": "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}


def device(name: str, kind: str, memory: str | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "attributes": {
        "type": {"string": kind}, "productName": {"string": "NVIDIA A100-SXM4-80GB"}}}
    if memory is not None:
        out["capacity"] = {"memory": {"value": memory}}
    out.update(extra)
    return out


def nv_slice(node: str, devices: list[dict[str, Any]], *, name: str = "", count: int = 1,
             counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node, "devices": devices,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": count}}
    if counters is not None:
        spec["sharedCounters"], spec["devices"] = counters, []
    return {"metadata": {"name": name or f"{node}-gpu"}, "spec": spec}


def node_obj(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"openrl.io/enabled": "true"}},
            "status": {"allocatable": {"memory": "1Ti", "pods": "110"}}}


def read(slices: list[dict[str, Any]], *, device_class: dict[str, Any] | None = GPU_CLASS,
         foreign: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    nodes = sorted({s["spec"]["nodeName"] for s in slices})
    return build_fleet(slices=slices, nodes=[node_obj(n) for n in nodes], claims=[],
                       workers=[], pods=[], driver=DRIVER, device_class=device_class,
                       foreign_claims=foreign)


def test_a_partly_partitioned_node_counts_its_whole_gpus_and_names_the_mig_devices() -> None:
    devices = [device("gpu-0", "gpu", "80Gi"), device("gpu-1", "gpu", "80Gi"),
               *(device(f"mig-1-{i}", "mig", "10Gi") for i in range(3))]
    view = read([nv_slice("a100", devices)])
    node = view.nodes["a100"]
    assert (node.devices, node.device_memory) == (2, parse_quantity("80Gi"))
    assert tuple(w.text for w in view.warnings) == (
        "node a100: 3 devices left out (mig-1-0, mig-1-1, mig-1-2): "
        "not selected by class gpu.nvidia.com",)


def test_xid_tainted_gpus_are_left_out_and_an_informational_taint_is_not() -> None:
    xid = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    unmonitored = [{"key": "gpu.nvidia.com/unmonitored", "effect": "None"}]
    names = [f"gpu-{i}" for i in (1, 2, 3, 4, 5, 6, 7, 0)]  # as the driver lists them
    devices = [device(n, "gpu", "81559Mi",
                      taints=xid if n in ("gpu-3", "gpu-6") else unmonitored) for n in names]
    view = read([nv_slice("h100", devices)])
    node = view.nodes["h100"]
    assert (node.devices, node.device_memory) == (6, parse_quantity("81559Mi"))
    assert tuple(w.text for w in view.warnings) == (
        "node h100: 2 devices left out (gpu-3, gpu-6): tainted "
        "gpu.nvidia.com/xid=79:NoSchedule",)


def dynamic_mig(node: str) -> list[dict[str, Any]]:
    uses = [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]
    half = [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "20Gi"}}}]
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]
    return [
        nv_slice(node, [], name=f"{node}-counters", count=2, counters=counters),
        nv_slice(node, [device("gpu-0", "gpu", "40Gi", consumesCounters=uses),
                        device("gpu-0-mig-0", "mig", "20Gi", consumesCounters=half),
                        device("gpu-0-mig-1", "mig", "20Gi", consumesCounters=half)], count=2),
    ]


def test_a_dynamic_mig_node_counts_the_whole_gpu_once() -> None:
    view = read(dynamic_mig("l40"))
    node = view.nodes["l40"]
    assert (node.devices, node.device_memory) == (1, parse_quantity("40Gi"))
    assert "(gpu-0-mig-0, gpu-0-mig-1): not selected" in view.warnings[0].text


def test_a_counters_pool_is_complete_only_with_every_slice() -> None:
    _, gpus = dynamic_mig("l40")
    view = read([gpus])
    assert "l40" not in view.nodes
    assert tuple(w.text for w in view.warnings) == (
        "pool l40: generation 1 has 1 of 2 slices; skipped until "
        "complete",)


def test_a_gpu_whose_counters_another_claim_consumes_is_not_free() -> None:
    other = {"metadata": {"name": "inference", "namespace": "team"},
             "status": {"allocation": {"devices": {"results": [
                 {"driver": DRIVER, "pool": "l40", "device": "gpu-0-mig-1"}]}}}}
    view = read(dynamic_mig("l40"), foreign=[other])
    assert "l40" not in view.nodes
    assert ("node l40: 1 device left out (gpu-0): counters consumed by claim team/inference "
            "(gpu-0-mig-1)") in [w.text for w in view.warnings]


def test_devices_without_memory_are_named() -> None:
    view = read([nv_slice("n", [device("gpu-0", "gpu", "80Gi"), device("nvlink", "gpu", None)])])
    assert view.nodes["n"].devices == 1
    assert tuple(w.text for w in view.warnings) == (
        "node n: 1 device left out (nvlink): no memory capacity",)


def test_a_device_shared_by_many_claims_counts_once_whole() -> None:
    shared = device("gpu-0", "gpu", "80Gi", allowMultipleAllocations=True)
    shared["capacity"]["memory"]["requestPolicy"] = {"default": "10Gi"}
    hardware, _, _ = read_slices([nv_slice("n", [shared])], DRIVER, DeviceSelector.of(GPU_CLASS))
    assert (hardware["n"].devices, hardware["n"].device_memory) == (1, parse_quantity("80Gi"))


def test_a_selector_that_fails_selects_nothing_and_is_named() -> None:
    broken = {"metadata": {"name": "gpu.nvidia.com"},
              "spec": {"selectors": [{"cel": {"expression": "device.attributes["}}]}}
    view = read([nv_slice("n", [device("gpu-0", "gpu", "80Gi")])], device_class=broken)
    assert "n" not in view.nodes
    assert view.warnings[0].text.startswith("deviceclass gpu.nvidia.com: selector 0: does not "
                                       "compile")
    missing = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {
        "expression": "device.attributes['gpu.nvidia.com'].index == 0"}}]}}
    view = read([nv_slice("n", [device("gpu-0", "gpu", "80Gi")])], device_class=missing)
    assert "selector 0 failed: no such key: 'index'" in view.warnings[0].text


def test_the_kubernetes_functions_read_quantities_and_versions() -> None:
    gpu = device("gpu-0", "gpu", "81559Mi", attributes={
        "type": {"string": "gpu"}, "driverVersion": {"version": "550.54.15"},
        "example.com/zone": {"string": "b"}})
    cases = {
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) < 0": True,
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))": True,
        "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('79Gi'))": False,
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))":
            True,
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.54.15-rc.1'))"
        " > 0": True,
        "device.attributes['example.com'].zone == 'b' && device.driver == 'gpu.nvidia.com'":
            True,
    }
    for expression, selected in cases.items():
        selector = DeviceSelector.of({"metadata": {"name": "c"}, "spec": {"selectors": [
            {"cel": {"expression": expression}}]}})
        assert (selector.verdict(DRIVER, gpu) == "") is selected, expression
    number = DeviceSelector.of({"metadata": {"name": "c"}, "spec": {"selectors": [
        {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory > 3"}}]}})
    assert "failed" in number.verdict(DRIVER, gpu)  # a quantity is no number, as in DRA


def test_a_taint_going_away_or_the_class_changing_wakes_the_waiting_workers() -> None:
    queue = WorkQueue()
    by_kind = {feed.resource.key: feed for feed in feeds(queue, DRIVER, device_class=DRIVER)}
    xid = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    tainted = nv_slice("h100", [device("gpu-0", "gpu", "81559Mi", taints=xid)])
    by_kind[kube.SLICES.key].event("ADDED", tainted)
    queue._due.clear()
    by_kind[kube.SLICES.key].event("MODIFIED", nv_slice(
        "h100", [device("gpu-0", "gpu", "81559Mi")]))  # healed: a device more
    assert WAKE in queue._due
    classes = by_kind[kube.DEVICE_CLASSES.key]
    classes.event("ADDED", GPU_CLASS)
    queue._due.clear()
    classes.event("MODIFIED", {**GPU_CLASS, "metadata": {"name": DRIVER, "labels": {"x": "1"}}})
    assert queue._due == {}  # its selectors did not change
    classes.event("MODIFIED", {"metadata": {"name": DRIVER}, "spec": {"selectors": []}})
    assert WAKE in queue._due
    queue._due.clear()
    classes.event("ADDED", {"metadata": {"name": "another-class"}, "spec": {}})
    assert queue._due == {}  # not the configured class


def test_a_claim_of_another_namespace_takes_its_devices_until_it_lets_them_go() -> None:
    """The scheduler's cache hears every namespace's claims but its own managed ones; a
    device such a claim holds is not free, and wakes the waiting workers when let go."""
    queue = WorkQueue()
    cache = Cache(DRIVER, device_class=DRIVER)
    by_kind = {feed.resource.key: feed
               for feed in feeds(queue, DRIVER, device_class=DRIVER, namespace="openrl")}
    foreign = by_kind[kube.OTHER_CLAIMS.key]

    def hear(res: kube.Resource, kind: str, obj: dict[str, Any]) -> None:
        stripped = strip(res, obj)
        cache.event(res, kind, stripped, stripped=True)
        if res.key in by_kind:
            by_kind[res.key].event(kind, stripped)

    hear(kube.DEVICE_CLASSES, "ADDED", GPU_CLASS)
    hear(kube.NODES, "ADDED", node_obj("h100"))
    hear(kube.SLICES, "ADDED", {**nv_slice("h100", [device(f"gpu-{i}", "gpu", "80Gi")
                                                   for i in range(2)]),
                                "metadata": {"name": "h100-gpu", "resourceVersion": "1"}})
    assert cache.view.nodes["h100"].devices == 2
    inference = {"metadata": {"name": "inference", "namespace": "team", "uid": "u1",
                              "resourceVersion": "2"}}
    hear(kube.OTHER_CLAIMS, "ADDED", inference)  # not allocated yet: holds nothing
    assert cache.view.nodes["h100"].devices == 2
    allocated = {**inference, "metadata": {**inference["metadata"], "resourceVersion": "3"},
                 "status": {"allocation": {"devices": {"results": [
                     {"driver": DRIVER, "pool": "h100", "device": "gpu-1",
                      "request": "gpu"}]}}}}
    queue._due.clear()
    hear(kube.OTHER_CLAIMS, "MODIFIED", allocated)
    assert cache.view.nodes["h100"].devices == 1
    assert ("node h100: 1 device left out (gpu-1): allocated to claim team/inference"
            in [w.text for w in cache.view.warnings])
    stored = cache.get(kube.OTHER_CLAIMS, "team/inference")
    assert stored == {"metadata": {"name": "team/inference", "namespace": "team",
                                   "uid": "u1", "resourceVersion": "3"},
                      "status": {"allocation": {"devices": {"results": [
                          {"driver": DRIVER, "pool": "h100", "device": "gpu-1"}]}}}}
    queue._due.clear()
    hear(kube.OTHER_CLAIMS, "MODIFIED", {**inference, "metadata": {
        **inference["metadata"], "resourceVersion": "4"}})  # deallocated
    assert cache.view.nodes["h100"].devices == 2
    assert WAKE in queue._due
    hear(kube.OTHER_CLAIMS, "MODIFIED", {**allocated, "metadata": {
        **allocated["metadata"], "resourceVersion": "5"}})
    queue._due.clear()
    hear(kube.OTHER_CLAIMS, "DELETED", {**allocated, "metadata": {
        **allocated["metadata"], "resourceVersion": "6"}})
    assert cache.view.nodes["h100"].devices == 2
    assert WAKE in queue._due
    ours = {"metadata": {"name": "c-1", "namespace": "openrl",
                         "labels": {"openrl.io/managed": "true"}}}
    assert not foreign.accept(strip(kube.OTHER_CLAIMS, ours))  # read whole as CLAIMS
    for other in ({**ours, "metadata": {**ours["metadata"], "namespace": "elsewhere"}},
                  {"metadata": {"name": "c-2", "namespace": "openrl"}}):
        assert foreign.accept(strip(kube.OTHER_CLAIMS, other))  # another install's; unmanaged
