"""The controller against the local control plane: real API server, scheduler and DRA.

Each test runs its own controller (in a thread) on a fresh namespace; the fake
GPU nodes are enabled with one worker per claim for the session.
"""
# The fixtures come from controller_fixtures (tests/e2e/conftest.py belongs to
# the control plane); importing them makes every test parameter a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from controller_fixtures import Env, GiB, GpuNode, crd, gpu_nodes, orw  # noqa: F401
from kubernetes import client

from controller.k8s import naming
from controller.reconcile import render


def whole_node(nodes: list[GpuNode]) -> str:
    """A memory figure that needs every device of the largest node, and fits it."""
    node = max(nodes, key=lambda n: (n.devices * n.device_memory, n.name))
    return f"{((node.devices - 1) * node.device_memory + GiB) // GiB}Gi"


def test_spec_changes_are_rejected_by_the_crd(orw: Env) -> None:
    orw.create_worker("w", "10Gi")
    for change in ({"memory": "20Gi"}, {"role": "sampler"}, {"modelId": "other"},
                   {"ownerId": "someone"}):
        with pytest.raises(client.ApiException) as info:
            orw.custom.patch_namespaced_custom_object(
                "openrl.io", "v1alpha1", orw.namespace, "openrlworkers", "w",
                {"spec": change})
        assert info.value.status == 422
        assert "immutable" in info.value.body
    assert orw.worker("w")["spec"]["memory"] == "10Gi"
    # Status and metadata stay writable: the controller needs both.
    orw.custom.patch_namespaced_custom_object(
        "openrl.io", "v1alpha1", orw.namespace, "openrlworkers", "w",
        {"metadata": {"labels": {"team": "a"}}})


def test_placed_worker_runs_on_an_allocated_claim(orw: Env) -> None:
    orw.start()
    orw.create_worker("w", "50Gi", ownerId="team-a")
    status = orw.wait_phase("w", "Running")
    assert status["deviceCount"] == 1 and status["memoryPerDevice"] == "50Gi"
    assert status["nodeName"]
    claim = orw.claims()[status["claimName"]]
    allocation = claim["status"]["allocation"]
    assert len(allocation["devices"]["results"]) == 1
    assert claim["status"]["reservedFor"][0]["name"] == "orw-w"
    pod = orw.pod("orw-w")
    assert pod.spec.node_name == status["nodeName"]
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["OPEN_RL_TIME_SLICE_GROUP"] == status["claimName"]
    assert env["OPEN_RL_TIME_SLICE_OWNER"] == "team-a"


def pinned_nodes(pod: Any) -> set[str]:
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return {value for term in terms.node_selector_terms for field in term.match_fields or []
            if field.key == "metadata.name" for value in field.values}


def test_pods_run_on_the_node_placement_chose(orw: Env, gpu_nodes: list[GpuNode]) -> None:
    orw.start()
    memory = whole_node(gpu_nodes)  # one per node that fits: every such node gets chosen once
    fits = [n for n in gpu_nodes if n.devices * n.device_memory >= int(memory[:-2]) * GiB]
    names = [f"w{i}" for i in range(len(fits))]
    for name in names:
        orw.create_worker(name, memory)
    chosen = set()
    for name in names:
        status = orw.wait_phase(name, "Running", timeout=120)
        claim = orw.claims()[status["claimName"]]
        sized_for = claim["metadata"]["annotations"]["openrl.io/sized-for-node"]
        pod = orw.pod(f"orw-{name}")
        assert pinned_nodes(pod) == {sized_for}
        assert pod.spec.node_name == status["nodeName"] == sized_for
        chosen.add(sized_for)
    assert chosen == {n.name for n in fits}

    # The real scheduler honours the pin: the same affinity naming a node that is not
    # there leaves a pod unschedulable, although enabled nodes have room.
    stray = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray"},
             "spec": {"affinity": render.node_affinity("trainer", "no-such-node"),
                      "containers": [{"name": "c", "image": "none"}]}}
    orw.core.create_namespaced_pod(orw.namespace, stray)
    reason = orw.cluster.wait_for(
        lambda: next((c.message for c in (orw.pod("stray").status.conditions or [])
                      if c.type == "PodScheduled" and c.status == "False"), None),
        what="the stray pod to be found unschedulable")
    assert "NodeAffinity" in reason or "affinity" in reason
    assert orw.pod("stray").spec.node_name is None


def test_recreated_worker_never_inherits_claim_or_pod(orw: Env) -> None:
    orw.start()
    first = orw.create_worker("w", "10Gi")
    old = orw.wait_phase("w", "Running")
    old_pod_uid = orw.pod("orw-w").metadata.uid
    # Keep the old pod around past its worker: a forced finalizer removal, say.
    orw.hold_pod("orw-w")
    orw.delete_worker("w")
    orw.cluster.wait_for(lambda: orw.pod("orw-w").metadata.deletion_timestamp,
                         what="the old pod to be deleted")
    orw.custom.patch_namespaced_custom_object(
        "openrl.io", "v1alpha1", orw.namespace, "openrlworkers", "w",
        {"metadata": {"finalizers": None}})
    orw.cluster.wait_for(lambda: orw.worker("w") is None, what="the old worker to go")

    second = orw.create_worker("w", "10Gi")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    waiting = orw.cluster.wait_for(
        lambda: (s := orw.status("w")).get("reason", "").startswith("WaitingForPredecessor")
        and s, what="the new worker to wait for its predecessor's pod")
    assert waiting["phase"] == "Pending" and "claimName" not in waiting
    orw.looked("w", times=2)  # looked at twice more: still nothing adopted
    assert orw.status("w")["phase"] == "Pending"
    assert orw.pod("orw-w").metadata.uid == old_pod_uid

    orw.release_pod("orw-w")
    new = orw.wait_phase("w", "Running")
    assert new["claimName"] == naming.claim_name("w", second["metadata"]["uid"]) \
        != old["claimName"]
    pod = orw.pod("orw-w")
    assert pod.metadata.uid != old_pod_uid
    assert pod.metadata.owner_references[0].uid == second["metadata"]["uid"]


def test_deleting_worker_keeps_its_seat_until_its_pod_is_gone(
        orw: Env, gpu_nodes: list[GpuNode]) -> None:
    orw.start()
    memory = whole_node(gpu_nodes)
    fits = [n for n in gpu_nodes if n.devices * n.device_memory >= int(memory[:-2]) * GiB]
    names = [f"w{i}" for i in range(len(fits))]
    for name in names:
        orw.create_worker(name, memory)
    for name in names:
        orw.wait_phase(name, "Running", timeout=120)
    leaving = names[0]
    orw.hold_pod(f"orw-{leaving}")
    orw.delete_worker(leaving)
    orw.create_worker("next", memory)
    orw.cluster.wait_for(lambda: orw.status("next").get("phase") == "Pending",
                         what="the next worker to wait")
    orw.declined(2)  # the next worker tried twice more: the seat must still be taken
    assert orw.status("next")["phase"] == "Pending"
    assert orw.status("next")["reason"].startswith("WaitingForCapacity:")
    held = orw.worker(leaving)
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["openrl.io/placement"]
    assert orw.pod(f"orw-{leaving}").metadata.deletion_timestamp

    orw.release_pod(f"orw-{leaving}")
    orw.cluster.wait_for(lambda: orw.worker(leaving) is None, what="the old worker to go")
    orw.wait_phase("next", "Running", timeout=120)


def test_sweep_deletes_orphaned_claims_but_never_young_ones(orw: Env) -> None:
    orw.start(reclaim_grace="20s", reclaim_interval="2s")
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "orphan", "labels": {"openrl.io/managed": "true"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": orw.cluster.driver, "count": 1}}]}}}
    orw.custom.create_namespaced_custom_object("resource.k8s.io", "v1", orw.namespace,
                                               "resourceclaims", body)
    created = time.monotonic()  # the orphan is at least this old when it goes
    unmanaged = {**body, "metadata": {"name": "not-ours"}}
    orw.custom.create_namespaced_custom_object("resource.k8s.io", "v1", orw.namespace,
                                               "resourceclaims", unmanaged)
    orw.create_worker("w", "10Gi")
    status = orw.wait_phase("w", "Running")
    # Several sweeps look at the orphan while it is young and keep it (what each says in
    # its debug log), then one deletes it once the grace has passed.
    kept = sweeps_keeping(orw, "orphan", times=3)
    assert "orphan" in orw.claims()
    orw.cluster.wait_for(lambda: "orphan" not in orw.claims(), timeout=40,
                         what="the orphaned claim to be swept")
    # Never before the grace (20 s): the sweep comes back a second after it is due.
    assert time.monotonic() - created >= 19
    assert kept >= 3
    claims = orw.claims()
    assert "not-ours" in claims  # unmanaged: never ours to delete
    assert status["claimName"] in claims  # referenced: kept


def test_pending_reason_tells_never_from_not_yet(orw: Env, gpu_nodes: list[GpuNode]) -> None:
    orw.start()
    largest = max(n.devices * n.device_memory for n in gpu_nodes)
    orw.create_worker("huge", f"{largest // GiB + 1}Gi")
    never = orw.cluster.wait_for(lambda: (s := orw.status("huge")).get("phase") and s,
                                 what="a reason for the huge worker")
    assert never["phase"] == "Pending"
    assert never["reason"].startswith("NoCapacity:")
    assert never["conditions"][0]["reason"] == "NoCapacity"

    memory = whole_node(gpu_nodes)
    fits = [n for n in gpu_nodes if n.devices * n.device_memory >= int(memory[:-2]) * GiB]
    for i in range(len(fits)):
        orw.create_worker(f"big{i}", memory)
    for i in range(len(fits)):
        orw.wait_phase(f"big{i}", "Running", timeout=120)
    orw.create_worker("late", memory)
    late = orw.cluster.wait_for(lambda: (s := orw.status("late")).get("phase") and s,
                                what="a reason for the late worker")
    assert late["phase"] == "Pending"
    assert late["reason"].startswith("WaitingForCapacity:")
    assert late["conditions"][0]["reason"] == "WaitingForCapacity"
    events = orw.core.list_namespaced_event(
        orw.namespace, field_selector="involvedObject.name=huge").items
    assert any(e.reason == "NoCapacity" and e.type == "Warning" for e in events)


def test_a_node_at_its_pod_limit_seats_no_more_workers_than_it_runs(
        orw: Env, gpu_nodes: list[GpuNode]) -> None:
    """The 110-pod node: 8 x 80Gi, 16 workers per claim (128 seats), 120 workers of 5Gi.

    Every worker is Running, or Pending saying the node is at its pod limit: none is
    promised a seat whose pod the kube-scheduler would refuse (``Too many pods``).
    """
    node = gpu_nodes[0]
    core = orw.core
    saved = {n.name: core.read_node(n.name).metadata.labels or {} for n in gpu_nodes}
    allocatable = int(core.read_node(node.name).status.allocatable["pods"])
    others = sum(1 for pod in core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node.name}").items
        if pod.status.phase not in ("Succeeded", "Failed")
        and (pod.metadata.labels or {}).get("openrl.io/managed") != "true")
    slots = allocatable - others
    seats = node.devices * 16
    assert slots < seats, "the node's pod limit must be below its seats for this story"
    count = slots + 10
    try:
        core.patch_node(node.name, {"metadata": {"labels": {
            "openrl.io/max-workers-per-claim": "16"}}})
        for other in gpu_nodes[1:]:  # one node, as in the story
            core.patch_node(other.name, {"metadata": {"labels": {"openrl.io/enabled": "false"}}})
        orw.start()
        for i in range(count):
            orw.create_worker(f"w{i:03}", "5Gi")

        def settled() -> dict[str, dict[str, Any]] | None:
            statuses = {item["metadata"]["name"]: item.get("status") or {}
                        for item in orw.workers()}
            phases = [s.get("phase") for s in statuses.values()]
            if phases.count("Running") == slots and phases.count("Pending") == count - slots:
                return statuses
            return None

        statuses = orw.cluster.wait_for(settled, timeout=600,
                                        what=f"{slots} workers Running, 10 Pending")
        reason = f"WaitingForCapacity: {node.name} is at its pod limit ({slots} pods)"
        for name, status in statuses.items():
            if status["phase"] == "Pending":
                assert status["reason"] == reason, (name, status)
        # No pod waits on a node that cannot run it: every pod is bound and Running.
        pods = core.list_namespaced_pod(orw.namespace).items
        assert len(pods) == slots
        assert all(pod.spec.node_name == node.name and pod.status.phase == "Running"
                   for pod in pods)
        orw.declined(count - slots)  # retries come round: nothing is promised meanwhile
        assert settled() is not None
        tally: dict[tuple[str, str], int] = {}
        for status in statuses.values():
            key = (status["phase"], status.get("reason", "") if status["phase"] != "Running"
                   else "")
            tally[key] = tally.get(key, 0) + 1
        print(f"\n{count} workers on {node.name} ({allocatable} pods allocatable, {others} "
              f"other pods):", *(f"\n  {n} {phase} {reason}".rstrip()
                                 for (phase, reason), n in sorted(tally.items())))
    finally:
        for name, labels in saved.items():
            core.patch_node(name, {"metadata": {"labels": {
                k: labels.get(k) for k in ("openrl.io/max-workers-per-claim",
                                           "openrl.io/enabled")}}})


def sweeps_keeping(orw: Env, claim: str, times: int) -> int:
    """Wait until the sweep has looked at ``claim`` ``times`` times and kept it as too young
    (its debug line); how many it had when this returned."""
    seen: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            fields = getattr(record, "fields", None) or {}
            if record.getMessage() == "orphaned claim still young" and \
                    fields.get("claim") == claim:
                seen.append(record)

    sweep = logging.getLogger("openrl.controller.sweep")
    handler, level = Kept(logging.DEBUG), sweep.level
    sweep.addHandler(handler)
    sweep.setLevel(logging.DEBUG)
    try:
        orw.cluster.wait_for(lambda: len(seen) >= times, timeout=60, interval=0.2,
                             what=f"{times} sweeps keeping {claim}")
        return len(seen)
    finally:
        sweep.removeHandler(handler)
        sweep.setLevel(level)


def test_exact_device_count_is_what_dra_allocates(orw: Env, gpu_nodes: list[GpuNode]) -> None:
    """A tensor-parallel server of 100Gi asking for exactly 4 devices gets 4 devices of
    at least 25Gi each on one node -- not the fewest its memory needs -- and the
    count, once set, cannot change."""
    assert any(n.devices >= 4 and n.device_memory >= 25 * GiB for n in gpu_nodes), gpu_nodes
    orw.start()
    orw.create_worker("tp", "100Gi", devices=4)
    status = orw.wait_phase("tp", "Running", timeout=120)
    assert status["deviceCount"] == 4 and status["memoryPerDevice"] == "25Gi", status
    claim = orw.claims()[status["claimName"]]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 4, results
    assert {r["pool"] for r in results} == {status["nodeName"]}, results
    with pytest.raises(client.ApiException) as info:
        orw.custom.patch_namespaced_custom_object(
            "openrl.io", "v1alpha1", orw.namespace, "openrlworkers", "tp",
            {"spec": {"devices": 2}})
    assert info.value.status == 422 and "immutable" in info.value.body
