"""The reconcile against a fake API: decisions, writes, identity rules, the sweep."""

from __future__ import annotations

import contextlib

from controller.k8s import kube
from controller.store.work import SWEEP, WAKE
from tests.unit.controller.conftest import Cluster, template_cm

WRITES = ("create", "patch", "delete", "update")


def writes(api, exclude_events: bool = True) -> dict:
    return {k: v for k, v in api.calls.items() if k[0] in WRITES
            and not (exclude_events and k[1] == "events")}


def events(api, name: str) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in api.all(kube.EVENTS)
            if e["regarding"]["name"] == name]


def test_first_placement_is_finalizer_claim_pod_status(cluster: Cluster) -> None:
    cluster.add_worker("w1", "50Gi")
    result = cluster.reconcile("w1")
    api = cluster.api
    assert writes(api) == {("patch", "openrlworkers"): 2, ("create", "resourceclaims"): 1,
                           ("create", "pods"): 1}
    worker = cluster.worker("w1")
    assert worker["metadata"]["finalizers"] == ["openrl.io/placement"]
    status = worker["status"]
    uid = worker["metadata"]["uid"]
    assert status["phase"] == "Placing"
    assert status["claimName"] == f"orw-w1-{uid}"
    assert status["podName"] == "orw-w1"
    assert status["deviceCount"] == 1 and status["memoryPerDevice"] == "50Gi"
    assert "nodeName" not in status
    claim = api.obj(kube.CLAIMS, f"orw-w1-{uid}")
    assert claim["metadata"]["labels"]["openrl.io/memory-floor"] == "50Gi"
    assert claim["metadata"]["labels"]["openrl.io/memory-ceiling"] == "80Gi"
    pod = api.obj(kube.PODS, "orw-w1")
    assert pod["spec"]["resourceClaims"][0]["resourceClaimName"] == f"orw-w1-{uid}"
    assert events(api, "w1") == [("Normal", "Placed")]
    assert result.requeue_after == cluster.settings.placement_timeout
    # Reads: none. The worker, its pod, the template and the fleet all come from the cache.
    assert {k: v for k, v in api.calls.items() if k[0] in ("list", "get")} == {}


def test_running_reports_node_once_allocated(cluster: Cluster) -> None:
    cluster.place("w1")
    cluster.allocate_and_run("w1")
    status = cluster.status("w1")
    assert status["phase"] == "Running"
    assert status["nodeName"] == "node-0"
    assert "reason" not in status
    assert status["conditions"][0]["status"] == "True"
    assert events(cluster.api, "w1") == [("Normal", "Placed"), ("Normal", "Running")]
    before = dict(cluster.api.calls)
    cluster.reconcile("w1")  # nothing new: no write, no claim read
    assert writes(cluster.api) == {k: v for k, v in before.items()
                                   if k[0] in WRITES and k[1] != "events"}


def test_running_seen_before_the_claims_allocation_comes_back_for_the_node(
        cluster: Cluster) -> None:
    cluster.place("w1")
    status = cluster.status("w1")
    claim = cluster.api.obj(kube.CLAIMS, status["claimName"])
    node = claim["metadata"]["annotations"]["openrl.io/sized-for-node"]
    # The scheduler allocated the claim and bound the pod, which runs; the pods' watch
    # has said so, the claims' has not yet.
    cluster.api.run_pod("orw-w1", node)
    cluster.cache.relist(kube.PODS, cluster.api.all(kube.PODS))
    result = cluster.reconciler("w1")
    assert cluster.status("w1")["phase"] == "Running"
    assert "nodeName" not in cluster.status("w1")  # only once the allocation is seen
    assert result.requeue_after == cluster.settings.retry_interval
    cluster.api.allocate(status["claimName"], node)
    result = cluster.reconcile("w1")
    assert cluster.status("w1")["nodeName"] == node
    assert result.requeue_after is None  # nothing left to learn


def test_spread_then_wait_for_allocation_then_share() -> None:
    c = Cluster(devices=2, node_labels={"openrl.io/max-workers-per-claim": "2"})
    a, b = c.place("a"), c.place("b")
    assert a["claimName"] != b["claimName"]  # free GPUs are used before anyone shares
    waiting = c.place("c")
    assert waiting["phase"] == "Pending"
    assert waiting["reason"].startswith("WaitingForCapacity:")
    assert "not yet allocated" in waiting["reason"]
    c.allocate_and_run("a")
    c.allocate_and_run("b")
    c.reconcile("c")
    joined = c.status("c")
    assert joined["phase"] == "Placing"
    assert joined["claimName"] == a["claimName"]  # fewest workers, then name
    assert joined["nodeName"] == "node-0"  # joining an allocated claim: node known at once
    d = c.place("d")
    assert d["claimName"] == b["claimName"]
    e = c.place("e")
    assert e["phase"] == "Pending" and "full at 2" in e["reason"]


def test_no_capacity_is_told_from_waiting() -> None:
    c = Cluster(devices=1, node_labels={"openrl.io/trainer": "true"})
    big = c.place("big", "100Gi")
    assert big["phase"] == "Pending" and big["reason"].startswith("NoCapacity:")
    sampler = c.place("s", "10Gi", role="sampler")
    assert sampler["reason"] == "NoCapacity: no enabled node accepts sampler workers"
    assert c.worker("s")["status"]["conditions"][0]["reason"] == "NoCapacity"
    assert ("Warning", "NoCapacity") in events(c.api, "s")


def test_never_fits_fails_unsatisfiable_after_the_timeout() -> None:
    c = Cluster(devices=1, placement_timeout="10m")
    c.place("big", "100Gi")
    result = c.reconcile("big")
    assert result.requeue_after == 30
    c.api.advance(601)
    c.reconcile("big")
    status = c.status("big")
    assert status["phase"] == "Failed"
    assert status["reason"].startswith("Unsatisfiable: NoCapacity:")
    assert c.api.all(kube.CLAIMS) == []


def test_waiting_for_capacity_never_times_out() -> None:
    c = Cluster(devices=1)
    c.place("a")
    c.api.advance(3600)
    assert c.place("b")["phase"] == "Pending"
    c.api.advance(3600)
    c.reconcile("b")
    assert c.status("b")["phase"] == "Pending"


def test_deleting_worker_keeps_its_seat_until_its_pod_is_gone() -> None:
    c = Cluster(devices=1)
    c.place("a")
    c.allocate_and_run("a")
    c.api.delete(kube.WORKERS, "a")  # the finalizer holds it
    result = c.reconcile("a")
    pod = c.api.obj(kube.PODS, "orw-a")
    assert pod["metadata"].get("deletionTimestamp")  # asked to go, still running
    assert c.worker("a")["metadata"]["finalizers"] == ["openrl.io/placement"]
    assert not result.wake
    assert c.place("b")["phase"] == "Pending"  # the seat is still taken
    c.api.finish_pod("orw-a")
    result = c.reconcile("a")
    assert result.wake
    assert c.api.obj(kube.WORKERS, "a") is None
    # The claim outlives its worker; with max 1 worker per claim b joins it or cuts anew
    # only once it is free.
    c.reconcile("b")
    assert c.status("b")["phase"] == "Placing"


def test_recreated_worker_never_inherits_pod_or_claim() -> None:
    c = Cluster(devices=2)
    first = c.place("w")
    c.allocate_and_run("w")
    old_uid = c.worker("w")["metadata"]["uid"]
    # The old incarnation vanishes without its finalizer running (forced removal).
    del c.api.objects[c.api.key(kube.WORKERS, "w")]
    c.add_worker("w")
    new_uid = c.worker("w")["metadata"]["uid"]
    assert new_uid != old_uid
    c.reconcile("w")
    status = c.status("w")
    assert status["phase"] == "Pending"
    assert status["reason"].startswith("WaitingForPredecessor:")
    assert c.api.obj(kube.PODS, "orw-w")["metadata"].get("deletionTimestamp")
    c.reconcile("w")  # still there: nothing adopted, nothing placed
    assert c.status("w")["phase"] == "Pending"
    c.api.finish_pod("orw-w")
    c.reconcile("w")
    status = c.status("w")
    assert status["phase"] == "Placing"
    assert status["claimName"] == f"orw-w-{new_uid}" != first["claimName"]
    pod = c.api.obj(kube.PODS, "orw-w")
    assert pod["metadata"]["ownerReferences"][0]["uid"] == new_uid


def test_pod_of_another_worker_is_a_conflict_and_nothing_is_deleted(cluster: Cluster) -> None:
    cluster.api.put(kube.PODS, {"metadata": {
        "name": "orw-w1", "labels": {"openrl.io/managed": "true", "openrl.io/worker": "other"},
        "ownerReferences": [{"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
                             "name": "other", "uid": "x", "controller": True}]}, "spec": {}})
    status = cluster.place("w1")
    assert status["phase"] == "Failed"
    assert status["reason"].startswith("PodConflict:")
    assert cluster.api.obj(kube.PODS, "orw-w1") is not None
    assert cluster.api.all(kube.CLAIMS) == []


def test_unmanaged_pod_with_our_name_is_a_conflict(cluster: Cluster) -> None:
    cluster.api.put(kube.PODS, {"metadata": {"name": "orw-w1"}, "spec": {}})
    status = cluster.place("w1")
    assert status["phase"] == "Failed" and status["reason"].startswith("PodConflict:")
    assert cluster.api.obj(kube.PODS, "orw-w1")["metadata"].get("deletionTimestamp") is None


def test_template_error_names_the_field(cluster: Cluster) -> None:
    bad = "spec:\n  nodeSelector: {gpu: yes}\n  containers: [{name: worker, image: i}]\n"
    cluster.api.put(kube.CONFIGMAPS, template_cm(name="mine", text=bad))
    status = cluster.place("w1", podTemplate={"name": "mine"})
    assert status["phase"] == "Failed"
    assert status["reason"].startswith("TemplateError:")
    assert "spec.nodeSelector" in status["reason"]
    assert "ConfigMap openrl/mine key pod.yaml" in status["reason"]
    assert cluster.api.all(kube.CLAIMS) == [] and cluster.api.all(kube.PODS) == []
    assert ("Warning", "TemplateError") in events(cluster.api, "w1")


def test_missing_template_waits_and_recovers(cluster: Cluster) -> None:
    status = cluster.place("w1", podTemplate={"name": "later", "key": "w.yaml"})
    assert status["phase"] == "Pending"
    assert status["reason"] == "TemplateNotFound: ConfigMap openrl/later not found"
    cluster.api.put(kube.CONFIGMAPS, template_cm(name="later", key="other.yaml"))
    cluster.reconcile("w1")
    assert "no such key" in cluster.status("w1")["reason"]
    cluster.api.put(kube.CONFIGMAPS, template_cm(name="later", key="w.yaml"))
    cluster.reconcile("w1")
    assert cluster.status("w1")["phase"] == "Placing"


def test_invalid_spec(cluster: Cluster) -> None:
    status = cluster.place("w1", "lots")
    assert status["phase"] == "Failed" and status["reason"].startswith("InvalidSpec: spec.memory")


def test_pod_failure_fails_the_worker_and_frees_the_seat() -> None:
    c = Cluster(devices=1)
    c.place("a")
    c.allocate_and_run("a")
    c.api.edit(kube.PODS, "orw-a", {"status": {"phase": "Failed", "containerStatuses": [
        {"name": "worker", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Failed"
    assert "exited 137 (OOMKilled)" in status["reason"]
    assert status["reason"].startswith("PodFailed:")
    # The dead worker holds nothing: the next worker takes a seat on its claim.
    b = c.place("b")
    assert b["phase"] == "Placing" and b["claimName"] == status["claimName"]
    # With the failure on record, the finished pod goes.
    c.reconcile("a")
    assert c.api.obj(kube.PODS, "orw-a")["metadata"].get("deletionTimestamp") or \
        c.api.obj(kube.PODS, "orw-a") is None


def test_seat_stays_booked_while_the_template_is_missing() -> None:
    c = Cluster(devices=1, node_labels={"openrl.io/max-workers-per-claim": "2"})
    first = c.place("a")
    c.allocate_and_run("a")
    c.api.put(kube.CONFIGMAPS, template_cm(key="other.yaml"))
    c.api.delete(kube.PODS, "orw-a")
    c.api.finish_pod("orw-a")
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Pending" and status["claimName"] == first["claimName"]
    assert status["reason"].startswith("TemplateNotFound") and "stays booked" in status["reason"]
    # One seat left of two (samplers' template is there): b takes it, s must wait.
    b = c.place("b", role="sampler")
    assert b.get("claimName") == first["claimName"], b
    assert c.place("s", role="sampler")["phase"] == "Pending"
    c.api.put(kube.CONFIGMAPS, template_cm())
    c.reconcile("a")
    assert c.status("a")["claimName"] == first["claimName"]
    assert c.status("a")["phase"] == "Placing"


def test_recreated_pod_never_overfills_its_claim() -> None:
    """A worker whose booking was lost comes back through the decision, not onto a
    claim that others have filled meanwhile."""
    c = Cluster(devices=3)
    first = c.place("a")
    c.allocate_and_run("a")
    c.api.delete(kube.PODS, "orw-a")
    c.api.finish_pod("orw-a")
    # The booking is lost (an older version cleared it) and b took the seat.
    c.api.edit(kube.WORKERS, "a", {"status": {"claimName": None, "phase": "Pending"}})
    c.add_worker("b", "50Gi")
    c.api.edit(kube.WORKERS, "b", {"status": {"claimName": first["claimName"],
                                              "phase": "Running"}})
    c.reconcile("a")
    status = c.status("a")
    # The claim cut for it is b's now: it cuts one under its other name on the free device.
    assert status["phase"] == "Placing" and status["claimName"] == first["claimName"] + "-2"
    assert [p["metadata"]["name"] for p in c.api.all(kube.PODS)] == ["orw-a"]
    # Lost again, and d took that one: neither name a claim of a's may bear is free.
    c.api.delete(kube.PODS, "orw-a")
    c.api.finish_pod("orw-a")
    c.api.edit(kube.WORKERS, "a", {"status": {"claimName": None, "phase": "Pending"}})
    c.add_worker("d", "50Gi")
    c.api.edit(kube.WORKERS, "d", {"status": {"claimName": first["claimName"] + "-2",
                                              "phase": "Running"}})
    c.reconcile("a")
    status = c.status("a")
    assert status["phase"] == "Pending" and "claimName" not in status
    assert "are taken by others" in status["reason"]
    assert len(c.api.all(kube.PODS)) == 0


def test_pod_the_scheduler_has_not_reached_keeps_placing_until_the_timeout(
        cluster: Cluster) -> None:
    # A burst: kube-scheduler has not looked at the pod for minutes. Placing already says
    # the pod waits; only the timeout's failure is written, with what was (not) said.
    placed = cluster.place("w1")
    before = writes(cluster.api)
    cluster.api.advance(300)
    result = cluster.reconcile("w1")
    assert writes(cluster.api) == before and cluster.status("w1") == placed
    assert result.requeue_after == cluster.settings.placement_timeout - 300
    cluster.api.advance(301)
    cluster.reconcile("w1")
    status = cluster.status("w1")
    assert status["phase"] == "Failed" and "not scheduled yet" in status["reason"]


def test_bound_pod_is_reported_starting_a_quiet_while_after_the_bind(
        cluster: Cluster) -> None:
    placed = cluster.place("w1")
    quiet = 0.25 * cluster.settings.placement_timeout
    cluster.api.advance(400)  # waited long in the scheduler's queue, then bound
    bound_at = cluster.api.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.api.edit(kube.PODS, "orw-w1", {"spec": {"nodeName": "node-0"}, "status": {
        "conditions": [{"type": "PodScheduled", "status": "True",
                        "lastTransitionTime": bound_at}]}})
    result = cluster.reconcile("w1")
    assert cluster.status("w1") == placed and result.requeue_after == quiet
    cluster.api.advance(quiet)
    cluster.reconcile("w1")
    assert "orw-w1 starting on node node-0" in cluster.status("w1")["reason"]


def test_lost_status_write_pod_claim_wins() -> None:
    c = Cluster(devices=1)
    c.add_worker("a")
    c.reconcile("a")
    c.api.edit(kube.WORKERS, "a", {"status": None})  # as if the status patch had been lost
    assert c.status("a") == {}
    b = c.place("b")
    assert b["phase"] == "Pending"  # a's pod holds the only device
    c.reconcile("a")
    assert c.status("a")["phase"] == "Placing"


def test_lost_pod_create_reuses_the_claim_it_cut(cluster: Cluster) -> None:
    cluster.add_worker("w1")
    cluster.api.fail_next[("create", "pods")] = kube.KubeError(500, "InternalError", "boom")
    with contextlib.suppress(kube.KubeError):
        cluster.reconcile("w1")
    assert len(cluster.api.all(kube.CLAIMS)) == 1
    cluster.reconcile("w1")
    assert len(cluster.api.all(kube.CLAIMS)) == 1
    status = cluster.status("w1")
    assert status["phase"] == "Placing" and status["claimName"].endswith(
        cluster.worker("w1")["metadata"]["uid"])


def test_deleted_pod_is_recreated_on_the_same_claim() -> None:
    c = Cluster(devices=2)
    first = c.place("a")
    c.allocate_and_run("a")
    c.api.delete(kube.PODS, "orw-a")
    c.reconcile("a")
    assert "being deleted" in c.status("a")["reason"]
    c.api.finish_pod("orw-a")
    c.reconcile("a")
    status = c.status("a")
    assert status["claimName"] == first["claimName"] and status["phase"] == "Placing"
    assert len(c.api.all(kube.CLAIMS)) == 1


def test_sweep_deletes_old_orphans_only() -> None:
    c = Cluster(devices=4, reclaim_grace="2m")
    c.place("keep")
    c.place("gone")
    gone_claim = c.status("gone")["claimName"]
    keep_claim = c.status("keep")["claimName"]
    c.api.delete(kube.WORKERS, "gone")
    c.reconcile("gone")  # pod never scheduled: deleted at once
    c.reconcile("gone")  # ...so the next look finds it gone and lets the worker go
    assert c.api.obj(kube.WORKERS, "gone") is None
    c.api.advance(60)
    result = c.reconcile(SWEEP)
    assert c.api.obj(kube.CLAIMS, gone_claim) is not None  # younger than the grace
    assert not result.wake and result.requeue_after == 60
    c.api.advance(61)
    result = c.reconcile(SWEEP)
    assert c.api.obj(kube.CLAIMS, gone_claim) is None
    assert c.api.obj(kube.CLAIMS, keep_claim) is not None
    assert result.wake


def test_sweep_spares_claims_a_pod_or_dra_still_uses() -> None:
    c = Cluster(devices=4, reclaim_grace="1s")
    c.place("a")
    claim = c.status("a")["claimName"]
    c.api.edit(kube.WORKERS, "a", {"status": None})
    c.api.advance(10)
    c.reconcile(SWEEP)
    assert c.api.obj(kube.CLAIMS, claim) is not None  # its pod and its worker's uid name it
    c.api.put(kube.CLAIMS, {"metadata": {"name": "reserved", "labels": {
        "openrl.io/managed": "true"}}, "status": {"reservedFor": [{"name": "p"}]}})
    c.api.advance(10)
    c.reconcile(SWEEP)
    assert c.api.obj(kube.CLAIMS, "reserved") is not None


def test_wake_lists_pending_workers_oldest_first() -> None:
    c = Cluster(devices=1)
    c.place("z-first")
    c.api.advance(1)
    c.place("b-second")
    c.api.advance(1)
    c.place("a-third")
    c.add_worker("new")  # never reconciled: no status yet, still pending
    result = c.reconcile(WAKE)
    keys = [k for k, _ in result.enqueue]
    assert keys == ["b-second", "a-third", "new"]
    orders = [o for _, o in result.enqueue]
    assert orders == sorted(orders)


def test_failed_is_terminal(cluster: Cluster) -> None:
    cluster.place("w1", "lots")
    before = dict(cluster.api.calls)
    cluster.reconcile("w1")
    assert {k: v for k, v in cluster.api.calls.items() if k[0] in WRITES} == {
        k: v for k, v in before.items() if k[0] in WRITES}


def test_gone_worker_is_a_no_op(cluster: Cluster) -> None:
    result = cluster.reconcile("nobody")
    assert result.requeue_after is None and not result.wake


def test_pod_the_api_server_refuses_is_a_template_error(cluster: Cluster) -> None:
    cluster.api.fail_next[("create", "pods")] = kube.Invalid(
        422, "Invalid", 'Pod "orw-w1" is invalid: spec.containers[0].image: Required value')
    status = cluster.place("w1")
    assert status["phase"] == "Failed"
    assert status["reason"].startswith("TemplateError: the API server refused pod orw-w1")
    assert "Required value" in status["reason"]
    # The claim cut for it is the sweep's: a Failed worker pins nothing.
    (claim,) = cluster.api.all(kube.CLAIMS)
    cluster.api.advance(121)
    cluster.reconcile(SWEEP)
    assert cluster.api.obj(kube.CLAIMS, claim["metadata"]["name"]) is None


def test_pod_security_refusal_fails_but_rbac_refusal_retries(cluster: Cluster) -> None:
    cluster.api.fail_next[("create", "pods")] = kube.Forbidden(
        403, "Forbidden", 'pods "orw-w1" is forbidden: violates PodSecurity "restricted:latest"')
    assert cluster.place("w1")["reason"].startswith("TemplateError:")
    cluster.add_worker("w2")
    cluster.api.fail_next[("create", "pods")] = kube.Forbidden(
        403, "Forbidden", 'pods is forbidden: User "x" cannot create resource "pods"')
    cluster.reconcile("w2")  # the pod write fails: retried, not failed
    assert cluster.status("w2").get("phase") != "Failed"
    assert cluster.api.obj(kube.PODS, "orw-w2") is None
    cluster.reconcile("w2")
    assert cluster.status("w2")["phase"] == "Placing"


def pinned_node(api, pod_name: str) -> str:
    """The one node a pod's affinity admits (every ORed term names the same node)."""
    terms = api.obj(kube.PODS, pod_name)["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    nodes = {tuple(field["values"]) for term in terms for field in term["matchFields"]
             if field["key"] == "metadata.name"}
    assert len(nodes) == 1 and all(term["matchFields"] for term in terms)
    (only,) = nodes.pop()
    return str(only)


def test_pod_is_pinned_to_the_node_placement_chose() -> None:
    c = Cluster(nodes=3, devices=1, node_labels={"openrl.io/max-workers-per-claim": "2"})
    for name in ("a", "b", "c"):
        c.place(name)
        sized_for = c.api.obj(kube.CLAIMS, c.status(name)["claimName"])["metadata"][
            "annotations"]["openrl.io/sized-for-node"]
        assert pinned_node(c.api, f"orw-{name}") == sized_for
    assert {pinned_node(c.api, f"orw-{n}") for n in "abc"} == {"node-0", "node-1", "node-2"}
    c.allocate_and_run("b")
    c.allocate_and_run("a")
    c.allocate_and_run("c")
    joined = c.place("d")  # nothing free: joins an allocated claim, on its node
    assert joined["phase"] == "Placing"
    assert pinned_node(c.api, "orw-d") == joined["nodeName"]


def test_recreated_pod_keeps_the_pin_of_its_claim() -> None:
    c = Cluster(nodes=2, devices=1)
    first = c.place("a")
    node = pinned_node(c.api, "orw-a")
    c.api.delete(kube.PODS, "orw-a")
    c.api.finish_pod("orw-a")
    c.reconcile("a")
    assert c.status("a")["claimName"] == first["claimName"]
    assert pinned_node(c.api, "orw-a") == node


def test_join_commits_on_the_claim_and_a_stale_view_loses_the_seat() -> None:
    """Two replicas: the one that decided on an older version of the claim (paused,
    say, while the other took the last seat) gets a conflict and creates no pod."""
    from controller.reconcile.reconciler import Reconciler
    from controller.store.cache import Cache
    from tests.unit.controller.conftest import sync_cache

    c = Cluster(devices=1, node_labels={"openrl.io/max-workers-per-claim": "2"})
    first = c.place("a")
    c.allocate_and_run("a")
    claim = first["claimName"]
    uid_a = c.worker("a")["metadata"]["uid"]
    assert c.api.obj(kube.CLAIMS, claim)["metadata"]["annotations"]["openrl.io/booked"] == uid_a
    # Replica "stale" reads the world now, with one seat left on the claim...
    stale_cache = Cache(c.settings.device_driver)
    stale = Reconciler(c.api, c.settings, cache=stale_cache, now=c.api.clock)  # type: ignore[arg-type]
    c.add_worker("late", "50Gi")
    c.add_worker("b", "50Gi")
    sync_cache(stale_cache, c.api)
    # ...then the other replica gives that seat to b, committing it on the claim.
    assert c.place("b")["claimName"] == claim
    booked = c.api.obj(kube.CLAIMS, claim)["metadata"]["annotations"]["openrl.io/booked"]
    assert booked.split(",") == [uid_a, c.worker("b")["metadata"]["uid"]]
    # The stale replica decides "late" onto the same seat: the commit fails, no pod.
    stale("late")
    assert c.api.obj(kube.PODS, "orw-late") is None
    pods_on_claim = [p for p in c.api.all(kube.PODS)
                     if p["spec"]["resourceClaims"][0]["resourceClaimName"] == claim]
    assert len(pods_on_claim) == 2
