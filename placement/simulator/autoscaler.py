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
    every group that would seat it    it waits (blocked), and is considered
    is at ``max``                     again when one of them has a node fewer
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

An exclusive worker, and one naming its device count, takes a new claim
only under either strategy; a template seats the latter when it has that many
devices of at least its share (``best_pool``'s rule).

Waiting workers are considered oldest first. A waiting worker some group
could seat is waiting for capacity, never "NoCapacity", and its reason says
which node is on its way for it, or that the groups are at their ``max``.
When a removal has the blocked considered again, a blocked worker whose like
(same role, memory, exclusive, devices named, and owner where it counts: its ``Shape``)
stayed blocked with nothing changed since is passed over: it would stay
blocked too (``_reconsider_blocked``), so a removal costs the kinds of worker
blocked, not how many.

*Would seat* is the decision's own answer, under the run's policy: a node
on its way carries a plan, an empty copy of it with the workers counted on
it seated by the same steps the simulation takes, so a node is asked for
only when the ones coming cannot take the worker. A counted worker seated
elsewhere, or leaving, is taken off its plan.

The clock: ``advance(now)`` plays everything due at or before ``now`` in
time order (ties in the order they were scheduled), before the event at
``now``. Two things fall due:

    event           due                          when played
    --------------  ---------------------------  --------------------------------
    ``Joins``      the node's ``boot`` after    the node comes up
                    it was asked for
    ``IdleEnds``   its group's ``idle`` after   the node goes -- if the event is
                    the node last held nothing   still its node's: taking a claim
                                                 drops it (an idle spell later
                                                 makes a new one); kept at the
                                                 floor, the same event falls due
                                                 again when a node of its group
                                                 comes up

What the autoscaler did is kept as ``Change`` values, read and cleared by
``take_changes``. Nothing is played after the last event: a node still
booting then never joins.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from heapq import heapify, heappop, heappush

from placement.decide import Reason, WaitKind, best_claim, best_pool
from placement.fleet import Fleet
from placement.model import Node, PlacementError, Request, Role
from placement.policy import ALONE, DEFAULT_POLICY, Policy, Strategy
from placement.simulator.mover import MoveSettings
from placement.simulator.nodegroups import (
    Blocked,
    Change,
    Coming,
    Due,
    GroupState,
    IdleEnds,
    Joins,
    NodeAsked,
    NodeDown,
    NodeGroup,
    NodeUp,
    Shape,
)
from placement.simulator.simulation import _NEW_CLAIM, Moved, MoveMade, Placement, Simulation

__all__ = ["AutoscaledSimulation", "Change", "NodeAsked", "NodeDown", "NodeGroup", "NodeUp"]


class AutoscaledSimulation(Simulation):
    """A ``Simulation`` whose fleet grows and shrinks by node groups (the module's rules)."""

    _more_alone = True  # under spread, a worker a template would seat waits for a node

    def __init__(self, nodes: tuple[Node, ...] = (), groups: Sequence[NodeGroup] = (), *,
                 deferred_allocation: bool = False, policy: Policy = DEFAULT_POLICY,
                 moves: MoveSettings | None = None) -> None:
        if len({group.name for group in groups}) < len(groups):
            raise PlacementError("node group names must be unique")
        self.groups = tuple(groups)
        self._states = tuple(GroupState(group, up=group.min, serial=group.min)
                             for group in self.groups)
        start = [(state, state.spec.node(number)) for state in self._states
                 for number in range(1, state.spec.min + 1)]
        names = {node.name for node in nodes}
        for _, node in start:
            if node.name in names:
                raise PlacementError(f"node {node.name} is a node group's name for its nodes")
        super().__init__((*nodes, *(node for _, node in start)),
                         deferred_allocation=deferred_allocation, policy=policy, moves=moves)
        self.now = 0.0
        self.started = tuple(node for _, node in start)  # after the fixed ones
        self.started_groups = tuple(state.spec.name for state, _ in start)
        self._spread = policy.strategy is Strategy.SPREAD
        self._grows: dict[tuple[Role, int], bool] = {}  # some group's template seats it
        self._group_of = {node.name: state for state, node in start}  # its nodes in the fleet
        self._coming: list[Coming] = []  # in the order asked for
        self._counted: dict[str, Coming] = {}  # waiting worker -> the node counted on
        self._blocked = Blocked()
        self._idle: dict[str, IdleEnds] = {}  # group node holding nothing -> its removal
        self._due: list[Due] = []
        self._seq = itertools.count()
        self._plan_names = itertools.count(1)
        self._changes: list[Change] = []
        for _, node in start:
            self._went_idle(node.name)

    # ------------------------------------------------------------------ clock

    def advance(self, now: float) -> None:
        """Play what is due at or before ``now`` (nodes joining, idle nodes going)."""
        if now < self.now:
            raise PlacementError(f"time goes back: {now} is before {self.now}")
        due, mover = self._due, self.mover
        if mover is not None:
            self._settle()
        while True:
            # The autoscaler's events and the moves' checks, in time order (its first on a tie).
            moves_at = mover.next_due() if mover is not None else None
            if due and due[0].at <= now and (moves_at is None or due[0].at <= moves_at):
                at, _, event = heappop(due)
                self.now = at
                if isinstance(event, Joins):
                    self._node_up(event.coming)
                elif self._idle.get(event.node) is event:
                    self._remove_idle(event)
                if mover is not None:
                    self._settle()
            elif moves_at is not None and moves_at <= now:
                self.now = max(self.now, moves_at)
                self._play_moves()
            else:
                break
        self.now = now

    def take_changes(self) -> list[Change]:
        """What the autoscaler did since the last call, in order."""
        changes, self._changes = self._changes, []
        return changes

    def group_of(self, node: str) -> str | None:
        """The group a node present in the fleet belongs to; None for a fixed node."""
        state = self._group_of.get(node)
        return None if state is None else state.spec.name

    def coming_for(self, worker: str) -> NodeAsked | None:
        """The node on its way that ``worker`` is counted on, if any."""
        coming = self._counted.get(worker)
        if coming is None:
            return None
        return NodeAsked(self.now, coming.group.spec.name, coming.node.name, worker,
                         coming.ready)

    def _waiting_reason(self, request: Request) -> Reason:
        """A worker some group could seat waits for capacity: which node is on its way for
        it, or that the groups are at their max (``state`` reads this)."""
        fitting = [state.spec for state in self._states if self._template_fits(state, request)]
        if not fitting:
            return super()._waiting_reason(request)
        join = (best_claim(request, self.fleet, self.policy.owner_affinity)
                if self._spread and request.joins else None)
        if join is not None:  # explain() knows nothing of the rule that kept it out
            detail = (f"no free devices for it, and under spread it joins no claim (it "
                      f"could join {join}) while a node group can add a node for it")
        else:  # only here is explain()'s detail read: a waiting arrival mostly could join
            detail = super()._waiting_reason(request).detail
        coming = self._counted.get(request.name)
        if coming is not None:
            note = f"node {coming.node.name} of group {coming.group.spec.name} is on its way"
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
        if worker in self._counted or worker in self._blocked.workers:
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
        state = self._group_of.pop(name, None)
        self._seated(m.placed for m in moved if m.placed is not None)
        waiting = [m.worker for m in moved if m.placed is None]
        if state is not None:
            self._idle.pop(name, None)
            state.up -= 1
            waiting += self._blocked.workers  # a group with room again
        self._consider(waiting)
        # Their reasons as a waiting worker's here read: with the node on its way, if any.
        return [dataclasses.replace(m, reason=self.state(m.worker).reason)
                if m.placed is None else m for m in moved]

    # --------------------------------------------------------------- internal

    def _moved(self, made: MoveMade) -> None:
        self._seated((made.placed, *made.retried))
        if made.released and made.node in self._group_of:
            self._maybe_idle(made.node)

    def _removable(self, node: str) -> bool:
        return node in self._group_of

    def _seated(self, placed: Iterable[Placement]) -> None:
        counted, blocked, idle = self._counted, self._blocked.workers, self._idle
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
        if worker in self._blocked.workers:
            self._blocked.remove(worker)

    def _shape(self, request: Request) -> Shape:
        """All ``_consider_one`` reads of a request but its name: a worker taking a new
        claim only is seated by ``best_pool`` (role, memory, devices); a joiner's owner
        counts (``best_claim`` ranks claims by it: owner affinity, its share of turns)."""
        ranked = not self._new_claim_only(request)
        return (request.role, request.memory, request.exclusive,
                request.owner if ranked else "", request.devices)

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
            # Spreading needs memory <= free devices x their memory (offer_of's rule):
            # a plan without that room is passed over without a decision.
            if alone and coming.plan.free_devices(coming.node.name) * \
                    coming.node.device_memory < request.memory:
                continue
            if self._plan_seats(coming.plan, request):
                self._count_on(coming, worker)
                return
        self._ask(worker, request)

    def _ask(self, worker: str, request: Request) -> None:
        """A node of the first group that would seat the worker and has room under its max;
        every such group full: the worker is blocked."""
        blocked = False
        for state in self._states:
            if not self._template_fits(state, request):
                continue
            if state.full:
                blocked = True
                continue
            group = state.spec
            state.coming += 1
            state.serial += 1
            coming = Coming(state, group.node(state.serial), self.now + group.boot)
            self._coming.append(coming)
            self._schedule(coming.ready, Joins(coming))
            self._changes.append(NodeAsked(self.now, group.name, coming.node.name, worker,
                                           coming.ready))
            if not self._plan_seats(coming.plan, request):  # pragma: no cover - the template fits
                raise AssertionError(f"{coming.node.name} cannot seat {worker}")
            self._count_on(coming, worker)
            return
        if blocked and worker not in self._blocked.workers:
            self._blocked.add(worker, self._shape(request), self._arrival[worker])

    def _count_on(self, coming: Coming, worker: str) -> None:
        coming.workers[worker] = None
        self._counted[worker] = coming
        if worker in self._blocked.workers:
            self._blocked.remove(worker)

    def _new_claim_only(self, request: Request) -> bool:
        if request.exclusive or request.devices is not None:
            return True
        if self._spread:
            grows = self._grows.get((request.role, request.memory))
            if grows is None:
                grows = self._grows[request.role, request.memory] = any(
                    self._template_fits(state, request) for state in self._states)
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
        for step in ALONE if alone else self._steps:
            if step is _NEW_CLAIM:
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

    @staticmethod
    def _template_fits(state: GroupState, request: Request) -> bool:
        """Whether an empty node of the group would seat the worker (once per role, memory,
        devices named)."""
        key = (request.role, request.memory, request.devices)
        fits = state.fits.get(key)
        if fits is None:
            probe = Request("probe", request.role, request.memory, devices=request.devices)
            fits = state.fits[key] = best_pool(probe, Fleet((state.spec.template,))) is not None
        return fits

    def _schedule(self, at: float, event: Joins | IdleEnds) -> None:
        heappush(self._due, Due(at, next(self._seq), event))

    def _node_up(self, coming: Coming) -> None:
        self._coming.remove(coming)
        counted = list(coming.workers)
        for worker in counted:
            del self._counted[worker]
        state = coming.group
        state.coming -= 1
        state.up += 1
        name = coming.node.name
        self._group_of[name] = state
        placed = super().add_node(coming.node)
        self._seated(placed)
        self._changes.append(NodeUp(self.now, state.spec.name, coming.node, tuple(placed)))
        self._maybe_idle(name)
        kept, state.kept = state.kept, []  # above the floor again
        for idle in kept:
            if self._idle.get(idle.node) is idle:  # not held a claim since
                self._schedule(self.now, idle)
        self._consider(worker for worker in counted if worker in self._requests)

    def _maybe_idle(self, node: str) -> None:
        if node in self._group_of and node not in self._idle:
            found = self.fleet.node(node)
            if found is not None and self.fleet.free_devices(node) == found.devices:
                self._went_idle(node)

    def _went_idle(self, node: str) -> None:
        state = self._group_of[node]
        idle = self._idle[node] = IdleEnds(node, state)
        self._schedule(self.now + state.spec.idle, idle)

    def _remove_idle(self, idle: IdleEnds) -> None:
        state = idle.group
        if state.up <= state.spec.min:
            # At its floor it stays; due again as soon as another node of its group is up
            # (unless it has held a claim since: then its idle clock started again).
            state.kept.append(idle)
            return
        del self._idle[idle.node]
        node = self.fleet.remove_node(idle.node)
        del self._group_of[idle.node]
        state.up -= 1
        self._changes.append(NodeDown(self.now, state.spec.name, node))
        # A group with room again: the workers it was full for are considered again.
        self._reconsider_blocked()

    def _reconsider_blocked(self) -> None:
        """``self._consider(list(self._blocked.workers))``, the same changes for less.

        A blocked worker considered again is counted on a node (a change: a plan, the
        nodes coming or a group's count) or stays blocked, changing nothing, and which
        is decided by its shape (``_shape``) and that state alone. So once one stays
        blocked, the younger of its shape would too until something changes: they are
        passed over, and each shape's next after the change is considered in its turn.
        """
        requests, blocked = self._requests, self._blocked
        # Each shape's next to consider, oldest first; one entry a shape, arrivals unique.
        heap = [(queue[0], shape) for shape, queue in blocked.queues.items()]
        heapify(heap)
        asleep: list[Shape] = []  # stayed blocked since the last change

        def wake(shape: Shape, after: int) -> None:
            following = blocked.after(shape, after)
            if following is not None:
                heappush(heap, (following, shape))

        while heap:
            (arrival, worker), shape = heappop(heap)
            if self.fleet.claim_of(worker) is not None or worker in self._counted:
                # Never so for a blocked worker; passed over as ``_consider`` would.
                wake(shape, arrival)
                continue
            self._consider_one(worker, requests[worker])
            asleep.append(shape)
            if worker not in blocked.workers:  # counted: any shape may fare otherwise now
                for each in asleep:
                    wake(each, arrival)
                asleep.clear()
