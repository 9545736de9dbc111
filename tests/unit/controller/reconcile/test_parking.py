"""What a worker pod asks of its node's memory: its memory estimate on a node that may share
claims (alone on its claim or not), the template's request elsewhere; a limit below the
estimate is said at placement."""

from __future__ import annotations

from typing import Any

import pytest

from controller.k8s import kube
from controller.k8s.objects import Worker
from controller.reconcile.parking import ask, memory_bound
from controller.reconcile.render import TemplateError
from controller.reconcile.vocabulary import Write
from controller.reconcile.writes import Then, after_failure
from tests.unit.controller.conftest import TEMPLATE, Cluster, node_obj, template_cm, worker_obj

SHARES = {"openrl.io/max-workers-per-claim": "2"}


def worker_resources(cluster: Cluster, name: str) -> Any:
    pod = cluster.api.obj(kube.PODS, cluster.status(name)["podName"])
    assert pod is not None
    [container] = [c for c in pod["spec"]["containers"] if c["name"] == "worker"]
    return container.get("resources") or {}


def with_resources(resources: str) -> str:
    return TEMPLATE.replace("      image: registry.example/worker:1\n",
                            "      image: registry.example/worker:1\n"
                            f"      resources: {resources}\n")


def sharing(template: str | None = None) -> Cluster:
    """One device on a node that shares claims; a (30Gi) runs alone on it."""
    cluster = Cluster(devices=1, node_labels=SHARES)
    if template is not None:
        cluster.api.put(kube.CONFIGMAPS, template_cm("trainer", template))
    cluster.place("a", "30Gi")
    cluster.allocate_and_run("a")
    return cluster


def test_every_pod_on_a_node_that_may_share_asks_for_the_estimate_a_lone_one_too() -> None:
    cluster = sharing()
    # Alone on its claim, but it may be joined at any moment and then park.
    assert worker_resources(cluster, "a")["requests"] == {"memory": "30Gi"}
    status = cluster.place("b", "40Gi")
    assert status["claimName"] == cluster.status("a")["claimName"]
    assert worker_resources(cluster, "b")["requests"] == {"memory": "40Gi"}
    assert worker_resources(cluster, "b")["claims"] == [{"name": "gpu"}]


def test_a_lone_worker_takes_its_share_of_the_parking_budget() -> None:
    # 64Gi allocatable on a node of two free devices: a's 40Gi leaves 24Gi, so b (30Gi)
    # gets no claim of its own there, and joining a would need 70Gi.
    cluster = Cluster(devices=2, node_labels=SHARES)
    cluster.api.put(kube.NODES, node_obj("node-0", labels=SHARES, memory="64Gi"))
    cluster.place("a", "40Gi")
    cluster.allocate_and_run("a")
    status = cluster.place("b", "30Gi")
    assert status["phase"] == "Pending"
    assert "host memory: node-0 has the devices free but can park 24Gi more of its 64Gi" in (
        status["conditions"][-1]["message"])
    assert cluster.api.obj(kube.PODS, "orw-b") is None


def test_on_a_node_that_never_shares_nothing_changes() -> None:
    cluster = Cluster()
    cluster.place("a", "50Gi")
    assert "requests" not in worker_resources(cluster, "a")


def test_a_template_asking_more_keeps_its_own_request() -> None:
    cluster = sharing(with_resources('{requests: {memory: 64Gi, cpu: "2"}}'))
    cluster.place("b", "40Gi")
    assert worker_resources(cluster, "b")["requests"] == {"memory": "64Gi", "cpu": "2"}


def test_a_limit_below_the_estimate_fails_the_worker_at_placement() -> None:
    cluster = Cluster(devices=1, node_labels=SHARES)
    cluster.api.put(kube.CONFIGMAPS, template_cm("trainer",
                                                 with_resources("{limits: {memory: 8Gi}}")))
    status = cluster.place("a", "30Gi")
    assert (status["phase"], status["conditions"][-1]["reason"]) == ("Failed", "TemplateError")
    message = status["conditions"][-1]["message"]
    assert "resources.limits.memory: 8Gi is below the worker's memory estimate 30Gi" in message
    assert "a node that may share claims" in message
    assert cluster.api.obj(kube.PODS, "orw-a") is None
    assert cluster.api.all(kube.CLAIMS) == []  # nothing was written


def test_a_limit_above_the_estimate_is_kept() -> None:
    worker = Worker.from_obj(worker_obj("a", "50Gi"))
    pod: Any = {"spec": {"containers": [{"name": "worker", "resources": {
        "limits": {"memory": "60Gi"}, "requests": {"memory": "2Gi"}}}]}}
    ask(pod, worker, "n")
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "60Gi"}, "requests": {"memory": "50Gi"}}
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "49Gi"
    with pytest.raises(TemplateError, match="49Gi is below the worker's memory estimate"):
        ask(pod, worker, "n")


@pytest.mark.parametrize(("message", "bound"), [
    ('pods "a" is forbidden: maximum memory usage per Container is 32Gi, but limit is 50Gi',
     "a LimitRange"),
    ('pods "a" is forbidden: exceeded quota: team, requested: requests.memory=50Gi, '
     "used: requests.memory=100Gi, limited: requests.memory=120Gi", "a ResourceQuota"),
])
def test_a_namespace_bound_refusing_memory_fails_the_worker_naming_it(message: str,
                                                                      bound: str) -> None:
    error = kube.Forbidden(403, "Forbidden", message)
    assert after_failure(Write("create", kube.PODS, "a", {}), error) is Then.REFUSED
    worker = Worker.from_obj(worker_obj("a", "50Gi"))
    assert memory_bound(worker, error).startswith(f" ({bound} refused its memory")
    assert "50Gi" in memory_bound(worker, error)
    assert memory_bound(worker, kube.Forbidden(403, "Forbidden", "exceeded quota: pods=10")) == ""
