"""An offline world: arrivals and departures replayed through ``decide``.

The rules the simulator adds on top of the decision (the controller follows
the same ones against a real cluster):

* One ``Policy`` (``placement.policy``) holds for the whole run: its strategy
  orders the new-claim and join steps, owner affinity ranks the joins.
* DRA is played here. With ``instant`` allocation a new claim is allocated at
  once on the node it was sized against; with ``deferred`` it stays
  unallocated, reserving that pool, until ``allocate`` is called.
* A claim is named after the worker that cut it, ``claim-<worker>``; while
  that name is taken, ``-2``, ``-3``, ... is appended. It keeps its name after
  its first worker leaves. When its last worker leaves it is released and its
  devices return at once.
* Placed workers stay put -- except off a lost node (``lose_node``): the
  node goes, its claims are released, and each of its workers is placed
  again, oldest arrival first, by the normal decision on what is left; one
  that finds no seat waits in the pending queue at its first arrival's
  place, with the reason it waits (``Moved``) -- and, with ``moves`` set,
  movable workers moved by ``placement.rebalance``'s rule on the clock
  (``advance``; ``placement.simulator.mover`` keeps its records): each move
  made at once (the new seat taken, the old one given back, its claim
  released if it was the last), then the waiting workers retried on both
  nodes, as after any change (``MoveMade``). No other worker moves.
* A worker that finishes (``finish``) leaves as a departure does: its seat,
  and its claim if it was the last, are released at once.
* After any capacity change (a departure, a claim allocated, a node added, a
  new allocated claim) the oldest pending worker that can now be placed is
  placed, again and again until none can.

How a retry stays cheap (each shortcut is exact, and the tests check the
result against a plain full scan):

* Every change touches one node, and a worker that found no seat before can
  only find one there. What a node can seat is one memory threshold per role
  (``offer_of``), and the pending queue (``placement.simulator.pending``) answers "the
  oldest worker of this role under that threshold" without walking its
  workers or its distinct sizes; a worker leaving while pending is removed
  in O(1).
* A failure (the threshold can be an upper bound) rules out every larger
  worker of the same role: more memory never needs fewer devices, a smaller
  share or less host RAM. Exclusive workers wait in a queue of their own,
  against what a new claim there can take (``offer_of``'s ``alone``: the free
  devices, and on a node that may share the host memory left): one of them
  failing says nothing of a worker that could join. (A subclass may send
  more workers that way, new claim only: ``_new_claim_only``.) A worker
  naming N devices waits in a queue of those naming N (``_exact``), against
  the same bound: for one N more memory never fits more groups, but across
  counts (or beside the exclusive) a failure says nothing.
* An arrival is decided alone: the pending workers were already tried
  against the same fleet. Only a new allocated claim can give them something
  (a seat to join), so only then are they retried, and only those that could
  join: the claim took devices, so one waiting for devices of its own
  (``_alone``) cannot gain.
* A claim's name is found without trying every taken ``-N`` in turn: the
  suffixes a name has used, and those given back, are remembered per worker
  name (``_ClaimNames``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from heapq import heappop, heappush

from placement.decide import JoinClaim, Reason, best_claim, best_pool, explain, offer_of
from placement.fleet import Fleet
from placement.model import Node, PlacementError, Request, Role, per_device_share
from placement.policy import ALONE, DEFAULT_POLICY, STEPS, Policy, Step
from placement.rebalance import Move, MoveReason
from placement.simulator.mover import Mover, MoveSettings
from placement.simulator.pending import PendingQueue
from placement.simulator.tracked import TrackedFleet

__all__ = ["MoveMade", "Moved", "Placement", "Seating", "Simulation", "WorkerState"]

_ROLES = tuple(Role)  # iterating the enum itself costs a microsecond per retry
_NEW_CLAIM = Step.NEW_CLAIM  # a member read through its class costs ~40 ns more in 3.11


class Seating(enum.StrEnum):
    PLACED = "Placed"  # on an allocated claim
    PLACING = "Placing"  # on a claim DRA has not allocated yet
    PENDING = "Pending"  # no claim


_PLACED, _PLACING, _PENDING = Seating.PLACED, Seating.PLACING, Seating.PENDING


@dataclass(frozen=True, slots=True)
class Placement:
    """A worker that got a seat during one step."""

    worker: str
    claim: str
    node: str
    devices: int
    new_claim: bool
    allocated: bool
    retried: bool  # placed from the pending queue rather than on arrival
    workers: int  # on its claim right after it took the seat


@dataclass(frozen=True, slots=True)
class Moved:
    """A worker a lost node held, placed again (``placed``) or waiting (``reason``)."""

    worker: str
    node: str  # the node it was lost with
    claim: str  # the claim it left
    placed: Placement | None
    reason: Reason | None  # why it waits; None once placed


@dataclass(frozen=True, slots=True)
class MoveMade:
    """A movable worker moved by the rule at ``at``: the claim it left, its new seat."""

    at: float
    worker: str
    claim: str  # the claim it left
    node: str  # the node it left
    released: bool  # it was the last on that claim: the claim went
    placed: Placement  # its new seat
    retried: tuple[Placement, ...]  # waiting workers the move let in
    reason: MoveReason
    detail: str  # from where to where, and why, in words


@dataclass(frozen=True, slots=True)
class WorkerState:
    name: str
    role: Role
    memory: int
    owner: str
    phase: Seating
    claim: str | None
    node: str | None  # only once the claim is allocated
    devices: int | None
    memory_per_device: int | None
    reason: Reason | None


class Simulation:
    _more_alone = False  # a subclass's ``_new_claim_only`` sends more workers new claim only

    def __init__(self, nodes: tuple[Node, ...] = (), *, deferred_allocation: bool = False,
                 policy: Policy = DEFAULT_POLICY, moves: MoveSettings | None = None) -> None:
        self.now = 0.0
        # Moves need the fleet's changes: a tracked fleet only then, the plain one costs less.
        self._mover: Mover | None = None
        self._tracked: TrackedFleet | None = None  # the fleet, where moves track it
        if moves is not None and (moves.after > 0 or moves.measure):
            if deferred_allocation:
                raise PlacementError("moves need claims allocated when they are cut "
                                     "(instant allocation)")
            self._mover = mover = Mover(moves, policy)
            # Binpack's lone nodes read every join and departure; who shares is read by
            # spread and by the measure.
            tracked = TrackedFleet(nodes, workers=not mover.spread,
                                   sharers=mover.spread or moves.measure)
            self.fleet: Fleet = tracked
            self._tracked = tracked
        else:
            self.fleet = Fleet(nodes)
        self._made: list[MoveMade] = []
        self.deferred_allocation = deferred_allocation
        self.policy = policy
        self._steps = STEPS[policy.strategy]  # a worker's that is not exclusive
        self._requests: dict[str, Request] = {}
        self._arrival: dict[str, int] = {}
        self._next_arrival = 0
        self._pending = PendingQueue()
        self._alone = PendingQueue()  # exclusive workers: they wait for free devices only
        self._exact: dict[int, PendingQueue] = {}  # workers naming N devices, by N
        self._names = _ClaimNames(self.fleet.has_claim)

    # ----------------------------------------------------------------- events

    def arrive(self, request: Request) -> list[Placement]:
        if request.name in self._requests:
            raise PlacementError(f"worker {request.name} is already here")
        self._requests[request.name] = request
        self._arrival[request.name] = self._next_arrival
        self._next_arrival += 1
        placed = self._try_place(request, retried=False)
        if placed is None:
            self._queue(request).add(self._arrival[request.name], request.name, request.role,
                                     request.memory)
            return []
        if not (placed.new_claim and placed.allocated):
            # Taking a seat or reserving a pool only consumes capacity: nobody can gain.
            return [placed]
        # A new claim offers seats to join and takes devices: only joiners can gain.
        return [placed, *self._retry_pending(placed.node, joins_only=True)]

    def leave(self, worker: str) -> list[Placement]:
        request = self._requests.pop(worker, None)
        if request is None:
            raise PlacementError(f"worker {worker} is not here")
        arrival = self._arrival.pop(worker)
        if self._mover is not None:
            self._mover.forget(worker)
        claim = self.fleet.claim_of(worker)
        if claim is None:
            self._queue(request).remove(arrival)
            return []
        node, _, workers, _ = self.fleet.claim_figures(claim)
        self.fleet.unbook(worker)
        if workers == 1:  # it was the last: the claim goes
            self.fleet.remove_claim(claim)
            self._names.released(claim)
        return self._retry_pending(node)

    def allocate(self, worker: str) -> tuple[str, list[Placement]]:
        """Allocate the claim ``worker`` is on; return the claim's name and who got placed."""
        if worker not in self._requests:
            raise PlacementError(f"worker {worker} is not here")
        claim = self.fleet.claim_of(worker)
        if claim is None:
            raise PlacementError(f"worker {worker} is pending: it has no claim to allocate")
        self.fleet.allocate(claim)
        return claim, self._retry_pending(self.fleet.claim_node(claim))

    def add_node(self, node: Node) -> list[Placement]:
        self.fleet.add_node(node)
        return self._retry_pending(node.name)

    def lose_node(self, name: str) -> list[Moved]:
        """The node is lost: its claims go, and its workers are placed again, oldest first.

        Capacity only shrank, so no pending worker can gain: only the lost node's own
        workers are decided, each once, in their arrival order."""
        if self.fleet.node(name) is None:
            raise PlacementError(f"node {name} is not here")
        fleet = self.fleet
        held = sorted(((self._arrival[w], w, c.name) for c in fleet.claims if c.node == name
                       for w in (b.worker for b in c.bookings)), key=lambda t: t[0])
        fleet.remove_node(name)
        for _, worker, _ in held:
            fleet.unbook(worker)
        for claim in sorted({c.name for c in fleet.claims if c.node == name}):
            fleet.remove_claim(claim)
            self._names.released(claim)
        moved: list[Moved] = []
        for arrival, worker, claim in held:
            request = self._requests[worker]
            placed = self._try_place(request, retried=True)
            if placed is None:
                self._queue(request).add(arrival, worker, request.role, request.memory)
            moved.append(Moved(worker, name, claim, placed,
                               None if placed else explain(request, fleet)))
        return moved

    def finish(self, worker: str) -> list[Placement]:
        """The worker's process completed: its seat goes as on a departure."""
        return self.leave(worker)

    # ------------------------------------------------------------------ clock

    def advance(self, now: float) -> None:
        """The clock moves to ``now``: the moves due by then are made, each at its time."""
        if now < self.now:
            raise PlacementError(f"time goes back: {now} is before {self.now}")
        mover, tracked = self._mover, self._tracked
        if mover is not None and tracked is not None:
            if tracked.touched_nodes or tracked.touched_claims or tracked.gone:
                mover.settle(tracked, self._requests, self.now)  # else nothing changed
            due = mover.due  # the checks' times, a heap: read here at every event
            while due and due[0] <= now:
                self.now = max(self.now, due[0])
                self._play_moves()
        self.now = now

    def take_moves(self) -> list[MoveMade]:
        """The moves made since the last call, in order."""
        made, self._made = self._made, []
        return made

    @property
    def mover(self) -> Mover | None:
        """The moves' records; None when moves are off."""
        return self._mover

    def _settle(self) -> None:
        mover, tracked = self._mover, self._tracked
        assert mover is not None and tracked is not None
        mover.settle(tracked, self._requests, self.now)

    def _play_moves(self) -> None:
        """A due check: moves made one at a time until the rule gives none."""
        mover, tracked = self._mover, self._tracked
        assert mover is not None and tracked is not None
        mover.pop_due(self.now)
        while (move := mover.next_move(tracked, self._requests, self.policy, self.now,
                                       self._arrival, self._removable)) is not None:
            self._carry_out(move)
            self._settle()

    def _carry_out(self, move: Move) -> None:
        """One move: the new seat taken, the old one given back, then the waiting retried."""
        fleet, request, seat = self.fleet, self._requests[move.worker], move.seat
        # The books refuse a second seat, so the old one goes first; nothing runs between.
        fleet.unbook(move.worker)
        released = fleet.workers_on(move.claim) == 0
        if released:
            fleet.remove_claim(move.claim)
            self._names.released(move.claim)
        if isinstance(seat, JoinClaim):
            fleet.book(seat.claim, request)
            placed = Placement(move.worker, seat.claim, seat.node, seat.devices, False, True,
                               True, fleet.workers_on(seat.claim))
        else:
            name = self._claim_name(move.worker)
            fleet.cut(name, seat.node, seat.devices, request,
                      device_memory=seat.memory_ceiling)
            placed = Placement(move.worker, name, seat.node, seat.devices, True, True, True, 1)
        retried = [*self._retry_pending(move.node), *self._retry_pending(seat.node)]
        made = MoveMade(self.now, move.worker, move.claim, move.node, released, placed,
                        tuple(retried), move.reason, move.describe())
        self._made.append(made)
        self._moved(made)

    def _moved(self, made: MoveMade) -> None:
        """A move was made (a subclass keeps its own records)."""

    def _removable(self, node: str) -> bool:
        """Whether emptying ``node`` lets it go (binpack's moves): fixed nodes stay."""
        return False

    # ---------------------------------------------------------------- reading

    def __contains__(self, worker: object) -> bool:
        return worker in self._requests

    def workers(self) -> Iterator[str]:
        """Present workers, in arrival order."""
        return iter(sorted(self._requests, key=self._arrival.__getitem__))

    def pending_count(self) -> int:
        return (self._pending.size + self._alone.size
                + sum(queue.size for queue in self._exact.values()))

    def state(self, worker: str) -> WorkerState:
        request = self._requests.get(worker)
        if request is None:
            raise PlacementError(f"worker {worker} is not here")
        # WorkerState's fields in order (name, role, memory, owner, phase, claim, node,
        # devices, memory_per_device, reason): built for every worker a report reads,
        # where keywords cost a dictionary per call.
        claim_name = self.fleet.claim_of(worker)
        if claim_name is None:
            return WorkerState(worker, request.role, request.memory, request.owner, _PENDING,
                               None, None, None, None, self._waiting_reason(request))
        node, devices, _, allocated = self.fleet.claim_figures(claim_name)
        return WorkerState(worker, request.role, request.memory, request.owner,
                           _PLACED if allocated else _PLACING, claim_name,
                           node if allocated else None, devices,
                           per_device_share(request.memory, devices), None)

    # --------------------------------------------------------------- internal

    def _waiting_reason(self, request: Request) -> Reason:
        """Why a pending worker waits, as ``state`` reports it (a subclass may say more)."""
        return explain(request, self.fleet)

    def _new_claim_only(self, request: Request) -> bool:
        """Whether the worker takes the new-claim step alone, waiting for free devices."""
        return request.exclusive or request.devices is not None

    def _queue(self, request: Request) -> PendingQueue:
        """The queue the worker waits in: of its device count, the exclusive's, or the rest."""
        if request.devices is not None:
            queue = self._exact.get(request.devices)
            if queue is None:
                queue = self._exact[request.devices] = PendingQueue()
            return queue
        return self._alone if self._new_claim_only(request) else self._pending

    def _try_place(self, request: Request, *, retried: bool) -> Placement | None:
        # find_seat's steps, read plainly: no decision object per event. (``steps_for``'s
        # rule: a worker that is not new-claim-only is not exclusive either.)
        fleet = self.fleet
        # _new_claim_only inlined where no subclass sends more workers that way.
        alone = (request.exclusive or request.devices is not None
                 or (self._more_alone and self._new_claim_only(request)))
        for step in ALONE if alone else self._steps:
            if step is _NEW_CLAIM:
                pool = best_pool(request, fleet)
                if pool is not None:
                    node, devices, _ = pool
                    name = self._claim_name(request.name)
                    allocated = not self.deferred_allocation
                    fleet.cut(name, node, devices, request, allocated=allocated)
                    # Placement(worker, claim, node, devices, new_claim, allocated, retried,
                    # workers), positional: keywords cost a dictionary per seat.
                    return Placement(request.name, name, node, devices, True, allocated,
                                     retried, 1)
                continue
            claim = best_claim(request, fleet, self.policy.owner_affinity)
            if claim is not None:
                fleet.book(claim, request)
                node, devices, workers, _ = fleet.claim_figures(claim)
                return Placement(request.name, claim, node, devices, False, True, retried,
                                 workers)
        return None

    def _retry_pending(self, changed_node: str, *, joins_only: bool = False) -> list[Placement]:
        """Place the oldest pending worker that now fits, again and again, after a change.

        Every pending worker found no seat before the change, and only
        ``changed_node`` changed, so a seat can only appear there; each
        placement this makes lands there too. What the node can seat is one
        threshold per role, so the pending queue is asked for the oldest
        worker under it, never walked. ``joins_only``: the change freed no
        devices (a claim cut), so the workers waiting for a new claim of their
        own (``_alone``), which need free devices, are not asked for at all.
        """
        placed: list[Placement] = []
        pending = self._pending
        alone = None if joins_only else self._alone
        # The queues of workers naming a count that hold any; () on most runs, read free.
        exact = (() if joins_only or not self._exact
                 else [queue for queue in self._exact.values() if queue.size])
        if not pending.size and (alone is None or not alone.size) and not exact:
            return placed
        node = self.fleet.node(changed_node)
        if node is None:
            return placed
        roles = [role for role in _ROLES if role in node.roles] if node.roles else _ROLES
        while pending.size or (alone is not None and alone.size) or (
                exact and any(queue.size for queue in exact)):
            capacity, spread = offer_of(self.fleet, node)
            # A worker that cannot be placed means no larger worker of its role (and
            # queue) can be either (more memory never needs fewer devices, a smaller
            # share or less host RAM): a failure lowers that bound until the fleet changes.
            classes = ([(pending, role, [capacity]) for role in roles]
                       if pending.size else [])
            if alone is not None and alone.size:
                classes += [(alone, role, [spread]) for role in roles]
            for queue in exact:
                if queue.size:
                    classes += [(queue, role, [spread]) for role in roles]
            while True:
                oldest: tuple[int, str, int] | None = None
                bound_of_oldest: list[float] = []
                queue_of_oldest = pending
                for queue, role, bound in classes:
                    found = queue.oldest(role, bound[0])
                    if found is not None and (oldest is None or found[0] < oldest[0]):
                        oldest, bound_of_oldest, queue_of_oldest = found, bound, queue
                if oldest is None:
                    return placed
                arrival, worker, memory = oldest
                outcome = self._try_place(self._requests[worker], retried=True)
                if outcome is not None:
                    queue_of_oldest.remove(arrival)
                    placed.append(outcome)
                    break  # the fleet changed: ask again from the oldest
                bound_of_oldest[0] = memory - 1
        return placed

    def _claim_name(self, worker: str) -> str:
        return self._names.new(f"claim-{worker}")


class _ClaimNames:
    """``base``, else ``base-2``, ``base-3``, ...: the first that no claim has, found quickly.

    Trying the names in turn costs as many tries as there are taken ones, and
    a worker that comes back again and again while the claims it cut live on
    makes that grow without bound. So per base (only once its plain name was
    found taken) this keeps the next suffix never tried and a heap of tried
    suffixes whose names have since been released. A heap entry is checked
    when it comes out (the name may have been taken again, maybe by a claim of
    another base: ``claim-a-2`` is also the plain name for worker ``a-2``).
    """

    __slots__ = ("_freed", "_next", "_taken")

    def __init__(self, taken: Callable[[str], bool]) -> None:
        self._taken = taken
        self._next: dict[str, int] = {}  # every suffix below it was handed out or found taken
        self._freed: dict[str, list[int]] = {}  # suffixes below _next released since

    def new(self, base: str) -> str:
        if not self._next and not self._taken(base):  # no name has collided yet: the plain one
            return base
        freed = self._freed.get(base)
        while freed:
            suffix = heappop(freed)
            name = _spell(base, suffix)
            if not self._taken(name):
                return name
        suffix = self._next.get(base, 1)
        name = _spell(base, suffix)
        while self._taken(name):
            suffix += 1
            name = _spell(base, suffix)
        if suffix > 1:
            self._next[base] = suffix + 1
        return name

    def released(self, name: str) -> None:
        """``name`` is free again: it may be the plain name of one base, or a suffix of another."""
        if not self._next:  # no name has collided yet: no suffix to give back
            return
        self._give_back(name, 1)
        base, dash, digits = name.rpartition("-")
        if dash and 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit():
            suffix = int(digits)
            if suffix >= 2 and str(suffix) == digits:
                self._give_back(base, suffix)

    def _give_back(self, base: str, suffix: int) -> None:
        if suffix < self._next.get(base, 1):
            heappush(self._freed.setdefault(base, []), suffix)


def _spell(base: str, suffix: int) -> str:
    return base if suffix == 1 else f"{base}-{suffix}"
