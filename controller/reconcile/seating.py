"""The steps for a worker with no pod yet: the claim it holds, its template, its seat.

``held_claim`` is read as the stages begin (``Case.held``); ``template`` and
``seat`` are the last two stages of the table (stages.py, whose rules hold
here too).

What ``seat`` concludes, by what placement decided:

  decision                      writes, in order               the worker
  ----------------------------  -----------------------------  ---------------------------------
  back on the live claim it     the pod                        Placing: resumed on the claim
  holds (``held_claim``)
  NewClaim                      the claim (named for it: the   Placing: the new claim, sized
                                first of its two names free,   for the node placement chose
                                ``claim_to_cut``), the pod
  NewClaim, both its names      none                           Pending WaitingForCapacity
  taken by others
  JoinClaim                     the join's commit on the       Placing: joined, and why
                                claim, the pod                 that claim
  Wait                          none                           Pending, placement's reason;
                                                               Failed Unsatisfiable once a
                                                               wait no node could ever end
                                                               has lasted the placement
                                                               timeout

Rules:

* ``seat`` is the one step that decides; the reconciler assumes its writes
  (the claim cut, the pod) before it lets the cache's lock go.
* A placed worker stays put: a worker holding a live claim gets its pod back
  on it unless others already fill that claim's seats; then it is decided
  afresh, like a newcomer.
* A decision landing on ``avoid`` (a node the worker's pod was wedged on) is
  made again without that node, and kept only if no other node can take it.
* The pod is pinned to the node placement chose, after the writes its seat
  needs. Joining a claim others share, it asks for the memory the worker
  parks there (``parking``); a template whose memory limit forbids that
  fails the worker (TemplateError, naming the limit and the estimate) and
  nothing is written.
* Waiting for a template keeps a held claim's seat booked (the status keeps
  the claim), so nobody else is promised it.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.fleet.claims import ClaimView, books, build_claim, commit_join
from controller.k8s import kube
from controller.k8s.logs import kv
from controller.k8s.naming import ReasonKind, WorkerPhase
from controller.k8s.objects import Obj, Worker
from controller.reconcile import moves, moving, parking, privileges, render
from controller.reconcile.vocabulary import (
    Case,
    Conclusion,
    Context,
    Outcome,
    Write,
    claim_to_cut,
)
from placement import Fleet, JoinClaim, NewClaim, Policy, Request, Wait, decide
from placement.decide import Decision, seat_why
from placement.model import per_device_share
from placement.quantity import format_quantity

__all__ = ["held_claim", "seat", "template"]

log = logging.getLogger("openrl.controller")


def held_claim(ctx: Context, worker: Worker) -> ClaimView | None:
    """The live claim the worker already holds, most certain first: the claim a move
    for efficiency cut for it, its status, a claim cut for it that still books it (cut
    before a lost write; one it moved off and left to others books it no more), a join
    committed on a claim's booked list."""
    view = ctx.cache.view
    booked = view.bookings.get(worker.name)
    move = moving.moving_to(worker)
    own = [name for name in worker.own_claims
           if books(ctx.cache.get(kube.CLAIMS, name), worker.uid)]
    for claim in (move["to"] if move else "", worker.claim, *own,
                  booked.claim if booked else ""):
        if claim and claim in view.claims:
            return view.claims[claim]
    return None


def template(ctx: Context, case: Case) -> Conclusion | None:
    """Why the worker has no usable template, or None with the prepared template left on
    the case (``Case.prepared``). Waiting for it keeps a held claim's seat booked (the
    status keeps the claim), so nobody else is promised it."""
    worker, held = case.worker, case.held
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
        case.prepared = render.prepare(text, worker, source, ctx.settings.template_policy)
    except render.TemplateError as exc:
        return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.TEMPLATE_ERROR, str(exc)))
    return None


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


def seat(ctx: Context, case: Case) -> Conclusion:
    """Decide the worker's seat against the cache's fleet: back on the claim it holds,
    a new claim, a join, or a wait. A node its pod was wedged on (``moves.wedged_on``)
    takes it only when no other can."""
    view, settings = ctx.cache.view, ctx.settings
    worker, held, prepared = case.worker, case.held, case.prepared
    assert prepared is not None  # the template stage ran
    if held is not None and _seat_kept(ctx, worker, held.name):
        return _start(ctx, worker, prepared, held.name, held.devices,
                      held.node if held.allocated else "", f"resumed on claim {held.name}",
                      pin=held.node)
    fleet = view.fleet
    request = worker.request
    decision = _elsewhere(request, fleet, settings.policy, moves.wedged_on(worker),
                          decide(request, fleet, settings.policy))
    if isinstance(decision, NewClaim):
        name = claim_to_cut(view, worker)
        if name is None:
            # Both names a claim cut for this worker may bear are taken (others fill the
            # claims it cut): it cannot cut another, so it waits for a seat like anyone.
            return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                                      f"claims {' and '.join(worker.own_claims)}, cut for "
                                      "this worker, are taken by others; waiting for a seat"),
                              requeue_after=settings.retry_interval)
        body = build_claim(name, decision, namespace=ctx.namespace,
                           device_class=settings.device_class, driver=settings.device_driver,
                           worker=worker.name, worker_uid=worker.uid)
        log.info("cut claim", extra=kv(worker=worker.name, claim=name,
                                       node=decision.node, devices=decision.devices,
                                       floor=format_quantity(decision.memory_floor),
                                       ceiling=format_quantity(decision.memory_ceiling)))
        cut = Write("create", kube.CLAIMS, name, body, assumed=True)
        return _start(
            ctx, worker, prepared, name, decision.devices, "",
            f"new claim {name}: {decision.devices} device(s) of "
            f"{format_quantity(decision.memory_floor)}..."
            f"{format_quantity(decision.memory_ceiling)}, sized for node {decision.node}",
            pin=decision.node, before=(cut,), decided="new_claim")
    if isinstance(decision, JoinClaim):
        others = fleet.workers_on(decision.claim)
        # Why this claim ("same owner", "binpack joins before cutting", contention).
        why = seat_why(request, fleet, decision, settings.policy)
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
    where = pin or node
    if parking.parks(ctx.cache.view, where):
        try:
            parking.ask(pod, worker, where)
        except render.TemplateError as exc:  # the pod could not be made as it must ask
            return Conclusion(Outcome(WorkerPhase.FAILED, ReasonKind.TEMPLATE_ERROR, str(exc)))
    log.info("creating pod", extra=kv(worker=worker.name, pod=worker.pod_name, claim=claim,
                                     node=node))
    return Conclusion(
        Outcome(WorkerPhase.PLACING, ReasonKind.PLACED, how, claim=claim, devices=devices,
                memory_per_device=per_device_share(worker.memory, devices),
                node=node, pod=worker.pod_name),
        (*before, Write("create", kube.PODS, worker.pod_name, pod, assumed=True)),
        ctx.settings.placement_timeout, decided=decided)
