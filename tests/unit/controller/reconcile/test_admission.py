"""Team quotas through Kueue (controller/reconcile/admission.py): a queue-labelled worker is
placed only once Kueue admits the Workload written for it, and an eviction stops its pod,
gives its seat back, and only then hands its quota back. Kueue is played by hand here:
each story edits the Workload's status as Kueue would."""

from __future__ import annotations

from typing import Any

from controller.k8s import kube, naming
from controller.reconcile.admission import ANSWER_WAIT
from tests.unit.controller.conftest import Cluster

TEAM_A = {naming.LABEL_QUEUE: "team-a"}
TWO = {"openrl.io/max-workers-per-claim": "2"}


def queued_cluster(**settings: Any) -> Cluster:
    return Cluster(kueue=True, **settings)


def add(c: Cluster, name: str, memory: str = "50Gi", labels: dict[str, str] | None = None,
        **spec: Any) -> None:
    obj = c.add_worker(name, memory, **spec)
    c.api.edit(kube.WORKERS, name, {"metadata": {"labels": dict(TEAM_A if labels is None
                                                                  else labels)}})
    assert obj


def workload_of(c: Cluster, name: str) -> dict[str, Any] | None:
    worker = c.worker(name)
    return c.api.obj(kube.WORKLOADS, naming.workload_name(name, worker["metadata"]["uid"]))


def kueue_says(c: Cluster, name: str, *conditions: tuple[str, str, str, str],
               cluster_queue: str | None = None) -> None:
    """Kueue writes the Workload's conditions (type, status, reason, message)."""
    workload = workload_of(c, name)
    assert workload is not None
    conds = {cond["type"]: cond for cond in (workload.get("status") or {}).get("conditions") or []}
    for kind, status, reason, message in conditions:
        conds[kind] = {"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": "2026-01-01T00:00:00Z"}
    status: dict[str, Any] = {"conditions": list(conds.values())}
    if cluster_queue is not None:
        status["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {naming.ACCELERATOR_MEMORY: "flavor"}}]}
    c.api.edit(kube.WORKLOADS, workload["metadata"]["name"], {"status": status})


def admit(c: Cluster, name: str) -> None:
    kueue_says(c, name, ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in "
                         "ClusterQueue team-a"),
               ("Admitted", "True", "Admitted", "The workload is admitted"),
               cluster_queue="team-a")


def evict(c: Cluster, name: str, reason: str = "Preempted",
          message: str = "Preempted to accommodate a workload (UID: x) due to reclamation "
                         "within the cohort") -> None:
    kueue_says(c, name, ("Evicted", "True", reason, message),
               ("Preempted", "True", "InCohortReclamation", message))


def placed_and_running(c: Cluster, name: str, **spec: Any) -> None:
    add(c, name, **spec)
    c.reconcile(name)
    admit(c, name)
    c.reconcile(name)
    c.allocate_and_run(name)
    assert c.status(name)["phase"] == "Running"


def test_a_labelled_worker_waits_for_kueue_then_is_placed_once_admitted() -> None:
    c = queued_cluster()
    add(c, "a")
    c.reconcile("a")
    workload = workload_of(c, "a")
    assert workload is not None, "its Workload is written first"
    assert workload["spec"]["queueName"] == "team-a"
    pod_set = workload["spec"]["podSets"][0]
    assert pod_set["count"] == 1
    container = pod_set["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {naming.ACCELERATOR_MEMORY: "50Gi"}
    assert "resourceClaims" not in pod_set["template"]["spec"]
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("OpenRLWorker", "a", True)
    assert workload["metadata"]["labels"][naming.LABEL_JOB_UID] == c.worker("a")["metadata"]["uid"]
    assert c.api.all(kube.PODS) == [] and c.api.all(kube.CLAIMS) == [], "nothing placed yet"

    kueue_says(c, "a", ("QuotaReserved", "False", "Pending",
                        "couldn't assign flavors to pod set main: insufficient unused quota "
                        "for openrl.io/accelerator-memory in flavor flavor, 10Gi more needed"))
    c.api.advance(ANSWER_WAIT)
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Pending"
    assert status["reason"].startswith(f"Queued: waiting for Kueue to admit its Workload "
                                       f"{workload['metadata']['name']} in queue team-a: Pending: "
                                       "couldn't assign flavors")
    assert c.api.all(kube.PODS) == []

    admit(c, "a")
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Placing" and status["claimName"]
    assert len(c.api.all(kube.WORKLOADS)) == 1, "one Workload, written once"


def test_workers_without_the_label_or_with_kueue_off_are_placed_as_before() -> None:
    c = queued_cluster()
    c.add_worker("plain")
    c.reconcile("plain")
    assert c.status("plain")["phase"] == "Placing"
    off = Cluster()
    add(off, "labelled")
    off.reconcile("labelled")
    assert off.status("labelled")["phase"] == "Placing"
    assert c.api.all(kube.WORKLOADS) == [] and off.api.all(kube.WORKLOADS) == []


def test_an_evicted_worker_stops_then_gives_its_seat_back_then_its_quota() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    claim = c.status("a")["claimName"]
    evict(c, "a")
    c.reconcile("a")
    status = c.status("a")
    assert status["reason"].startswith("Evicted: Kueue evicted its Workload")
    assert "Preempted" in status["reason"] and "is stopped" in status["reason"]
    pod = c.api.obj(kube.PODS, "orw-a")
    assert pod is not None and pod["metadata"].get("deletionTimestamp"), "its pod is stopping"
    assert c.api.obj(kube.CLAIMS, claim) is not None, "the seat is kept while the pod runs"
    reserved = workload_of(c, "a")
    assert reserved is not None and reserved["status"].get("admission"), \
        "the quota is still charged while the pod may hold the device"

    c.reconcile("a")  # the pod is still going: nothing more
    assert c.api.obj(kube.CLAIMS, claim) is not None

    c.api.finish_pod("orw-a")
    c.reconcile("a")
    assert c.api.obj(kube.CLAIMS, claim) is None, "its own claim, nobody else on it, goes"
    assert not c.status("a").get("claimName")
    still = workload_of(c, "a")
    assert still is not None and still["status"].get("admission"), "the seat before the quota"

    c.reconcile("a")
    handed = workload_of(c, "a")
    assert handed is not None
    conds = {x["type"]: x for x in handed["status"]["conditions"]}
    assert handed["status"].get("admission") is None
    assert conds["QuotaReserved"]["status"] == "False"
    assert conds["QuotaReserved"]["reason"] == "Pending"
    assert conds["Admitted"]["status"] == "False"
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("True", "Preempted")
    assert conds["Evicted"]["status"] == "True", "Kueue's own conditions are kept"
    assert "waits in queue team-a again" in c.status("a")["reason"]

    c.reconcile("a")
    assert c.status("a")["reason"].startswith("Queued: "), "then it waits for Kueue again"
    assert c.api.all(kube.PODS) == []

    admit(c, "a")  # Kueue admits it again (its eviction condition reset)
    kueue_says(c, "a", ("Evicted", "False", "QuotaReserved", "Previously: preempted"))
    c.reconcile("a")
    assert c.status("a")["phase"] == "Placing"


def test_an_evicted_joiner_leaves_the_claim_it_shares_and_the_cutter_stays() -> None:
    c = queued_cluster(devices=1, node_labels=TWO)
    placed_and_running(c, "a")
    placed_and_running(c, "b")
    shared = c.status("a")["claimName"]
    assert c.status("b")["claimName"] == shared
    evict(c, "b")
    c.reconcile("b")
    c.api.finish_pod("orw-b")
    c.reconcile("b")
    claim = c.api.obj(kube.CLAIMS, shared)
    assert claim is not None, "the cutter still runs on it"
    booked = claim["metadata"]["annotations"].get(naming.ANNOTATION_BOOKED) or ""
    assert c.worker("b")["metadata"]["uid"] not in booked
    assert c.status("a")["phase"] == "Running"
    c.reconcile("b")
    handed = workload_of(c, "b")
    assert handed is not None and handed["status"].get("admission") is None


def test_a_worker_whose_workload_is_gone_is_stopped_and_queued_again() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    workload = workload_of(c, "a")
    assert workload is not None
    c.api.delete(kube.WORKLOADS, workload["metadata"]["name"])
    c.reconcile("a")
    assert "is gone" in c.status("a")["reason"]
    c.api.finish_pod("orw-a")
    c.reconcile("a")  # the seat
    c.reconcile("a")  # a new Workload
    assert workload_of(c, "a") is not None
    assert c.api.all(kube.PODS) == []


def test_a_finished_worker_finishes_its_workload() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Succeeded"}})
    c.reconcile("a")
    assert c.status("a")["phase"] == "Succeeded"
    c.reconcile("a")
    workload = workload_of(c, "a")
    assert workload is not None
    finished = {x["type"]: x for x in workload["status"]["conditions"]}["Finished"]
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    writes = c.api.calls[("patch", "workloads")]
    c.reconcile("a")
    assert c.api.calls[("patch", "workloads")] == writes, "finished once"


def test_a_deleted_workers_workload_goes_once_its_pod_is_gone() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    name = workload_of(c, "a")["metadata"]["name"]  # type: ignore[index]
    c.api.delete(kube.WORKERS, "a")
    c.reconcile("a")
    assert c.api.obj(kube.WORKLOADS, name) is not None, "its quota is held while its pod runs"
    c.api.finish_pod("orw-a")
    c.reconcile("a")
    assert c.api.obj(kube.WORKLOADS, name) is None
    assert c.api.obj(kube.WORKERS, "a") is None


def test_a_priority_class_label_needs_the_class_and_sets_the_priority() -> None:
    c = queued_cluster()
    add(c, "a", labels={**TEAM_A, naming.LABEL_PRIORITY_CLASS: "high"})
    c.reconcile("a")
    assert workload_of(c, "a") is None
    assert "names no WorkloadPriorityClass" in c.status("a")["reason"]
    c.api.put(kube.PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    c.reconcile("a")
    workload = workload_of(c, "a")
    assert workload is not None
    assert workload["spec"]["priority"] == 1000
    assert workload["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def test_a_pod_that_succeeded_as_kueue_evicted_it_finishes_the_worker_not_stops_it() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Succeeded"}})
    evict(c, "a")
    c.reconcile("a")
    assert c.status("a")["phase"] == "Succeeded"
    c.reconcile("a")
    workload = workload_of(c, "a")
    assert workload is not None
    conds = {x["type"]: x for x in workload["status"]["conditions"]}
    assert conds["Finished"]["status"] == "True"


def test_a_deactivated_workload_stops_its_worker_and_is_not_requeued() -> None:
    c = queued_cluster()
    placed_and_running(c, "a")
    evict(c, "a", reason="Deactivated", message="The workload is deactivated")
    c.reconcile("a")
    c.api.finish_pod("orw-a")
    c.reconcile("a")  # the seat
    c.reconcile("a")  # the quota
    workload = workload_of(c, "a")
    assert workload is not None
    conds = {x["type"]: x for x in workload["status"]["conditions"]}
    assert conds["QuotaReserved"]["status"] == "False"
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("False", "Deactivated")
    c.reconcile("a")
    assert c.status("a")["reason"].endswith("Deactivated: The workload is deactivated")
