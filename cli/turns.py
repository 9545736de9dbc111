"""A replay's shared claims, their turns played: what sharing costs each worker.

The replay's log (``cli.eventlog``) says who sat on which claim when;
``placement.turns.play`` drives the very policy the node agent runs
(``placement.turns``) over it.
What this adds is the reading:

* A worker's resident share is its resident seconds over the seconds it sat
  on a shared claim; an owner's is the same summed over its workers.
* A wait for a turn runs from wanting it (or parking while still wanting it)
  to the grant; the typical wait is the median of every wait, the longest the
  largest.
* A claim's switching share is its seconds spent parking or restoring over
  the seconds it had workers (from the first to the last).
* A worker's served share is the seconds it was resident while it wanted the
  turn over the seconds it wanted it (None if it never did); an owner's sums
  its workers'. Being resident is not enough: a holder keeps the turn while
  nobody waits, even when it no longer wants it.
* A claim's useful busy share is the seconds a resident member wanted the
  turn over the claim's seconds with workers: switches, and a holder kept
  resident wanting nothing, are busy but not useful.
* An owner's waits are its workers' waits together: its median is that of
  every wait of its workers (what a job's members waited for a turn).
* A node's own ``turns`` play on its claims instead of the scenario's
  settings (key by key); its switches cost what the log's link for it says
  (the same figure the report's shared-claims table prices them at).
* A moved worker (``MoveStep``) leaves its old claim at the move and joins
  its new one ``restart`` seconds later: meanwhile it is neither resident
  nor served, yet wants to run, so those seconds count as wanted and not
  served (a move's cost shows in its served share).
* Turns need a clock: a scenario whose events say no ``at`` gets a note, not
  an invented one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush

from cli.eventlog import (
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    EventLog,
    LeaveStep,
    MoveStep,
    NodeLink,
    RemoveNodeStep,
    walk,
)
from placement.simulator.simulation import Placement
from placement.turns import TurnSettings
from placement.turns.play import ClaimTurns, MemberTurns, TurnPlay

__all__ = ["NO_CLOCK", "OwnerTurns", "TurnSummary", "Turns", "WorkerTurns", "play_turns",
           "useful_share"]

NO_CLOCK = ("turns not played: they need a clock, and no event in this scenario says `at` "
            "(give the events times to see each worker's resident share and waits)")


@dataclass(frozen=True, slots=True)
class WorkerTurns:
    worker: str
    owner: str
    claim: str
    stayed: float  # seconds on shared claims
    resident: float
    turns: int
    evictions: int
    longest_wait: float
    median_wait: float
    wanting: float = 0.0  # seconds it wanted the turn
    served: float = 0.0  # seconds resident while it wanted the turn
    restarting: float = 0.0  # seconds its moves cost it: wanted, not served
    alone: float = 0.0  # seconds it wanted to run alone on a claim no one shared

    @property
    def share(self) -> float:
        return self.resident / self.stayed if self.stayed > 0 else 0.0

    @property
    def served_share(self) -> float | None:
        return _share(self.served, self.wanting)

    @property
    def placed_share(self) -> float | None:
        """Served over wanted through its whole stay: alone it is served, restarting not."""
        return _share(self.served + self.alone, self.wanting + self.alone + self.restarting)


@dataclass(frozen=True, slots=True)
class OwnerTurns:
    owner: str
    workers: int
    stayed: float
    resident: float
    wanting: float = 0.0
    served: float = 0.0
    median_wait: float = 0.0  # of every wait of its workers
    longest_wait: float = 0.0

    @property
    def share(self) -> float:
        return self.resident / self.stayed if self.stayed > 0 else 0.0

    @property
    def served_share(self) -> float | None:
        return _share(self.served, self.wanting)


def useful_share(claim: ClaimTurns, end: float) -> float:
    """A claim's useful busy share: a resident member wanting the turn, over its span."""
    span = claim.span(end)
    return claim.useful / span if span > 0 else 0.0


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One replay's turns in a row: what ``compare`` prints per variant."""

    claims: int
    switches: int
    switching_share: float  # of all shared claims' time
    median_wait: float
    longest_wait: float
    served_share: float | None = None  # every worker's served over wanted; None: none wanted
    useful_share: float = 0.0  # every shared claim's useful seconds over their seconds


@dataclass(frozen=True, slots=True)
class Turns:
    settings: TurnSettings
    note: str | None  # why nothing was played; None when played
    end: float
    claims: tuple[ClaimTurns, ...]  # busiest (most switches) first
    workers: tuple[WorkerTurns, ...]  # by worker name
    owners: tuple[OwnerTurns, ...]  # by owner name
    waits: tuple[tuple[float, int], ...]  # every wait and how many times it was waited, sorted
    nodes: tuple[tuple[str, TurnSettings], ...] = ()  # nodes with their own settings, by name

    def summary(self) -> TurnSummary:
        span = sum(claim.span(self.end) for claim in self.claims)
        switching = sum(claim.switching for claim in self.claims)
        useful = sum(claim.useful for claim in self.claims)
        return TurnSummary(len(self.claims), sum(c.switches for c in self.claims),
                           switching / span if span > 0 else 0.0, _median(self.waits),
                           self.waits[-1][0] if self.waits else 0.0,
                           _share(sum(w.served for w in self.workers),
                                  sum(w.wanting for w in self.workers)),
                           useful / span if span > 0 else 0.0)


def play_turns(log: EventLog, *, keep: frozenset[str] = frozenset(),
               only: frozenset[str] | None = None, compress: bool = True) -> Turns:
    """Every shared claim of the replay's log, played under its settings; ``keep``: claims
    whose intervals to record; ``only``: the claims to play (each claim's turns are its
    own, so playing some leaves theirs exactly as they were), or None for every one;
    ``compress=False``: every switch played, no cycle counted (the tests' reference)."""
    if log.settings is None:
        raise ValueError("the scenario sets no turns to play")
    settings = log.settings
    if log.times is None:
        return Turns(settings, NO_CLOCK, 0.0, (), (), (), ())
    seats = _Seats(TurnPlay(settings, keep=keep, compress=compress), log.nodes, only)
    seats.track_alone = any(step.__class__ is MoveStep for step in log.steps)
    walk(log, seats)
    end = log.times[-1] if log.times else 0.0
    seats.finish(end)
    seats.play.end(end)
    own = tuple((name, link.turns) for name, link in sorted(seats.links.items())
                if link.turns is not None)
    return _read(settings, end, seats.play, own, seats.restarting, seats.alone)


class _Seats:
    """The log read for turns: who sits on which allocated claim, when (``cli.eventlog``'s
    reader)."""

    def __init__(self, play: TurnPlay, nodes: Sequence[NodeLink],
                 only: frozenset[str] | None) -> None:
        self.play = play
        self.only = only
        self.links = {link.name: link for link in nodes}
        self.arrivals: dict[str, ArriveStep] = {}
        self.seated: dict[str, str] = {}  # worker -> claim, once allocated
        self.placing: dict[str, list[str]] = {}  # unallocated claim -> its workers
        self.moving: dict[str, float] = {}  # a moved worker -> when its restart ends
        self.joins: list[tuple[float, str, str, str]] = []  # (at, worker, claim, node) held
        self.restarting: dict[str, float] = {}  # worker -> seconds spent restarting
        self.alone: dict[str, float] = {}  # worker -> seconds wanted alone on a lone claim
        # Kept only for a log with moves (``track_alone``): claim -> (its one worker, since
        # when), while no second worker has sat on it; and the claims that had two.
        self.track_alone = False
        self.lone: dict[str, tuple[str, float]] = {}
        self.shared: set[str] = set()

    def arrive(self, step: ArriveStep, at: float) -> None:
        self.arrivals[step.worker] = step

    def move(self, step: MoveStep, at: float) -> None:
        self.restarted(at)
        self.moving[step.worker] = at + step.restart

    def restarted(self, at: float) -> None:
        """Every held join due by ``at`` played, at its own time."""
        joins = self.joins
        while joins and joins[0][0] <= at:
            due, worker, claim, node = heappop(joins)
            self._join(worker, claim, node, due)

    def leave(self, step: LeaveStep, at: float) -> None:
        self.restarted(at)
        if step.worker in self.moving:  # leaving while it restarts: the restart ends here
            ends = self.moving.pop(step.worker)
            self._restarting(step.worker, at - (ends - self.arrivals[step.worker].restart))
            self.joins = [join for join in self.joins if join[1] != step.worker]
            heapify(self.joins)
            return
        claim = self.seated.pop(step.worker, None)
        if claim is not None:
            if self.track_alone:
                self._alone_until(claim, at)
            self.play.leave(claim, step.worker, at)
        elif step.claim is not None and step.claim in self.placing:
            self.placing[step.claim].remove(step.worker)

    def allocate(self, step: AllocateStep, at: float) -> None:
        for worker in self.placing.pop(step.claim, ()):
            self._join(worker, step.claim, step.node, at)

    def add_node(self, step: AddNodeStep, at: float) -> None:
        self.links[step.node] = step.link

    def remove_node(self, step: RemoveNodeStep, at: float) -> None:
        pass  # the autoscaler removes only a node holding no claim: no turns end here

    def seat(self, seat: Placement, at: float) -> None:
        self.restarted(at)
        ends = self.moving.get(seat.worker)
        if ends is not None and ends > at:  # a move's seat: taken once it has restarted
            heappush(self.joins, (ends, seat.worker, seat.claim, seat.node))
            return
        if seat.allocated:
            self._join(seat.worker, seat.claim, seat.node, at)
        else:
            self.placing.setdefault(seat.claim, []).append(seat.worker)

    def stepped(self, at: float) -> None:
        pass

    def _restarting(self, worker: str, seconds: float) -> None:
        self.restarting[worker] = self.restarting.get(worker, 0.0) + max(0.0, seconds)

    def _alone_until(self, claim: str, at: float) -> None:
        """A claim no one shared loses its worker (or the run ends): its time alone."""
        found = self.lone.pop(claim, None)
        if found is not None:
            worker, since = found
            wanted = _wanted(self.arrivals[worker].demand, since, at)
            self.alone[worker] = self.alone.get(worker, 0.0) + wanted

    def finish(self, end: float) -> None:
        """The run is over at ``end``: held joins played, restarts and lone stays counted."""
        self.restarted(end)
        for worker, ends in self.moving.items():
            self._restarting(worker, end - (ends - self.arrivals[worker].restart))
        for claim in list(self.lone):
            self._alone_until(claim, end)

    def _join(self, worker: str, claim: str, node: str, at: float) -> None:
        ends = self.moving.pop(worker, None)
        if ends is not None:
            self._restarting(worker, self.arrivals[worker].restart)
        if self.only is not None and claim not in self.only:
            return
        if self.track_alone and claim not in self.shared:
            if claim in self.lone:  # a second worker: the play counts the first from its seat
                del self.lone[claim]
                self.shared.add(claim)
            else:
                self.lone[claim] = (worker, at)
        arrival = self.arrivals[worker]
        self.seated[worker] = claim
        link = self.links[node]
        self.play.join(claim, node, link.bandwidth, worker, arrival.owner, arrival.memory,
                       arrival.demand, at, link.turns)


def _read(settings: TurnSettings, end: float, play: TurnPlay,
          nodes: tuple[tuple[str, TurnSettings], ...],
          restarting: dict[str, float], alone: dict[str, float]) -> Turns:
    by_worker: dict[str, list[MemberTurns]] = {}
    for member in play.members:
        by_worker.setdefault(member.worker, []).append(member)
    workers = []
    waits: dict[float, int] = {}
    owner_waits: dict[str, dict[float, int]] = {}
    for name in sorted(by_worker):
        stays = by_worker[name]
        if len(stays) == 1:  # nearly every worker: its stay's waits are its own
            counted = stays[0].waits
        else:
            counted = {}
            for stay in stays:
                for wait, times in stay.waits.items():
                    counted[wait] = counted.get(wait, 0) + times
        last = stays[-1]
        theirs = owner_waits.setdefault(last.owner, {})
        for wait, times in counted.items():
            waits[wait] = waits.get(wait, 0) + times
            theirs[wait] = theirs.get(wait, 0) + times
        mine = sorted(counted.items())
        figures = ((last.stayed(end), last.resident, last.turns, last.evictions)
                   if len(stays) == 1 else
                   (sum(s.stayed(end) for s in stays), sum(s.resident for s in stays),
                    sum(s.turns for s in stays), sum(s.evictions for s in stays)))
        workers.append(WorkerTurns(name, last.owner, last.claim, *figures,
                                   mine[-1][0] if mine else 0.0, _median(mine),
                                   sum(s.wanting for s in stays), sum(s.served for s in stays),
                                   restarting.get(name, 0.0), alone.get(name, 0.0)))
    owners: dict[str, list[WorkerTurns]] = {}
    for worker in workers:
        owners.setdefault(worker.owner, []).append(worker)
    ordered = {owner: sorted(owner_waits.get(owner, {}).items()) for owner in owners}
    claims = sorted(play.claims.values(), key=lambda c: (-c.switches, c.claim))
    return Turns(settings, None, end, tuple(claims), tuple(workers),
                 tuple(OwnerTurns(owner, len(ws), sum(w.stayed for w in ws),
                                  sum(w.resident for w in ws), sum(w.wanting for w in ws),
                                  sum(w.served for w in ws), _median(ordered[owner]),
                                  ordered[owner][-1][0] if ordered[owner] else 0.0)
                       for owner, ws in sorted(owners.items())),
                 tuple(sorted(waits.items())), nodes)


def _wanted(demand: tuple[tuple[float, float], ...] | None, start: float, end: float) -> float:
    """Seconds of [start, end] a worker with this demand wanted to run."""
    if demand is None:
        return max(0.0, end - start)
    return sum(max(0.0, min(end, to) - max(start, since)) for since, to in demand)


def _median(counted: Sequence[tuple[float, int]]) -> float:
    """Of waits in order, each with how many times it was waited."""
    # Nearest rank, as the placement waits: a wait some worker really had.
    rank = max(0, math.ceil(0.5 * sum(times for _, times in counted)) - 1)
    for wait, times in counted:
        if rank < times:
            return wait
        rank -= times
    return 0.0
