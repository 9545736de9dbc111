"""The steps of one reconcile, each a function that returns what it concluded.

reconcile.py runs them in order (its docstring gives the sequence); each
returns a ``Conclusion``: the status the worker is to show (``outcome``, or
None to leave it as it is), the writes that outcome needs, in order, and when
to come back. No step writes, and none raises to report a result.

This module holds the steps for a worker being deleted or finished, and for
one whose pod exists; those for a worker with no pod yet (the claim it holds,
its template, the seat decision) are seating.py's, under the first two rules
below and its own.

Rules:

* Steps read only the cache: objects through ``Cache.get``, the fleet through
  ``Cache.view`` (a ``fleet_rules.FleetReading``), never the API.
* Every write a worker needs is in its conclusion, deletions included. A
  write marked ``assumed`` (the claim cut, the pod) is put into the cache by
  the reconcile before the next decision, and forgotten if it fails.
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

import datetime as dt
import logging

import attrs

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
    worker_owner_uid,
)
from controller.reconcile.status import Outcome
from controller.reconcile.writes import Write
from controller.settings import Settings
from controller.store.cache import Cache
from placement.model import per_device_share

__all__ = ["Conclusion", "Context", "add_finalizer", "drop_finished_pod", "finalize",
           "with_pod"]

log = logging.getLogger("openrl.controller")

# A placed pod's progress short of Running is written once it has waited this share of
# the placement timeout (default 10m: 2.5m), well before Unschedulable: in a burst,
# kube-scheduler may take minutes to reach a pod, and every such write is one more.
STATUS_QUIET = 0.25


@attrs.frozen
class Context:
    """What every step reads besides the worker: the cache, the settings, the time."""

    cache: Cache
    settings: Settings
    namespace: str
    now: dt.datetime


@attrs.frozen
class Conclusion:
    """What a step concluded for its worker."""

    outcome: Outcome | None = None  # the status it means; None: the status stays
    writes: tuple[Write, ...] = ()  # planned before the status, in order
    requeue_after: float | None = None
    wake: bool = False  # capacity changed: retry every pending worker
    sweep: bool = False  # a claim may have lost its last reference
    decided: str = ""  # a decision's outcome, for the decisions metric


def _delete_pod(pod: Obj) -> Write:
    return Write("delete", kube.PODS, name_of(pod), {}, uid=uid_of(pod))


# ------------------------------------------------------------ deleting, finishing


def finalize(ctx: Context, worker: Worker, pod: Obj | None) -> Conclusion:
    """A deleted worker: its pod goes first; only once it is verifiably gone does the
    finalizer (and with it the seat) go."""
    # Only orw-<name> is ever created for a worker, so reading it by name is enough.
    if pod is not None and worker_owner_uid(pod) == worker.uid:
        writes: tuple[Write, ...] = ()
        if not is_deleting(pod):
            writes = (_delete_pod(pod),)
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
    the plan, so it is there before any seat is written); None if it has it."""
    if naming.FINALIZER in worker.finalizers:
        return worker, None
    finalizers = [*worker.finalizers, naming.FINALIZER]
    body = {"metadata": {"finalizers": finalizers,
                         "resourceVersion": worker.obj["metadata"]["resourceVersion"]}}
    stamped = Worker.from_obj({**worker.obj, "metadata": {**worker.obj["metadata"],
                                                          "finalizers": finalizers}})
    return stamped, Write("patch", kube.WORKERS, worker.name, body)


def drop_finished_pod(worker: Worker, pod: Obj | None) -> Conclusion:
    """A Failed worker's own finished pod is deleted once the failure is on record.

    The status keeps why it ended. The pod holds no seat in our books, but while it
    existed its claim's reservation was seen flipping between listing it and not,
    many times a second, and a later joiner would have shared the claim with it.
    """
    if pod is None or pod_alive(pod) or is_deleting(pod) or \
            worker_owner_uid(pod) != worker.uid:
        return Conclusion()
    log.info("deleted the finished pod of a failed worker",
             extra=kv(worker=worker.name, pod=name_of(pod), claim=pod_claim(pod)))
    return Conclusion(writes=(_delete_pod(pod),), wake=True, sweep=True)


# ------------------------------------------------------------------ with a pod


def with_pod(ctx: Context, worker: Worker, pod: Obj) -> Conclusion:
    """A pod named for the worker exists: ours is reported, an earlier incarnation's is
    deleted (never adopted), anyone else's is a conflict."""
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
        writes = (_delete_pod(pod),)
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
            (_delete_pod(pod),))
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
    with ctx.cache.lock:
        found = view.claims.get(claim) or view.closing.get(claim)
    closing = found is not None and found.deleting
    if claim == worker.claim and worker.status.get("nodeName") and known_devices:
        return str(worker.status["nodeName"]), int(known_devices), closing
    if found is None:
        return "", int(known_devices or 1), False
    return (found.node if found.allocated else ""), found.devices, closing
