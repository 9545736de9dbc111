"""Placed again: lost and not-ready nodes, wedged pods, devices given twice, and how often.

A placed worker stays put (seating.py), except where staying cannot work. The
rules, each with the function carrying it out (the stages' table, stages.py, runs
them in its order; for a pod, the first row that matches here wins):

  the worker                               becomes
  ---------------------------------------  ------------------------------------------------
  pod completed, not deleted (moved_pod)   Succeeded, terminal (one that exits 0 once
                                           deleted was stopped: it gets a new pod)
  pod's node lost (moved_pod)              Pending NodeLost; the pod deleted (Kubernetes
                                           finishes that: a deleted node's pods are collected)
  pod alive on a node not ready            its phase, reason NodeNotReady; nothing deleted:
    (moved_pod)                            it waits until Kubernetes confirms the pod gone
                                           (eviction finished, or the out-of-service taint)
  pod finished on a node not ready         Pending NodeNotReady; the pod deleted
  pod on a claim whose device another of   Pending DeviceConflict; the pod deleted (on
    our claims holds too (moved_pod;         both claims: fleet_rules.device_conflict
    fleet_rules.device_conflict)             says why neither keeps it)
  pod Unschedulable (or failing in the     Pending PodWedged; the pod deleted
    scheduler) past wedge_grace, or
    rejected by the kubelet (moved_pod)
  no pod; its seat on a lost or not-ready  Pending, the move's kind; the seat given back
    node, or its pod was wedged, or its      (its own claim deleted, a join taken off the
    claim gives up a device                  claim's booked list; a claim giving up a
    (give_seat_back)                         device, or on a lost node, is deleted even
                                             where others sit on it: their pods go too)
  no seat, moving, a claim cut for it      Pending, the move's kind, until the claim is gone
    still going, its other name taken        (a new claim takes one of its two names:
    too (held_back)                          ``claim_to_cut``)
  no seat, moved more than move_limit      Pending PlacedTooOften until the oldest of those
    times within move_window (held_back)     moves leaves the window (an alert fires)
  no seat, moving (placed_again)           the normal decision; a wait keeps the move's kind,
                                           naming the node and why, and never fails
                                           Unsatisfiable (it ran once; hardware may return)
  no seat, moving after its pod was        the same, but elsewhere when anywhere else can
    wedged on a node (wedged_on)             take it: that node only as the last resort

Rules:

* A seat is given back only once no pod of the worker can hold the device:
  its pod is gone. Deleting a claim is safe before the other pods on it are
  gone: DRA keeps it while any pod uses it, and our books keep its seats.
* Nothing here force-deletes. A lost node's pods are collected by Kubernetes;
  a not-ready node's wait for their eviction to finish, or for the operator.
* Workers on healthy nodes never move: only the rows above move a worker.
  A device conflict is no fault of the node: a worker leaving a claim that
  gave up its device may be placed on the same node again.
* A move is recorded in ``status.moves`` when it is first seen (the worker
  was not already moving): when, why, the node and the claim; the newest
  ``move_limit + 1`` are kept, enough to tell whether the limit is passed.
* A pod still waiting out the grace is looked at again when it runs out
  (``back_when_wedged``, after the ``own pod`` stage).
* ``workers_on_node`` and ``workers_in_conflict`` answer the watches (a node
  lost or changed; a claim's allocation changed), outside any reconcile: they
  are the functions here that take the cache's lock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

import attrs

from controller.fleet.claims import ClaimView, leave_join
from controller.fleet.health import Trouble, trouble
from controller.fleet.rules import FleetReading
from controller.k8s import kube, naming
from controller.k8s.naming import CONDITION_PLACED, PodPhase, ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Obj,
    Worker,
    created_at,
    format_time,
    is_deleting,
    name_of,
    parse_time,
    pod_alive,
    pod_claim,
    pod_condition,
    pod_node,
    pod_phase,
    uid_of,
    worker_owner_uid,
)
from controller.reconcile.vocabulary import (
    Case,
    Conclusion,
    Context,
    Outcome,
    Write,
    claim_to_cut,
    delete_pod,
)
from placement.model import per_device_share

__all__ = ["MOVE_KINDS", "OthersOnOwn", "back_when_wedged", "give_seat_back", "held_back",
           "moved_pod", "moving", "placed_again", "release", "wedged_on", "workers_in_conflict",
           "workers_on_node"]

# The kinds a worker being placed again is Pending with.
MOVE_KINDS = frozenset({ReasonKind.NODE_LOST, ReasonKind.NODE_NOT_READY,
                        ReasonKind.POD_WEDGED, ReasonKind.DEVICE_CONFLICT,
                        ReasonKind.PLACED_TOO_OFTEN})
# How a move reads in a reason: "placed again after <this>".
_AFTER: dict[str, str] = {ReasonKind.NODE_LOST: "node {node} was lost",
          ReasonKind.NODE_NOT_READY: "node {node} was not ready",
          ReasonKind.POD_WEDGED: "its pod was wedged on node {node}",
          ReasonKind.DEVICE_CONFLICT: "its claim on node {node} gave up a device "
                                      "another claim held too"}
# kube-scheduler's reasons for a pod it has not bound: judged unschedulable, or failed.
UNSCHEDULED = frozenset({"Unschedulable", "SchedulerError"})
# The kubelet's word on a pod it refused to run (its admission failed).
REJECTED = "Pod was rejected"


def _kind(worker: Worker) -> str:
    for cond in worker.status.get("conditions") or []:
        if cond.get("type") == CONDITION_PLACED:
            return str(cond.get("reason") or "")
    return ""


def moving(worker: Worker) -> Obj | None:
    """The move under way (the latest recorded), while the worker is Pending because of
    it; None otherwise."""
    recorded = worker.status.get("moves") or []
    if worker.phase != WorkerPhase.PENDING or _kind(worker) not in MOVE_KINDS or not recorded:
        return None
    latest = recorded[-1]
    return latest if isinstance(latest, dict) else None


def wedged_on(worker: Worker) -> str:
    """The node the worker's pod was wedged on, while it waits to be placed again after
    that ('' otherwise): whatever kept the pod from running there (a broken device no
    taint marks, a node the kubelet refuses pods on) may well keep the next one too."""
    move = moving(worker)
    if move is None or move.get("reason") != ReasonKind.POD_WEDGED:
        return ""
    return str(move.get("node") or "")


def _after(move: Obj) -> str:
    text = _AFTER.get(str(move.get("reason")), "node {node} was left")
    return text.format(node=str(move.get("node") or "(unknown)"))


def _record(ctx: Context, worker: Worker, kind: str, node: str,
            claim: str) -> tuple[Obj, ...] | None:
    """The status's moves with this one added; None when it is on record already."""
    if moving(worker) is not None:
        return None
    kept = [m for m in worker.status.get("moves") or [] if isinstance(m, dict)]
    entry = {"at": format_time(ctx.now), "reason": str(kind), "node": node, "claim": claim}
    return tuple([*kept, entry][-(ctx.settings.move_limit + 1):])


def _node_of(ctx: Context, worker: Worker, claim: str, pod: Obj | None = None) -> str:
    """Where the worker is: its pod's node, else its status's, else its claim's."""
    if pod is not None and pod_node(pod):
        return pod_node(pod)
    if worker.status.get("nodeName") and claim == worker.claim:
        return str(worker.status["nodeName"])
    view = ctx.cache.view
    found = view.claims.get(claim) or view.closing.get(claim)
    return found.node if found is not None else ""


def _health(ctx: Context, node: str) -> Trouble | None:
    return trouble(ctx.cache.get(kube.NODES, node), node) if node else None


# ------------------------------------------------------------------ with a pod


def moved_pod(ctx: Context, case: Case, *, grace: float | None = None) -> Conclusion | None:
    """What the worker's own pod means when it completed, its node is lost or not ready,
    or it is wedged: unschedulable past ``grace`` (the settings' ``wedge_grace`` unless
    given), or refused by the kubelet. None: the ``own pod`` stage says."""
    worker, pod = case.worker, case.pod
    if pod is None or worker_owner_uid(pod) != worker.uid:
        return None
    claim = pod_claim(pod) or worker.claim
    devices = worker.status.get("deviceCount")
    placed = Outcome(WorkerPhase.PENDING, claim=claim, devices=devices,
                     memory_per_device=per_device_share(worker.memory, devices)
                     if devices else None, pod=name_of(pod))
    # A pod that exits 0 once deleted (SIGTERM handled, as a well-made worker does) was
    # stopped, not finished: the deletion is someone's (an eviction, a drain), and the
    # worker gets a new pod like any other whose pod is deleted (tracking.own_pod).
    if pod_phase(pod) == PodPhase.SUCCEEDED and not is_deleting(pod):
        return Conclusion(Outcome(WorkerPhase.SUCCEEDED, ReasonKind.COMPLETED,
                                  f"pod {name_of(pod)} completed; its seat is released",
                                  claim=claim, node=str(worker.status.get("nodeName") or ""),
                                  pod=name_of(pod)), requeue_after=1.0)
    node = _node_of(ctx, worker, claim, pod)
    sick = _health(ctx, node)
    if sick is not None and not sick.lost and pod_alive(pod):
        phase = WorkerPhase.RUNNING if pod_phase(pod) == PodPhase.RUNNING \
            else WorkerPhase.PLACING
        state = "is being deleted;" if is_deleting(pod) else "stays;"
        return Conclusion(Outcome(
            phase, ReasonKind.NODE_NOT_READY,
            f"{sick.why}; pod {name_of(pod)} {state} nothing is forced: the worker is "
            "placed again once Kubernetes confirms the pod gone (its eviction finished, or "
            "the node marked out-of-service)", claim=claim, devices=devices,
            memory_per_device=placed.memory_per_device, node=node, pod=name_of(pod)),
            requeue_after=ctx.settings.retry_interval)
    conflict = ctx.cache.view.device_conflict(claim) if sick is None else None
    marks: tuple[Write, ...] = ()
    if sick is not None:
        why, kind = sick.why, sick.kind
    elif conflict is not None:
        why, kind = _conflict(claim, *conflict), ReasonKind.DEVICE_CONFLICT
        marks = _marks(ctx, claim)
    else:
        why = _wedged(ctx, pod, ctx.settings.wedge_grace if grace is None else grace)
        kind = ReasonKind.POD_WEDGED
    if not why:
        return None
    writes = (*marks, *(() if is_deleting(pod) else (delete_pod(pod),)))
    return Conclusion(Outcome(
        WorkerPhase.PENDING, kind,
        f"{why}; pod {name_of(pod)} deleted, the worker is placed again once it is gone",
        claim=claim, devices=devices, memory_per_device=placed.memory_per_device,
        pod=name_of(pod), moves=_record(ctx, worker, kind, node, claim)),
        writes, requeue_after=ctx.settings.retry_interval, wake=True)


def _conflict(claim: str, device: str, other: str) -> str:
    if not other:
        return (f"claim {claim} gives up device {device}, which another claim was "
                "allocated too")
    return (f"device {device} of claim {claim} is allocated to claim {other} too (an "
            f"allocation whose answer was lost, as across an API server restart, can do "
            f"that); both give it up")


def _marks(ctx: Context, claim: str) -> tuple[Write, ...]:
    """Mark the claim and every claim sharing a device with it as giving it up, where
    not marked yet: once one lets the device go the conflict no longer shows, and the
    others must still go (fleet_rules.device_conflict)."""
    view = ctx.cache.view
    writes = []
    for name in (claim, *view.sharing(claim)):
        found = view.claims.get(name)
        conflict = view.device_conflict(name)
        if found is not None and not found.gives_up and conflict is not None:
            writes.append(Write("patch", kube.CLAIMS, name, {"metadata": {"annotations": {
                naming.ANNOTATION_GIVES_UP: conflict[0]}}}))
    return tuple(writes)


def _wedged(ctx: Context, pod: Obj, grace: float) -> str:
    """Why the pod is wedged on its node ('' if it is not): refused by the kubelet, or
    unschedulable for ``grace`` seconds or longer."""
    status = pod.get("status") or {}
    if not pod_alive(pod):
        said = str(status.get("message") or "")
        if pod_node(pod) and (said.startswith(REJECTED)
                              or status.get("reason") == "UnexpectedAdmissionError"):
            return (f"the kubelet on node {pod_node(pod)} rejected pod {name_of(pod)}: "
                    f"{status.get('reason') or ''} {said}".rstrip())
        return ""
    waited = _unschedulable_for(ctx, pod)
    if waited is None or waited < grace:
        return ""
    cond = pod_condition(pod, "PodScheduled") or {}
    return (f"pod {name_of(pod)} stayed unschedulable for {waited:.0f}s (grace "
            f"{grace:.0f}s): {cond.get('message') or 'no reason given'}")


def _unschedulable_for(ctx: Context, pod: Obj) -> float | None:
    if pod_node(pod) or is_deleting(pod):
        return None
    cond = pod_condition(pod, "PodScheduled") or {}
    # A scheduler error that lasts the grace (a claim the pod names deleted under it,
    # say) wedges the pod as surely as a verdict of unschedulable.
    if cond.get("status") != "False" or cond.get("reason") not in UNSCHEDULED:
        return None
    since = parse_time(cond.get("lastTransitionTime")) or created_at(pod)
    return (ctx.now - since).total_seconds()


def back_when_wedged(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """Come back when an unschedulable pod's grace runs out, if nothing sooner."""
    waited = None if case.pod is None else _unschedulable_for(ctx, case.pod)
    if waited is None:
        return done
    due = max(0.0, ctx.settings.wedge_grace - waited) + 0.5
    if done.requeue_after is not None and done.requeue_after <= due:
        return done
    return attrs.evolve(done, requeue_after=due)


# ------------------------------------------------------------------- no pod


def give_seat_back(ctx: Context, case: Case) -> Conclusion | None:
    """No pod: give the seat back when its node is lost or not ready, its pod was
    wedged, or its claim gives up a device. None: the seat is kept."""
    worker, view = case.worker, ctx.cache.view
    seat = case.held or (view.closing.get(worker.claim) if worker.claim else None)
    if seat is None:
        return None
    sick = _health(ctx, seat.node)
    move = moving(worker)
    wedged = (move is not None and move.get("reason") == ReasonKind.POD_WEDGED
              and move.get("claim") == seat.name)
    conflict = view.device_conflict(seat.name)
    if sick is not None:
        kind, why = sick.kind, sick.why
    elif conflict is not None:  # marked, or still shared: never by the move's record,
        # which names a claim a new one may bear again once it is gone
        kind, why = ReasonKind.DEVICE_CONFLICT, _conflict(seat.name, *conflict)
    elif wedged:
        kind, why = ReasonKind.POD_WEDGED, f"its pod was wedged on node {seat.node}"
    else:
        return None
    writes = release(ctx, worker, seat,
                     others_on_own="keep" if kind == ReasonKind.POD_WEDGED else "delete")
    if kind == ReasonKind.DEVICE_CONFLICT:
        writes = (*_marks(ctx, seat.name), *writes)
    if not writes and kind == ReasonKind.POD_WEDGED and seat.name in worker.own_claims:
        # Others sit on the claim cut for it: it keeps the seat and tries it again
        # rather than leave them a claim of its name; a pod wedged again counts as
        # another move.
        return None
    return Conclusion(Outcome(
        WorkerPhase.PENDING, kind,
        f"{why}; its seat on claim {seat.name} is given back and it is placed again",
        moves=_record(ctx, worker, kind, seat.node, seat.name)),
        writes, requeue_after=1.0, wake=True)


OthersOnOwn = Literal["delete", "keep", "leave"]


def release(ctx: Context, worker: Worker, seat: ClaimView, *,
            others_on_own: OthersOnOwn) -> tuple[Write, ...]:
    """The writes giving the seat back: the worker's own claim deleted where nobody else
    sits on it, else its join taken off the claim's booked list. Where others sit on its
    own claim, ``others_on_own`` says: ``delete`` it all the same (its node is gone),
    ``keep`` the seat (a new claim would need its name: nothing is written), or ``leave``
    it to them (only the worker's entry comes off its booked list)."""
    if seat.deleting:
        return ()
    obj = ctx.cache.get(kube.CLAIMS, seat.name)
    if obj is None:
        return ()
    if seat.name in worker.own_claims:
        booked = ctx.cache.view.fleet.claim(seat.name)
        others = [b for b in (booked.bookings if booked else ()) if b.worker != worker.name]
        if not others or others_on_own == "delete":
            return (Write("delete", kube.CLAIMS, seat.name, {}, uid=uid_of(obj)),)
        if others_on_own == "keep":
            return ()
    body = leave_join(obj, worker.uid)
    return () if body is None else (Write("patch", kube.CLAIMS, seat.name, body),)


def held_back(ctx: Context, case: Case) -> Conclusion | None:
    """A moving worker with no seat waits while a claim cut for it is still on its way
    out and its other name is taken too (a new claim needs one of them), and, moved
    more than the limit within the window, until the oldest of those moves leaves it."""
    worker = case.worker
    move = moving(worker)
    if move is None:
        return None
    view = ctx.cache.view
    closing = [name for name in worker.own_claims if name in view.closing]
    if closing and claim_to_cut(view, worker) is None:
        return Conclusion(Outcome(
            WorkerPhase.PENDING, str(move.get("reason") or ReasonKind.NODE_LOST),
            f"to be placed again after {_after(move)}: its claim {closing[0]} is "
            "being released first"), requeue_after=ctx.settings.retry_interval)
    recent = _recent(worker, ctx.now, ctx.settings.move_window)
    limit = ctx.settings.move_limit
    if len(recent) <= limit:
        return None
    until = recent[-(limit + 1)] + dt.timedelta(seconds=ctx.settings.move_window)
    return Conclusion(Outcome(
        WorkerPhase.PENDING, ReasonKind.PLACED_TOO_OFTEN,
        f"placed again {len(recent)} times within {ctx.settings.move_window:.0f}s (the "
        f"limit is {limit}), the latest after {_after(move)}; it waits until "
        f"{format_time(until)} before it is placed again"),
        requeue_after=max(1.0, (until - ctx.now).total_seconds()))


def _recent(worker: Worker, now: dt.datetime, window: float) -> list[dt.datetime]:
    times = [parse_time(str(m.get("at") or "")) for m in worker.status.get("moves") or []
             if isinstance(m, dict)]
    return sorted(t for t in times if t is not None and (now - t).total_seconds() < window)


def placed_again(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """The seat's conclusion for a moving worker: a seat says it was placed again and
    why; a wait keeps the move's kind, naming the node, and never fails."""
    move = moving(case.worker)
    outcome = done.outcome
    if move is None or outcome is None:
        return done
    after = _after(move)
    if outcome.phase == WorkerPhase.PLACING:
        return attrs.evolve(done, outcome=attrs.evolve(
            outcome, detail=f"placed again after {after}: {outcome.detail}"))
    waiting = outcome.phase == WorkerPhase.PENDING or outcome.kind == ReasonKind.UNSATISFIABLE
    if not waiting or outcome.kind in MOVE_KINDS:
        return done
    kind = str(move.get("reason") or ReasonKind.NODE_LOST)
    return attrs.evolve(done, outcome=Outcome(
        WorkerPhase.PENDING, kind, f"to be placed again after {after}: {outcome.reason}"),
        requeue_after=done.requeue_after or ctx.settings.retry_interval)


# ------------------------------------------------------------------ watches


class LockedReading(Protocol):
    """The cache as the watches' question reads it: outside any reconcile, so locked."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def view(self) -> FleetReading: ...


def workers_on_node(cache: LockedReading, node: str) -> Iterable[str]:
    """The workers booked on claims of ``node`` (queued when the node is lost, or its
    health changes)."""
    with cache.lock:
        view = cache.view
        return _booked_on(view, {c.name for c in (*view.claims.values(),
                                                  *view.closing.values()) if c.node == node})


def workers_in_conflict(cache: LockedReading, claim: str) -> Iterable[str]:
    """The workers booked on ``claim`` and on the claims sharing a device with it, where
    those give one up (queued when its allocation changes): the claim whose change showed
    the conflict is not the only one that must give the device up."""
    with cache.lock:
        view = cache.view
        losers = {name for name in (claim, *view.sharing(claim))
                  if view.device_conflict(name) is not None}
        return _booked_on(view, losers) if losers else []


def _booked_on(view: FleetReading, claims: set[str]) -> list[str]:
    """The workers (not orphaned pods) booked on these claims, by name."""
    return sorted(b.holder for b in view.bookings.values()
                  if b.claim in claims and not b.holder.startswith("pod/"))
