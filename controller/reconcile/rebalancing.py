"""Moves for efficiency: the timed pass that decides one, and what explain says of it.

The rule is placement's (``placement.rebalance``: who moves, where, when);
this module applies it to the cache's fleet. A timed pass (the ``REBALANCE``
queue key, so never beside a reconcile) keeps the rule's records of time
and, when a move is due, makes its first writes; the worker's own reconciles
carry it on (``moving.py``, its table):

  strategy  who moves (the rule's, and)       its first writes
  --------  --------------------------------  ----------------------------------------
  spread    a movable worker on a claim it    a claim of its own cut on the devices it
            shares, one of its two claim      would get as a newcomer (assumed), then
            names free (``claim_to_cut``: a   the status: Moving, ``move`` naming both
            worker moving off the claim cut   claims and nodes
            for it leaves that one to the
            others and cuts the other name)
  binpack   a movable worker alone on its      a join: committed on the claim it moves
            node, autoscaling on (an emptied   to (the claim's booked list); a new
            node is the autoscaler's to        claim: cut as above, under its other
            remove)                            name; then the status as above

Rules:

* Waiting workers come first: no move is made while a waiting worker could be
  seated now (its reconcile is on its way), while one is not answered yet or
  between two seats (a lost node, a wedged pod, a move), and one move at a
  time. A worker waiting for capacity the fleet lacks does not hold moves
  back: it could not take what a move takes (the simulator's rule too, which
  retries its waiting workers after every change).
* The new seat is held before the old one is given back: cut or committed
  when the move is decided, the old one released only once the old pod is
  gone (``moving.py``).
* Moves count against the same limit as the moves a lost node forces
  (``status.moves``), and for efficiency at most once an hour each
  (``APART``).
* The records of time (free devices, lone nodes) are sampled each pass and
  kept in memory: after a restart the clocks start again, so a move comes at
  most ``rebalance_after`` later than it would have.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping

from controller.fleet.claims import build_claim, commit_join
from controller.k8s import kube
from controller.k8s.naming import ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Worker,
    format_time,
    is_deleting,
    parse_time,
    pod_claim,
)
from controller.reconcile.moving import WHY, describe, moving_to
from controller.reconcile.vocabulary import Conclusion, Context, Outcome, Write, claim_to_cut
from controller.settings import Settings
from controller.store.work import Waiting
from placement.decide import NewClaim, best_pool, find_seat
from placement.fleet import Fleet
from placement.model import Request, Role, per_device_share
from placement.policy import Strategy
from placement.rebalance import (
    AloneSince,
    FreeSince,
    Move,
    MoveLimit,
    MoveReason,
    Shape,
    pack_move,
    shape_of,
    spread_move,
)

__all__ = ["APART", "Rebalancer", "moves_on", "outlook", "pass_interval"]

APART = 3600.0  # seconds between two moves of one worker for efficiency
# The pending kinds that hold moves back whatever the fleet: a worker not answered yet,
# one between two seats (lost node, wedged pod, a device conflict, a move). A worker
# waiting for capacity holds them only while the fleet could seat it now (its reconcile
# is on its way).
_HOLDS_MOVES = frozenset({"", ReasonKind.NODE_LOST, ReasonKind.NODE_NOT_READY,
                          ReasonKind.POD_WEDGED, ReasonKind.DEVICE_CONFLICT,
                          ReasonKind.MOVING})


# ------------------------------------------------------------------ the pass


def moves_on(settings: Settings) -> bool:
    """Moves are on: spread, or binpack where an autoscaler may remove emptied nodes."""
    return settings.rebalance_after > 0 and (
        settings.policy.strategy is Strategy.SPREAD or settings.autoscaling)


def pass_interval(settings: Settings) -> float:
    """How often the pass runs: often enough to keep ``rebalance_after`` close."""
    return max(1.0, min(15.0, settings.rebalance_after / 4))


class Rebalancer:
    """The timed pass: the free devices' clocks, and at most one move per pass."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.free = FreeSince()
        self.alone = AloneSince()
        self.limit = MoveLimit(settings.move_limit, settings.move_window, APART)
        self.stranded = 0  # devices free while a movable worker shares, at the last pass

    @property
    def on(self) -> bool:
        return moves_on(self.settings)

    def interval(self) -> float:
        return pass_interval(self.settings)

    def decide(self, ctx: Context,
               waiting: Iterable[Waiting]) -> tuple[Worker, Conclusion] | None:
        """The move to start now, if one is due. Called under the cache's lock (the
        stages' rule): what it cuts is assumed before the lock goes. ``waiting``: the
        pending workers."""
        if self.settings.policy.strategy is not Strategy.SPREAD:
            return self._pack(ctx, waiting)
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
        if busy:
            return None
        requests = {name: w.request for name, w in workers.items()}
        found = spread_move(fleet, sharing, requests, self.free, now=now,
                            after=self.settings.rebalance_after,
                            may_move=lambda name: self.limit.allows(
                                _move_times(workers[name]), now),
                            age=lambda name: int(workers[name].created.timestamp() * 1000))
        if not isinstance(found, Move) or _held(ctx, waiting):
            return None
        worker = workers[found.worker]
        return worker, self._start(ctx, worker, found)

    def _pack(self, ctx: Context,
              waiting: Iterable[Waiting]) -> tuple[Worker, Conclusion] | None:
        """Binpack: a movable worker alone on its node for ``rebalance_after`` joins a
        claim on another node that holds workers, so its node empties."""
        fleet, now = ctx.cache.view.fleet, ctx.now.timestamp()
        present = set()
        for node in fleet.nodes:
            present.add(node.name)
            self.alone.observe(node.name, fleet.workers_on_node(node.name), now)
        for gone in [n for n, _ in self.alone.nodes() if n not in present]:
            self.alone.observe(gone, 0, now)
        workers = _Workers(ctx)
        found = pack_move(fleet, self.alone, workers, ctx.settings.policy, now=now,
                          after=self.settings.rebalance_after, removable=lambda _: True,
                          may_move=lambda name: workers.may_move(name, self.limit, now))
        if not isinstance(found, Move) or _held(ctx, waiting):
            return None
        worker = workers.worker(found.worker)
        assert worker is not None  # may_move read it
        if isinstance(found.seat, NewClaim) and claim_to_cut(ctx.cache.view, worker) is None:
            return None  # both its names taken: it stays
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
                # Most workers are not movable: read that off the object before the
                # worker is parsed (the pass walks every shared claim).
                move = (obj.get("status") or {}).get("move")
                if isinstance(move, dict) and move.get("to"):
                    busy = True
                    continue
                if (obj.get("spec") or {}).get("movable") is not True:
                    continue
                worker = Worker.from_obj(obj)
                if not (worker.movable and not worker.spec_error and not worker.deleting
                        and worker.phase == WorkerPhase.RUNNING
                        and claim_to_cut(view, worker) is not None):
                    continue
                pod = ctx.cache.get(kube.PODS, worker.pod_name)
                if pod is None or is_deleting(pod) or pod_claim(pod) != claim.name:
                    continue
                request = worker.request
                sharing.setdefault(shape_of(request), []).append(worker.name)
                workers[worker.name] = worker
        return sharing, workers, busy

    def _start(self, ctx: Context, worker: Worker, move: Move) -> Conclusion:
        """The move's first writes: the new claim, then the status naming both claims."""
        seat = move.seat
        if isinstance(seat, NewClaim):  # devices of its own, a claim of its name
            to = claim_to_cut(ctx.cache.view, worker)
            assert to is not None  # the callers checked
            body = build_claim(to, seat, namespace=ctx.namespace,
                               device_class=ctx.settings.device_class,
                               driver=ctx.settings.device_driver, worker=worker.name,
                               worker_uid=worker.uid)
            hold = Write("create", kube.CLAIMS, to, body, assumed=True)
        else:  # binpack: a join, committed on the claim's booked list now
            to = seat.claim
            claim = ctx.cache.get(kube.CLAIMS, to)
            assert claim is not None  # the fleet read it
            hold = Write("patch", kube.CLAIMS, to,
                         commit_join(claim, worker.uid, ctx.cache.view.live_uid))
        record = {"from": move.claim, "fromNode": move.node, "to": to,
                  "node": seat.node, "reason": str(move.reason), "at": format_time(ctx.now)}
        kept = [m for m in worker.status.get("moves") or [] if isinstance(m, dict)]
        entry = {"at": record["at"], "reason": str(move.reason), "node": move.node,
                 "claim": move.claim}
        devices = worker.status.get("deviceCount")
        return Conclusion(Outcome(
            WorkerPhase.RUNNING, ReasonKind.MOVING,
            f"moving {describe(record)}: {WHY[move.reason]}"
            + (f" (1/{move.round} of the turns here); its turn ends first"
               if move.reason is MoveReason.OWN_DEVICES else ""), claim=move.claim, devices=devices,
            memory_per_device=per_device_share(worker.memory, devices) if devices else None,
            node=str(worker.status.get("nodeName") or ""), pod=worker.pod_name,
            moves=tuple([*kept, entry][-(ctx.settings.move_limit + 1):]), move=record),
            (hold,), requeue_after=1.0)


def _held(ctx: Context, waiting: Iterable[Waiting]) -> bool:
    """Whether a pending worker holds the move back: one between seats or not answered
    yet, or one waiting for capacity that the fleet could seat now. Asked only once a
    move is found (seldom), and of each shape once."""
    fleet, policy = ctx.cache.view.fleet, ctx.settings.policy
    asked: dict[tuple[object, ...], bool] = {}
    for pending in waiting:
        if pending.reason in _HOLDS_MOVES:
            return True
        if pending.reason != ReasonKind.WAITING_FOR_CAPACITY:
            continue
        obj = ctx.cache.get(kube.WORKERS, pending.key)
        if obj is None:
            continue
        worker = Worker.from_obj(obj)
        if worker.spec_error:
            continue
        request = worker.request
        shape = (request.role, request.memory, request.owner, request.exclusive,
                 request.devices)
        if shape not in asked:
            asked[shape] = find_seat(request, fleet, policy) is not None
        if asked[shape]:
            return True
    return False


class _Workers(Mapping[str, Request]):
    """The workers the binpack rule asks about, read from the cache as it asks (a lone
    node's one worker each): their requests, and whether each may move now."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._read: dict[str, Worker | None] = {}

    def worker(self, name: str) -> Worker | None:
        if name not in self._read:
            obj = self._ctx.cache.get(kube.WORKERS, name)
            self._read[name] = Worker.from_obj(obj) if obj is not None else None
        return self._read[name]

    def __getitem__(self, name: str) -> Request:
        worker = self.worker(name)
        # A pod whose worker is gone holds its seat, and is never moved.
        return worker.request if worker is not None else Request(name, Role.TRAINER, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._read)

    def __len__(self) -> int:
        return len(self._read)

    def may_move(self, name: str, limit: MoveLimit, now: float) -> bool:
        worker = self.worker(name)
        if worker is None or moving_to(worker) is not None or not worker.movable \
                or worker.spec_error or worker.deleting or worker.phase != WorkerPhase.RUNNING:
            return False
        pod = self._ctx.cache.get(kube.PODS, worker.pod_name)
        return (pod is not None and not is_deleting(pod) and bool(pod_claim(pod))
                and limit.allows(_move_times(worker), now))


def _move_times(worker: Worker) -> list[float]:
    times = [parse_time(str(m.get("at") or "")) for m in worker.status.get("moves") or []
             if isinstance(m, dict)]
    return sorted(t.timestamp() for t in times if t is not None)


# ------------------------------------------------------------------ explain


def outlook(worker: Worker, fleet: Fleet, *, claim: str, names_taken: bool,
            now: dt.datetime, after: float, strategy: Strategy,
            limit: MoveLimit) -> str:
    """Whether and where a seated worker would move for efficiency, in one line, as the
    pass would see it (``explain``). The free devices' clock is the scheduler's own: this
    says where, and how long devices must stay free, not since when they have been."""
    move = moving_to(worker)
    if move is not None:
        return f"moving {describe(move)} (decided {move.get('at', '?')})"
    if after <= 0:
        return "moves for efficiency are off (--rebalance-after 0)"
    if strategy is not Strategy.SPREAD:
        return ("under binpack a worker moves for efficiency only alone on its node, with "
                "autoscaling on, to empty that node")
    if not worker.movable:
        return "stays: not movable (spec.movable is false)"
    booked = fleet.claim(claim)
    if booked is None or len(booked.bookings) < 2:
        return "stays: nobody shares its claim"
    if names_taken:
        return ("stays: both names a claim of its own may bear are taken (others hold the "
                "claims cut for it)")
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
