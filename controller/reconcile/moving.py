"""A move under way: the steps that carry a worker from its old claim to its new one.

The pass that decides a move is ``rebalancing.py``'s; from its first writes on
(the new seat held, ``status.move`` naming both claims, reason ``Moving``), the
worker's own reconciles walk it through these steps, rows of the stages'
table (stages.py), reading only the objects, so a controller killed between
any two writes picks up where they say:

  the moving worker                      its step                 writes
  -------------------------------------  -----------------------  --------------------------
  pod on the old claim, not asked yet    ask the time-slicer to   the pod's openrl.io/drain
    (``drain``)                          end its turns
  pod asked, openrl.io/drained on it,    its old pod goes         the pod's delete
    or alone on its claim, or the
    time-slicer silent ``drain_timeout``
  no pod, still on the old claim's list  its old seat given back  the claim's booked list
    (``old_seat_back``)                                           (a claim cut for it that
                                                                  nobody else holds: deleted)
  no pod, off the old claim              the seat stage resumes   the pod on the new claim
                                         it on the new claim      (``moved``: Placed, naming
                                         (``seating.held_claim``)  both claims)
  pod on the new claim                   done: the ``own pod``
                                         stage says
  new claim gone before the ask          the move is dropped:     none (the status's
                                         it stays where it is     ``move`` goes)
  no move, a claim cut for it (either    that claim goes          the claim's delete
    of its names) with nobody on it, its
    pod elsewhere
    (``drain``: a move whose status
    was never written)

Rules:

* The time-slicer's word is the turn's boundary: the pod is asked to drain,
  and goes once the agent says the worker parked, at once if it shares its
  claim with nobody now, and after ``drain_timeout`` at most.
* The old seat is given back only once the old pod is gone; the new pod is
  made only after that (the pod's name is the worker's, one at a time).
* Only these steps keep ``status.move``: any other stage's conclusion (a
  lost node, say) ends the move where it stands.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from controller.fleet.claims import leave_join
from controller.k8s import kube, naming
from controller.k8s.naming import ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Obj,
    Worker,
    annotations_of,
    format_time,
    is_deleting,
    name_of,
    parse_time,
    pod_alive,
    pod_claim,
    pod_phase,
    uid_of,
    worker_owner_uid,
)
from controller.reconcile.vocabulary import Case, Conclusion, Context, Outcome, Write, delete_pod
from placement.model import per_device_share
from placement.rebalance import MoveReason

__all__ = ["WHY", "describe", "drain", "moved", "moving_to", "old_seat_back"]


def moving_to(worker: Worker) -> Obj | None:
    """The move for efficiency under way (``status.move``), or None."""
    move = worker.status.get("move")
    return move if isinstance(move, dict) and move.get("to") and move.get("from") else None


def describe(move: Obj) -> str:
    return (f"from claim {move['from']} on node {move.get('fromNode') or '(unknown)'} to "
            f"claim {move['to']} on node {move.get('node') or '(unknown)'}")


WHY: dict[str, str] = {MoveReason.OWN_DEVICES: "devices of its own have stayed free",
                       MoveReason.EMPTIES_NODE: "it empties its node"}


def drain(ctx: Context, case: Case) -> Conclusion | None:
    """A moving worker's old pod: ask its turns to end, then delete it (the module's
    table). None: the ``own pod`` stage says (no move, or it is done or dropped)."""
    worker, pod = case.worker, case.pod
    if pod is None or worker_owner_uid(pod) != worker.uid:
        return None
    move = moving_to(worker)
    claim = pod_claim(pod)
    if move is None:
        return _stray(ctx, worker, claim)
    if claim != move["from"]:
        return None  # on its new claim (or somewhere the move never meant): the pod says
    view = ctx.cache.view
    notes = annotations_of(pod)
    asked = parse_time(notes.get(naming.ANNOTATION_DRAIN) or "")
    if move["to"] not in view.claims and asked is None:
        return None  # its new claim went before its turns were touched: it stays
    state = _outcome(worker, pod, move)
    if is_deleting(pod):
        return Conclusion(state("its old pod is going"), requeue_after=1.0)
    booked = view.fleet.claim(claim)
    alone = booked is None or len(booked.bookings) <= 1
    waited = (ctx.now - asked).total_seconds() if asked is not None else 0.0
    why = ("nobody shares its claim now" if alone else
           "the time-slicer says it parked" if notes.get(naming.ANNOTATION_DRAINED) else
           "its pod is not running" if not pod_alive(pod) else
           f"the time-slicer said nothing in {waited:.0f}s" if asked is not None
           and waited >= ctx.settings.drain_timeout else "")
    if why:
        return Conclusion(state(f"{why}: its old pod {name_of(pod)} is deleted"),
                          (delete_pod(pod),), requeue_after=1.0)
    if asked is None:
        ask = Write("patch", kube.PODS, name_of(pod), {"metadata": {"annotations": {
            naming.ANNOTATION_DRAIN: format_time(ctx.now)}}})
        return Conclusion(state("its node's time-slicer is asked to end its turns"), (ask,),
                          requeue_after=ctx.settings.drain_timeout + 0.5)
    return Conclusion(state(f"waiting for its node's time-slicer to say it parked (asked "
                            f"{waited:.0f}s ago)"),
                      requeue_after=max(0.5, ctx.settings.drain_timeout - waited + 0.5))


def _outcome(worker: Worker, pod: Obj, move: Obj) -> Callable[[str], Outcome]:
    """The status while the old pod drains, its detail to say."""
    devices = worker.status.get("deviceCount")
    phase = (WorkerPhase.RUNNING if pod_phase(pod) == naming.PodPhase.RUNNING
             else WorkerPhase.PLACING)

    def state(now: str) -> Outcome:
        return Outcome(phase, ReasonKind.MOVING, f"moving {describe(move)}: {now}",
                       claim=str(move["from"]), devices=devices,
                       memory_per_device=per_device_share(worker.memory, devices)
                       if devices else None, node=str(worker.status.get("nodeName") or ""),
                       pod=name_of(pod), move=move)
    return state


def _stray(ctx: Context, worker: Worker, claim: str) -> Conclusion | None:
    """Delete a claim cut for the worker when its pod is on another claim, no move is
    under way and nobody sits on it (a move whose status was never written left it)."""
    for own in worker.own_claims:
        view = ctx.cache.view.claims.get(own)
        if claim == own or view is None or view.allocated or view.reserved:
            continue
        booked = ctx.cache.view.fleet.claim(own)
        obj = ctx.cache.get(kube.CLAIMS, own)
        if (booked is not None and booked.bookings) or obj is None:
            continue
        return Conclusion(None, (Write("delete", kube.CLAIMS, own, {}, uid=uid_of(obj)),),
                          requeue_after=1.0, wake=True)
    return None


def old_seat_back(ctx: Context, case: Case) -> Conclusion | None:
    """A moving worker whose old pod is gone: take it off the old claim's booked list.
    None once it is off: the seat stage resumes it on its new claim."""
    worker = case.worker
    move = moving_to(worker)
    if move is None:
        return None
    old = str(move["from"])
    obj = ctx.cache.get(kube.CLAIMS, old)
    if obj is None or is_deleting(obj):
        return None
    booked = ctx.cache.view.fleet.claim(old)
    if old in worker.own_claims and not (booked is not None and any(
            b.worker != worker.name for b in booked.bookings)):
        # A claim cut for it that nobody else holds goes; one others hold stays theirs.
        return Conclusion(Outcome(
            WorkerPhase.PENDING, ReasonKind.MOVING,
            f"moving {describe(move)}: its old pod is gone, its claim {old} is released; "
            "its pod on the new claim comes next", claim=str(move["to"]), move=move),
            (Write("delete", kube.CLAIMS, old, {}, uid=uid_of(obj)),), requeue_after=0.2,
            wake=True)
    body = leave_join(obj, worker.uid)
    if body is None:
        return None
    return Conclusion(Outcome(
        WorkerPhase.PENDING, ReasonKind.MOVING,
        f"moving {describe(move)}: its old pod is gone, its seat on claim {old} is given "
        "back; its pod on the new claim comes next", claim=str(move["to"]), move=move),
        (Write("patch", kube.CLAIMS, old, body),), requeue_after=0.2, wake=True)


def moved(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """The seat's conclusion for a moving worker resumed on its new claim: Placed, naming
    both claims (and the move ends). Any other conclusion ends the move as it is."""
    move = moving_to(case.worker)
    outcome = done.outcome
    if move is None or outcome is None or outcome.phase != WorkerPhase.PLACING \
            or outcome.claim != move["to"]:
        return done
    why = WHY.get(str(move.get("reason") or ""), "moved for efficiency")
    return attrs.evolve(done, outcome=attrs.evolve(
        outcome, detail=f"moved {describe(move)}: {why}", move=None))
