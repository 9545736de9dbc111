"""The simulation's moves: ``placement.rebalance``'s rule played on the scenario's clock.

What this keeps, and when it acts:

    record              kept from                         read by
    ------------------  --------------------------------  -------------------------------
    free since          every node whose books changed    spread: a newcomer's devices
    (``FreeSince``)     (``TrackedFleet``), settled at    free long enough
                        the time of the change
    alone since         the same                          binpack: a node held by one
    (``AloneSince``)                                      worker long enough
    sharing, by shape   every claim whose books changed:  spread's candidates (the
                        its workers while it has two or   movable ones), and the
                        more, allocated                   stranded devices measured
    moves per worker    each move made                    the move limit

A check is due when a record says a move may have become possible: a level
of free devices (or a node alone) turning ``after`` seconds old, at once
when a claim becomes shared while devices have been free that long, and
(binpack) after a change on another node while a lone node that was due
found no seat elsewhere -- at most once per ``after``. A due
check asks the rule for one move at a time until it gives none; the
simulation carries each out (``Simulation._carry_out``) and its changes are
settled before the next question.

*Stranded* devices, measured when asked (``measure``): at each moment, the
free devices on nodes where a worker that shares a claim could cut a claim
of its own as a newcomer, never more than the workers sharing beyond one per
claim (each would take at least one device). Their integral over the run is
the stranded device-seconds ``compare`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from heapq import heappop, heappush

from placement.fleet import Fleet
from placement.model import Node, Request, devices_for
from placement.policy import Policy, Strategy
from placement.rebalance import (
    AloneSince,
    FreeSince,
    Move,
    MoveLimit,
    Shape,
    pack_move,
    spread_move,
)

__all__ = ["MOVE_LIMIT", "MoveSettings", "Mover", "TrackedFleet"]

MOVE_LIMIT = MoveLimit()  # the controller's defaults: 3 moves in 30 minutes


@dataclass(frozen=True, slots=True)
class MoveSettings:
    """``after``: seconds devices stay free (or a node alone) before a move; 0: off."""

    after: float
    limit: MoveLimit = MOVE_LIMIT
    measure: bool = False  # integrate the stranded devices over the run


class TrackedFleet(Fleet):
    """A ``Fleet`` that remembers which nodes and claims each change touched."""

    __slots__ = ("gone", "touched_claims", "touched_nodes")

    def __init__(self, nodes: tuple[Node, ...] = ()) -> None:
        self.touched_nodes: set[str] = set()
        self.touched_claims: set[str] = set()
        self.gone: set[str] = set()  # nodes removed since the changes were last taken
        super().__init__(nodes)

    def add_node(self, node: Node) -> None:
        super().add_node(node)
        self.touched_nodes.add(node.name)

    def remove_node(self, name: str) -> Node:
        node = super().remove_node(name)
        self.gone.add(name)
        return node

    def cut(self, name: str, node: str, devices: int, request: Request, *,
            allocated: bool = True, device_memory: int = 0) -> None:
        super().cut(name, node, devices, request, allocated=allocated,
                    device_memory=device_memory)
        self.touched_nodes.add(node)
        self.touched_claims.add(name)

    def book(self, claim: str, request: Request, *, observed: bool = False) -> None:
        super().book(claim, request, observed=observed)
        self.touched_nodes.add(self._claims[claim].node)  # booked: the claim is there
        self.touched_claims.add(claim)

    def unbook(self, worker: str) -> str:
        claim = super().unbook(worker)
        self.touched_nodes.add(self._claims[claim].node)  # unbooking leaves the claim
        self.touched_claims.add(claim)
        return claim

    def remove_claim(self, claim: str) -> None:
        node = self.claim_node(claim)
        super().remove_claim(claim)
        self.touched_nodes.add(node)
        self.touched_claims.add(claim)

    def allocate(self, claim: str, *, node: str | None = None) -> None:
        super().allocate(claim, node=node)
        self.touched_nodes.add(self.claim_node(claim))
        self.touched_claims.add(claim)

    def sharing(self, claim: str) -> tuple[str, ...]:
        """The workers of an allocated claim of two or more; () for any other claim."""
        row = self._claims.get(claim)
        if row is None or not row.allocated or len(row.bookings) < 2:
            return ()
        return tuple(row.bookings)


class Mover:
    """The records and the due checks of one simulation's moves (the module's rules)."""

    def __init__(self, settings: MoveSettings, policy: Policy) -> None:
        self.settings = settings
        self.spread = policy.strategy is Strategy.SPREAD
        self.free = FreeSince()
        self.alone = AloneSince()
        self.by_shape: dict[Shape, dict[str, None]] = {}  # movable sharing workers
        self.shapes: dict[Shape, int] = {}  # every sharing worker's shape, and how many
        self._shape_of: dict[str, Shape] = {}
        self._on_claim: dict[str, tuple[str, ...]] = {}  # shared claim -> its workers
        self.moved: dict[str, list[float]] = {}  # worker -> when it moved
        self._due: list[float] = []
        self._stuck: set[str] = set()  # binpack: lone nodes due that found no seat elsewhere
        self._packed_at = float("-inf")  # binpack: the last check
        self.stranded_seconds = 0.0  # device-seconds, when measured
        self._stranded = 0  # devices stranded since ``_stranded_at``
        self._stranded_at = 0.0

    # ---------------------------------------------------------------- records

    def settle(self, fleet: TrackedFleet, requests: dict[str, Request], now: float) -> None:
        """Take in what changed on the fleet since the last call, as of ``now``."""
        nodes, claims, gone = fleet.touched_nodes, fleet.touched_claims, fleet.gone
        if not nodes and not claims and not gone:
            return
        for node in gone:
            self.free.forget(node)
            self.alone.observe(node, 0, now)
        gone.clear()
        after = self.settings.after
        due = self._due if after > 0 else []  # measured only: no checks
        # Spread reads the free devices, binpack the lone nodes; the measure the free ones.
        free = self.free if self.spread or self.settings.measure else None
        alone = None if self.spread else self.alone
        for node in nodes:
            if fleet.node(node) is None:  # changed, then removed: taken above
                continue
            rose = free is not None and free.observe(node, fleet.free_devices(node), now)
            if rose and self.spread:
                heappush(due, now + after)
            if alone is not None and alone.observe(node, fleet.workers_on_node(node), now):
                heappush(due, now + after)
        shared_now = False
        if self.spread or self.settings.measure:  # binpack reads no claim's sharing
            on_claim, sharing = self._on_claim, fleet.sharing
            for claim in claims:
                # Most changes leave a claim of one worker as it was: nothing to refile.
                workers = sharing(claim)
                if workers or claim in on_claim:
                    shared_now |= self._refile(requests, claim, workers)
        if shared_now and after > 0 and self.spread:
            oldest = self.free.oldest()
            if oldest is not None and oldest <= now - after:
                heappush(self._due, now)
        if self._stuck and not self.spread and nodes - self._stuck:
            # A lone worker found no seat elsewhere when it was due: a change on another
            # node may have made one. Looked at again, at most once per ``after``.
            heappush(self._due, max(now, self._packed_at + after))
            self._stuck = set()
        nodes.clear()
        claims.clear()
        if self.settings.measure:
            self._measure(fleet, requests, now)

    def _refile(self, requests: dict[str, Request], claim: str,
                workers: tuple[str, ...]) -> bool:
        """File the claim's workers (``workers``: those sharing it now) as sharing or not;
        True when it became shared."""
        before = self._on_claim.pop(claim, ())
        if before == workers:  # most changes: a claim of one worker, before and after
            if workers:
                self._on_claim[claim] = workers
            return False
        shapes, movable = self.shapes, self.by_shape
        for worker in before:
            if worker not in workers:
                shape = self._shape_of.pop(worker)
                shapes[shape] -= 1
                if not shapes[shape]:
                    del shapes[shape]
                bucket = movable.get(shape)
                if bucket is not None and worker in bucket:
                    del bucket[worker]
                    if not bucket:
                        del movable[shape]
        for worker in workers:
            if worker not in before:
                request = requests[worker]
                shape = self._shape_of[worker] = (request.role, request.memory)
                shapes[shape] = shapes.get(shape, 0) + 1
                if request.movable:
                    movable.setdefault(shape, {})[worker] = None
        if workers:
            self._on_claim[claim] = workers
        return bool(workers) and not before

    def forget(self, worker: str) -> None:
        """The worker left: its moves no longer count."""
        self.moved.pop(worker, None)

    # ---------------------------------------------------------------- checks

    def next_due(self) -> float | None:
        return self._due[0] if self._due else None

    def pop_due(self, now: float) -> bool:
        """Drop every check due at or before ``now``; True when there was one."""
        due, found = self._due, False
        while due and due[0] <= now:
            heappop(due)
            found = True
        return found

    def next_move(self, fleet: Fleet, requests: dict[str, Request], policy: Policy,
                  now: float, age: dict[str, int],
                  removable: Callable[[str], bool]) -> Move | None:
        """The rule's next move now; schedules the next check when it gives none."""
        settings = self.settings
        limit, moved = settings.limit, self.moved

        def may_move(worker: str) -> bool:
            times = moved.get(worker)
            return times is None or limit.allows(times, now)

        if policy.strategy is Strategy.SPREAD:
            found = spread_move(fleet, self.by_shape, requests, self.free, now=now,
                                after=settings.after, may_move=may_move, age=age.__getitem__)
        else:
            self._packed_at = now
            found = pack_move(fleet, self.alone, requests, policy, now=now,
                              after=settings.after, removable=removable, may_move=may_move)
            if not isinstance(found, Move):
                self._stuck = {node for node, since in self.alone.nodes()
                               if since <= now - settings.after and removable(node)}
        if isinstance(found, Move):
            moved.setdefault(found.worker, []).append(now)
            return found
        if found is not None and found > now:
            heappush(self._due, found)
        return None

    # ------------------------------------------------------------- stranded

    def _measure(self, fleet: Fleet, requests: dict[str, Request], now: float) -> None:
        self.stranded_seconds += self._stranded * (now - self._stranded_at)
        self._stranded_at = now
        extra = sum(len(w) - 1 for w in self._on_claim.values())
        if not extra:
            self._stranded = 0
            return
        shapes = list(self.shapes)
        usable = 0
        for node_name, free in self.free.free_nodes():
            node = fleet.node(node_name)
            if node is None:
                continue
            if any(_fits_new(node, free, role, memory) for role, memory in shapes):
                usable += free
        self._stranded = min(usable, extra)

    def close(self, now: float) -> None:
        """The run ended at ``now``: the stranded devices counted up to it."""
        if self.settings.measure:
            self.stranded_seconds += self._stranded * (now - self._stranded_at)
            self._stranded_at = now

    def sharing(self) -> Iterator[str]:
        for workers in self._on_claim.values():
            yield from workers


def _fits_new(node: Node, free: int, role: object, memory: int) -> bool:
    if node.roles and role not in node.roles:
        return False
    groups = node.device_groups or ((node.devices, node.device_memory),)
    for _, device_memory in groups:
        needed = devices_for(memory, device_memory, None)
        if needed is not None and needed <= free:
            return True
    return False
