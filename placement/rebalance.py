"""Moves: when a placed worker is worth stopping and starting again elsewhere.

A placement is right when it is made; over a day departures leave devices
free while workers still take turns (``spread``), or lone workers keep a
node alive that their neighbours' claims could absorb (``binpack``). Only
a worker marked ``movable`` (``Request.movable``) is ever moved for that;
a lost node moves any worker, by another rule (the simulation's).

The rule, read from the strategy:

    strategy  who may move            where to                 when
    --------  ----------------------  -----------------------  -----------------------------
    spread    a movable worker on a   the devices it would     those devices have been free
              claim it shares (2 or   get as a newcomer        for ``after`` seconds
              more workers)           (``best_pool``): a       (``FreeSince``) and it has
                                      claim of its own         moves left
    binpack   a movable worker alone  a seat on another node   its node has held it alone
              on a node the caller    that holds workers (the  for ``after`` seconds
              may empty (an           strategy's own steps:    (``AloneSince``) and it has
              autoscaled one)         join first)              moves left

Which moves first, when several could (``SPREAD_RANKING``, ``PACK_RANKING``):

    spread   a worker that contends first: one whose claim-mates are all of
             its own owner in the other role (``pairs``: a job's trainer and
             sampler, placed together by owner affinity) hands the device to
             them at each phase and gains least; then the smallest share of
             turns now (the most contended claim, by ``turn_round``: owners
             on its claim x its owner's workers there), then the most workers
             on its claim, then the oldest (``age``), then the name
    binpack  the node alone longest, then the name

Rules every caller keeps (the simulator does; the controller must):

* Waiting workers come first: a move is asked for only when no waiting
  worker could take what it takes. (The simulation retries its waiting
  workers after every change, so between events none could.)
* A worker has at most ``limit`` moves in any ``window`` seconds, counted
  with the moves a lost node or a wedged pod forced, and moves for
  efficiency at most once in ``apart`` seconds (an hour): each move costs
  it a restart, and a worker joined again after a move should not pay one
  every time devices free (``MoveLimit``).
* A move holds its new seat before it gives the old one back: it never
  leaves a worker waiting that had a seat.
* One move at a time: after each, the fleet has changed, so ask again.

``after`` of 0 means moves are off. Nothing here reads a clock or the
cluster: the caller says ``now`` and keeps the two records of time
(``FreeSince``, ``AloneSince``) as the fleet changes.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from placement.decide import JoinClaim, NewClaim, best_pool, find_seat
from placement.fleet import Fleet
from placement.model import Request, Role, per_device_share
from placement.policy import Policy, pairs, turn_round

__all__ = [
    "PACK_RANKING",
    "SPREAD_RANKING",
    "AloneSince",
    "FreeSince",
    "Move",
    "MoveLimit",
    "MoveReason",
    "Shape",
    "pack_move",
    "shape_of",
    "spread_move",
]

SPREAD_RANKING = ("contends rather than pairs", "smallest share of turns now",
                  "most workers on its claim", "oldest", "name")
PACK_RANKING = ("alone on its node longest", "name")


class MoveReason(enum.StrEnum):
    OWN_DEVICES = "OwnDevices"  # spread: devices of its own, free long enough
    EMPTIES_NODE = "EmptiesNode"  # binpack: its node empties for the autoscaler to remove


@dataclass(frozen=True, slots=True)
class Move:
    """One worker to move now: from its claim on ``node`` to ``seat``."""

    worker: str
    claim: str  # the claim it leaves
    node: str  # the node it leaves
    seat: NewClaim | JoinClaim
    reason: MoveReason
    # spread: turns in one round per turn of its own on the claim it leaves (its share
    # is the inverse); binpack: 1
    round: int

    def describe(self) -> str:
        where = (f"a new claim of {self.seat.devices} device"
                 f"{'' if self.seat.devices == 1 else 's'} on {self.seat.node}"
                 if isinstance(self.seat, NewClaim) else
                 f"{self.seat.claim} on {self.seat.node}")
        if self.reason is MoveReason.OWN_DEVICES:
            return (f"from {self.claim} on {self.node} (1/{self.round} of the turns) to "
                    f"{where}: devices of its own were free")
        return f"from {self.claim} on {self.node} to {where}: it empties {self.node}"


# (role, memory, exact device count or None): what a newcomer's devices depend on
Shape = tuple[Role, int, int | None]


def shape_of(request: Request) -> Shape:
    """The request's ``Shape``: workers of one shape get one newcomer's pool."""
    return request.role, request.memory, request.devices


class FreeSince:
    """Since when each count of free devices has held on each node.

    ``level(node, k)`` is the time the node's free devices last rose to ``k``
    or more and have not dropped below since. A rise from ``a`` to ``b`` at
    ``t`` stamps the levels ``a+1..b`` with ``t``; a drop to ``c`` forgets
    the levels above ``c``; so each change costs what it changed.
    """

    __slots__ = ("_levels", "_oldest")

    def __init__(self) -> None:
        self._levels: dict[str, list[float]] = {}
        self._oldest: list[tuple[float, str]] = []  # (level 1's time, node), checked lazily

    def observe(self, node: str, free: int, now: float) -> bool:
        """The node has ``free`` devices at ``now``; True when a level rose."""
        levels = self._levels.get(node)
        if levels is None:
            if free <= 0:
                return False
            levels = self._levels[node] = []
        have = len(levels)
        if free > have:
            if not have:
                heapq.heappush(self._oldest, (now, node))
            levels.extend([now] * (free - have))
            return True
        if free < have:
            del levels[free:]
            if not levels:
                del self._levels[node]
        return False

    def forget(self, node: str) -> None:
        """The node left the fleet."""
        self._levels.pop(node, None)

    def level(self, node: str, count: int) -> float | None:
        """Since when ``node`` has had ``count`` devices free or more; None: it has not."""
        levels = self._levels.get(node)
        if levels is None or count > len(levels) or count < 1:
            return None
        return levels[count - 1]

    def oldest(self) -> float | None:
        """The earliest time any node's free devices have held since; None: none free."""
        heap, levels = self._oldest, self._levels
        while heap:
            at, node = heap[0]
            held = levels.get(node)
            if held is not None and held[0] == at:
                return at
            heapq.heappop(heap)
            if held is not None:  # still free, since a later rise: file it again
                heapq.heappush(heap, (held[0], node))
        return None

    def free_nodes(self) -> Iterable[tuple[str, int]]:
        """Every node with free devices, and how many."""
        return ((node, len(levels)) for node, levels in self._levels.items())


class AloneSince:
    """Since when each node has held exactly one worker (binpack's clock)."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def observe(self, node: str, workers: int, now: float) -> bool:
        """The node holds ``workers`` at ``now``; True when it just became alone."""
        if workers == 1:
            if node not in self._since:
                self._since[node] = now
                return True
            return False
        self._since.pop(node, None)
        return False

    def since(self, node: str) -> float | None:
        return self._since.get(node)

    def nodes(self) -> Iterable[tuple[str, float]]:
        return self._since.items()


@dataclass(frozen=True, slots=True)
class MoveLimit:
    """At most ``limit`` moves per worker in any ``window`` seconds, and ``apart``
    seconds at least between two of its moves for efficiency."""

    limit: int = 3
    window: float = 1800.0
    apart: float = 3600.0

    def allows(self, times: Sequence[float], now: float) -> bool:
        """``times``: its moves so far, oldest first."""
        if times and now - times[-1] < self.apart:
            return False
        return sum(1 for at in times if at > now - self.window) < self.limit


def spread_move(fleet: Fleet, sharing: Mapping[Shape, Iterable[str]],
                requests: Mapping[str, Request], free: FreeSince, *, now: float,
                after: float, may_move: Callable[[str], bool],
                age: Callable[[str], int]) -> Move | float | None:
    """Under spread: the move to make now, else when one may next be due (None: none).

    ``sharing``: the movable workers on shared claims, by shape (every worker of
    a shape gets the same newcomer's pool). ``may_move``: it has moves left.
    """
    if after <= 0:
        return None
    oldest = free.oldest()
    if oldest is None:
        return None
    if oldest > now - after:
        return oldest + after
    best: tuple[tuple[bool, int, int, int, str], Move] | None = None
    due: float | None = None
    for workers in sharing.values():
        pool = None
        for worker in workers:
            request = requests[worker]
            if pool is None:
                pool = best_pool(request, fleet)
                if pool is None:
                    break
                since = free.level(pool[0], pool[1])
                if since is None:
                    break
                if since > now - after:
                    due = since + after if due is None else min(due, since + after)
                    break
            if not may_move(worker):
                continue
            claim = fleet.claim_of(worker)
            if claim is None:
                continue
            found = _contention(fleet, claim, worker, request)
            if found is None:
                continue
            paired, round_, workers_on = found
            key = (paired, -round_, -workers_on, age(worker), worker)
            if best is None or key < best[0]:
                node, devices, device_memory = pool
                floor = per_device_share(request.memory, devices)
                hardware = fleet.node(node)
                if hardware is not None and hardware.device_groups:
                    floor = max(floor, hardware.group_floor(device_memory))
                best = key, Move(worker, claim, fleet.claim_node(claim),
                                 NewClaim(node, devices, floor, device_memory),
                                 MoveReason.OWN_DEVICES, round_)
    if best is not None:
        return best[1]
    return due


def _contention(fleet: Fleet, claim: str, worker: str,
                request: Request) -> tuple[bool, int, int] | None:
    """(whether it only pairs with its claim-mates, turns per round per turn of ``worker``,
    workers) on a shared claim; None when the claim is not shared."""
    found = fleet.claim(claim)
    if found is None or len(found.bookings) < 2:
        return None
    others = [b for b in found.bookings if b.worker != worker]
    owner = request.owner
    paired = all(b.owner == owner for b in others) and pairs(request.role,
                                                             [b.role for b in others])
    owners = {booking.owner for booking in found.bookings}
    mine = len(found.bookings) - len(others) + sum(1 for b in others if b.owner == owner)
    # turn_round counts a joiner's turns once it joins: this worker is already there.
    return paired, turn_round(len(owners) - (mine == 1), mine - 1), len(found.bookings)


def pack_move(fleet: Fleet, alone: AloneSince, requests: Mapping[str, Request],
              policy: Policy, *, now: float, after: float,
              removable: Callable[[str], bool],
              may_move: Callable[[str], bool]) -> Move | float | None:
    """Under binpack: the move to make now, else when one may next be due (None: none).

    A candidate's node must be one the caller may empty (``removable``), hold
    one worker, and that worker be movable with moves left. Its seat is
    found on a copy of the fleet without its node and without any empty node
    (a move onto an empty node empties nothing).
    """
    if after <= 0:
        return None
    ready: list[tuple[float, str]] = []
    due: float | None = None
    for node, since in alone.nodes():
        if not removable(node):
            continue
        if since > now - after:
            due = since + after if due is None else min(due, since + after)
            continue
        ready.append((since, node))
    if not ready:
        return due
    ready.sort()
    scratch: Fleet | None = None
    for _, node in ready:
        worker = _only_worker(fleet, node)
        if worker is None or not requests[worker].movable or not may_move(worker):
            continue
        if scratch is None:
            scratch = _without_empty_nodes(fleet)
        claim = fleet.claim_of(worker)
        assert claim is not None
        _drop_node(scratch, node)  # and it stays out: a node emptied is no one's seat
        seat = find_seat(requests[worker], scratch, policy)
        if seat is not None:
            return Move(worker, claim, node, seat, MoveReason.EMPTIES_NODE, 1)
    return due


def _only_worker(fleet: Fleet, node: str) -> str | None:
    # Binpack's candidates are few and checked only when due: a walk of the claims is
    # cheap beside the fleet copy that follows.
    claims = [claim for claim in fleet.claims if claim.node == node]
    if len(claims) != 1 or len(claims[0].bookings) != 1 or not claims[0].allocated:
        return None
    return claims[0].bookings[0].worker


def _without_empty_nodes(fleet: Fleet) -> Fleet:
    scratch = fleet.copy()
    held = {claim.node for claim in fleet.claims}
    for node in fleet.nodes:
        if node.name not in held:
            scratch.remove_node(node.name)
    return scratch


def _drop_node(scratch: Fleet, node: str) -> None:
    """Take ``node`` out of the scratch fleet: its claims stay, unseen by the decision."""
    if scratch.node(node) is not None:
        scratch.remove_node(node)
