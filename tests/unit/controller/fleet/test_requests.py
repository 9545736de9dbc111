"""A node's parking budget: other pods' memory requests as kube-scheduler counts them,
taken from the node's allocatable memory by both readings alike."""

from __future__ import annotations

from typing import Any

import pytest

from controller.fleet.reader import build_fleet
from controller.fleet.requests import Budget, budget_of, memory_request, parking_budget
from controller.fleet.warning import Kind
from controller.k8s import kube
from controller.k8s.objects import Obj
from controller.store.cache import Cache, strip
from controller.store.records import PageDecoder, to_obj
from placement.quantity import parse_quantity
from tests.unit.controller.conftest import DRIVER, node_obj, slice_obj

Gi = 1024**3


def asks(memory: str | None, **more: Any) -> Obj:
    requests = {"cpu": "100m", **({"memory": memory} if memory else {})}
    return {"name": "c", "image": "busybox", "resources": {"requests": requests,
                                                          "limits": {"memory": "99Gi"}},
            **more}


def pod(name: str, node: str, *containers: str | None, inits: tuple[Obj, ...] = (),
        overhead: str | None = None, phase: str = "Running", managed: bool = False) -> Obj:
    spec: Obj = {"nodeName": node, "containers": [asks(m) for m in containers]}
    if inits:
        spec["initContainers"] = list(inits)
    if overhead:
        spec["overhead"] = {"memory": overhead, "cpu": "250m"}
    labels = {"openrl.io/managed": "true"} if managed else {"app": "x"}
    return {"metadata": {"name": name, "namespace": "kube-system", "labels": labels},
            "spec": spec, "status": {"phase": phase}}


SIDECAR = {"restartPolicy": "Always"}


@pytest.mark.parametrize(("the_pod", "gib"), [
    (pod("p", "n", "1Gi", "2Gi"), 3),  # containers add up
    (pod("p", "n", "1Gi", None), 1),  # one asking nothing adds nothing
    (pod("p", "n", "1Gi", overhead="1Gi"), 2),  # the overhead comes on top
    # a regular init container runs alone: the larger of it and the containers
    (pod("p", "n", "1Gi", inits=(asks("4Gi"),)), 4),
    (pod("p", "n", "5Gi", inits=(asks("4Gi"),)), 5),
    # a sidecar runs beside the containers, and beside the init containers after it
    (pod("p", "n", "1Gi", inits=(asks("2Gi", **SIDECAR),)), 3),
    (pod("p", "n", "1Gi", inits=(asks("2Gi", **SIDECAR), asks("4Gi"))), 6),
    (pod("p", "n", "1Gi", inits=(asks("4Gi"), asks("2Gi", **SIDECAR))), 4),
    (pod("p", "n", "1Gi", inits=(asks("2Gi", **SIDECAR), asks("4Gi")), overhead="1Gi"), 7),
])
def test_a_pods_memory_request_is_the_schedulers(the_pod: Obj, gib: int) -> None:
    assert memory_request(the_pod) == gib * Gi
    # the stripped pod keeps all it needs, in a list page and in an event alike
    stripped = strip(kube.NODE_PODS, the_pod)
    assert memory_request(stripped) == gib * Gi
    import json
    _, records = PageDecoder(kube.NODE_PODS)(json.dumps({"items": [the_pod]}).encode())
    assert to_obj(records[0]) == stripped


def test_the_stripped_pod_keeps_the_request_and_nothing_more() -> None:
    the_pod = pod("p", "n", "1Gi", None, inits=(asks("2Gi", **SIDECAR), asks(None)),
                  overhead="1Gi")
    assert strip(kube.NODE_PODS, the_pod)["spec"] == {
        "nodeName": "n",
        "containers": [{"resources": {"requests": {"memory": "1Gi"}}}],
        "initContainers": [{"resources": {"requests": {"memory": "2Gi"}},
                            "restartPolicy": "Always"}],
        "overhead": {"memory": "1Gi"}}


def test_an_unreadable_request_counts_as_nothing() -> None:
    assert memory_request(pod("p", "n", "lots", "1Gi")) == Gi


def test_a_budget_below_zero_is_zero_with_a_warning() -> None:
    assert parking_budget("n", 100 * Gi, 30 * Gi) == (70 * Gi, None)
    assert parking_budget("n", None, 30 * Gi) == (None, None)
    budget, warned = parking_budget("n", 10 * Gi, 30 * Gi)
    assert budget == 0 and warned is not None
    assert (warned.kind, warned.node) == (Kind.NODE, "n")
    assert warned.text == ("node n: other pods request 30Gi of allocatable memory 10Gi; "
                           "parking budget 0")


def test_the_account_names_the_largest_few() -> None:
    account = budget_of(100 * Gi, [("a", Gi), ("b", 30 * Gi), ("c", 0), ("d", 5 * Gi),
                                   ("e", 5 * Gi)])
    assert account == Budget(100 * Gi, 41 * Gi, 5, (("b", 30 * Gi), ("d", 5 * Gi),
                                                  ("e", 5 * Gi)))
    assert account.left == 59 * Gi
    assert budget_of(Gi, [("a", 2 * Gi)]).left == 0


NODE = node_obj("n", labels={"openrl.io/max-workers-per-claim": "2"}, memory="100Gi")


def plain(node_pods: list[Obj]) -> Any:
    view = build_fleet(slices=[slice_obj("n", 1)], nodes=[NODE], claims=[], workers=[],
                       pods=[], driver=DRIVER, node_pods=node_pods)
    return view.nodes["n"].host_memory, sorted(view.warnings), view.budgets["n"]


def test_both_readings_take_other_pods_from_the_allocatable_memory() -> None:
    """A DaemonSet's pod lands, grows in place, another asks more than is left, one
    finishes, one leaves: the cache's node reads as the plain reading of its pods."""
    cache = Cache(DRIVER)
    for res, obj in ((kube.NODES, NODE), (kube.SLICES, slice_obj("n", 1))):
        cache.event(res, "ADDED", {**obj, "metadata": {**obj["metadata"],
                                                       "resourceVersion": "1"}})
    held: dict[str, Obj] = {}
    steps = [
        ("ADDED", pod("ds", "n", "30Gi"), 70),
        ("MODIFIED", pod("ds", "n", "30Gi", overhead="10Gi"), 60),
        ("ADDED", pod("big", "n", "80Gi"), 0),  # asks more than is left: 0, warned
        ("ADDED", pod("worker", "n", "50Gi", managed=True), 0),  # ours: bookings count it
        ("MODIFIED", pod("big", "n", "80Gi", phase="Succeeded"), 60),
        ("ADDED", pod("elsewhere", "m", "80Gi"), 60),
        ("DELETED", pod("ds", "n", "30Gi", overhead="10Gi"), 100),
    ]
    for version, (kind, obj, gib) in enumerate(steps, start=2):
        obj["metadata"]["resourceVersion"] = str(version)
        cache.event(kube.NODE_PODS, kind, obj)
        name = f"kube-system/{obj['metadata']['name']}"
        if kind == "DELETED":
            held.pop(name)
        else:
            held[name] = obj
        host, warnings, _ = plain(list(held.values()))
        assert host == gib * Gi == cache.view.nodes["n"].host_memory
        assert warnings == sorted(cache.view.warnings)
        assert bool(warnings) == (gib == 0)


def test_the_plain_reading_accounts_for_the_budget() -> None:
    _, _, account = plain([pod("ds", "n", "30Gi"), pod("log", "n", "1Gi"),
                           pod("worker", "n", "50Gi", managed=True)])
    assert account == Budget(parse_quantity("100Gi"), 31 * Gi, 2,
                             (("kube-system/ds", 30 * Gi), ("kube-system/log", Gi)))
