"""Warnings as values: one sentence per kind, the make-way rule both readings share, and
the controller's log of them (each once while it stands)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controller.fleet.reader import build_fleet
from controller.fleet.rules import make_way
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import kube
from controller.k8s.objects import Worker
from controller.store.cache import Cache
from controller.store.work import WAKE
from placement import Claim, Node
from tests.unit.controller.conftest import Cluster, slice_obj, sync_cache


@pytest.mark.parametrize(("kind", "name", "detail", "text", "node", "claim"), [
    (Kind.CLASS, "gpu", "selector 0: no CEL expression; it selects no device",
     "deviceclass gpu: selector 0: no CEL expression; it selects no device", "", ""),
    (Kind.POOL, "p", "generation 2 has 1 of 2 slices; skipped until complete",
     "pool p: generation 2 has 1 of 2 slices; skipped until complete", "", ""),
    (Kind.SLICE, "s", "no nodeName; skipped", "slice s: no nodeName; skipped", "", ""),
    (Kind.DEVICES, "n", "1 device left out (nvlink): no memory capacity",
     "node n: 1 device left out (nvlink): no memory capacity", "n", ""),
    (Kind.NODE_LEFT_OUT, "n", "node n is cordoned (unschedulable)",
     "node n: left out of placement: node n is cordoned (unschedulable)", "n", ""),
    (Kind.CLAIM_LEFT_OUT, "c", "worker w is already on claim d",
     "claim c: left out of placement: worker w is already on claim d", "", "c"),
    (Kind.UNREAD, "claims of other namespaces not readable", "devices count as free",
     "claims of other namespaces not readable: devices count as free", "", ""),
])
def test_each_kind_says_its_one_sentence_and_names_what_it_is_about(
        kind: Kind, name: str, detail: str, text: str, node: str, claim: str) -> None:
    said = warning(kind, name, detail)
    assert (said.text, str(said), said.kind, said.node, said.claim) == (
        text, text, kind, node, claim)


def test_warnings_sort_by_their_text() -> None:
    b = warning(Kind.NODE, "a", "zzz")
    a = warning(Kind.POOL, "b", "aaa")
    assert sorted([a, b]) == [b, a]  # "node a: ..." before "pool b: ..."


def test_a_node_gives_way_to_the_first_claim_by_name_wider_than_it() -> None:
    nodes = [Node("n", devices=2, device_memory=80), Node("m", devices=4, device_memory=80)]
    claims = [Claim("c-b", "n", 3), Claim("c-a", "n", 4), Claim("c-c", "m", 4),
              Claim("c-0", "n", 2), Claim("c-z", "gone", 9)]
    assert make_way(nodes, claims) == {"n": FleetWarning(
        "node n: left out of placement: claim c-a holds 4 devices, node n has 2",
        Kind.MAKE_WAY, "n", "c-a")}
    assert make_way(nodes, [Claim("c-0", "n", 2)]) == {}


def narrow_slice() -> dict[str, Any]:
    """node-0's 4 devices, 3 of them tainted: it reads 1."""
    narrow = slice_obj("node-0", 4)
    for device in narrow["spec"]["devices"][1:]:
        device["taints"] = [{"key": "gpu.example.com/xid", "effect": "NoSchedule"}]
    return narrow


def two_wide_claims() -> tuple[Cluster, str, str]:
    """One node of 4 devices, read as 1, with two claims of 2 on it (by name)."""
    cluster = Cluster(nodes=1, devices=4)
    claims = []
    for worker in ("a", "b"):
        cluster.place(worker, "150Gi")
        cluster.allocate_and_run(worker)
        claims.append(cluster.status(worker)["claimName"])
    cluster.api.put(kube.SLICES, narrow_slice())
    first, second = sorted(claims)
    return cluster, first, second


def plain_warnings(cluster: Cluster) -> list[FleetWarning]:
    api = cluster.api
    return sorted(build_fleet(
        slices=api.all(kube.SLICES), nodes=api.all(kube.NODES), claims=api.all(kube.CLAIMS),
        workers=[Worker.from_obj(w) for w in api.all(kube.WORKERS)], pods=api.all(kube.PODS),
        driver=cluster.settings.device_driver).warnings)


def test_a_node_that_gave_way_names_the_first_claim_whichever_came_first() -> None:
    """The node gave way to the second claim (the first one was away a moment); when the
    first comes back the node names it, as the plain reading does."""
    cluster, first, second = two_wide_claims()
    restarted = Cache(cluster.settings.device_driver)
    sync_cache(restarted, cluster.api)
    kept: Any = cluster.api.obj(kube.CLAIMS, first)
    cluster.api.delete(kube.CLAIMS, first)
    sync_cache(restarted, cluster.api)
    assert [w.claim for w in restarted.view.warnings if w.kind is Kind.MAKE_WAY] == [second]

    cluster.api.put(kube.CLAIMS, kept)
    sync_cache(restarted, cluster.api)
    assert [w.claim for w in restarted.view.warnings if w.kind is Kind.MAKE_WAY] == [first]
    assert sorted(restarted.view.warnings) == plain_warnings(cluster)
    assert "node-0" not in restarted.view.nodes

    for claim in (first, second):  # both leave: the node counts again
        cluster.api.delete(kube.CLAIMS, claim)
    sync_cache(restarted, cluster.api)
    assert restarted.view.nodes["node-0"].devices == 1
    assert [w.kind for w in restarted.view.warnings] == [Kind.DEVICES]


def test_the_controller_logs_a_warning_once_while_it_stands(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster, first, _ = two_wide_claims()
    cluster.sync()

    def logged() -> list[tuple[str, object]]:
        out = [(r.getMessage(), getattr(r, "fields", {}).get("node")) for r in caplog.records
               if "left out of placement" in r.getMessage()]
        caplog.clear()
        return out

    said = (f"node node-0: left out of placement: claim {first} holds 2 devices, "
            "node node-0 has 1")
    with caplog.at_level(logging.WARNING, logger="openrl.controller"):
        cluster.reconciler(WAKE)
        assert logged() == [(said, "node-0")]
        cluster.reconciler(WAKE)
        assert logged() == []  # still standing: not again

        cluster.api.put(kube.SLICES, slice_obj("node-0", 4))  # the devices heal
        cluster.sync()
        cluster.reconciler(WAKE)
        assert logged() == [] and cluster.reconciler._warned == frozenset()

        cluster.api.put(kube.SLICES, narrow_slice())
        cluster.sync()
        cluster.reconciler(WAKE)
        assert logged() == [(said, "node-0")]  # it came back: said again
