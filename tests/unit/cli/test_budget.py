"""``snapshot`` and ``explain`` show a node's parking budget and what took it."""

from __future__ import annotations

from typing import Any

from cli.explain import _explanation, _explanation_lines
from cli.snapshot import budget_lines, snapshot_document, verify_snapshot
from controller.inspect_fleet import budget_account, read_live_fleet
from controller.k8s import kube
from placement import Request, Role
from placement.remedy import diagnose
from tests.unit.controller.conftest import DRIVER, Cluster


def other_pod(name: str, memory: str, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"nodeName": "node-0", "containers": [
                {"name": "c", "resources": {"requests": {"memory": memory}}}]},
            "status": {"phase": phase}}


def cluster() -> Cluster:
    """One node of 100Gi allocatable that shares claims, four DaemonSet pods on it (one
    finished), and worker a (30Gi) running there."""
    c = Cluster(nodes=1, devices=2, node_labels={"openrl.io/max-workers-per-claim": "2"})
    node = c.api.obj(kube.NODES, "node-0")
    assert node is not None
    node["status"]["allocatable"]["memory"] = "100Gi"
    c.api.put(kube.NODES, node)
    for name, memory in (("ds-a", "20Gi"), ("ds-b", "8Gi"), ("ds-c", "1Gi"), ("ds-d", "1Gi")):
        c.api.put(kube.NODE_PODS, other_pod(name, memory))
    c.api.put(kube.NODE_PODS, other_pod("job", "50Gi", phase="Succeeded"))
    c.place("a", "30Gi")
    c.allocate_and_run("a")
    return c


def test_the_snapshot_replays_the_budget_and_says_what_took_the_rest() -> None:
    live = read_live_fleet(cluster().api, DRIVER)  # type: ignore[arg-type]
    document = snapshot_document(live)
    assert document["nodes"][0]["hostMemory"] == "70Gi"  # 100Gi less 30Gi of other pods
    assert verify_snapshot(live, document) == []
    assert budget_lines(live) == [
        "node node-0 host memory: 100Gi allocatable - 30Gi for 4 other pods "
        "(kube-system/ds-a 20Gi, kube-system/ds-b 8Gi, kube-system/ds-c 1Gi, 1 more) = "
        "70Gi parking budget; 30Gi parked, 40Gi left"]  # a, alone, counts: it may share


def test_explain_shows_each_nodes_budget() -> None:
    live = read_live_fleet(cluster().api, DRIVER)  # type: ignore[arg-type]
    diagnosis = diagnose(Request("b", Role.TRAINER, 200 * 1024**3), live.view.fleet)
    document = _explanation("b", "trainer", 200 * 1024**3, "b", "Pending", None, None, live,
                            diagnosis)
    account = budget_account(live, "node-0")
    assert document["nodes"][0]["hostBudget"] == account
    assert account is not None and account["otherPods"]["count"] == 4
    assert any(line.strip().startswith("host memory: 100Gi allocatable - 30Gi for 4 other")
               for line in _explanation_lines(document, diagnosis))
