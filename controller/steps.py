"""The steps of one reconcile, each a function that returns what it concluded.

reconcile.py runs them in order (its docstring gives the sequence); each
returns a ``Conclusion``: the status the worker is to show (``outcome``, or
None to leave it as it is), the writes that outcome needs, in order, and when
to come back. No step writes, and none raises to report a result.

Rules:

* Steps read only the cache: objects through ``Cache.get``, the fleet through
  ``Cache.view`` (a ``fleet_rules.FleetReading``), never the API.
* Every write a worker needs is in its conclusion, deletions included. A
  write marked ``assumed`` (the claim cut, the pod) is put into the cache by
  the reconcile before the next decision, and forgotten if it fails.
* ``seat`` is the one step that decides; the reconcile runs it under the
  cache's lock and assumes its writes before letting go.
* A placed worker stays put: a worker holding a live claim gets its pod back
  on it unless others already fill that claim's seats.
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
from typing import Any

import attrs

from controller import kube, naming, privileges, render
from controller.cache import Cache
from controller.claims import ClaimView, build_claim, commit_join
from controller.logs import kv
from controller.naming import PodPhase, ReasonKind, WorkerPhase
from controller.objects import (
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
from controller.settings import Settings
from controller.status import Outcome
from controller.writes import Write
from placement import Fleet, JoinClaim, NewClaim, Policy, Request, Wait, decide
from placement.decide import Decision, seat_text
from placement.model import per_device_share
from placement.quantity import format_quantity

__all__ = ["Conclusion", "Context", "add_finalizer", "drop_finished_pod", "finalize",
           "held_claim", "seat", "template", "with_pod"]

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


# ------------------------------------------------------------------- no pod yet


def held_claim(ctx: Context, worker: Worker) -> ClaimView | None:
    """The live claim the worker already holds, most certain first: its status, its own
    claim (cut before a lost write), a join committed on a claim's booked list."""
    view = ctx.cache.view
    booked = view.bookings.get(worker.name)
    for claim in (worker.claim, worker.own_claim, booked.claim if booked else ""):
        if claim and claim in view.claims:
            return view.claims[claim]
    return None


def template(ctx: Context, worker: Worker, held: ClaimView | None) -> Obj | Conclusion:
    """The worker's prepared template, or why there is none. Waiting for it keeps a held
    claim's seat booked (the status keeps the claim), so nobody else is promised it."""
    source = f"ConfigMap {ctx.namespace}/{worker.template_name} key {worker.template_key}"
    keep: dict[str, Any] = {}
    seat_kept = ""
    if held is not None:
        keep = {"claim": held.name, "devices": held.devices,
                "memory_per_device": per_device_share(worker.memory, held.devices),
                "node": held.node if held.allocated else ""}
        seat_kept = f"; its seat on claim {held.name} stays booked"
    retry = ctx.settings.retry_interval
    config_map = ctx.cache.get(kube.CONFIGMAPS, worker.template_name)
    if config_map is None:
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.TEMPLATE_NOT_FOUND,
                                  f"{source.rsplit(' key ', 1)[0]} not found{seat_kept}",
                                  **keep), requeue_after=retry)
    unmarked = privileges.unmarked_refusal(config_map, source.rsplit(" key ", 1)[0])
    if unmarked is not None:
        return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.TEMPLATE_ERROR,
                                  str(render.TemplateError(*unmarked))))
    text = (config_map.get("data") or {}).get(worker.template_key)
    if text is None:
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.TEMPLATE_NOT_FOUND,
                                  f"{source}: no such key{seat_kept}", **keep),
                          requeue_after=retry)
    try:
        return render.prepare(text, worker, source, ctx.settings.template_policy)
    except render.TemplateError as exc:
        return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.TEMPLATE_ERROR, str(exc)))


def _elsewhere(request: Request, fleet: Fleet, policy: Policy, avoid: str,
               decision: Decision) -> Decision:
    """``decision``, or where the fleet without node ``avoid`` would seat the worker when
    ``decision`` puts it there and that fleet can. Rare (a worker placed again after a
    wedged pod), so the copy of the fleet it costs is paid seldom."""
    if not avoid or not isinstance(decision, NewClaim | JoinClaim) or decision.node != avoid:
        return decision
    trial = fleet.copy()
    trial.remove_node(avoid)
    other = decide(request, trial, policy)
    return other if isinstance(other, NewClaim | JoinClaim) else decision


def seat(ctx: Context, worker: Worker, prepared: Obj, *, avoid: str = "") -> Conclusion:
    """Decide the worker's seat against the cache's fleet: back on the claim it holds,
    a new claim, a join, or a wait. ``avoid``: a node to place it on only when no other
    can take it (``moves.wedged_on``). Run under the cache's lock."""
    view, settings = ctx.cache.view, ctx.settings
    held = held_claim(ctx, worker)
    if held is not None and _seat_kept(ctx, worker, held.name):
        return _start(ctx, worker, prepared, held.name, held.devices,
                      held.node if held.allocated else "", f"resumed on claim {held.name}",
                      pin=held.node)
    fleet = view.fleet
    request = Request(worker.name, worker.role, worker.memory, worker.owner, worker.exclusive)
    decision = _elsewhere(request, fleet, settings.policy, avoid,
                          decide(request, fleet, settings.policy))
    if isinstance(decision, NewClaim) and worker.own_claim in view.claims:
        # The claim named for this worker exists and others fill it: it cannot cut
        # another, so it waits for a seat like anyone else.
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                                  f"claim {worker.own_claim}, cut for this worker, is "
                                  "taken by others; waiting for a seat"),
                          requeue_after=settings.retry_interval)
    if isinstance(decision, NewClaim):
        body = build_claim(worker.own_claim, decision, namespace=ctx.namespace,
                           device_class=settings.device_class, driver=settings.device_driver,
                           worker=worker.name, worker_uid=worker.uid)
        log.info("cut claim", extra=kv(worker=worker.name, claim=worker.own_claim,
                                       node=decision.node, devices=decision.devices,
                                       floor=format_quantity(decision.memory_floor),
                                       ceiling=format_quantity(decision.memory_ceiling)))
        cut = Write("create", kube.CLAIMS, worker.own_claim, body, assumed=True)
        return _start(
            ctx, worker, prepared, worker.own_claim, decision.devices, "",
            f"new claim {worker.own_claim}: {decision.devices} device(s) of "
            f"{format_quantity(decision.memory_floor)}..."
            f"{format_quantity(decision.memory_ceiling)}, sized for node {decision.node}",
            pin=decision.node, before=(cut,), decided="new_claim")
    if isinstance(decision, JoinClaim):
        others = fleet.workers_on(decision.claim)
        # Why this claim ("same owner", "binpack joins before cutting", contention).
        why = seat_text(request, fleet, decision, settings.policy).partition(": ")[2]
        return _start(ctx, worker, prepared, decision.claim, decision.devices, decision.node,
                      f"joined claim {decision.claim} on node {decision.node} "
                      f"({others} other worker(s)): {why}", pin=decision.node,
                      before=_commit_join(ctx, worker, decision.claim), decided="join_claim")
    assert isinstance(decision, Wait)
    reason = decision.reason
    decided = "no_capacity" if reason.never else "waiting_for_capacity"
    retry = settings.retry_interval
    if reason.never:
        waited = (ctx.now - worker.created).total_seconds()
        left = settings.placement_timeout - waited
        if left <= 0:
            return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.UNSATISFIABLE,
                                      f"{reason} (waited {waited:.0f}s)"), decided=decided)
        retry = min(retry, left)
    return Conclusion(Outcome(WorkerPhase.PENDING, str(reason.kind), reason.detail),
                      requeue_after=retry, decided=decided)


def _commit_join(ctx: Context, worker: Worker, claim: str) -> tuple[Write, ...]:
    """The join's commit on the claim, before its pod: a compare-and-swap on the claim's
    resourceVersion (see claims.commit_join). A 409 drops the plan's pod and brings the
    worker straight back to be decided again."""
    obj = ctx.cache.get(kube.CLAIMS, claim)
    if obj is None:
        return ()
    # Only the claim's own list is checked against the cache: a join costs its few
    # seats, never a pass over every worker.
    return (Write("patch", kube.CLAIMS, claim,
                  commit_join(obj, worker.uid, ctx.cache.view.live_uid)),)


def _seat_kept(ctx: Context, worker: Worker, claim: str) -> bool:
    """Whether a worker holding ``claim`` may recreate its pod there.

    It may unless the claim is full without it. A placed worker never moves while
    its seat is booked, and a recreated pod never takes a claim past its seats: a
    claim full of others means this worker's booking was lost, and it goes through
    the decision like a newcomer.
    """
    view = ctx.cache.view
    fleet = view.fleet
    if not fleet.has_claim(claim):
        return True  # its node left placement: nothing to count against
    node = view.nodes.get(fleet.claim_node(claim))
    if node is None:
        return True
    booked = fleet.claim(claim)
    others = sum(1 for b in booked.bookings if b.worker != worker.name) if booked else 0
    if others < node.seats_per_claim:
        return True
    log.warning("the claim this worker held is full without it; deciding afresh",
                extra=kv(worker=worker.name, claim=claim, others=others))
    return False


def _start(ctx: Context, worker: Worker, prepared: Obj, claim: str, devices: int, node: str,
           how: str, *, pin: str, before: tuple[Write, ...] = (),
           decided: str = "") -> Conclusion:
    """The pod on ``claim``, pinned to ``pin`` (the node placement chose), after the
    writes ``before`` it; ``node`` is the allocation's node once observed (the status
    reports only that). What a refusal of the pod means is the write table's."""
    pod = render.stamp(prepared, worker, claim, ctx.namespace, pin)
    log.info("creating pod", extra=kv(worker=worker.name, pod=worker.pod_name, claim=claim,
                                     node=node))
    return Conclusion(
        Outcome(WorkerPhase.PLACING, ReasonKind.PLACED, how, claim=claim, devices=devices,
                memory_per_device=per_device_share(worker.memory, devices),
                node=node, pod=worker.pod_name),
        (*before, Write("create", kube.PODS, worker.pod_name, pod, assumed=True)),
        ctx.settings.placement_timeout, decided=decided)
