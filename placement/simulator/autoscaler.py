"""An autoscaler over node groups, played on the scenario's clock.

A ``NodeGroup`` is a template node, a floor (``min``) and a ceiling (``max``)
on how many of its nodes exist, the seconds a node takes to come up once
asked for (``boot``) and the seconds it may hold nothing before it goes
(``idle``). Its nodes are named ``<group>-1``, ``<group>-2``, ... in the
order they are asked for; a number is never given twice.

The rules, as the simulation applies them:

    when                              what happens
    --------------------------------  ------------------------------------------
    the run starts                    each group has its ``min`` nodes, up, empty
    under spread, a worker some       it takes a new claim only, never a seat on
    group's template would seat       another's claim: spread shares only under
                                      contention, and a pool that can grow has
                                      none (the controller's rule), so it waits
                                      for a node instead (others may still join
                                      its claim)
    a worker waits (no node in the    a node on its way whose plan seats it
    fleet seats it now)               counts it; else the first group whose
                                      template, empty, would seat it and whose
                                      nodes (up or coming) are fewer than
                                      ``max`` is asked for a node, which joins
                                      ``boot`` seconds later
    every group that would seat it    it waits, and is considered again when
    is at ``max``                     one of them has a node fewer
    an asked-for node comes up        it joins the fleet; pending workers are
                                      retried on it, oldest first (the
                                      simulation's rule); those counted on it
                                      that still wait are considered again
    a group's node held no claim for  it is removed, unless its group has only
    ``idle`` seconds                  ``min`` up: then it goes once another
                                      node of its group is up
    a group's node takes a claim      its idle clock stops, to start again when
                                      its last claim goes
    a node is lost                    its workers placed again or waiting are
                                      considered like any waiting worker; a
                                      group's node lost leaves room under
                                      ``max`` (nothing restores ``min``)

Waiting workers are considered oldest first. A waiting worker some group
could seat is waiting for capacity, never "NoCapacity", and its reason says
which node is on its way for it, or that the groups are at their ``max``.
When a removal has the blocked considered again, a blocked worker whose like
(same role, memory, exclusive, and owner where it counts) stayed blocked with
nothing changed since is passed over: it would stay blocked too
(``_reconsider_blocked``), so a removal costs the kinds of worker blocked, not
how many.

*Would seat* is the decision's own answer, under the run's policy: a node
on its way carries a plan, an empty copy of it with the workers counted on
it seated by the same steps the simulation takes, so a node is asked for
only when the ones coming cannot take the worker. A counted worker seated
elsewhere, or leaving, is taken off its plan.

The clock: ``advance(now)`` plays everything due at or before ``now`` in
time order (ties in the order they were scheduled), before the event at
``now``. What the autoscaler did is kept as ``Change`` values, read and
cleared by ``take_changes``. Nothing is played after the last event: a node
still booting then never joins.
"""

from __future__ import annotations

import dataclasses
import itertools
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush

from placement.decide import Reason, WaitKind, best_claim, best_pool
from placement.fleet import Fleet
from placement.model import Node, PlacementError, Request, Role
from placement.policy import ALONE, DEFAULT_POLICY, Policy, Step, Strategy, steps_for
from placement.simulator.simulation import Moved, Placement, Simulation

__all__ = ["AutoscaledSimulation", "Change", "NodeAsked", "NodeDown", "NodeGroup", "NodeUp"]


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    template: Node  # its name is not used: the group's nodes are <name>-1, <name>-2, ...
    min: int
    max: int
    boot: float  # seconds from asked for to in the fleet
    idle: float  # seconds holding no claim before it is removed

    def __post_init__(self) -> None:
        if not isinstance(self.template, Node):
            raise PlacementError(f"group {self.name}: template must be a Node")
        if not 0 <= self.min <= self.max or self.max < 1:
            raise PlacementError(f"group {self.name}: needs 0 <= min <= max and max >= 1, "
                                 f"got min {self.min}, max {self.max}")
        if self.boot < 0 or self.idle < 0:
            raise PlacementError(f"group {self.name}: boot and idle must be >= 0 seconds")

    def node(self, number: int) -> Node:
        return dataclasses.replace(self.template, name=f"{self.name}-{number}")


@dataclass(frozen=True, slots=True)
class NodeAsked:
    at: float
    group: str
    node: str
    worker: str  # the oldest waiting worker no node seated nor was coming for
    ready: float  # when it joins the fleet


@dataclass(frozen=True, slots=True)
class NodeUp:
    at: float
    group: str
    node: Node
    placed: tuple[Placement, ...]  # pending workers it seated as it joined


@dataclass(frozen=True, slots=True)
class NodeDown:
    at: float
    group: str
    node: Node


Change = NodeAsked | NodeUp | NodeDown

_UP, _DOWN = 0, 1

# What a blocked worker's consideration reads of it: role, memory, exclusive, and its
# owner where owner affinity ranks a plan's claims for it ("" elsewhere).
_Shape = tuple[Role, int, bool, str]


def _arrival_of(entry: tuple[int, str]) -> int:
    return entry[0]


class _Blocked(dict[str, tuple[_Shape, int]]):
    """Waiting workers every fitting group is full for -> (their shape, their arrival),
    with each shape's as (arrival, worker), oldest first. A dict, so the membership tests
    on every seat stay plain; the queues ride on it rather than as one more attribute of
    the simulation, whose instances share their attribute names' table only up to 30."""

    __slots__ = ("queues",)

    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[_Shape, list[tuple[int, str]]] = {}


class _Coming:
    """A node on its way: when it joins, and the plan of what it would seat."""

    __slots__ = ("group", "node", "plan", "ready", "workers")

    def __init__(self, group: int, node: Node, ready: float) -> None:
        self.group = group
        self.node = node
        self.ready = ready
        self.plan = Fleet((node,))
        self.workers: dict[str, None] = {}  # counted on it, in the order they were


class AutoscaledSimulation(Simulation):
    """A ``Simulation`` whose fleet grows and shrinks by node groups (the module's rules)."""

    def __init__(self, nodes: tuple[Node, ...] = (), groups: Sequence[NodeGroup] = (), *,
                 deferred_allocation: bool = False, policy: Policy = DEFAULT_POLICY) -> None:
        names = {node.name for node in nodes}
        if len({group.name for group in groups}) < len(groups):
            raise PlacementError("node group names must be unique")
        self.groups = tuple(groups)
        self.now = 0.0
        self._grows: dict[tuple[Role, int], bool] = {}  # some group's template seats it
        self._spread = policy.strategy is Strategy.SPREAD
        self._count = [group.min for group in self.groups]  # nodes up or on their way
        self._serial = [group.min for group in self.groups]  # the last number given
        group_of = {group.node(number).name: index for index, group in enumerate(self.groups)
                    for number in range(1, group.min + 1)}
        start = [self.groups[index].node(int(name.rpartition("-")[2]))
                 for name, index in group_of.items()]
        for node in start:
            if node.name in names:
                raise PlacementError(f"node {node.name} is a node group's name for its nodes")
        super().__init__((*nodes, *start), deferred_allocation=deferred_allocation,
                         policy=policy)
        self.started = tuple(start)  # the groups' nodes at the start, after the fixed ones
        self.started_groups = tuple(self.groups[index].name for index in group_of.values())
        self._group_of = group_of  # group nodes in the fleet -> their group's index
        self._coming: list[_Coming] = []  # in the order asked for
        self._counted: dict[str, _Coming] = {}  # waiting worker -> the node counted on
        self._blocked = _Blocked()  # waiting workers every fitting group is full for
        self._fits: dict[tuple[int, Role, int], bool] = {}
        self._due: list[tuple[float, int, int, str, int]] = []  # (at, seq, kind, node, token)
        self._seq = itertools.count()
        self._idle: dict[str, int] = {}  # group node holding nothing -> its removal's token
        # Idle nodes kept because their group was at min, with their removal's token.
        self._floor: dict[int, list[tuple[str, int]]] = {}
        self._coming_by_name: dict[str, _Coming] = {}
        self._plan_names = itertools.count(1)
        self._changes: list[Change] = []
        for node in start:
            self._went_idle(node.name)

    # ------------------------------------------------------------------ clock

    def advance(self, now: float) -> None:
        """Play what is due at or before ``now`` (nodes joining, idle nodes going)."""
        if now < self.now:
            raise PlacementError(f"time goes back: {now} is before {self.now}")
        due = self._due
        while due and due[0][0] <= now:
            at, _, kind, name, token = heappop(due)
            self.now = at
            if kind == _UP:
                self._node_up(self._coming_by_name.pop(name))
            elif self._idle.get(name) == token:
                self._remove_idle(name)
        self.now = now

    def take_changes(self) -> list[Change]:
        """What the autoscaler did since the last call, in order."""
        changes, self._changes = self._changes, []
        return changes

    def group_of(self, node: str) -> str | None:
        """The group a node present in the fleet belongs to; None for a fixed node."""
        index = self._group_of.get(node)
        return None if index is None else self.groups[index].name

    def coming_for(self, worker: str) -> NodeAsked | None:
        """The node on its way that ``worker`` is counted on, if any."""
        coming = self._counted.get(worker)
        if coming is None:
            return None
        return NodeAsked(self.now, self.groups[coming.group].name, coming.node.name, worker,
                         coming.ready)

    def _waiting_reason(self, request: Request) -> Reason:
        """A worker some group could seat waits for capacity: which node is on its way for
        it, or that the groups are at their max (``state`` reads this)."""
        fitting = [group for index, group in enumerate(self.groups)
                   if self._template_fits(index, request)]
        if not fitting:
            return super()._waiting_reason(request)
        join = (best_claim(request, self.fleet, self.policy.owner_affinity)
                if self._spread and not request.exclusive else None)
        if join is not None:  # explain() knows nothing of the rule that kept it out
            detail = (f"no free devices for it, and under spread it joins no claim (it "
                      f"could join {join}) while a node group can add a node for it")
        else:  # only here is explain()'s detail read: a waiting arrival mostly could join
            detail = super()._waiting_reason(request).detail
        coming = self._counted.get(request.name)
        if coming is not None:
            note = (f"node {coming.node.name} of group {self.groups[coming.group].name} "
                    "is on its way")
        else:
            note = "the groups that could add a node for it are at their max: " + ", ".join(
                f"{group.name} ({group.max})" for group in fitting)
        return Reason(WaitKind.WAITING_FOR_CAPACITY, f"{detail}; {note}")

    # ----------------------------------------------------------------- events

    def arrive(self, request: Request) -> list[Placement]:
        placed = super().arrive(request)
        if placed:
            self._seated(placed)
        else:  # it waits, counted on nothing yet
            self._consider_one(request.name, request)
        return placed

    def leave(self, worker: str) -> list[Placement]:
        fleet = self.fleet
        claim = fleet.claim_of(worker)
        node = fleet.claim_node(claim) if claim is not None else None
        placed = super().leave(worker)
        if worker in self._counted or worker in self._blocked:
            self._forget(worker)
        if placed:
            self._seated(placed)
        if node is not None and node in self._group_of:  # a fixed node never goes idle
            self._maybe_idle(node)
        return placed

    def allocate(self, worker: str) -> tuple[str, list[Placement]]:
        claim, placed = super().allocate(worker)
        self._seated(placed)
        return claim, placed

    def add_node(self, node: Node) -> list[Placement]:
        placed = super().add_node(node)
        self._seated(placed)
        return placed

    def lose_node(self, name: str) -> list[Moved]:
        moved = super().lose_node(name)
        index = self._group_of.pop(name, None)
        self._seated(m.placed for m in moved if m.placed is not None)
        waiting = [m.worker for m in moved if m.placed is None]
        if index is not None:
            self._idle.pop(name, None)
            self._count[index] -= 1
            waiting += self._blocked  # a group with room again
        self._consider(waiting)
        # Their reasons as a waiting worker's here read: with the node on its way, if any.
        return [dataclasses.replace(m, reason=self.state(m.worker).reason)
                if m.placed is None else m for m in moved]

    # --------------------------------------------------------------- internal

    def _seated(self, placed: Iterable[Placement]) -> None:
        counted, blocked, idle = self._counted, self._blocked, self._idle
        for seat in placed:
            worker = seat.worker
            if worker in counted or worker in blocked:  # most were never either
                self._forget(worker)
            if seat.node in idle:
                del idle[seat.node]  # it holds a claim: its removal is off

    def _forget(self, worker: str) -> None:
        """``worker`` no longer waits: off its plan, off the blocked."""
        coming = self._counted.pop(worker, None)
        if coming is not None:
            del coming.workers[worker]
            self._unplan(coming.plan, worker)
        if worker in self._blocked:
            self._unblock(worker)

    def _block(self, worker: str, request: Request) -> None:
        if worker not in self._blocked:
            shape = self._shape(request)
            arrival = self._arrival[worker]
            self._blocked[worker] = shape, arrival
            insort(self._blocked.queues.setdefault(shape, []), (arrival, worker))

    def _unblock(self, worker: str) -> None:
        shape, arrival = self._blocked.pop(worker)
        queues = self._blocked.queues
        queue = queues[shape]
        del queue[bisect_left(queue, (arrival, worker))]
        if not queue:
            del queues[shape]

    def _shape(self, request: Request) -> _Shape:
        """All ``_consider_one`` reads of a request but its name: a worker taking a new
        claim only is seated by ``best_pool`` (role, memory); a joiner's owner counts
        under owner affinity (``best_claim``)."""
        ranked = self.policy.owner_affinity and not self._new_claim_only(request)
        return request.role, request.memory, request.exclusive, request.owner if ranked else ""

    @staticmethod
    def _unplan(plan: Fleet, worker: str) -> None:
        claim = plan.claim_of(worker)
        if claim is not None:
            plan.unbook(worker)
            if plan.workers_on(claim) == 0:
                plan.remove_claim(claim)

    def _consider(self, workers: Iterable[str]) -> None:
        """Each waiting worker, oldest first: counted on a node coming, or one asked for."""
        for worker in sorted(workers, key=self._arrival.__getitem__):
            if self.fleet.claim_of(worker) is None and worker not in self._counted:
                self._consider_one(worker, self._requests[worker])

    def _consider_one(self, worker: str, request: Request) -> None:
        """A waiting worker counted on nothing: counted on a node coming, or one asked for."""
        alone = self._new_claim_only(request)
        for coming in self._coming:
            # Spreading needs memory <= free devices x their memory (NodeOffer's rule):
            # a plan without that room is passed over without a decision.
            if alone and coming.plan.free_devices(coming.node.name) * \
                    coming.node.device_memory < request.memory:
                continue
            if self._plan_seats(coming.plan, request):
                self._count_on(coming, worker)
                return
        self._ask(worker, request)

    def _ask(self, worker: str, request: Request) -> None:
        blocked = False
        for index, group in enumerate(self.groups):
            if not self._template_fits(index, request):
                continue
            if self._count[index] >= group.max:
                blocked = True
                continue
            self._count[index] += 1
            self._serial[index] += 1
            node = group.node(self._serial[index])
            coming = _Coming(index, node, self.now + group.boot)
            self._coming.append(coming)
            self._coming_by_name[node.name] = coming
            heappush(self._due, (coming.ready, next(self._seq), _UP, node.name, 0))
            self._changes.append(NodeAsked(self.now, group.name, node.name, worker,
                                           coming.ready))
            if not self._plan_seats(coming.plan, request):  # pragma: no cover - the template fits
                raise AssertionError(f"{node.name} cannot seat {worker}")
            self._count_on(coming, worker)
            return
        if blocked:
            self._block(worker, request)

    def _count_on(self, coming: _Coming, worker: str) -> None:
        coming.workers[worker] = None
        self._counted[worker] = coming
        if worker in self._blocked:
            self._unblock(worker)

    def _new_claim_only(self, request: Request) -> bool:
        if request.exclusive:
            return True
        if self._spread:
            grows = self._grows.get((request.role, request.memory))
            if grows is None:
                grows = self._grows[request.role, request.memory] = any(
                    self._template_fits(index, request) for index in range(len(self.groups)))
            return grows
        return False

    def _plan_seats(self, plan: Fleet, request: Request) -> bool:
        """Seat ``request`` on the plan by the simulation's steps; whether it could be.

        A worker that takes a new claim only gets an unallocated one: no worker joins
        such a claim on a plan (an exclusive worker's, by the rule; under spread every
        worker a plan seats takes a new claim, since one no template fits cannot fit a
        plan's claims either), and unallocated it reserves the same devices and pod slot
        for less bookkeeping than an allocated one with seats to file.
        """
        alone = self._new_claim_only(request)
        for step in ALONE if alone else steps_for(self.policy, request):
            if step is Step.NEW_CLAIM:
                pool = best_pool(request, plan)
                if pool is not None:
                    node, devices, _ = pool
                    plan.cut(f"plan-{next(self._plan_names)}", node, devices, request,
                             allocated=not alone)
                    return True
            else:
                claim = best_claim(request, plan, self.policy.owner_affinity)
                if claim is not None:
                    plan.book(claim, request)
                    return True
        return False

    def _template_fits(self, index: int, request: Request) -> bool:
        """Whether an empty node of the group would seat the worker (once per role, memory)."""
        key = (index, request.role, request.memory)
        fits = self._fits.get(key)
        if fits is None:
            probe = Request("probe", request.role, request.memory)
            fits = self._fits[key] = best_pool(probe, Fleet((self.groups[index].template,))
                                               ) is not None
        return fits

    def _node_up(self, coming: _Coming) -> None:
        self._coming.remove(coming)
        counted = list(coming.workers)
        for worker in counted:
            del self._counted[worker]
        name = coming.node.name
        self._group_of[name] = coming.group
        placed = super().add_node(coming.node)
        self._seated(placed)
        self._changes.append(NodeUp(self.now, self.groups[coming.group].name, coming.node,
                                    tuple(placed)))
        self._maybe_idle(name)
        for idle, token in self._floor.pop(coming.group, []):  # above the floor again
            if self._idle.get(idle) == token:
                heappush(self._due, (self.now, next(self._seq), _DOWN, idle, token))
        self._consider(worker for worker in counted if worker in self._requests)

    def _maybe_idle(self, node: str) -> None:
        if node in self._group_of and node not in self._idle:
            found = self.fleet.node(node)
            if found is not None and self.fleet.free_devices(node) == found.devices:
                self._went_idle(node)

    def _went_idle(self, node: str) -> None:
        token = next(self._seq)
        self._idle[node] = token
        group = self.groups[self._group_of[node]]
        heappush(self._due, (self.now + group.idle, token, _DOWN, node, token))

    def _remove_idle(self, name: str) -> None:
        index = self._group_of[name]
        up = self._count[index] - sum(1 for coming in self._coming if coming.group == index)
        if up <= self.groups[index].min:
            # At its floor it stays; due again as soon as another node of its group is up
            # (unless it has held a claim since: then its idle clock started again).
            self._floor.setdefault(index, []).append((name, self._idle[name]))
            return
        del self._idle[name]
        node = self.fleet.remove_node(name)
        del self._group_of[name]
        self._count[index] -= 1
        self._changes.append(NodeDown(self.now, self.groups[index].name, node))
        # A group with room again: the workers it was full for are considered again.
        self._reconsider_blocked()

    def _reconsider_blocked(self) -> None:
        """``self._consider(list(self._blocked))``, the same changes for less.

        A blocked worker considered again is counted on a node (a change: a plan, the
        nodes coming or a group's count) or stays blocked, changing nothing, and which
        is decided by its shape (``_shape``) and that state alone. So once one stays
        blocked, the younger of its shape would too until something changes: they are
        passed over, and each shape's next after the change is considered in its turn.
        """
        requests, blocked = self._requests, self._blocked
        queues = blocked.queues
        # Each shape's next to consider, oldest first; one entry a shape, arrivals unique.
        heap = [(queue[0], shape) for shape, queue in queues.items()]
        heapify(heap)
        asleep: list[_Shape] = []  # stayed blocked since the last change
        while heap:
            (arrival, worker), shape = heappop(heap)
            if self.fleet.claim_of(worker) is not None or worker in self._counted:
                # Never so for a blocked worker; passed over as ``_consider`` would.
                self._wake(heap, shape, arrival)
                continue
            self._consider_one(worker, requests[worker])
            asleep.append(shape)
            if worker not in blocked:  # counted on a node: any shape may fare otherwise now
                for each in asleep:
                    self._wake(heap, each, arrival)
                asleep.clear()

    def _wake(self, heap: list[tuple[tuple[int, str], _Shape]], shape: _Shape,
              after: int) -> None:
        """Queue ``shape``'s oldest blocked worker that arrived after ``after``, if any."""
        queue = self._blocked.queues.get(shape)
        if queue is not None:
            at = bisect_right(queue, after, key=_arrival_of)
            if at < len(queue):
                heappush(heap, (queue[at], shape))
