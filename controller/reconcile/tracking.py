"""The worker itself and the pod named for it: deleted, first seen, finished, tracked.

Five steps of the reconcile (stages.py holds the order, and the rules every
step keeps): ``add_finalizer`` before the table, on first sight; the stages
``deleting`` (``finalize``), ``finished`` (``finished``: its finished pod
deleted, and its claim at once where nobody else holds a seat on it),
``invalid spec`` (``invalid_spec``) and ``own pod`` (``own_pod``: what the
pod named for the worker means -- ours reported, an earlier incarnation's
deleted and never adopted, anyone else's a conflict). The write pool settles
a pod that already existed with ``own_pod`` too.

Rules:

* Progress short of Running, once Placing is on record, is written only when
  it is news the status lacks: the scheduler's own reason for not placing the
  pod (its PodScheduled message), once the pod has waited ``STATUS_QUIET`` of
  the placement timeout; or, for a pod bound to its node, that it is still
  starting there that long after the bind. A pod the scheduler has not reached
  yet is what Placing already says (a burst's queue makes every pod wait).
* A worker whose pod is bound but whose claim's allocation the cache has not
  seen yet (the claims' watch is a stream of its own, and may run behind the
  pods') is reported without its node and comes back for it; the claim's
  allocation, when it comes, also queues the workers it lists.
"""

from __future__ import annotations

import logging

import attrs

from controller.fleet.claims import booked_uids
from controller.k8s import kube, naming
from controller.k8s.logs import kv
from controller.k8s.naming import PodPhase, ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Obj,
    Worker,
    controller_owner,
    created_at,
    is_deleting,
    labels_of,
    name_of,
    parse_time,
    pod_alive,
    pod_claim,
    pod_condition,
    pod_failure,
    pod_node,
    pod_phase,
    uid_of,
    version_of,
    worker_owner_uid,
)
from controller.reconcile.vocabulary import Case, Conclusion, Context, Outcome, Write, delete_pod
from placement.model import per_device_share

__all__ = ["STATUS_QUIET", "add_finalizer", "finalize", "finished", "invalid_spec",
           "own_pod"]

log = logging.getLogger("openrl.controller")

# A placed pod's progress short of Running is written once it has waited this share of
# the placement timeout (default 10m: 2.5m), well before Unschedulable: in a burst,
# kube-scheduler may take minutes to reach a pod, and every such write is one more.
STATUS_QUIET = 0.25


# ------------------------------------------------------------ the worker itself


def finalize(ctx: Context, case: Case) -> Conclusion:
    """A deleted worker: its pod goes first; only once it is verifiably gone does the
    finalizer (and with it the seat) go."""
    worker, pod = case.worker, case.pod
    # Only orw-<name> is ever created for a worker, so reading it by name is enough.
    if pod is not None and worker_owner_uid(pod) == worker.uid:
        writes: tuple[Write, ...] = ()
        if not is_deleting(pod):
            writes = (delete_pod(pod),)
            log.info("deleting pod of deleted worker",
                     extra=kv(worker=worker.name, pod=name_of(pod), claim=pod_claim(pod),
                              node=pod_node(pod)))
        # Pod events bring us back as soon as it is gone; this is the fallback.
        return Conclusion(writes=writes, requeue_after=ctx.settings.retry_interval)
    if naming.FINALIZER not in worker.finalizers:
        return Conclusion(wake=True, sweep=True)
    remaining = [f for f in worker.finalizers if f != naming.FINALIZER]
    body = {"metadata": {"finalizers": remaining,
                         "resourceVersion": worker.obj["metadata"]["resourceVersion"]}}
    log.info("released seat of deleted worker", extra=kv(worker=worker.name, claim=worker.claim))
    return Conclusion(writes=(Write("patch", kube.WORKERS, worker.name, body),),
                      wake=True, sweep=True)


def add_finalizer(worker: Worker) -> tuple[Worker, Write | None]:
    """The worker as it will read with our finalizer, and the write adding it (first in
    the plan, so it is there before any seat is written); None if it has it, or is
    being deleted (``finalize`` removes it)."""
    if worker.deleting or naming.FINALIZER in worker.finalizers:
        return worker, None
    finalizers = [*worker.finalizers, naming.FINALIZER]
    body = {"metadata": {"finalizers": finalizers,
                         "resourceVersion": worker.obj["metadata"]["resourceVersion"]}}
    stamped = Worker.from_obj({**worker.obj, "metadata": {**worker.obj["metadata"],
                                                          "finalizers": finalizers}})
    return stamped, Write("patch", kube.WORKERS, worker.name, body)


def invalid_spec(_ctx: Context, case: Case) -> Conclusion:
    """A spec the controller cannot act on: InvalidSpec, terminal."""
    return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.INVALID_SPEC,
                              case.worker.spec_error or ""))


# ------------------------------------------------------------------ finished


def finished(ctx: Context, case: Case) -> Conclusion:
    """A Succeeded or Failed worker: its finished pod deleted, and its claim deleted at
    once where nobody else holds a seat on it."""
    worker, pod = case.worker, case.pod
    writes: list[Write] = []
    if pod is not None and not pod_alive(pod) and not is_deleting(pod) and \
            worker_owner_uid(pod) == worker.uid:
        writes.append(delete_pod(pod))
    claim = worker.claim
    view = ctx.cache.view
    seat = view.claims.get(claim) if claim else None
    booked = view.fleet.claim(claim) if seat is not None and view.fleet.has_claim(claim) \
        else None
    taken = booked is not None and any(b.worker != worker.name for b in booked.bookings)
    obj = ctx.cache.get(kube.CLAIMS, claim) if seat is not None else None
    alive = pod is not None and pod_alive(pod)
    if obj is not None and not taken and not alive and not _committed_others(ctx, obj, worker):
        writes.append(Write("delete", kube.CLAIMS, claim, {}, uid=uid_of(obj),
                            resource_version=version_of(obj)))
    return Conclusion(writes=tuple(writes), wake=bool(writes), sweep=bool(writes))


def _committed_others(ctx: Context, claim: Obj, worker: Worker) -> bool:
    """Whether another live worker committed a seat on the claim (a join under way)."""
    return any(uid != worker.uid and ctx.cache.view.live_uid(uid) for uid in booked_uids(claim))


# ------------------------------------------------------------------ with a pod


def own_pod(ctx: Context, case: Case) -> Conclusion:
    """A pod named for the worker exists: ours is reported, an earlier incarnation's is
    deleted (never adopted), anyone else's is a conflict."""
    worker, pod = case.worker, case.pod
    assert pod is not None  # the stage's condition
    owner = controller_owner(pod) or {}
    owner_uid = worker_owner_uid(pod)
    if owner_uid == worker.uid:
        return _track(ctx, worker, pod)
    predecessor = (
        owner_uid
        and owner.get("name") == worker.name
        and labels_of(pod).get(naming.LABEL_WORKER) == naming.label_value(worker.name)
    )
    if not predecessor:
        who = labels_of(pod).get(naming.LABEL_WORKER) or owner.get("name") or "nobody"
        return Conclusion(Outcome(
            WorkerPhase.FAILED, ReasonKind.POD_CONFLICT,
            f"pod {name_of(pod)} exists and belongs to {who!r}, not to this worker; "
            "nothing was deleted"))
    writes: tuple[Write, ...] = ()
    if not is_deleting(pod):
        writes = (delete_pod(pod),)
        log.info("deleting pod of an earlier incarnation",
                 extra=kv(worker=worker.name, pod=name_of(pod), old_uid=owner_uid))
    return Conclusion(
        Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_PREDECESSOR,
                f"pod {name_of(pod)} belongs to an earlier {naming.KIND} named "
                f"{worker.name} (uid {owner_uid}); it is being deleted, never adopted"),
        writes, ctx.settings.retry_interval)


def _track(ctx: Context, worker: Worker, pod: Obj) -> Conclusion:
    settings = ctx.settings
    claim = pod_claim(pod) or worker.claim
    node, devices, closing = _allocation(ctx, worker, claim)
    share = per_device_share(worker.memory, devices)
    base = Outcome(WorkerPhase.PLACING, ReasonKind.PLACED, "", claim=claim, devices=devices,
                   memory_per_device=share, node=node, pod=name_of(pod))
    if closing and pod_alive(pod) and not is_deleting(pod):
        # Someone deleted the claim under a placed worker: DRA keeps it (and its
        # devices) until the pod is gone, and so do our books. Say so, loudly.
        return Conclusion(attrs.evolve(
            base,
            phase=(WorkerPhase.RUNNING if pod_phase(pod) == PodPhase.RUNNING
                   else WorkerPhase.PLACING),
            kind=ReasonKind.CLAIM_DELETING,
            detail=f"claim {claim} is being deleted; its devices stay booked for pod "
                   f"{name_of(pod)} until the pod is gone, and the worker is placed "
                   "again after that"), requeue_after=settings.retry_interval)
    if is_deleting(pod):
        return Conclusion(attrs.evolve(
            base, detail=f"pod {name_of(pod)} is being deleted; it will be recreated on "
                         f"claim {claim}"), requeue_after=settings.retry_interval)
    if not pod_alive(pod):
        # Back at once: with the failure on record, the finished pod goes.
        return Conclusion(attrs.evolve(base, phase=WorkerPhase.FAILED, kind=ReasonKind.POD_FAILED,
                                       detail=pod_failure(pod)), requeue_after=1.0)
    if pod_phase(pod) == PodPhase.RUNNING:
        # A running pod's claim is allocated, but the claims' watch may run behind the
        # pods': until the allocation is seen, come back for the node.
        return Conclusion(attrs.evolve(base, phase=WorkerPhase.RUNNING, kind="",
                                       detail=f"pod {name_of(pod)} running on node "
                                              f"{pod_node(pod)}"),
                          requeue_after=settings.retry_interval if pod_node(pod) and not node
                          else None)
    created = created_at(pod)
    waited = (ctx.now - created).total_seconds()
    quiet = STATUS_QUIET * settings.placement_timeout
    # Already reported Placing on this claim: progress short of Running is written only
    # when it is news (the module's rules), so the status stays while most pods run.
    reported = worker.phase == WorkerPhase.PLACING and worker.claim == claim
    scheduled = pod_condition(pod, "PodScheduled") or {}
    if pod_node(pod):
        bound = (parse_time(scheduled.get("lastTransitionTime"))
                 if scheduled.get("status") == "True" else None) or created
        starting = (ctx.now - bound).total_seconds()
        if reported and starting < quiet:
            return Conclusion(requeue_after=quiet - starting)
        return Conclusion(attrs.evolve(base, detail=f"pod {name_of(pod)} starting on node "
                                                    f"{pod_node(pod)}"))
    said = scheduled.get("message") if scheduled.get("status") == "False" else None
    if waited >= settings.placement_timeout:
        return Conclusion(Outcome(
            WorkerPhase.FAILED, ReasonKind.UNSCHEDULABLE,
            f"pod {name_of(pod)} with claim {claim} was not scheduled within "
            f"{settings.placement_timeout:.0f}s: {said or 'not scheduled yet'}; "
            "pod deleted, seat released"),
            (delete_pod(pod),))
    if reported and (waited < quiet or not said):
        # The scheduler's word comes as a pod update; the timeout's check is due anyway.
        return Conclusion(requeue_after=(quiet if waited < quiet and said
                                         else settings.placement_timeout) - waited)
    return Conclusion(attrs.evolve(base, detail=f"pod {name_of(pod)} waiting for the scheduler "
                                                f"with claim {claim}: "
                                                f"{said or 'not scheduled yet'}"),
                      requeue_after=settings.placement_timeout - waited)


def _allocation(ctx: Context, worker: Worker, claim: str) -> tuple[str, int, bool]:
    """(node once allocated, devices, being deleted) of the worker's claim; status
    first, then the cache's reading."""
    known_devices = worker.status.get("deviceCount")
    view = ctx.cache.view
    found = view.claims.get(claim) or view.closing.get(claim)
    closing = found is not None and found.deleting
    if claim == worker.claim and worker.status.get("nodeName") and known_devices:
        return str(worker.status["nodeName"]), int(known_devices), closing
    if found is None:
        return "", int(known_devices or 1), False
    return (found.node if found.allocated else ""), found.devices, closing
