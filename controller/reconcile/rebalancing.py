"""Moves for efficiency: a movable worker taking turns gets free devices of its own.

The rule is placement's (``placement.rebalance``: who moves, where, when);
this module carries it out on the cluster. A timed pass (the ``REBALANCE``
queue key, never beside a reconcile) decides; the worker's own reconciles
then walk the move through these steps (the stages' table runs them):

  the moving worker                      its step                 writes
  -------------------------------------  -----------------------  --------------------------
  chosen by the pass (``decide``)        its new claim cut and    the claim (assumed), the
                                         the move recorded        status: Moving, ``move``
  pod on the old claim, not asked yet    ask the time-slicer to   the pod's openrl.io/drain
    (``drain``)                          end its turns
  pod asked, openrl.io/drained on it,    its old pod goes         the pod's delete
    or alone on its claim, or the
    time-slicer silent ``drain_timeout``
  no pod, still on the old claim's list  its old seat given back  the claim's booked list
    (``old_seat_back``)
  no pod, off the old claim              the seat stage resumes   the pod on the new claim
                                         it on the new claim      (``moved``: Placed, naming
                                         (``seating.held_claim``)  both claims)
  pod on the new claim                   done: the ``own pod``
                                         stage says
  new claim gone before the ask          the move is dropped:     none (the status's
                                         it stays where it is     ``move`` goes)

Rules:

* Only under ``spread``, and only a worker that joined the claim it shares
  moves: the claim is named for the worker that cut it (``claim_name``), so
  its cutter stays and the joiner takes a claim of its own name.
* Waiting workers come first: no move is decided while any worker waits for
  a seat (or is between the two pods of a move): one move at a time.
* The new seat is held before the old one is given back: the new claim is
  cut (and assumed) when the move is decided, the old join is taken off only
  once the old pod is gone, and the new pod made only after that.
* The time-slicer's word is the turn's boundary: the pod is asked to drain,
  and goes once the agent says the worker parked, at once if it shares its
  claim with nobody now, and after ``drain_timeout`` at most.
* Moves count against the same limit as the moves a lost node forces
  (``status.moves``), and for efficiency at most once an hour each.
* The pass's records of free devices are sampled each pass and kept in
  memory: after a restart the clocks start again, so a move comes at most
  ``rebalance_after`` later than it would have.
* A claim named for a worker that holds a pod on another claim, with no
  move under way and nobody on it, is what a move left before its status was
  written: it is deleted (``drain``, before the ``own pod`` stage).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

import attrs

from controller.fleet.claims import booked_uids, build_claim
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
from controller.settings import Settings
from placement.decide import NewClaim, best_pool
from placement.fleet import Fleet
from placement.model import per_device_share
from placement.policy import Strategy
from placement.rebalance import FreeSince, Move, MoveLimit, MoveReason, Shape, spread_move

__all__ = ["APART", "Rebalancer", "drain", "moved", "moving_to", "old_seat_back", "outlook"]

APART = 3600.0  # seconds between two moves of one worker for efficiency
# The pending kinds that hold moves back: a worker that could take a seat, or one moving.
_HOLDS_MOVES = frozenset({"", ReasonKind.WAITING_FOR_CAPACITY, ReasonKind.NODE_LOST,
                          ReasonKind.NODE_NOT_READY, ReasonKind.POD_WEDGED, ReasonKind.MOVING})


def moving_to(worker: Worker) -> Obj | None:
    """The move for efficiency under way (``status.move``), or None."""
    move = worker.status.get("move")
    return move if isinstance(move, dict) and move.get("to") and move.get("from") else None


def _describe(move: Obj) -> str:
    return (f"from claim {move['from']} on node {move.get('fromNode') or '(unknown)'} to "
            f"claim {move['to']} on node {move.get('node') or '(unknown)'}")


# ------------------------------------------------------------------ the pass


class Rebalancer:
    """The timed pass: the free devices' clocks, and at most one move per pass."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.free = FreeSince()
        self.limit = MoveLimit(settings.move_limit, settings.move_window, APART)
        self.stranded = 0  # devices free while a movable worker shares, at the last pass

    @property
    def on(self) -> bool:
        return (self.settings.rebalance_after > 0
                and self.settings.policy.strategy is Strategy.SPREAD)

    def interval(self) -> float:
        """How often the pass runs: often enough to keep ``rebalance_after`` close."""
        return max(1.0, min(15.0, self.settings.rebalance_after / 4))

    def decide(self, ctx: Context, waiting: Iterable[str]) -> tuple[Worker, Conclusion] | None:
        """The move to start now, if one is due. Called under the cache's lock (the
        stages' rule): what it cuts is assumed before the lock goes. ``waiting``: the
        reason kinds of the pending workers."""
        view, now = ctx.cache.view, ctx.now.timestamp()
        fleet = view.fleet
        present = set()
        for node in fleet.nodes:
            present.add(node.name)
            self.free.observe(node.name, fleet.free_devices(node.name), now)
        for gone in [n for n, _ in self.free.free_nodes() if n not in present]:
            self.free.forget(gone)
        sharing, workers, busy = self._sharing(ctx)
        self.stranded = sum(n for _, n in self.free.free_nodes()) if workers else 0
        if busy or any(kind in _HOLDS_MOVES for kind in waiting):
            return None
        requests = {name: w.request for name, w in workers.items()}
        found = spread_move(fleet, sharing, requests, self.free, now=now,
                            after=self.settings.rebalance_after,
                            may_move=lambda name: self.limit.allows(
                                _move_times(workers[name]), now),
                            age=lambda name: int(workers[name].created.timestamp() * 1000))
        if not isinstance(found, Move):
            return None
        worker = workers[found.worker]
        return worker, self._start(ctx, worker, found)

    def _sharing(self, ctx: Context) -> tuple[dict[Shape, list[str]], dict[str, Worker], bool]:
        """The movable workers on shared claims that may move now, by shape; and whether
        a move is under way already."""
        view = ctx.cache.view
        sharing: dict[Shape, list[str]] = {}
        workers: dict[str, Worker] = {}
        busy = False
        for claim in view.fleet.claims:
            if not claim.allocated or len(claim.bookings) < 2:
                continue
            for booking in claim.bookings:
                obj = ctx.cache.get(kube.WORKERS, booking.worker)
                if obj is None:
                    continue
                worker = Worker.from_obj(obj)
                if moving_to(worker) is not None:
                    busy = True
                    continue
                if not (worker.movable and not worker.spec_error and not worker.deleting
                        and worker.phase == WorkerPhase.RUNNING
                        and claim.name != worker.own_claim
                        and worker.own_claim not in view.claims
                        and worker.own_claim not in view.closing):
                    continue
                pod = ctx.cache.get(kube.PODS, worker.pod_name)
                if pod is None or is_deleting(pod) or pod_claim(pod) != claim.name:
                    continue
                request = worker.request
                sharing.setdefault((request.role, request.memory), []).append(worker.name)
                workers[worker.name] = worker
        return sharing, workers, busy

    def _start(self, ctx: Context, worker: Worker, move: Move) -> Conclusion:
        """The move's first writes: the new claim, then the status naming both claims."""
        seat = move.seat
        assert isinstance(seat, NewClaim)  # spread moves to devices of its own
        body = build_claim(worker.own_claim, seat, namespace=ctx.namespace,
                           device_class=ctx.settings.device_class,
                           driver=ctx.settings.device_driver, worker=worker.name,
                           worker_uid=worker.uid)
        record = {"from": move.claim, "fromNode": move.node, "to": worker.own_claim,
                  "node": seat.node, "reason": str(move.reason), "at": format_time(ctx.now)}
        kept = [m for m in worker.status.get("moves") or [] if isinstance(m, dict)]
        entry = {"at": record["at"], "reason": str(move.reason), "node": move.node,
                 "claim": move.claim}
        devices = worker.status.get("deviceCount")
        return Conclusion(Outcome(
            WorkerPhase.RUNNING, ReasonKind.MOVING,
            f"moving {_describe(record)}: {_WHY[move.reason]} (1/{move.round} of the turns "
            "here); its turn ends first", claim=move.claim, devices=devices,
            memory_per_device=per_device_share(worker.memory, devices) if devices else None,
            node=str(worker.status.get("nodeName") or ""), pod=worker.pod_name,
            moves=tuple([*kept, entry][-(ctx.settings.move_limit + 1):]), move=record),
            (Write("create", kube.CLAIMS, worker.own_claim, body, assumed=True),),
            requeue_after=1.0)


_WHY: dict[str, str] = {MoveReason.OWN_DEVICES: "devices of its own have stayed free",
                        MoveReason.EMPTIES_NODE: "it empties its node"}


def _move_times(worker: Worker) -> list[float]:
    times = [parse_time(str(m.get("at") or "")) for m in worker.status.get("moves") or []
             if isinstance(m, dict)]
    return sorted(t.timestamp() for t in times if t is not None)


# ------------------------------------------------------------------ the steps


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
        return Outcome(phase, ReasonKind.MOVING, f"moving {_describe(move)}: {now}",
                       claim=str(move["from"]), devices=devices,
                       memory_per_device=per_device_share(worker.memory, devices)
                       if devices else None, node=str(worker.status.get("nodeName") or ""),
                       pod=name_of(pod), move=move)
    return state


def _stray(ctx: Context, worker: Worker, claim: str) -> Conclusion | None:
    """Delete the worker's own claim when its pod is on another claim, no move is under
    way and nobody sits on it (a move whose status was never written left it)."""
    own = worker.own_claim
    view = ctx.cache.view.claims.get(own)
    if claim == own or view is None or view.allocated or view.reserved:
        return None
    booked = ctx.cache.view.fleet.claim(own)
    obj = ctx.cache.get(kube.CLAIMS, own)
    if (booked is not None and booked.bookings) or obj is None:
        return None
    return Conclusion(None, (Write("delete", kube.CLAIMS, own, {}, uid=uid_of(obj)),),
                      requeue_after=1.0, wake=True)


def old_seat_back(ctx: Context, case: Case) -> Conclusion | None:
    """A moving worker whose old pod is gone: take it off the old claim's booked list.
    None once it is off: the seat stage resumes it on its new claim."""
    worker = case.worker
    move = moving_to(worker)
    if move is None:
        return None
    old = str(move["from"])
    obj = ctx.cache.get(kube.CLAIMS, old)
    if obj is None or old == worker.own_claim:
        return None
    uids = booked_uids(obj)
    if worker.uid not in uids:
        return None
    body = {"metadata": {
        "resourceVersion": (obj.get("metadata") or {}).get("resourceVersion"),
        "annotations": {naming.ANNOTATION_BOOKED: ",".join(u for u in uids if u != worker.uid)
                        or None}}}
    return Conclusion(Outcome(
        WorkerPhase.PENDING, ReasonKind.MOVING,
        f"moving {_describe(move)}: its old pod is gone, its seat on claim {old} is given "
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
    why = _WHY.get(str(move.get("reason") or ""), "moved for efficiency")
    return attrs.evolve(done, outcome=attrs.evolve(
        outcome, detail=f"moved {_describe(move)}: {why}", move=None))


# ------------------------------------------------------------------ explain


def outlook(worker: Worker, fleet: Fleet, *, claim: str, own_claim_taken: bool,
            now: dt.datetime, after: float, strategy: Strategy,
            limit: MoveLimit) -> str:
    """Whether and where a seated worker would move for efficiency, in one line, as the
    pass would see it (``explain``). The free devices' clock is the scheduler's own: this
    says where, and how long devices must stay free, not since when they have been."""
    move = moving_to(worker)
    if move is not None:
        return f"moving {_describe(move)} (decided {move.get('at', '?')})"
    if after <= 0:
        return "moves for efficiency are off (--rebalance-after 0)"
    if strategy is not Strategy.SPREAD:
        return "the scheduler moves workers for efficiency under spread only"
    if not worker.movable:
        return "stays: not movable (spec.movable is false)"
    booked = fleet.claim(claim)
    if booked is None or len(booked.bookings) < 2:
        return "stays: nobody shares its claim"
    if claim == worker.own_claim or own_claim_taken:
        return ("stays: the claim is named for it; a movable worker that joined it moves "
                "instead")
    times = _move_times(worker)
    stamp = now.timestamp()
    if not limit.allows(times, stamp):
        return ("stays for now: moved within the last hour, or too often within the move "
                "window")
    pool = best_pool(worker.request, fleet)
    if pool is None:
        return "stays for now: no node has free devices it would take as a newcomer"
    node, devices, _ = pool
    return (f"would move to {devices} device(s) of its own on node {node} once they have "
            f"stayed free {after:.0f}s and no worker waits for a seat")
