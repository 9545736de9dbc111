"""Autoscaling: a worker that must wait keeps a standing claim and pod.

On a pool that scales from zero, a waiting worker with no pod is invisible:
nothing asks for a node. With autoscaling on (``Settings.autoscaling``), a
worker placement cannot seat now stands: it keeps an unpinned ResourceClaim
and a pod that kube-scheduler and a node autoscaler act on. The claim lists
every device shape the worker fits (``pools.alternatives``) as DRA's
prioritized list, smallest device first; the pod's node affinity asks for
enabled nodes of its role and names no node.

  the worker (autoscaling on)                 becomes
  ------------------------------------------  --------------------------------------------
  no seat now; pools are declared and         NoCapacity, as without autoscaling (fails
    neither they nor a node fit (stand)         Unsatisfiable after the placement timeout)
  no seat now, otherwise; or, under spread,   standing: claim and pod created, Pending
    only a seat on a shared claim
    (stand_instead)
                                                WaitingForCapacity saying what it waits for
                                                ("waiting for a node to be added" when no
                                                pool is declared); never times out
  standing, its claim allocated              placed there: the ordinary path (Placing,
    (standing_pod)                              Running), booked like any allocation
  standing, unallocated, binpack, a seat on   standing pod and claim deleted; it joins in a
    a claim now takes it (standing_pod)         later reconcile, once both are gone
  standing, unallocated, otherwise            stays; its status says what it waits for
  pinned, unschedulable, its devices taken    wedged at once (moves.py's rule, no grace)
    by a claim allocated meanwhile
    (lost_race)
  no pod, its standing claim left             the claim deleted (if it is not going yet);
    (standing_claim_left)                       decided afresh once it is gone

Rules:

* A standing pod keeps its template's memory request: it names no node, and
  only a pod starting on a node that may share claims asks for what it may
  park (``parking``).
* A standing claim is never joined and never counts as capacity until it is
  allocated: it has no node, and the fleet's reading books only claims with
  one. Once kube-scheduler allocates it, the claim is read like any other
  (its node, its width from the allocation) and the worker is placed there.
* A worker has at most one claim: the standing one or the one it is placed
  on. A standing worker moves to a shared claim only through deleting its
  standing pod and claim; the join is decided afresh once both are gone.
  Nothing else leaves a standing claim: a new claim placement would cut is
  the standing claim kube-scheduler will allocate.
* Under spread, a worker shares a claim only under contention; an autoscaled
  pool has none while it can grow, so a worker that spread would seat only by
  joining stands for a node instead (unless no pool can fit it: then it
  joins). Under binpack a standing worker takes any seat that frees.
* A standing claim carries no booked list: its worker's seat is its pod.
* No worker fails because of a race: a pinned pod whose devices a standing
  claim took (kube-scheduler says it is unschedulable, and the claims allocated
  on its node leave too few) is wedged at once and placed again by moves.py's
  rules; one whose node cannot run it otherwise is wedged after the grace. A
  standing pod is never wedged.
* Oldest first as far as kube-scheduler and the autoscaler allow: standing
  pods are created, and standing workers offered joins, in the queue's order
  (oldest first); which standing pod a new node takes is kube-scheduler's.
"""

from __future__ import annotations

import logging

from controller.fleet.claims import memory_selector
from controller.fleet.pools import Alternative, Verdict, alternatives, can_grow
from controller.k8s import kube, naming
from controller.k8s.logs import kv
from controller.k8s.naming import ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Obj,
    Worker,
    is_deleting,
    labels_of,
    name_of,
    pod_alive,
    pod_claim,
    pod_condition,
    pod_node,
    uid_of,
    version_of,
)
from controller.reconcile import moves, render
from controller.reconcile.vocabulary import Case, Conclusion, Context, Outcome, Write
from placement import JoinClaim, Strategy, decide

__all__ = ["LABEL_STANDING", "WAITS", "build_standing_claim", "is_standing", "lost_race",
           "stand", "stand_instead", "standing_claim_left", "standing_claim_name",
           "standing_pod"]

log = logging.getLogger("openrl.controller")

LABEL_STANDING = "openrl.io/standing"  # on a standing claim and its pod
# The decisions (seating.seat's) after which a worker stands.
WAITS = frozenset({"no_capacity", "waiting_for_capacity"})


def standing_claim_name(worker: Worker) -> str:
    """``orw-<worker>-standing-<uid>``: never the claim the worker would cut."""
    return naming.claim_name(worker.name, f"standing-{worker.uid}")


def is_standing(obj: Obj) -> bool:
    return labels_of(obj).get(LABEL_STANDING) == "true"


def _subrequest(shape: Alternative, device_class: str, driver: str) -> Obj:
    ceiling = shape.memory_ceiling
    expression = (memory_selector(driver, shape.memory_floor, ceiling) if ceiling is not None
                  else memory_selector(driver, shape.memory_floor, 0).split(" && ")[0])
    return {"name": shape.name, "deviceClassName": device_class,
            "allocationMode": "ExactCount", "count": shape.devices,
            "selectors": [{"cel": {"expression": expression}}]}


def build_standing_claim(worker: Worker, verdict: Verdict, *, namespace: str,
                         device_class: str, driver: str) -> Obj:
    """The unpinned claim: one request whose prioritized list holds every shape."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": standing_claim_name(worker),
            "namespace": namespace,
            "labels": {naming.LABEL_MANAGED: "true", LABEL_STANDING: "true"},
            "annotations": {naming.ANNOTATION_WORKER: worker.name},
        },
        "spec": {"devices": {"requests": [{
            "name": naming.CLAIM_REQUEST,
            "firstAvailable": [_subrequest(s, device_class, driver) for s in verdict.shapes],
        }]}},
    }


def _waiting(worker: Worker, verdict: Verdict, claim: str, retry: float) -> Conclusion:
    return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                              f"standing claim {claim} and pod {worker.pod_name}: "
                              f"{verdict.reason}", pod=worker.pod_name),
                      requeue_after=retry)


def _verdict(ctx: Context, worker: Worker) -> Verdict:
    return alternatives(worker.role, worker.memory, ctx.cache.view.nodes.values(),
                        ctx.settings.autoscale_pools, worker.devices)


def stand_instead(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """What the worker does with autoscaling on, given the seat's conclusion (before
    anything of it is assumed): a wait stands; under spread, a join stands unless no
    pool can fit the worker."""
    worker = case.worker
    if done.decided in WAITS:
        return stand(ctx, case)
    if (done.decided == "join_claim" and ctx.settings.policy.strategy == Strategy.SPREAD
            and can_grow(worker.role, worker.memory, ctx.settings.autoscale_pools,
                         worker.devices)):
        return stand(ctx, case)
    return done


def stand(ctx: Context, case: Case) -> Conclusion:
    """A worker placement told to wait, or to join under spread: its standing claim and
    pod, or NoCapacity when no declared pool fits it."""
    worker, prepared = case.worker, case.prepared
    assert prepared is not None  # the template stage ran
    verdict = _verdict(ctx, worker)
    if verdict.never:
        # Judged against the declared pools, it fails as any NoCapacity does.
        pools = ", ".join(map(str, ctx.settings.autoscale_pools))
        reason = f"{verdict.reason} ({pools}), nor any node"
        waited_s = (ctx.now - worker.created).total_seconds()
        left = ctx.settings.placement_timeout - waited_s
        if left <= 0:
            return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.UNSATISFIABLE,
                                      f"{ReasonKind.NO_CAPACITY}: {reason} "
                                      f"(waited {waited_s:.0f}s)"), decided="no_capacity")
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.NO_CAPACITY, reason),
                          requeue_after=min(ctx.settings.retry_interval, left),
                          decided="no_capacity")
    name = standing_claim_name(worker)
    claim = ctx.cache.get(kube.CLAIMS, name)
    writes: list[Write] = []
    if claim is None:
        body = build_standing_claim(worker, verdict, namespace=ctx.namespace,
                                    device_class=ctx.settings.device_class,
                                    driver=ctx.settings.device_driver)
        writes.append(Write("create", kube.CLAIMS, name, body, assumed=True))
        log.info("standing claim", extra=kv(worker=worker.name, claim=name,
                                            shapes=", ".join(map(str, verdict.shapes))))
    elif is_deleting(claim):
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                                  f"standing claim {name} is being deleted; waiting until "
                                  "it is gone"), requeue_after=ctx.settings.retry_interval)
    pod = render.stamp(prepared, worker, name, ctx.namespace, "")
    pod["metadata"]["labels"][LABEL_STANDING] = "true"
    writes.append(Write("create", kube.PODS, worker.pod_name, pod, assumed=True))
    done = _waiting(worker, verdict, name, ctx.settings.retry_interval)
    return Conclusion(done.outcome, tuple(writes), done.requeue_after, decided="standing")


def standing_pod(ctx: Context, case: Case) -> Conclusion | None:
    """A standing pod whose claim is not allocated yet: moves to a join if one takes
    it, else keeps waiting. None once its claim is allocated (the ordinary path), or
    the pod has finished."""
    worker, pod = case.worker, case.pod
    assert pod is not None  # the stage's condition, as that it is standing
    if not pod_alive(pod):
        return None
    name = standing_claim_name(worker)
    retry = ctx.settings.retry_interval
    view = ctx.cache.view
    claim = view.claims.get(name) or view.closing.get(name)
    if claim is not None and claim.allocated:
        return None  # placed: the ordinary path reports it
    if is_deleting(pod):
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                                  f"standing pod {name_of(pod)} is being deleted"),
                          requeue_after=retry)
    request = worker.request
    decision = decide(request, view.fleet, ctx.settings.policy)
    verdict = _verdict(ctx, worker)
    if isinstance(decision, JoinClaim) and ctx.settings.policy.strategy == Strategy.BINPACK:
        log.info("leaving standing claim for a seat", extra=kv(
            worker=worker.name, claim=name, joins=decision.claim))
        # Both deletes hold only for the objects as read: kube-scheduler may allocate the
        # claim and bind the pod meanwhile, and another worker may then join the claim.
        # The pod bound, its delete conflicts and the worker is decided again (placed
        # where it stands); the claim allocated, its delete conflicts and it stays, the
        # worker's claim (standing_claim_left's rule), never deleted under a worker that
        # joined it.
        standing_claim = ctx.cache.get(kube.CLAIMS, name) or {}
        writes = (Write("delete", kube.PODS, name_of(pod), {}, uid=uid_of(pod),
                        resource_version=version_of(pod)),
                  Write("delete", kube.CLAIMS, name, {},
                        resource_version=version_of(standing_claim)))
        # The status stays (a write saved): the join, a reconcile later, is the news.
        return Conclusion(None, writes, requeue_after=retry)
    return _waiting(worker, verdict, name, retry)


def lost_race(ctx: Context, case: Case) -> Conclusion | None:
    """A pinned pod kube-scheduler calls unschedulable while its claim is unallocated and
    the claims allocated on its node leave it too few devices: a standing claim took
    them meanwhile. No grace is waited for: it is wedged now (moves.py's rule)."""
    worker, pod = case.worker, case.pod
    assert pod is not None  # the stage's condition, as that it is pinned
    claim_name = pod_claim(pod)
    scheduled = pod_condition(pod, "PodScheduled") or {}
    if (pod_node(pod) or not claim_name or scheduled.get("status") != "False"
            or scheduled.get("reason") != "Unschedulable"):
        return None
    view = ctx.cache.view
    claim = view.claims.get(claim_name)
    node = view.nodes.get(claim.node) if claim is not None else None
    if claim is None or claim.allocated or node is None:
        return None
    taken = sum(c.devices for c in (*view.claims.values(), *view.closing.values())
                if c.allocated and c.node == node.name)
    if taken + claim.devices <= node.devices:
        return None
    log.info("pinned pod lost its devices to a claim allocated meanwhile",
             extra=kv(worker=worker.name, claim=claim_name, node=node.name, taken=taken))
    return moves.moved_pod(ctx, case, grace=0.0)


def standing_claim_left(ctx: Context, case: Case) -> Conclusion | None:
    """No pod, and the worker's standing claim is still there unallocated: it goes (a
    worker holds one claim at a time) before anything is decided. Allocated, it is the
    claim the worker holds (the ordinary path resumes it)."""
    worker = case.worker
    name = standing_claim_name(worker)
    claim = ctx.cache.get(kube.CLAIMS, name)
    if claim is None:
        return None
    view = ctx.cache.view.claims.get(name)
    if view is not None and view.allocated:
        return None
    writes = () if is_deleting(claim) else (Write("delete", kube.CLAIMS, name, {}),)
    return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                              f"standing claim {name} is being deleted; the worker is "
                              "decided afresh once it is gone"), writes,
                      requeue_after=ctx.settings.retry_interval)
