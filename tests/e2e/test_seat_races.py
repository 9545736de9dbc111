"""Seats under the controller's feet: templates vanishing, pods deleted, claims deleted.

Every story runs on the first fake GPU node with two seats per claim and
workers four devices wide, so the node holds two claims and four seats, and a
full fleet takes four workers. Each reproduced a seat promised twice (or a
placed worker moved) on the local control plane before it was fixed.
"""
# ruff: noqa: F811

from __future__ import annotations

import functools
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from controller_fixtures import Env, GpuNode, crd, gpu_nodes, node, orw, wide  # noqa: F401
from kubernetes import client

from hack.crashpoint import launcher

TEMPLATE = "openrl-template-trainer"
ROOT = Path(__file__).resolve().parents[2]


def pods_on(orw: Env, claim: str) -> list[str]:
    return sorted(p.metadata.name for p in orw.core.list_namespaced_pod(orw.namespace).items
                  if any(c.resource_claim_name == claim for c in p.spec.resource_claims or []))


def fill(orw: Env, node: GpuNode) -> dict[str, str]:
    """a and b cut a claim each, c and d join them: every seat taken. Worker -> claim."""
    memory = wide(node)
    placed = {}
    for name in ("a", "b", "c", "d"):
        orw.create_worker(name, memory)
        placed[name] = orw.wait_phase(name, "Running", timeout=120)["claimName"]
    assert len(set(placed.values())) == 2
    return placed


def set_template_key(orw: Env, present: bool, saved: dict[str, Any]) -> None:
    if not present:
        saved.update(orw.core.read_namespaced_config_map(TEMPLATE, orw.namespace).data)
        orw.core.patch_namespaced_config_map(TEMPLATE, orw.namespace,
                                             {"data": {"pod.yaml": None}})
    else:
        orw.core.patch_namespaced_config_map(TEMPLATE, orw.namespace, {"data": saved})


def delete_pod(orw: Env, worker: str) -> None:
    orw.core.delete_namespaced_pod(f"orw-{worker}", orw.namespace, grace_period_seconds=0)
    orw.cluster.wait_for(lambda: orw.pod(f"orw-{worker}") is None,
                         what=f"pod orw-{worker} gone")


def waits_for_template(orw: Env, worker: str) -> dict[str, Any]:
    return orw.cluster.wait_for(
        lambda: (s := orw.status(worker)).get("reason", "").startswith("TemplateNotFound")
        and s, what=f"{worker} to wait for its template")


def test_worker_waiting_for_its_template_keeps_its_seat(orw: Env, node: GpuNode) -> None:
    """Its pod gone and its template missing, a worker that cut a shared claim keeps
    its seat: a newcomer cannot take it, and the worker comes back to the same claim
    without pushing the claim past its seats."""
    orw.start()
    placed = fill(orw, node)
    saved: dict[str, Any] = {}
    set_template_key(orw, present=False, saved=saved)
    delete_pod(orw, "a")
    waiting = waits_for_template(orw, "a")
    assert waiting["phase"] == "Pending"

    orw.create_worker("s", wide(node), role="sampler")  # its template is still there
    orw.cluster.wait_for(lambda: orw.status("s").get("reason", "").startswith(
        "WaitingForCapacity"), what="the sampler to wait")
    orw.declined(2)  # the sampler tried twice more: the kept seat must stay kept
    assert orw.status("s")["phase"] == "Pending"
    assert len(pods_on(orw, placed["a"])) == 1

    assert orw.status("a")["claimName"] == placed["a"]  # the seat, still booked
    set_template_key(orw, present=True, saved=saved)
    assert orw.wait_phase("a", "Running", timeout=60)["claimName"] == placed["a"]
    orw.declined(1)  # the sampler tried again with a back on its claim
    assert pods_on(orw, placed["a"]) == sorted(f"orw-{w}" for w, c in placed.items()
                                               if c == placed["a"])
    assert orw.status("s")["phase"] == "Pending"


def test_joiner_waiting_for_its_template_is_not_moved(orw: Env, node: GpuNode) -> None:
    """A joiner that lost its pod while its template was missing returns to its claim,
    even when free devices appeared meanwhile."""
    orw.start()
    placed = fill(orw, node)
    joiner = "c"  # arrived with every device taken: it joined a or b
    saved: dict[str, Any] = {}
    set_template_key(orw, present=False, saved=saved)
    delete_pod(orw, joiner)
    waits_for_template(orw, joiner)
    # Free the other claim's devices: a worker deciding afresh would cut a claim there.
    others = [w for w, c in placed.items() if c != placed[joiner]]
    for name in others:
        orw.delete_worker(name)
    orw.cluster.wait_for(lambda: all(orw.worker(n) is None for n in others),
                         what="the other claim's workers to go")
    freed = {placed[n] for n in others}
    orw.cluster.wait_for(lambda: not freed & set(orw.claims()),
                         what="their claim to be swept", timeout=90)
    set_template_key(orw, present=True, saved=saved)
    status = orw.wait_phase(joiner, "Running", timeout=60)
    assert status["claimName"] == placed[joiner]
    assert pods_on(orw, placed[joiner]) == sorted(
        f"orw-{w}" for w, c in placed.items() if c == placed[joiner])


def test_deleted_claim_keeps_its_devices_until_its_pods_are_gone(
        orw: Env, node: GpuNode) -> None:
    """Deleting a claim two workers run on: DRA keeps it while the pods live, and so do
    the books; no newcomer is priced against its devices; its workers are told."""
    orw.start()
    placed = fill(orw, node)
    orw.create_worker("e", wide(node))
    orw.cluster.wait_for(lambda: orw.status("e").get("reason", "").startswith(
        "WaitingForCapacity"), what="the newcomer to wait")
    doomed = placed["a"]
    orw.custom.delete_namespaced_custom_object("resource.k8s.io", "v1", orw.namespace,
                                               "resourceclaims", doomed)
    on_it = sorted(w for w, c in placed.items() if c == doomed)
    for name in on_it:
        told = orw.cluster.wait_for(
            lambda n=name: (s := orw.status(n)).get("reason", "").startswith("ClaimDeleting")
            and s, what=f"{name} to be told its claim is going")
        assert told["phase"] == "Running" and told["claimName"] == doomed
        condition = next(c for c in told["conditions"] if c["type"] == "Placed")
        assert condition["reason"] == "ClaimDeleting" and condition["status"] == "True"
    events = orw.cluster.wait_for(
        lambda: [e for e in client.EventsV1Api(orw.cluster.api).list_namespaced_event(
            orw.namespace).items if e.reason == "ClaimDeleting"],
        what="ClaimDeleting events")
    assert {e.regarding.name for e in events} == set(on_it)
    assert all(e.type == "Warning" for e in events)
    orw.declined(2)  # tried twice more: the newcomer is not priced against those devices
    assert orw.status("e")["phase"] == "Pending"
    assert doomed in orw.claims()
    assert len(orw.claims()) == 2


def test_failed_pod_is_deleted_and_its_seat_settles(orw: Env, node: GpuNode) -> None:
    """A worker whose pod failed is Failed (PodFailed); its finished pod is deleted, so
    the claim's reservation settles on the pods that still run."""
    orw.start()
    placed = fill(orw, node)
    orw.core.patch_namespaced_pod_status("orw-a", orw.namespace, {"status": {
        "phase": "Failed", "reason": "Error", "message": "exit 3"}})
    failed = orw.wait_phase("a", "Failed")
    assert failed["reason"].startswith("PodFailed")
    orw.cluster.wait_for(lambda: orw.pod("orw-a") is None, what="the failed pod to go")
    partner = next(w for w, c in placed.items() if c == placed["a"] and w != "a")

    def reserved() -> list[str]:
        claim = orw.claims()[placed["a"]]
        return sorted(r["name"] for r in (claim.get("status") or {}).get("reservedFor") or [])

    orw.cluster.wait_for(lambda: reserved() == [f"orw-{partner}"],
                         what="the reservation to settle on the partner")
    seen = set()
    for _ in range(20):
        seen.add(tuple(reserved()))
        time.sleep(0.1)
    assert seen == {(f"orw-{partner}",)}
    # The seat is free again: a newcomer joins it.
    orw.create_worker("n", wide(node))
    assert orw.wait_phase("n", "Running", timeout=60)["claimName"] == placed["a"]


def replica(orw: Env, crash_at: str = "", http_port: int = 0) -> subprocess.Popen[bytes]:
    """The scheduler as its own process (leader election on), as the admin; ``crash_at``
    plants a crash or pause in its API calls (hack/crashpoint.py); its /metrics on
    ``http_port`` if one is given."""
    http = f"127.0.0.1:{http_port}" if http_port else ""
    args = [*launcher(crash_at), f"--kubeconfig={orw.cluster.kubeconfig}",
            f"--namespace={orw.namespace}",
            f"--device-class={orw.cluster.driver}", "--retry-interval=3s",
            "--reclaim-interval=2s", "--reclaim-grace=10s", f"--http-address={http}",
            "--log-format=text"]
    return subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def waits_decided(port: int) -> float:
    """A replica's waiting_for_capacity decisions so far, from its /metrics (0 while it
    serves none yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    found = re.search(r'^openrl_place_decisions_total\{outcome="waiting_for_capacity"\} (\S+)$',
                      text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    return Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_paused_leader_cannot_give_away_a_seat_twice(orw: Env, node: GpuNode) -> None:
    """Leader A decides x onto a claim's last seat and freezes just before creating the
    pod. B takes the lease and must not give that seat to o, an older worker (ties in
    arrival break by name) whose template has just appeared. A resumes: still two pods
    on a two-seat claim."""
    leader = replica(orw, crash_at="create:pods:4:stop")  # a, b, c, then x's
    standby: subprocess.Popen[bytes] | None = None
    try:
        placed = {}
        for name in ("a", "b", "c"):  # two claims, one seat left
            orw.create_worker(name, wide(node))
            placed[name] = orw.wait_phase(name, "Running", timeout=120)["claimName"]
        free = next(c for c in set(placed.values()) if list(placed.values()).count(c) == 1)
        orw.create_worker("o", wide(node), podTemplate={"name": "later"})
        waits_for_template(orw, "o")
        port = free_port()
        standby = replica(orw, http_port=port)
        orw.create_worker("x", wide(node))
        orw.cluster.wait_for(lambda: stopped(leader), what="the leader to freeze before x's pod")
        source = orw.core.read_namespaced_config_map(TEMPLATE, orw.namespace)
        orw.core.create_namespaced_config_map(orw.namespace, {
            "metadata": {"name": "later", "labels": {"openrl.io/pod-template": "true"}},
            "data": dict(source.data)})
        # Past the lease the standby leads and decides o: o's reason turns from its missing
        # template to waiting for capacity (only a leader writes a status; had the standby
        # given o the frozen leader's seat, o would be placed instead).
        orw.cluster.wait_for(lambda: orw.status("o").get("reason", "").startswith(
            "WaitingForCapacity"), timeout=90, what="the standby to lead and decide o")
        leader.send_signal(signal.SIGCONT)
        orw.wait_phase("x", "Running", timeout=60)
        # The old leader finds its lease gone and steps down; the standby tries o again
        # with x's pod in place.
        leader.wait(60)  # it stepped down and exited (a TimeoutExpired here if it did not)
        seen = waits_decided(port)
        orw.cluster.wait_for(lambda: waits_decided(port) > seen, timeout=60,
                             what="the standby to decide o again")
        assert orw.status("x")["claimName"] == free
        assert len(pods_on(orw, free)) == 2
        assert orw.status("o")["phase"] == "Pending"
        assert orw.status("o")["reason"].startswith("WaitingForCapacity")
    finally:
        for proc in (leader, standby):
            if proc is not None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
                proc.wait(20)


def held_devices(claim: dict[str, Any]) -> list[str]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices")
               or {}).get("results") or []
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def test_a_device_given_to_two_claims_is_given_up_by_both(orw: Env, node: GpuNode) -> None:
    """kube-scheduler gives a device only once, from its cache; a lost answer to its
    allocation write (an API server restarted under it) can make it give a second claim
    a device another holds. Played here as admin: b's pod held off the node by a taint,
    its claim is written allocated a's device, the taint goes and kube-scheduler binds
    the pod to it. kube-scheduler keeps allocated devices as a set: once either claim
    lets the device go it would count it free while the other holds it. So both give it
    up, a and b are placed again, and every device ends in one claim."""
    orw.start()
    orw.create_worker("a", "10Gi")
    a_claim = orw.wait_phase("a", "Running")["claimName"]
    (device,) = held_devices(orw.claims()[a_claim])
    driver, pool, name = device.split("/")
    # A new claim may take a name given up: the two are told by their UIDs.
    given_up = {orw.claims()[a_claim]["metadata"]["uid"]}
    taints = [t.to_dict() for t in orw.core.read_node(node.name).spec.taints or []]
    hold = {"key": "e2e.openrl.io/hold", "effect": "NoSchedule"}
    orw.core.patch_node(node.name, {"spec": {"taints": [*taints, hold]}})
    try:
        orw.create_worker("b", "10Gi")
        b_claim = orw.cluster.wait_for(lambda: orw.status("b").get("claimName"),
                                       what="b to cut a claim")
        assert b_claim != a_claim
        given_up.add(orw.claims()[b_claim]["metadata"]["uid"])
        orw.cluster.wait_for(lambda: orw.pod("orw-b"), what="b's pod")
        orw.custom.patch_namespaced_custom_object_status(
            "resource.k8s.io", "v1", orw.namespace, "resourceclaims", b_claim,
            {"status": {"allocation": {
                "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool,
                                         "device": name}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node.name]}]}]}}}})
    finally:
        orw.core.patch_node(node.name, {"spec": {"taints": taints or None}})

    def placed_again(worker: str) -> dict[str, Any] | None:
        s = orw.status(worker)
        return s if s.get("phase") == "Running" and any(
            m.get("reason") == "DeviceConflict" for m in s.get("moves") or []) else None
    for worker in ("b", "a"):
        orw.cluster.wait_for(functools.partial(placed_again, worker), timeout=90,
                             what=f"{worker} placed again after the conflict")
    orw.cluster.wait_for(lambda: not given_up & {
        c["metadata"]["uid"] for c in orw.claims().values()}, what="both claims given up")
    held = [d for obj in orw.claims().values() for d in held_devices(obj)]
    assert len(held) == 2 and len(set(held)) == 2, held  # a device each, none twice
    for worker in ("a", "b"):
        assert len(orw.status(worker)["moves"]) == 1, orw.status(worker)["moves"]
