"""An offline world: arrivals and departures replayed through ``decide``.

The rules the simulator adds on top of the decision (the controller follows
the same ones against a real cluster):

* DRA is played here. With ``instant`` allocation a new claim is allocated at
  once on the node it was sized against; with ``deferred`` it stays
  unallocated, reserving that pool, until ``allocate`` is called.
* A claim is named after the worker that cut it, ``claim-<worker>``; while
  that name is taken, ``-2``, ``-3``, ... is appended. It keeps its name after
  its first worker leaves. When its last worker leaves it is released and its
  devices return at once.
* Placed workers stay put: nothing migrates, nothing is rebalanced.
* After any capacity change (a departure, a claim allocated, a node added, a
  new allocated claim) the oldest pending worker that can now be placed is
  placed, again and again until none can.

How a retry stays cheap (each shortcut is exact, and the tests check the
result against a plain full scan):

* Every change touches one node, and a worker that found no seat before can
  only find one there. What a node can seat is one memory threshold per role
  (``NodeOffer``), so one comparison dismisses a worker; and no node seats a
  worker larger than all its devices together, which dismisses most workers
  that wait for ever (``NoCapacity``) before that threshold is worked out.
* The decision reads only a worker's role and memory, so pending workers are
  kept in classes of equal (role, memory): when the oldest of a class cannot
  be placed, none of that class can.
* A failure also rules out every larger class of the same role: more memory
  never needs fewer devices, a smaller share or less host RAM.
* An arrival is decided alone: the pending workers were already tried
  against the same fleet. Only a new allocated claim can give them something
  (a seat to join), so only then are they retried.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from placement.decide import Reason, best_claim, best_pool, explain, offer_of
from placement.fleet import Fleet
from placement.model import Node, PlacementError, Request, Role, per_device_share

__all__ = ["Phase", "Placement", "Simulation", "WorkerState"]


class Phase(enum.StrEnum):
    PLACED = "Placed"  # on an allocated claim
    PLACING = "Placing"  # on a claim DRA has not allocated yet
    PENDING = "Pending"  # no claim


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
class WorkerState:
    name: str
    role: Role
    memory: int
    owner: str
    phase: Phase
    claim: str | None
    node: str | None  # only once the claim is allocated
    devices: int | None
    memory_per_device: int | None
    reason: Reason | None


_PendingClass = tuple[Role, int]


class Simulation:
    def __init__(self, nodes: tuple[Node, ...] = (), *, deferred_allocation: bool = False) -> None:
        self.fleet = Fleet(nodes)
        self.deferred_allocation = deferred_allocation
        self._requests: dict[str, Request] = {}
        self._arrival: dict[str, int] = {}
        self._next_arrival = 0
        self._pending: dict[_PendingClass, deque[str]] = {}

    # ----------------------------------------------------------------- events

    def arrive(self, request: Request) -> list[Placement]:
        if request.name in self._requests:
            raise PlacementError(f"worker {request.name} is already here")
        self._requests[request.name] = request
        self._arrival[request.name] = self._next_arrival
        self._next_arrival += 1
        placed = self._try_place(request, retried=False)
        if placed is None:
            self._pending.setdefault(_class_of(request), deque()).append(request.name)
            return []
        if not (placed.new_claim and placed.allocated):
            # Taking a seat or reserving a pool only consumes capacity: nobody can gain.
            return [placed]
        return [placed, *self._retry_pending(placed.node)]

    def leave(self, worker: str) -> list[Placement]:
        request = self._requests.pop(worker, None)
        if request is None:
            raise PlacementError(f"worker {worker} is not here")
        del self._arrival[worker]
        claim = self.fleet.claim_of(worker)
        if claim is None:
            queue = self._pending[_class_of(request)]
            queue.remove(worker)
            if not queue:
                del self._pending[_class_of(request)]
            return []
        node = self.fleet.claim_node(claim)
        self.fleet.unbook(worker)
        if self.fleet.workers_on(claim) == 0:
            self.fleet.remove_claim(claim)
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

    # ---------------------------------------------------------------- reading

    def __contains__(self, worker: object) -> bool:
        return worker in self._requests

    def workers(self) -> Iterator[str]:
        """Present workers, in arrival order."""
        return iter(sorted(self._requests, key=self._arrival.__getitem__))

    def pending_count(self) -> int:
        return sum(len(queue) for queue in self._pending.values())

    def state(self, worker: str) -> WorkerState:
        request = self._requests.get(worker)
        if request is None:
            raise PlacementError(f"worker {worker} is not here")
        claim_name = self.fleet.claim_of(worker)
        if claim_name is None:
            return WorkerState(
                name=worker, role=request.role, memory=request.memory, owner=request.owner,
                phase=Phase.PENDING, claim=None, node=None, devices=None,
                memory_per_device=None, reason=explain(request, self.fleet),
            )
        fleet = self.fleet
        allocated = fleet.is_allocated(claim_name)
        devices = fleet.claim_devices(claim_name)
        return WorkerState(
            name=worker, role=request.role, memory=request.memory, owner=request.owner,
            phase=Phase.PLACED if allocated else Phase.PLACING,
            claim=claim_name, node=fleet.claim_node(claim_name) if allocated else None,
            devices=devices,
            memory_per_device=per_device_share(request.memory, devices),
            reason=None,
        )

    # --------------------------------------------------------------- internal

    def _try_place(self, request: Request, *, retried: bool) -> Placement | None:
        # find_seat's two rules, read plainly: no decision object per event.
        fleet = self.fleet
        pool = best_pool(request, fleet)
        if pool is not None:
            node, devices, _ = pool
            name = self._claim_name(request.name)
            allocated = not self.deferred_allocation
            fleet.cut(name, node, devices, request, allocated=allocated)
            return Placement(request.name, name, node, devices, new_claim=True,
                             allocated=allocated, retried=retried, workers=1)
        claim = best_claim(request, fleet)
        if claim is None:
            return None
        fleet.book(claim, request)
        return Placement(request.name, claim, fleet.claim_node(claim), fleet.claim_devices(claim),
                         new_claim=False, allocated=True, retried=retried,
                         workers=fleet.workers_on(claim))

    def _retry_pending(self, changed_node: str) -> list[Placement]:
        """Place the oldest pending worker that now fits, again and again, after a change.

        Every pending worker found no seat before the change, and only
        ``changed_node`` changed, so a seat can only appear there; each
        placement this makes lands there too. A cheap look at that one node
        tells which classes are worth a full decision.
        """
        placed: list[Placement] = []
        node = self.fleet.node(changed_node)
        if node is None:
            return placed
        # Nothing on the node can ever take more than all of its devices: workers
        # beyond that (often ones no node can hold) are not worth looking at it for.
        largest = node.devices * node.device_memory
        while self._pending:
            candidates = [key for key in self._pending
                          if key[1] <= largest and node.accepts(key[0])]
            if not candidates:
                break
            offer = offer_of(self.fleet, changed_node)
            assert offer is not None
            hopeful = [key for key in candidates
                       if offer.could_seat(self._requests[self._pending[key][0]])]
            # A worker that cannot be placed means no larger worker of its role can be
            # either (more memory never needs fewer devices, a smaller share or less host
            # RAM), so one failure rules out every bigger class until the fleet changes.
            smallest_failure: dict[Role, int] = {}
            for key in sorted(hopeful, key=lambda k: self._arrival[self._pending[k][0]]):
                role, memory = key
                if memory >= smallest_failure.get(role, memory + 1):
                    continue
                queue = self._pending[key]
                outcome = self._try_place(self._requests[queue[0]], retried=True)
                if outcome is None:
                    smallest_failure[role] = memory
                    continue
                queue.popleft()
                if not queue:
                    del self._pending[key]
                placed.append(outcome)
                break  # the fleet changed: start again from the oldest
            else:
                break
        return placed

    def _claim_name(self, worker: str) -> str:
        base = f"claim-{worker}"
        name, suffix = base, 1
        while self.fleet.has_claim(name):
            suffix += 1
            name = f"{base}-{suffix}"
        return name


def _class_of(request: Request) -> _PendingClass:
    return request.role, request.memory
